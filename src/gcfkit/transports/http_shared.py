"""The one stdio server process that the sessionless (2026-07-28) requests to
``gcfkit proxy --http HOST:PORT -- COMMAND`` share.

A request of that protocol stands alone: its ``_meta`` carries the protocol version, the
client's capabilities and its name, so it needs no handshake and no process of its own, and
one process serves them all (a process per request would start the server for every call).
It is started at the first such request and kept; if it dies, the next one starts another.

What one process for many clients takes, and nothing else is changed:

* Each request's ``id`` becomes a proxy-unique one on the way in (``gcfkit-N``; clients
  number their requests alike, so two of them would collide) and the client's own on the
  way out; the same for its ``_meta.progressToken`` and the progress notifications that
  name it. The answer and its progress go on that request's SSE stream, through a core of
  its own (:class:`~gcfkit.proxy.core.ProxyCore`: the request's ``_meta`` is all the state
  there is, so no delta base). Its named results are kept for its caller, by the hash of
  its credential, and a ``_since`` naming one is answered relative to it
  (:mod:`gcfkit.transports.state`).
* Its answer's tool result is rewritten in the worker pool (:mod:`gcfkit.transports.offload`)
  while the process's other lines go on to their own streams.
* Closing a stream before its answer is that protocol's cancellation: the server gets
  ``notifications/cancelled`` for the request.
* The protocol has no channel from the server to a client outside a request's answer. A
  notification that names no request (the SDK's servers send none in that protocol) goes
  to the one request in flight, and to none when there are several: clients share the
  process, and a guess could hand one client's log lines to another. A request the server
  sends (sampling, roots, elicitation) is answered at once with a JSON-RPC error, so the
  server never waits for a client that cannot be asked.

A stdio server that only speaks the handshake answers these requests as it answers any
method it does not know (``server/discover``: method not found), and a client that
negotiates (the SDK's ``auto`` mode) then falls back to ``initialize``, served by a process
per session.

>>> line, token = rename_request(b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
...                              b'"params":{"_meta":{"progressToken":1}}}', "gcfkit-7")
>>> line[:46], line[-31:], token
(b'{"jsonrpc":"2.0","id":"gcfkit-7","method":"too', b'{"progressToken":"gcfkit-7"}}}\\n', 1)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..ledger import Ledger
from ..proxy.config import Codec
from ..proxy.core import Output, ProxyConfig, ProxyCore, ToolJob
from ..proxy.jsonrpc import dump_message, error_response, parse_envelope, request_key
from .http import Captures, one_line
from .offload import Lane, Offload
from .process import DEFAULT_GRACE, ServerProcess
from .relay import receive, rewrite_job
from .state import LocalState, SessionState, caller_key, keep_named, start_from_named
from .stdio import split_lines

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = ["SharedServer", "rename_request"]

_NO_BACK_CHANNEL: Final = -32601
_PREFIX: Final = "gcfkit-"

#: A stream's queue: (message, whether it is the answer that ends the stream); None: the end.
Queue = asyncio.Queue[tuple[bytes, bool] | None]


def rename_request(data: bytes, proxy_id: str) -> tuple[bytes, Any]:
    """A request line with ``proxy_id`` as its id and, when it has one, as its progress
    token; and the client's own progress token (None without one)."""
    msg, _ = parse_envelope(data)
    assert isinstance(msg, dict)
    msg["id"] = proxy_id
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = None
    if isinstance(meta, dict) and "progressToken" in meta:
        token = meta["progressToken"]
        meta["progressToken"] = proxy_id
    return dump_message(msg), token


@dataclass
class _Exchange:
    """One client request in flight: its own id and progress token, its core, its stream."""

    request_id: Any
    token: Any
    core: ProxyCore
    lane: Lane | None
    queue: Queue
    process: ServerProcess | None
    #: Whose results these are (:func:`~gcfkit.transports.state.caller_key`), and the
    #: handle of the kept result the lane started from.
    caller: str = ""
    recalled: str | None = None


