"""``gcfkit proxy --http HOST:PORT``: the proxy as a Streamable HTTP server.

Two shells on one starlette app, served by uvicorn:

* :func:`serve_gateway` (``--http HOST:PORT --upstream URL``): HTTP on both sides. Every
  request is relayed to the upstream with the client's own headers (``Authorization``,
  ``Mcp-Session-Id``, ``MCP-Protocol-Version``, ``Last-Event-ID``, the 2026-07-28
  ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*``), ``--header`` ones added; every answer comes
  back with the upstream's status and headers (``WWW-Authenticate`` too), its JSON body or
  each SSE event's message rewritten by the core. The gateway serves the upstream's path;
  any other path (OAuth discovery under ``/.well-known/``) is relayed untouched.
* :func:`serve_command` (``--http HOST:PORT -- COMMAND``): a stdio server behind Streamable
  HTTP at ``/mcp``. Each ``initialize`` starts a session: its own server process and its own
  core, named by the ``Mcp-Session-Id`` the proxy gives; ``DELETE`` (or an idle hour) ends it.

Which core sees a message, so that what needs a session (deltas, the client's opt-out from
``initialize``, tool schemas) follows what the request itself carries and never a guess:
the session's core when the request names a session; otherwise a core of its own for that
one request (the 2026-07-28 protocol, and servers that give no session), which starts from
the request's own ``_meta`` and holds no base for a delta.

Tool results are rewritten in a pool of worker processes
(:mod:`gcfkit.transports.offload`), as in the stdio shell: a large result holds up only
its own stream, never the event loop, and past the time budget the original goes out.
With ``--capture-dir`` each session is recorded in its own directory, as a stdio proxy's
is (:class:`~gcfkit.transports.http.Captures`).

Bound to a loopback address, the proxy refuses requests whose ``Host`` or ``Origin`` is not
a loopback name (DNS rebinding); the host must be given, so serving beyond this machine is
a decision, never a default.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..errors import ConfigError
from ..ledger import Ledger
from ..proxy.config import Codec
from ..proxy.core import ProxyConfig, ProxyCore
from .http import (
    DEFAULT_KEEPALIVE,
    MCP_SESSION_ID,
    Captures,
    forwardable,
    is_loopback,
    one_line,
    rebase_challenge,
    rebase_resource_metadata,
    rebinding_refusal,
    request_ids,
    sse_event,
    with_keepalive,
)
from .offload import Lane, Offload, server_pool, start_pool
from .relay import relay_one

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = [
    "MAX_SESSIONS",
    "build_gateway",
    "listen_socket",
    "parse_listen",
    "serve_command",
    "serve_gateway",
]

#: Sessions whose cores are kept; past that the least recently used one is forgotten (its
#: later requests then start from a fresh core, as after a restart).
MAX_SESSIONS: Final = 1024

_CONNECT_TIMEOUT: Final = 30.0
_READ_TIMEOUT: Final = 300.0
_SSE_HEADERS: Final = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def _log(text: str) -> None:
    print(f"gcfkit proxy: {text}", file=sys.stderr, flush=True)


def parse_listen(spec: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); the host is required.

    >>> parse_listen("127.0.0.1:8765"), parse_listen("[::1]:0")
    (('127.0.0.1', 8765), ('::1', 0))
    >>> try:
    ...     parse_listen(":8765")
    ... except ConfigError as e:
    ...     print(e.code)
    invalid_option
    """
    host, sep, port = spec.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            "invalid_option", f"--http {spec!r}: expected HOST:PORT (e.g. 127.0.0.1:8765)"
        )
    return host, int(port)


@dataclasses.dataclass(eq=False)
class _Peer:
    """What the gateway keeps for one session (or one request of none): its core, its
    lane in the worker pool, its recording."""

    core: ProxyCore
    lane: Lane
    capture: Capture | None = None


