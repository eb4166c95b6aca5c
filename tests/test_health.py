"""/healthz, /readyz and /metrics on the HTTP shells, end to end: the gateway (in this
process, on real loopback HTTP) and ``gcfkit proxy --http -- COMMAND`` (a process), probed
without an MCP session, scraped after real calls of the SDK's client, and the figures
checked against the ledger the same proxy wrote."""

from __future__ import annotations

import asyncio
import collections
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("prometheus_client")
import httpx2
from mcp.client.client import Client
from prometheus_client.parser import text_string_to_metric_families

from gcfkit.ledger import Ledger, read_entries
from gcfkit.proxy.core import ProxyConfig
from gcfkit.transports.health import Readiness, health_routes
from gcfkit.transports.http_guard import Guard
from gcfkit.transports.http_server import build_gateway
from gcfkit.transports.metrics import Metrics

from . import http_support as h

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "examples" / "demo_server.py")
#: A generous time budget: a loaded test machine must not turn rewrites into fallbacks.
CONFIG = ProxyConfig(time_budget=30.0)
SERIES = (
    "gcfkit_results_total",
    "gcfkit_tokens_before_total",
    "gcfkit_tokens_after_total",
    "gcfkit_bytes_before_total",
    "gcfkit_bytes_after_total",
)


@pytest.fixture(scope="module")
def inproc() -> Iterator[h.Background]:
    background = h.Background()
    try:
        yield background
    finally:
        background.close()


def get(url: str, **headers: str) -> httpx2.Response:
    return httpx2.get(url, headers=headers, timeout=30)


