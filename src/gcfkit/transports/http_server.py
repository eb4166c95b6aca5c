"""``gcfkit proxy --http HOST:PORT``: the proxy as a Streamable HTTP server.

Two shells on one starlette app, served by uvicorn:

* :func:`serve_gateway` (``--http HOST:PORT --upstream URL``): HTTP on both sides. Every
  request to the MCP endpoint is relayed to the upstream with the client's own headers
  (``Authorization``, ``Origin``, ``Mcp-Session-Id``, ``MCP-Protocol-Version``,
  ``Last-Event-ID``, the 2026-07-28 ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*``), ``--header``
  ones added; every answer comes back with the upstream's status and headers
  (``WWW-Authenticate`` too), its JSON body or each SSE event's message rewritten by the
  core. The gateway serves the upstream's path and relays nothing else but OAuth discovery
  (``GET /.well-known/oauth-*``, without the ``--header`` credential); any other path is 404.
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

On every bind, :mod:`gcfkit.transports.http_guard` checks ``Host`` and ``Origin`` (DNS
rebinding, pages elsewhere), the client token when there is one, and the body's size; the
host must be given, so serving beyond this machine is a decision, never a default, and a
gateway bound beyond loopback lends its ``--header`` credential only behind a client token
(:func:`check_lending`). Sessions, bytes remembered and slow clients are bounded by
:class:`~gcfkit.transports.http_limits.HttpLimits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

from ..errors import ConfigError
from ..ledger import Ledger
from ..proxy.config import Codec
from ..proxy.core import ProxyConfig, ProxyCore
from .health import health_routes, metered, probed, upstream_ready
from .http import (
    DEFAULT_KEEPALIVE,
    MCP_SESSION_ID,
    Captures,
    forwardable,
    is_loopback,
    one_line,
    rebase_challenge,
    rebase_resource_metadata,
    redact_url,
    request_ids,
    sse_event,
    with_keepalive,
)
from .http_guard import Guard, guarded_app
from .http_limits import DEFAULT_LIMITS, HttpLimits, Refusals
from .http_listen import listen_socket, raise_descriptor_limit, uvicorn_config
from .http_sessions import SessionTable
from .offload import Lane, Offload
from .pools import server_pool, start_pool
from .relay import relay_one
from .state import (
    LocalState,
    SessionState,
    caller_key,
    keep_named,
    open_state,
    start_from_named,
)

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = [
    "build_gateway",
    "check_lending",
    "listen_socket",
    "parse_listen",
    "serve_command",
    "serve_gateway",
]

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
    session: str | None = None
    #: The stamp of the session's copy in the shared store this replica last read or wrote,
    #: and the lane's :attr:`~gcfkit.transports.offload.Lane.changes` and the client's
    #: declared name then.
    stamp: str | None = None
    saved: int = 0
    client: str = ""
    #: For a request of no session: whose it is (:func:`~gcfkit.transports.state.caller_key`)
    #: and the handle of the kept result its lane started from.
    caller: str | None = None
    recalled: str | None = None


class _Peers:
    """How the gateway maps a client's session to the upstream's: it does not translate
    one. The ``Mcp-Session-Id`` the upstream gives in its answer to ``initialize`` reaches
    the client unchanged and comes back on every request; the gateway keys what it keeps
    for the session (a :class:`_Peer`: core, lane, recording) by that id, in a
    :class:`~gcfkit.transports.http_sessions.SessionTable` (bounded in number, in bytes
    remembered, and expired when idle). Also held: the worker pool that rewrites the
    sessions' results, the ledger their records go to and their recordings."""

    def __init__(
        self,
        config: ProxyConfig,
        ledger: Ledger | None,
        offload: Offload,
        captures: Captures,
        codec: Codec | None = None,
        limits: HttpLimits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        state: SessionState | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.state: SessionState = state or LocalState()
        self.offload = offload
        self.captures = captures
        self.codec = codec
        self.sessions: SessionTable[_Peer] = SessionTable(
            limits.max_sessions,
            limits.remembered_bytes,
            limits.idle_timeout,
            clock=clock,
        )

    def fresh(self) -> _Peer:
        """A peer for one request of no session: a core and a lane that keep nothing."""
        return _Peer(ProxyCore(self.config, self.codec), self.offload.fresh())

    def for_session(self, session_id: str | None) -> tuple[_Peer, bool]:
        """The session's peer, and whether it is known. An unknown session gets a fresh peer,
        kept only if the upstream accepts the session (:meth:`vouched`): a made-up id
        creates nothing."""
        if session_id is None:
            return self.fresh(), True
        peer = self.sessions.get(session_id)
        if peer is None:
            return self.fresh(), False
        return peer, True

    def vouched(self, session_id: str, peer: _Peer) -> None:
        """The upstream answered a request of a session this gateway did not know (begun
        before it started, or forgotten): keep it. Its exchanges are recorded one by one, as
        those of no session (the ids may not be this client's alone). Only while there is
        room: a session the gateway did not see begin never evicts one it did (an upstream
        that accepts any id would otherwise let made-up ids push real sessions out)."""
        if len(self.sessions) < self.sessions.max_entries:
            self.adopt(session_id, peer, record=False)

    def adopt(self, session_id: str, peer: _Peer, *, record: bool = True) -> _Peer:
        """``peer`` (made for the ``initialize`` that opened the session) is the session's;
        ``record``: in a recording of its own."""
        if peer.lane.key is None:
            peer.lane = self.offload.session()
            peer.capture = self.captures.session() if record else None
        else:
            # An initialize sent in a session already (the client starts over in it): the
            # session goes on, its lane and recording too (the core's reset reaches the
            # lane's state); a new lane here would leave the old one open for good.
            for alias, known in self.sessions.items():
                if known is peer and alias != session_id:
                    self.sessions.pop(alias)
        peer.session = session_id
        for old in self.sessions.add(session_id, peer):
            self.retire(old)  # the id names this session now, or there is no room
        return peer

    async def pull(self, peer: _Peer) -> None:
        """Before a request of a kept session: if the shared store holds a copy of it that
        this replica did not read or write last (another replica's), the lane takes it."""
        if peer.session is None or not self.state.shared:
            return
        stamp = await self.state.stamp(peer.session)
        if stamp is None or stamp == peer.stamp:
            return
        stored = await self.state.load(peer.session)
        if stored is not None:
            peer.lane.adopt(stored.memory, stored.spent)
            peer.core.assume_client(stored.client)
            peer.stamp, peer.saved = stored.stamp, peer.lane.changes
            peer.client = peer.core.client_name
            self.measure(peer)

    async def push(self, peer: _Peer) -> None:
        """After a result (or an ``initialize``): the session's copy in the shared store, if
        its memory or the client's declared name changed; for a request of no session, the
        results its lane now remembers, kept for its caller."""
        lane = peer.lane
        if lane.changes == peer.saved and peer.core.client_name == peer.client:
            return
        peer.saved, peer.client = lane.changes, peer.core.client_name
        if peer.caller is not None:
            await keep_named(self.state, lane, peer.caller, peer.recalled)
            return
        if peer.session is None or not self.state.shared:
            return
        snapshot = lane.memory.snapshot()
        peer.stamp = await self.state.save(peer.session, snapshot, lane.spent, peer.client)

    async def recall(self, peer: _Peer, message: Any, credential: str | None) -> None:
        """Before a request of no session: its results are kept for its caller (the hash of
        its credential, :mod:`gcfkit.transports.state`); the one its call names with
        ``_since``, if kept for this caller, is what its lane starts from."""
        peer.caller = caller_key(credential)
        peer.recalled = await start_from_named(self.state, peer.lane, peer.caller, message)
        peer.saved = peer.lane.changes

    def measure(self, peer: _Peer) -> None:
        """After a result: the session holds what its lane's memory holds now (the results
        it may answer relative to), and the table stays within its bytes."""
        if peer.session is not None and self.sessions.get(peer.session) is peer:
            for old in self.sessions.resize(peer.session, peer.lane.memory.bytes):
                self.retire(old)

    def expire(self) -> None:
        """End the sessions idle past the limit."""
        for old in self.sessions.expired():
            self.retire(old)

    def end(self, session_id: str) -> None:
        peer = self.sessions.pop(session_id)
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
#: The only paths besides the MCP endpoint the gateway relays (GET, no credential lent):
#: OAuth discovery (RFC 9728, RFC 8414).
_DISCOVERY: Final = "/.well-known/oauth-"


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
        cores: _Peers,
        headers: Mapping[str, str],
        keepalive: float,
        client_token: bool = False,
        refusals: Refusals | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.url = url
        self.shown = redact_url(url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.path = parts.path or "/"
        self.http = http
        self.cores = cores
        self.headers = dict(headers)
        self.keepalive = keepalive
        self.client_token = client_token
        self.refusals = refusals or Refusals()

    def upstream_headers(self, request: Request, lend: bool) -> list[tuple[str, str]]:
        """The client's end-to-end headers for the upstream (``Origin`` too: the upstream
        judges it as it would the client's own request); ``lend``: with the ``--header``
        ones (they win over the client's). The client token is the gateway's, never sent."""
        drop = [k.lower() for k in self.headers] if lend else []
        if self.client_token:
            drop.append("authorization")
        pairs = forwardable(request.headers.items(), drop=drop)
        return pairs + (list(self.headers.items()) if lend else [])

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        if path.rstrip("/") != self.path.rstrip("/"):
            if request.method in ("GET", "HEAD") and path.startswith(_DISCOVERY):
                return await self.relay_raw(request)  # OAuth discovery: no credential lent
            self.refusals.refuse("not_relayed")
            return Response("Not Found: the gateway relays only its MCP endpoint", 404)
        if request.method == "POST":
            return await self.post(request)
        if request.method == "GET":
            return await self.get(request)
        if request.method not in ("DELETE", "OPTIONS"):
            return Response(status_code=405, headers={"allow": "GET, POST, DELETE, OPTIONS"})
        lend = request.method == "DELETE"  # a CORS preflight carries no credential
        response = await self.relay_raw(request, self.url, lend=lend)
        session_id = request.headers.get(MCP_SESSION_ID)
        if request.method == "DELETE" and session_id and response.status_code < 300:
            self.cores.end(session_id)
            await self.cores.state.drop(session_id)
        return response

    async def open(
        self,
        method: str,
        request: Request,
        content: bytes | None,
        url: str | None = None,
        *,
        lend: bool = True,
    ) -> httpx2.Response:
        target = url or self.url
        if url is None and request.url.query:
            target += "?" + request.url.query
        built = self.http.build_request(
            method, target, content=content, headers=self.upstream_headers(request, lend)
        )
        return await self.http.send(built, stream=True)

    def unreachable(self, error: Exception) -> str:
        """The error text for an upstream that cannot be reached (its query string, which
        may hold a key, left out)."""
        return f"gcfkit proxy: MCP server at {self.shown} unreachable: {type(error).__name__}"

    def keep(self, session_id: str | None, peer: _Peer, known: bool, status: int) -> None:
        """A session the gateway did not know is kept once the upstream accepts it."""
        if session_id and not known and status < 400:
            self.cores.vouched(session_id, peer)
        elif session_id and not known:
            self.refusals.refuse("unknown_session")

    async def post(self, request: Request) -> Response:
        body = await request.body()
        msg = _message(body)
        ids = request_ids(msg)
        session_id = request.headers.get(MCP_SESSION_ID)
        peer, known = self.cores.for_session(session_id)
        core = peer.core
        sent = _to_server(core, body)
        if peer.capture is not None:
            peer.capture.to_server(one_line(sent))
        try:
            upstream = await self.open("POST", request, sent)
        except httpx2.HTTPError as e:
            return Response(
                _errors(core, ids, self.unreachable(e)),
                status_code=502,
                media_type="application/json",
            )
        given = upstream.headers.get(MCP_SESSION_ID)
        if given and isinstance(msg, dict) and msg.get("method") == "initialize":
            self.cores.adopt(given, peer)
            if peer.capture is not None:
                peer.capture.to_server(one_line(sent))
            await self.cores.push(peer)  # the client's declared name, for the other replicas
        elif session_id is None:
            await self.cores.recall(peer, msg, request.headers.get("authorization"))
        else:
            self.keep(session_id, peer, known, upstream.status_code)
            await self.cores.pull(peer)
        return await self.answer(upstream, request, peer, ids, one_line(sent))

    async def get(self, request: Request) -> Response:
        session_id = request.headers.get(MCP_SESSION_ID)
        peer, known = self.cores.for_session(session_id)
        try:
            upstream = await self.open("GET", request, None)
        except httpx2.HTTPError as e:
            return Response(self.unreachable(e), status_code=502)
        self.keep(session_id, peer, known, upstream.status_code)
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
            self.cores.measure(peer)
            await self.cores.push(peer)
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
                    self.cores.measure(peer)
                    await self.cores.push(peer)
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

    async def relay_raw(
        self, request: Request, url: str | None = None, *, lend: bool = False
    ) -> Response:
        """What is not a message (OAuth discovery, CORS preflights, DELETE): as is; the
        ``--header`` credentials only with ``lend``."""
        target = url or self.origin + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        try:
            content = await request.body()
            upstream = await self.open(request.method, request, content, target, lend=lend)
        except httpx2.HTTPError as e:
            return Response(self.unreachable(e), status_code=502)
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
    guard: Guard | None = None,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
    routes: Sequence[BaseRoute] = (),
    clock: Callable[[], float] = time.monotonic,
    state: str | None = None,
) -> Starlette:
    """The gateway's ASGI app in front of the MCP server at ``url`` (see the module doc).
    ``guard``: who may use it and its limits (default: a loopback server's); ``capture``
    opens a recording per session (``--capture-dir``); ``codec`` replaces the codec
    functions (tests: it must pickle, by reference, to reach the workers); ``routes`` are
    served before the MCP endpoint (:func:`~gcfkit.transports.http_guard.guarded_app`),
    after ``/healthz``, ``/readyz`` and ``/metrics`` (:mod:`gcfkit.transports.health`);
    ``state``: the store the gateway's replicas share sessions' results in (``--state``,
    :func:`~gcfkit.transports.state.open_state`; default: none).

    Raises :class:`~gcfkit.errors.ConfigError` for a gateway bound beyond loopback that
    would lend its ``headers`` (a credential) to clients it does not authenticate.

    >>> app = build_gateway("http://127.0.0.1:9/mcp", ProxyConfig(stats=False))
    >>> type(app).__name__
    'Starlette'
    """
    config = config or ProxyConfig()
    guard = guard or Guard("127.0.0.1")
    headers = dict(headers or {})
    check_lending(guard, bool(headers))
    if config.stats and ledger is None:
        ledger = Ledger()
    metrics, ledger = metered(ledger)
    mcp_path = urlsplit(url).path
    guard = probed(guard, metrics, mcp_path)
    offload = server_pool(config, codec, ledger.path if ledger is not None else None)
    offload.observer = metrics
    shared = open_state(
        state,
        max_bytes=guard.limits.remembered_bytes,
        ttl=guard.limits.idle_timeout,
        ref_results=config.ref_results,
        ref_bytes=config.ref_bytes,
        clock=clock,
    )
    cores = _Peers(config, ledger, offload, Captures(capture), codec, guard.limits, clock, shared)
    metrics.watch(sessions=lambda: len(cores.sessions), pool=offload)
    running: dict[str, _Gateway] = {}

    async def expire() -> None:
        while True:
            await asyncio.sleep(min(60.0, guard.limits.idle_timeout / 4))
            cores.expire()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        timeout = httpx2.Timeout(_CONNECT_TIMEOUT, read=_READ_TIMEOUT)
        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            await start_pool(offload)
            running["gateway"] = _Gateway(
                url,
                http,
                cores,
                headers,
                keepalive,
                client_token=guard.client_token is not None,
                refusals=guard.refusals,
            )
            expiring = asyncio.create_task(expire())
            try:
                yield
            finally:
                expiring.cancel()
                for session_id in list(cores.sessions):
                    cores.end(session_id)
                await offload.close()
                await cores.captures.aclose()
                await shared.aclose()
                metrics.close()

    async def endpoint(request: Request) -> Response:
        return await running["gateway"].handle(request)

    async def ready() -> str | None:
        gateway = running.get("gateway")
        if gateway is None:
            return "starting"
        return await upstream_ready(gateway.http, url, gateway.headers)

    methods = ["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"]
    health = health_routes(metrics, ready, mcp_path=mcp_path)
    app = guarded_app(endpoint, methods, guard, lifespan, [*health, *routes])
    app.state.sessions = cores.sessions  # for health and metrics routes (and tests)
    app.state.metrics = metrics
    return app


async def serve_gateway(
    url: str,
    host: str,
    port: int,
    config: ProxyConfig | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    ledger: Ledger | None = None,
    guard: Guard | None = None,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
    state: str | None = None,
) -> int:
    """Serve :func:`build_gateway` on ``host:port`` until SIGINT/SIGTERM; returns 0.
    ``guard``'s bound host is ``host``."""
    guard = dataclasses.replace(guard, bound=host) if guard is not None else Guard(host)
    app = build_gateway(
        url,
        config,
        headers=headers,
        ledger=ledger,
        guard=guard,
        keepalive=keepalive,
        codec=codec,
        capture=capture,
        state=state,
    )
    return await _serve(app, host, port, urlsplit(url).path or "/", guard)


def check_lending(guard: Guard, lends: bool) -> None:
    """Refuse a gateway that would lend a credential (``--header``) to anyone who can reach
    it: bound beyond loopback with no client token.

    >>> check_lending(Guard("127.0.0.1"), True)
    >>> try:
    ...     check_lending(Guard("0.0.0.0"), True)
    ... except ConfigError as e:
    ...     print(e.code)
    invalid_option
    """
    if lends and guard.client_token is None and not is_loopback(guard.bound):
        raise ConfigError(
            "invalid_option",
            f"--http {guard.bound}: a gateway reachable from other machines would lend its "
            "--header credential to anyone; give --client-token (clients then send "
            "'Authorization: Bearer <token>'), or drop --header so that each client's own "
            "credential passes through",
        )


async def _serve(app: Any, host: str, port: int, path: str, guard: Guard) -> int:
    import uvicorn

    raise_descriptor_limit()
    sock = listen_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    server = uvicorn.Server(uvicorn_config(app, guard.limits, guard.refusals))

    async def announce() -> None:
        while not server.started and not server.should_exit:
            await asyncio.sleep(0.01)
        if server.started:
            _log(f"serving http://{shown}:{bound}{path}")
            if not is_loopback(host) and guard.client_token is None:
                _log(
                    "reachable from other machines without a client token: anyone who can "
                    "connect can use the server (see --client-token)"
                )

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
    guard: Guard | None = None,
    grace: float = 2.0,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
) -> int:
    """Serve the stdio server ``command`` over Streamable HTTP on ``host:port``."""
    from .http_command import build_command_app

    guard = dataclasses.replace(guard, bound=host) if guard is not None else Guard(host)
    app = build_command_app(
        command,
        config,
        ledger=ledger,
        grace=grace,
        guard=guard,
        keepalive=keepalive,
        codec=codec,
        capture=capture,
    )
    return await _serve(app, host, port, "/mcp", guard)
