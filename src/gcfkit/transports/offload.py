"""The worker process (:mod:`gcfkit.transports.worker`) from the event loop's side.

:class:`Offload` starts the worker, hands it one tool result at a time and waits for the
answer until the result's deadline (the proxy's time budget, counted from when the worker
can start on it). Past the deadline the shell sends the original: the worker is killed
(SIGKILL: whatever it was doing, it cannot be interrupted more gently) and a new one is
started for the next result. A worker that cannot start, or keeps dying, leaves every result
as the server wrote it. Any shell can use it; the stdio shell does.

>>> import asyncio
>>> from gcfkit.proxy.config import ProxyConfig
>>> from gcfkit.proxy.rewrite import Call
>>> async def demo() -> bytes | None:
...     offload = Offload(ProxyConfig(primer=False))
...     await offload.start()
...     line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}\\n'
...     try:
...         return await offload.rewrite(line, Call("t", "t"), "demo")
...     finally:
...         await offload.close()
>>> asyncio.run(demo())
b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1,2]"}]}}\\n'
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from ..proxy.config import Codec, ProxyConfig
from ..proxy.core import Output, ProxyCore, ToolJob
from ..proxy.rewrite import Call
from ..proxy.sequencer import Sequencer
from .worker import HEADER_SIZE, decode_frame_length, encode_frame

__all__ = ["Offload", "OffloadFailed", "ServerLines"]

#: Seconds a starting worker may take to be ready (imports and tokenizer) before results
#: pass unrewritten; a loaded machine can take several.
_STARTUP_TIMEOUT: Final = 30.0

#: Past a deadline, how long an answer already on its way may still take to arrive.
_SLACK: Final = 0.02

#: Deaths the proxy did not cause, in a row, after which no worker is started again.
_MAX_CRASHES: Final = 3


class OffloadFailed(Exception):
    """No answer in time (or no worker): the original goes out. ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Offload:
    """One worker process for one proxy session (see the module docstring)."""

    def __init__(
        self,
        config: ProxyConfig,
        codec: Codec | None = None,
        *,
        ledger_path: Path | str | None = None,
        python: str | None = None,
    ) -> None:
        self.config = config
        self._codec = codec or Codec()
        self._ledger_path = str(ledger_path) if ledger_path is not None else None
        self._python = python or sys.executable
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._futures: dict[int, asyncio.Future[bytes | None]] = {}
        self._ids = itertools.count()
        self._killed: set[int] = set()
        self._crashes = 0
        self._init: bytes | None = None
        # Every result handle the session's workers issued, so a new one never reissues one.
        self._spent: list[str] = []
        self._starting: asyncio.Lock | None = None
        self.restarts = 0

    @property
    def available(self) -> bool:
        """Whether results can still be rewritten (a worker runs or may be started)."""
        return self._init is not None and self._crashes < _MAX_CRASHES

    async def start(self) -> bool:
        """Start the worker (its warm-up runs while the server starts); False when it cannot
        be: the options or codec do not pickle (test doubles), or no interpreter runs."""
        try:
            self._init = encode_frame(("init", self.config, self._codec, self._ledger_path, []))
        except (pickle.PicklingError, AttributeError, TypeError):
            self._init = None
            return False
        return await self._spawn()

    async def _spawn(self) -> bool:
        assert self._init is not None
        init = encode_frame(("init", self.config, self._codec, self._ledger_path, self._spent))
        package_root = str(Path(__file__).resolve().parents[2])
        code = (
            f"import sys; sys.path.insert(0, {package_root!r}); "
            "from gcfkit.transports.worker import main; main()"
        )
        try:
            process = await asyncio.create_subprocess_exec(
                self._python,
                "-c",
                code,
                str(os.getpid()),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=None,
            )
        except OSError:
            self._crashes = _MAX_CRASHES
            return False
        assert process.stdin is not None
        self._process = process
        self._ready = asyncio.Event()
        process.stdin.write(init)
        self._reader = asyncio.create_task(self._read(process))
        return True

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        stdout = process.stdout
        assert stdout is not None
        try:
            while True:
                header = await stdout.readexactly(HEADER_SIZE)
                frame = pickle.loads(await stdout.readexactly(decode_frame_length(header)))
                if frame[0] == "ready":
                    self._crashes = 0
                    self._ready.set()
                elif frame[0] == "answer":
                    self._spent.extend(frame[3])
                    future = self._futures.pop(frame[1], None)
                    if future is not None and not future.done():
                        future.set_result(frame[2])
        except (asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError, EOFError):
            pass
        finally:
            # The worker is gone (exited, crashed or killed): nothing more will be answered.
            if process.pid not in self._killed:
                self._crashes += 1
            self._fail_all("worker-exited")
            if self._process is process:
                self._process = None
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 5)

    def _fail_all(self, reason: str) -> None:
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(OffloadFailed(reason))

    async def _running(self) -> asyncio.subprocess.Process:
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:  # one spawn, however many results arrive meanwhile
            if self._process is None:
                if not self.available:
                    raise OffloadFailed("no-worker")
                self.restarts += 1
                if not await self._spawn():
                    raise OffloadFailed("no-worker")
            assert self._process is not None
            return self._process

    async def rewrite(self, line: bytes, call: Call, server: str) -> bytes | None:
        """The line to send for the tools/call response ``line`` (None: send it as it is).

        Raises :class:`OffloadFailed` when no answer comes by the deadline (the worker is
        then killed, and restarted for the next result) or there is no worker.
        """
        process = await self._running()
        if not self._ready.is_set():
            reader = self._reader
            ready = asyncio.ensure_future(self._ready.wait())
            waits: set[asyncio.Future[Any]] = {ready} if reader is None else {ready, reader}
            await asyncio.wait(waits, timeout=_STARTUP_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            if not self._ready.is_set():
                # It died while starting (its reader ended), or takes too long to start.
                self._kill(process)
                raise OffloadFailed("worker-start")
        # The budget runs from when the worker can start on it: waiting for a worker to
        # load its tokenizer is not the result's fault.
        deadline = time.monotonic() + self.config.time_budget
        job_id = next(self._ids)
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._futures[job_id] = future
        stdin = process.stdin
        assert stdin is not None
        try:
            stdin.write(encode_frame(("job", job_id, line, call, deadline, server)))
            await stdin.drain()
        except (ConnectionError, RuntimeError):
            self._futures.pop(job_id, None)
            raise OffloadFailed("worker-exited") from None
        try:
            return await asyncio.wait_for(
                asyncio.shield(future), max(deadline - time.monotonic(), 0.0) + _SLACK
            )
        except asyncio.TimeoutError:
            # Past the deadline the worker is somewhere inside one step (an encode, a count)
            # that cannot be interrupted: kill it, and start afresh for the next result.
            self._futures.pop(job_id, None)
            self._kill(process)
            raise OffloadFailed("time-budget") from None

    def tell(self, events: list[tuple[str, ...]]) -> None:
        """Session events from the core (:meth:`ProxyCore.pop_events`): a delta slot to
        forget, a new session. They reach the worker before any later result; a worker
        started later starts from nothing anyway."""
        process = self._process
        if not events or process is None or process.stdin is None:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            for event in events:
                process.stdin.write(encode_frame(event))

    def _kill(self, process: asyncio.subprocess.Process) -> None:
        self._killed.add(process.pid)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        if self._process is process:
            self._process = None
        self._fail_all("killed")

    async def close(self) -> None:
        """Stop the worker: its stdin closes (it exits at once between results), and it is
        killed if it has not gone within a second. Returns when it is reaped."""
        process, self._process = self._process, None
        self._init = None
        if process is not None:
            self._killed.add(process.pid)
            if process.stdin is not None:
                with contextlib.suppress(Exception):
                    process.stdin.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(_exited(process), 1.0)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        reader = self._reader
        if reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader, 5)
        self._fail_all("closed")


