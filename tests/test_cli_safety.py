"""What the command line shows is safe and whole: server-chosen names are text (no rich
markup, no terminal escapes: spec §17), odd ledger times do not crash the views, numbers are
never cut, and the help says what the commands take."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from gcfkit.cli import main
from gcfkit.cli import stats as stats_cli
from gcfkit.ledger import Ledger, LedgerRecord, parse_time, read_entries

HOSTILE = [
    "[/bold]",
    "[link=https://example.invalid]click me[/link]",
    "red\x1b[31mtext\x1b[0m",
    "title\x1b]0;owned\x07",
    "bidi\u202eevil",
    "[bold red]loud",
]


def _ledger(tmp_path: Path, names: list[str]) -> Path:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    for i, name in enumerate(names):
        rec = LedgerRecord(name, name, 100 + i, 50, 40, 20, "o200k_base", "gcf", 1.0)
        assert led.append(rec, time="2026-01-02T03:04:05.000Z")
    return path


def _no_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    monkeypatch.setattr(stats_cli, "_stdin_is_tty", lambda: True)


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_stats_shows_server_chosen_names_as_plain_text(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    terminal: bool,
) -> None:
    path = _ledger(tmp_path, HOSTILE)
    _no_stdin(monkeypatch)
    monkeypatch.setenv("COLUMNS", "200")
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("NO_COLOR", "1")
    # Before: rich.errors.MarkupError on "[/bold]", every time, until the ledger was edited.
    assert main(["stats", "--ledger-file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[/bold]" in out and "[bold red]loud" in out
    assert "[link=https://example.invalid]click" in out  # shown, not made a link
    assert "red\\x1b[31mtext" in out and "title\\x1b]0;owned\\x07" in out
    assert "bidi\\u202eevil" in out
    assert "\u202e" not in out and "\x07" not in out and "owned\x07" not in out
    if not terminal:
        assert "\x1b" not in out


def test_a_ledger_time_before_year_1_in_utc_is_a_corrupt_line_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _ledger(tmp_path, ["good"])
    line = json.loads(path.read_text())
    line["time"] = "0001-01-01T00:00:00+01:00"
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    with pytest.raises(ValueError):
        parse_time("0001-01-01T00:00:00+01:00")
    entries = read_entries(path)
    assert (len(entries), entries.corrupt) == (1, 1)
    _no_stdin(monkeypatch)
    assert main(["stats", "--ledger-file", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["corrupt_lines"] == 1
    assert main(["stats", "--ledger-file", str(path)]) == 0
    assert "1 corrupt ledger line(s) skipped" in capsys.readouterr().out


def test_mcp_status_shows_config_names_and_commands_as_plain_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "evil\x1b]0;owned\x07": {"command": "uvx\x1b[2J", "args": []},
        "[bold]x": {"command": "npx", "args": []},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    assert main(["mcp-status", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;owned\\x07" in out and "uvx\\x1b[2J" in out and "[bold]x" in out


def test_mcp_status_help_names_only_what_it_takes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["mcp-status", "--help"])
    out = capsys.readouterr().out
    assert "NAME" not in out  # it takes no server name


@pytest.mark.parametrize("columns", ["40", "60", "200"])
@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_stats_file_never_cuts_a_number(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    columns: str,
    terminal: bool,
) -> None:
    value = [{"id": i, "name": f"item {i}", "price": i * 1.5} for i in range(3000)]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(value, indent=2))
    assert main(["stats", str(path), "--json"]) == 0
    formats = json.loads(capsys.readouterr().out)["formats"]
    monkeypatch.setenv("COLUMNS", columns)
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("NO_COLOR", "1")
    assert main(["stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "…" not in out.split("saved:")[0].split("\n", 1)[1]  # the title may be cut
    for f in formats:
        if f.get("bytes"):
            assert f"{f['bytes']:,}" in out
            assert f"{f['tokens']['o200k_base']:,}" in out


def test_proxy_help_shows_the_session_opt_out_the_sdks_accept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["proxy", "--help"])
    out = capsys.readouterr().out
    # TypeScript-SDK servers reject a string under capabilities.experimental in initialize.
    assert '{"experimental": {"output_format": "json"}}' not in out
    assert '"output_format": {"format": "json"}' in out


_FULL_DISK = r"""
import resource, signal, sys
from gcfkit.ledger import Ledger, LedgerRecord

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails, not kills
path = sys.argv[1]
led = Ledger(path)


def record(tool):
    return LedgerRecord("srv", tool, 1000, 400, 300, 120, "o200k_base", "gcf", 1.0)


assert led.append(record("first"), time="2026-01-02T03:04:05.000Z")
size = len(open(path, "rb").read())
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 30, hard))  # the disk fills mid-line
kept = led.append(record("torn"), time="2026-01-02T03:04:06.000Z")
torn = open(path, "rb").read()
assert len(torn) == size + 30, len(torn)  # a real short write happened
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
assert led.append(record("after"), time="2026-01-02T03:04:07.000Z")
print(len(torn) - size, kept)
"""


def test_a_short_write_on_a_full_disk_does_not_swallow_the_next_record(tmp_path: Path) -> None:
    import os
    import subprocess

    resource = pytest.importorskip("resource")
    if resource.getrlimit(resource.RLIMIT_FSIZE)[1] != resource.RLIM_INFINITY:
        pytest.skip("needs an unlimited hard RLIMIT_FSIZE to lift the limit again")
    path = tmp_path / "ledger.jsonl"
    src = str(Path(__file__).resolve().parents[1] / "src")
    environment = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    entries = read_entries(path)
    assert [e.record.tool for e in entries] == ["first", "after"]
    assert entries.corrupt == 1  # the torn line is one corrupt line, on its own
    assert done.stdout.split() == ["30", "False"]  # and its append said it was dropped
