"""The worker processes (:mod:`gcfkit.transports.worker`) from the event loop's side.

Every shell rewrites tool results through this module, so that nothing a result costs can
hold up its relay (one mechanism for stdio and HTTP):

* :class:`Offload` is a pool of worker processes: one for a stdio proxy (one session), a
  few for an HTTP server in front of many. Each worker runs one result at a time; the pool
  holds the rest.
* :class:`Lane` is one session's place in the pool (:meth:`Offload.session`); a request
  that belongs to no session (the stateless 2026-07-28 protocol) gets a fresh one of its
  own (:meth:`Offload.fresh`).
* :class:`Outbox` is one output stream (stdout, one SSE stream, one JSON response): what the
  server wrote, in the order :mod:`gcfkit.proxy.sequencer` defines, each tool result
  rewritten in the pool while everything else passes at once.

**Deadlines.** A result's time budget is counted from when it reaches the pool, or from
when the pool first has a worker ready (loading the tokenizer is not the result's fault).
Past it the original is sent: a result still waiting for a worker is never started, and a
worker still busy with it is killed (SIGKILL: whatever it is doing cannot be interrupted
more gently), and another is started. A worker that cannot start, or keeps dying, leaves
every result as the server wrote it (never rewritten in the event loop instead: whatever
killed the workers would take the proxy down); one that cannot be spawned (OSError) once
the pool has started is tried again by a later result, after a backoff (results meanwhile
pass as the server wrote them: none waits for a worker that does not exist).

**Sessions and workers.** A session's state (what its client holds for deltas and relative
answers) lives in the worker that rewrote its last result, its *home*: state carried with
each job instead would cost the event loop a pickle of it per result, proportional to the
result's size, which is what must stay off the loop. So the rules, for a result of session
S:

* it goes to S's home when that is idle; to any idle worker when S has no home (the new
  home starts from nothing: full answers, always correct);
* when S's home is busy with *another* session's result, it waits at most
  :data:`PATIENCE` seconds for it (ordinary results take milliseconds, and S keeps its
  state), then moves to an idle worker, which becomes S's home (its state starts over there);
* when S's home is busy with S's own earlier result, it waits the same, then runs *stray* on
  an idle worker: rewritten without S's state, named by no handle, and S's home forgets
  that call's delta base before S's next result;
* with no worker idle, it waits for one (its deadline still runs), and the pool grows
  towards ``max_workers``.

So one session's large result holds up no other session for more than :data:`PATIENCE`,
and no message that is not a tool result at all. Killing a worker at a deadline costs only
the result it was busy with, and the state of the sessions that lived there.

>>> import asyncio
>>> from gcfkit.proxy.config import ProxyConfig
>>> from gcfkit.proxy.rewrite import Call
>>> async def demo() -> bytes | None:
...     offload = Offload(ProxyConfig(primer=False))
...     await offload.start()
...     line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}\\n'
...     try:
...         return await offload.session().rewrite(line, Call("t", "t"), "demo")
...     finally:
...         await offload.close()
>>> asyncio.run(demo())
b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1,2]"}]}}\\n'
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import pickle
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

from ..proxy.config import Codec, ProxyConfig
from ..proxy.core import Output, ProxyCore, ToolJob
from ..proxy.record import LedgerRecord
from ..proxy.rewrite import Call
from ..proxy.sequencer import Sequencer
from .worker import HEADER_SIZE, decode_frame_length, encode_frame

__all__ = [
    "MAX_WORKERS",
    "PATIENCE",
    "Lane",
    "Observer",
    "Offload",
    "OffloadFailed",
    "Outbox",
    "answer",
    "receive",
    "server_pool",
    "settle",
    "start_or_warm",
    "start_pool",
]

#: Seconds a starting worker may take to be ready (imports and tokenizer) before results
#: pass unrewritten; a loaded machine can take several.
_STARTUP_TIMEOUT: Final = 30.0

#: Past a deadline, how long an answer already on its way may still take to arrive.
_SLACK: Final = 0.02

#: Deaths the proxy did not cause, in a row, after which no worker is started again.
_MAX_CRASHES: Final = 3

#: Seconds after a worker could not be spawned (OSError: a fork refused under load) before a
#: result tries again, doubled at each failure up to the second figure; meanwhile results
#: pass unrewritten.
_RESPAWN_AFTER: Final = (0.5, 30.0)

#: Seconds a result waits for its session's worker while that is busy, before it goes to an
#: idle one (see the module docstring); never more than a quarter of the time budget.
PATIENCE: Final = 0.05

#: Worker processes an HTTP server's pool may run (:func:`server_pool`): one to start with,
#: more while several large results are in flight at once.
MAX_WORKERS: Final = max(1, min(4, os.cpu_count() or 1))

#: Seconds a worker beyond the pool's minimum may stay idle before it is stopped.
_RETIRE_AFTER: Final = 60.0

T = TypeVar("T")


class Observer(Protocol):
    """What hears of the pool's results (:class:`gcfkit.transports.metrics.Metrics`): each
    ledger record a worker wrote, and each result answered (``outcome``: ``rewritten``,
    ``original`` or ``fallback``, ``seconds`` after it reached the pool)."""

    def record(self, record: LedgerRecord) -> None: ...

    def settled(self, server: str, tool: str, outcome: str, seconds: float) -> None: ...


class OffloadFailed(Exception):
    """No answer in time (or no worker): the original goes out. ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(eq=False)
