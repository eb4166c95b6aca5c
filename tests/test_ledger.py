"""The savings ledger: records, the file (writing, reading, --since), aggregation
(gcfkit.measure.savings) and rendering (gcfkit stats)."""

from __future__ import annotations

import io
import json
import os
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gcfkit.cli.stats import render_summary
from gcfkit.errors import ConfigError
from gcfkit.ledger import Ledger, LedgerEntry, parse_since, read_entries, utc_now_iso
from gcfkit.measure.savings import summarize, summary_to_json
from gcfkit.paths import default_ledger_path, state_dir
from gcfkit.proxy.record import LedgerRecord

T0 = "2026-01-02T03:04:05.000Z"


def rec(
    server: str = "git",
    tool: str = "git_log",
    before: int = 100,
    after: int = 40,
    decision: str = "gcf",
) -> LedgerRecord:
    return LedgerRecord(
        server=server,
        tool=tool,
        bytes_before=before * 4,
        bytes_after=after * 4,
        tokens_before=before,
        tokens_after=after,
        encoding="o200k_base",
        decision=decision,
        encode_ms=1.25,
    )


def entry(
    server: str = "git",
    tool: str = "git_log",
    before: int = 100,
    after: int = 40,
    decision: str = "gcf",
    time: str = T0,
) -> LedgerEntry:
    return LedgerEntry(time, rec(server, tool, before, after, decision))


# --- location ---------------------------------------------------------------------------


