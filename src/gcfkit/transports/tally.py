"""The ledger's exact counts of results answered in the relay's process, owed until the
relay counts them, once their answers are written (:mod:`gcfkit.transports.local`,
:mod:`gcfkit.transports.offload`).

A result answered in the relay is chosen from estimates where they decide (settled-estimate
mode), and its ledger record, whose counts are exact, waits here as an
:class:`~gcfkit.transports.worker.Owed` (the texts still to count). The pool counts what
waits in a callback of its own, after the answer's line is written (``loop.call_soon``),
and at its close (:func:`count_here`): nothing owed is lost, and no answer waits for a
count.

Memory stays bounded: past :data:`MAX_CHARS` waiting (a relay that cannot keep up), a
result's owed texts are counted by the ledger's estimate (bytes / 4, as for a result that
got no answer) instead of being kept. This is bookkeeping only, with no clock and no
process: the pool decides when.

>>> from gcfkit.proxy.rewrite import Outcome
>>> tally = Tally()
>>> tally.add(Owed(Outcome(None, "unchanged", lazy=["x" * 10]), "s", "t", 0.5))
>>> tally.chars, len(tally)
(10, 1)
>>> [item.tool for item in tally.take()], tally.chars
(['t'], 0)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..answers.choose import utf8_len
from ..proxy.config import Codec
from ..proxy.record import LedgerRecord
from ..proxy.rewrite import Outcome
from .worker import Owed, owed_chars

__all__ = ["MAX_CHARS", "Owed", "Tally", "count_here", "estimated"]

#: Characters of owed text kept at most; past it a result's record is estimated.
MAX_CHARS: Final = 16_000_000


class Tally:
    """The records owed, oldest first (see the module docstring)."""

    def __init__(self) -> None:
        self._items: list[Owed] = []
        self.chars = 0

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Owed) -> None:
        """One more record owed (its result dropped first: only its texts are counted)."""
        outcome = item.outcome
        outcome.result = None
        size = _owed_chars(item)
        if self.chars + size > MAX_CHARS:
            estimated(outcome)
            size = 0
        self._items.append(item)
        self.chars += size

    def take(self) -> tuple[Owed, ...]:
        """Everything owed, to count; the tally is empty after."""
        items, self._items = tuple(self._items), []
        self.chars = 0
        return items


def estimated(outcome: Outcome) -> None:
    """Count an outcome's owed texts by the ledger's estimate (bytes / 4) now, in place:
    for a record that cannot wait for its exact count."""
    outcome.count_owed(_quarter)


def _quarter(text: str) -> int:
    return utf8_len(text) // 4


def _owed_chars(item: Owed) -> int:
    return owed_chars(item.outcome)


def count_here(
    items: Iterable[Owed], codec: Codec, encoding: str, ledger_path: str | None
) -> list[LedgerRecord]:
    """``items`` counted in this process and appended to the ledger (the relay's tokenizer:
    :mod:`gcfkit._bpe`, loaded with the first count)."""
    from ..ledger import Ledger

    ledger = Ledger(ledger_path) if ledger_path is not None else None

    def count(text: str) -> int:
        return codec.count(text, encoding)

    records = [
        item.outcome.ledger_record(
            count, server=item.server, tool=item.tool, encoding=encoding, encode_ms=item.encode_ms
        )
        for item in items
    ]
    if ledger is not None:
        ledger.append_all(records)
    return records