class SharedServer:
    """The shared process, started by :meth:`start` (see the module doc)."""

    def __init__(
        self,
        command: Sequence[str],
        config: ProxyConfig,
        ledger: Ledger | None,
        grace: float = DEFAULT_GRACE,
        *,
        offload: Offload | None = None,
        codec: Codec | None = None,
        captures: Captures | None = None,
        results: SessionState | None = None,
    ):
        self.command = list(command)
        self.config = config
        self.ledger = ledger
        self.grace = grace
        self.offload = offload
        self.codec = codec
        # The process's traffic is recorded whole (``--capture-dir``): the ids it sees are
        # the proxy's own, unique, so requests and answers pair as in a stdio session.
        self.captures = captures or Captures(None)
        #: The requests' named results, kept for their callers (:mod:`gcfkit.transports.state`).
        self.results: SessionState = results or LocalState()
        self.capture: Capture | None = None
        self.rewriting: set[asyncio.Task[None]] = set()
        self.process: ServerProcess | None = None
        self.reader: asyncio.Task[None] | None = None
        self.retired: set[asyncio.Task[None]] = set()
        self.waiting: dict[str, _Exchange] = {}
        self.order = itertools.count(1)
        self.starting = asyncio.Lock()
        self.writing = asyncio.Lock()

    @property
    def alive(self) -> bool:
        return (
            self.process is not None
            and self.process.returncode is None
            and self.reader is not None
            and not self.reader.done()
        )

    async def start(self) -> bool:
        """Have the process running (start it if it is not); False if it cannot start."""
        async with self.starting:
            if self.alive:
                return True
            if self.process is not None:
                self._retire(self.process)
            try:
                self.process = await ServerProcess.start(self.command, grace=self.grace)
            except OSError:
                return False
            self.captures.close(self.capture)
            self.capture = self.captures.session()
            self.reader = asyncio.create_task(self._read(self.process))
            return True

    def _retire(self, process: ServerProcess) -> None:
        # The process has exited, but what it started may still run in its group (and its
        # watchdog waits): stop them beside the new process, not when the proxy exits.
        task = asyncio.create_task(process.stop())
        self.retired.add(task)
        task.add_done_callback(self.retired.discard)

    async def send(
        self, line: bytes, request_id: Any, message: Any = None, credential: str | None = None
    ) -> tuple[str, Queue] | None:
        """Send the client's request ``line`` (id ``request_id``, ``message`` as parsed): the
        proxy's id for it and the queue its answer and progress arrive on (:meth:`events`),
        or None when the server cannot be written to. Its results are kept for the caller
        of ``credential`` (its ``Authorization`` header), and the one it names with
        ``_since``, if kept for that caller, is what its answer starts from."""
        core = ProxyCore(self.config, self.codec)
        proxy_id = f"{_PREFIX}{next(self.order)}"
        lane = self.offload.fresh() if self.offload is not None else None
        exchange = _Exchange(request_id, None, core, lane, asyncio.Queue(), self.process)
        exchange.caller = caller_key(credential)
        if lane is not None:
            exchange.recalled = await start_from_named(self.results, lane, exchange.caller, message)
        data = b""
        for out in core.from_client(one_line(line)):
            if out.to == "server":
                renamed, exchange.token = rename_request(out.data, proxy_id)
                data += renamed
        if self.capture is not None:
            self.capture.to_server(data)
        self.waiting[proxy_id] = exchange
        if not await self._write(data):
            self.waiting.pop(proxy_id, None)
            return None
        return proxy_id, exchange.queue

    async def _write(self, data: bytes) -> bool:
        process = self.process
        if process is None:
            return False
        async with self.writing:
            try:
                process.stdin.write(data)
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError, OSError):
                return False
        return True

    def _write_now(self, data: bytes) -> None:
        stdin = self.process.stdin if self.process is not None else None
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
                stdin.write(data)

    async def events(self, proxy_id: str, queue: Queue) -> AsyncGenerator[bytes, None]:
        """The messages of one request's stream, up to its answer; a stream closed before
        that cancels the request on the server."""
        answered = False
        try:
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item[0]
                if item[1]:
                    answered = True
                    return
        finally:
            if self.waiting.pop(proxy_id, None) is not None and not answered:
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": proxy_id, "reason": "the client closed the stream"},
                }
                # Written without awaiting: this runs as the stream's task is cancelled.
                self._write_now(dump_message(cancel))

    async def _read(self, process: ServerProcess) -> None:
        async for line in split_lines(process.stdout.read):
            await self._route(line)
        await process.exited(5)
        status = process.returncode
        for proxy_id, exchange in list(self.waiting.items()):
            if exchange.process is not process:
                continue  # sent to the process started after this one died
            del self.waiting[proxy_id]
            for out in exchange.core.server_exited(status):
                exchange.queue.put_nowait((out.data, True))
            exchange.queue.put_nowait(None)

    async def _route(self, line: bytes) -> None:
        if self.capture is not None:
            self.capture.from_server(line)
        msg, _ = parse_envelope(line)
        if not isinstance(msg, dict):
            self._route_unreadable(line)
            return
        method = msg.get("method")
        answered = msg.get("id")
        if method is None:
            exchange = self.waiting.pop(answered, None) if isinstance(answered, str) else None
            if exchange is None:
                return  # the answer to a request nobody waits for any more (cancelled)
            msg["id"] = exchange.request_id
            self._deliver(exchange, dump_message(msg), final=True)
        elif (key := request_key(answered)) is not None:
            # The server asks a client; there is none to ask outside a request's answer.
            reason = "no client to ask: a 2026-07-28 request has no channel back to it"
            await self._write(error_response(key, _NO_BACK_CHANNEL, reason))
        else:
            exchange = self._progress_of(msg)
            if exchange is None and len(self.waiting) == 1 and not _reports_progress(msg):
                # Naming no request, it can only be for the one in flight (or for anyone):
                # with several, it goes to none rather than maybe to another client. A
                # progress notification names one (its token is always the proxy's): one
                # nobody waits for any more (cancelled) is dropped, as its answer would be.
                exchange = next(iter(self.waiting.values()))
            if exchange is not None:
                self._deliver(exchange, dump_message(msg), final=False)

    def _route_unreadable(self, line: bytes) -> None:
        """A line the core cannot read (not UTF-8): when it answers a request waiting, it
        goes to that request's stream as the server wrote it, the client's id restored, and
        ends the stream; anything else cannot be said to be anyone's."""
        try:
            msg = json.loads(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return
        answered = msg.get("id") if isinstance(msg, dict) and "method" not in msg else None
        exchange = self.waiting.get(answered) if isinstance(answered, str) else None
        if exchange is None or not isinstance(answered, str):
            return
        pattern = rb'("id"\s*:\s*)' + re.escape(json.dumps(answered).encode())
        restored = json.dumps(exchange.request_id).encode()
        data, found = re.subn(pattern, lambda m: m.group(1) + restored, line, count=1)
        if found:
            del self.waiting[answered]
            exchange.queue.put_nowait((data if data.endswith(b"\n") else data + b"\n", True))

    def _progress_of(self, msg: dict[str, Any]) -> _Exchange | None:
        """The exchange a progress notification reports on, its token restored."""
        params = msg.get("params")
        if msg.get("method") != "notifications/progress" or not isinstance(params, dict):
            return None
        token = params.get("progressToken")
        exchange = self.waiting.get(token) if isinstance(token, str) else None
        if exchange is not None:
            params["progressToken"] = exchange.token
        return exchange

    def _deliver(self, exchange: _Exchange, line: bytes, final: bool) -> None:
        got = receive(exchange.core, exchange.lane, line)
        if isinstance(got, ToolJob):
            # Rewritten in the pool while this process's other lines go on; the answer ends
            # its stream, so nothing of that stream waits behind it.
            task = asyncio.create_task(self._rewrite(exchange, got, final))
            self.rewriting.add(task)
            task.add_done_callback(self.rewriting.discard)
            return
        self._put(exchange, got, final)

    async def _rewrite(self, exchange: _Exchange, job: ToolJob, final: bool) -> None:
        outputs = [Output("client", job.line, response=True)]  # cancelled: the original
        try:
            outputs = await rewrite_job(
                exchange.core, exchange.lane, job, exchange.core.pop_events()
            )
            if exchange.lane is not None:
                await keep_named(self.results, exchange.lane, exchange.caller, exchange.recalled)
        finally:
            self._put(exchange, outputs, final)

    def _put(self, exchange: _Exchange, outputs: list[Output], final: bool) -> None:
        if self.ledger is not None:
            for record in exchange.core.pop_records():
                self.ledger.append(record)
        for i, out in enumerate(outputs):
            exchange.queue.put_nowait((out.data, final and i == len(outputs) - 1))

    async def stop(self) -> None:
        if self.process is not None:
            await self.process.stop()
        if self.retired:  # each bounded by its own stop sequence
            await asyncio.wait(set(self.retired))
        if self.reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self.reader, self.grace + 5)
        if self.rewriting:  # each bounded by its deadline
            await asyncio.wait(set(self.rewriting), timeout=self.config.time_budget + 1)
        for task in list(self.rewriting):
            task.cancel()
        self.captures.close(self.capture)


def _reports_progress(msg: dict[str, Any]) -> bool:
    """Whether ``msg`` is a progress notification naming a token (so a request)."""
    params = msg.get("params")
    return (
        msg.get("method") == "notifications/progress"
        and isinstance(params, dict)
        and "progressToken" in params
    )
