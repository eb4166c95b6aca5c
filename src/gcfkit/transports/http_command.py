"""``gcfkit proxy --http HOST:PORT -- COMMAND``: a stdio MCP server served over Streamable HTTP.

A stdio server holds one session, so each HTTP session is one server process: an
``initialize`` POST without ``Mcp-Session-Id`` starts ``COMMAND`` with its own
:class:`~gcfkit.proxy.core.ProxyCore`, and the answer names the new session. Later POSTs
write their message to that process; a request's answer, and the progress notifications for
its ``progressToken``, come back on that POST's SSE stream. What the server sends on its own
(log messages, list changes, its requests to the client) goes to the session's GET stream,
else to the most recent open request stream, else waits (bounded) for a GET stream.
``DELETE``, an idle hour, or the proxy's own shutdown stops the process; at most
``max_processes`` sessions run at once (:class:`~gcfkit.transports.http_limits.HttpLimits`),
and an ``initialize`` past that gets 503 until one ends. A JSON-RPC batch is written to the
server one message at a time, its answers on the POST's stream; a request whose id is
already in flight in its session is refused (409), so each stream ends with its answer.

Tool results are rewritten in the server's pool of worker processes
(:mod:`gcfkit.transports.offload`), in the order the stdio shell keeps
(:mod:`gcfkit.proxy.sequencer`: an answer may overtake a result still being rewritten,
nothing else does), so a large result never holds up a ping; ``--capture-dir`` records
each session (and the shared process) in a directory of its own.

The 2026-07-28 protocol has no session: its requests (no ``Mcp-Session-Id``, the version in
``MCP-Protocol-Version`` or their ``_meta``) all go to one shared server process, each with
an id and progress token of the proxy's own, each answered on its own SSE stream
(:mod:`gcfkit.transports.http_shared` says what that takes). A stdio server that speaks only
the handshake answers them as methods it does not know, and a client that negotiates (the
SDK's ``auto`` mode) falls back to ``initialize``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

from ..ledger import Ledger
from ..proxy.config import Codec
from ..proxy.core import Output, ProxyConfig, ProxyCore, ToolJob
from ..proxy.jsonrpc import RequestKey, request_key
from .health import command_ready, health_routes, metered, probed
from .http import (
    DEFAULT_KEEPALIVE,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    Captures,
    is_modern,
    message_version,
    one_line,
    request_ids,
    sse_event,
    with_keepalive,
)
from .http_guard import Guard, guarded_app
from .http_shared import SharedServer
from .offload import Lane, Offload
from .outbox import Outbox
from .pools import server_pool, start_pool
from .process import DEFAULT_GRACE, ServerProcess
from .state import open_state
from .stdio import split_lines

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = ["build_command_app"]

_HELD_MESSAGES: Final = 1024
_SSE_HEADERS: Final = {"cache-control": "no-cache", "x-accel-buffering": "no"}

#: A stream's queue: (message, whether it is the answer that ends the stream); None: the end.
_Queue = asyncio.Queue[tuple[bytes, bool] | None]


def _log(text: str) -> None:
    print(f"gcfkit proxy: {text}", file=sys.stderr, flush=True)


def _json_error(
    status: int, request_id: Any, code: int, message: str, data: Any = None
) -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


#: Where a server line goes: the request stream it is for (None: the session's own), and
#: whether it is the answer that ends that stream.
_Tag = tuple[RequestKey | None, bool]


class _Session:
    """One HTTP session: one server process, one core and its lane in the worker pool, the
    streams waiting for its output."""

    def __init__(
        self,
        session_id: str,
        process: ServerProcess,
        core: ProxyCore,
        lane: Lane,
        ledger: Ledger | None,
        capture: Capture | None = None,
    ):
        self.id = session_id
        self.process = process
        self.core = core
        self.lane = lane
        self.ledger = ledger
        self.capture = capture
        self.outbox: Outbox[_Tag] = Outbox(core, lane, self._deliver)
        self.streams: dict[RequestKey, _Queue] = {}
        self.progress: dict[Any, RequestKey] = {}
        self.listener: _Queue | None = None
        self.held: collections.deque[bytes] = collections.deque(maxlen=_HELD_MESSAGES)
        self.active = 0
        self.last_used = asyncio.get_running_loop().time()
        self.reader: asyncio.Task[None] | None = None
        self.write_lock = asyncio.Lock()
        self.ended = False

    @property
    def alive(self) -> bool:
        return (
            self.process.returncode is None and self.reader is not None and not self.reader.done()
        )

    async def write(self, outputs: list[Output]) -> bool:
        stdin = self.process.stdin
        async with self.write_lock:
            try:
                for out in outputs:
                    stdin.write(out.data)
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError, OSError):
                return False
        return True

    async def read(self) -> None:
        stdout = self.process.stdout
        async for line in split_lines(stdout.read):
            if self.capture is not None:
                self.capture.from_server(line)
            await self.route(line)
            del line  # not held while the next line is awaited: it may be 64 MB
        await self.process.exited(5)
        # Results still being rewritten go out first (each within its deadline).
        await self.outbox.drain()
        self._end_streams()

    def _end_streams(self) -> None:
        """The server can say no more: an error for each request left, every stream ends."""
        if self.ended:
            return
        self.ended = True
        for out in self.core.server_exited(self.process.returncode):
            self.send(self._key_of(out.data), out.data, final=True)
        for queue in [*self.streams.values(), *([self.listener] if self.listener else [])]:
            queue.put_nowait(None)

    async def route(self, line: bytes) -> None:
        waiting = [k for k in self.streams if self.core.is_pending(k[1])]
        got = self.outbox.receive(line)
        # Decided now, as the line arrives: which request it answers (one the core could not
        # read, not UTF-8, still ends its request's stream).
        answered = next((k for k in waiting if not self.core.is_pending(k[1])), None)
        if answered is None:
            answered = _answer_key(line, self.streams)
        if isinstance(got, ToolJob):
            await self.outbox.put(got, (answered, True))
            return
        for out in got:
            tag = (answered, True) if answered is not None else (self._key_of(out.data), False)
            await self.outbox.put([out], tag)

    async def _deliver(self, data: bytes, tag: _Tag) -> None:
        self.send(tag[0], data, final=tag[1])
        if self.ledger is not None:
            for record in self.core.pop_records():
                self.ledger.append(record)

    def _key_of(self, data: bytes) -> RequestKey | None:
        """The request stream a small message belongs to: the request it answers, or the one
        whose progressToken it reports on; None for what the server sends on its own."""
        msg = _lenient(data)
        if not isinstance(msg, dict):
            return None
        if "method" not in msg:
            return request_key(msg.get("id"))
        params = msg.get("params")
        if msg.get("method") == "notifications/progress" and isinstance(params, dict):
            token = params.get("progressToken")
            if isinstance(token, (str, int)) and not isinstance(token, bool):
                return self.progress.get((type(token).__name__, token))
        return None

    def send(self, key: RequestKey | None, data: bytes, final: bool = False) -> None:
        queue = self.streams.get(key) if key is not None else None
        if queue is not None:
            queue.put_nowait((data, final))
            return
        final = False  # on another stream, an answer to a lost request ends nothing
        if queue is None:
            queue = self.listener
        if queue is None and self.streams:
            queue = next(reversed(self.streams.values()))
        if queue is None:
            self.held.append(data)
        else:
            queue.put_nowait((data, final))

    async def stop(self, grace: float) -> None:
        await self.process.stop()
        if self.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.reader, grace + 5)
        with contextlib.suppress(Exception):
            await self.outbox.drain(timeout=0)
        # A reader given up on (a child that left the group holds the server's stdout) did
        # not end them: the client's streams would stay open, kept alive, for good.
        self._end_streams()
        self.lane.close()


class _CommandServer:
    def __init__(
        self,
        command: Sequence[str],
        config: ProxyConfig,
        ledger: Ledger | None,
        grace: float,
        guard: Guard,
        keepalive: float,
        codec: Codec | None = None,
        capture: Callable[[], Capture] | None = None,
    ) -> None:
        self.command = list(command)
        self.config = config
        self.ledger = ledger
        self.grace = grace
        self.limits = guard.limits
        self.refusals = guard.refusals
        self.keepalive = keepalive
        self.codec = codec
        self.sessions: dict[str, _Session] = {}
        self.offload: Offload = server_pool(config, codec, ledger.path if ledger else None)
        self.captures = Captures(capture)
        self.shared = SharedServer(
            command,
            config,
            ledger,
            grace,
            offload=self.offload,
            codec=codec,
            captures=self.captures,
            results=open_state(
                None,
                max_bytes=self.limits.remembered_bytes,
                ttl=self.limits.idle_timeout,
                ref_results=config.ref_results,
                ref_bytes=config.ref_bytes,
            ),
        )

    async def handle(self, request: Request) -> Response:
        if request.url.path.rstrip("/") != "/mcp":
            return Response("Not Found", status_code=404)
        if request.method == "POST":
            return await self.post(request)
        session = self.sessions.get(request.headers.get(MCP_SESSION_ID, ""))
        if request.method not in ("GET", "DELETE"):
            return Response(status_code=405, headers={"allow": "GET, POST, DELETE"})
        if session is None:
            self.refusals.refuse("unknown_session")
            return _json_error(404, None, -32001, "Session not found")
        if request.method == "DELETE":
            await self.end(session)
            return Response(status_code=200)
        if session.listener is not None:
            return _json_error(409, None, -32000, "a GET stream is already open")
        queue: _Queue = asyncio.Queue()
        while session.held:
            queue.put_nowait((session.held.popleft(), False))
        session.listener = queue
        return self.stream(session, queue, [])

    async def post(self, request: Request) -> Response:
        body = await request.body()
        try:
            msg: Any = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return _json_error(400, None, -32700, "Parse error")
        session_id = request.headers.get(MCP_SESSION_ID)
        method = msg.get("method") if isinstance(msg, dict) else None
        request_id = msg.get("id") if isinstance(msg, dict) else None
        version = request.headers.get(MCP_PROTOCOL_VERSION) or message_version(msg)
        if session_id is None and is_modern(version):
            credential = request.headers.get("authorization")
            return await self.post_shared(body, msg, request_id, method, credential)
        if session_id is None:
            if method != "initialize":
                return _json_error(
                    400, request_id, -32000, "Bad Request: no session; initialize first"
                )
            if len(self.sessions) >= self.limits.max_processes:
                await self.reap_once()  # ended or idle sessions make room first
            if len(self.sessions) >= self.limits.max_processes:
                self.refusals.refuse("sessions")
                text = (
                    f"too many sessions: {self.limits.max_processes} servers run already; "
                    "end one (DELETE) or try again later"
                )
                response = _json_error(503, request_id, -32000, text)
                response.headers["retry-after"] = "60"
                return response
            session = await self.start()
            if session is None:
                return _json_error(500, request_id, -32603, "the MCP server could not be started")
        else:
            found = self.sessions.get(session_id)
            if found is None or not found.alive:
                self.refusals.refuse("unknown_session")
                return _json_error(404, request_id, -32001, "Session not found")
            session = found
        session.last_used = asyncio.get_running_loop().time()
        items = msg if isinstance(msg, list) else [msg]
        keys = [k for k in (request_key(i) for i in request_ids(msg)) if k is not None]
        if len(set(keys)) < len(keys) or any(k in session.streams for k in keys):
            self.refusals.refuse("duplicate_id")
            text = "a request with this id is in flight in this session already"
            return _json_error(409, request_id, -32600, text)
        queue: _Queue | None = None
        if keys:
            queue = asyncio.Queue()
            for key in keys:
                session.streams[key] = queue
            for item in items:
                token = _progress_token(item)
                owner = request_key(item.get("id")) if isinstance(item, dict) else None
                if token is not None and owner is not None and owner in keys:
                    session.progress[token] = owner
        # A batch goes to the server a message at a time (a stdio server answers each); a
        # single message as the client wrote it.
        lines = [one_line(_dumps(i)) for i in items] if isinstance(msg, list) else [one_line(body)]
        outputs = [out for line in lines for out in session.core.from_client(line)]
        if session.capture is not None:
            for out in outputs:
                session.capture.to_server(out.data)
        if not await session.write(outputs):
            for key in keys:
                session.streams.pop(key, None)
            return _json_error(502, request_id, -32000, "the MCP server is gone")
        if queue is None:
            return Response(status_code=202)
        response = self.stream(session, queue, keys)
        response.headers[MCP_SESSION_ID] = session.id
        return response

    async def post_shared(
        self, body: bytes, msg: Any, request_id: Any, method: Any, credential: str | None = None
    ) -> Response:
        """A 2026-07-28 request, to the shared process; its answer on an SSE stream (its
        results kept for its caller, ``credential``: :mod:`gcfkit.transports.state`)."""
        if not isinstance(method, str):
            return _json_error(400, None, -32600, "a 2026-07-28 POST carries one request")
        if request_id is None:
            return Response(status_code=202)  # that protocol has no notification to act on
        if not await self.shared.start():
            return _json_error(500, request_id, -32603, "the MCP server could not be started")
        sent = await self.shared.send(body, request_id, msg, credential)
        if sent is None:
            return _json_error(502, request_id, -32000, "the MCP server is gone")
        shared = self.shared

        async def events() -> AsyncIterator[bytes]:
            async with contextlib.aclosing(shared.events(*sent)) as messages:
                async for data in messages:
                    yield sse_event(data)

        response = StreamingResponse(
            with_keepalive(events(), self.keepalive), media_type="text/event-stream"
        )
        response.headers.update(_SSE_HEADERS)
        return response

    def stream(self, session: _Session, queue: _Queue, keys: list[RequestKey]) -> Response:
        """The SSE stream of ``queue``: a request's (or a batch's), ended by the answer to
        each of ``keys``; the session's own (GET) when there are none."""

        async def events() -> AsyncIterator[bytes]:
            session.active += 1
            owed = len(keys)
            try:
                while True:
                    item = await queue.get()
                    if item is None:
                        return
                    yield sse_event(item[0])
                    if item[1] and keys:
                        owed -= 1
                        if owed <= 0:
                            return
            finally:
                session.active -= 1
                session.last_used = asyncio.get_running_loop().time()
                if not keys:
                    session.listener = None
                for key in keys:
                    if session.streams.get(key) is queue:
                        del session.streams[key]
                for token in [t for t, k in session.progress.items() if k in keys]:
                    del session.progress[token]

        response = StreamingResponse(
            with_keepalive(events(), self.keepalive), media_type="text/event-stream"
        )
        response.headers.update(_SSE_HEADERS)
        response.headers[MCP_SESSION_ID] = session.id
        return response

    async def start(self) -> _Session | None:
        try:
            process = await ServerProcess.start(self.command, grace=self.grace)
        except OSError as e:
            _log(f"cannot start {self.command[0]!r}: {e.strerror or e}")
            return None
        session = _Session(
            secrets.token_hex(16),
            process,
            ProxyCore(self.config, self.codec),
            self.offload.session(),
            self.ledger,
            self.captures.session(),
        )
        session.reader = asyncio.create_task(session.read())
        self.sessions[session.id] = session
        return session

    async def end(self, session: _Session) -> None:
        self.sessions.pop(session.id, None)
        await session.stop(self.grace)
        self.captures.close(session.capture)

    async def reap(self) -> None:
        while True:
            await asyncio.sleep(min(60.0, self.limits.idle_timeout / 4))
            await self.reap_once()

    async def reap_once(self) -> None:
        """End the sessions idle past the limit, and those whose server is gone."""
        now = asyncio.get_running_loop().time()
        for session in list(self.sessions.values()):
            idle = now - session.last_used > self.limits.idle_timeout and session.active == 0
            if idle or not session.alive:
                await self.end(session)

    async def close(self) -> None:
        await asyncio.gather(
            self.shared.stop(), *(self.end(s) for s in list(self.sessions.values()))
        )
        await self.offload.close()
        await self.captures.aclose()