@dataclasses.dataclass
class _Cores:
    """The sessions (most recently used last), the worker pool that rewrites their
    results, the ledger their records go to and their recordings."""

    config: ProxyConfig
    ledger: Ledger | None
    offload: Offload
    captures: Captures
    codec: Codec | None = None
    sessions: collections.OrderedDict[str, _Peer] = dataclasses.field(
        default_factory=collections.OrderedDict
    )

    def fresh(self) -> _Peer:
        """A peer for one request of no session: a core and a lane that keep nothing."""
        return _Peer(ProxyCore(self.config, self.codec), self.offload.fresh())

    def for_session(self, session_id: str | None) -> _Peer:
        if session_id is None:
            return self.fresh()
        peer = self.sessions.get(session_id)
        if peer is None:
            # Begun before this gateway started (or forgotten): its exchanges are recorded
            # one by one, as those of no session (the ids may not be this client's alone).
            peer = self.adopt(session_id, self.fresh(), record=False)
        self.sessions.move_to_end(session_id)
        return peer

    def adopt(self, session_id: str, peer: _Peer, *, record: bool = True) -> _Peer:
        """``peer`` (made for the ``initialize`` that opened the session) is the session's;
        ``record``: in a recording of its own."""
        known = self.sessions.get(session_id)
        if known is not None and known is not peer:
            self.retire(known)  # the id names this session now
        if peer.lane.key is None:
            peer.lane = self.offload.session()
            peer.capture = self.captures.session() if record else None
        else:
            # An initialize sent in a session already (the client starts over in it): the
            # session goes on, its lane and recording too (the core's reset reaches the
            # lane's state); a new lane here would leave the old one open for good.
            for alias in [k for k, p in self.sessions.items() if p is peer and k != session_id]:
                del self.sessions[alias]
        self.sessions[session_id] = peer
        while len(self.sessions) > MAX_SESSIONS:
            _, old = self.sessions.popitem(last=False)
            self.retire(old)
        return peer

    def end(self, session_id: str) -> None:
        peer = self.sessions.pop(session_id, None)
        if peer is not None:
            self.retire(peer)

    def retire(self, peer: _Peer) -> None:
        self.flush(peer.core)
        peer.lane.close()
        self.captures.close(peer.capture)

    def flush(self, core: ProxyCore) -> None:
        if self.ledger is None:
            return
        for record in core.pop_records():
            self.ledger.append(record)


#: Where RFC 9728 puts protected-resource metadata (the resource's path follows).
_RESOURCE_METADATA_PATH: Final = "/.well-known/oauth-protected-resource"


def _origin_of(request: Request) -> str:
    """The origin the client reached this server at (scheme and ``Host``)."""
    return f"{request.url.scheme}://{request.url.netloc}"


