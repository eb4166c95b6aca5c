"""The gcfkit ui JSON API, called directly: the playground's numbers are gcfkit stats' numbers,
the dashboard's are gcfkit stats --ledger's, bad input is a clear 4xx, and the server answers
only its own page (host, origin, content type, security headers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from gcfkit import dense, tokens
from gcfkit.ledger import read_entries
from gcfkit.measure.savings import describe_decision, timeline
from gcfkit.ui.app import create_app
from gcfkit.ui.playground import example_text, examples
from gcfkit.ui.server import is_loopback

from .ledger_gen import make_ledger

ROOT = Path(__file__).resolve().parent.parent


def cli_json(*args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ledger")
    return make_ledger(tmp / "ledger.jsonl", tmp)


@pytest.fixture
def client(ledger: Path) -> TestClient:
    return TestClient(create_app(ledger=ledger), base_url="http://127.0.0.1:8711")


def post(client: TestClient, text: str) -> Any:
    return client.post("/api/playground", json={"text": text})


def test_page_and_assets_ship_in_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    for asset in ("/static/app.js", "/static/style.css", "/static/favicon.svg"):
        assert client.get(asset).status_code == 200, asset
    # Nothing on the page comes from elsewhere.
    for text in (
        page.text,
        client.get("/static/app.js").text,
        client.get("/static/style.css").text,
    ):
        assert "http://" not in text.replace("http://www.w3.org", "")
        assert "https://" not in text


@pytest.mark.parametrize("example", [e.id for e in examples()])
def test_playground_numbers_are_gcfkit_stats_numbers(
    client: TestClient, example: str, tmp_path: Path
) -> None:
    text = client.get(f"/api/examples/{example}").json()["text"]
    assert text == example_text(example)
    got = post(client, text).json()
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    want = cli_json("stats", "--json", str(path))
    by_name = {f["format"]: f for f in got["formats"]}
    for f in want["formats"]:
        mine = by_name[f["format"]]
        for key in ("bytes", "tokens", "lossless", "saving", "error"):
            assert mine.get(key) == f.get(key), (example, f["format"], key)
    # The playground also measures GCF with extensions, which gcfkit stats leaves out: it is
    # the best only by being smaller than the best of the others.
    if got["best_lossless"] == "gcf-ext":
        best = by_name[want["best_lossless"]]["tokens"]["o200k_base"]
        assert by_name["gcf-ext"]["tokens"]["o200k_base"] <= best
    else:
        assert got["best_lossless"] == want["best_lossless"]
    assert "gcf-ext" in by_name  # GCF with extensions: measured, or marked not installed
    assert by_name["gcf"]["text"].startswith("GCF profile=generic")


def test_gcf_pasted_in_decodes_back_to_json(client: TestClient) -> None:
    value = {"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Lin"}]}
    gcf = post(client, json.dumps(value)).json()
    wire = next(f["text"] for f in gcf["formats"] if f["format"] == "gcf")
    back = post(client, wire).json()
    assert back["input"] == {"kind": "gcf", "profile": "generic", "bytes": len(wire)}
    assert json.loads(back["decoded"]) == value
    graph = "GCF profile=graph tool=t symbols=1 edges=0\n## targets\n@0 fn pkg.A 0.95 lsp\n"
    decoded = json.loads(post(client, graph).json()["decoded"])
    assert decoded["symbols"][0]["qualifiedName"] == "pkg.A"


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ('{"a": 1,\n "b": }', "invalid_json", 2),
        ('{"a": 1, "a": 2}', "invalid_json", None),
        ("   ", "empty", None),
        ("GCF profile=generic\nx=~\n", "invalid_missing", 2),
        ("GCF profile=nope\n", "unknown_profile", 1),
    ],
)
def test_bad_input_is_a_clear_error(
    client: TestClient, text: str, code: str, line: int | None
) -> None:
    r = post(client, text)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == code and err["message"]
    if line is not None:
        assert err["line"] == line


def test_requests_the_page_would_not_send_are_refused(client: TestClient) -> None:
    assert client.post("/api/playground", content=b'{"text":"1"}').status_code == 415
    assert client.post("/api/playground", json={"nope": 1}).status_code == 400
    r = client.post("/api/playground", json={"text": "[1]"}, headers={"Origin": "http://evil.test"})
    assert r.status_code == 403
    ok = client.post(
        "/api/playground", json={"text": "[1]"}, headers={"Origin": "http://127.0.0.1:8711"}
    )
    assert ok.status_code == 200
    assert client.get("/api/info", headers={"Host": "rebind.evil.test"}).status_code == 400
    assert client.get("/api/examples/../../etc/passwd").status_code == 404
    assert client.post("/api/playground", json={"text": "x" * (5 << 20)}).status_code == 413
    big = "[" + ",".join(["1"] * 1_100_000) + "]"
    assert post(client, big).json()["error"]["code"] == "too_large"


def test_dashboard_numbers_are_gcfkit_stats_numbers(client: TestClient, ledger: Path) -> None:
    got = client.get("/api/savings").json()
    want = cli_json("stats", "--json", "--ledger", "--ledger-file", str(ledger))
    assert got["summary"] == want
    week = client.get("/api/savings", params={"since": "7d"}).json()
    want = cli_json("stats", "--json", "--ledger", "--ledger-file", str(ledger), "--since", "7d")
    assert week["summary"] == want
    assert 0 < week["summary"]["total"]["calls"] < got["summary"]["total"]["calls"]
    # The timeline adds up to the totals, and the charts are inline SVG.
    buckets = got["timeline"]["buckets"]
    assert got["timeline"]["period"] == "day" and len(buckets) in (10, 11)
    assert sum(b["tokens_saved"] for b in buckets) == got["summary"]["total"]["tokens_saved"]
    assert all(svg.startswith("<svg") for svg in got["charts"].values())
    # What was left alone, and why.
    decisions = {d["decision"]: d for d in got["decisions"]}
    assert decisions["passthrough-file"]["left_alone"] is True
    assert decisions["gcf"]["left_alone"] is False
    assert decisions["fallback:time-budget"]["meaning"] == describe_decision("fallback:time-budget")
    assert "time budget" in decisions["fallback:time-budget"]["meaning"]
    assert client.get("/api/savings", params={"since": "soon"}).status_code == 400


def test_an_empty_or_missing_ledger_is_an_empty_dashboard(tmp_path: Path) -> None:
    c = TestClient(create_app(ledger=tmp_path / "none.jsonl"), base_url="http://localhost")
    got = c.get("/api/savings").json()
    assert got["summary"]["total"]["calls"] == 0 and got["timeline"]["buckets"] == []


def test_timeline_periods_and_gaps(ledger: Path) -> None:
    entries = read_entries(ledger)
    period, buckets = timeline(entries, "hour")
    assert period == "hour" and 200 <= len(buckets) <= 241
    assert sum(b.totals.calls for b in buckets) == len(entries)
    period, buckets = timeline(entries, max_buckets=5)
    assert period == "week"


def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.0.2.1", "::", "example.test"))


def test_gcf_with_extensions_is_gcfkit_dense_with_an_exact_counter(client: TestClient) -> None:
    """The playground's "GCF with extensions" is gcfkit.dense's dumps/loads, with the
    definitions chosen by exact o200k counts (this value is one where the dependency-free
    estimate would choose otherwise)."""
    team = "platform-team@example.com"
    rows = [{"id": 0, "tag": team, "n": "z"}, {"id": 1, "tag": team, "n": team}]
    exact = dense.dumps(rows, count=tokens.counter("o200k_base").count)
    assert exact != dense.dumps(rows)
    ext = next(
        f for f in post(client, json.dumps(rows)).json()["formats"] if f["format"] == "gcf-ext"
    )
    assert ext["text"] == exact and ext["lossless"] is True
    assert ext["tokens"]["o200k_base"] == tokens.count(exact, "o200k_base")
    assert dense.loads(ext["text"]) == rows
