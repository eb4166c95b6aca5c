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
from typing import Any, Final

from .. import speedups
from ..scalar import format_scalar, quote_string

__all__ = ["MIN_LENGTH", "Count", "estimate", "names", "select", "spelling"]

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


def select(value: Any, count: Count | None = None) -> dict[str, str]:
    """The strings a dense encode of ``value`` defines, mapped to their names (D9.2).

    ``count`` is the cost function (exact tokens of the target tokenizer); without it the
    D9.3 :func:`estimate` is used. The mapping is in name order: by decreasing estimated
    saving, equal savings by the strings' code points.

    >>> select({"paths": ["/api/users"] * 9 + ["/api/auth"] * 3})
    {'/api/users': 'a'}
    """
    cost = count if count is not None else estimate
    ref = cost("|$a|")
    chosen: list[tuple[int, str]] = []
    for s, n in _occurrences(value).items():
        if n < 2 or len(s) < MIN_LENGTH:
            continue
        w = spelling(s)
        gain = cost("|" + w + "|") - ref
        if gain <= 0:
            continue
        saving = n * gain - cost("$a=" + w + "\n")
        if saving >= 2:
            chosen.append((-saving, s))
    chosen.sort()
    return {s: name for (_, s), name in zip(chosen, names(), strict=False)}