def scrape(base: str, **headers: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of ``base``/metrics, by name and labels."""
    response = get(f"{base}/metrics", **headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = collections.defaultdict(dict)
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            out[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


def from_ledger(path: Path) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """What the series must read for the records of the ledger at ``path``."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = collections.defaultdict(dict)
    for entry in read_entries(path):
        r = entry.record
        key = (("decision", r.decision), ("server", r.server), ("tool", r.tool))
        figures = (1, r.tokens_before, r.tokens_after, r.bytes_before, r.bytes_after)
        for name, value in zip(SERIES, figures, strict=True):
            out[name][key] = out[name].get(key, 0) + value
    return out


def settled(base: str, ledger: Path, results: int) -> dict[str, Any]:
    """The scrape once ``results`` records are in the ledger and in the series (a worker
    writes a record after the answer went out): a bounded wait."""
    deadline = time.monotonic() + 60
    while True:
        got = scrape(base)
        done = sum(got["gcfkit_results_total"].values())
        if len(read_entries(ledger)) >= results and done >= results:
            return got
        assert time.monotonic() < deadline, f"{done} results in the series, want {results}"
        time.sleep(0.05)


def assert_the_ledger_agrees(got: dict[str, Any], ledger: Path) -> None:
    want = from_ledger(ledger)
    for name in SERIES:
        assert got[name] == want[name], name
    saved: dict[tuple[tuple[str, str], ...], float] = collections.defaultdict(float)
    for entry in read_entries(ledger):
        saved[(("server", entry.record.server), ("tool", entry.record.tool))] += (
            entry.record.tokens_saved
        )
    assert got["gcfkit_tokens_saved"] == dict(saved)


def probes_answer_without_a_session(base: str) -> None:
    health = get(f"{base}/healthz")
    assert (health.status_code, health.text) == (200, "ok\n")
    ready = get(f"{base}/readyz")
    assert (ready.status_code, ready.text) == (200, "ready\n")
    assert httpx2.head(f"{base}/healthz", timeout=30).status_code == 200
    # Behind the guard as every route is: a foreign Host or Origin is refused here as at
    # the MCP endpoint.
    assert get(f"{base}/metrics", host="evil.example").status_code == 421
    assert get(f"{base}/readyz", origin="http://evil.example").status_code == 403


# ---------------------------------------------------------------------------------------
# The gateway
# ---------------------------------------------------------------------------------------


def test_the_gateway_is_probed_and_scraped(inproc: h.Background, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    with h.sdk_server() as upstream:
        app = build_gateway(f"{upstream}/stateful/mcp", CONFIG, ledger=Ledger(ledger))
        base = inproc.serve(app)
        probes_answer_without_a_session(base)
        assert scrape(base)["gcfkit_sessions"] == {(): 0}

        async def calls() -> dict[str, Any]:
            async with Client(f"{base}/stateful/mcp", mode="legacy") as c:
                for n in (5, 20, 20):
                    await c.call_tool("orders", {"limit": n})
                await c.call_tool("echo", {"text": "hi"})
                return scrape(base)  # while the session is open

        during = h.run(calls)
        got = settled(base, ledger, 4)
    assert during["gcfkit_sessions"] == {(): 1}
    assert_the_ledger_agrees(got, ledger)
    assert {k[2][1] for k in got["gcfkit_results_total"]} == {"orders", "echo"}
    latency = got["gcfkit_added_latency_seconds_count"]
    assert sum(latency.values()) == 4
    # Results this small are answered in the gateway's own process: no worker started.
    assert got["gcfkit_workers"][()] == 0


def test_readyz_fails_when_the_upstream_is_down(inproc: h.Background) -> None:
    with h.sdk_server() as upstream:
        base = inproc.serve(build_gateway(f"{upstream}/stateful/mcp", CONFIG))
        assert get(f"{base}/readyz").status_code == 200
    deadline = time.monotonic() + 30  # the last check is reused for a second
    while (ready := get(f"{base}/readyz")).status_code == 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert ready.status_code == 503
    assert "unreachable" in ready.text
    assert get(f"{base}/healthz").status_code == 200  # the process itself lives


def test_with_a_client_token_the_probes_are_open_and_the_metrics_are_not(
    inproc: h.Background,
) -> None:
    token = {"authorization": "Bearer client-secret"}
    with h.sdk_server() as upstream:
        guard = Guard("127.0.0.1", client_token="client-secret")
        base = inproc.serve(build_gateway(f"{upstream}/stateful/mcp", CONFIG, guard=guard))
        # A load balancer's probe carries no token...
        assert get(f"{base}/healthz").status_code == 200
        assert get(f"{base}/readyz").status_code == 200
        # ... but it is still refused from a rebinding page.
        assert get(f"{base}/healthz", host="evil.example").status_code == 421
        assert get(f"{base}/readyz", origin="http://evil.example").status_code == 403
        # The series name the tools in use: a scrape sends the token.
        assert get(f"{base}/metrics").status_code == 401
        assert get(f"{base}/metrics", **token).status_code == 200
        mcp = httpx2.post(f"{base}/stateful/mcp", json=h.INIT, headers=h.ACCEPT, timeout=30)
        assert mcp.status_code == 401  # the MCP endpoint is not opened
        got = scrape(base, **token)
    refused = got["gcfkit_refusals_total"]
    assert refused == {(("reason", "host"),): 1, (("reason", "origin"),): 1,
                       (("reason", "unauthorized"),): 2}  # fmt: skip


def test_every_refusal_the_guard_counts_is_in_the_series(inproc: h.Background) -> None:
    with h.sdk_server() as upstream:
        app = build_gateway(f"{upstream}/stateful/mcp", CONFIG)
        base = inproc.serve(app)
        assert scrape(base)["gcfkit_refusals_total"] == {}
        foreign = {**h.ACCEPT, "origin": "http://evil.example"}
        url = f"{base}/stateful/mcp"
        assert httpx2.post(url, json=h.INIT, headers=foreign, timeout=30).status_code == 403
        assert get(f"{base}/elsewhere").status_code == 404  # the gateway relays no other path
        got = scrape(base)
    assert got["gcfkit_refusals_total"] == {(("reason", "origin"),): 1,
                                            (("reason", "not_relayed"),): 1}  # fmt: skip
    assert app.state.refusals.counts == {"origin": 1, "not_relayed": 1}


# ---------------------------------------------------------------------------------------
# --http -- COMMAND, as a process
# ---------------------------------------------------------------------------------------


def gcfkit_http(*args: str) -> Any:
    """``gcfkit proxy --http 127.0.0.1:0 ARGS`` with its ledger (test_http's runs without)."""
    proxy = [sys.executable, "-m", "gcfkit.cli", "proxy", "--time-budget", "30"]
    process = subprocess.Popen(
        [*proxy, "--http", "127.0.0.1:0", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=h.env(),
        cwd=str(ROOT),
    )
    assert process.stderr is not None
    try:
        url = h.read_line(process.stderr, r"serving (http://\S+)", h.START_TIMEOUT).group(1)
    except BaseException:
        h.stop_process(process)
        raise
    return process, url.removesuffix("/mcp")


def test_a_command_server_is_probed_and_scraped(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    process, base = gcfkit_http("--ledger", str(ledger), "--", sys.executable, DEMO)
    try:
        probes_answer_without_a_session(base)

        async def calls() -> None:
            async with Client(f"{base}/mcp", mode="legacy") as c:
                await c.call_tool("list_orders", {"limit": 20})
                await c.call_tool("list_orders", {"limit": 20})
                await c.call_tool("hello", {"name": "Ada"})

        h.run(calls)
        got = settled(base, ledger, 3)
    finally:
        h.stop_process(process)
    assert_the_ledger_agrees(got, ledger)
    assert got["gcfkit_tokens_saved"][(("server", "gcfkit-demo"), ("tool", "list_orders"))] > 0


def test_readyz_fails_when_the_command_cannot_start(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    process, base = gcfkit_http("--no-stats", "--", missing)
    try:
        ready = get(f"{base}/readyz")
        health = get(f"{base}/healthz")
    finally:
        h.stop_process(process)
    assert ready.status_code == 503 and "could not be started" in ready.text
    assert health.status_code == 200


# ---------------------------------------------------------------------------------------
# The pieces
# ---------------------------------------------------------------------------------------


def test_an_mcp_endpoint_at_a_probe_path_keeps_it() -> None:
    async def up() -> None:
        return None

    paths = [getattr(r, "path", "") for r in health_routes(Metrics(), up)]
    assert paths == ["/healthz", "/readyz", "/metrics"]
    routes = health_routes(Metrics(), up, mcp_path="/metrics/")
    assert [getattr(r, "path", "") for r in routes] == ["/healthz", "/readyz"]


def test_probes_that_come_together_share_one_check() -> None:
    calls = 0

    async def check() -> str | None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return None if calls == 1 else "down"

    async def body() -> list[str | None]:
        readiness = Readiness(check, ttl=3600)
        return list(await asyncio.gather(*(readiness.reason() for _ in range(20))))

    assert asyncio.run(body()) == [None] * 20
    assert calls == 1


def test_a_check_that_raises_is_a_reason() -> None:
    async def broken() -> str | None:
        raise OSError("no")

    assert asyncio.run(Readiness(broken).reason()) == "the readiness check failed: OSError"
