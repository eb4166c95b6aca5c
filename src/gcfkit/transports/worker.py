"""The worker process: tool results rewritten where they cannot hold up the relay.

The bpe tokenizer holds the GIL for a whole count (0.6 s on a 5 MB text), ``json.dumps``
does too, and the GCF encoder is pure Python: in a thread beside the event loop they still
stall it. So the shells run tool-result rewrites in worker processes,
``python -m gcfkit.transports.worker``, through :mod:`gcfkit.transports.offload`, which
gives up on a worker at a result's deadline, sending the original and starting a new one:
the time budget is a real bound, and a ping is answered while a large result is encoded.

The worker is a host, no more: each result is answered by
:meth:`Rewriter.rewrite_line <gcfkit.proxy.rewrite.Rewriter.rewrite_line>`, the code
:meth:`ProxyCore.from_server <gcfkit.proxy.core.ProxyCore.from_server>` runs in process.

A worker serves any number of sessions (the HTTP gateway's, a pool of a few workers for up
to a thousand sessions), one job at a time. It owns each session's
:class:`~gcfkit.proxy.rewrite.Rewriter`, created at the session's first job here, dropped
when the shell says so. A killed worker takes with it the session's delta bases (the next
answers are full ones, which is always correct), not its remembered results: the pool
keeps a copy of those. A job of no session gets a fresh rewriter of its own (a request of
the sessionless 2026-07-28 protocol), which starts from the one result the call names, if
the shell found it, and names its results unguessably; a *stray* job (one of a session
whose worker is busy, run elsewhere so that it need not wait) gets one that names nothing,
so it never mints a handle the session's own worker might mint too. The ledger counts are
taken after the answer is sent, when the pool has no job for the worker (it sends a
:class:`Count`: a job that comes meanwhile waits in the pool, where its deadline never
kills a worker) or past :data:`OWED_CHARS` of text owed, and appended to the ledger by the
worker itself; a worker killed at a deadline loses the records it had not counted yet (none
unless results kept it busy). It exits when its stdin closes (counting what it owes
first), and on Linux dies with its parent (PR_SET_PDEATHSIG), so it never outlives the
proxy.

Frames both ways are an 8-byte big-endian length and a pickle (a private pipe between two
processes of the same program) of one message, a dataclass of this module. To the worker:
:class:`Init` first, then :class:`Job`, :class:`Drop` and :class:`Count` (take the ledger
counts the worker owes, and any :class:`Owed` records handed over with it). From
the worker: :class:`Ready` once warmed up, then an :class:`Answer` per job, in order, each
followed by :class:`Idle` (the pool sends the next job only then; it says whether the
worker owes the ledger counts), and :class:`Counted` with the ledger records it wrote.

What a session remembers outlives its worker (:mod:`gcfkit.proxy.held`): each answer of a
session's job carries a report of its memory, and a job that moves the session here carries
the pool's copy, which the new rewriter starts from.

>>> import io
>>> buf = io.BytesIO()
>>> write_frame(buf, Drop(7))
>>> _ = buf.seek(0)
>>> read_frame(buf)
Drop(session=7)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import struct
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Final

from ..proxy.config import Codec, ProxyConfig
from ..proxy.held import MemoryReport, report, restore
from ..proxy.record import LedgerRecord
from ..proxy.rewrite import Budget, Call, Outcome, Rewriter, SessionEvent
from ..relative import ResultMemory

if TYPE_CHECKING:
    from ..ledger import Ledger

__all__ = [
    "Answer",
    "Count",
    "Counted",
    "Drop",
    "FromWorker",
    "Hosted",
    "Idle",
    "Init",
    "Job",
    "Owed",
    "Ready",
    "ToWorker",
    "decode_frame_length",
    "encode_frame",
    "fresh",
    "main",
    "read_frame",
    "stray_config",
    "write_frame",
]


@dataclass(frozen=True, slots=True)
class Init:
    """The worker's first message: the options, the codec and where to append the ledger."""

    config: ProxyConfig
    codec: Codec
    ledger_path: str | None


@dataclass(frozen=True, slots=True)
class Job:
    """One tools/call response ``line`` to answer by ``deadline`` (``time.monotonic``).

    ``session``: a key, or None for a fresh rewriter; ``stray``: rewritten without the
    session's state (it names nothing); ``spent``: given when the session starts here, the
    result handles its earlier workers issued; ``memory``: given with ``spent``, what the
    session remembers (:mod:`gcfkit.proxy.held`); ``events``: what the core saw happen to
    the session since its last job."""

    id: int
    session: int | None
    stray: bool
    line: bytes
    call: Call
    deadline: float
    server: str
    events: tuple[SessionEvent, ...] = ()
    spent: tuple[str, ...] | None = None
    memory: MemoryReport | None = None


@dataclass(frozen=True, slots=True)
class Drop:
    """The session is over here: its state is dropped."""

    session: int


@dataclass(frozen=True, slots=True)
class Owed:
    """A result answered elsewhere (in the relay's process) whose ledger record is still
    to be counted: its ``outcome`` (without the result itself), and what the record says
    of it besides."""

    outcome: Outcome
    server: str
    tool: str
    encode_ms: float