class _Job:
    id: int
    lane: Lane
    line: bytes
    call: Call
    server: str
    events: list[tuple[str, ...]]
    future: asyncio.Future[bytes | None]
    queued: float
    deadline: float | None = None
    worker: _Worker | None = None
    timer: asyncio.TimerHandle | None = None
    stray: bool = False
    #: Its events reached a worker (they went with it).
    sent: bool = False
    #: Ended without its answer: the session's home was told so (:meth:`Offload._owe`).
    owed: bool = False


@dataclass(eq=False)
class _Worker:
    process: asyncio.subprocess.Process
    ready: bool = False
    job: _Job | None = None
    #: The keys of the sessions whose state lives here.
    homes: set[int] = field(default_factory=set)
    killed: bool = False
    #: Answered its last job, still writing that job's ledger record (counting its tokens).
    booking: bool = False
    done: int = 0
    reader: asyncio.Task[None] | None = None
    starting: asyncio.TimerHandle | None = None
    retiring: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, frame: Any) -> bool:
        stdin = self.process.stdin
        if stdin is None or stdin.is_closing():
            return False
        try:
            stdin.write(encode_frame(frame))
        except (ConnectionError, RuntimeError):
            return False
        return True


class Lane:
    """One session's place in the pool: its results are rewritten in order against the
    session's own state (see the module docstring). Made by :meth:`Offload.session` (or
    :meth:`Offload.fresh`: no state kept, for one request); :meth:`close` when the session
    ends."""

    def __init__(self, pool: Offload, key: int | None) -> None:
        self._pool = pool
        self.key = key
        self.home: _Worker | None = None
        #: Every result handle the session's workers issued, so a new home never reissues one.
        self.spent: list[str] = []
        #: Events for the home before the session's next result (a stray result's forget).
        self.owed: list[tuple[str, ...]] = []
        self.closed = False

    @property
    def available(self) -> bool:
        """Whether results can still be rewritten (a worker runs or may be started)."""
        return self._pool.available and not self.closed

    @property
    def gave_up(self) -> bool:
        """Whether the pool stopped after its workers kept dying (:attr:`Offload.gave_up`)."""
        return self._pool.gave_up

    async def rewrite(
        self, line: bytes, call: Call, server: str, events: Iterable[tuple[str, ...]] = ()
    ) -> bytes | None:
        """The line to send for the tools/call response ``line`` (None: send it as it is).
        ``events`` (:meth:`ProxyCore.pop_events`) reach the session's state before it.

        Raises :class:`OffloadFailed` when no answer comes by the deadline, or there is no
        worker.
        """
        if not self.available:
            raise OffloadFailed("no-worker")
        job = self._pool._submit(self, line, call, server, list(events))
        job.future.add_done_callback(functools.partial(self._pool._settled, job))
        try:
            return await job.future
        except asyncio.CancelledError:
            self._pool._abandon(job)
            raise

    def close(self) -> None:
        """The session is over: its state in the pool is dropped."""
        if self.closed:
            return
        self.closed = True
        self._pool._close_lane(self)


