"""gcfkit.transports.metrics and .tracing: the series a record moves, bounded labels, the
worker pool reporting to its observer, the textfile for stdio users (``gcfkit stats
--prometheus``), and OpenTelemetry spans (the SDK's in-memory exporter)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from gcfkit.cli import main
from gcfkit.ledger import Ledger, read_entries
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.record import LedgerRecord
from gcfkit.proxy.rewrite import Call
from gcfkit.transports.metrics import OTHER, MeteredLedger, Metrics, write_textfile
from gcfkit.transports.offload import Offload, OffloadFailed
from gcfkit.transports.tracing import Spans, spans_from_env


def rec(tool: str = "git_log", decision: str = "gcf", before: int = 300, after: int = 120) -> Any:
    return LedgerRecord(
        "git", tool, before * 3, after * 3, before, after, "o200k_base", decision, 4.0
    )


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_record_moves_every_result_series() -> None:
    m = Metrics(live=False)
    m.record(rec())
    m.record(rec(before=100, after=130))  # a result that grew
    m.record(rec(decision="fallback:time-budget", before=50, after=50))
    labels = {"server": "git", "tool": "git_log", "decision": "gcf"}
    assert m.value("gcfkit_results_total", **labels) == 2
    assert m.value("gcfkit_tokens_before_total", **labels) == 400
    assert m.value("gcfkit_tokens_after_total", **labels) == 250
    assert m.value("gcfkit_bytes_before_total", **labels) == 1200
    assert m.value("gcfkit_tokens_saved", server="git", tool="git_log") == 150
    assert m.value("gcfkit_budget_overruns_total", server="git", tool="git_log") == 1
    assert m.value("gcfkit_rewrite_seconds_count", server="git") == 3
    assert m.value("gcfkit_rewrite_seconds_sum", server="git") == pytest.approx(0.012)
    # Not live: no latency, sessions or refusals.
    assert "gcfkit_sessions" not in m.text() and "gcfkit_added_latency" not in m.text()


def test_labels_are_bounded() -> None:
    m = Metrics(live=False, max_tools=3, max_servers=2)
    for tool in ["a", "b", "c", "d", "../../etc/passwd", "x" * 129, "a"]:
        m.record(rec(tool=tool))
    tools = {
        s.labels["tool"]
        for f in text_string_to_metric_families(m.text())
        for s in f.samples
        if s.name == "gcfkit_results_total"
    }
    assert tools == {"a", "b", "c", OTHER}
    assert m.value("gcfkit_results_total", server="git", tool=OTHER, decision="gcf") == 3
    for server in ["one", "two", "three"]:  # "git" holds one of the two places already
        m.record(LedgerRecord(server, "a", 1, 1, 1, 1, "o200k_base", "gcf", 0.0))
    assert m.value("gcfkit_results_total", server="one", tool="a", decision="gcf") == 1
    assert m.value("gcfkit_results_total", server=OTHER, tool="a", decision="gcf") == 2
    m.record(LedgerRecord("", "a", 1, 1, 1, 1, "o200k_base", "Weird Decision", 0.0))
    assert m.value("gcfkit_results_total", server=OTHER, tool="a", decision=OTHER) == 1


def test_refusals_have_a_bounded_reason() -> None:
    m = Metrics()
    m.refused("body-too-large")
    m.refused("body-too-large")
    m.refused("a reason from /some/path?user=ada")
    assert m.value("gcfkit_refusals_total", reason="body-too-large") == 2
    assert m.value("gcfkit_refusals_total", reason=OTHER) == 1


def test_sessions_and_workers_are_read_at_each_scrape() -> None:
    m = Metrics()
    open_sessions = ["a", "b"]
    m.watch(sessions=lambda: len(open_sessions))
    m.watch(sessions=lambda: 1 // 0)  # a broken figure is 0, never a failed scrape
    assert m.value("gcfkit_sessions") == 2
    open_sessions.pop()
    assert m.value("gcfkit_sessions") == 1
    assert m.value("gcfkit_workers") == 0 and m.value("gcfkit_worker_restarts_total") == 0


def test_the_exposition_follows_the_accept_header() -> None:
    m = Metrics()
    body, content_type = m.exposition(None)
    assert content_type.startswith("text/plain") and b"gcfkit_sessions" in body
    body, content_type = m.exposition("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")


def test_a_metered_ledger_writes_and_counts(tmp_path: Path) -> None:
    m = Metrics(live=False)
    assert MeteredLedger.of(m, None) is None
    led = MeteredLedger.of(m, Ledger(tmp_path / "l.jsonl"))
    assert led is not None
    led.append(rec())
    assert [e.record for e in read_entries(tmp_path / "l.jsonl")] == [rec()]
    assert m.value("gcfkit_results_total", server="git", tool="git_log", decision="gcf") == 1


def test_the_pool_reports_records_and_answers(tmp_path: Path) -> None:
    """A real worker: the record it appends to the ledger reaches the observer too, and each
    answer is timed."""
    m = Metrics()
    path = tmp_path / "ledger.jsonl"
    line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}\n'

    async def body() -> None:
        pool = Offload(ProxyConfig(primer=False, time_budget=30.0), ledger_path=path)
        pool.observer = m
        m.watch(pool=pool)
        await pool.start()
        try:
            await pool.session().rewrite(line, Call("t", "t"), "srv")
            for _ in range(500):  # the record comes after the answer: bounded wait for it
                if m.value("gcfkit_rewrite_seconds_count", server="srv"):
                    break
                await asyncio.sleep(0.02)
            assert m.value("gcfkit_workers") == 1
        finally:
            await pool.close()
        with pytest.raises(OffloadFailed):
            await pool.session().rewrite(line, Call("t", "t"), "srv")

    asyncio.run(asyncio.wait_for(body(), 120))
    (entry,) = read_entries(path)
    labels = {"server": "srv", "tool": "t", "decision": entry.record.decision}
    assert m.value("gcfkit_results_total", **labels) == 1
    assert m.value("gcfkit_tokens_before_total", **labels) == entry.record.tokens_before
    assert m.value("gcfkit_tokens_after_total", **labels) == entry.record.tokens_after
    count = m.value("gcfkit_added_latency_seconds_count", server="srv", outcome="rewritten")
    assert count == 1


def test_an_observer_that_fails_breaks_nothing() -> None:
    class Broken:
        def record(self, record: LedgerRecord) -> None:
            raise RuntimeError("no")

        def settled(self, server: str, tool: str, outcome: str, seconds: float) -> None:
            raise RuntimeError("no")

    line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}\n'

    async def body() -> bytes | None:
        pool = Offload(ProxyConfig(primer=False, time_budget=30.0))
        pool.observer = Broken()
        await pool.start()
        try:
            return await pool.session().rewrite(line, Call("t", "t"), "srv")
        finally:
            await pool.close()

    assert asyncio.run(asyncio.wait_for(body(), 120)) == line.replace(b"[1, 2]", b"[1,2]")


def test_the_textfile_holds_the_ledger(tmp_path: Path) -> None:
    out = tmp_path / "gcfkit.prom"
    records = [rec(), rec("git_status", "unchanged", 20, 20), rec()]
    write_textfile(out, records)
    got = samples(out.read_text())
    key = (
        "gcfkit_tokens_before_total",
        (("decision", "gcf"), ("server", "git"), ("tool", "git_log")),
    )
    assert got[key] == 600
    assert got[("gcfkit_tokens_saved", (("server", "git"), ("tool", "git_status")))] == 0
    assert not any(name.startswith("gcfkit_sessions") for name, _ in got)


def test_stats_prometheus_writes_the_ledger_for_the_textfile_collector(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for r in [rec(), rec("git_diff", "dense", 500, 200)]:
        ledger.append(r, time="2026-06-02T00:00:00.000Z")
    ledger.append(rec("old"), time="2026-01-01T00:00:00.000Z")
    out = tmp_path / "textfile" / "gcfkit.prom"
    out.parent.mkdir()
    args = ["stats", "--ledger-file", str(ledger.path), "--prometheus", str(out)]
    assert main([*args, "--since", "2026-06-01"]) == 0
    got = samples(out.read_text())
    results = {k[1]: v for k, v in got.items() if k[0] == "gcfkit_results_total"}
    assert results == {
        (("decision", "gcf"), ("server", "git"), ("tool", "git_log")): 1,
        (("decision", "dense"), ("server", "git"), ("tool", "git_diff")): 1,
    }
    assert list(out.parent.iterdir()) == [out]  # written whole: no temporary file left
    assert main(["stats", "--ledger-file", str(ledger.path), "--prometheus", "/nonexistent/x"]) == 2


# ---------------------------------------------------------------------------------------
# OpenTelemetry
# ---------------------------------------------------------------------------------------


def test_traces_are_off_unless_configured() -> None:
    assert spans_from_env({}) is None
    assert spans_from_env({"OTEL_SERVICE_NAME": "x"}) is None
    assert spans_from_env({"OTEL_TRACES_EXPORTER": "none"}) is None
    assert spans_from_env({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}) is None


def test_an_exporter_that_is_not_installed_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("opentelemetry.sdk")
    assert spans_from_env({"OTEL_TRACES_EXPORTER": "no_such_exporter"}) is None
    assert "no_such_exporter" in capsys.readouterr().err


def test_the_console_exporter_is_found_by_its_entry_point() -> None:
    pytest.importorskip("opentelemetry.sdk")
    spans = spans_from_env({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "team-gw"})
    assert spans is not None
    assert spans.provider.resource.attributes["service.name"] == "team-gw"
    spans.provider.shutdown()


def test_a_tool_call_span() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    m = Metrics(spans=Spans(provider), max_tools=1)
    m.settled("git", "git_log", "rewritten", 0.25)
    m.settled("git", "secret-tool-42", "original", 0.001)
    m.close()
    first, second = exporter.get_finished_spans()
    assert first.name == "tools/call git_log"
    assert second.name == f"tools/call {OTHER}"  # the bounded label, as in the metrics
    assert first.attributes is not None
    assert dict(first.attributes) == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "git_log",
        "gcfkit.server": "git",
        "gcfkit.outcome": "rewritten",
        "gcfkit.added_ms": 250.0,
    }
    assert first.end_time is not None and first.start_time is not None
    assert first.end_time - first.start_time == pytest.approx(250_000_000, abs=2)
    assert json.loads(first.to_json())["kind"] == "SpanKind.INTERNAL"
