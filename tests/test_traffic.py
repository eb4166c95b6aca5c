"""gcfkit capture and gcfkit verify: the corpus format, the capture beside a live relay, the
replay through the proxy core, the lossless gate (which must pass on the real corpus and must
close on a lossy codec), and the reports."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import gcfkit
from gcfkit.jsonio import same_value
from gcfkit.proxy.core import Codec, ProxyConfig
from gcfkit.relative import Reader, json_answer
from gcfkit.traffic.capture import Capture
from gcfkit.traffic.corpus import SessionWriter, read_session, read_sessions
from gcfkit.traffic.report import render_html, render_markdown
from gcfkit.traffic.verify import GateError, read_back, verify_sessions
from tests.conformance import CORPUS_DIR

ROOT = Path(__file__).resolve().parent.parent
CORPUS = CORPUS_DIR / "mcp"
DEMO = str(ROOT / "examples" / "demo_server.py")
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not available")


def text_result(*texts: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t} for t in texts]}


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    return out


def gcfkit_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", *args],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(ROOT),
        timeout=timeout,
    )


# ---------------------------------------------------------------------------------------
# The corpus format
# ---------------------------------------------------------------------------------------


@needs_corpus
def test_reads_the_shared_corpus_as_recorded() -> None:
    sessions = read_sessions(CORPUS)
    assert sorted(s.name for s in sessions) == [
        "everything", "filesystem", "filesystem-npm", "git", "memory", "serena", "time"
    ]  # fmt: skip
    assert sum(len(s.calls) for s in sessions) == 92
    memory = next(s for s in sessions if s.name == "memory")
    assert memory.initialize is not None and memory.tools_list is not None
    assert [c.number for c in memory.calls] == list(range(19))
    assert memory.calls[8].repeat_of == "003" and memory.calls[8].tool == "read_graph"
    # A session directory is one session too.
    assert len(read_session(CORPUS / "time").calls) == len(read_sessions(CORPUS / "time")[0].calls)


def test_writer_round_trips_keys_order_errors_and_odd_strings(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "s", "srv")
    result = {"content": [{"type": "text", "text": "z\u2028\ud800 a"}], "isError": False, "a": 1}
    w.write_call("t/x y", {"b": 1, "a": [1.0, 2]}, result)
    w.write_call("t/x y", {"a": [1.0, 2], "b": 1}, None, {"code": -32602, "message": "no"})
    s = read_session(tmp_path / "s")
    first, second = s.calls
    assert first.file == "000_t_x_y.json" and first.tool == "t/x y"
    assert first.result is not None
    assert same_value(first.result, result) and list(first.result) == list(result)
    assert isinstance(first.arguments["a"][0], float)
    assert second.result is None and second.error == {"code": -32602, "message": "no"}
    assert second.repeat_of == "000"  # the same call, keys in another order
    assert oct((tmp_path / "s" / first.file).stat().st_mode & 0o777) == "0o600"


def test_no_session_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(gcfkit.GCFError, match="no recorded session"):
        read_sessions(tmp_path)


# ---------------------------------------------------------------------------------------
# The gate
# ---------------------------------------------------------------------------------------


def test_read_back_accepts_every_form_the_proxy_sends() -> None:
    r = Reader()
    rows = [{"id": i, "name": f"n{i}"} for i in range(3)]
    sent = text_result(json.dumps(rows, indent=2))
    assert read_back(sent, text_result(gcfkit.dumps(rows)), r, file_tool=False) == "GCF"
    assert (
        read_back(sent, text_result(json.dumps(rows, separators=(",", ":"))), r, file_tool=False)
        == "compact JSON"
    )
    # Joined blocks, and a ref block that names the result.
    sent = text_result(*(json.dumps(x) for x in rows))
    got = text_result(gcfkit.dumps(rows), "ref=482913")
    assert read_back(sent, got, r, file_tool=False) == "GCF, 3 blocks joined + ref"
    assert r.holds("482913")
    # A relative answer against what the reader holds.
    new = [*rows, {"id": 3, "name": "n3"}]
    answer = json_answer(rows, new, tool="t", since="482913", ref="771204")
    assert read_back(text_result(json.dumps(new)), text_result(answer), r, file_tool=False)
    # A file read passes only byte for byte.
    assert read_back(text_result("a\n"), text_result("a\n"), r, file_tool=True) == "as sent"


@pytest.mark.parametrize(
    ("sent", "got", "file_tool", "problem"),
    [
        (text_result('{"a": 1}'), text_result('{"a":2}'), False, "does not read back"),
        (text_result('{"a": 1, "b": 2}'), text_result('{"b":2,"a":1}'), False, "does not read"),
        (text_result('{"a": 1.5}'), text_result('{"a":"1.5"}'), False, "does not read back"),
        (text_result('{"a": 1}'), text_result('{"a":1}'), True, "byte for byte"),
        (text_result("plain"), text_result("plain!"), False, "not JSON"),
        (text_result("x", "y"), text_result("x"), False, "joined"),
        ({**text_result("x"), "isError": True}, text_result("x"), False, "other than content"),
        (
            {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
            {"content": [{"type": "image", "data": "AB==", "mimeType": "image/png"}]},
            False,
            "not a text block",
        ),
        (text_result('{"a": 1}'), text_result("@@ unchanged tool=t since=999999\n"), False, "held"),
    ],
)
def test_read_back_refuses_what_is_not_what_was_sent(
    sent: dict[str, Any], got: dict[str, Any], file_tool: bool, problem: str
) -> None:
    with pytest.raises(GateError, match=problem):
        read_back(sent, got, Reader(), file_tool=file_tool)


@needs_corpus
@pytest.mark.parametrize("agent_since", [False, True])
def test_the_corpus_passes_the_gate_and_saves(agent_since: bool) -> None:
    result = verify_sessions(read_sessions(CORPUS), agent_since=agent_since)
    assert result.passed, [(c.session, c.file, c.problem) for c in result.failures]
    assert len(result.checks) == 92
    total = result.summary.total
    assert total.calls == sum(1 for c in result.checks if c.record is not None)
    assert total.tokens_after < total.tokens_before * 0.9
    hows = {c.how for c in result.checks}
    assert {"as sent", "GCF", "compact JSON"} <= hows
    if agent_since:
        assert "@@ unchanged" in hows and "@@ patch" in hows
        assert any(d.startswith("since-") for d in total.decisions)
    # File reads are never rewritten (at most an identical re-read answered unchanged).
    for c in result.checks:
        if c.tool == "read_text_file":
            assert c.how in ("as sent", "as sent + ref", "@@ unchanged"), c
    # A server whose results were left alone but named (file reads) grows by its ref= blocks,
    # and the report says so rather than show a bare loss.
    grown = [t for t in result.summary.tools.values() if t.why_larger()]
    if not agent_since:
        assert grown
        report = render_markdown(result, "corpus")
        assert f"({grown[0].ref_tokens:,} tokens of ref= handles)" in report


def test_the_gate_closes_on_a_lossy_codec(tmp_path: Path) -> None:
    w = SessionWriter(tmp_path / "shop", "shop")
    rows = [{"id": i, "name": f"item {i}", "price": 10 + i} for i in range(30)]
    w.write_call("list", {}, text_result(json.dumps(rows)))

    def lossy_dumps(value: Any) -> str:  # drops the last row, as a buggy encoder might
        return gcfkit.dumps(value[:-1] if isinstance(value, list) else value)

    codec = Codec(dumps=lossy_dumps)
    sessions = read_sessions(tmp_path)
    # With its self-check on, the proxy itself refuses the lossy GCF: the gate passes.
    assert verify_sessions(sessions, codec=codec).passed
    # Without it, the gate is what catches it.
    off = ProxyConfig(selfcheck=False, time_budget=30)
    result = verify_sessions(sessions, off, codec=codec)
    assert not result.passed
    assert "does not read back" in result.failures[0].problem
    assert "FAIL" in render_markdown(result, "x") and "FAIL" in render_html(result, "x")


@needs_corpus
def test_cli_verify_over_the_corpus_prints_the_gate_and_writes_reports(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    proc = gcfkit_cli("verify", str(CORPUS), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "lossless gate: PASS, all 92 results" in proc.stdout
    assert "savings (o200k_base):" in proc.stdout
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert "## Per tool" in md and "read_graph" in md
    assert (
        "<svg" in page
        and "<script" not in page
        and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    proc = gcfkit_cli("verify", str(CORPUS / "time"), "--json", "--no-report")
    data = json.loads(proc.stdout)
    assert data["gate"] == "pass" and data["calls"] == 8
    assert data["savings"]["total"]["tokens_after"] < data["savings"]["total"]["tokens_before"]


# ---------------------------------------------------------------------------------------
# Capture
# ---------------------------------------------------------------------------------------


def line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def test_capture_pairs_requests_and_results_in_order(tmp_path: Path) -> None:
    cap = Capture(tmp_path)
    init = {"serverInfo": {"name": "mcp/demo", "version": "1"}, "capabilities": {}}
    cap.to_server(line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}))
    cap.from_server(line({"jsonrpc": "2.0", "id": 0, "result": init}))
    cap.to_server(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    x1 = {"name": "x", "arguments": {"n": 1}}
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": x1},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "y"}},
    ]
    cap.to_server(json.dumps(batch).encode() + b"\n")
    cap.from_server(line({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}))
    cap.from_server(line({"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "m"}}))
    cap.from_server(line({"jsonrpc": "2.0", "id": "a", "result": text_result("one")}))
    cap.from_server(b"not json\n")
    cap.to_server(line({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": x1}))
    cap.from_server(line({"jsonrpc": "2.0", "id": 8, "result": text_result("two")}))
    cap.close()
    s = read_session(tmp_path / "mcp_demo")
    assert s.initialize == init
    assert [(c.tool, c.repeat_of) for c in s.calls] == [("y", None), ("x", None), ("x", "001")]
    assert s.calls[0].error == {"code": -1, "message": "m"}
    assert s.calls[2].result == text_result("two")
    note = json.loads((tmp_path / "mcp_demo" / "meta" / "capture.json").read_text())
    assert note["dropped_lines"] == 0


def test_capture_is_bounded_and_drops_instead_of_waiting(tmp_path: Path) -> None:
    cap = Capture(tmp_path, "b", max_calls=2, warn_stream=open(os.devnull, "w"))  # noqa: SIM115
    for i in range(5):
        cap.to_server(
            line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "t"}})
        )
        cap.from_server(line({"jsonrpc": "2.0", "id": i, "result": text_result(str(i))}))
    cap.close()
    assert len(read_session(tmp_path / "b").calls) == 2
    assert cap.dropped == 3
    # A full queue drops on the relay's side at once.
    tiny = Capture(tmp_path / "q", "q", queue_bytes=10)
    tiny.to_server(b"x" * 100)
    assert tiny.dropped == 1
    tiny.close()
    # Two captures of the same server never share a directory.
    for _ in range(2):
        c = Capture(tmp_path / "same", "srv")
        c.to_server(
            line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}})
        )
        c.from_server(line({"jsonrpc": "2.0", "id": 1, "result": text_result("x")}))
        c.close()
    assert sorted(p.name for p in (tmp_path / "same").iterdir()) == ["srv", "srv.2"]


async def _session_calls(command: list[str], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env(), cwd=str(ROOT))
    out = []
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            for name, args in calls:
                result = await session.call_tool(name, args)
                out.append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    return out


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_orders", {"limit": 30}),
    ("hello", {"name": "Ada"}),
    ("report", {}),
    ("fail", {}),
]


def test_capture_beside_the_live_proxy_then_verify(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    py = sys.executable
    direct = asyncio.run(asyncio.wait_for(_session_calls([py, DEMO], CALLS), 60))
    # --refs off: result handles are random per session, and the runs are compared.
    plain = [py, "-m", "gcfkit.cli", "proxy", "--no-stats", "--refs", "off", "--time-budget"]
    plain += ["30", "--"]
    captured = [*plain[:5], "--capture-dir", str(tmp_path / "cap"), *plain[5:]]
    without = asyncio.run(asyncio.wait_for(_session_calls([*plain, py, DEMO], CALLS), 60))
    with_cap = asyncio.run(asyncio.wait_for(_session_calls([*captured, py, DEMO], CALLS), 60))
    assert with_cap == without  # capturing never changes what the client gets
    assert without[0] != direct[0]  # (and the proxy did rewrite something)
    (session,) = read_sessions(tmp_path / "cap")
    assert [c.tool for c in session.calls] == [c[0] for c in CALLS]
    for call, got in zip(session.calls, direct, strict=True):
        assert call.result is not None
        assert same_value(call.result["content"], got["content"])  # the raw server result
    proc = gcfkit_cli("verify", str(tmp_path / "cap"), "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lossless gate: PASS, all 4 results" in proc.stdout

    # gcfkit capture relays untouched: the client sees exactly what the server sent.
    cap = [py, "-m", "gcfkit.cli", "capture", "--name", "demo", str(tmp_path / "raw"), "--"]
    relayed = asyncio.run(asyncio.wait_for(_session_calls([*cap, py, DEMO], CALLS), 60))
    assert relayed == direct
    assert len(read_session(tmp_path / "raw" / "demo").calls) == len(CALLS)


def test_the_progress_bar_appears_only_after_its_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    from gcfkit.cli import progress

    monkeypatch.setattr(progress, "_stderr_is_terminal", lambda: True)
    with progress.Progress(3, "replaying", delay=3600) as slow:
        slow.advance()
        assert slow._bar is None  # under its delay: nothing drawn
    with progress.Progress(3, "replaying", delay=0) as bar:
        bar.advance(2)
        assert bar._bar is not None and bar._bar.tasks[0].completed == 2
    assert bar._bar.finished is False and not bar._bar.live.is_started
