"""What one rewritten result comes to (:class:`Outcome`: the answer and the ledger's
figures, some owed until after the answer is out) and the deadline it is answered within
(:class:`Budget`). Plain data, picklable: a worker process sends an outcome's record back.

>>> out = Outcome(None, "unchanged", lazy=["[1, 2]"])
>>> out.count_owed(len); (out.tokens_before, out.tokens_after, out.bytes_after)
(6, 6, 6)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from ..answers.choose import utf8_len
from .record import LedgerDecision, LedgerRecord

__all__ = ["LEDGER_EXACT_CHARS", "Budget", "BudgetExceeded", "Outcome", "huge", "ledger_count"]

#: Ledger counts of texts over this many characters are estimated (bytes / 4): before ==
#: after for them, and an exact pass over a 64 MB blob buys nothing.
LEDGER_EXACT_CHARS: Final = 4 * 1024 * 1024


class BudgetExceeded(Exception):
    """The deadline passed between two steps."""


@dataclass(frozen=True, slots=True)
class Budget:
    """A deadline on a clock (``time.monotonic`` is one clock for every process).

    >>> Budget.unlimited().check()
    """

    clock: Callable[[], float]
    deadline: float

    @classmethod
    def unlimited(cls) -> Budget:
        """A budget that never runs out."""
        return cls(time.monotonic, float("inf"))

    def check(self) -> None:
        """Raise :class:`BudgetExceeded` when the deadline has passed."""
        if self.clock() > self.deadline:
            raise BudgetExceeded


@dataclass(slots=True)
class Outcome:
    """What became of one result: ``result`` (None: the original goes out), the ledger's
    ``decision`` and numbers so far, and the texts whose tokens are still owed to the
    ledger: ``lazy`` were delivered unchanged (they count before and after), ``owed`` were
    replaced after losing a limited count, or were never counted exactly (estimate mode:
    :class:`NeedsExactCounts`), and count before only; ``owed_after`` are what went out in
    their place and was not counted exactly (estimate mode), counted in full, after only.
    Plain data: picklable, so another process may count what is owed.

    >>> out = Outcome(None, "json-minified", owed=["[1, 2]"], owed_after=["[1,2]"])
    >>> out.count_owed(len); (out.tokens_before, out.tokens_after)
    (6, 5)
    """

    result: dict[str, Any] | None
    decision: LedgerDecision
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    lazy: list[str] = field(default_factory=list)
    owed: list[str] = field(default_factory=list)
    owed_after: list[str] = field(default_factory=list)
    #: What the model would have read of the original, when that is not the text the result
    #: was answered from (a result delivered as its ``structuredContent``'s value,
    #: :mod:`gcfkit.proxy.structured`): the "before" is then theirs alone.
    baseline: list[str] | None = None

    def count_owed(self, count: Callable[[str], int]) -> None:
        """Count what is owed (after the answer is out: not on the relay's path)."""
        for text in self.lazy:
            n = ledger_count(text, count)
            size = utf8_len(text)
            self.tokens_before += n
            self.tokens_after += n
            self.bytes_before += size
            self.bytes_after += size
        for text in self.owed:
            self.tokens_before += ledger_count(text, count)
        for text in self.owed_after:
            self.tokens_after += count(text)  # as the choice counts a winner: in full
        if self.baseline is not None:
            self.tokens_before = sum(ledger_count(t, count) for t in self.baseline)
            self.bytes_before = sum(utf8_len(t) for t in self.baseline)
        self.lazy = []
        self.owed = []
        self.owed_after = []
        self.baseline = None

    def ledger_record(
        self,
        count: Callable[[str], int],
        *,
        server: str,
        tool: str,
        encoding: str,
        encode_ms: float,
    ) -> LedgerRecord:
        """The ledger's record of this outcome, what is owed counted first (:meth:`count_owed`)."""
        self.count_owed(count)
        return LedgerRecord(
            server=server,
            tool=tool,
            bytes_before=self.bytes_before,
            bytes_after=self.bytes_after,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            encoding=encoding,
            decision=self.decision,
            encode_ms=encode_ms,
        )


def huge(texts: list[str]) -> bool:
    """Whether the ledger counts any of ``texts`` by its size.

    >>> huge(["x"]), huge(["x" * (LEDGER_EXACT_CHARS + 1)])
    (False, True)
    """
    return any(len(t) > LEDGER_EXACT_CHARS for t in texts)


def ledger_count(text: str, count: Callable[[str], int]) -> int:
    """The ledger's count of ``text``: ``count``, or its bytes / 4 past
    :data:`LEDGER_EXACT_CHARS`.

    >>> ledger_count("abc", len)
    3
    """
    if len(text) > LEDGER_EXACT_CHARS:
        return utf8_len(text) // 4
    return count(text)
