"""What the proxy did, as Prometheus series (``/metrics`` on every HTTP shell, and
``gcfkit stats --prometheus FILE`` from the ledger for stdio users).

The series are built with ``prometheus_client`` in a registry of each server's own, named
``gcfkit_*``:

* from each ledger record (:class:`~gcfkit.proxy.record.LedgerRecord`, whichever process
  wrote it): ``gcfkit_results_total``, ``gcfkit_tokens_before_total``,
  ``gcfkit_tokens_after_total``, ``gcfkit_bytes_before_total``, ``gcfkit_bytes_after_total``
  (by server, tool and decision), ``gcfkit_tokens_saved`` (by server and tool: before minus
  after, so it falls when results grow), ``gcfkit_budget_overruns_total`` (results past
  ``--time-budget``, sent as the server wrote them) and ``gcfkit_rewrite_seconds`` (the time
  spent on one result, its token counts included). So the figures are the ledger's, and a
  proxy run with ``--no-stats`` (no ledger, no counts) has none of them;
* live, on a server: ``gcfkit_added_latency_seconds`` (from a tool result reaching the
  rewriting pool to its answer being ready, by server and outcome: ``rewritten``, ``original``,
  ``fallback``), ``gcfkit_sessions`` (open), ``gcfkit_workers`` and
  ``gcfkit_worker_restarts_total`` (workers started after the first: a deadline, a crash,
  the pool growing), and ``gcfkit_refusals_total`` (requests an HTTP shell refused, by
  reason: :meth:`Metrics.refused`).

Labels are bounded, whatever the clients send: never a user, a path, a session or an
argument. A tool keeps its name when it is a valid MCP tool name (1 to 128 of
``A-Za-z0-9_-.``) among the first :data:`MAX_TOOLS` seen, a server among the first
:data:`MAX_SERVERS`; past that, or otherwise, the label is ``_other``. (The tools a server
listed would be a tighter bound, but a request of the sessionless 2026-07-28 protocol is
answered by a core that never saw that list.) Decisions are the ledger's words.

>>> m = Metrics(live=False)
>>> from gcfkit.proxy.record import LedgerRecord
>>> m.record(LedgerRecord("git", "git_log", 900, 300, 250, 90, "o200k_base", "gcf", 2.0))
>>> m.value("gcfkit_tokens_saved", server="git", tool="git_log")
160.0
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest, write_to_textfile
from prometheus_client.registry import Collector

from ..ledger import Ledger
from ..proxy.record import LedgerRecord

if TYPE_CHECKING:
    from .offload import Offload
    from .tracing import Spans

__all__ = [
    "MAX_SERVERS",
    "MAX_TOOLS",
    "OTHER",
    "MeteredLedger",
    "Metrics",
    "write_textfile",
]

#: Distinct tool labels kept (over every server); later ones are counted as ``_other``.
MAX_TOOLS: Final = 256
#: Distinct server labels kept.
MAX_SERVERS: Final = 32
#: The overflow label.
OTHER: Final = "_other"

_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_SERVER_NAME: Final = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_DECISION: Final = re.compile(r"[a-z][a-z0-9_.:\-]{0,63}")
_REASON: Final = re.compile(r"[a-z0-9][a-z0-9_.\-]{0,47}")

#: Seconds: from a cached answer to a result that runs into a generous time budget.
_LATENCY_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
_BY_RESULT: Final = ("server", "tool", "decision")


class _Labels:
    """Bounded label values (see the module docstring)."""

    def __init__(self, max_tools: int, max_servers: int) -> None:
        self.max_tools = max_tools
        self.max_servers = max_servers
        self.tools: set[str] = set()
        self.servers: set[str] = set()

    def server(self, name: str) -> str:
        name = name or "unknown"
        return _admit(name, self.servers, self.max_servers, _SERVER_NAME)

    def tool(self, name: str) -> str:
        return _admit(name, self.tools, self.max_tools, _TOOL_NAME)

    @staticmethod
    def decision(word: str) -> str:
        return word if _DECISION.fullmatch(word) else OTHER


def _admit(name: str, seen: set[str], most: int, shape: re.Pattern[str]) -> str:
    if name in seen:
        return name
    if len(seen) >= most or not shape.fullmatch(name):
        return OTHER
    seen.add(name)
    return name


class Metrics:
    """The series of one server (or one ledger), in a registry of their own.

    ``live``: also the series only a running server has (latency, sessions, workers,
    refusals). It is the observer the worker pool reports to
    (:attr:`gcfkit.transports.offload.Offload.observer`): :meth:`record` for each record a
    worker wrote, :meth:`settled` for each result answered; :class:`MeteredLedger` hands it
    the records the shell itself writes.

    >>> m = Metrics()
    >>> m.settled("git", "git_log", "rewritten", 0.004)
    >>> m.value("gcfkit_added_latency_seconds_count", server="git", outcome="rewritten")
    1.0
    """

    def __init__(
        self,
        *,
        live: bool = True,
        max_tools: int = MAX_TOOLS,
        max_servers: int = MAX_SERVERS,
        spans: Spans | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.labels = _Labels(max_tools, max_servers)
        self.spans = spans
        r = self.registry
        self.results = Counter(
            "gcfkit_results", "Tool results the proxy handled.", _BY_RESULT, registry=r
        )
        self.tokens_before = Counter(
            "gcfkit_tokens_before",
            "Tokens of the tool results as the servers wrote them.",
            _BY_RESULT,
            registry=r,
        )
        self.tokens_after = Counter(
            "gcfkit_tokens_after",
            "Tokens of the tool results as the clients received them.",
            _BY_RESULT,
            registry=r,
        )
        self.bytes_before = Counter(
            "gcfkit_bytes_before",
            "Bytes of the tool results' text as the servers wrote it.",
            _BY_RESULT,
            registry=r,
        )
        self.bytes_after = Counter(
            "gcfkit_bytes_after",
            "Bytes of the tool results' text as the clients received it.",
            _BY_RESULT,
            registry=r,
        )
        self.tokens_saved = Gauge(
            "gcfkit_tokens_saved",
            "Tokens kept out of the clients' context: before minus after (it falls when a "
            "result grows).",
            ("server", "tool"),
            registry=r,
        )
        self.overruns = Counter(
            "gcfkit_budget_overruns",
            "Tool results past the time budget, sent as the server wrote them.",
            ("server", "tool"),
            registry=r,
        )
        self.rewrite = Histogram(
            "gcfkit_rewrite_seconds",
            "Time the proxy spent on one tool result (encoding, checking, counting tokens).",
            ("server",),
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.live = live
        self.added: Histogram | None = None
        self.refusals: Counter | None = None
        self._sessions: list[Callable[[], int]] = []
        self._pools: list[Offload] = []
        if live:
            self.added = Histogram(
                "gcfkit_added_latency_seconds",
                "From a tool result reaching the rewriting pool to its answer being ready.",
                ("server", "outcome"),
                buckets=_LATENCY_BUCKETS,
                registry=r,
            )
            self.refusals = Counter(
                "gcfkit_refusals",
                "Requests an HTTP shell refused, by the limit that refused them.",
                ("reason",),
                registry=r,
            )
            r.register(_Live(self))

    # -- what is observed --------------------------------------------------------------

    def record(self, record: LedgerRecord) -> None:
        """One ledger record: the result series move by its figures."""
        server = self.labels.server(record.server)
        tool = self.labels.tool(record.tool)
        labels = (server, tool, self.labels.decision(record.decision))
        self.results.labels(*labels).inc()
        self.tokens_before.labels(*labels).inc(max(record.tokens_before, 0))
        self.tokens_after.labels(*labels).inc(max(record.tokens_after, 0))
        self.bytes_before.labels(*labels).inc(max(record.bytes_before, 0))
        self.bytes_after.labels(*labels).inc(max(record.bytes_after, 0))
        self.tokens_saved.labels(server, tool).inc(record.tokens_saved)
        if record.decision == "fallback:time-budget":
            self.overruns.labels(server, tool).inc()
        self.rewrite.labels(server).observe(max(record.encode_ms, 0.0) / 1000.0)

    def records(self, records: Iterable[LedgerRecord]) -> None:
        """Every record of ``records`` (:meth:`record`)."""
        for r in records:
            self.record(r)

    def settled(self, server: str, tool: str, outcome: str, seconds: float) -> None:
        """One tool result answered ``seconds`` after it arrived: ``outcome`` is
        ``rewritten``, ``original`` (sent as the server wrote it) or ``fallback`` (no answer
        from a worker in time, or none at all)."""
        server = self.labels.server(server)
        if self.added is not None:
            self.added.labels(server, outcome).observe(max(seconds, 0.0))
        if self.spans is not None:
            self.spans.tool_call(server, self.labels.tool(tool), outcome, seconds)

    def refused(self, reason: str) -> None:
        """A request an HTTP shell refused (a limit, an Origin, a missing credential):
        a listener on the guard's :class:`~gcfkit.transports.http_limits.Refusals`
        (:func:`~gcfkit.transports.health.probed`). ``reason`` is a short constant, the
        refusal's kind such as ``body_too_large`` (anything else is ``_other``)."""
        if self.refusals is not None:
            self.refusals.labels(reason if _REASON.fullmatch(reason) else OTHER).inc()

    def watch(
        self, *, sessions: Callable[[], int] | None = None, pool: Offload | None = None
    ) -> None:
        """Read ``sessions()`` (how many are open) and ``pool``'s workers at each scrape."""
        if sessions is not None:
            self._sessions.append(sessions)
        if pool is not None:
            self._pools.append(pool)

    # -- what is read ------------------------------------------------------------------

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The series as a scrape answers them (the format the ``Accept`` header asks for:
        the Prometheus text format, or OpenMetrics) and its content type."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type

    def text(self) -> str:
        """The series in the Prometheus text format."""
        return generate_latest(self.registry).decode("utf-8")

    def value(self, name: str, **labels: str) -> float | None:
        """One sample's value (None when there is none): tests and doctests read it.

        >>> Metrics(live=False).value("gcfkit_results_total", server="x", tool="y", decision="z")
        """
        return self.registry.get_sample_value(name, labels)

    def close(self) -> None:
        """Send the traces still held (a server's shutdown)."""
        if self.spans is not None:
            self.spans.close()


