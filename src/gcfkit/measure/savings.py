"""What the proxy saved: ledger entries aggregated per tool, per server, overall and over time.

These are the numbers ``gcfkit stats``, the ``gcfkit ui`` dashboard and ``gcfkit verify``
show; rendering them is their business (:mod:`gcfkit.cli.stats`, :mod:`gcfkit.ui`,
:mod:`gcfkit.traffic.report`). :func:`timeline` buckets the same records by time and
:func:`describe_decision` says in words what each ledger decision means (why a result was
rewritten, or left alone).

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
from datetime import datetime, timedelta, timezone
from typing import Any, Final, Literal

from ..answers.choose import FailureReason, FallbackReason
from ..ledger import LedgerEntry, parse_time
from ..proxy.record import LedgerRecord, LedgerWord, Sizes

__all__ = [
    "LEFT_ALONE",
    "Bucket",
    "Summary",
    "Totals",
    "describe_decision",
    "is_left_alone",
    "signed_change",
    "summarize",
    "summary_to_json",
    "timeline",
    "timeline_to_json",
]


@dataclass
class Totals(Sizes):
    """Sums over a group of records (one tool, one server, or everything)."""

    calls: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    encode_ms: float = 0.0
    decisions: Counter[str] = field(default_factory=Counter)
    #: Results passed on as the server sent them but named with a ``ref=`` block (the only
    #: thing the proxy adds to such a result), and the tokens those blocks cost.
    named: int = 0
    ref_tokens: int = 0

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
        grew = record.tokens_after - record.tokens_before
        if grew > 0 and is_left_alone(record.decision):
            self.named += 1
            self.ref_tokens += grew

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
            "named": self.named,
            "ref_tokens": self.ref_tokens,
            "change": signed_change(self.tokens_before, self.tokens_after),
            "why_larger": self.why_larger(),
        }

    def why_larger(self) -> str | None:
        """Why these results cost more tokens than the server's, when the ``ref=`` blocks
        are the reason; None otherwise.

        >>> t = Totals(calls=1, tokens_before=515, tokens_after=519, named=1, ref_tokens=4)
        >>> t.why_larger()[:35]
        'its ref= handle (4 tokens): a repea'
        """
        if self.tokens_after <= self.tokens_before or not self.ref_tokens:
            return None
        if self.tokens_after - self.tokens_before > self.ref_tokens:
            return None
        one = self.named == 1
        handles = "its ref= handle" if one else f"{self.named:,} ref= handles"
        return (
            f"{handles} ({self.ref_tokens:,} tokens): a repeat call that passes "
            f"{'it' if one else 'one'} as _since is answered in a few tokens"
        )


def signed_change(before: int, after: int, digits: int = 1) -> str:
    """The change from ``before`` to ``after`` tokens as every gcfkit view prints it (the
    tables, the page, the charts): a minus sign (U+2212) for fewer tokens, a plus sign for
    more, ``digits`` decimals.

    >>> signed_change(1000, 866), signed_change(515, 519), signed_change(10, 10)
    ('−13.4%', '+0.8%', '±0%')
    >>> signed_change(200, 150, digits=0)
    '−25%'
    """
    if not before or before == after:
        return "±0%"
    change = after / before - 1
    return f"{'−' if change < 0 else '+'}{abs(change):.{digits}%}"


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


# ---------------------------------------------------------------------------------------
# Over time
# ---------------------------------------------------------------------------------------

Period = Literal["hour", "day", "week"]
_PERIOD_SECONDS: Final[dict[str, int]] = {"hour": 3600, "day": 86400, "week": 7 * 86400}


@dataclass
class Bucket:
    """The records of one period (``start`` is its first instant, ISO 8601 UTC)."""

    start: str
    totals: Totals = field(default_factory=Totals)


def _floor(moment: datetime, period: str) -> datetime:
    if period == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day


def _pick_period(first: datetime, last: datetime) -> Period:
    span = (last - first).total_seconds()
    if span <= 2 * 86400:
        return "hour"
    if span <= 120 * 86400:
        return "day"
    return "week"


def timeline(
    entries: Iterable[LedgerEntry], period: Period | None = None, *, max_buckets: int = 400
) -> tuple[Period, list[Bucket]]:
    """The entries summed per hour, day or week (``period``; by default the finest of those
    that spans the ledger in a chart's width), oldest first, empty periods included (a
    chart's gaps are real). Entries with an unreadable time are left out, as in
    :func:`summarize`. At most ``max_buckets`` buckets: a coarser period is used past that.

    >>> from gcfkit.ledger import LedgerEntry, LedgerRecord
    >>> r = LedgerRecord("git", "log", 100, 50, 40, 10, "o200k_base", "gcf", 1.0)
    >>> es = [LedgerEntry("2026-01-02T03:04:05.000Z", r), LedgerEntry("2026-01-02T05:00:00Z", r)]
    >>> period, buckets = timeline(es)
    >>> period, [(b.start, b.totals.tokens_saved) for b in buckets]
    ('hour', [('2026-01-02T03:00:00Z', 30), ('2026-01-02T04:00:00Z', 0), \
('2026-01-02T05:00:00Z', 30)])
    """
    timed: list[tuple[datetime, LedgerRecord]] = []
    for entry in entries:
        try:
            timed.append((parse_time(entry.time), entry.record))
        except ValueError:
            continue
    if not timed:
        return (period or "day"), []
    first = min(m for m, _ in timed)
    last = max(m for m, _ in timed)
    chosen: Period = period or _pick_period(first, last)
    order: list[Period] = ["hour", "day", "week"]
    while (last - first).total_seconds() / _PERIOD_SECONDS[
        chosen
    ] >= max_buckets and chosen != "week":
        chosen = order[order.index(chosen) + 1]
    start = _floor(first, chosen)
    step = timedelta(seconds=_PERIOD_SECONDS[chosen])
    count = int((_floor(last, chosen) - start) / step) + 1
    buckets = [Bucket(_iso(start + i * step)) for i in range(count)]
    for moment, record in timed:
        buckets[int((_floor(moment, chosen) - start) / step)].totals.add(record)
    return chosen, buckets


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def timeline_to_json(period: str, buckets: list[Bucket]) -> dict[str, Any]:
    """A JSON-ready timeline: ``{"period": ..., "buckets": [{"start": ..., **totals}]}``."""
    return {
        "period": period,
        "buckets": [{"start": b.start, **b.totals.to_dict()} for b in buckets],
    }


# ---------------------------------------------------------------------------------------
# What the decisions mean
# ---------------------------------------------------------------------------------------

#: Decisions under which the proxy delivered the server's own text.
LEFT_ALONE: Final[frozenset[LedgerWord]] = frozenset({"unchanged", "passthrough-file"})

_MEANINGS: Final[dict[LedgerWord, str]] = {
    "gcf": "sent as GCF: fewer tokens than compact JSON, decoded back and compared first",
    "dense": "sent as GCF's dense profile (gcfkit's extension: repeated strings defined once, "
    "short rows): fewer tokens than GCF and compact JSON, decoded back and compared first",
    "json-minified": "sent as compact JSON: GCF was not fewer tokens, compact JSON was smaller",
    "unchanged": "left alone: not JSON text, an error result, or no form was smaller than "
    "what the server sent (a result named with a ref= block is those few tokens larger: the "
    "handle a repeat call passes as _since)",
    "passthrough-file": "left alone: a file read, whose contents stay byte for byte (named "
    "with a ref= block, so that an unchanged re-read is answered @@ unchanged)",
    "delta": "sent as a GCF delta (spec 10a) against the set the client already holds",
    "unchanged-delta": "sent as unchanged=true: the keyed set had not changed",
    "since-unchanged": "answered @@ unchanged: the result the call named with _since still holds",
    "since-patch": "answered @@ patch against the result the call named with _since",
    "since-edit": "answered @@ edit (kept line ranges) of the text the call named with _since",
}
_FALLBACKS: Final[dict[FallbackReason | FailureReason, str]] = {
    "time-budget": "the original was sent: rewriting took longer than the time budget",
    "unsafe-envelope": "the original was sent: the JSON-RPC line could not be rewritten "
    "safely (duplicate keys or another ambiguity)",
    "encode": "GCF refused the value",
    "selfcheck": "the GCF did not decode back to the same value, so it was not sent",
    "delta-selfcheck": "the delta did not rebuild the new set, so it was not sent",
    "since-selfcheck": "the relative answer did not rebuild the result, so it was not sent",
    "error": "the original was sent after an internal error in the proxy",
    "no-worker": "the original was sent: no worker process could rewrite it",
    "worker-exited": "the original was sent: the worker process rewriting it exited",
    "worker-start": "the original was sent: no worker process was ready in time",
    "closed": "the original was sent: the proxy was shutting down",
    "workers-crashed": "the original was sent: worker processes kept dying, so none rewrites",
}
# Ledger files hold any string: looked up as such.
_WORDS: Final[dict[str, str]] = {str(k): v for k, v in _MEANINGS.items()}
_LEFT_ALONE: Final[frozenset[str]] = frozenset(LEFT_ALONE)
_REASONS: Final[dict[str, str]] = {str(k): v for k, v in _FALLBACKS.items()}


def is_left_alone(decision: str) -> bool:
    """Whether a decision means the client got what the server sent (a fallback included).

    >>> [is_left_alone(d) for d in ("passthrough-file", "fallback:time-budget", "gcf")]
    [True, True, False]
    """
    return decision in _LEFT_ALONE or decision.startswith("fallback:")


def describe_decision(decision: str) -> str:
    """What a ledger decision word means, in one sentence.

    >>> describe_decision("passthrough-file")[:58]
    'left alone: a file read, whose contents stay byte for byte'
    >>> describe_decision("fallback:encode-out_of_range")
    'GCF refused the value (out_of_range)'
    """
    if decision in _WORDS:
        return _WORDS[decision]
    if decision.startswith("fallback:"):
        reason = decision[len("fallback:") :]
        for key in sorted(_REASONS, key=len, reverse=True):
            if reason == key:
                return _REASONS[key]
            if reason.startswith(key + "-"):
                return f"{_REASONS[key]} ({reason[len(key) + 1 :]})"
        return f"a fallback: {reason}"
    return decision
