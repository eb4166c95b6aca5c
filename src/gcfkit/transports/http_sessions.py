"""The sessions an HTTP server keeps: bounded in number and in bytes, expired when idle.

A :class:`SessionTable` maps a session id to what the server keeps for it, most recently
used last. Each entry is told the bytes it holds (:meth:`SessionTable.resize`); past
``max_entries`` entries or ``max_bytes`` bytes in all, the least recently used are
evicted, and :meth:`SessionTable.expired` takes out those idle longer than
``idle_timeout``. What an eviction means is the owner's (the gateway forgets a session's
state; its next results start from a full answer, as after a restart). Times come from the
``clock`` given (the event loop's), so the table itself keeps no clock of its own.

>>> now = [0.0]
>>> table: SessionTable[str] = SessionTable(2, 100, 60.0, clock=lambda: now[0])
>>> table.add("a", "A"), table.add("b", "B"), table.add("c", "C")
([], [], ['A'])
>>> table.resize("b", 90), table.resize("c", 20)
([], ['B'])
>>> now[0] = 61.0
>>> table.expired(), len(table)
(['C'], 0)
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["SessionTable"]

T = TypeVar("T")


@dataclasses.dataclass
class _Entry(Generic[T]):
    value: T
    used: float
    bytes: int = 0


class SessionTable(Generic[T]):
    """Sessions by id, bounded (see the module doc)."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        idle_timeout: float,
        *,
        clock: Callable[[], float],
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._entries: collections.OrderedDict[str, _Entry[T]] = collections.OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def items(self) -> list[tuple[str, T]]:
        """(id, value) of every entry, least recently used first."""
        return [(k, e.value) for k, e in self._entries.items()]

    def get(self, session_id: str) -> T | None:
        """The entry's value (now its most recent use), or None."""
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        entry.used = self._clock()
        self._entries.move_to_end(session_id)
        return entry.value

    def add(self, session_id: str, value: T) -> list[T]:
        """Keep ``value`` for ``session_id`` (replacing what was there, returned with the
        evicted ones, if it was another value)."""
        old = self._entries.pop(session_id, None)
        dropped = [old.value] if old is not None and old.value is not value else []
        if old is not None:
            self.bytes -= old.bytes
        self._entries[session_id] = _Entry(value, self._clock(), old.bytes if old else 0)
        if old is not None:
            self.bytes += old.bytes
        return dropped + self._evict()

    def pop(self, session_id: str) -> T | None:
        """Take the entry out; its value, or None."""
        entry = self._entries.pop(session_id, None)
        if entry is None:
            return None
        self.bytes -= entry.bytes
        return entry.value

    def resize(self, session_id: str, size: int) -> list[T]:
        """The entry holds ``size`` bytes now; the values evicted to stay within
        ``max_bytes`` (the least recently used first, possibly this one)."""
        entry = self._entries.get(session_id)
        if entry is None:
            return []
        self.bytes += size - entry.bytes
        entry.bytes = size
        return self._evict()

    def expired(self) -> list[T]:
        """Take out and return the entries idle longer than ``idle_timeout``."""
        limit = self._clock() - self.idle_timeout
        old = [k for k, e in self._entries.items() if e.used < limit]
        return [v for v in (self.pop(k) for k in old) if v is not None]

    def _evict(self) -> list[T]:
        evicted: list[T] = []
        while self._entries and (
            len(self._entries) > self.max_entries or self.bytes > self.max_bytes
        ):
            _, entry = self._entries.popitem(last=False)
            self.bytes -= entry.bytes
            evicted.append(entry.value)
        return evicted
