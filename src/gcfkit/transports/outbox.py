"""One output stream of what the server wrote (a stdio client's stdout, one SSE stream, one
JSON response), in the order :mod:`gcfkit.proxy.sequencer` defines, each tool result
rewritten in the worker pool (:mod:`gcfkit.transports.offload`) while everything else
passes at once.

>>> import asyncio
>>> from gcfkit.proxy.core import ProxyConfig, ProxyCore
>>> async def demo() -> list[bytes]:
...     written: list[bytes] = []
...     async def write(data: bytes, tag: None) -> None:
...         written.append(data)
...     core = ProxyCore(ProxyConfig(primer=False))
...     _ = core.from_client(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
...     outbox = Outbox(core, None, write)
...     await outbox.feed(b'{"jsonrpc":"2.0","id":1,"result":{}}\\n', None)
...     return written
>>> asyncio.run(demo())
[b'{"jsonrpc":"2.0","id":1,"result":{}}\\n']
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeVar

from ..proxy.core import Output, ProxyCore, ToolJob
from ..proxy.rewrite import SessionEvent
from ..proxy.sequencer import Sequencer
from .offload import Lane
from .relay import receive, rewrite_now, submit_job

__all__ = ["JOIN_BYTES", "Outbox", "coalesce"]

T = TypeVar("T")


class Outbox(Generic[T]):
    """One output stream of what the server wrote (a stdio client's stdout, one SSE
    stream, one JSON response), in order while tool results are rewritten in the pool.

    :meth:`receive` hands a line to the core (:meth:`ProxyCore.receive_server`, or, without
    a worker, :meth:`ProxyCore.from_server`: rewritten here, in order); :meth:`put` gives
    what it returned its place: a :class:`ToolJob` answered in this process is answered in
    line (:func:`~.relay.rewrite_now`), one that goes to a worker holds a place in a
    :class:`~gcfkit.proxy.sequencer.Sequencer` while it is rewritten, everything else is
    ready at once; ``write(data, tag)`` gets every line the sequencer lets go, in order,
    with the tag it was put with (an SSE event's id, the stream it is for); ``joined``
    (a line-oriented output such as stdio): the lines let go together for one tag are
    written at once, one write (and one wake-up of the reader) for them all. At most
    ``max_jobs`` results are in flight; the next waits for a place, so a flood of large
    results slows the server down rather than growing the proxy's memory.

    A shell that routes the server's lines to several outputs (one per request stream)
    calls :meth:`receive` once per line and :meth:`put` on the output it chose.
    """

    def __init__(
        self,
        core: ProxyCore,
        lane: Lane | None,
        write: Callable[[bytes, T], Awaitable[None]],
        *,
        max_jobs: int = 8,
        joined: bool = False,
    ) -> None:
        self.core = core
        self.lane = lane
        self._write = write
        self._joined = joined
        self._sequencer: Sequencer[tuple[bytes, T]] = Sequencer()
        self._lock = asyncio.Lock()
        self._places = asyncio.Semaphore(max_jobs)
        self._jobs: set[asyncio.Task[None]] = set()
        #: Writes of lines let go, each in a task of its own (:meth:`_release`).
        self._writes: set[asyncio.Task[None]] = set()

    @property
    def offloaded(self) -> bool:
        """Whether tool results go to the pool (else :meth:`receive` rewrites them here)."""
        return self.lane is not None and self.lane.available

    def receive(self, line: bytes) -> list[Output] | ToolJob:
        """The core's answer to one line the server wrote (see the class docstring)."""
        return receive(self.core, self.lane, line)

    async def feed(self, line: bytes, tag: T, *, release: bool = True) -> list[Output]:
        """One line the server wrote, to this output; returns the lines it became at once
        ([] for a tool result being rewritten). ``release=False``: what is ready waits for
        the next line fed (a shell feeding the lines of one read, the last released)."""
        got = self.receive(line)
        await self.put(got, tag, release=release)
        return [] if isinstance(got, ToolJob) else got

    async def put(self, got: list[Output] | ToolJob, tag: T, *, release: bool = True) -> None:
        """What :meth:`receive` returned, in its place behind everything put before
        (``release``: see :meth:`feed`)."""
        if not isinstance(got, ToolJob):
            await self.add(got, tag, release=release)
            return
        # Taken now, in the order lines arrive: they are for the state before this result.
        events = self.core.pop_events()
        now = rewrite_now(self.core, self.lane, got, events)
        if now is not None:
            # Answered in line (most results: small ones, in this process): no task, the
            # same place in the order as a result rewritten in a worker would take.
            self._sequencer.add((b"".join(out.data for out in now), tag), response=True)
            if release:
                await self._release()
            return
        # For a worker: what is ready ahead of it goes now, not after its rewrite (nor after
        # a wait for a place).
        await self._release()
        await self._places.acquire()
        ticket = self._sequencer.hold()
        task = asyncio.create_task(self._run(ticket, got, tag, events))
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def add(self, outputs: list[Output], tag: T, *, release: bool = True) -> None:
        """Lines ready as they are (the core's own, ``server_exited``), behind everything
        put before them (``release``: see :meth:`feed`)."""
        for out in outputs:
            self._sequencer.add((out.data, tag), response=out.response)
        if release:
            await self._release()

    async def flush(self) -> None:
        """Write what is ready now (what lines fed with ``release=False`` left waiting)."""
        await self._release()

    @property
    def busy(self) -> bool:
        """Whether a result is still being rewritten."""
        return bool(self._jobs)

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
        if timeout is not None:
            # The output is given up on (shutdown): a write to a client that reads no more
            # must not hold the lock, so the rest can still be tried.
            for task in list(self._writes):
                task.cancel()
            if self._writes:
                await asyncio.wait(set(self._writes))
        await self._release()

    async def _run(self, ticket: int, job: ToolJob, tag: T, events: list[SessionEvent]) -> None:
        data = job.line
        try:
            outputs = await submit_job(self.core, self.lane, job, events)
            data = b"".join(out.data for out in outputs)
        finally:
            # Cancelled too (shutdown): the place is filled, with the original at worst.
            self._sequencer.fill(ticket, (data, tag))
            self._places.release()
        await self._release()

    async def _release(self) -> None:
        # Lines let go have left the sequencer: a task cancelled while they are written (a
        # client's cancel of the request whose stream this is) must neither lose them nor
        # stop one halfway (the next line would be glued to its first part). The writes go
        # on in a task of their own, which holds the lock until they are out.
        task = asyncio.ensure_future(self._write_ready())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        await asyncio.shield(task)

    async def _write_ready(self) -> None:
        async with self._lock:  # one writer, so lines leave in the order they were let go
            ready = self._sequencer.ready()
            if self._joined and len(ready) > 1:
                # A line-oriented output: the lines let go together leave in one write
                # (consecutive ones for the same tag).
                ready = _joined(ready)
            for data, tag in ready:
                await self._write(data, tag)


def _joined(ready: list[tuple[bytes, T]]) -> list[tuple[bytes, T]]:
    """Consecutive lines for the same tag as one (:func:`coalesce`d).

    >>> _joined([(b"a", 1), (b"b", 1), (b"c", 2)])
    [(b'ab', 1), (b'c', 2)]
    """
    out: list[tuple[bytes, T]] = []
    run: list[bytes] = []
    for i, (data, tag) in enumerate(ready):
        run.append(data)
        if i + 1 == len(ready) or ready[i + 1][1] != tag:
            out.extend((joined, tag) for joined in coalesce(run))
            run = []
    return out


#: Lines up to this size are written together with their neighbours; a bigger one goes in
#: a write of its own (joining it would copy it, for a saving only small lines see).
JOIN_BYTES: Final = 64 * 1024


def coalesce(lines: list[bytes]) -> list[bytes]:
    """What to write for ``lines``, in order: each run of lines of up to
    :data:`JOIN_BYTES` joined into one write, each bigger line on its own.

    >>> [len(x) for x in coalesce([b"a", b"b", b"x" * 70_000, b"c"])]
    [2, 70000, 1]
    """
    out: list[bytes] = []
    run: list[bytes] = []
    for line in lines:
        if len(line) > JOIN_BYTES:
            if run:
                out.append(b"".join(run))
                run = []
            out.append(line)
        else:
            run.append(line)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out