def _lenient(data: bytes) -> Any:
    """The JSON of a server line, bytes that are not UTF-8 replaced (None: no JSON): enough
    to tell whose it is, never what is forwarded."""
    try:
        return json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None


def _answer_key(line: bytes, streams: Mapping[RequestKey, Any]) -> RequestKey | None:
    """The stream of the request ``line`` answers, when it is an answer to one waiting."""
    msg = _lenient(line)
    if not isinstance(msg, dict) or "method" in msg or not ("result" in msg or "error" in msg):
        return None
    key = request_key(msg.get("id"))
    return key if key in streams else None


def _progress_token(msg: Any) -> RequestKey | None:
    params = msg.get("params") if isinstance(msg, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return request_key(token) if isinstance(token, (str, int)) else None


def _dumps(item: Any) -> bytes:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def build_command_app(
    command: Sequence[str],
    config: ProxyConfig | None = None,
    *,
    ledger: Ledger | None = None,
    grace: float = DEFAULT_GRACE,
    guard: Guard | None = None,
    keepalive: float = DEFAULT_KEEPALIVE,
    codec: Codec | None = None,
    capture: Callable[[], Capture] | None = None,
    routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The ASGI app serving the stdio server ``command`` at ``/mcp`` (see the module doc).
    ``guard``: who may use it and its limits (default: a loopback server's); ``capture``
    opens a recording per session (``--capture-dir``); ``codec`` replaces the codec
    functions (tests: it must pickle, by reference, to reach the workers); ``routes`` are
    served before ``/mcp`` (:func:`~gcfkit.transports.http_guard.guarded_app`), after
    ``/healthz``, ``/readyz`` and ``/metrics`` (:mod:`gcfkit.transports.health`).

    >>> type(build_command_app(["true"], ProxyConfig(stats=False))).__name__
    'Starlette'
    """
    config = config or ProxyConfig()
    guard = guard or Guard("127.0.0.1")
    if config.stats and ledger is None:
        ledger = Ledger()
    metrics, ledger = metered(ledger)
    guard = probed(guard, metrics, "/mcp")
    server = _CommandServer(command, config, ledger, grace, guard, keepalive, codec, capture)
    server.offload.observer = metrics
    metrics.watch(sessions=lambda: len(server.sessions), pool=server.offload)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await start_pool(server.offload)
        reaper = asyncio.create_task(server.reap())
        try:
            yield
        finally:
            reaper.cancel()
            with contextlib.suppress(BaseException):
                await reaper
            await server.close()
            metrics.close()

    health = health_routes(metrics, lambda: command_ready(server.shared), mcp_path="/mcp")
    methods = ["GET", "POST", "DELETE"]
    app = guarded_app(server.handle, methods, guard, lifespan, [*health, *routes])
    app.state.sessions = server.sessions  # for health and metrics routes (and tests)
    app.state.metrics = metrics
    return app
