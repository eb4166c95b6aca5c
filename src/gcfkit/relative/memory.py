"""What a producer remembers of the results it delivered: handles and a bounded LRU.

:class:`ResultMemory` is the producer's side of docs/extensions/relative-answers.md §2:
every result it may later answer relative to is remembered under a fresh handle, for one
session (one connection, until the client initializes again). A handle is six decimal
digits drawn at random (four tokens in o200k and cl100k), never reused within the memory's
lifetime, so a reader cannot guess one it was not shown, and a handle that has expired can
never come to mean another result.

Where a handle is the only key to a result (the sessionless 2026-07-28 protocol over HTTP,
where no session id narrows who may name it), the memory is ``unguessable``: a handle is
then :data:`UNGUESSABLE_DIGITS` decimal digits from :mod:`secrets` (106 random bits, 13
tokens as ``ref=`` in o200k and cl100k instead of 4), which no one guesses in any number of
tries a server would answer.

A result expires when it is evicted: the memory keeps at most ``max_results`` results and
``max_bytes`` of their sizes, dropping the least recently used (remembering or recalling a
result uses it).

>>> memory = ResultMemory(seed=7)
>>> h = memory.remember("read_graph", "{}", "json", {"entities": []}, size=16)
>>> len(h), h.isdigit(), memory.recall(h).tool
(6, True, 'read_graph')
>>> memory.recall("000000") is None
True
"""

from __future__ import annotations

import os
import random
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RESULTS",
    "UNGUESSABLE_DIGITS",
    "Held",
    "Kind",
    "ResultMemory",
]

#: How many results a session remembers by default.
DEFAULT_MAX_RESULTS: Final = 64
#: How many bytes of results (their delivered sizes) a session remembers by default.
DEFAULT_MAX_BYTES: Final = 8 * 1024 * 1024

# Six digits without a leading zero: a model that passes the handle as a number still
# names it exactly. 900,000 values; the memory stops minting long before they run out.
_LOW: Final = 100_000
_HIGH: Final = 999_999
_MAX_MINTED: Final = 300_000

#: Digits of an unguessable handle: the most a handle may have (docs/extensions/
#: relative-answers.md: 32 characters), without a leading zero (9 x 10^31 values, 106
#: bits). Digits, not hex or base32: o200k and cl100k read three digits a token, so 106 bits
#: cost 11 tokens where 128 bits of hex cost about 20.
UNGUESSABLE_DIGITS: Final = 32
_LONG_LOW: Final = 10 ** (UNGUESSABLE_DIGITS - 1)
_LONG_SPAN: Final = 9 * _LONG_LOW

#: What a remembered result is: a JSON value, a text, or the text of a file read.
Kind = Literal["json", "text", "file"]


@dataclass(frozen=True, slots=True)
class Held:
    """One remembered result: the call it answered (``tool`` and a canonical ``args``
    key), what it is (``kind``), its ``value`` (JSON value or text), its delivered ``size``
    in bytes and ``depth``, the number of relative answers since the last full result."""

    handle: str
    tool: str
    args: str
    kind: Kind
    value: Any
    size: int
    depth: int = 0


