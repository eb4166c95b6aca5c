"""The producer's side of generic deltas (spec §10a.4, §10a.8), the twin of
:mod:`gcfkit.graph.session`.

A :class:`DeltaSession` answers every update of a keyed set with one of the three outcomes:
a header-only ``unchanged=true`` payload, a delta, or a full payload, re-anchoring with a
full payload on a :class:`FixedN` or :class:`SizeGuard` schedule.

>>> from gcfkit.generic.delta import KeyedSet
>>> s = DeltaSession(KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}]))
>>> s.full().splitlines()[0]  # doctest: +ELLIPSIS
'GCF profile=generic pack_root=sha256:... key=id'
>>> s.next(KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}]))[0].split()[2]
'unchanged=true'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..errors import ConfigError
from .delta import KeyedSet, diff, dumps_delta, dumps_full, dumps_unchanged

__all__ = ["DeltaSession", "FixedN", "SizeGuard"]


@dataclass(frozen=True)
class FixedN:
    """Re-anchor with a full payload every ``n``-th changed turn (§10a.8; default 15).

    >>> FixedN(3).n
    3
    """

    n: int = 15

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ConfigError("invalid_option", f"FixedN needs n >= 1, not {self.n}")


@dataclass(frozen=True)
class SizeGuard:
    """Re-anchor when a delta is not smaller than ``ratio`` of the full payload (§10a.2),
    or when the deltas since the last full, this one included, reach a full's size.

    >>> SizeGuard().ratio
    0.6
    """

    ratio: float = 0.6

    def __post_init__(self) -> None:
        if not 0 < self.ratio <= 1:
            raise ConfigError("invalid_option", f"SizeGuard needs 0 < ratio <= 1, not {self.ratio}")


_EVERY_15: Final = FixedN(15)


class DeltaSession:
    """Producer side of generic deltas: one answer per update (§10a.4, §10a.8).

    :meth:`full` anchors; :meth:`next` returns ``(wire, is_full)``: a header-only
    ``unchanged=true`` payload when nothing changed, a delta, or a full payload when the
    key or fields changed or the re-anchor policy says so. :class:`FixedN` counts delta
    turns only (unchanged answers add no drift); :class:`SizeGuard` compares UTF-8 byte
    sizes of the wires. The tool name goes on full payloads only, as in the conformance
    sessions.

    >>> s = DeltaSession(KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}]), reanchor=FixedN(2))
    >>> _ = s.full()
    >>> s.next(KeyedSet("id", ["id", "v"], [{"id": 1, "v": 1}]))[1]
    False
    >>> s.next(KeyedSet("id", ["id", "v"], [{"id": 1, "v": 2}]))[1]
    True
    """

    __slots__ = ("base", "reanchor", "spent", "tool", "turns")

    def __init__(
        self, base: KeyedSet, *, tool: str = "", reanchor: FixedN | SizeGuard = _EVERY_15
    ) -> None:
        self.base = base
        self.tool = tool
        self.reanchor = reanchor
        self.turns = 0
        self.spent = 0

    def full(self) -> str:
        """A full payload of the current set; it anchors the session."""
        self.turns = 0
        self.spent = 0
        return dumps_full(self.base, tool=self.tool)

    def next(self, update: KeyedSet) -> tuple[str, bool]:
        """Answer ``update`` against the last emitted set: ``(wire, is_full)``."""
        base = self.base
        if update.key != base.key or update.fields != base.fields:
            self.base = update
            return self.full(), True
        delta = diff(base, update)
        if delta.empty:
            self.base = update
            return dumps_unchanged(update), False
        wire = dumps_delta(delta)
        policy = self.reanchor
        if isinstance(policy, FixedN):
            reanchor = self.turns + 1 >= policy.n
        else:
            size = len(wire.encode())
            full_size = len(dumps_full(update, tool=self.tool).encode())
            reanchor = size >= policy.ratio * full_size or self.spent + size >= full_size
        self.base = update
        if reanchor:
            return self.full(), True
        self.turns += 1
        self.spent += len(wire.encode())
        return wire, False

    def __repr__(self) -> str:
        return f"DeltaSession(key={self.base.key!r}, rows={len(self.base)}, turns={self.turns})"
