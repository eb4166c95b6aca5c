"""Tool results answered in the relay's own process: the small ones, which a worker would
only slow down (a pickle each way and two context switches cost more than their rewrite).

Which result is answered here is :func:`~gcfkit.transports.placement.answers_here`'s word
(the pool's one rule of where a result goes); :class:`~gcfkit.transports.offload.Lane`
asks it, and sends the rest to its workers. Here, a result is answered by the same road as
in a worker (:meth:`Rewriter.rewrite_line <gcfkit.proxy.rewrite.Rewriter.rewrite_line>`),
with two differences that keep the relay light:

* **No tokenizer.** The rewriter's codec counts tokens by estimate
  (:meth:`Codec.estimating <gcfkit.answers.codec.Codec.estimating>`);
  when a decision is too close to make from estimates, the rewriter says so before
  touching the session's state (:class:`NeedsExactCounts`), and the result goes to a worker,
  which answers it as it always did. The ledger's exact counts are owed
  (:mod:`gcfkit.transports.tally`): a worker counts them later, off the answer's path.
* **The session's state moves.** A session's state lives where its last result was
  answered. Its rewriter here (:class:`~gcfkit.transports.worker.Hosted`) is kept while
  results go to workers, and caught up (:func:`catch_up`) when one comes back: the calls
  answered elsewhere are forgotten (their delta bases are not what the client holds) and
  what the session remembers is taken from the pool's copy (:mod:`gcfkit.proxy.held`),
  which every answer here updates too, so a worker the session moves to starts from it.
  Taken as it is, unparsed: estimate mode never answers relative to a remembered result (a
  call naming one is a worker's), so here a held result is its handle, place and size,
  and catching up costs no parse, whatever the session remembers.

>>> import json
>>> from gcfkit.proxy.config import ProxyConfig
>>> from gcfkit.proxy.rewrite import Call
>>> here = Here(ProxyConfig(primer=False))
>>> def line(text: str) -> bytes:
...     content = [{"type": "text", "text": text}]
...     return json.dumps({"id": 1, "result": {"content": content}}).encode()
>>> here.answer(here.fresh(), line(json.dumps([1, 2, 3], indent=2)), Call("t", "t"), ())[1]
b'{"id":1,"result":{"content":[{"type":"text","text":"[1,2,3]"}]}}\\n'
>>> here.answer(here.fresh(), line("[1, 2, 3]"), Call("t", "t"), ())
Traceback (most recent call last):
  ...
gcfkit.answers.estimates.NeedsExactCounts: a close call (json 6 vs original 6 estimated tokens)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Protocol

from ..proxy.config import Codec, ProxyConfig
from ..proxy.held import Kept, MemoryReport, SessionMemory
from ..proxy.rewrite import Budget, Call, NeedsExactCounts, Outcome, Rewriter, SessionEvent
from ..relative import ResultMemory
from .placement import answers_here
from .worker import Hosted

__all__ = [
    "Here",
    "NeedsExactCounts",
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
        # Estimate mode: the tokenizer is never loaded here.
        self.codec = Codec.estimating()
        #: Per tool whose last result tried here needed exact counts, its results sent to
        #: a worker since (:func:`~gcfkit.transports.placement.answers_here`'s ``skipped``);
        #: at most :data:`_TOOLS` tools, the oldest dropped.
        self.skipped: dict[str, int] = {}

    def skip(self, tool: str) -> int:
        """How many of ``tool``'s results went to a worker since one here needed exact
        counts (0: none did)."""
        return self.skipped.get(tool, 0)

    def tried(self, tool: str, decided: bool | None) -> None:
        """A result of ``tool`` was tried here (``decided``: whether estimates decided it),
        or went to a worker while its tool is skipped (None)."""
        if decided:
            self.skipped.pop(tool, None)
        elif decided is False:
            self.skipped.pop(tool, None)
            self.skipped[tool] = 1
            while len(self.skipped) > _TOOLS:
                del self.skipped[next(iter(self.skipped))]
        elif tool in self.skipped:
            self.skipped[tool] += 1

    def host(self, spent: Iterable[str], memory: MemoryReport) -> Hosted:
        """A session's rewriter here, starting from what it remembers (``memory``, the
        pool's copy: :func:`catch_up`)."""
        hosted = Hosted(Rewriter(self.config, self.codec))
        catch_up(hosted, memory, (), spent)
        return hosted

    def deltas(self, call: Call) -> bool:
        """Whether results of ``call``'s tool may be answered as deltas (``--delta``)."""
        return self.config.policy.for_tool(call.tool, file=call.file).delta

    def fresh(self) -> Hosted:
        """A rewriter that remembers nothing (a request of no session is a worker's:
        :func:`answer_here`)."""
        return Hosted(Rewriter(self.config, self.codec))

    def answer(
        self, hosted: Hosted, line: bytes, call: Call, events: Sequence[SessionEvent]
    ) -> tuple[Outcome, bytes | None, float]:
        """The outcome, the line to send (None: the original) and the milliseconds it
        took. Raises :class:`NeedsExactCounts` (the session's state untouched but for
        ``events``) when a worker must answer it."""
        rewriter = hosted.rewriter
        rewriter.apply(events)
        started = time.monotonic()
        budget = Budget(time.monotonic, started + self.config.budget_for(len(line)))
        outcome, out = rewriter.rewrite_line(line, call, budget)
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
    for kept in memory.new:
        if kept.handle not in present:
            _hold(held, kept)
    for handle in memory.order:
        held.recall(handle)  # in the pool's order of use: the same result is evicted next
    names.latest.clear()
    names.latest.update(memory.latest)
    names.unasked.clear()
    names.unasked.update(memory.unasked)
    hosted.known = {result.handle for result in held.results()}
    hosted.reported = len(held.issued)