async def _exited(process: asyncio.subprocess.Process) -> Any:
    while process.returncode is None:
        await asyncio.sleep(0.01)
    return process.returncode


class ServerLines:
    """What the server writes, relayed to the client in order while tool results are
    rewritten by the worker: the line-oriented half of a shell, shared by every shell.

    Each line goes through :meth:`ProxyCore.receive_server`; a :class:`ToolJob` gets its
    place in a :class:`~gcfkit.proxy.sequencer.Sequencer` and runs in the worker; ``write``
    gets every line the sequencer lets go, in order (see its module for the one rule).
    Without a worker (it could not start) results are rewritten in process, in order.
    At most ``max_jobs`` results are in flight; the next line waits for a place, so a
    flood of large results slows the server's pipe rather than the proxy's memory.
    """

    def __init__(
        self,
        core: ProxyCore,
        offload: Offload | None,
        write: Callable[[bytes], Awaitable[None]],
        *,
        max_jobs: int = 8,
    ) -> None:
        self.core = core
        self.offload = offload if offload is not None and offload.available else None
        self._write = write
        self._sequencer = Sequencer()
        self._lock = asyncio.Lock()
        self._places = asyncio.Semaphore(max_jobs)
        self._jobs: set[asyncio.Task[None]] = set()

    async def feed(self, line: bytes) -> None:
        """One line the server wrote."""
        if self.offload is None or not self.offload.available:
            for out in self.core.from_server(line):
                self._sequencer.add(out.data, response=out.response)
            await self._release()
            return
        got = self.core.receive_server(line)
        if isinstance(got, ToolJob):
            await self._places.acquire()
            ticket = self._sequencer.hold()
            task = asyncio.create_task(self._run(ticket, got))
            self._jobs.add(task)
            task.add_done_callback(self._jobs.discard)
            return
        for out in got:
            self._sequencer.add(out.data, response=out.response)
        await self._release()

    async def add(self, outputs: list[Output]) -> None:
        """Lines the core made itself (``server_exited``), behind everything before them."""
        for out in outputs:
            self._sequencer.add(out.data, response=out.response)
        await self._release()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for the results in flight (each is bounded by its deadline); past
        ``timeout`` the rest go out as the server wrote them."""
        jobs = set(self._jobs)
        if jobs:
            await asyncio.wait(jobs, timeout=timeout)
        for task in list(self._jobs):
            task.cancel()
        if self._jobs:
            await asyncio.wait(set(self._jobs))
        await self._release()

    async def _run(self, ticket: int, job: ToolJob) -> None:
        data = job.line
        try:
            assert self.offload is not None
            self.offload.tell(self.core.pop_events())
            try:
                line = await self.offload.rewrite(job.line, job.call, job.server)
                outputs = self.core.finish(job, line)
            except OffloadFailed as e:
                outputs = self.core.finish(job, None, failed=e.reason)
            except Exception as e:  # never break the agent: the original goes out
                outputs = self.core.finish(job, None, failed=f"error-{type(e).__name__}")
            data = b"".join(out.data for out in outputs)
        finally:
            # Cancelled too (shutdown): the place is filled, with the original at worst.
            self._sequencer.fill(ticket, data)
            self._places.release()
        await self._release()

    async def _release(self) -> None:
        async with self._lock:  # one writer, so lines leave in the order they were let go
            for data in self._sequencer.ready():
                await self._write(data)
