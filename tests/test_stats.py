"""``gcfkit stats`` and the comparison logic behind it (gcfkit.measure.report)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gcfkit import gcx1, tokens
from gcfkit.cli import main
from gcfkit.cli import stats as stats_cli
from gcfkit.jsonio import same_value
from gcfkit.measure.report import Format, compare_formats, default_formats, measure

ROWS = [
    {"id": 1, "name": "Ada", "active": True, "score": 9.5},
    {"id": 2, "name": "Bob", "active": False, "score": 7.0},
    {"id": 3, "name": "Cy", "active": True, "score": None},
]


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes, tty: bool = False) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    monkeypatch.setattr(stats_cli, "_stdin_is_tty", lambda: tty)


def _json_out(capsys: pytest.CaptureFixture[str]) -> Any:
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------


def test_the_lossless_check_is_type_strict() -> None:
    assert not same_value(True, 1)
    assert not same_value(0, False)
    assert not same_value("1", 1)
    assert not same_value(None, "null")
    assert not same_value([1], (1, 2))
    assert same_value([1, 2], (1, 2))
    assert not same_value({"a": 1}, {"a": 1, "b": 2}, key_order=False)
    assert same_value(3, 3.0)
    assert not same_value(3, 3.0, number_types=True)
    assert same_value({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same_value({"a": 1, "b": 2}, {"b": 2, "a": 1}, key_order=False)


def test_compare_formats_counts_and_checks_every_format() -> None:
    cmp = compare_formats(ROWS)
    names = [r.name for r in cmp.results]
    assert names == ["json-pretty", "json-compact", "toon", "gcx1", "gcf"]
    compact = json.dumps(ROWS, separators=(",", ":"), ensure_ascii=False)
    r = cmp.result("json-compact")
    assert r.text == compact
    assert r.bytes == len(compact.encode())
    assert r.tokens == {e: tokens.count(compact, e) for e in tokens.ENCODINGS}
    g = cmp.result("gcx1")
    assert g.text == gcx1.dumps(ROWS, tool="stats")
    for res in cmp.results:
        if res.text is not None:
            assert res.lossless is True, res.name
    assert cmp.saving("json-compact", "o200k_base") == 0.0
    pretty = cmp.result("json-pretty").tokens["o200k_base"]
    assert cmp.saving("json-pretty", "o200k_base") == 1 - pretty / r.tokens["o200k_base"]
    best = cmp.best_lossless("o200k_base")
    assert best is not None
    assert best.tokens["o200k_base"] == min(x.tokens["o200k_base"] for x in cmp.results if x.ok)
    assert cmp.methods == {e: tokens.method(e) for e in tokens.ENCODINGS}


def test_a_lossy_format_is_caught() -> None:
    lossy = Format("lossy", "Lossy", json.dumps, lambda t: json.loads(t.replace("true", "1")))
    r = measure(lossy, {"flag": True})
    assert r.lossless is False
    assert r.error == "round trip changed the value"
    reorder = Format("sorted", "Sorted", lambda v: json.dumps(v, sort_keys=True), json.loads)
    r = measure(reorder, {"b": 1, "a": 2})
    assert r.lossless is True and r.key_order_kept is False
    assert "key order changed" in r.note
    unordered = Format(
        "u", "U", lambda v: json.dumps(v, sort_keys=True), json.loads, key_order=False
    )
    assert measure(unordered, {"b": 1, "a": 2}).key_order_kept is None
    assert measure(reorder, {"a": 1, "b": 2}).key_order_kept is True


def test_refusals_and_crashes_are_recorded_not_raised() -> None:
    cmp = compare_formats({"a": {"b": 1}})
    g = cmp.result("gcx1")
    assert g.text is None and g.lossless is None
    assert g.error is not None and "unsupported_shape" in g.error

    def boom(v: Any) -> str:
        raise RuntimeError("peer bug")

    r = measure(Format("peer", "Peer", boom, json.loads), [1])
    assert r.text is None and r.error == "encode failed: RuntimeError: peer bug"


def test_toon_reported_as_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "toon_format", None)
    toon = next(f for f in default_formats() if f.name == "toon")
    assert not toon.available
    assert "not installed" in toon.note
    r = compare_formats(ROWS, formats=[toon, default_formats()[1]]).result("toon")
    assert r.text is None and r.error is not None and "not installed" in r.error


def test_unknown_baseline_is_refused() -> None:
    with pytest.raises(ValueError):
        compare_formats(ROWS, baseline="yaml")


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------


def test_stats_file_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(ROWS, indent=2))
    assert main(["stats", str(path), "--json"]) == 0
    out = _json_out(capsys)
    assert out["input"] == str(path)
    assert out["baseline"] == "json-compact"
    assert out["token_counts"] == {e: tokens.method(e) for e in tokens.ENCODINGS}
    by_name = {f["format"]: f for f in out["formats"]}
    compact = json.dumps(ROWS, separators=(",", ":"))
    assert by_name["json-compact"]["tokens"]["o200k_base"] == tokens.count(compact)
    assert by_name["json-compact"]["saving"]["o200k_base"] == 0.0
    assert by_name["gcx1"]["lossless"] is True
    assert out["best_lossless"] in by_name


def test_stats_piped_stdin_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, json.dumps(ROWS).encode())
    assert main(["stats", "--encoding", "cl100k_base", "--baseline", "pretty"]) == 0
    out = capsys.readouterr().out
    for label in ("JSON pretty", "JSON compact", "GCX1", "GCF", "lossless"):
        assert label in out
    assert "stdin" in out
    assert "vs pretty: change in cl100k_base tokens against pretty JSON (− is fewer)" in out


def test_stats_dash_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, b'{"a": [1, 2, 3]}', tty=True)
    assert main(["stats", "-", "--json"]) == 0
    assert _json_out(capsys)["input"] == "stdin"


@pytest.mark.parametrize("data", [b"{bad", b"[1, 2", b'{"a": NaN}', b'{"a": 1, "a": 2}'])
def test_invalid_json_exits_2(
    data: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _stdin(monkeypatch, data)
    assert main(["stats"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error[")


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(tmp_path / "nope.json")]) == 2
    assert capsys.readouterr().err.startswith("error[io_error]")


def _ledger_file(tmp_path: Path) -> Path:
    from gcfkit import ledger

    path = tmp_path / "ledger.jsonl"
    rec = ledger.LedgerRecord(
        server="git",
        tool="git_log",
        bytes_before=1000,
        bytes_after=400,
        tokens_before=300,
        tokens_after=120,
        encoding="o200k_base",
        decision="gcf",
        encode_ms=1.0,
    )
    assert ledger.Ledger(path).append(rec, time="2026-01-02T03:04:05.000Z")
    return path


@pytest.mark.parametrize(
    ("argv", "data", "tty"),
    [
        ([], b"", True),  # no input on a terminal
        ([], b"  \n", False),  # empty pipe
        (["--ledger"], b"[1]", False),  # forced
    ],
)
def test_ledger_view(
    argv: list[str],
    data: bytes,
    tty: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _ledger_file(tmp_path)
    _stdin(monkeypatch, data, tty=tty)
    assert main(["stats", *argv, "--ledger-file", str(path), "--json"]) == 0
    out = _json_out(capsys)
    assert out["total"]["calls"] == 1
    assert out["total"]["tokens_saved"] == 180


def test_ledger_view_table_and_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _ledger_file(tmp_path)
    _stdin(monkeypatch, b"", tty=True)
    assert main(["stats", "--ledger-file", str(path)]) == 0
    assert "git_log" in capsys.readouterr().out
    assert main(["stats", "--ledger-file", str(path), "--since", "2026-06-01", "--json"]) == 0
    assert _json_out(capsys)["total"]["calls"] == 0


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_savings_table_folds_names_never_numbers(tmp_path: Path, width: int) -> None:
    from rich.console import Console

    from gcfkit import ledger
    from gcfkit.measure.savings import summarize

    path = tmp_path / "ledger.jsonl"
    for tool, before, after in [("read_graph", 139220, 65870), ("get_file_text_by_path", 9, 9)]:
        rec = ledger.LedgerRecord(
            server="memory-server-npm",
            tool=tool,
            bytes_before=before * 3,
            bytes_after=after * 3,
            tokens_before=before,
            tokens_after=after,
            encoding="o200k_base",
            decision="gcf",
            encode_ms=1.0,
        )
        assert ledger.Ledger(path).append(rec, time="2026-01-02T03:04:05.000Z")
    buf = io.StringIO()
    summary = summarize(ledger.read_entries(path))
    stats_cli.render_summary(summary, console=Console(file=buf, width=width))
    out = buf.getvalue()
    assert "tokens → gcfkit" in out
    assert "139,220 → 65,870" in out
    assert "139,229 → 65,879" in out  # the total


def test_every_decision_the_proxy_writes_is_explained() -> None:
    """The ledger's words and fallback reasons are Literals (mypy checks what the proxy
    writes); the dashboard explains each one, so a new one cannot go unexplained."""
    from typing import get_args

    from gcfkit.answers.choose import FailureReason, FallbackReason, fallback_word
    from gcfkit.measure.savings import describe_decision
    from gcfkit.proxy.record import LedgerWord

    for word in get_args(LedgerWord):
        assert describe_decision(word) != word, word
    for reason in (*get_args(FallbackReason), *get_args(FailureReason)):
        assert not describe_decision(fallback_word(reason)).startswith("a fallback:"), reason


def test_stats_file_shows_the_dense_form_and_the_uis_sign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The proxy sends the dense profile where it is fewest tokens: stats shows it too, and a
    # form with fewer tokens than compact JSON reads "−13.4%", as on the page, never "+13.4%".
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(ROWS, indent=2))
    assert main(["stats", str(path), "--json"]) == 0
    out = _json_out(capsys)
    by_name = {f["format"]: f for f in out["formats"]}
    assert by_name["gcf-ext"]["lossless"] is True
    assert main(["stats", str(path)]) == 0
    table = capsys.readouterr().out
    compact = by_name["json-compact"]["tokens"]["o200k_base"]
    for name, label in (("gcf", "GCF "), ("gcf-ext", "GCF dense")):
        fewer = 1 - by_name[name]["tokens"]["o200k_base"] / compact
        assert fewer > 0
        line = next(x for x in table.splitlines() if x.strip().startswith(label))
        assert f"−{fewer:.1%}" in line and f"+{fewer:.1%}" not in line


def _ledger_of(path: Path, rows: list[tuple[str, str, int, int, str]]) -> Any:
    from gcfkit import ledger
    from gcfkit.measure.savings import summarize

    for server, tool, before, after, decision in rows:
        rec = ledger.LedgerRecord(
            server, tool, before * 3, after * 3, before, after, "o200k_base", decision, 1.0
        )
        assert ledger.Ledger(path).append(rec, time="2026-01-02T03:04:05.000Z")
    return summarize(ledger.read_entries(path))


def test_the_savings_table_at_80_columns_never_cuts_a_name(tmp_path: Path) -> None:
    from rich.console import Console

    summary = _ledger_of(
        tmp_path / "ledger.jsonl",
        [
            ("memory-server-npm", "read_graph", 139220, 65870, "gcf"),
            ("memory-server-npm", "get_file_text_by_path", 9, 9, "unchanged"),
            ("serena", "find_symbol", 2000, 1500, "dense"),
        ],
    )
    buf = io.StringIO()
    stats_cli.render_summary(summary, console=Console(file=buf, width=80))
    out = buf.getvalue()
    words = {w for line in out.splitlines() for w in line.replace("│", " ").split()}
    for name in ("memory-server-npm", "read_graph", "get_file_text_by_path", "find_symbol"):
        assert name in words, out
    assert "−52.7%" in out and "−25.0%" in out and "±0%" in out


def test_a_result_larger_by_its_ref_block_says_why(tmp_path: Path) -> None:
    from rich.console import Console

    summary = _ledger_of(
        tmp_path / "ledger.jsonl",
        [("git", "git_diff", 515, 519, "unchanged"), ("git", "git_log", 900, 400, "gcf")],
    )
    t = summary.tools["git", "git_diff"]
    assert t.named == 1 and t.ref_tokens == 4
    assert summary.tools["git", "git_log"].why_larger() is None
    buf = io.StringIO()
    stats_cli.render_summary(summary, console=Console(file=buf, width=100))
    out = buf.getvalue()
    assert "+0.8% †" in out
    assert "† git_diff is larger by its ref= handle (4 tokens)" in out
    assert "_since" in out
