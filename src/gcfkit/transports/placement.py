"""Where a tool result is answered: in the relay's own process or in a worker
(:func:`answers_here`), and which queued result starts on which worker now (:func:`place`):
the worker pool's rules (:mod:`gcfkit.transports.offload`), as pure functions of what the
pool holds and the time.

A result is answered in the relay's process when it is not big (its response line at most
:data:`IN_PROCESS_BYTES`) and its session has no earlier result waiting for a worker (a
session's results reach its state in order); everything else goes to a worker. (While one
of the session's results is being rewritten in a worker, a result answered in the relay
is *stray*: :mod:`gcfkit.transports.local`.)

A session's state lives in the worker that rewrote its last result, its *home*. For each
result in the queue, oldest first:

* a later result of a session that already has one waiting stays behind it (a session's
  results are rewritten in order);
* it goes to its home when that is idle; to the idle worker that is home to the fewest
  sessions when it has no home (a request of no session never has one);
* when its home is busy, it waits until it has waited ``patience`` seconds, then goes to an
  idle worker: *stray* (rewritten without the session's state) when the home is busy with
  the same session's earlier result, else as a move (that worker becomes its home);
* with no worker idle, it waits.

The pool calls :func:`place` whenever a worker frees up or a result arrives, and again at
``wake`` (the moment the first patient result stops waiting for its home), with ``now`` on
its clock: no process and no clock here, so the rule is tested as it is written.

>>> waiting = [Waiting(session=1, home="w1", queued=0.0), Waiting(session=2, home=None, queued=0.0)]
>>> plan = place(waiting, idle=["w2"], homes={"w2": 0}, busy={"w1": 3}, now=0.01, patience=0.05)
>>> plan.starts, plan.wake
((Start(index=1, worker='w2', stray=False),), 0.05)
>>> place(waiting, ["w2"], {"w2": 0}, {"w1": 1}, now=0.06, patience=0.05).starts[0]
Start(index=0, worker='w2', stray=True)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = [
    "IN_PROCESS_BYTES",
    "Placement",
    "Start",
    "Waiting",
    "answers_here",
    "place",
]

W = TypeVar("W", bound=Hashable)

#: The most a result answered in the relay's process may cost, in bytes of its response
#: line: every other line waits meanwhile, where a worker answers it while the relay goes on.
#: The relay answers with exact counts (settled-estimate mode, gcfkit._bpe), as a worker
#: does. Measured in the relay (``Here.answer`` then the ledger's count, the bench's
#: records, the shared 2-core machine at load 0.4, median of 9): response lines of nested
#: records 12 KiB 1.8 ms + 0.6, 51 KiB 4.5 + 2.0, 73 KiB 6.1 + 2.7, 145 KiB 11.4 + 5.1;
#: flat 12 KiB 2.0 + 0.3, 52 KiB 3.8 + 1.9, 73 KiB 5.5 + 2.7, 146 KiB 10.7 + 5.4 (the
#: ledger's count waits for a pause between results). A worker adds a pickle each way and
#: two context switches (~2 ms small, ~13 ms at 1 MB) to the same rewrite, so answering
#: here is faster for the result itself at every size this side of a megabyte; the bound
#: is what a concurrent small call may wait behind one: at 64 KiB about 6 ms (what
#: gcf-proxy adds to a 45 KB result), at 128 KiB twice that. The issue's 45 KB results
#: (51 KiB lines) are answered here; bigger ones go to a worker.
IN_PROCESS_BYTES: Final = 64 * 1024


def answers_here(size: int, queued: bool) -> bool:
    """Whether a result whose response line is ``size`` bytes is answered in the relay's
    process; ``queued``: whether an earlier result of its session waits to start in a
    worker.

    >>> answers_here(2_000, False), answers_here(2_000, True), answers_here(100_000, False)
    (True, False, False)
    """
    return not queued and size <= IN_PROCESS_BYTES


@dataclass(frozen=True, slots=True)
class Waiting(Generic[W]):
    """A queued result as placement sees it: its session (None: a request of no session),
    that session's home worker (None: it has none) and when it was queued."""

    session: int | None
    home: W | None
    queued: float


@dataclass(frozen=True, slots=True)
class Start(Generic[W]):
    """Start the result at ``index`` in the queue on ``worker``; ``stray``: without its
    session's state."""

    index: int
    worker: W
    stray: bool


@dataclass(frozen=True, slots=True)
class Placement(Generic[W]):
    """What starts now, and when to place again (None: when a worker frees up or a result
    arrives, no sooner)."""

    starts: tuple[Start[W], ...]
    wake: float | None


def place(
    waiting: Sequence[Waiting[W]],
    idle: Sequence[W],
    homes: Mapping[W, int],
    busy: Mapping[W, int | None],
    now: float,
    patience: float,
) -> Placement[W]:
    """The placement of the ``waiting`` results (oldest first) on the ``idle`` workers (see
    the module docstring). ``homes``: how many sessions live in each idle worker; ``busy``:
    the session of each busy worker's result (None: a result of no session).

    >>> place([Waiting(None, None, 0.0)], [], {}, {}, now=1.0, patience=0.05)
    Placement(starts=(), wake=None)
    """
    free = list(idle)
    blocked: set[int] = set()  # sessions with an earlier result still waiting
    # What the starts of this pass change: a session's home, a worker's session.
    moved: dict[int, W] = {}
    taken: dict[W, int | None] = {}
    starts: list[Start[W]] = []
    wake: float | None = None
    for index, result in enumerate(waiting):
        session = result.session
        if session is not None and session in blocked:
            continue
        home = moved.get(session, result.home) if session is not None else None
        worker: W | None = None
        stray = False
        if home is not None and home in free:
            worker = home
        elif free and (home is None or now - result.queued >= patience):
            worker = min(free, key=lambda w: homes.get(w, 0))
            # Its home busy with its own last result: run without its state.
            stray = home is not None and taken.get(home, busy.get(home)) == session
        elif free:
            at = result.queued + patience
            wake = at if wake is None else min(wake, at)
        if worker is None:
            if session is not None:
                blocked.add(session)
            continue
        free.remove(worker)
        taken[worker] = session
        if session is not None and not stray:
            moved[session] = worker
        starts.append(Start(index, worker, stray))
    return Placement(tuple(starts), wake)