class ResultMemory:
    """Results delivered in one session, by handle; bounded by count and bytes (LRU).

    ``seed`` makes the handles reproducible (tests); without it they come from the
    operating system's random source. ``unguessable``: long handles (see the module
    docstring).

    >>> len(ResultMemory(unguessable=True).mint())
    32
    """

    def __init__(
        self,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        seed: int | None = None,
        unguessable: bool = False,
    ) -> None:
        if max_results < 1 or max_bytes < 1:
            raise ValueError("a result memory holds at least one result and one byte")
        self.max_results = max_results
        self.max_bytes = max_bytes
        # Seeded: reproducible (tests). Else None: the operating system's bytes (_ENTROPY).
        self._rng = random.Random(seed) if seed is not None else None
        self._held: OrderedDict[str, Held] = OrderedDict()
        self._bytes = 0
        self._minted: set[str] = set()
        self._issued: list[str] = []
        self.unguessable = unguessable

    def __len__(self) -> int:
        return len(self._held)

    @property
    def bytes(self) -> int:
        """The sizes of the remembered results, added up."""
        return self._bytes

    def mint(self) -> str | None:
        """A new handle, never issued before by this memory (None once it has issued its
        last): for a result about to be delivered, before it is known whether it will be.

        >>> m = ResultMemory(seed=1)
        >>> m.mint() != m.mint()
        True
        """
        if len(self._minted) >= _MAX_MINTED:
            return None
        while True:
            handle = self._draw()
            if handle not in self._minted:
                self._minted.add(handle)
                self._issued.append(handle)
                return handle

    def _draw(self) -> str:
        low, span = (_LONG_LOW, _LONG_SPAN) if self.unguessable else (_LOW, _HIGH - _LOW + 1)
        below = _ENTROPY.below if self._rng is None else self._rng.randrange
        return str(low + below(span))

    @property
    def issued(self) -> Sequence[str]:
        """The handles this memory has minted, oldest first (not those it was told were
        spent): what another memory of the same session must never mint.

        >>> m = ResultMemory(seed=3)
        >>> h = m.mint()
        >>> list(m.issued) == [h]
        True
        """
        return self._issued

    def spend(self, handles: Iterable[str]) -> None:
        """Never mint ``handles``: an earlier memory of the same session issued them (the
        proxy's worker process was replaced, and a reader may still hold them).

        >>> m = ResultMemory(seed=1)
        >>> first = ResultMemory(seed=1).mint()
        >>> m.spend([first]); m.mint() != first
        True
        """
        self._minted.update(handles)

    def remember(
        self,
        tool: str,
        args: str,
        kind: Kind,
        value: Any,
        *,
        size: int,
        depth: int = 0,
        handle: str | None = None,
    ) -> str | None:
        """Remember a delivered result under ``handle`` (one :meth:`mint` issued and nothing
        holds yet), or a new one; return the handle, or None if the result cannot be kept
        (larger than ``max_bytes``, no handle left, or ``handle`` not this memory's)."""
        if size > self.max_bytes:
            return None
        if handle is None:
            handle = self.mint()
        elif handle not in self._minted or handle in self._held:
            return None
        if handle is None:
            return None
        self._held[handle] = Held(handle, tool, args, kind, value, size, depth)
        self._bytes += size
        while len(self._held) > self.max_results or self._bytes > self.max_bytes:
            _, old = self._held.popitem(last=False)
            self._bytes -= old.size
        return handle

    def recall(self, handle: str) -> Held | None:
        """The result remembered under ``handle`` (now the most recently used), or None
        when the handle is unknown or expired.

        >>> ResultMemory().recall("123456") is None
        True
        """
        held = self._held.get(handle)
        if held is not None:
            self._held.move_to_end(handle)
        return held

    def results(self) -> list[Held]:
        """The remembered results, least recently used first (the order they are evicted in;
        :mod:`gcfkit.proxy.held` hands them to a new worker in it).

        >>> m = ResultMemory(seed=2)
        >>> a = m.remember("t", "{}", "text", "a", size=1)
        >>> b = m.remember("t", "{}", "text", "b", size=1)
        >>> _ = m.recall(a); [h.value for h in m.results()]
        ['b', 'a']
        """
        return list(self._held.values())

    def forget(self, handle: str) -> None:
        """Drop one result (its handle stays spent)."""
        held = self._held.pop(handle, None)
        if held is not None:
            self._bytes -= held.size

    def clear(self) -> None:
        """Forget every result (a new session); spent handles stay spent."""
        self._held.clear()
        self._bytes = 0


class _Entropy:
    """Random integers from the operating system's generator (``os.urandom``, what
    ``secrets`` reads), its bytes read 4 KiB ahead: an unguessable handle costs no system
    call of its own. Each thread reads its own bytes (two threads never draw the same), and
    a forked child starts with none read (it must not draw its parent's).

    >>> 0 <= _Entropy().below(10) < 10
    True
    """

    _READ: Final = 4096

    def __init__(self) -> None:
        self._local = threading.local()

    def clear(self) -> None:
        self._local = threading.local()

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)`` (rejection sampling, as ``secrets.randbelow``)."""
        bits = n.bit_length()
        size = (bits + 7) // 8
        local = self._local
        pool: bytes = getattr(local, "pool", b"")
        at: int = getattr(local, "at", 0)
        while True:
            if at + size > len(pool):
                pool, at = os.urandom(self._READ), 0
            r = int.from_bytes(pool[at : at + size], "big") >> (size * 8 - bits)
            at += size
            if r < n:
                local.pool, local.at = pool, at
                return r


_ENTROPY: Final = _Entropy()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ENTROPY.clear)