def test_state_dir_precedence(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert state_dir({"HOME": home}) == Path(home, ".local", "state", "gcfkit")
    xdg = str(tmp_path / "xdg")
    assert state_dir({"HOME": home, "XDG_STATE_HOME": xdg}) == Path(xdg, "gcfkit")
    own = str(tmp_path / "own")
    env = {"HOME": home, "XDG_STATE_HOME": xdg, "GCFKIT_STATE_DIR": own}
    assert state_dir(env) == Path(own)
    assert default_ledger_path(env) == Path(own, "ledger.jsonl")


def test_relative_xdg_state_home_is_ignored(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": "relative/dir"}
    assert state_dir(env) == tmp_path / ".local" / "state" / "gcfkit"


def test_ledger_default_path_follows_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GCFKIT_STATE_DIR", str(tmp_path / "state"))
    led = Ledger()
    assert led.path == tmp_path / "state" / "ledger.jsonl"
    assert led.append(rec())
    assert len(read_entries()) == 1


# --- records ----------------------------------------------------------------------------


def test_record_line_is_payload_free_and_round_trips() -> None:
    e = entry()
    line = e.to_json()
    assert "\n" not in line
    assert next(iter(json.loads(line))) == "time"
    assert set(json.loads(line)) == {
        "time",
        "server",
        "tool",
        "bytes_before",
        "bytes_after",
        "tokens_before",
        "tokens_after",
        "encoding",
        "decision",
        "encode_ms",
    }
    assert LedgerEntry.from_json(line) == e
    assert e.record.tokens_saved == 60 and e.record.bytes_saved == 240


def test_records_carry_no_wall_time_and_the_file_stamps_it(tmp_path: Path) -> None:
    r = LedgerRecord("s", "t", 1, 1, 1, 1, "o200k_base", "unchanged", 0.0)
    assert "time" not in r.to_dict()
    path = tmp_path / "ledger.jsonl"
    assert Ledger(path).append(r)
    assert Ledger(path).append(r, time=T0)
    stamped, given = read_entries(path)
    moment = datetime.strptime(stamped.time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert abs(datetime.now(timezone.utc) - moment) < timedelta(days=1)
    assert given.time == T0 and stamped.record == given.record == r
    assert utc_now_iso().endswith("Z")


@pytest.mark.parametrize(
    "patch",
    [
        {"server": 1},
        {"tokens_before": "10"},
        {"tokens_after": True},
        {"encode_ms": "fast"},
        {"time": "yesterday"},
    ],
)
def test_from_json_rejects_mistyped_fields(patch: dict[str, object]) -> None:
    data = json.loads(entry().to_json()) | patch
    with pytest.raises(ValueError):
        LedgerEntry.from_json(json.dumps(data))


def test_non_finite_timing_still_writes_valid_json() -> None:
    r = LedgerRecord("s", "t", 1, 1, 1, 1, "o200k_base", "gcf", float("nan"))
    assert json.loads(LedgerEntry("2026-01-01", r).to_json())["encode_ms"] == 0.0


def test_from_dict_ignores_unknown_fields() -> None:
    data = rec().to_dict() | {"future_field": [1, 2]}
    assert LedgerRecord.from_dict(data) == rec()


# --- writing ----------------------------------------------------------------------------


def test_append_one_line_per_record_and_creates_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "ledger.jsonl"
    led = Ledger(path)
    assert led.append(rec(tool="one"))
    assert led.append(rec(tool="two"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["tool"] for x in lines] == ["one", "two"]
    # Sizes of other people's tool calls are private too.
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_append_keeps_existing_content(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text(entry(tool="old").to_json() + "\n", encoding="utf-8")
    Ledger(path).append(rec(tool="new"))
    assert [e.record.tool for e in read_entries(path)] == ["old", "new"]


def test_append_failure_is_swallowed_with_one_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    warn = io.StringIO()
    # The ledger's directory is a regular file: every write fails.
    led = Ledger(blocker / "ledger.jsonl", warn_stream=warn)
    assert led.append(rec()) is False
    assert led.append(rec()) is False
    text = warn.getvalue()
    assert text.count("warning") == 1
    assert str(blocker / "ledger.jsonl") in text


def test_append_failure_survives_a_closed_warning_stream(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    stream = io.StringIO()
    stream.close()
    assert Ledger(blocker / "l.jsonl", warn_stream=stream).append(rec()) is False


# --- reading ----------------------------------------------------------------------------


def test_missing_ledger_reads_as_empty(tmp_path: Path) -> None:
    rs = read_entries(tmp_path / "nope.jsonl")
    assert list(rs) == [] and rs.corrupt == 0


def test_unreadable_ledger_is_an_io_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        read_entries(tmp_path)  # a directory
    assert e.value.code == "io_error"


def test_corrupt_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    good = entry().to_json()
    lines = [
        good,
        "{not json",
        "[1, 2]",
        json.dumps(json.loads(good) | {"tokens_before": None}),
        "",
        good[: len(good) // 2],  # a torn write
        good,
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe\n")
    rs = read_entries(path)
    assert len(rs) == 2
    assert rs.corrupt == 5
    s = summarize(rs)
    assert s.corrupt == 5
    assert summary_to_json(s)["corrupt_lines"] == 5


def test_since_filters_records(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    for day in (1, 5, 9):
        led.append(rec(tool=f"d{day}"), time=f"2026-01-0{day}T12:00:00.000Z")

    def tools(since: datetime) -> list[str]:
        return [e.record.tool for e in read_entries(path, since=since)]

    assert tools(datetime(2026, 1, 5, 12, tzinfo=timezone.utc)) == ["d5", "d9"]
    # A naive datetime means UTC.
    assert tools(datetime(2026, 1, 6)) == ["d9"]
    assert tools(parse_since("2026-01-02")) == ["d5", "d9"]


# --- parse_since ------------------------------------------------------------------------

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", NOW - timedelta(days=7)),
        ("24h", NOW - timedelta(hours=24)),
        ("30m", NOW - timedelta(minutes=30)),
        ("90s", NOW - timedelta(seconds=90)),
        ("2w", NOW - timedelta(weeks=2)),
        (" 3D ", NOW - timedelta(days=3)),
        ("2026-01-02", datetime(2026, 1, 2, tzinfo=timezone.utc)),
        ("2026-01-02T15:00:00Z", datetime(2026, 1, 2, 15, tzinfo=timezone.utc)),
        ("2026-01-02T15:00:00", datetime(2026, 1, 2, 15, tzinfo=timezone.utc)),
        ("2026-01-02T17:00:00+02:00", datetime(2026, 1, 2, 15, tzinfo=timezone.utc)),
    ],
)
def test_parse_since(text: str, expected: datetime) -> None:
    got = parse_since(text, now=NOW)
    assert got == expected
    assert got.utcoffset() == timedelta(0)


@pytest.mark.parametrize("text", ["", "7", "d7", "7y", "yesterday", "2026-13-01", "-7d"])
def test_parse_since_rejects_garbage(text: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_since(text, now=NOW)
    assert e.value.code == "invalid_option"


def test_parse_since_huge_age_clamps() -> None:
    assert parse_since("99999999999d", now=NOW).year == 1


# --- summarize --------------------------------------------------------------------------


def test_summarize_per_tool_server_and_total() -> None:
    entries = [
        entry("git", "git_log", 100, 40, "gcf", "2026-01-03T00:00:00.000Z"),
        entry("git", "git_log", 200, 60, "delta", "2026-01-01T00:00:00.000Z"),
        entry("git", "git_status", 50, 50, "unchanged", "2026-01-02T00:00:00.000Z"),
        entry("time", "now", 10, 12, "fallback:larger", "2026-01-04T00:00:00.000Z"),
    ]
    s = summarize(entries)
    assert s.total.calls == 4
    assert s.total.tokens_before == 360 and s.total.tokens_after == 162
    assert s.total.tokens_saved == 198
    assert s.total.token_savings == pytest.approx(198 / 360)
    assert s.total.bytes_saved == 198 * 4
    assert s.total.decisions == {"gcf": 1, "delta": 1, "unchanged": 1, "fallback:larger": 1}
    log = s.tools["git", "git_log"]
    assert (log.calls, log.tokens_saved, log.encode_ms) == (2, 200, 2.5)
    assert s.servers["git"].calls == 3 and s.servers["time"].tokens_saved == -2
    # Largest saving first.
    assert list(s.tools) == [("git", "git_log"), ("git", "git_status"), ("time", "now")]
    assert (s.first, s.last) == ("2026-01-01T00:00:00.000Z", "2026-01-04T00:00:00.000Z")
    assert s.encodings == ["o200k_base"]


def test_summarize_empty() -> None:
    s = summarize([])
    assert s.total.calls == 0 and s.total.token_savings == 0.0 and s.first is None


def test_summary_to_json_is_json() -> None:
    s = summarize([entry(), entry("time", "now", 10, 10, "unchanged")])
    data = json.loads(json.dumps(summary_to_json(s)))
    assert data["total"]["tokens_saved"] == 60
    assert data["total"]["token_savings"] == round(60 / 110, 4)
    assert [t["tool"] for t in data["tools"]] == ["git_log", "now"]
    assert data["servers"][0] == {"server": "git", **s.servers["git"].to_dict()}
    assert data["total"]["decisions"] == {"gcf": 1, "unchanged": 1}


# --- rendering --------------------------------------------------------------------------


def _render(entries: list[LedgerEntry], corrupt: int = 0) -> str:
    from rich.console import Console

    buf = io.StringIO()
    render_summary(summarize(entries, corrupt=corrupt), Console(file=buf, width=120))
    return buf.getvalue()


def test_render_summary_shows_tools_total_and_bars() -> None:
    out = _render([entry(), entry("time", "now", 10, 12, "fallback:larger")], corrupt=2)
    assert "git_log" in out and "now" in out and "total" in out
    assert "100 → 40" in out and "−60.0%" in out  # git_log: the page's sign, fewer tokens
    assert "10 → 12" in out and "+20.0%" in out  # now grew
    assert "█" in out
    assert "2 corrupt" in out


def test_render_summary_drops_the_bar_when_narrow() -> None:
    from rich.console import Console

    buf = io.StringIO()
    render_summary(summarize([entry()]), Console(file=buf, width=60))
    out = buf.getvalue()
    assert "git_log" in out and "█" not in out
    assert all(len(line) <= 60 for line in out.splitlines())


def test_render_summary_empty_ledger() -> None:
    assert "no tool results" in _render([])


def test_render_summary_without_rich_prints_plain_text(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_rich(name: str, *args: object, **kwargs: object) -> object:
        if name == "rich" or name.startswith("rich."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_rich)
    render_summary(summarize([entry()]))
    out = capsys.readouterr().out
    assert "git_log" in out and "60.0%" in out and "total" in out
