"""Tool results answered in the relay's own process: all but the big ones, which a worker
rewrites while the relay goes on (a pickle each way and two context switches cost more than
the rewrite of a result up to :data:`~gcfkit.transports.placement.IN_PROCESS_BYTES`).

Which result is answered here is :func:`~gcfkit.transports.placement.answers_here`'s word
(the pool's one rule of where a result goes); :class:`~gcfkit.transports.offload.Lane`
asks it, and sends the rest to its workers. Here, a result is answered by the same road as
in a worker (:meth:`Rewriter.rewrite_line <gcfkit.proxy.rewrite.Rewriter.rewrite_line>`),
with the same codec (settled-estimate mode: estimates choose, close calls and dense
definitions are counted exactly, by :mod:`gcfkit._bpe`, about 5 MB per encoding), so the
answer is the one a worker gives. The ledger's exact counts are owed
(:mod:`gcfkit.transports.tally`) and counted here once the answer is written.

**The session's state moves.** A session's state lives where its last result was
answered. Its rewriter here (:class:`~gcfkit.transports.worker.Hosted`) is kept while
results go to workers, and caught up (:func:`catch_up`) when one comes back: the calls
answered elsewhere are forgotten (their delta bases are not what the client holds) and
what the session remembers is taken from the pool's copy (:mod:`gcfkit.proxy.held`),
which every answer here updates too, so a worker the session moves to starts from it.

A request of no session (the 2026-07-28 protocol) gets the worker's fresh rewriter
(:func:`~gcfkit.transports.worker.fresh`: unguessable handles, starting from the result
it names), and what it remembers goes back to its lane, as from a worker.

>>> import json
>>> from gcfkit.proxy.config import ProxyConfig
>>> from gcfkit.proxy.rewrite import Call
>>> here = Here(ProxyConfig(primer=False))
>>> def line(text: str) -> bytes:
...     content = [{"type": "text", "text": text}]
...     return json.dumps({"id": 1, "result": {"content": content}}).encode()
>>> here.answer(here.fresh(), line(json.dumps([1, 2, 3], indent=2)), Call("t", "t"), ())[1]
b'{"id": 1, "result": {"content": [{"type": "text", "text": "[1,2,3]"}]}}\\n'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..proxy.config import Codec, ProxyConfig
from ..proxy.held import MemoryReport, SessionMemory, restore
from ..proxy.rewrite import Budget, Call, Forget, Outcome, Rewriter, SessionEvent
from .placement import answers_here
from .worker import Hosted, fresh, stray_config

__all__ = [
    "Here",
    "Session",
    "answer_here",
    "catch_up",
]


class Here:
    """The relay process's side of the pool: its rewriters' options and codec.

    Only the default codec runs here: one given to the shell (a test's double, a faulty
    one) runs in workers alone, where a hang or a crash costs a worker, not the relay."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.codec = Codec()
        self._stray = stray_config(config)

    def warm_up(self) -> None:
        """Load the tokenizer and codec now (once per process; the shells run this in a
        thread at start-up and await it before the first tool result)."""
        Rewriter(self.config, self.codec).warm_up()

    def host(self, spent: Iterable[str], memory: MemoryReport) -> Hosted:
        """A session's rewriter here, starting from what it remembers (``memory``, the
        pool's copy: :func:`catch_up`)."""
        hosted = Hosted(Rewriter(self.config, self.codec))
        catch_up(hosted, memory, (), spent)
        return hosted

    def stray(self) -> Hosted:
        """A rewriter without any session's state (:func:`~.worker.stray_config`)."""
        return Hosted(Rewriter(self._stray, self.codec))

    def fresh(self, memory: MemoryReport | None = None) -> Hosted:
        """A rewriter for one request of no session (:func:`~.worker.fresh`, the worker's
        rule), starting from ``memory`` (the result its call names)."""
        return fresh(self.config, self.codec, memory)

    def answer(
        self,
        hosted: Hosted,
        line: bytes,
        call: Call,
        events: Sequence[SessionEvent],
        message: dict[str, Any] | None = None,
    ) -> tuple[Outcome, bytes | None, float]:
        """The outcome, the line to send (None: the original) and the milliseconds it
        took (``message``: ``line`` parsed already, see
        :meth:`~gcfkit.proxy.rewrite.Rewriter.rewrite_line`)."""
        rewriter = hosted.rewriter
        rewriter.apply(events)
        started = time.monotonic()
        budget = Budget(time.monotonic, started + self.config.budget_for(len(line)))
        outcome, out = rewriter.rewrite_line(line, call, budget, message=message)
        return outcome, out, (time.monotonic() - started) * 1000.0


