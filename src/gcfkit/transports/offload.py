"""The worker processes (:mod:`gcfkit.transports.worker`) from the event loop's side.

Every shell rewrites tool results through this module, so that nothing a result costs can
hold up its relay (one mechanism for stdio and HTTP):

* :class:`Offload` is a pool of worker processes: one for a stdio proxy (one session), a
  few for an HTTP server in front of many. Each worker runs one result at a time; the pool
  holds the rest. The shells' pools (:mod:`gcfkit.transports.pools`) start no worker
  before a result needs one, and a worker idle :data:`IDLE_EXIT` seconds exits; all but
  big results are answered in this process instead (:mod:`gcfkit.transports.local`, the
  rule :func:`~gcfkit.transports.placement.answers_here`), and the ledger's exact counts of
  them are taken here in a pause between results (:mod:`gcfkit.transports.booking`).
* :class:`Lane` is one session's place in the pool (:meth:`Offload.session`); a request
  that belongs to no session (the stateless 2026-07-28 protocol) gets a fresh one of its
  own (:meth:`Offload.fresh`).
* which queued result starts on which worker is :func:`~gcfkit.transports.placement.place`
  (a pure function of the pool's state and the time); the shells reach the pool through
  :mod:`gcfkit.transports.relay` (one line) and :mod:`gcfkit.transports.outbox` (one
  output stream, in order).

**Deadlines.** A result's time budget is counted from when it reaches the pool, or from
when the pool first has a worker ready (loading the tokenizer is not the result's fault).
Past it the original is sent: a result still waiting for a worker is never started, and a
worker still busy with it is killed (SIGKILL: whatever it is doing cannot be interrupted
more gently), and another is started. (The worker gets the same deadline with the job and
checks it between steps, :class:`~gcfkit.proxy.rewrite.Budget`, so a result that runs out
mostly falls back there, at no worker's cost; the kill here is the bound.) A worker that
cannot start, or keeps dying, leaves
every result as the server wrote it (never rewritten in the event loop instead: whatever
killed the workers would take the proxy down); one that cannot be spawned (OSError) once
the pool has started is tried again by a later result, after a backoff (results meanwhile
pass as the server wrote them: none waits for a worker that does not exist).

**Sessions and workers.** A session's state (what its client holds for deltas and relative
answers) lives in the worker that rewrote its last result, its *home*: state carried with
each job instead would cost the event loop a pickle of it per result, proportional to the
result's size, which is what must stay off the loop. What the session remembers (its
``ref=`` results) has a copy here too, in its :class:`Lane`, which each answer updates and
a new home starts from (:mod:`gcfkit.proxy.held`): a handle outlives any worker. So the
rules, for a result of session S:

* it goes to S's home when that is idle; to any idle worker when S has no home (the new
  home starts from nothing: full answers, always correct);
* when S's home is busy with *another* session's result, it waits at most
  :data:`PATIENCE` seconds for it (ordinary results take milliseconds, and S keeps its
  state), then moves to an idle worker, which becomes S's home (its delta bases start over
  there; its remembered results come with it);
* when S's home is busy with S's own earlier result, it waits the same, then runs *stray* on
  an idle worker: rewritten without S's state, named by no handle, and S's home forgets
  that call's delta base before S's next result;
* with no worker idle, it waits for one (its deadline still runs), and the pool grows
  towards ``max_workers``.

So one session's large result holds up no other session for more than :data:`PATIENCE`,
and no message that is not a tool result at all. Killing a worker at a deadline costs the
result it was busy with, and the delta bases of the sessions that lived there (their next
keyed-set answers are full ones), never a handle.

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
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from ..answers.choose import FailureReason
from ..proxy.config import Codec, ProxyConfig
from ..proxy.held import MemoryReport, SessionMemory
from ..proxy.record import LedgerRecord
from ..proxy.rewrite import Call, Forget, Outcome, Reset, SessionEvent
from .booking import Booking
from .local import Here, answer_here
from .placement import Waiting, place
from .process import exited, sigkill
from .worker import (
    HEADER_SIZE,
    Answer,
    Count,
    Counted,
    Drop,
    Hosted,
    Idle,
    Init,
    Owed,
    Ready,
    ToWorker,
    decode_frame_length,
    encode_frame,
)
from .worker import Job as JobFrame

__all__ = [
    "IDLE_EXIT",
    "MAX_WORKERS",
    "PATIENCE",
    "Lane",
    "Observer",
    "Offload",
    "OffloadFailed",
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

#: Seconds a worker beyond the pool's minimum (none, for the shells' lazy pools) may stay
#: idle before it exits: its memory (a second Python process with the codec and tokenizer)
#: is given back, and the
#: next result that needs a worker starts one again (a few hundred milliseconds, not
#: charged to that result's time budget).
IDLE_EXIT: Final = 30.0

#: Seconds a worker that owes the ledger counts must have stayed idle before it is asked to
#: take them: under a steady flow of results it takes them in batches instead, before its
#: next job once a megabyte of text is owed (``worker.OWED_CHARS``), a few ms per hundreds
#: of results, not a round trip per result.
_COUNT_WHEN_IDLE: Final = 0.05

#: Seconds a closing pool's workers get to exit (one counts what it owes the ledger first:
#: at most a megabyte of text, tens of milliseconds) before they are killed.
_EXIT_WAIT: Final = 5.0


class Observer(Protocol):
    """What hears of the pool's results (:class:`gcfkit.transports.metrics.Metrics`): each
    ledger record a worker wrote, and each result answered (``outcome``: ``rewritten``,
    ``original`` or ``fallback``, ``seconds`` after it reached the pool)."""

    def record(self, record: LedgerRecord) -> None: ...

    def settled(self, server: str, tool: str, outcome: str, seconds: float) -> None: ...


class OffloadFailed(Exception):
    """No answer in time (or no worker): the original goes out. ``reason`` says why."""

    def __init__(self, reason: FailureReason) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(eq=False)
class _Job:
    id: int
    lane: Lane
    line: bytes
    call: Call
    server: str
    events: list[SessionEvent]
    future: asyncio.Future[bytes | None]
    queued: float
    #: The session's epoch when it was submitted (:attr:`Lane.epoch`).
    epoch: int = 0
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
    #: It has answers whose ledger counts it has not taken yet (it takes them when the pool
    #: has no job for it: :meth:`Offload._count`).
    owes: bool = False
    done: int = 0
    reader: asyncio.Task[None] | None = None
    starting: asyncio.TimerHandle | None = None
    retiring: asyncio.TimerHandle | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, frame: ToWorker) -> bool:
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
        #: What the session remembers (its ``ref=`` results), as its workers last reported
        #: it: a new home starts from it (:mod:`gcfkit.proxy.held`).
        self.memory = SessionMemory()
        #: Resets (``initialize``) submitted so far: a report from a result submitted before
        #: the latest is of the old session, and is not kept.
        self.epoch = 0
        #: Events for the home before the session's next result (a stray result's forget).
        self.owed: list[SessionEvent] = []
        self.closed = False
        #: Changes to :attr:`memory` so far (a report kept, a reset): a shell that copies it
        #: elsewhere (:mod:`gcfkit.transports.state`) writes only when this moved.
        self.changes = 0
        #: The session's rewriter in the relay's process (:mod:`gcfkit.transports.local`),
        #: what it must hear of before its next result (the events of results answered
        #: elsewhere, and a forget of each of their calls), and :attr:`changes` when it was
        #: last in step with :attr:`memory`.
        self.here: Hosted | None = None  # (a worker's Hosted, here)
        self.behind: list[SessionEvent] = []
        self.synced = 0
        #: The session's results with the workers (queued or being rewritten).
        self.in_pool = 0

    @property
    def available(self) -> bool:
        """Whether results can still be rewritten (a worker runs or may be started)."""
        return self._pool.available and not self.closed

    @property
    def gave_up(self) -> bool:
        """Whether the pool stopped after its workers kept dying (:attr:`Offload.gave_up`)."""
        return self._pool.gave_up

    async def rewrite(
        self,
        line: bytes,
        call: Call,
        server: str,
        events: Iterable[SessionEvent] = (),
        message: dict[str, Any] | None = None,
    ) -> bytes | None:
        """The line to send for the tools/call response ``line`` (None: send it as it is).
        ``events`` (:meth:`ProxyCore.pop_events`) reach the session's state before it;
        ``message`` is ``line`` parsed already (:attr:`ToolJob.message
        <gcfkit.proxy.core.ToolJob.message>`), for an answer in this process.

        Raises :class:`OffloadFailed` when no answer comes by the deadline, or there is no
        worker.
        """
        events = list(events)
        answered, out = self.answer_now(line, call, server, events, message)
        if answered:
            return out
        return await self.submit(line, call, server, events)

    def answer_now(
        self,
        line: bytes,
        call: Call,
        server: str,
        events: list[SessionEvent],
        message: dict[str, Any] | None = None,
    ) -> tuple[bool, bytes | None]:
        """:meth:`rewrite`'s first half, without waiting: ``(True, line to send)`` when the
        result is answered in this process (:func:`~.local.answer_here`), else
        ``(False, None)``, and :meth:`submit` (with the same ``events``) sends it to a
        worker. A shell calls it in line, so a small result costs no task of its own.

        Raises :class:`OffloadFailed` when there is no worker."""
        if not self.available:
            raise OffloadFailed("no-worker")
        here = self._pool.here
        if here is None:
            return False, None
        started = time.monotonic()
        self._take_reset(events)
        leave = functools.partial(self._pool._leave_home, self)
        queued = any(job.lane is self for job in self._pool._queue)
        got = answer_here(here, self, line, call, events, leave, queued, message)
        if got is None:
            return False, None
        self._pool._answered_here(call, server, *got, started)
        return True, got[1]

    async def submit(
        self, line: bytes, call: Call, server: str, events: list[SessionEvent]
    ) -> bytes | None:
        """:meth:`rewrite`'s second half: the result rewritten by a worker (after
        :meth:`answer_now` left it)."""
        if not self.available:
            raise OffloadFailed("no-worker")
        job = self._pool._submit(self, line, call, server, events)
        try:
            return await job.future
        except asyncio.CancelledError:
            self._pool._abandon(job)
            raise

    def _take_reset(self, events: list[SessionEvent]) -> None:
        if any(isinstance(event, Reset) for event in events):
            self.memory.clear()  # a new session: nothing it held is held any more
            self.epoch += 1
            self.changes += 1

    def adopt(self, memory: MemoryReport, spent: Iterable[str]) -> None:
        """Take the session's state from a copy kept elsewhere (another gateway replica's,
        :mod:`gcfkit.transports.state`): ``memory`` replaces what the lane holds, the next
        result starts a worker from it (the session leaves its home), and the handles in
        ``spent`` are never issued again."""
        self.memory.clear()
        self.memory.apply(memory)
        known = set(self.spent)
        self.spent.extend(h for h in spent if h not in known)
        self.owed.clear()
        self.here = None
        self.behind.clear()
        self._pool._leave_home(self)

    def close(self) -> None:
        """The session is over: its state in the pool is dropped."""
        if self.closed:
            return
        self.closed = True
        self.here = None
        self.behind.clear()
        self._pool._close_lane(self)


class Offload:
    """A pool of ``workers`` to ``max_workers`` worker processes (see the module docstring).

    ``codec`` replaces the codec functions (tests: it must pickle, by reference, to reach
    the workers); ``ledger_path`` is where the workers append their records. With
    ``in_process``, small results are answered in this process (:mod:`.local`), by the
    default codec (``codec`` must be None), and the ledger's exact counts of them are taken
    by a worker later (:mod:`.tally`). ``workers``: the workers kept running (0: started
    when a result needs one, and gone after :data:`IDLE_EXIT` seconds idle).
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
        clock: Callable[[], float] = time.monotonic,
        in_process: bool = False,
    ) -> None:
        self.config = config
        # Deadlines go to the workers on it: another process's time.monotonic is the same
        # clock, any other is not (tests place results without processes: placement.py).
        self._clock = clock
        self.codec = codec or Codec()
        self._ledger_path = str(ledger_path) if ledger_path is not None else None
        self._python = python or sys.executable
        self.min_workers = max(0, workers)
        self.max_workers = max(1, self.min_workers, max_workers or self.min_workers)
        #: The relay process's side (None: every result goes to a worker).
        self.here = Here(config) if in_process and codec is None else None
        #: When the ledger's records of results answered here are counted (None without a
        #: ledger).
        self._booking = (
            Booking(here, config.encoding, self._ledger_path, self._reported)
            if (here := self.here) is not None and ledger_path is not None
            else None
        )
        #: Results answered in this process.
        self.answered_here = 0
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
        """Start the first workers (``workers`` of them: none for a lazy pool, whose first
        worker starts with the first result that needs one); False when none can be: the
        options or codec do not pickle (test doubles), or no interpreter runs."""
        try:
            self._init = encode_frame(Init(self.config, self.codec, self._ledger_path))
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
        """A lane whose every result starts from nothing (a request with no session), or
        from the one result :meth:`Lane.adopt` gave it; its results are named unguessably
        and what it remembers after each is in :attr:`Lane.memory` (the shell keeps it,
        :mod:`gcfkit.transports.state`)."""
        return Lane(self, None)

    async def close(self) -> None:
        """Stop every worker: its stdin closes (it exits between results, once it has
        counted what it owes the ledger), and it is killed if it has not gone within
        :data:`_EXIT_WAIT` seconds. Returns when all are reaped. What the ledger is owed
        for results answered in this process is counted first (:mod:`.booking`)."""
        with contextlib.suppress(Exception):
            if self._booking is not None:
                self._booking.settle()
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
                asyncio.gather(*(exited(w.process) for w in workers), return_exceptions=True),
                _EXIT_WAIT,
            )
        for worker in workers:
            sigkill(worker.process)
        readers = [w.reader for w in workers if w.reader is not None]
        if readers:
            await asyncio.wait(readers, timeout=5)
        for task in list(self._background):
            task.cancel()

    # -- results answered in this process (gcfkit.transports.local, .tally) -----------

    def _answered_here(
        self,
        call: Call,
        server: str,
        outcome: Outcome,
        out: bytes | None,
        ms: float,
        started: float,
    ) -> None:
        self.answered_here += 1
        kind = "original" if out is None else "rewritten"
        seconds = time.monotonic() - started
        self._observe(lambda seen: seen.settled(server, call.tool, kind, seconds))
        if self._booking is not None:
            self._booking.owe(Owed(outcome, server, call.tool, ms))

    def _reported(self, record: LedgerRecord) -> None:
        self._observe(functools.partial(_report_record, record))

    def _count_if_idle(self, worker: _Worker, done: int) -> None:
        if worker.done == done and worker.owes and worker in self._idle() and not self._closed:
            self._count(worker)

    def _count(self, worker: _Worker) -> None:
        """``worker`` counts what the ledger is owed for its own answers (the relay's are
        counted here: :mod:`.booking`)."""
        if worker.send(Count(())):
            worker.booking = True
            worker.owes = False

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
                self._respawn_at = self._clock() + self._respawn_wait
                self._respawn_wait = min(self._respawn_wait * 2, _RESPAWN_AFTER[1])
            if not self._workers:
                self._fail_queue("no-worker")
            return False
        self._respawn_wait = _RESPAWN_AFTER[0]
        worker = _Worker(process)
        if self._closed:
            sigkill(process)
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
        if self._clock() < self._respawn_at:
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
                if isinstance(frame, Ready):
                    self._ready(worker)
                elif isinstance(frame, Answer):
                    self._answered(worker, frame)
                elif isinstance(frame, Idle):
                    worker.booking = False
                    worker.owes = frame.owes
                    worker.done += 1
                    self._idle_exit(worker)
                    self._dispatch()
                elif isinstance(frame, Counted):
                    for record in frame.records:
                        self._observe(functools.partial(_report_record, record))
        except (asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError, EOFError):
            pass
        finally:
            self._gone(worker)
            sigkill(worker.process)
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
        self._idle_exit(worker)
        self._dispatch()

    def _answered(self, worker: _Worker, answer: Answer) -> None:
        job = worker.job
        if job is None or job.id != answer.id:
            return
        worker.job = None
        worker.booking = True
        worker.done += 1
        job.worker = None
        lane = job.lane
        if not job.stray:
            lane.spent.extend(answer.minted)
            # (A session that left this worker meanwhile, for the relay's process, keeps
            # what it has: this report is of a state it no longer lives in.)
            # A lane of no session has no home: its answer's report is all it remembers.
            home = lane.key is None or lane.home is worker
            current = job.epoch == lane.epoch and not lane.closed and home
            if answer.memory is not None and current:
                lane.memory.apply(answer.memory)
                lane.changes += 1
        if job.timer is not None:
            job.timer.cancel()
        if not job.future.done():
            job.future.set_result(answer.line)
        self._dispatch()

    def _idle_exit(self, worker: _Worker) -> None:
        """A worker beyond the pool's minimum that stays idle :data:`IDLE_EXIT` seconds
        from now exits (:meth:`_retire`)."""
        if len(self._workers) > self.min_workers and not self._closed:
            if worker.retiring is not None:
                worker.retiring.cancel()
            loop = asyncio.get_running_loop()
            worker.retiring = loop.call_later(IDLE_EXIT, self._retire, worker, worker.done)

    def _settled(self, job: _Job, future: asyncio.Future[bytes | None]) -> None:
        job.lane.in_pool -= 1
        if future.cancelled():
            return  # the caller went away: nothing was answered
        failed = future.exception() is not None
        line = None if failed else future.result()
        outcome = "fallback" if failed else "original" if line is None else "rewritten"
        seconds = self._clock() - job.queued
        self._observe(lambda seen: seen.settled(job.server, job.call.tool, outcome, seconds))

    def _observe(self, report: Callable[[Observer], None]) -> None:
        if self.observer is None:
            return
        with contextlib.suppress(Exception):  # losing a statistic must never break a call
            report(self.observer)

    def _retire(self, worker: _Worker, done: int) -> None:
        if worker.job is not None or worker.booking:
            return
        if worker.done == done and len(self._workers) > self.min_workers:
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
                lane.owed.clear()  # for delta bases that are gone (a reset has cleared the copy)
        worker.homes.clear()

    def _kill(self, worker: _Worker) -> None:
        worker.killed = True  # by the proxy: not a crash
        sigkill(worker.process)

    def _size(self) -> int:
        return len(self._workers) + self._spawning

    def _any_ready(self) -> bool:
        # A killed worker stays in the pool until its reader sees it go: it takes nothing.
        return any(w.ready and not w.killed for w in self._workers)

    def _idle(self) -> list[_Worker]:
        return [w for w in self._workers if w.job is None and not w.booking and not w.killed]

    # -- jobs --------------------------------------------------------------------------

    def _submit(
        self, lane: Lane, line: bytes, call: Call, server: str, events: list[SessionEvent]
    ) -> _Job:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes | None] = loop.create_future()
        lane._take_reset(events)
        if lane.here is not None:
            # What the session's rewriter in the relay must hear before it answers again.
            lane.behind.extend(events)
            lane.behind.append(Forget(call.slot))
        lane.in_pool += 1
        job = _Job(
            next(self._ids), lane, line, call, server, events, future, self._clock(), lane.epoch
        )
        # Every end of it (an answer, a failure, the caller gone) is timed from here.
        future.add_done_callback(functools.partial(self._settled, job))
        if not self._size():
            if self._clock() < self._respawn_at:  # a spawn just failed: no worker to wait for
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
        job.deadline = self._clock() + self.config.budget_for(len(job.line))
        delay = job.deadline - self._clock() + _SLACK
        job.timer = asyncio.get_running_loop().call_later(delay, self._expire, job, "time-budget")

    def _expire(self, job: _Job, reason: FailureReason) -> None:
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

    def _fail(self, job: _Job, reason: FailureReason) -> None:
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
        lane.owed.append(Forget(job.call.slot))

    def _fail_queue(self, reason: FailureReason) -> None:
        jobs, self._queue = self._queue, deque()
        for job in jobs:
            self._fail(job, reason)

    def _close_lane(self, lane: Lane) -> None:
        if lane.key is not None:
            self._lanes.pop(lane.key, None)
        lane.memory.clear()
        self._leave_home(lane)

    def _leave_home(self, lane: Lane) -> None:
        """The lane's home forgets the session (its next result, if any, starts a new one)."""
        home, lane.home = lane.home, None
        if home is not None and lane.key is not None:
            home.homes.discard(lane.key)
            home.send(Drop(lane.key))

    def _dispatch(self) -> None:
        """Hand every queued result that may start now to a worker (module docstring)."""
        if self._closed:
            return
        queue = list(self._queue)
        idle = [w for w in self._idle() if w.ready]
        plan = place(
            [Waiting(job.lane.key, job.lane.home, job.queued) for job in queue],
            idle,
            {w: len(w.homes) for w in idle},
            {w: w.job.lane.key for w in self._workers if w.job is not None},
            self._clock(),
            self.patience,
        )
        started = {start.index for start in plan.starts}
        kept = self._queue = deque(job for i, job in enumerate(queue) if i not in started)
        for start in plan.starts:
            job = queue[start.index]
            job.stray = start.stray
            self._start(start.worker, job)
        wake = plan.wake
        if kept and not self._idle() and self._size() < self.max_workers and self.available:
            self._grow()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if wake is not None:
            delay = max(wake - self._clock(), 0.0)
            self._wake = asyncio.get_running_loop().call_later(delay, self._dispatch)
        if not self._queue:
            # No job waits: a worker idle a moment counts what the ledger is owed (its own
            # answers', the tally's); a job that comes meanwhile waits here, never killing it.
            loop = asyncio.get_running_loop()
            for worker in [w for w in self._idle() if w.ready and w.owes]:
                loop.call_later(_COUNT_WHEN_IDLE, self._count_if_idle, worker, worker.done)

    def _start(self, worker: _Worker, job: _Job) -> None:
        lane = job.lane
        spent: list[str] | None = None
        events = job.events
        if job.stray:
            self.strays += 1
            # The session's events are for its home; and the client gets this call's answer
            # from elsewhere, so the home's delta base for it is no longer what it holds.
            lane.owed.extend(job.events)
            lane.owed.append(Forget(job.call.slot))
            events = []
        elif lane.key is not None and not lane.closed:
            if lane.home is not worker:
                old = lane.home
                if old is not None:
                    self.moved += 1
                    old.homes.discard(lane.key)
                    old.send(Drop(lane.key))
                lane.home = worker
                lane.owed.clear()
                worker.homes.add(lane.key)
                spent = list(lane.spent)
            events = [*lane.owed, *events]
            lane.owed.clear()
        # A new home starts from what the session remembers (its results' handles); a job of
        # no session from the result its call names, when the shell found it (Lane.adopt).
        memory = None if spent is None else lane.memory.snapshot()
        if lane.key is None and not job.stray and len(lane.memory):
            memory = lane.memory.snapshot()
        if job.deadline is None:
            self._start_clock(job)
        assert job.deadline is not None
        frame = JobFrame(
            job.id,
            # A session closed while this waited is rewritten as one of no session: its
            # state is gone, and nothing would drop it from this worker again.
            None if lane.closed else lane.key,
            job.stray,
            job.line,
            job.call,
            job.deadline,
            job.server,
            tuple(events),
            None if spent is None else tuple(spent),
            memory,
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
