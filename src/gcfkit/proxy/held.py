"""What a session remembers (its ``ref=`` results), kept where the session lives.

Where remembered results are kept, and who evicts them:

* A session's named results are a bounded LRU, :class:`~gcfkit.relative.ResultMemory` (at
  most ``ref_results`` results and ``ref_bytes`` of them, :class:`ProxyConfig
  <gcfkit.proxy.config.ProxyConfig>`'s 64 and 8 MiB: no flag sets them), owned by the
  session's :class:`~gcfkit.answers.since.Names`, inside the
  :class:`~gcfkit.proxy.rewrite.Rewriter` that answers its results. The LRU evicts
  (remembering or recalling a result uses it); ``initialize`` clears it
  (:meth:`Rewriter.reset <gcfkit.proxy.rewrite.Rewriter.reset>`).
* In process (:meth:`ProxyCore.from_server <gcfkit.proxy.core.ProxyCore.from_server>`) that
  rewriter is the core's own, and that is all.
* With worker processes (:mod:`gcfkit.transports.offload`) the rewriter lives in the worker
  that rewrote the session's last result, and a worker may go at any time: killed at another
  result's deadline, crashed, retired when idle. So the session's owner in the main process
  (its :class:`~gcfkit.transports.offload.Lane`) keeps a copy, a :class:`SessionMemory`:
  with each answer the worker reports what the memory now holds (:func:`report`: the
  handles in LRU order, and each result the copy lacks, as text), and a worker the session
  moves to starts from the copy (:func:`restore`). A handle so outlives every worker; only
  the result a dying worker was rewriting is lost, and that one was never delivered named.
* A session's end drops both (``Lane.close``); the HTTP gateway bounds how many sessions
  there are (1,024, least recently used first).

The copy holds each result as text (a JSON value as compact JSON): a string costs the event
loop a copy to receive and to hand on, where a parsed value would cost a walk of it.

>>> from gcfkit.answers.since import Names
>>> from gcfkit.relative import ResultMemory
>>> names = Names("all", reanchor=15, min_bytes=0, count=len, memory=ResultMemory(seed=1))
>>> h = names.memory.remember("read_graph", "{}", "json", {"a": [1]}, size=9)
>>> copy = SessionMemory()
>>> copy.apply(report(names, set()))
>>> again = Names("all", reanchor=15, min_bytes=0, count=len, memory=ResultMemory(seed=2))
>>> restore(again, copy.snapshot())
>>> again.memory.recall(h).value
{'a': [1]}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..answers.since import Names
from ..errors import GCFError
from ..jsonio import dumps_compact, loads_json
from ..relative import Held
from ..relative.memory import Kind

__all__ = ["Kept", "MemoryReport", "SessionMemory", "report", "restore"]


@dataclass(frozen=True, slots=True)
class Kept:
    """One remembered result as it travels between processes: what :class:`Held` says,
    with the value as ``text`` (compact JSON for a JSON value)."""

    handle: str
    tool: str
    args: str
    kind: Kind
    text: str
    size: int
    depth: int


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """What a session's memory holds: its handles in LRU order (``order``), the results
    the receiver may not have yet (``new``), and, with ``--delta session``, the latest
    handle of each call and the relative answers nobody asked for since (``latest``,
    ``unasked``). A snapshot for a new worker is one whose ``new`` is every result."""

    order: tuple[str, ...] = ()
    new: tuple[Kept, ...] = ()
    latest: dict[str, str] = field(default_factory=dict)
    unasked: dict[str, int] = field(default_factory=dict)


def report(names: Names, known: set[str]) -> MemoryReport:
    """What ``names`` holds now, for a receiver that has the results in ``known`` (which
    becomes every handle reported). A result whose value has no JSON text is left out of
    ``new`` (the receiver's copy then lacks it: a later answer to it is a full one)."""
    held = names.memory.results()
    new = tuple(k for h in held if h.handle not in known for k in _kept(h))
    known.clear()
    known.update(h.handle for h in held)
    return MemoryReport(tuple(h.handle for h in held), new, dict(names.latest), dict(names.unasked))


def restore(names: Names, memory: MemoryReport) -> None:
    """Put what ``memory`` holds into ``names`` (a new worker's, for a session that moved
    there): its results in LRU order under their own handles."""
    for kept in memory.new:
        try:
            value = loads_json(kept.text) if kept.kind == "json" else kept.text
        except (GCFError, RecursionError, ValueError):
            continue
        names.memory.spend((kept.handle,))
        names.memory.remember(
            kept.tool,
            kept.args,
            kept.kind,
            value,
            size=kept.size,
            depth=kept.depth,
            handle=kept.handle,
        )
    names.latest.update(memory.latest)
    names.unasked.update(memory.unasked)


class SessionMemory:
    """The main process's copy of one session's remembered results (see the module
    docstring): updated by each :func:`report`, handed to a new worker as a
    :meth:`snapshot`, cleared when the session starts over (``initialize``)."""

    def __init__(self) -> None:
        self._kept: dict[str, Kept] = {}
        self._latest: dict[str, str] = {}
        self._unasked: dict[str, int] = {}
        self._pending: Callable[[], MemoryReport] | None = None

    def __len__(self) -> int:
        self.settle()
        return len(self._kept)

    def later(self, source: Callable[[], MemoryReport]) -> None:
        """The next report is ``source()``, taken when the copy is first read (or another
        report comes): the relay's own rewriter (:mod:`gcfkit.transports.local`) answers
        most results, and its session's copy is read only when the session moves to a
        worker or is copied elsewhere, so no result pays for a report nobody reads. The
        source reports everything since its last report, so a later one replaces it."""
        self._pending = source

    def settle(self) -> None:
        """Take the report :meth:`later` left, now."""
        source, self._pending = self._pending, None
        if source is not None:
            self.apply(source())

    @property
    def bytes(self) -> int:
        """The size of the results held (as ``ref_bytes`` counts them): what an HTTP server
        bounds across its sessions."""
        self.settle()
        return sum(k.size for k in self._kept.values())

    def apply(self, memory: MemoryReport) -> None:
        """What a worker's memory holds after a result (its report)."""
        self.settle()
        new = {k.handle: k for k in memory.new}
        kept: dict[str, Kept] = {}
        for handle in memory.order:
            found = new.get(handle) or self._kept.get(handle)
            if found is not None:
                kept[handle] = found
        self._kept = kept
        self._latest = dict(memory.latest)
        self._unasked = dict(memory.unasked)

    def clear(self) -> None:
        """The session starts over: nothing is held any more."""
        self._pending = None
        self._kept.clear()
        self._latest.clear()
        self._unasked.clear()

    def snapshot(self) -> MemoryReport:
        """Everything held, for a worker that has none of it."""
        self.settle()
        return MemoryReport(
            tuple(self._kept),
            tuple(self._kept.values()),
            dict(self._latest),
            dict(self._unasked),
        )


def _kept(held: Held) -> tuple[Kept, ...]:
    if held.kind == "json":
        try:
            text = dumps_compact(held.value)
        except (TypeError, ValueError, RecursionError):
            return ()
    elif isinstance(held.value, str):
        text = held.value
    else:
        return ()
    return (Kept(held.handle, held.tool, held.args, held.kind, text, held.size, held.depth),)