class Offload:
    """A pool of ``workers`` to ``max_workers`` worker processes (see the module docstring).

    ``codec`` replaces the codec functions (tests: it must pickle, by reference, to reach
    the workers); ``ledger_path`` is where the workers append their records.
    """

    def __init__(
        self,
        config: ProxyConfig,
        codec: Codec | None = None,
        *,
        ledger_path: Path | str | None = None,
        python: str | None = None,
        workers: int = 1,
        max_workers: int | None = None,
    ) -> None:
        self.config = config
        self.codec = codec or Codec()
        self._ledger_path = str(ledger_path) if ledger_path is not None else None
        self._python = python or sys.executable
        self.min_workers = max(1, workers)
        self.max_workers = max(self.min_workers, max_workers or self.min_workers)
        self.patience = min(PATIENCE, config.time_budget / 4)
        self._init: bytes | None = None
        self._workers: list[_Worker] = []
        self._queue: deque[_Job] = deque()
        self._lanes: dict[int, Lane] = {}
        self._keys = itertools.count()
        self._ids = itertools.count()
        self._crashes = 0
        self._closed = False
        self._started = False
        #: When a failed spawn may be tried again (monotonic), and the wait after the next.
        self._respawn_at = 0.0
        self._respawn_wait = _RESPAWN_AFTER[0]
        self._wake: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task[Any]] = set()
        #: Workers :meth:`_grow` asked for that are not in ``_workers`` yet (being spawned).
        self._spawning = 0
        #: Workers started after the first ones (a deadline, a crash, growth).
        self.restarts = 0
        #: Results that moved to another worker (a new home) because theirs was busy.
        self.moved = 0
        #: Results rewritten stray (their session's own worker was busy with its last one).
        self.strays = 0
        #: Told of every record and answer (the HTTP shells' metrics); never fails a result.
        self.observer: Observer | None = None

    # -- the public side ---------------------------------------------------------------

    @property
    def available(self) -> bool:
        """Whether results can still be rewritten (a worker runs or may be started)."""
        return self._init is not None and self._crashes < _MAX_CRASHES and not self._closed

    @property
    def gave_up(self) -> bool:
        """Whether workers kept dying (:data:`_MAX_CRASHES` in a row): results then pass as
        the server wrote them, never rewritten in the event loop, where whatever killed
        the workers (a codec crash on some input) would take the proxy down with it. A pool
        that never started is not one that gave up: its shell rewrites results itself."""
        return self._started and self._crashes >= _MAX_CRASHES

    @property
    def pids(self) -> list[int]:
        """The worker processes running now."""
        return [w.pid for w in self._workers]

    async def start(self) -> bool:
        """Start the first workers (their warm-up runs while the server starts); False when
        none can be: the options or codec do not pickle (test doubles), or no interpreter
        runs."""
        try:
            self._init = encode_frame(("init", self.config, self.codec, self._ledger_path))
        except (pickle.PicklingError, AttributeError, TypeError):
            self._init = None
            return False
        for _ in range(self.min_workers):
            if not await self._spawn():
                return False
        self.restarts = 0
        self._started = True
        return True

    def session(self) -> Lane:
        """A lane for a new session (its state lives in the pool until :meth:`Lane.close`)."""
        lane = Lane(self, next(self._keys))
        assert lane.key is not None
        self._lanes[lane.key] = lane
        return lane

    def fresh(self) -> Lane:
        """A lane whose every result starts from nothing (a request with no session)."""
        return Lane(self, None)

    async def close(self) -> None:
        """Stop every worker: its stdin closes (it exits at once between results), and it
        is killed if it has not gone within a second. Returns when all are reaped."""
        self._closed = True
        if self._wake is not None:
            self._wake.cancel()
        for job in list(self._queue):
            self._fail(job, "closed")
        self._queue.clear()
        workers = list(self._workers)
        for worker in workers:
            worker.killed = True
            if worker.starting is not None:
                worker.starting.cancel()
            with contextlib.suppress(Exception):
                if worker.process.stdin is not None:
                    worker.process.stdin.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(*(_exited(w.process) for w in workers), return_exceptions=True),
                1.0,
            )
        for worker in workers:
            _sigkill(worker.process)
        readers = [w.reader for w in workers if w.reader is not None]
        if readers:
            await asyncio.wait(readers, timeout=5)
        for task in list(self._background):
            task.cancel()

    # -- workers -----------------------------------------------------------------------

    async def _spawn(self) -> bool:
        assert self._init is not None
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
            if not self._started:  # no worker at all: the shell rewrites results itself
                self._crashes = _MAX_CRASHES
            else:  # a transient refusal must not end the pool: a later result tries again
                self._respawn_at = time.monotonic() + self._respawn_wait
                self._respawn_wait = min(self._respawn_wait * 2, _RESPAWN_AFTER[1])
            if not self._workers:
                self._fail_queue("no-worker")
            return False
        self._respawn_wait = _RESPAWN_AFTER[0]
        worker = _Worker(process)
        if self._closed:
            _sigkill(process)
            await process.wait()
            return False
        self._workers.append(worker)
        assert process.stdin is not None
        process.stdin.write(self._init)
        worker.reader = asyncio.create_task(self._read(worker))
        loop = asyncio.get_running_loop()
        worker.starting = loop.call_later(_STARTUP_TIMEOUT, self._too_slow, worker)
        return True

    def _grow(self) -> None:
        """Start a worker in the background (counted in the pool at once); none while a
        failed spawn waits to be tried again."""
        if time.monotonic() < self._respawn_at:
            return
        task = asyncio.ensure_future(self._spawn())
        self._spawning += 1
        self._background.add(task)
        task.add_done_callback(self._spawned)
        self.restarts += 1

    def _spawned(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        self._spawning -= 1

    def _too_slow(self, worker: _Worker) -> None:
        if not worker.ready:
            self._crashes += 1  # a worker that never starts is no result's fault
            self._kill(worker)

    async def _read(self, worker: _Worker) -> None:
        stdout = worker.process.stdout
        assert stdout is not None
        try:
            while True:
                header = await stdout.readexactly(HEADER_SIZE)
                frame = pickle.loads(await stdout.readexactly(decode_frame_length(header)))
                if frame[0] == "ready":
                    self._ready(worker)
                elif frame[0] == "answer":
                    self._answered(worker, frame[1], frame[2], frame[3])
                elif frame[0] == "idle":
                    worker.booking = False
                    if len(frame) > 1 and frame[1] is not None:
                        self._observe(functools.partial(_report_record, frame[1]))
                    self._dispatch()
        except (asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError, EOFError):
            pass
        finally:
            self._gone(worker)
            _sigkill(worker.process)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.process.wait(), 5)

    def _ready(self, worker: _Worker) -> None:
        if worker.starting is not None:
            worker.starting.cancel()
        first = not self._any_ready()
        worker.ready = True
        self._crashes = 0
        if first:
            # The clocks of the results that waited for a worker to exist start now.
            for job in self._queue:
                if job.deadline is None:
                    self._start_clock(job)
        self._dispatch()

    def _answered(
        self, worker: _Worker, job_id: int, line: bytes | None, minted: list[str]
    ) -> None:
        job = worker.job
        if job is None or job.id != job_id:
            return
        worker.job = None
        worker.booking = True
        worker.done += 1
        job.worker = None
        if not job.stray:
            job.lane.spent.extend(minted)
        if job.timer is not None:
            job.timer.cancel()
        if not job.future.done():
            job.future.set_result(line)
        if len(self._workers) > self.min_workers:
            if worker.retiring is not None:
                worker.retiring.cancel()
            loop = asyncio.get_running_loop()
            worker.retiring = loop.call_later(_RETIRE_AFTER, self._retire, worker, worker.done)
        self._dispatch()

    def _settled(self, job: _Job, future: asyncio.Future[bytes | None]) -> None:
        if future.cancelled():
            return  # the caller went away: nothing was answered
        failed = future.exception() is not None
        line = None if failed else future.result()
        outcome = "fallback" if failed else "original" if line is None else "rewritten"
        seconds = time.monotonic() - job.queued
        self._observe(lambda seen: seen.settled(job.server, job.call.tool, outcome, seconds))

    def _observe(self, report: Callable[[Observer], None]) -> None:
        if self.observer is None:
            return
        with contextlib.suppress(Exception):  # losing a statistic must never break a call
            report(self.observer)

    def _retire(self, worker: _Worker, done: int) -> None:
        if worker.job is None and worker.done == done and len(self._workers) > self.min_workers:
            worker.killed = True
            self._unhome(worker)
            with contextlib.suppress(Exception):
                if worker.process.stdin is not None:
                    worker.process.stdin.close()

    def _gone(self, worker: _Worker) -> None:
        """A worker exited, crashed or was killed: nothing more will be answered there."""
        if worker not in self._workers:
            return
        self._workers.remove(worker)
        if worker.starting is not None:
            worker.starting.cancel()
        if not worker.killed:
            self._crashes += 1
        self._unhome(worker)
        job, worker.job = worker.job, None
        if job is not None:
            self._fail(job, "worker-exited")
        if self._closed:
            return
        if not self.available:
            self._fail_queue("no-worker")
            return
        size = self._size()
        if size < self.min_workers or (
            self._queue and not self._idle() and size < self.max_workers
        ):
            self._grow()
        if not self._size():  # none could be started (a spawn failed a moment ago)
            self._fail_queue("no-worker")
        self._dispatch()

    def _unhome(self, worker: _Worker) -> None:
        for key in worker.homes:
            lane = self._lanes.get(key)
            if lane is not None and lane.home is worker:
                lane.home = None
                lane.owed.clear()  # the state they were for is gone
        worker.homes.clear()

    def _kill(self, worker: _Worker) -> None:
        worker.killed = True  # by the proxy: not a crash
        _sigkill(worker.process)

    def _size(self) -> int:
        return len(self._workers) + self._spawning

    def _any_ready(self) -> bool:
        # A killed worker stays in the pool until its reader sees it go: it takes nothing.
        return any(w.ready and not w.killed for w in self._workers)

    def _idle(self) -> list[_Worker]:
        return [w for w in self._workers if w.job is None and not w.booking and not w.killed]

    # -- jobs --------------------------------------------------------------------------

    def _submit(
        self, lane: Lane, line: bytes, call: Call, server: str, events: list[tuple[str, ...]]
    ) -> _Job:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes | None] = loop.create_future()
        job = _Job(next(self._ids), lane, line, call, server, events, future, time.monotonic())
        if not self._size():
            if time.monotonic() < self._respawn_at:  # a spawn just failed: no worker to wait for
                self._fail(job, "no-worker")
                return job
            self._grow()
        self._queue.append(job)
        if self._any_ready():
            self._start_clock(job)
        else:
            job.timer = loop.call_later(_STARTUP_TIMEOUT, self._expire, job, "worker-start")
        self._dispatch()
        return job

    def _start_clock(self, job: _Job) -> None:
        if job.timer is not None:
            job.timer.cancel()
        job.deadline = time.monotonic() + self.config.time_budget
        delay = job.deadline - time.monotonic() + _SLACK
        job.timer = asyncio.get_running_loop().call_later(delay, self._expire, job, "time-budget")

    def _expire(self, job: _Job, reason: str) -> None:
        if job in self._queue:
            self._queue.remove(job)
        worker = job.worker
        if worker is not None and worker.job is job:
            # Past the deadline the worker is somewhere inside one step (an encode, a count)
            # that cannot be interrupted: kill it (even when nobody waits for the answer any
            # more: it would stay busy); another is started for what comes next.
            worker.job = None
            job.worker = None
            self._kill(worker)
            self._unhome(worker)
        self._fail(job, reason)
        self._dispatch()

    def _abandon(self, job: _Job) -> None:
        """The caller stopped waiting (shutdown, a client that closed its stream): a job
        not started is dropped; one started still runs, but its answer goes nowhere."""
        if job in self._queue:
            self._queue.remove(job)
        if job.timer is not None and job.worker is None:
            job.timer.cancel()
        self._owe(job)

    def _fail(self, job: _Job, reason: str) -> None:
        if job.timer is not None:
            job.timer.cancel()
        self._owe(job)
        if not job.future.done():
            job.future.set_exception(OffloadFailed(reason))
            job.future.exception()  # retrieved here: a caller that went away must not warn

    def _owe(self, job: _Job) -> None:
        """``job`` ends without its answer reaching the client (which gets the original, or
        nothing): its session's home must hold no delta base for that call (the rewrite may
        still finish there, or never have started), and still hear the events that went
        with a job it never saw. (A stray job's debt is paid when it starts; a home that
        dies takes the state, and with it the debt.)"""
        lane = job.lane
        if lane.key is None or job.stray or job.owed:
            return
        job.owed = True
        if not job.sent:
            lane.owed.extend(job.events)
        lane.owed.append(("forget", job.call.slot))

    def _fail_queue(self, reason: str) -> None:
        jobs, self._queue = self._queue, deque()
        for job in jobs:
            self._fail(job, reason)

    def _close_lane(self, lane: Lane) -> None:
        if lane.key is not None:
            self._lanes.pop(lane.key, None)
        home, lane.home = lane.home, None
        if home is not None and lane.key is not None:
            home.homes.discard(lane.key)
            home.send(("drop", lane.key))

    def _dispatch(self) -> None:
        """Hand every queued result that may start now to a worker (module docstring)."""
        if self._closed:
            return
        now = time.monotonic()
        idle = [w for w in self._idle() if w.ready]
        waiting: set[Lane] = set()  # lanes with an earlier result still queued: order kept
        kept: deque[_Job] = deque()
        wake: float | None = None
        for job in self._queue:
            lane = job.lane
            if lane.key is not None and lane in waiting:
                kept.append(job)
                continue
            worker: _Worker | None = None
            home = lane.home if lane.key is not None else None
            patient = now - job.queued < self.patience
            if home is not None and home in idle:
                worker = home
            elif idle and (home is None or not patient):
                worker = min(idle, key=lambda w: len(w.homes))
                # Its home busy with its own last result: run without its state.
                job.stray = home is not None and home.job is not None and home.job.lane is lane
            elif idle:
                wake = min(wake or float("inf"), job.queued + self.patience)
            if worker is None:
                kept.append(job)
                if lane.key is not None:
                    waiting.add(lane)
                continue
            idle.remove(worker)
            self._start(worker, job)
        self._queue = kept
        if kept and not self._idle() and self._size() < self.max_workers and self.available:
            self._grow()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if wake is not None:
            delay = max(wake - time.monotonic(), 0.0)
            self._wake = asyncio.get_running_loop().call_later(delay, self._dispatch)

    def _start(self, worker: _Worker, job: _Job) -> None:
        lane = job.lane
        spent: list[str] | None = None
        events = job.events
        if job.stray:
            self.strays += 1
            # The session's events are for its home; and the client gets this call's answer
            # from elsewhere, so the home's delta base for it is no longer what it holds.
            lane.owed.extend(job.events)
            lane.owed.append(("forget", job.call.slot))
            events = []
        elif lane.key is not None and not lane.closed:
            if lane.home is not worker:
                old = lane.home
                if old is not None:
                    self.moved += 1
                    old.homes.discard(lane.key)
                    old.send(("drop", lane.key))
                lane.home = worker
                lane.owed.clear()
                worker.homes.add(lane.key)
                spent = list(lane.spent)
            events = [*lane.owed, *events]
            lane.owed.clear()
        if job.deadline is None:
            self._start_clock(job)
        assert job.deadline is not None
        frame = (
            "job",
            job.id,
            # A session closed while this waited is rewritten as one of no session: its
            # state is gone, and nothing would drop it from this worker again.
            None if lane.closed else lane.key,
            job.stray,
            spent,
            events,
            job.line,
            job.call,
            job.deadline,
            job.server,
        )
        worker.job = job
        job.worker = worker
        job.sent = True
        if not worker.send(frame):
            worker.job = None
            job.worker = None
            self._fail(job, "worker-exited")


