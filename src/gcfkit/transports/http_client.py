"""``gcfkit proxy --upstream URL``: a stdio client, an MCP server over Streamable HTTP.

The thin shell between the client's stdin/stdout and a remote server. Every line the client
writes goes through :meth:`ProxyCore.from_client` and is POSTed on its own; whatever comes
back (one JSON body, or an SSE stream of progress, logs, server requests and finally the
response) goes through the core message by message, to stdout in the order of its stream
(:class:`~gcfkit.transports.outbox.Outbox`), each tool result rewritten in a worker
process meanwhile, within the time budget, as in the stdio shell. Requests run concurrently
(a slow tool call holds nothing up; different streams carry no order between them);
notifications and responses are sent in order before the next message, as the SDK clients
do.

Both protocol generations:

* 2025-11-25 and earlier: the ``Mcp-Session-Id`` the server gives in answer to ``initialize``
  and the negotiated ``MCP-Protocol-Version`` go on every later request; after
  ``notifications/initialized`` a GET stream carries what the server sends on its own; on
  client EOF the session is ended with ``DELETE``.
* 2026-07-28: no session. Each request names its version in ``params._meta``; the shell
  mirrors it as ``MCP-Protocol-Version``, with ``Mcp-Method``, ``Mcp-Name`` and the
  ``Mcp-Param-*`` headers a tool's input schema asks for (``x-mcp-header``). A
  ``notifications/cancelled`` closes the request's stream (that is the cancellation there).

An SSE stream that drops before its response is resumed with ``Last-Event-ID`` when the
server gave event ids (after its ``retry`` delay, twice at most); otherwise, and for 4xx/5xx
answers without a JSON-RPC error body, 202 to a request, redirects and unreachable servers,
the request gets a JSON-RPC error at once. Nothing waits forever: a read that hears nothing
for ``read_timeout`` seconds counts as a dropped connection.

>>> import asyncio
>>> asyncio.run(run_upstream("http://127.0.0.1:9/mcp"))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, Final

import httpx2

from ..ledger import Ledger
from ..proxy.config import Codec
from ..proxy.core import Output, ProxyConfig, ProxyCore
from .http import (
    ACCEPT_BOTH,
    LAST_EVENT_ID,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    is_modern,
    message_version,
    one_line,
    redact_url,
    request_ids,
)
from .offload import Lane
from .outbox import Outbox
from .pools import session_pool, start_or_warm
from .process import DEFAULT_GRACE, stop_signals
from .stdio import client_pipes

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = ["DEFAULT_READ_TIMEOUT", "run_upstream"]

#: Seconds a response may stay silent before the connection counts as dropped (SSE servers
#: ping far more often; a JSON answer to a slow tool call gets this long).
DEFAULT_READ_TIMEOUT: Final = 300.0

_CONNECT_TIMEOUT: Final = 30.0
_DELETE_TIMEOUT: Final = 5.0
_DRAIN_TIMEOUT: Final = 5.0
_RESUME_ATTEMPTS: Final = 2
_DEFAULT_RETRY_MS: Final = 1000
_MAX_RETRY_MS: Final = 30_000
_INVALID_REQUEST: Final = -32600
_INTERNAL_ERROR: Final = -32603

#: Method -> the param mirrored as ``Mcp-Name`` (2026-07-28).
_NAME_PARAMS: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

Deliver = Callable[[bytes, None], Awaitable[None]]


def _log(text: str) -> None:
    print(f"gcfkit proxy: {text}", file=sys.stderr, flush=True)


class _Upstream:
    """One remote server: its URL, the session the server gave, and how to reach it."""

    def __init__(
        self,
        url: str,
        http: httpx2.AsyncClient,
        core: ProxyCore,
        deliver: Deliver,
        warming: asyncio.Future[None],
        lane: Lane,
        capture: Capture | None = None,
    ) -> None:
        self.warming = warming
        self.lane = lane
        self.capture = capture
        self.url = url
        self.http = http
        self.core = core
        self.deliver = deliver
        self.session_id: str | None = None
        self.version: str | None = None  # negotiated by initialize (2025-11-25 and earlier)
        self.param_headers: dict[str, dict[tuple[str, ...], str]] = {}
        self.in_flight: dict[Any, asyncio.Task[None]] = {}
        self.modern: set[Any] = set()  # ids of in-flight 2026-07-28 requests
        self.watch: dict[Any, str] = {}  # request id -> method whose answer the shell reads
        self.listening: asyncio.Task[None] | None = None

    # -- outgoing ----------------------------------------------------------------------

    def headers_for(self, msg: Any) -> dict[str, str]:
        headers = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
        version = message_version(msg)
        method = msg.get("method") if isinstance(msg, dict) else None
        if is_modern(version):
            assert version is not None
            # The SDK's own header rules, imported here and not at the top: importing mcp
            # takes over a second of start-up that a client of the handshake never needs.
            from mcp.shared.inbound import encode_header_value, mcp_param_headers

            headers[MCP_PROTOCOL_VERSION] = version
            if isinstance(method, str):
                headers["mcp-method"] = method
                params = msg.get("params")
                params = params if isinstance(params, dict) else {}
                name = params.get(_NAME_PARAMS.get(method, ""))
                if isinstance(name, str):
                    headers["mcp-name"] = encode_header_value(name)
                args = params.get("arguments")
                if method == "tools/call" and isinstance(name, str):
                    table = self.param_headers.get(name)
                    if table:
                        mirrored = args if isinstance(args, dict) else {}
                        headers.update(mcp_param_headers(table, mirrored))
            return headers
        if self.session_id is not None:
            headers[MCP_SESSION_ID] = self.session_id
        if self.version is not None and method != "initialize":
            headers[MCP_PROTOCOL_VERSION] = self.version
        return headers

    def outbox(self) -> Outbox[None]:
        """The order of one HTTP stream's messages to the client (each stream its own: they
        carry no order between them), tool results rewritten in the worker meanwhile."""
        return Outbox(self.core, self.lane, self.deliver)

    async def send(self, out: Output) -> None:
        """POST one message; for a request, returns when its answer reached the client."""
        try:
            msg: Any = json.loads(out.data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            msg = None  # not JSON: the server says so, in a body we relay
        ids = request_ids(msg)
        method = msg.get("method") if isinstance(msg, dict) else None
        if ids and (
            method == "initialize" or (method == "tools/list" and is_modern(message_version(msg)))
        ):
            self.watch[ids[0]] = method
        if isinstance(msg, dict) and msg.get("method") == "initialize":
            # A new handshake is a new session: nothing of the old one may leak onto it.
            self.session_id = self.version = None
        if self.capture is not None:
            self.capture.to_server(out.data)
        outbox = self.outbox()
        try:
            async with self.http.stream(
                "POST", self.url, content=out.data, headers=self.headers_for(msg)
            ) as response:
                await self._answer(response, msg, ids, outbox)
        except httpx2.HTTPError as e:
            # The URL's query string may hold a key: the client sees the URL without it.
            shown = redact_url(self.url)
            reason = _reason(e).replace(self.url, shown)
            await self._fail(ids, f"MCP server at {shown} unreachable: {reason}", outbox)
        finally:
            for i in ids:
                self.watch.pop(i, None)
        # The answer may still be being rewritten (bounded by its deadline).
        await outbox.drain()
        if isinstance(msg, dict) and msg.get("method") == "notifications/initialized":
            self.listen()

    async def _answer(
        self, response: httpx2.Response, msg: Any, ids: list[Any], outbox: Outbox[None]
    ) -> None:
        status = response.status_code
        if isinstance(msg, dict) and msg.get("method") == "initialize" and status < 300:
            self.session_id = response.headers.get(MCP_SESSION_ID) or None
        if status == 202:
            message = "MCP server answered a request with 202 Accepted"
            await self._fail(ids, message, outbox, _INVALID_REQUEST)
            return
        if 300 <= status < 400:
            where = response.headers.get("location", "?")
            message = f"MCP server redirects to {where}: use that URL"
            await self._fail(ids, message, outbox, _INVALID_REQUEST)
            return
        ctype = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if status >= 400:
            await self._error_status(response, ctype, ids, outbox)
            return
        if ctype == "text/event-stream":
            await self._read_stream(response, ids, outbox)
        elif ctype == "application/json":
            body = await response.aread()
            await self.feed(body, outbox)
        elif ids:
            await self._fail(ids, f"MCP server answered with content type {ctype!r}", outbox)
            return
        await self._fail(ids, "MCP server closed the stream before answering", outbox)

    async def _error_status(
        self, response: httpx2.Response, ctype: str, ids: list[Any], outbox: Outbox[None]
    ) -> None:
        status = response.status_code
        body = await response.aread()
        if ctype == "application/json":
            fixed = _error_body(body, ids)
            if fixed is not None:
                # The server's own JSON-RPC error (its id restored if it said null).
                await self.feed(fixed, outbox)
        if not ids:
            _log(f"MCP server answered HTTP {status} to a notification")
            return
        if status in (401, 403):
            challenge = response.headers.get("www-authenticate")
            message = f"MCP server refused access (HTTP {status})"
            if challenge:
                message += f"; WWW-Authenticate: {challenge}"
            message += "; give credentials with --header 'Authorization: Bearer ${TOKEN}'"
            await self._fail(ids, message, outbox, _INVALID_REQUEST)
        elif status == 404 and self.session_id is not None:
            self.session_id = None
            message = "MCP session expired (HTTP 404): reconnect to start a new one"
            await self._fail(ids, message, outbox, _INVALID_REQUEST)
        else:
            await self._fail(ids, f"MCP server answered HTTP {status}", outbox, _INTERNAL_ERROR)

    async def _read_stream(
        self, response: httpx2.Response, ids: list[Any], outbox: Outbox[None]
    ) -> None:
        last_id, retry = await self._events(response, ids, outbox)
        attempts = 0
        while self._waiting(ids) and last_id and attempts < _RESUME_ATTEMPTS:
            # Dropped before the answer, but resumable: ask for the rest (SEP-1699 timing).
            attempts += 1
            await _pause(retry)
            headers = self.headers_for(None)
            headers[LAST_EVENT_ID] = last_id
            headers["accept"] = "text/event-stream"
            try:
                async with self.http.stream("GET", self.url, headers=headers) as again:
                    ctype = again.headers.get("content-type", "").partition(";")[0].strip().lower()
                    if again.status_code >= 300 or ctype != "text/event-stream":
                        continue  # not ready to replay yet: the next attempt asks again
                    before = last_id
                    last_id, new_retry = await self._events(again, ids, outbox, last_id)
                    retry = new_retry if new_retry is not None else retry
                    if last_id != before:
                        attempts = 0  # it made progress: the count starts over
            except httpx2.HTTPError:
                continue

    async def _events(
        self, response: httpx2.Response, ids: list[Any], outbox: Outbox[None], last_id: str = ""
    ) -> tuple[str, int | None]:
        """Relay one SSE stream's messages until the answers to ``ids`` passed (or, for the
        GET stream, until it ends); returns the last event id and retry seen."""
        retry: int | None = None
        events = httpx2.EventSource(response, max_event_size=None).__aiter__()
        try:
            while True:
                if ids and not self._waiting(ids):
                    # Answered. The stream is read on to its end (the server ends it now), so
                    # the connection goes back to the pool: dropped half-read, every call
                    # would cost a new connection (and a TLS handshake). Whatever else it
                    # still carries is relayed too; a server that holds it open is left.
                    event = await asyncio.wait_for(events.__anext__(), _DRAIN_TIMEOUT)
                else:
                    event = await events.__anext__()
                last_id = event.id or last_id
                if event.retry is not None:
                    retry = event.retry
                if event.data and event.event in ("", "message"):
                    await self.feed(event.data.encode("utf-8"), outbox)
        except (StopAsyncIteration, asyncio.TimeoutError):
            pass
        except httpx2.HTTPError:
            pass  # a dropped connection: the caller resumes or answers with an error
        finally:
            await events.aclose()  # type: ignore[attr-defined]
        return last_id, retry

    def _waiting(self, ids: list[Any]) -> bool:
        return any(self.core.is_pending(i) for i in ids)

    async def feed(self, body: bytes, outbox: Outbox[None]) -> None:
        """Hand one message from the server to the core and its lines to ``outbox``."""
        line = one_line(body)
        if self.capture is not None:
            self.capture.from_server(line)
        if not self.warming.done() and self.core.expects_tool_result:
            # Without a worker the core warms up in a thread at start-up; it is not for two
            # threads at once.
            await asyncio.shield(self.warming)
        watched = [i for i in self.watch if self.core.is_pending(i)]
        outputs = await outbox.feed(line, None)
        for i in watched:
            if not self.core.is_pending(i):
                self._learn(self.watch[i], outputs)

    def _learn(self, method: str, outputs: list[Output]) -> None:
        """What the shell keeps from an answer: the negotiated version, tools' header maps."""
        for out in outputs:
            try:
                result = json.loads(out.data).get("result")
            except (ValueError, AttributeError, RecursionError):
                continue
            if not isinstance(result, dict):
                continue
            if method == "initialize" and isinstance(result.get("protocolVersion"), str):
                self.version = result["protocolVersion"]
            tools = result.get("tools")
            if method == "tools/list" and isinstance(tools, list):
                from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

                for tool in tools:
                    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                        continue
                    schema = tool.get("inputSchema")
                    if find_invalid_x_mcp_header(schema) is None:
                        self.param_headers[tool["name"]] = x_mcp_header_map(schema)

    async def _fail(
        self, ids: list[Any], message: str, outbox: Outbox[None], code: int = -32000
    ) -> None:
        for i in ids:
            await outbox.add(self.core.fail_request(i, message, code), None)

    # -- the GET stream (2025-11-25 and earlier) ---------------------------------------

    def listen(self) -> None:
        if self.session_id is None or self.listening is not None:
            return
        self.listening = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        last_id = ""
        failures = 0
        retry: int | None = None
        outbox = self.outbox()
        while failures < _RESUME_ATTEMPTS and self.session_id is not None:
            headers = self.headers_for(None)
            headers["accept"] = "text/event-stream"
            if last_id:
                headers[LAST_EVENT_ID] = last_id
            try:
                async with self.http.stream("GET", self.url, headers=headers) as response:
                    ctype = response.headers.get("content-type", "").partition(";")[0].strip()
                    if response.status_code >= 300 or ctype.lower() != "text/event-stream":
                        return  # 405: this server sends nothing on its own
                    last_id, new_retry = await self._events(response, [], outbox, last_id)
                    retry = new_retry if new_retry is not None else retry
                    failures = 0
            except httpx2.HTTPError:
                failures += 1
            await _pause(retry)

    # -- the end -----------------------------------------------------------------------

    async def close(self) -> None:
        if self.listening is not None:
            self.listening.cancel()
            with contextlib.suppress(BaseException):
                await self.listening
        if self.session_id is None:
            return
        headers = self.headers_for(None)
        try:
            await self.http.request("DELETE", self.url, headers=headers, timeout=_DELETE_TIMEOUT)
        except httpx2.HTTPError as e:
            _log(f"could not end the MCP session: {_reason(e)}")