class _Live(Collector):
    """The series read at each scrape: open sessions, the worker pool's workers."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        sessions = GaugeMetricFamily("gcfkit_sessions", "Open MCP sessions.")
        sessions.add_metric([], float(sum(_safely(f) for f in self.metrics._sessions)))
        yield sessions
        pools = self.metrics._pools
        workers = GaugeMetricFamily("gcfkit_workers", "Worker processes rewriting results.")
        workers.add_metric([], float(sum(len(p.pids) for p in pools)))
        yield workers
        restarts = CounterMetricFamily(
            "gcfkit_worker_restarts",
            "Workers started after the first ones (past a deadline, after a crash, as the "
            "pool grows).",
        )
        restarts.add_metric([], float(sum(p.restarts for p in pools)))
        yield restarts


def _safely(count: Callable[[], int]) -> int:
    try:
        return int(count())
    except Exception:  # a scrape must never fail on one figure
        return 0


class MeteredLedger(Ledger):
    """A :class:`~gcfkit.ledger.Ledger` whose every record also reaches ``metrics`` (the
    records the shell writes itself: a result past its deadline, one no worker took).

    >>> import tempfile, pathlib
    >>> m = Metrics(live=False)
    >>> led = MeteredLedger(m, pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl")
    >>> led.append(LedgerRecord("s", "t", 10, 5, 4, 2, "o200k_base", "gcf", 0.1))
    True
    >>> m.value("gcfkit_results_total", server="s", tool="t", decision="gcf")
    1.0
    """

    def __init__(self, metrics: Metrics, path: Path | str | None = None) -> None:
        super().__init__(path)
        self.metrics = metrics

    @classmethod
    def of(cls, metrics: Metrics, ledger: Ledger | None) -> MeteredLedger | None:
        """``ledger`` metered (None stays None: no ledger, no records)."""
        return None if ledger is None else cls(metrics, ledger.path)

    def append(self, record: LedgerRecord, *, time: str | None = None) -> bool:
        written = super().append(record, time=time)
        with contextlib.suppress(Exception):  # losing a statistic must never break a call
            self.metrics.record(record)
        return written


def write_textfile(path: Path | str, records: Iterable[LedgerRecord]) -> Metrics:
    """Write the result series of ``records`` to ``path`` for the node exporter's textfile
    collector (written beside it, then renamed: a scrape never reads half a file).

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "gcfkit.prom"
    >>> rec = LedgerRecord("git", "git_log", 900, 300, 250, 90, "o200k_base", "gcf", 2.0)
    >>> _ = write_textfile(out, [rec])
    >>> 'gcfkit_tokens_saved{server="git",tool="git_log"} 160.0' in out.read_text()
    True
    """
    metrics = Metrics(live=False)
    metrics.records(records)
    write_to_textfile(str(path), metrics.registry)
    return metrics