@dataclass(frozen=True, slots=True)
class Count:
    """Count what ``items`` owe exactly (:mod:`gcfkit.transports.tally`), and what the
    worker's own answers owe, and append their records to the ledger; answered by
    :class:`Counted`, then :class:`Idle`."""

    items: tuple[Owed, ...]


@dataclass(frozen=True, slots=True)
class Ready:
    """The worker has warmed up."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A job's answer: the ``line`` to send (None: the original), the handles it minted,
    and (for a session's own job) what the session's memory holds now."""

    id: int
    line: bytes | None
    minted: tuple[str, ...] = ()
    memory: MemoryReport | None = None


@dataclass(frozen=True, slots=True)
class Idle:
    """The worker takes the next job (after an :class:`Answer`, or the :class:`Counted`
    records of a :class:`Count`); ``owes``: it has answers whose ledger counts it has not
    taken yet (an empty :class:`Count` asks for them)."""

    owes: bool = False


@dataclass(frozen=True, slots=True)
class Counted:
    """Ledger records the worker has written (its own answers' counted when no job waited,
    or a :class:`Count`'s), for the server's metrics."""

    records: tuple[LedgerRecord, ...]


ToWorker = Init | Job | Drop | Count
FromWorker = Ready | Answer | Idle | Counted

_HEADER: Final = struct.Struct(">Q")
HEADER_SIZE: Final = _HEADER.size


def encode_frame(obj: Any) -> bytes:
    """One frame: length and pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def decode_frame_length(header: bytes) -> int:
    """The payload length of a frame header."""
    length: int = _HEADER.unpack(header)[0]
    return length


def write_frame(stream: IO[bytes], obj: Any) -> None:
    """Write one frame to a blocking stream and flush it."""
    stream.write(encode_frame(obj))
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """Read one frame from a blocking stream; None at end of stream."""
    header = _read_exactly(stream, HEADER_SIZE)
    if header is None:
        return None
    data = _read_exactly(stream, decode_frame_length(header))
    if data is None:
        return None
    return pickle.loads(data)


def _read_exactly(stream: IO[bytes], n: int) -> bytes | None:
    parts: list[bytes] = []
    left = n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _die_with_parent(parent: int) -> None:
    """On Linux, ask for SIGKILL when the parent dies (even SIGKILLed itself)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(0)


@dataclass(slots=True)
class Hosted:
    """One session's rewriter (in a worker, or in the relay's process:
    :mod:`gcfkit.transports.local`), the handles it issued that were reported, and the
    remembered results the pool's copy has (:func:`gcfkit.proxy.held.report`).

    >>> from gcfkit.proxy.config import ProxyConfig
    >>> Hosted.start(ProxyConfig(), Codec(), ("r1",), None).answered(own=True)
    ((), MemoryReport(order=(), new=(), latest={}, unasked={}))
    """

    rewriter: Rewriter
    reported: int = 0
    known: set[str] = field(default_factory=set)

    @classmethod
    def start(
        cls,
        config: ProxyConfig,
        codec: Codec,
        spent: Iterable[str],
        memory: MemoryReport | None,
    ) -> Hosted:
        """A session's rewriter where it starts (or moves to): the handles its earlier
        hosts issued are never issued again, and it remembers what ``memory`` holds."""
        rewriter = Rewriter(config, codec)
        held = rewriter.names.memory
        # Handles earlier hosts of this session issued: a reader may still hold them.
        held.spend(spent)
        known: set[str] = set()
        if memory is not None:
            restore(rewriter.names, memory)
            known = {h.handle for h in held.results()}
        return cls(rewriter, len(held.issued), known)

    def answered(self, own: bool) -> tuple[tuple[str, ...], MemoryReport | None]:
        """After a result: the handles it minted, and (``own``: the session's own rewriter,
        not a stray or fresh one) what the session remembers now, for the pool's copy."""
        return self.minted(), self.report() if own else None

    def minted(self) -> tuple[str, ...]:
        """The handles minted since the last call."""
        issued = self.rewriter.names.memory.issued
        minted = tuple(issued[self.reported :])
        self.reported = len(issued)
        return minted

    def report(self) -> MemoryReport:
        """What the session remembers now, for the pool's copy: every result it holds that
        the copy lacks (since the last report)."""
        return report(self.rewriter.names, self.known)


class _Hosts:
    """The rewriters of the sessions this worker serves, by key (the shell creates and
    drops them: it bounds how many sessions there are)."""

    def __init__(self, config: ProxyConfig, codec: Codec) -> None:
        self.config = config
        self.codec = codec
        # A stray job names nothing (see the module docstring).
        self.stray_config = stray_config(config)
        self.hosted: dict[int, Hosted] = {}

    def for_job(self, job: Job) -> tuple[Hosted, bool]:
        """The session state for one job, and whether its memory is reported to the pool (a
        session's own job, or one of no session: see :meth:`_fresh`)."""
        if job.stray:
            return Hosted(Rewriter(self.stray_config, self.codec)), False  # (see stray_config)
        if job.session is None:
            return self._fresh(job), True
        found = self.hosted.get(job.session)
        if found is None or job.spent is not None:
            found = Hosted.start(self.config, self.codec, job.spent or (), job.memory)
            self.hosted[job.session] = found
        return found, True

    def _fresh(self, job: Job) -> Hosted:
        return fresh(self.config, self.codec, job.memory)