async def _pause(retry_ms: int | None) -> None:
    """The wait before reconnecting: the server's ``retry`` if it gave one (bounded)."""
    ms = retry_ms if retry_ms is not None else _DEFAULT_RETRY_MS
    await asyncio.sleep(min(max(ms, 0), _MAX_RETRY_MS) / 1000)


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _error_body(body: bytes, ids: list[Any]) -> bytes | None:
    """A JSON-RPC error body of a 4xx/5xx answer, with the request's id when the server
    could not name it (``"id": null``); None when the body is no JSON-RPC error."""
    try:
        msg = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(msg, dict) or not isinstance(msg.get("error"), dict):
        return None
    if msg.get("id") is None and len(ids) == 1:
        msg["id"] = ids[0]
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return body


async def run_upstream(
    url: str,
    config: ProxyConfig | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    ledger: Ledger | None = None,
    grace: float = DEFAULT_GRACE,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    codec: Codec | None = None,
    capture: Capture | None = None,
) -> int:
    """Relay ``stdin``/``stdout`` (default: this process's) to the MCP server at ``url``;
    ``headers`` go on every HTTP request. Returns 0 once the client closed its side.

    Tool results are answered as in the stdio shell (small ones here, the rest in a worker
    process: :mod:`gcfkit.transports.pools`); ``capture`` records the session as there
    (``--capture-dir``); ``codec`` replaces the codec functions (tests; it must pickle by
    reference)."""
    config = config or ProxyConfig()
    core = ProxyCore(config, codec)
    if config.stats and ledger is None:
        ledger = Ledger()
    lines, write_client, close_client = await client_pipes(stdin, stdout)
    loop = asyncio.get_running_loop()
    # One client, one session: one worker, as for stdio (it loads the tokenizer meanwhile);
    # without one, results are rewritten here and the core warms up in a thread.
    offload = session_pool(config, codec, ledger.path if ledger is not None else None)
    lane = offload.session()
    warming = await start_or_warm(offload, core)
    timeout = httpx2.Timeout(_CONNECT_TIMEOUT, read=read_timeout)
    # Streams answer concurrently; a line (up to 64 MB, written in slices) leaves whole.
    writing = asyncio.Lock()

    def flush_records() -> None:
        if ledger is not None:
            for record in core.pop_records():
                ledger.append(record)

    async def deliver(data: bytes, _: None = None) -> None:
        async with writing:
            await write_client(data)
        flush_records()

    async with httpx2.AsyncClient(
        headers=dict(headers or {}), timeout=timeout, follow_redirects=False
    ) as http:
        upstream = _Upstream(url, http, core, deliver, warming, lane, capture)

        def finished(request_id: Any, task: asyncio.Task[None]) -> None:
            if upstream.in_flight.get(request_id) is task:
                del upstream.in_flight[request_id]
                upstream.modern.discard(request_id)

        async def relay() -> None:
            async for line in lines:
                for out in core.from_client(line):
                    await dispatch(out)

        async def dispatch(out: Output) -> None:
            try:
                msg: Any = json.loads(out.data)
            except (ValueError, UnicodeDecodeError, RecursionError):
                msg = None
            ids = request_ids(msg)
            if ids:
                task = asyncio.create_task(upstream.send(out))
                modern = is_modern(message_version(msg))
                for i in ids:
                    upstream.in_flight[i] = task
                    if modern:
                        upstream.modern.add(i)
                    task.add_done_callback(functools.partial(finished, i))
                return
            if _cancels_modern(msg, upstream):
                return
            await upstream.send(out)

        stop = asyncio.Event()
        restore = stop_signals(loop, lambda signum: stop.set())
        reading = asyncio.create_task(relay())
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            restore()
            for task in (reading, stopping):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            # The client is done: what it still waits for gets ``grace`` seconds to arrive.
            pending = set(upstream.in_flight.values())
            if pending:
                await asyncio.wait(pending, timeout=grace)
            for task in pending:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            await upstream.close()
            with contextlib.suppress(Exception):
                await offload.close()
            flush_records()
            close_client()
            if capture is not None:
                # The writer thread finishes the queue (bounded); the client is answered.
                await loop.run_in_executor(None, capture.close)
            with contextlib.suppress(Exception):
                await warming
    return 0


def _cancels_modern(msg: Any, upstream: _Upstream) -> bool:
    """A ``notifications/cancelled`` for a 2026-07-28 request in flight: closing its stream
    is the cancellation there (the server would only drop the notification). True when
    handled so."""
    if not isinstance(msg, dict) or msg.get("method") != "notifications/cancelled":
        return False
    params = msg.get("params")
    request_id = params.get("requestId") if isinstance(params, dict) else None
    if request_id is None or request_id not in upstream.modern:
        return False
    task = upstream.in_flight.get(request_id)
    if task is None:
        return False
    task.cancel()
    upstream.core.fail_request(request_id, "cancelled")  # no answer is owed for it any more
    return True