def _hold(held: ResultMemory, kept: Kept) -> None:
    held.spend((kept.handle,))
    held.remember(
        kept.tool,
        kept.args,
        kept.kind,
        kept,  # the value, never read here
        size=kept.size,
        depth=kept.depth,
        handle=kept.handle,
    )


#: Tools :attr:`Here.skipped` remembers at most.
_TOOLS: Final = 1024


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
) -> tuple[Outcome, bytes | None, float] | None:
    """One result of ``session`` answered here (its outcome, the line to send and the
    milliseconds it took), or None when it goes to a worker: the pool's rule
    (:func:`~gcfkit.transports.placement.answers_here`) says so, or the rewriter cannot
    decide from estimates. The session's rewriter here is caught up first
    (:func:`catch_up`); once it has answered, the session's state lives here
    (``leave_home``: the worker it lived in forgets it) and the pool's copy of what it
    remembers is updated."""
    if session.key is None:
        # A request of no session starts from the result it names and mints unguessable
        # handles the shell keeps (:mod:`gcfkit.transports.state`): the worker's rule
        # (``worker._Hosts._fresh``), not repeated here.
        return None
    skipped = here.skip(call.tool)
    if not answers_here(len(line), session.in_pool > 0, here.deltas(call), skipped):
        if skipped:
            here.tried(call.tool, None)
        return None
    own = session.key is not None and not session.closed
    try:
        if not own:
            return None  # a closed session's late result: a worker answers it
        if session.here is None:
            hosted = session.here = here.host(session.spent, session.memory.snapshot())
        else:
            hosted = session.here
            if session.behind or session.synced != session.changes:
                memory = session.memory.snapshot()
                catch_up(hosted, memory, session.behind, session.spent)
        if own:
            session.behind.clear()
            session.synced = session.changes
        outcome, out, ms = here.answer(hosted, line, call, events)
    except NeedsExactCounts:
        # The session stays where it lives (its worker, if any, still holds it); the
        # events reach this host again, with the rest it is behind by.
        here.tried(call.tool, False)
        return None
    except Exception:  # never break the agent: a worker answers, and this host is dropped
        session.here = None
        return None
    here.tried(call.tool, True)
    minted, report = hosted.answered(own)
    if own:
        # The state lives here now: the worker it lived in forgets it (and what it was owed).
        session.owed.clear()
        leave_home()
        session.spent.extend(minted)
        if report is not None:
            session.memory.apply(report)
            session.changes += 1
        session.synced = session.changes
    return outcome, out, ms