def _report_record(record: LedgerRecord, observer: Observer) -> None:
    observer.record(record)


def _sigkill(process: asyncio.subprocess.Process) -> None:
    """SIGKILL, by pid: ``Process.kill`` polls first, and a poll that reaps a worker that
    has just died races the child watcher (which then logs "Unknown child process" to
    stderr). Until the watcher reaps it, a dead worker keeps its pid."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)


async def _exited(process: asyncio.subprocess.Process) -> Any:
    while process.returncode is None:
        await asyncio.sleep(0.01)
    return process.returncode


class Outbox(Generic[T]):
    """One output stream of what the server wrote (a stdio client's stdout, one SSE
    stream, one JSON response), in order while tool results are rewritten in the pool.

    :meth:`receive` hands a line to the core (:meth:`ProxyCore.receive_server`, or, without
    a worker, :meth:`ProxyCore.from_server`: rewritten here, in order); :meth:`put` gives
    what it returned its place: a :class:`ToolJob` holds a place in a
    :class:`~gcfkit.proxy.sequencer.Sequencer` while its lane rewrites it, everything else
    is ready at once; ``write(data, tag)`` gets every line the sequencer lets go, in order,
    with the tag it was put with (an SSE event's id, the stream it is for). At most
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
    ) -> None:
        self.core = core
        self.lane = lane
        self._write = write
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

    async def feed(self, line: bytes, tag: T) -> list[Output]:
        """One line the server wrote, to this output; returns the lines it became at once
        ([] for a tool result being rewritten)."""
        got = self.receive(line)
        await self.put(got, tag)
        return [] if isinstance(got, ToolJob) else got

    async def put(self, got: list[Output] | ToolJob, tag: T) -> None:
        """What :meth:`receive` returned, in its place behind everything put before."""
        if not isinstance(got, ToolJob):
            await self.add(got, tag)
            return
        # Taken now, in the order lines arrive: they are for the state before this result.
        events = self.core.pop_events()
        await self._places.acquire()
        ticket = self._sequencer.hold()
        task = asyncio.create_task(self._run(ticket, got, tag, events))
        self._jobs.add(task)
        task.add_done_callback(self._jobs.discard)

    async def add(self, outputs: list[Output], tag: T) -> None:
        """Lines ready as they are (the core's own, ``server_exited``), behind everything
        put before them."""
        for out in outputs:
            self._sequencer.add((out.data, tag), response=out.response)
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

    async def _run(self, ticket: int, job: ToolJob, tag: T, events: list[tuple[str, ...]]) -> None:
        data = job.line
        try:
            outputs = await settle(self.core, self.lane, job, events)
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
            for data, tag in self._sequencer.ready():
                await self._write(data, tag)