def catch_up(
    hosted: Hosted,
    memory: MemoryReport,
    behind: Sequence[SessionEvent],
    spent: Iterable[str],
) -> None:
    """Bring a session's rewriter here up to what happened while its results were answered
    elsewhere: ``behind`` (the events sent with them, and a forget of each of their calls),
    the handles issued there (``spent``) and what the session remembers now (``memory``,
    the pool's copy; a result it lacks is held as its :class:`~gcfkit.proxy.held.Kept`,
    unparsed: see the module docstring)."""
    rewriter = hosted.rewriter
    rewriter.apply(behind)
    names = rewriter.names
    held = names.memory
    held.spend(spent)
    keep = set(memory.order)
    present = set()
    for result in held.results():
        if result.handle in keep:
            present.add(result.handle)
        else:
            held.forget(result.handle)
    # The results it lacks, parsed as a worker the session moves to parses them: a call
    # naming one is answered here relative to its value.
    restore(names, MemoryReport(new=tuple(k for k in memory.new if k.handle not in present)))
    for handle in memory.order:
        held.recall(handle)  # in the pool's order of use: the same result is evicted next
    names.latest.clear()
    names.latest.update(memory.latest)
    names.unasked.clear()
    names.unasked.update(memory.unasked)
    hosted.known = {result.handle for result in held.results()}
    hosted.reported = len(held.issued)


class Session(Protocol):
    """What :func:`answer_here` reads and keeps of a session: its
    :class:`~gcfkit.transports.offload.Lane`."""

    key: int | None
    closed: bool
    here: Hosted | None
    memory: SessionMemory
    spent: list[str]
    behind: list[SessionEvent]
    owed: list[SessionEvent]
    synced: int
    changes: int
    in_pool: int


def answer_here(
    here: Here,
    session: Session,
    line: bytes,
    call: Call,
    events: list[SessionEvent],
    leave_home: Callable[[], None],
    queued: bool = False,
    message: dict[str, Any] | None = None,
) -> tuple[Outcome, bytes | None, float] | None:
    """One result of ``session`` answered here (its outcome, the line to send and the
    milliseconds it took), or None when it goes to a worker: the pool's rule
    (:func:`~gcfkit.transports.placement.answers_here`; ``queued``: a result of the
    session waits for a worker) says so, or it failed here. While a result of the session
    is being rewritten in a worker, one answered here is *stray* (:func:`_answer_stray`).
    The
    session's rewriter here is caught up first (:func:`catch_up`); once it has answered,
    the session's state lives here (``leave_home``: the worker it lived in forgets it) and
    the pool's copy of what it remembers is updated."""
    if not answers_here(len(line), queued):
        return None
    if session.key is None:
        return _answer_fresh(here, session, line, call, events, message)
    if session.closed:
        return None  # a closed session's late result: a worker answers it
    if session.in_pool:
        return _answer_stray(here, session, line, call, events, message)
    try:
        if session.here is None:
            hosted = session.here = here.host(session.spent, session.memory.snapshot())
        else:
            hosted = session.here
            if session.behind or session.synced != session.changes:
                memory = session.memory.snapshot()
                catch_up(hosted, memory, session.behind, session.spent)
        session.behind.clear()
        session.synced = session.changes
        outcome, out, ms = here.answer(hosted, line, call, events, message)
    except Exception:  # never break the agent: a worker answers, and this host is dropped
        session.memory.settle()  # what it reported last, taken before the host goes
        session.here = None
        return None
    # The state lives here now: the worker it lived in forgets it (and what it was owed).
    session.owed.clear()
    leave_home()
    session.spent.extend(hosted.minted())
    # The pool's copy reads the report when it is first read: most often never.
    session.memory.later(hosted.report)
    session.changes += 1
    session.synced = session.changes
    return outcome, out, ms


def _answer_fresh(
    here: Here,
    session: Session,
    line: bytes,
    call: Call,
    events: list[SessionEvent],
    message: dict[str, Any] | None,
) -> tuple[Outcome, bytes | None, float] | None:
    """A request of no session: a fresh rewriter from the result it names (what its lane
    holds), and what it remembers after goes back to the lane (as a worker's report)."""
    try:
        hosted = here.fresh(session.memory.snapshot() if len(session.memory) else None)
        outcome, out, ms = here.answer(hosted, line, call, events, message)
    except Exception:  # never break the agent: a worker answers
        return None
    minted, report = hosted.answered(True)
    session.spent.extend(minted)
    if report is not None:
        session.memory.apply(report)
        session.changes += 1
    return outcome, out, ms


def _answer_stray(
    here: Here,
    session: Session,
    line: bytes,
    call: Call,
    events: list[SessionEvent],
    message: dict[str, Any] | None,
) -> tuple[Outcome, bytes | None, float] | None:
    """A result of a session whose earlier result a worker is rewriting now (none waits to
    start: see :func:`answer_here`), answered here without the session's state, as a
    worker's stray one is, instead of waiting behind it. Its events, and a forget of its
    call (the client gets this answer, not a delta against what it held), go where the
    state lives, after those of the results before it: the worker's next job
    (``owed``), and the relay's host if the state comes back (``behind``)."""
    try:
        outcome, out, ms = here.answer(here.stray(), line, call, (), message)
    except Exception:  # never break the agent: a worker answers
        return None
    for after in (session.owed, session.behind) if session.here is not None else (session.owed,):
        after.extend(events)
        after.append(Forget(call.slot))
    return outcome, out, ms
