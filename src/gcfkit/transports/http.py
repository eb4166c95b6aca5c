"""What both Streamable HTTP shells share: the header rules, one-line framing, SSE output.

:mod:`gcfkit.transports.http_client` talks to an MCP server over Streamable HTTP on behalf of
a stdio client (``gcfkit proxy --upstream URL``); :mod:`gcfkit.transports.http_server` serves
Streamable HTTP (``--http HOST:PORT``) in front of a stdio server or of another URL. Both
feed the same :class:`~gcfkit.proxy.core.ProxyCore` one message at a time; HTTP itself is
left to httpx (client side, with its SSE parser) and starlette + uvicorn (server side).

``--header`` values name environment variables as ``${NAME}``, so a token stays out of the
client's config file:

>>> parse_header("Authorization: Bearer ${TOKEN}", {"TOKEN": "s3cret"})
('Authorization', 'Bearer s3cret')
>>> one_line(b'{\\n  "id": 1\\n}\\n')
b'{   "id": 1 }\\n'
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = [
    "ACCEPT_BOTH",
    "DEFAULT_KEEPALIVE",
    "HOP_BY_HOP",
    "KEEPALIVE_COMMENT",
    "LAST_EVENT_ID",
    "MCP_PROTOCOL_VERSION",
    "MCP_SESSION_ID",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSION_META_KEY",
    "Captures",
    "forwardable",
    "is_loopback",
    "is_modern",
    "message_version",
    "one_line",
    "parse_header",
    "rebase_challenge",
    "rebase_resource_metadata",
    "rebase_url",
    "redact_url",
    "request_ids",
    "sse_event",
    "with_keepalive",
]

MCP_SESSION_ID: Final = "mcp-session-id"
MCP_PROTOCOL_VERSION: Final = "mcp-protocol-version"
LAST_EVENT_ID: Final = "last-event-id"
ACCEPT_BOTH: Final = "application/json, text/event-stream"

#: The protocol revisions without a handshake: every request carries its own ``_meta``.
MODERN_VERSIONS: Final = frozenset({"2026-07-28"})
PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"

#: Connection-scoped headers (RFC 9110 §7.6.1) and the ones a relay recomputes: never copied
#: from one HTTP hop to the next.
HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
    }
)

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VARIABLE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def parse_header(spec: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """``"Name: value"`` as (name, value), each ``${VAR}`` in the value replaced by that
    environment variable (a missing one is an error, never an empty token).

    >>> parse_header("X-Api-Key:abc", {})
    ('X-Api-Key', 'abc')
    >>> try:
    ...     parse_header("Authorization: Bearer ${NOPE}", {})
    ... except ConfigError as e:
    ...     print(e.code)
    invalid_option
    """
    name, sep, raw = spec.partition(":")
    name = name.strip()
    if not sep or not _TOKEN.fullmatch(name):
        raise ConfigError("invalid_option", f"--header {spec!r}: expected 'Name: value'")

    def variable(match: re.Match[str]) -> str:
        value = environ.get(match.group(1))
        if value is None:
            raise ConfigError(
                "invalid_option",
                f"--header {name!r}: environment variable {match.group(1)} is not set",
            )
        return value

    value = _VARIABLE.sub(variable, raw.strip())
    if any(c in value for c in "\r\n\0"):
        raise ConfigError("invalid_option", f"--header {name!r}: the value holds a line break")
    return name, value


def one_line(body: bytes) -> bytes:
    """A JSON-RPC message from an HTTP body or an SSE event as one LF-terminated line.

    A raw CR or LF can only be whitespace between JSON tokens (never inside a string), so
    turning it into a space keeps the value and every other byte; the stdio side needs one
    message per line.
    """
    body = body.rstrip(b"\r\n\t ")
    if b"\n" in body or b"\r" in body:
        body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    return body + b"\n"


def sse_event(
    data: bytes, *, event: str = "", event_id: str = "", retry: int | None = None
) -> bytes:
    """One SSE event carrying one message (``data`` holds no line break: :func:`one_line`).

    >>> sse_event(b'{"id":1}\\n', event_id="7")
    b'event: message\\nid: 7\\ndata: {"id":1}\\n\\n'
    """
    head = f"event: {event or 'message'}\n"
    if event_id:
        head += f"id: {event_id}\n"
    if retry is not None:
        head += f"retry: {retry}\n"
    return head.encode() + b"data: " + data.rstrip(b"\n") + b"\n\n"


#: Seconds an SSE stream the proxy serves may stay silent before it sends a comment, so a
#: proxy or load balancer between it and the client does not cut an idle stream.
DEFAULT_KEEPALIVE: Final = 15.0
KEEPALIVE_COMMENT: Final = b": keepalive\n\n"


async def with_keepalive(chunks: AsyncIterator[bytes], interval: float) -> AsyncIterator[bytes]:
    """``chunks`` (SSE events) as they come, and :data:`KEEPALIVE_COMMENT` whenever none
    came for ``interval`` seconds (0: never). An SSE comment is no event: clients skip it.

    The wait for the next chunk is never cancelled by the timer (that would cut the stream
    short); only closing the result stops ``chunks``.

    >>> async def slow() -> AsyncIterator[bytes]:
    ...     yield b"data: 1\\n\\n"
    ...     await asyncio.sleep(0.05)
    ...     yield b"data: 2\\n\\n"
    >>> async def collect() -> list[bytes]:
    ...     return [c async for c in with_keepalive(slow(), 0.01)]
    >>> got = asyncio.run(collect())
    >>> got[0], got[-1], KEEPALIVE_COMMENT in got
    (b'data: 1\\n\\n', b'data: 2\\n\\n', True)
    """
    source = chunks.__aiter__()
    if interval <= 0:
        async for chunk in source:
            yield chunk
        return
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(source.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield KEEPALIVE_COMMENT
                continue
            finished, pending = pending, None
            try:
                chunk = finished.result()
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        closing = getattr(source, "aclose", None)
        if closing is not None:
            await closing()


def forwardable(
    headers: Iterable[tuple[str, str]], drop: Iterable[str] = ()
) -> list[tuple[str, str]]:
    """The end-to-end headers of one hop, to send on the next (hop-by-hop ones dropped).

    >>> forwardable([("Host", "a"), ("Authorization", "Bearer t"), ("X", "1")], drop=["x"])
    [('Authorization', 'Bearer t')]
    """
    skip = HOP_BY_HOP | {d.lower() for d in drop}
    return [(k, v) for k, v in headers if k.lower() not in skip]


def message_version(msg: Any) -> str | None:
    """The protocol version a 2026-07-28-style request names in its ``_meta``, if any.

    >>> message_version({"method": "tools/list", "params": {"_meta": {
    ...     "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    '2026-07-28'
    """
    if not isinstance(msg, dict):
        return None
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def is_modern(version: str | None) -> bool:
    """Whether ``version`` is a revision without sessions (every request stands alone)."""
    return version in MODERN_VERSIONS


def request_ids(msg: Any) -> list[Any]:
    """The ids of the requests in one message or batch (the answers an HTTP exchange owes).

    >>> request_ids([{"id": 1, "method": "a"}, {"method": "n"}, {"id": 2, "result": {}}])
    [1]
    """
    items = msg if isinstance(msg, list) else [msg]
    return [
        m["id"]
        for m in items
        if isinstance(m, dict)
        and isinstance(m.get("method"), str)
        and m.get("id") is not None
        and not isinstance(m.get("id"), bool)
    ]


_LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this
    machine's loopback.

    >>> is_loopback("127.0.0.2"), is_loopback("[::1]"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redact_url(url: str) -> str:
    """``url`` as it may be shown to a client or in a log: without its query string and
    user info (either may hold a key).

    >>> redact_url("https://u:p@api.example/mcp?api_key=s3cret")
    'https://api.example/mcp?…'
    >>> redact_url("http://127.0.0.1:9/mcp")
    'http://127.0.0.1:9/mcp'
    """
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    return shown + ("?…" if parts.query else "")


# -- OAuth discovery through a gateway -----------------------------------------------------
#
# A client checks that the protected-resource metadata (RFC 9728) names the very resource it
# talks to (RFC 9728 §3.3, RFC 8707), and that resource is the gateway. So the gateway
# rebases the two URLs that name the upstream as the resource: the ``resource_metadata``
# link of a ``WWW-Authenticate`` challenge and the metadata's ``resource``. The
# authorization servers it lists stay as they are: their metadata names its own issuer,
# which the client checks too, and the client reaches them directly.


def rebase_url(url: str, upstream_origin: str, origin: str) -> str:
    """``url`` moved from ``upstream_origin`` to ``origin`` when it is at that origin (scheme
    and host compared case-insensitively); any other URL as is.

    >>> rebase_url("https://api.example/mcp", "https://api.example", "http://127.0.0.1:8765")
    'http://127.0.0.1:8765/mcp'
    >>> rebase_url("https://api.example.org/mcp", "https://api.example", "http://127.0.0.1:1")
    'https://api.example.org/mcp'
    """
    n = len(upstream_origin)
    if url[:n].lower() == upstream_origin.lower() and (len(url) == n or url[n] in "/?#"):
        return origin + url[n:]
    return url


_RESOURCE_METADATA: Final = re.compile(r'(resource_metadata\s*=\s*)"([^"]*)"', re.IGNORECASE)


def rebase_challenge(value: str, upstream_origin: str, origin: str) -> str:
    """A ``WWW-Authenticate`` value with its ``resource_metadata`` link rebased
    (:func:`rebase_url`); everything else in it byte for byte.

    >>> rebase_challenge('Bearer error="invalid_token", resource_metadata='
    ...     '"https://api.example/.well-known/oauth-protected-resource/mcp"',
    ...     "https://api.example", "http://127.0.0.1:8765")
    'Bearer error="invalid_token", resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"'
    """

    def rebased(match: re.Match[str]) -> str:
        return f'{match.group(1)}"{rebase_url(match.group(2), upstream_origin, origin)}"'

    return _RESOURCE_METADATA.sub(rebased, value)


def rebase_resource_metadata(body: bytes, upstream_origin: str, origin: str) -> bytes | None:
    """Protected-resource metadata with its ``resource`` rebased (:func:`rebase_url`), the
    other members and their order kept; None when the body is no such JSON object or its
    resource is elsewhere (then it passes as it came).

    >>> rebase_resource_metadata(b'{"resource":"https://api.example/mcp","scopes_supported":'
    ...     b'["mcp"]}', "https://api.example", "http://127.0.0.1:8765")
    b'{"resource":"http://127.0.0.1:8765/mcp","scopes_supported":["mcp"]}'
    """
    try:
        metadata = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    resource = metadata.get("resource") if isinstance(metadata, dict) else None
    if not isinstance(resource, str):
        return None
    moved = rebase_url(resource, upstream_origin, origin)
    if moved == resource:
        return None
    metadata["resource"] = moved
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class Captures:
    """The recordings of an HTTP server's traffic (``--capture-dir``), each session in its
    own directory as a stdio proxy's is: :meth:`session` opens one per session (None when
    nothing is recorded). Requests of no session (the 2026-07-28 protocol) share one,
    handed each exchange whole (:meth:`exchange`): their clients number requests alike, so
    lines of two exchanges in flight could pair a request with another one's answer.
    ``open`` makes a :class:`~gcfkit.traffic.capture.Capture`."""

    def __init__(self, open: Callable[[], Capture] | None) -> None:
        self._open = open
        self._sessionless: Capture | None = None
        self._closing: set[asyncio.Future[None]] = set()
        self._open_ones: set[Capture] = set()

    @property
    def on(self) -> bool:
        """Whether anything is recorded."""
        return self._open is not None

    def session(self) -> Capture | None:
        """A recording for a new session (:meth:`close` it when the session ends)."""
        if self._open is None:
            return None
        capture = self._open()
        self._open_ones.add(capture)
        return capture

    def exchange(self, request: bytes, response: bytes) -> None:
        """One request of no session and the line that answers it, as the server saw them."""
        if self._open is None:
            return
        if self._sessionless is None:
            self._sessionless = self.session()
        assert self._sessionless is not None
        self._sessionless.to_server(request)
        self._sessionless.from_server(response)

    def close(self, capture: Capture | None) -> None:
        """Finish ``capture`` in a thread (it writes what is queued, bounded): the event loop
        never waits for a disk."""
        if capture is None or capture not in self._open_ones:
            return
        self._open_ones.discard(capture)
        closing = asyncio.get_running_loop().run_in_executor(None, capture.close)
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Finish every recording (at shutdown); returns when they are written."""
        for capture in list(self._open_ones):
            self.close(capture)
        self._sessionless = None
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