def server_pool(
    config: ProxyConfig, codec: Codec | None = None, ledger_path: Path | str | None = None
) -> Offload:
    """The pool of a server of many sessions (the HTTP shells): :data:`MAX_WORKERS` at
    most; its workers append their records to ``ledger_path``."""
    return Offload(config, codec, ledger_path=ledger_path, max_workers=MAX_WORKERS)


async def start_or_warm(offload: Offload, core: ProxyCore) -> asyncio.Future[None]:
    """Start ``offload``'s first worker (it loads the tokenizer meanwhile), for a shell with
    one session; when none can start, results are rewritten in the event loop, so ``core``
    warms up in a thread meanwhile. Returns what the first such rewrite waits for (done at
    once when the pool runs)."""
    loop = asyncio.get_running_loop()
    if await offload.start():
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done
    return loop.run_in_executor(None, core.warm_up)


async def start_pool(offload: Offload) -> None:
    """Start ``offload``'s first worker (it loads the tokenizer meanwhile). When none can
    start, results are rewritten in the event loop, so the tokenizer is loaded now, in a
    thread, and the first result is not charged for it."""
    if not await offload.start():
        warm = ProxyCore(offload.config, offload.codec).warm_up
        await asyncio.get_running_loop().run_in_executor(None, warm)


