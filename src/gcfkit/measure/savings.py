"""What the proxy saved: ledger entries aggregated per tool, per server and overall.

These are the numbers ``gcfkit stats`` (and any dashboard) shows; rendering them is the
CLI's business (:mod:`gcfkit.cli.stats`).

>>> from gcfkit.ledger import LedgerEntry, LedgerRecord
>>> r = LedgerRecord("git", "log", 100, 50, 40, 10, "o200k_base", "gcf", 1.0)
>>> s = summarize([LedgerEntry("2026-01-02T03:04:05.000Z", r)] * 2)
>>> (s.tools["git", "log"].calls, s.servers["git"].tokens_saved, s.total.token_savings)
(2, 60, 0.75)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..ledger import LedgerEntry, parse_time
from ..proxy.record import LedgerRecord

__all__ = ["Summary", "Totals", "summarize", "summary_to_json"]


@dataclass
class Totals:
    """Sums over a group of records (one tool, one server, or everything)."""

    calls: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    encode_ms: float = 0.0
    decisions: Counter[str] = field(default_factory=Counter)

    @property
    def tokens_saved(self) -> int:
        """Tokens the proxy kept out of the context (negative if results grew)."""
        return self.tokens_before - self.tokens_after

    @property
    def bytes_saved(self) -> int:
        """Bytes the proxy kept off the wire (negative if results grew)."""
        return self.bytes_before - self.bytes_after

    @property
    def token_savings(self) -> float:
        """Saved tokens as a fraction of ``tokens_before`` (0.0 when nothing was counted)."""
        return self.tokens_saved / self.tokens_before if self.tokens_before else 0.0

    @property
    def byte_savings(self) -> float:
        """Saved bytes as a fraction of ``bytes_before`` (0.0 when nothing was counted)."""
        return self.bytes_saved / self.bytes_before if self.bytes_before else 0.0

    def add(self, record: LedgerRecord) -> None:
        """Fold one record into the sums."""
        self.calls += 1
        self.bytes_before += record.bytes_before
        self.bytes_after += record.bytes_after
        self.tokens_before += record.tokens_before
        self.tokens_after += record.tokens_after
        self.encode_ms += record.encode_ms
        self.decisions[record.decision] += 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready sums, with the derived savings."""
        return {
            "calls": self.calls,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_saved": self.bytes_saved,
            "byte_savings": round(self.byte_savings, 4),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "token_savings": round(self.token_savings, 4),
            "encode_ms": round(self.encode_ms, 3),
            "decisions": dict(sorted(self.decisions.items())),
        }


@dataclass
class Summary:
    """A ledger aggregated per (server, tool), per server and overall.

    ``tools`` and ``servers`` are ordered by tokens saved, largest first. ``encodings`` lists
    the tokenizers the counts come from (more than one means the token sums mix tokenizers).
    """

    total: Totals = field(default_factory=Totals)
    tools: dict[tuple[str, str], Totals] = field(default_factory=dict)
    servers: dict[str, Totals] = field(default_factory=dict)
    encodings: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None
    corrupt: int = 0


def summarize(entries: Iterable[LedgerEntry], *, corrupt: int | None = None) -> Summary:
    """Aggregate ledger entries per tool, per server and in total.

    ``corrupt`` defaults to the ``corrupt`` count of a :class:`~gcfkit.ledger.LedgerEntries`.
    """
    if corrupt is None:
        corrupt = getattr(entries, "corrupt", 0)
    summary = Summary(corrupt=corrupt or 0)
    tools: dict[tuple[str, str], Totals] = {}
    servers: dict[str, Totals] = {}
    encodings: set[str] = set()
    first: tuple[datetime, str] | None = None
    last: tuple[datetime, str] | None = None
    for entry in entries:
        record = entry.record
        summary.total.add(record)
        tools.setdefault((record.server, record.tool), Totals()).add(record)
        servers.setdefault(record.server, Totals()).add(record)
        encodings.add(record.encoding)
        try:
            moment = parse_time(entry.time)
        except ValueError:
            continue
        if first is None or moment < first[0]:
            first = (moment, entry.time)
        if last is None or moment > last[0]:
            last = (moment, entry.time)
    summary.tools = dict(sorted(tools.items(), key=lambda kv: (-kv[1].tokens_saved, kv[0])))
    summary.servers = dict(sorted(servers.items(), key=lambda kv: (-kv[1].tokens_saved, kv[0])))
    summary.encodings = sorted(encodings)
    summary.first = first[1] if first else None
    summary.last = last[1] if last else None
    return summary


def summary_to_json(summary: Summary) -> dict[str, Any]:
    """A JSON-ready dict of a summary (``json.dumps`` it to print).

    >>> summary_to_json(summarize([]))["total"]["calls"]
    0
    """
    return {
        "first": summary.first,
        "last": summary.last,
        "encodings": list(summary.encodings),
        "corrupt_lines": summary.corrupt,
        "total": summary.total.to_dict(),
        "servers": [{"server": name, **t.to_dict()} for name, t in summary.servers.items()],
        "tools": [
            {"server": server, "tool": tool, **t.to_dict()}
            for (server, tool), t in summary.tools.items()
        ],
    }
