"""When the relay counts what the ledger is owed for the results it answered itself
(:mod:`gcfkit.transports.local`): the event loop's side of :mod:`gcfkit.transports.tally`.

A result answered in the relay's process leaves its record in the tally, its owed texts not
yet counted (settled-estimate mode), and goes out at once. The records are counted and
written in a pause: once no result was answered for :data:`QUIET_SECONDS`, so a burst of
calls is answered first and its records after. A flow with no pause still writes them: at
once (after the answer in hand is written) when :data:`COUNT_CHARS` of text or
:data:`COUNT_RECORDS` records wait, and at the pool's close.

>>> import asyncio
>>> from gcfkit.transports.local import Here
>>> from gcfkit.proxy.config import ProxyConfig
>>> async def demo() -> int:
...     book = Booking(Here(ProxyConfig()), ProxyConfig().encoding, None, lambda r: None)
...     book.settle()  # (nothing owed: nothing to do)
...     return len(book.tally)
>>> asyncio.run(demo())
0
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from ..proxy.record import LedgerRecord
from .local import Here
from .tally import Tally, count_here
from .worker import Owed

__all__ = ["COUNT_CHARS", "COUNT_RECORDS", "QUIET_SECONDS", "Booking"]

#: Seconds without a result answered in the relay after which the ledger's records of the
#: results it answered are counted: under a burst of calls the counting waits for a pause,
#: and costs none of them time.
QUIET_SECONDS: Final = 0.05

#: Characters of owed text past which they are counted at once, pause or not (~10-20 ms of
#: counting; the tally keeps at most ``tally.MAX_CHARS``).
COUNT_CHARS: Final = 1_000_000

#: Records waiting past which they are written at once, pause or not: results counted
#: exactly as they were answered owe no text, and a flow with no pause must not keep
#: every record until it ends.
COUNT_RECORDS: Final = 512


class Booking:
    """The relay's tally and when it is counted (see the module docstring): ``here``'s
    codec counts, into the ledger at ``ledger_path`` (None: records are made, not
    written); ``report`` is handed each record written."""

    def __init__(
        self,
        here: Here,
        encoding: str,
        ledger_path: str | None,
        report: Callable[[LedgerRecord], None],
    ) -> None:
        self.tally = Tally()
        self._here = here
        self._encoding = encoding
        self._ledger_path = ledger_path
        self._report = report
        #: When the tally is counted next (None: nothing owed), and when the last result
        #: was answered here (the event loop's time).
        self._timer: asyncio.Handle | None = None
        self._answered_at = 0.0

    def owe(self, item: Owed) -> None:
        """One more record, of a result just answered (its line not written yet: a count
        due now runs after it is)."""
        tally = self.tally
        tally.add(item)
        loop = asyncio.get_running_loop()
        self._answered_at = loop.time()
        if tally.chars >= COUNT_CHARS or len(tally) >= COUNT_RECORDS:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_soon(self.settle)
        elif self._timer is None:
            self._timer = loop.call_later(QUIET_SECONDS, self._when_quiet)

    def _when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        wait = self._answered_at + QUIET_SECONDS - loop.time()
        if wait > 0:
            self._timer = loop.call_later(wait, self._when_quiet)
        else:
            self.settle()

    def settle(self) -> None:
        """Count what is owed now (exactly: the relay's codec), append it to the ledger and
        report each record; never raises (the ledger is bookkeeping, never the agent's
        failure)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.tally:
            return
        try:
            records = count_here(
                self.tally.take(), self._here.codec, self._encoding, self._ledger_path
            )
        except Exception:
            return
        for record in records:
            self._report(record)