def receive(core: ProxyCore, lane: Lane | None, line: bytes) -> list[Output] | ToolJob:
    """The core's answer to one line the server wrote: a :class:`ToolJob` to :func:`settle`
    when ``lane`` can rewrite it in the pool; without one (no worker could start), the
    result is rewritten here, at once (:meth:`ProxyCore.from_server`); after the pool's
    workers kept dying (:attr:`Lane.gave_up`), it passes as the server wrote it."""
    if lane is not None and lane.available:
        return core.receive_server(line)
    if lane is not None and lane.gave_up:
        got = core.receive_server(line)
        core.pop_events()  # no worker will hold the session's state again
        return core.finish(got, None, failed="workers-crashed") if isinstance(got, ToolJob) else got
    core.pop_events()  # for a worker's state; the core's own needs none
    return core.from_server(line)


async def settle(
    core: ProxyCore, lane: Lane | None, job: ToolJob, events: list[tuple[str, ...]]
) -> list[Output]:
    """What to write for ``job``: its rewrite from ``lane`` (``events``, popped from the
    core when the line arrived, reach the session's state first), or the original when no
    answer comes in time, there is no worker, or anything fails (the ledger says why)."""
    if lane is None:
        return core.finish(job, None, failed="no-worker")
    try:
        line = await lane.rewrite(job.line, job.call, job.server, events)
    except OffloadFailed as e:
        return core.finish(job, None, failed=e.reason)
    except Exception as e:  # never break the agent: the original goes out
        return core.finish(job, None, failed=f"error-{type(e).__name__}")
    return core.finish(job, line)


async def answer(core: ProxyCore, lane: Lane | None, line: bytes) -> list[Output]:
    """One line the server wrote, answered in full (a tool result rewritten in the pool,
    awaited): for a stream that carries one message at a time and holds nothing else
    behind it (an HTTP response body, one request's SSE stream). Only that stream waits;
    the event loop and every other stream go on meanwhile."""
    got = receive(core, lane, line)
    if isinstance(got, ToolJob):
        return await settle(core, lane, got, core.pop_events())
    return got