def _message(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _to_server(core: ProxyCore, body: bytes) -> bytes:
    """What to send upstream for one client body: the body itself unless the core changed
    the message (then its compact line)."""
    line = one_line(body)
    data = b"".join(out.data for out in core.from_client(line) if out.to == "server")
    return body if data == line else data


async def _to_client(
    peer: _Peer, body: bytes, captures: Captures, sent: bytes, ids: list[Any]
) -> bytes | None:
    """The core's version of one server message (a tool result rewritten in the worker
    pool), or None when it is to pass unchanged. ``sent``: the request this stream
    answers, recorded with its answer when it belongs to no session."""
    line = one_line(body)
    core = peer.core
    if peer.capture is not None:
        peer.capture.from_server(line)
    waiting = [i for i in ids if core.is_pending(i)] if captures.on else []
    outputs = await relay_one(core, peer.lane, line)
    if peer.capture is None and any(not core.is_pending(i) for i in waiting):
        captures.exchange(sent, line)  # this line answered the request
    data = b"".join(out.data for out in outputs if out.to == "client")
    return None if data == line else data


def _response(status: int, headers: Sequence[tuple[str, str]], content: bytes) -> Response:
    response = Response(content, status_code=status)
    _add_headers(response, headers)
    return response


def _add_headers(response: Response, headers: Sequence[tuple[str, str]]) -> None:
    # Raw pairs, so repeated headers (Set-Cookie, WWW-Authenticate) all pass.
    response.raw_headers.extend(
        (k.lower().encode("latin-1"), v.encode("latin-1"))
        for k, v in headers
        if k.lower() != "content-length"
    )


def _errors(core: ProxyCore, ids: list[Any], message: str) -> bytes:
    lines = [o.data for i in ids for o in core.fail_request(i, message)]
    if not lines:
        return b""
    if len(lines) == 1:
        return lines[0]
    return b"[" + b",".join(line.rstrip(b"\n") for line in lines) + b"]\n"


# ---------------------------------------------------------------------------------------
# The gateway: HTTP on both sides
# ---------------------------------------------------------------------------------------


class _Gateway:
    def __init__(
        self,
        url: str,
        http: httpx2.AsyncClient,
        cores: _Cores,
        headers: Mapping[str, str],
        loopback: bool,
        keepalive: float,
    ) -> None:
        parts = urlsplit(url)
        self.url = url
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.path = parts.path or "/"
        self.http = http
        self.cores = cores
        self.headers = dict(headers)
        self.loopback = loopback
        self.keepalive = keepalive

    def upstream_headers(self, request: Request) -> list[tuple[str, str]]:
        own = {k.lower() for k in self.headers}
        # Origin belongs to the hop it came on (checked there); --header wins over the client.
        pairs = forwardable(request.headers.items(), drop=["origin", *own])
        return pairs + list(self.headers.items())

    async def handle(self, request: Request) -> Response:
        refusal = rebinding_refusal(request.headers, self.loopback)
        if refusal is not None:
            return Response(refusal[1], status_code=refusal[0])
        if request.url.path.rstrip("/") != self.path.rstrip("/"):
            return await self.relay_raw(request)
        if request.method == "POST":
            return await self.post(request)
        if request.method == "GET":
            return await self.get(request)
        response = await self.relay_raw(request, self.url)
        session_id = request.headers.get(MCP_SESSION_ID)
        if request.method == "DELETE" and session_id and response.status_code < 300:
            self.cores.end(session_id)
        return response

    async def open(
        self, method: str, request: Request, content: bytes | None, url: str | None = None
    ) -> httpx2.Response:
        target = url or self.url
        if url is None and request.url.query:
            target += "?" + request.url.query
        built = self.http.build_request(
            method, target, content=content, headers=self.upstream_headers(request)
        )
        return await self.http.send(built, stream=True)

    async def post(self, request: Request) -> Response:
        body = await request.body()
        msg = _message(body)
        ids = request_ids(msg)
        session_id = request.headers.get(MCP_SESSION_ID)
        peer = self.cores.for_session(session_id)
        core = peer.core
        sent = _to_server(core, body)
        if peer.capture is not None:
            peer.capture.to_server(one_line(sent))
        try:
            upstream = await self.open("POST", request, sent)
        except httpx2.HTTPError as e:
            detail = f"gcfkit proxy: MCP server at {self.url} unreachable: {type(e).__name__}"
            return Response(
                _errors(core, ids, detail), status_code=502, media_type="application/json"
            )
        given = upstream.headers.get(MCP_SESSION_ID)
        if given and isinstance(msg, dict) and msg.get("method") == "initialize":
            self.cores.adopt(given, peer)
            if peer.capture is not None:
                peer.capture.to_server(one_line(sent))
        return await self.answer(upstream, request, peer, ids, one_line(sent))

    async def get(self, request: Request) -> Response:
        peer = self.cores.for_session(request.headers.get(MCP_SESSION_ID))
        try:
            upstream = await self.open("GET", request, None)
        except httpx2.HTTPError as e:
            return Response(f"MCP server unreachable: {type(e).__name__}", status_code=502)
        return await self.answer(upstream, request, peer, [], b"")

    def public_headers(self, upstream: httpx2.Response, request: Request) -> list[tuple[str, str]]:
        """The upstream's end-to-end headers for the client, an OAuth challenge's link to the
        resource metadata moved to this gateway (see :func:`rebase_challenge`)."""
        origin = _origin_of(request)
        return [
            (k, rebase_challenge(v, self.origin, origin) if k.lower() == "www-authenticate" else v)
            for k, v in forwardable(upstream.headers.multi_items())
        ]

    async def answer(
        self,
        upstream: httpx2.Response,
        request: Request,
        peer: _Peer,
        ids: list[Any],
        sent: bytes,
    ) -> Response:
        headers = self.public_headers(upstream, request)
        core = peer.core
        ctype = upstream.headers.get("content-type", "").partition(";")[0].strip().lower()
        if ctype == "text/event-stream":
            stream = StreamingResponse(
                with_keepalive(self.events(upstream, peer, ids, sent), self.keepalive),
                status_code=upstream.status_code,
            )
            _add_headers(stream, [(k, v) for k, v in headers if k.lower() not in _SSE_HEADERS])
            _add_headers(stream, list(_SSE_HEADERS.items()))
            return stream
        try:
            body = await upstream.aread()
        except httpx2.HTTPError as e:
            body = b""
            failed = _errors(core, ids, f"MCP server dropped the connection: {type(e).__name__}")
            if failed:
                return Response(failed, status_code=502, media_type="application/json")
        finally:
            await upstream.aclose()
        if ctype == "application/json" and body:
            new = await _to_client(peer, body, self.cores.captures, sent, ids)
            self.cores.flush(core)
            if new is not None:
                body = new
        return _response(upstream.status_code, headers, body)

    async def events(
        self, upstream: httpx2.Response, peer: _Peer, ids: list[Any], sent: bytes
    ) -> AsyncIterator[bytes]:
        """The upstream's SSE stream, each message through the core, ids and retry kept."""
        core = peer.core
        resumable = False
        sent_id = ""
        try:
            async for event in httpx2.EventSource(upstream, max_event_size=None):
                event_id = event.id if event.id != sent_id else ""
                sent_id = event.id or sent_id
                resumable = resumable or bool(event.id)
                data = event.data.encode("utf-8")
                if data and event.event in ("", "message"):
                    new = await _to_client(peer, data, self.cores.captures, sent, ids)
                    self.cores.flush(core)
                    data = new if new is not None else one_line(data)
                yield sse_event(data, event=event.event, event_id=event_id, retry=event.retry)
        except httpx2.HTTPError:
            pass  # dropped: a resumable stream is resumed by the client, else answered below
        finally:
            await upstream.aclose()
        if not resumable:
            failed = _errors(core, ids, "MCP server closed the stream before answering")
            for line in failed.splitlines():
                yield sse_event(line)

    async def relay_raw(self, request: Request, url: str | None = None) -> Response:
        """Anything that is not the MCP endpoint (OAuth metadata, CORS preflights): as is."""
        target = url or self.origin + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        try:
            upstream = await self.open(request.method, request, await request.body(), target)
        except httpx2.HTTPError as e:
            return Response(f"upstream unreachable: {type(e).__name__}", status_code=502)
        try:
            body = await upstream.aread()
        except httpx2.HTTPError as e:
            return Response(f"upstream dropped the connection: {type(e).__name__}", status_code=502)
        finally:
            await upstream.aclose()
        if upstream.status_code == 200 and request.url.path.startswith(_RESOURCE_METADATA_PATH):
            body = rebase_resource_metadata(body, self.origin, _origin_of(request)) or body
        return _response(upstream.status_code, self.public_headers(upstream, request), body)


def build_gateway(
    url: str,
    config: ProxyConfig | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    ledger: Ledger | None = None,
    loopback: bool = True,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
) -> Starlette:
    """The gateway's ASGI app in front of the MCP server at ``url`` (see the module doc).
    ``capture`` opens a recording per session (``--capture-dir``); ``codec`` replaces the
    codec functions (tests: it must pickle, by reference, to reach the workers).

    >>> app = build_gateway("http://127.0.0.1:9/mcp", ProxyConfig(stats=False))
    >>> type(app).__name__
    'Starlette'
    """
    config = config or ProxyConfig()
    if config.stats and ledger is None:
        ledger = Ledger()
    offload = server_pool(config, codec, ledger.path if ledger is not None else None)
    cores = _Cores(config, ledger, offload, Captures(capture), codec)
    state: dict[str, _Gateway] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        timeout = httpx2.Timeout(_CONNECT_TIMEOUT, read=_READ_TIMEOUT)
        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            await start_pool(offload)
            state["gateway"] = _Gateway(url, http, cores, headers or {}, loopback, keepalive)
            try:
                yield
            finally:
                for session_id in list(cores.sessions):
                    cores.end(session_id)
                await offload.close()
                await cores.captures.aclose()

    async def endpoint(request: Request) -> Response:
        return await state["gateway"].handle(request)

    methods = ["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"]
    return Starlette(routes=[Route("/{path:path}", endpoint, methods=methods)], lifespan=lifespan)


async def serve_gateway(
    url: str,
    host: str,
    port: int,
    config: ProxyConfig | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    ledger: Ledger | None = None,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
) -> int:
    """Serve :func:`build_gateway` on ``host:port`` until SIGINT/SIGTERM; returns 0."""
    app = build_gateway(
        url,
        config,
        headers=headers,
        ledger=ledger,
        loopback=is_loopback(host),
        keepalive=keepalive,
        codec=codec,
        capture=capture,
    )
    return await _serve(app, host, port, urlsplit(url).path or "/")


def listen_socket(host: str, port: int) -> socket.socket:
    """The bound socket ``--http HOST:PORT`` serves on (port 0: a free one); raises
    :class:`~gcfkit.errors.ConfigError` when it cannot be bound.

    Made with ``IPPROTO_TCP`` rather than protocol 0: asyncio sets ``TCP_NODELAY`` only on
    connections accepted from such a socket, and without it every response written in more
    than one piece (headers, then each SSE event) waits on Nagle's algorithm and the peer's
    delayed ACK, some 40 ms a call.

    >>> sock = listen_socket("127.0.0.1", 0)
    >>> sock.proto == socket.IPPROTO_TCP
    True
    >>> sock.close()
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError("invalid_option", f"--http {host}:{port}: {e.strerror or e}") from e
    return sock


async def _serve(app: Any, host: str, port: int, path: str) -> int:
    import uvicorn

    sock = listen_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def announce() -> None:
        while not server.started and not server.should_exit:
            await asyncio.sleep(0.01)
        if server.started:
            _log(f"serving http://{shown}:{bound}{path}")

    announcing = asyncio.create_task(announce())
    try:
        await server.serve(sockets=[sock])
    finally:
        announcing.cancel()
        sock.close()
    return 0


async def serve_command(
    command: Sequence[str],
    host: str,
    port: int,
    config: ProxyConfig | None = None,
    *,
    ledger: Ledger | None = None,
    grace: float = 2.0,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
) -> int:
    """Serve the stdio server ``command`` over Streamable HTTP on ``host:port``."""
    from .http_command import build_command_app

    app = build_command_app(
        command,
        config,
        ledger=ledger,
        grace=grace,
        loopback=is_loopback(host),
        keepalive=keepalive,
        codec=codec,
        capture=capture,
    )
    return await _serve(app, host, port, "/mcp")
