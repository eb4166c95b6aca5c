"""What the forms of one result cost, measured as cheaply as the choice allows (used by
:class:`~gcfkit.proxy.rewrite.Rewriter`).

* :func:`gcf_cells`: the table cells GCF would write, before anything is built;
* :class:`Counts`: exact counts of compact JSON and of the original, each taken once and
  only as far as a comparison needs;
* estimate mode (:mod:`gcfkit.answers.estimates`): :class:`Tally`, the estimates a
  session's names are counted with (and the texts the ledger then owes an exact count of),
  and :func:`needs_exact_count`, the count dense definitions get.

>>> gcf_cells([{f"k{i}": i} for i in range(100)])
10000
>>> limited = lambda t, n: len(t) if len(t) <= n else None
>>> c = Counts(len, limited, "[1]", ["[ 1 ]"], False, full_chars=0)
>>> c.json(10), c.original(2), c.original_exact
(3, 3, False)
>>> c = Counts(len, limited, "[1]", ["[ 1 ]"], False)  # small: counted in full at once
>>> c.original(2), c.original_exact
(5, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Final

from .. import speedups, tokens
from ..answers.estimates import NeedsExactCounts

__all__ = [
    "DEFINITION_REFERENCE",
    "DENSE_CELLS_PER_BYTE",
    "FULL_COUNT_CHARS",
    "TOKENS_PER_CELL",
    "Counts",
    "Tally",
    "definition_cost",
    "gcf_cells",
    "needs_exact_count",
]

#: Each table cell GCF writes (a scalar and a delimiter, at least 2 characters) is at least
#: this many tokens: o200k_base and cl100k_base spend 1-2 tokens on "~|", and no token of
#: either spans 4 cells. A token is at least one byte, so GCF can win only below this bound.
TOKENS_PER_CELL: Final = 0.25

#: Below this many cells per byte of compact JSON, a table is dense (GCF's case) and GCF is
#: built and counted first; above, compact JSON is counted first to compare the cells with.
DENSE_CELLS_PER_BYTE: Final = 0.25

#: The reference spelling dense definitions are weighed against (dense.md D9.2): its cost
#: matters only once a candidate string is costed too.
#: Originals shorter than this (characters, all their texts) are counted in full when a
#: limited count is asked for: the limit saves little on a short text, and an original
#: that loses its limited count is owed to the ledger, which counts it again in full
#: (:func:`~gcfkit.proxy.outcome.ledger_count`). Counted once, it is owed nothing. Longer
#: ones keep the limit: their ledger count comes after the answer is out.
FULL_COUNT_CHARS: Final = 8 * 1024

DEFINITION_REFERENCE: Final = "|$a|"


def gcf_cells(value: Any, stop: int | None = None) -> int:
    """How many table cells GCF writes for ``value``: rows x field-union width for every
    array of objects and every keyed map (§7.2a) in it (counting stops past ``stop``).

    Flattened columns need identical keys in every row, so they never multiply; the union
    does: a table's width is every field any row has.

    >>> gcf_cells({"a": [{"x": 1}, {"y": 2}], "b": {"p": {"q": 1}, "r": {"s": 2}}})
    8
    """
    if (fast := speedups.table_cells(value, stop)) is not None:
        return fast  # the same walk in C
    cells = 0
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.append
    # One pass over every container, by exact type (JSON values are plain dicts and lists):
    # this runs before anything is built, so it must cost less than one json.dumps.
    while stack:
        v = pop()
        if type(v) is list:
            rows = bool(v)
            for x in v:
                t = type(x)
                if t is dict:
                    push(x)
                else:
                    rows = False
                    if t is list:
                        push(x)
            if rows:
                cells += len(v) * _union_width(v)
        elif type(v) is dict:
            objects = 0
            for x in v.values():
                t = type(x)
                if t is dict:
                    objects += 1
                    push(x)
                elif t is list:
                    push(x)
            if objects >= 2 and objects == len(v):
                cells += objects * _union_width(list(v.values()))
        if stop is not None and cells > stop:
            return cells
    return cells


def _union_width(rows: Sequence[dict[str, Any]]) -> int:
    seen: set[Any] = set()
    previous: Any = None
    for row in rows:
        keys = row.keys()
        if previous is not None and keys == previous:
            continue  # the common uniform table: one set operation per distinct shape
        previous = keys
        seen.update(keys)
    return len(seen)


_DEFINITION_COSTS: dict[str, Callable[[str], int]] = {}


def definition_cost(count: Callable[[str, str], int], encoding: str) -> Callable[[str], int] | None:
    """The one cost function dense definitions are chosen with in this process for
    ``encoding`` when ``count`` is :func:`gcfkit.tokens.count` (None for any other counter):
    :func:`gcfkit.generic.definitions.select` keeps its counts per cost function object, so
    every rewriter (every session) sharing it finds the strings counted before. Nothing is
    loaded until a string is counted.

    >>> definition_cost(tokens.count, "o200k_base") is definition_cost(tokens.count, "o200k_base")
    True
    >>> definition_cost(lambda t, e: len(t), "o200k_base") is None
    True
    """
    if count is not tokens.count:
        return None
    cost = _DEFINITION_COSTS.get(encoding)
    if cost is None:
        cost = _DEFINITION_COSTS.setdefault(encoding, partial(tokens.count, encoding=encoding))
    return cost


class Tally:
    """Estimate mode's count: an estimate, and the texts it was asked for (what the ledger
    owes an exact count of)."""

    __slots__ = ("count", "texts")

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return self.count(text)


def needs_exact_count(text: str) -> int:
    """The count a dense encode gets in estimate mode: any string but the reference raises
    :class:`NeedsExactCounts` (the reference alone decides nothing)."""
    if text == DEFINITION_REFERENCE:
        return 0
    raise NeedsExactCounts("dense definitions")


class Counts:
    """Token counts of compact JSON and of the original, each taken once, and only as far
    as a comparison needs: ``json(limit)`` / ``original(limit)`` return the exact count, or
    ``limit + 1`` when the text has more tokens than ``limit`` (it loses to ``limit``)."""

    __slots__ = (
        "_count",
        "_json",
        "_json_floor",
        "_limited",
        "_original",
        "_original_floor",
        "_original_full",
        "_slack",
        "_texts",
        "compact",
        "same",
    )

    def __init__(
        self,
        count: Callable[[str], int],
        limited: Callable[[str, int], int | None],
        compact: str,
        texts: list[str],
        same: bool,
        slack: int = 0,
        *,
        full_chars: int = FULL_COUNT_CHARS,
    ) -> None:
        self._count = count
        self._limited = limited
        self._slack = slack
        self.compact = compact
        self._texts = texts
        self.same = same
        self._json: int | None = None  # exact
        self._json_floor = -1  # known: more tokens than this
        self._original: int | None = None
        self._original_floor = -1
        self._original_full = sum(len(t) for t in texts) < full_chars

    def json_exact(self) -> int:
        if self._json is None:
            self._json = self._count(self.compact)
        return self._json

    def json(self, limit: int | None) -> int:
        if self._json is not None:
            return self._json
        if limit is None:
            return self.json_exact()
        limit += self._slack
        if limit <= self._json_floor:
            return self._json_floor + 1
        n = self._limited(self.compact, limit)
        if n is None:
            self._json_floor = max(self._json_floor, limit)
            return limit + 1
        self._json = n
        return n

    def original(self, limit: int | None) -> int:
        if self.same:
            return self.json(limit)
        if self._original is not None:
            return self._original
        if limit is None or self._original_full:
            self._original = sum(self._count(t) for t in self._texts)
            return self._original
        limit += self._slack
        if limit <= self._original_floor:
            return self._original_floor + 1
        total = 0
        for text in self._texts:
            n = self._limited(text, limit - total)
            if n is None:
                self._original_floor = max(self._original_floor, limit)
                return limit + 1
            total += n
        self._original = total
        return total

    @property
    def original_exact(self) -> bool:
        if self.same:
            return self._json is not None
        return self._original is not None
