"""Which strings a dense payload defines once and references by name (dense.md D9.2).

One walk over the value counts the strings in value positions; each string seen at least
twice (and at least 4 code points long) is defined when the cost function says its
references save at least 2 tokens. No search, no re-measuring: the choice is a pure function
of the value and the cost function, so it is deterministic for a given tokenizer. Names go
to the biggest savers first; neither the choice nor the names depend on the order of an
object's keys, which a table may change on the wire (§7.4.3), so re-encoding a decoded
payload gives the same payload.

The cost function is the caller's exact token count (the proxy passes
``gcfkit.tokens.count``) or, by default, :func:`estimate` (D9.3): the codec itself has no
dependencies.

>>> rows = [{"id": i, "note": "authored 2026-08-07 by Dayna Blackwell"} for i in range(3)]
>>> select({"a": rows, "b": "authored 2026-08-07 by Dayna Blackwell"})
{'authored 2026-08-07 by Dayna Blackwell': 'a'}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, Final

from .. import speedups
from ..scalar import format_scalar, quote_string

__all__ = ["MIN_LENGTH", "Count", "estimate", "forget", "names", "select", "spelling"]

#: A cost function: text to tokens.
Count = Callable[[str], int]

#: Strings shorter than this (in code points) are never defined (D9.2 step 2).
MIN_LENGTH: Final = 4

# D9.3: ASCII letter runs, ASCII digit runs, ASCII space runs, any other code point.
_PIECES: Final = re.compile(r"[A-Za-z]+|[0-9]+| +|.", re.DOTALL)
_LETTERS: Final = "abcdefghijklmnopqrstuvwxyz"


def estimate(text: str) -> int:
    """The default cost function of the dense profile (D9.3), an integer token estimate.

    Letter runs cost one token per 6 letters (rounded up), digit runs one per group of 3,
    a run of 2+ spaces one (a single space fuses with the next piece), anything else one
    per code point.

    >>> estimate("authored 2026-08-07 by Dayna Blackwell"), estimate("|$a|")
    (12, 4)
    """
    fast = speedups.dense_estimate(text)
    return fast if fast is not None else _estimate(text)


def _estimate(text: str) -> int:
    """:func:`estimate` in pure Python, the reference the accelerator's matches.

    >>> _estimate("authored 2026-08-07 by Dayna Blackwell")
    12
    """
    n = 0
    for m in _PIECES.finditer(text):
        piece = m.group()
        c = piece[0]
        size = len(piece)
        if c == " ":
            if size > 1:
                n += 1
        elif size > 1 or (c.isascii() and c.isalnum()):
            # A run of letters or of digits (a single other code point has size 1).
            n += (size + 5) // 6 if c.isalpha() else (size + 2) // 3
        else:
            n += 1
    return n


def names() -> Iterator[str]:
    """Definition names in canonical order: a..z, aa..zz, aaa.. (bijective base 26).

    >>> from itertools import islice
    >>> list(islice(names(), 28))[-3:]
    ['z', 'aa', 'ab']
    """
    width = 1
    while True:
        index = [0] * width
        while True:
            yield "".join(_LETTERS[i] for i in index)
            k = width - 1
            while k >= 0 and index[k] == 25:
                index[k] = 0
                k -= 1
            if k < 0:
                break
            index[k] += 1
        width += 1


def spelling(s: str) -> str:
    """The wire spelling of string ``s`` as a dense row cell (§2.4 plus D4.3).

    >>> spelling("plain"), spelling("a|b"), spelling("$100")
    ('plain', '"a|b"', '"$100"')
    """
    fast = speedups.spelling(s)
    if fast is not None:
        return fast
    if s[:1] == "$":
        return quote_string(s)
    return format_scalar(s)


def _occurrences(value: Any) -> dict[str, int]:
    """Strings in value positions (D9.2 step 1), counted (in C when the value is plain)."""
    fast = speedups.occurrences(value)
    if fast is not None:
        return fast
    counts: dict[str, int] = {}
    get = counts.get
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        for v in stack[-1]:
            if isinstance(v, str):
                counts[v] = get(v, 0) + 1
            elif isinstance(v, Mapping):
                stack.append(iter(v.values()))
                break
            elif isinstance(v, Sequence) and not isinstance(v, (bytes, bytearray)):
                stack.append(iter(v))
                break
        else:
            stack.pop()
    return counts


#: How many cost functions keep their counts (the latest used), and how many strings each
#: keeps (then its memo starts over), and the longest string kept: a bound on memory.
_MEMO_COSTS: Final = 4
_MEMO_STRINGS: Final = 8192
_MEMO_LENGTH: Final = 256


class _Memo:
    """One cost function's counts, kept across :func:`select` calls of a process: strings
    recur from result to result of a session, and two counts per candidate were most of a
    dense encode with exact counts. ``costs[s]`` is ``(cost("|w|"), cost("$a=w\\n"))`` for
    the spelling ``w`` of ``s``; the second is -1 (not counted) when a reference saves
    nothing (``cost("|w|") <= ref``)."""

    __slots__ = ("costs", "ref")

    def __init__(self, ref: int) -> None:
        self.ref = ref
        self.costs: dict[str, tuple[int, int]] = {}


_MEMOS: dict[Count, _Memo] = {}


def forget() -> None:
    """Drop the counts :func:`select` keeps between calls (for benchmarks and tests: the
    choice is the same with or without them, only slower).

    >>> forget()
    """
    _MEMOS.clear()


def _memo(cost: Count) -> _Memo | None:
    try:
        memo = _MEMOS.pop(cost)  # re-inserted last: the most recently used
    except KeyError:
        memo = _Memo(cost("|$a|"))
        for stale in list(_MEMOS)[: max(0, len(_MEMOS) - _MEMO_COSTS + 1)]:
            _MEMOS.pop(stale, None)
    except TypeError:  # an unhashable cost function: counted afresh each call
        return None
    _MEMOS[cost] = memo
    return memo


def select(value: Any, count: Count | None = None) -> dict[str, str]:
    """The strings a dense encode of ``value`` defines, mapped to their names (D9.2).

    ``count`` is the cost function (exact tokens of the target tokenizer); without it the
    D9.3 :func:`estimate` is used. The mapping is in name order: by decreasing estimated
    saving, equal savings by the strings' code points.

    A cost function must be a pure function of the text, as a tokenizer is: the counts it
    gives are kept (a bounded memo per cost function, :func:`forget`), so a string seen in
    an earlier call is not counted again.

    >>> select({"paths": ["/api/users"] * 9 + ["/api/auth"] * 3})
    {'/api/users': 'a'}
    """
    cost = count if count is not None else estimate
    memo = _memo(cost)
    if memo is None:
        memo = _Memo(cost("|$a|"))
    ref, costs = memo.ref, memo.costs
    chosen: list[tuple[int, str]] = []
    candidates = [(s, n) for s, n in _occurrences(value).items() if n > 1 and len(s) >= MIN_LENGTH]
    for s, n in candidates:
        known = costs.get(s)
        if known is None:
            w = spelling(s)
            inline = cost("|" + w + "|")
            # The definition line is counted only when a reference saves anything.
            known = (inline, cost("$a=" + w + "\n") if inline > ref else -1)
            if len(s) <= _MEMO_LENGTH:
                if len(costs) >= _MEMO_STRINGS:
                    costs.clear()
                costs[s] = known
        gain = known[0] - ref
        if gain <= 0:
            continue
        saving = n * gain - known[1]
        if saving >= 2:
            chosen.append((-saving, s))
    chosen.sort()
    return dict(zip([s for _, s in chosen], _first_names(len(chosen)), strict=False))


_NAMES: list[str] = []


def _first_names(k: int) -> list[str]:
    """The first ``k`` of :func:`names`, kept (spelling each name afresh cost more than the
    rest of a warm :func:`select`)."""
    have = len(_NAMES)
    if have < k:
        # Doubling, so each name is spelled about once; the tail from ``have`` is replaced
        # whole, which stays right if another thread grew the list meanwhile.
        _NAMES[have:] = list(islice(names(), max(k, 2 * have, 26)))[have:]
    return _NAMES[:k]