def stray_config(config: ProxyConfig) -> ProxyConfig:
    """The options of a *stray* rewrite, one without its session's state (in a worker
    while the session's home is busy, or in the relay while the session has a result with
    the workers): it names nothing, and its rewriter, fresh, holds no delta base.

    >>> stray_config(ProxyConfig()).refs
    'off'
    """
    return dataclasses.replace(config, refs="off")


def fresh(config: ProxyConfig, codec: Codec, memory: MemoryReport | None) -> Hosted:
    """A rewriter for one result of no session (the sessionless 2026-07-28 protocol), in a
    worker or in the relay's process (:mod:`gcfkit.transports.local`): it starts from the
    result the call names, when the shell found it (``memory``), and names its results
    unguessably, as the shell keeps them under their handle alone
    (:mod:`gcfkit.transports.state`); what it remembers goes back with the answer
    (:meth:`Hosted.answered` with ``own``).

    >>> fresh(ProxyConfig(), Codec(), None).rewriter.names.memory.unguessable
    True
    """

    def held() -> ResultMemory:
        return ResultMemory(
            max_results=config.ref_results, max_bytes=config.ref_bytes, unguessable=True
        )

    rewriter = Rewriter(config, codec, memory=held)
    known: set[str] = set()
    if memory is not None:
        restore(rewriter.names, memory)
        known = {h.handle for h in rewriter.names.memory.results()}
    return Hosted(rewriter, 0, known)


def main() -> None:
    """The worker's loop (see the module docstring)."""
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    _die_with_parent(parent)
    # Frames go to the real stdout only: anything a library prints goes to stderr instead.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inbox = sys.stdin.buffer
    # The shell stops the proxy's group with signals; the worker goes when its pipe closes.
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    init = read_frame(inbox)
    if not isinstance(init, Init):
        return
    config = init.config
    hosts = _Hosts(config, init.codec)
    counter = Rewriter(config, init.codec)
    counter.warm_up()  # the tokenizer and codec, once for every session
    ledger = None
    if init.ledger_path is not None:
        from ..ledger import Ledger

        ledger = Ledger(init.ledger_path)
    write_frame(channel, Ready())
    # The ledger's counts of this worker's answers, taken when the pool has no job for it
    # (or when too much text waits): off the answers' path, which `--no-stats` no longer
    # shortens.
    owed: list[Owed] = []
    chars = 0
    while True:
        frame = read_frame(inbox)
        if frame is None:
            _count(counter, owed, ledger)  # the pool is closing: nothing owed is lost
            return
        if isinstance(frame, Drop):
            hosts.hosted.pop(frame.session, None)
            continue
        if isinstance(frame, Count):
            write_frame(channel, Counted(_count(counter, [*owed, *frame.items], ledger)))
            owed, chars = [], 0
            write_frame(channel, Idle())
            continue
        if not isinstance(frame, Job):
            continue
        hosted, reports = hosts.for_job(frame)
        rewriter = hosted.rewriter
        rewriter.apply(frame.events)
        call, server = frame.call, frame.server
        started = time.monotonic()
        outcome, out = rewriter.rewrite_line(
            frame.line, call, Budget(time.monotonic, frame.deadline)
        )
        minted, memory = hosted.answered(reports)
        write_frame(channel, Answer(frame.id, out, minted, memory))
        del out, frame, memory
        if ledger is not None:
            ms = (time.monotonic() - started) * 1000.0
            outcome.result = None
            owed.append(Owed(outcome, server, call.tool, ms))
            chars += owed_chars(outcome)
            if chars >= OWED_CHARS:  # bounded: counted now, before the next job
                write_frame(channel, Counted(_count(counter, owed, ledger)))
                owed, chars = [], 0
        write_frame(channel, Idle(owes=bool(owed)))


#: Characters of owed text past which a worker counts them before its next job (about
#: 20 ms of counting at once).
OWED_CHARS: Final = 1_000_000


def owed_chars(outcome: Outcome) -> int:
    """How many characters of text ``outcome`` still owes the ledger's counts."""
    texts = (outcome.lazy, outcome.owed, outcome.owed_after, outcome.baseline or ())
    return sum(len(t) for group in texts for t in group)


def _count(
    counter: Rewriter, items: Iterable[Owed], ledger: Ledger | None
) -> tuple[LedgerRecord, ...]:
    """The records of answered results (this worker's, or those answered in the relay's
    process: :mod:`gcfkit.transports.tally`), their owed texts counted exactly here,
    appended to the ledger."""
    records = []
    for item in items:
        record = item.outcome.ledger_record(
            counter.count,
            server=item.server,
            tool=item.tool,
            encoding=counter.config.encoding,
            encode_ms=item.encode_ms,
        )
        if ledger is not None:
            ledger.append(record)
        records.append(record)
    return tuple(records)


if __name__ == "__main__":
    main()
