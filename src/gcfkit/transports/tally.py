"""The ledger's exact counts of results answered in the relay's process, owed until a
worker counts them (:mod:`gcfkit.transports.local`, :mod:`gcfkit.transports.offload`).

The relay never loads the tokenizer (about 60 MB and 150 ms per encoding): a result it
answers itself was chosen from estimates, and its ledger record, whose counts are exact,
waits here as an :class:`~gcfkit.transports.worker.Owed` (the texts still to count) until
a worker takes the batch (:class:`~gcfkit.transports.worker.Count`) and appends the
records. The pool hands the batch over:

* whenever a worker is idle anyway (it is running for a large result);
* when the texts waiting pass :data:`FLUSH_CHARS`, or the oldest has waited
  :data:`FLUSH_SECONDS`: a worker is started for them (and exits again when idle);
* when the pool closes (the proxy's exit): nothing owed is lost.

Memory stays bounded: past :data:`MAX_CHARS` waiting (a worker that cannot keep up, or
cannot start), a result's owed texts are counted by the ledger's estimate (bytes / 4, as
for a result that got no answer) instead of being kept. This is bookkeeping only, with no
clock and no process: the pool decides when.

>>> from gcfkit.proxy.rewrite import Outcome
>>> tally = Tally()
>>> tally.add(Owed(Outcome(None, "unchanged", lazy=["x" * 10]), "s", "t", 0.5), now=1.0)
>>> tally.chars, tally.due(now=1.5), tally.due(now=1.0 + FLUSH_SECONDS)
(10, False, True)
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

__all__ = ["FLUSH_CHARS", "FLUSH_SECONDS", "MAX_CHARS", "Owed", "Tally", "count_here", "estimated"]

#: Characters of owed text past which a worker is started to count them (about 20 ms of
#: counting in one batch).
FLUSH_CHARS: Final = 1_000_000

#: Seconds the oldest owed record may wait for a worker that runs anyway: after that one is
#: started for it, so the ledger (``gcfkit stats``) is never more than this behind.
FLUSH_SECONDS: Final = 5.0

#: Characters of owed text kept at most; past it a result's record is estimated.
MAX_CHARS: Final = 16_000_000


class Tally:
    """The records owed, oldest first (see the module docstring)."""

    def __init__(self) -> None:
        self._items: list[Owed] = []
        self.chars = 0
        self._since: float | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Owed, now: float) -> None:
        """One more record owed (its result dropped first: only its texts are counted)."""
        outcome = item.outcome
        outcome.result = None
        size = _owed_chars(item)
        if self.chars + size > MAX_CHARS:
            estimated(outcome)
            size = 0
        self._items.append(item)
        self.chars += size
        if self._since is None:
            self._since = now

    def due(self, now: float) -> bool:
        """Whether a worker should be started for what is owed (too much, or too old)."""
        if not self._items:
            return False
        assert self._since is not None
        return self.chars >= FLUSH_CHARS or now - self._since >= FLUSH_SECONDS

    @property
    def since(self) -> float | None:
        """When the oldest record owed was added (None: nothing owed)."""
        return self._since

    def take(self) -> tuple[Owed, ...]:
        """Everything owed, for a worker to count; the tally is empty after."""
        items, self._items = tuple(self._items), []
        self.chars = 0
        self._since = None
        return items


def estimated(outcome: Outcome) -> None:
    """Count an outcome's owed texts by the ledger's estimate (bytes / 4) now, in place:
    for a record that cannot wait for a worker's exact count."""
    outcome.count_owed(_quarter)


def _quarter(text: str) -> int:
    return utf8_len(text) // 4


def _owed_chars(item: Owed) -> int:
    return owed_chars(item.outcome)


def count_here(
    items: Iterable[Owed], codec: Codec, encoding: str, ledger_path: str | None
) -> list[LedgerRecord]:
    """The last resort, at the pool's close when no worker could count them: ``items``
    counted in this process (the tokenizer loads here, once) and appended to the ledger."""
    from ..ledger import Ledger

    ledger = Ledger(ledger_path) if ledger_path is not None else None

    def count(text: str) -> int:
        return codec.count(text, encoding)

    records = []
    for item in items:
        record = item.outcome.ledger_record(
            count, server=item.server, tool=item.tool, encoding=encoding, encode_ms=item.encode_ms
        )
        if ledger is not None:
            ledger.append(record)
        records.append(record)
    return records
