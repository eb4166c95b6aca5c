"""install-mcp / uninstall-mcp / mcp-status on temporary configs (never the real home)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from gcfkit.cli import main
from gcfkit.clients.entries import is_http_entry, split_wrapped, unwrap_entry, wrap_entry
from gcfkit.clients.install import apply_plans, install_mcp, plan_install, uninstall_mcp
from gcfkit.clients.locations import (
    claude_desktop_config_path,
    known_locations,
    locations_for_file,
    select_locations,
)
from gcfkit.clients.status import mcp_status
from gcfkit.errors import ConfigError

LAUNCHER = "/opt/gcfkit/bin/gcfkit"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake HOME, state dir and project directory (the current directory)."""
    h = tmp_path / "home"
    h.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("GCFKIT_STATE_DIR", str(tmp_path / "state"))
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "CLAUDE_CONFIG_DIR", "APPDATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.chdir(project)
    return h


def state(home: Path) -> Path:
    return home.parent / "state"


def project(home: Path) -> Path:
    return home.parent / "project"


def write(path: Path, data: Any, indent: int | str | None = 2, newline: bool = True) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=indent, ensure_ascii=False) + ("\n" if newline else "")
    path.write_bytes(text.encode("utf-8"))
    return path.read_bytes()


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def servers(path: Path, *keys: str) -> dict[str, Any]:
    node: Any = json.loads(path.read_text(encoding="utf-8-sig"))
    for key in (*keys, "mcpServers"):
        node = node[key]
    assert isinstance(node, dict)
    return node


CLAUDE = {
    "numStartups": 12,
    "theme": "dark",
    "mcpServers": {
        "time": {
            "type": "stdio",
            "command": "uvx",
            "args": ["mcp-server-time", "--local-timezone=Europe/Paris"],
            "env": {"TOKEN": "s3cr\u00e9t"},
            "x-unknown": {"nested": [1, 2.5, None, True]},
        },
        "remote": {"type": "http", "url": "https://example.invalid/mcp"},
        "bare": {"command": "my-server"},
    },
    "projects": {},
    "zLast": "é",
}


def claude_config(home: Path) -> Path:
    data = json.loads(json.dumps(CLAUDE))
    data["projects"] = {
        str(project(home)): {"allowedTools": ["x"], "mcpServers": {"git": {"command": "g"}}}
    }
    path = home / ".claude.json"
    write(path, data)
    return path


# --- pure helpers -----------------------------------------------------------------------


def test_wrap_entry_keeps_every_other_field_and_order() -> None:
    entry = {"args": ["a"], "env": {"K": "v"}, "command": "srv", "cwd": "/w", "zz": [1]}
    wrapped = wrap_entry(entry, [LAUNCHER], ["--delta"])
    assert list(wrapped) == ["args", "env", "command", "cwd", "zz"]
    assert wrapped["command"] == LAUNCHER
    assert wrapped["args"] == ["proxy", "--delta", "--", "srv", "a"]
    assert {k: wrapped[k] for k in ("env", "cwd", "zz")} == {
        "env": {"K": "v"},
        "cwd": "/w",
        "zz": [1],
    }
    assert entry["args"] == ["a"]  # not mutated


def test_wrap_entry_without_args_and_python_launcher() -> None:
    wrapped = wrap_entry({"command": "srv", "env": {}}, ["/py", "-m", "gcfkit.cli"])
    assert list(wrapped) == ["command", "args", "env"]
    assert wrapped["command"] == "/py"
    assert wrapped["args"] == ["-m", "gcfkit.cli", "proxy", "--", "srv"]
    parts = split_wrapped(wrapped)
    assert parts is not None and parts.launcher == ("/py", "-m", "gcfkit.cli")
    assert unwrap_entry(wrapped, parts, keep_empty_args=False) == {"command": "srv", "env": {}}


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "uvx", "args": ["proxy", "--", "x"]},  # not gcfkit
        {"command": "gcfkit", "args": ["encode", "--", "x"]},
        {"command": "gcfkit", "args": ["proxy", "x"]},  # no --
        {"command": "gcfkit", "args": ["proxy", "--"]},  # nothing to run
        {"command": "gcfkit", "args": "proxy -- x"},
        {"args": ["proxy", "--", "x"]},
    ],
)
def test_split_wrapped_rejects_non_wrappers(entry: dict[str, Any]) -> None:
    assert split_wrapped(entry) is None


def test_split_wrapped_windows_exe_and_custom_launcher() -> None:
    e = {"command": "C:\\gcf\\GCFKIT.EXE", "args": ["proxy", "--", "srv", "--", "y"]}
    parts = split_wrapped(e)
    assert parts is not None and (parts.command, parts.args) == ("srv", ("--", "y"))
    custom = {"command": "/x/wrapper", "args": ["proxy", "--", "srv"]}
    assert split_wrapped(custom) is None
    assert split_wrapped(custom, [["/x/wrapper"]]) is not None


def test_is_http_entry() -> None:
    assert is_http_entry({"url": "https://example.invalid"})
    assert is_http_entry({"type": "sse", "url": "u"})
    assert not is_http_entry({"command": "c"})
    assert not is_http_entry({"type": "stdio", "command": "c"})


# --- locations --------------------------------------------------------------------------


def test_claude_desktop_config_path_per_os(tmp_path: Path) -> None:
    h = tmp_path
    name = "claude_desktop_config.json"
    assert claude_desktop_config_path(h, {}, "darwin") == (
        h / "Library" / "Application Support" / "Claude" / name
    )
    assert claude_desktop_config_path(h, {"APPDATA": str(h / "AD")}, "win32") == (
        h / "AD" / "Claude" / name
    )
    assert claude_desktop_config_path(h, {}, "win32") == h / "AppData" / "Roaming" / "Claude" / name
    assert claude_desktop_config_path(h, {}, "linux") == h / ".config" / "Claude" / name
    xdg = {"XDG_CONFIG_HOME": str(h / "cfg")}
    assert claude_desktop_config_path(h, xdg, "linux") == h / "cfg" / "Claude" / name


def test_known_locations(tmp_path: Path) -> None:
    h, p = tmp_path / "h", tmp_path / "p"
    locs = known_locations(home=h, cwd=p, env={}, platform="darwin")
    got = [(loc.client, loc.scope, loc.path, loc.project) for loc in locs]
    assert got == [
        ("claude-code", "user", h / ".claude.json", None),
        ("claude-code", "local", h / ".claude.json", str(p)),
        ("claude-code", "project", p / ".mcp.json", None),
        ("cursor", "user", h / ".cursor" / "mcp.json", None),
        ("cursor", "project", p / ".cursor" / "mcp.json", None),
        (
            "claude-desktop",
            "user",
            h / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json",
            None,
        ),
        ("codex", "user", h / ".codex" / "config.toml", None),
        ("codex", "project", p / ".codex" / "config.toml", None),
        (
            "vscode",
            "user",
            h / "Library" / "Application Support" / "Code" / "User" / "mcp.json",
            None,
        ),
        ("vscode", "project", p / ".vscode" / "mcp.json", None),
        ("gemini", "user", h / ".gemini" / "settings.json", None),
        ("gemini", "project", p / ".gemini" / "settings.json", None),
        ("opencode", "user", h / ".config" / "opencode" / "opencode.json", None),
        ("opencode", "project", p / "opencode.json", None),
    ]
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    assert known_locations(home=h, cwd=p, env=env)[0].path == tmp_path / "cc" / ".claude.json"


def test_select_locations_filters_and_validates(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"home": tmp_path, "cwd": tmp_path, "env": {}}
    assert {loc.client for loc in select_locations(client="cursor", **kw)} == {"cursor"}
    assert {loc.scope for loc in select_locations(scope="project", **kw)} == {"project"}
    assert len(select_locations(client="all", **kw)) == 14
    with pytest.raises(ConfigError) as e:
        select_locations(client="vim", **kw)
    assert e.value.code == "invalid_option"
    f = locations_for_file(tmp_path / ".cursor" / "mcp.json", cwd=tmp_path)
    assert [(loc.client, loc.scope) for loc in f] == [("cursor", "user"), ("cursor", "local")]


# --- install / uninstall round trips ----------------------------------------------------


def test_round_trip_is_byte_identical(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    rc, out, _ = run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0 and "wrapped 'time'" in out
    entry = servers(path)["time"]
    assert entry["command"] == LAUNCHER
    assert entry["args"] == [
        "proxy",
        "--name",
        "time",
        "--",
        "uvx",
        "mcp-server-time",
        "--local-timezone=Europe/Paris",
    ]
    before = json.loads(original)
    after = json.loads(path.read_bytes())
    # Everything but command/args of that one entry is untouched, in the same order.
    assert list(after) == list(before)
    assert list(after["mcpServers"]["time"]) == list(before["mcpServers"]["time"])
    for key in ("type", "env", "x-unknown"):
        assert after["mcpServers"]["time"][key] == before["mcpServers"]["time"][key]
    after["mcpServers"]["time"] = before["mcpServers"]["time"]
    assert after == before
    rc, out, _ = run(["uninstall-mcp", "time"], capsys)
    assert rc == 0 and "restored" in out
    assert path.read_bytes() == original


@pytest.mark.parametrize(
    "style",
    ["indent4", "tab", "crlf", "no-final-newline", "bom", "ascii-escapes", "compact"],
)
def test_round_trip_keeps_the_file_style(
    home: Path, style: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {"mcpServers": {"s": {"command": "c", "args": ["é"]}}, "other": [1, {"k": "ü"}]}
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    if style == "indent4":
        text = json.dumps(data, indent=4, ensure_ascii=False) + "\n"
    elif style == "tab":
        text = json.dumps(data, indent="\t", ensure_ascii=False) + "\n"
    elif style == "crlf":
        text = json.dumps(data, indent=2, ensure_ascii=False).replace("\n", "\r\n") + "\r\n"
    elif style == "no-final-newline":
        text = json.dumps(data, indent=2, ensure_ascii=False)
    elif style == "bom":
        text = "\ufeff" + json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    elif style == "ascii-escapes":
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    path.write_bytes(text.encode("utf-8"))
    assert run(["install-mcp", "s", "--gcfkit", LAUNCHER], capsys)[0] == 0
    wrapped_text = path.read_bytes().decode("utf-8")
    assert wrapped_text.startswith("\ufeff") == (style == "bom")
    assert ("\r\n" in wrapped_text) == (style == "crlf")
    assert servers(path)["s"]["command"] == LAUNCHER
    assert run(["uninstall-mcp", "s"], capsys)[0] == 0
    assert path.read_bytes() == text.encode("utf-8")


# How people write configs by hand (and how the clients' own docs show them): short arrays and
# objects on one line, aligned values, blank lines. No json.dumps layout reproduces that.
HAND_WRITTEN = """{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    },

    "time":   { "command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "Europe/Paris"} }
  },
  "globalShortcut": "",
  "preferences": {"theme": "dark", "sizes": [1, 2.50, 1e3]}
}
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_round_trip_of_a_hand_written_file_touches_only_the_entry(
    home: Path, newline: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    text = HAND_WRITTEN.replace("\n", newline)
    path.write_bytes(text.encode("utf-8"))
    assert run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)[0] == 0
    wrapped = path.read_bytes().decode("utf-8")
    assert servers(path)["time"]["args"] == [
        "proxy",
        "--name",
        "time",
        "--",
        "uvx",
        "mcp-server-time",
    ]
    # Only the wrapped entry's command and args changed; every other byte is where it was.
    head, _, tail = text.partition('"command": "uvx", "args": ["mcp-server-time"]')
    assert wrapped.startswith(head) and wrapped.endswith(tail)
    assert wrapped[len(head) : len(wrapped) - len(tail)] == (
        f'"command": "{LAUNCHER}", '
        '"args": ["proxy", "--name", "time", "--", "uvx", "mcp-server-time"]'
    )
    assert run(["uninstall-mcp", "time"], capsys)[0] == 0
    assert path.read_bytes() == text.encode("utf-8")


def test_install_is_idempotent(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = claude_config(home)
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    once = path.read_bytes()
    rc, out, _ = run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0 and "already wrapped" in out
    assert path.read_bytes() == once
    # Even when started differently, a gcfkit wrapper is recognised.
    rc, out, _ = run(["install-mcp", "time", "--gcfkit", "/py -m gcfkit.cli"], capsys)
    assert "already wrapped" in out and path.read_bytes() == once
    assert servers(path)["time"]["args"].count("proxy") == 1


def test_proxy_args_and_rewrap_then_exact_restore(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    run(["install-mcp", "time", "--gcfkit", LAUNCHER, "--proxy-arg=--delta"], capsys)
    assert servers(path)["time"]["args"][:5] == ["proxy", "--name", "time", "--delta", "--"]
    rc, out, _ = run(["install-mcp", "time", "--proxy-arg=--x", "--proxy-arg=1"], capsys)
    assert rc == 0 and "updated the proxy options" in out
    args = servers(path)["time"]["args"]
    assert args[:6] == ["proxy", "--name", "time", "--x", "1", "--"]
    assert servers(path)["time"]["command"] == LAUNCHER  # the launcher is kept
    # Without --proxy-arg, a wrapped server keeps its options.
    run(["install-mcp", "time"], capsys)
    assert servers(path)["time"]["args"] == args
    assert run(["uninstall-mcp", "time"], capsys)[0] == 0
    assert path.read_bytes() == original


def test_name_option(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = claude_config(home)
    run(["install-mcp", "bare", "--no-name", "--gcfkit", LAUNCHER], capsys)
    assert servers(path)["bare"]["args"] == ["proxy", "--", "my-server"]
    # An explicit --name wins over the config's name.
    run(["install-mcp", "bare", "--proxy-arg=--name=b2"], capsys)
    assert servers(path)["bare"]["args"] == ["proxy", "--name=b2", "--", "my-server"]


def test_entry_without_args_is_restored_without_args(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    run(["install-mcp", "bare", "--gcfkit", LAUNCHER], capsys)
    assert servers(path)["bare"] == {
        "command": LAUNCHER,
        "args": ["proxy", "--name", "bare", "--", "my-server"],
    }
    run(["uninstall-mcp", "bare"], capsys)
    assert path.read_bytes() == original


def test_backup_is_made_before_writing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    _, out, _ = run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    backups = list((state(home) / "backups").rglob(".claude.json"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == original
    assert str(backups[0]) in out
    assert backups[0].relative_to(state(home) / "backups").parts[1:] == path.parts[1:]


def test_file_mode_and_symlink_are_kept(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = home / "dotfiles" / "claude.json"
    write(real, CLAUDE)
    os.chmod(real, 0o640)
    link = home / ".claude.json"
    link.symlink_to(real)
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    assert link.is_symlink()
    assert servers(real)["time"]["command"] == LAUNCHER
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    leftovers = [p.name for p in real.parent.iterdir() if p.name != "claude.json"]
    assert leftovers == []
    records = state(home) / "installed.json"
    assert stat.S_IMODE(os.stat(records).st_mode) == 0o600


def test_dry_run_prints_diff_and_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    rc, out, _ = run(["install-mcp", "time", "--dry-run", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0
    assert '-      "command": "uvx",' in out
    assert f'+      "command": "{LAUNCHER}",' in out
    assert "nothing was written" in out
    assert path.read_bytes() == original
    assert not state(home).exists()
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    wrapped = path.read_bytes()
    rc, out, _ = run(["uninstall-mcp", "time", "--dry-run"], capsys)
    assert rc == 0 and '+      "command": "uvx",' in out
    assert path.read_bytes() == wrapped


def test_uninstall_unwrapped_server_is_a_clear_no_op(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    rc, out, _ = run(["uninstall-mcp", "time"], capsys)
    assert rc == 0 and "is not wrapped" in out and "nothing to do" in out
    assert path.read_bytes() == original
    assert not state(home).joinpath("backups").exists()


def test_uninstall_after_the_wrapper_was_edited(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    data = json.loads(path.read_text(encoding="utf-8"))
    entry = data["mcpServers"]["time"]
    entry["env"]["NEW"] = "1"
    entry["args"][-1] = "--local-timezone=UTC"
    write(path, data)
    rc, out, _ = run(["uninstall-mcp", "time"], capsys)
    assert rc == 0 and "unwrapped" in out
    got = servers(path)["time"]
    assert got["command"] == "uvx"
    assert got["args"] == ["mcp-server-time", "--local-timezone=UTC"]
    assert got["env"] == {"TOKEN": "s3cr\u00e9t", "NEW": "1"}
    assert list(got) == list(CLAUDE["mcpServers"]["time"])  # type: ignore[index]


def test_uninstall_without_the_sidecar_unwraps(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    (state(home) / "installed.json").unlink()
    rc, out, _ = run(["uninstall-mcp", "time"], capsys)
    assert rc == 0 and "unwrapped" in out
    assert path.read_bytes() == original


def test_corrupt_sidecar_is_ignored_with_a_warning(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    (state(home) / "installed.json").write_text("{oops")
    rc, _, err = run(["uninstall-mcp", "time"], capsys)
    assert rc == 0 and "warning" in err
    assert path.read_bytes() == original


def test_uninstall_removes_the_record(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claude_config(home)
    run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    records = json.loads((state(home) / "installed.json").read_text())
    assert [r["name"] for r in records["servers"]] == ["time"]
    assert records["servers"][0]["original"] == CLAUDE["mcpServers"]["time"]  # type: ignore[index]
    run(["uninstall-mcp", "time"], capsys)
    assert json.loads((state(home) / "installed.json").read_text())["servers"] == []


# --- scopes, clients, ambiguity ---------------------------------------------------------


def test_local_scope_in_claude_json(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = claude_config(home)
    original = path.read_bytes()
    rc, out, _ = run(["install-mcp", "git", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0 and "(local)" in out
    proj = str(project(home))
    assert servers(path, "projects", proj)["git"]["args"] == ["proxy", "--name", "git", "--", "g"]
    assert servers(path)["time"]["command"] == "uvx"
    run(["uninstall-mcp", "git"], capsys)
    assert path.read_bytes() == original


def test_ambiguous_without_client(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"mcpServers": {"s": {"command": "c"}}}
    cursor = home / ".cursor" / "mcp.json"
    cursor_bytes = write(cursor, entry)
    dot_mcp = project(home) / ".mcp.json"
    mcp_bytes = write(dot_mcp, entry)
    rc, _, err = run(["install-mcp", "s", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "error[ambiguous_server]" in err
    assert str(cursor) in err and str(dot_mcp) in err
    assert cursor.read_bytes() == cursor_bytes and dot_mcp.read_bytes() == mcp_bytes
    # --scope narrows it to one.
    assert run(["install-mcp", "s", "--scope", "user", "--gcfkit", LAUNCHER], capsys)[0] == 0
    assert servers(cursor)["s"]["command"] == LAUNCHER
    assert dot_mcp.read_bytes() == mcp_bytes
    # Uninstall only counts wrapped copies, so it is not ambiguous.
    rc, out, _ = run(["uninstall-mcp", "s"], capsys)
    assert rc == 0 and "restored" in out and cursor.read_bytes() == cursor_bytes


def test_client_all_wraps_every_copy(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"mcpServers": {"s": {"command": "c"}}}
    cursor = home / ".cursor" / "mcp.json"
    desktop = home / ".config" / "Claude" / "claude_desktop_config.json"
    originals = {p: write(p, entry) for p in (cursor, desktop)}
    rc, out, _ = run(["install-mcp", "s", "--client", "all", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0 and out.count("wrapped 's'") == 2
    assert all(servers(p)["s"]["command"] == LAUNCHER for p in originals)
    rc, _, _ = run(["install-mcp", "s", "--client", "claude-code"], capsys)
    assert rc == 2  # not in Claude Code's configs
    rc, _, _ = run(["uninstall-mcp", "s", "--client", "all"], capsys)
    assert rc == 0
    assert all(p.read_bytes() == b for p, b in originals.items())


def test_client_filter(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"mcpServers": {"s": {"command": "c"}}}
    cursor = home / ".cursor" / "mcp.json"
    cursor_bytes = write(cursor, entry)
    dot_mcp = project(home) / ".mcp.json"
    write(dot_mcp, entry)
    rc, _, _ = run(["install-mcp", "s", "--client", "claude-code", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0
    assert servers(dot_mcp)["s"]["command"] == LAUNCHER
    assert cursor.read_bytes() == cursor_bytes


def test_server_not_found(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claude_config(home)
    rc, _, err = run(["install-mcp", "nope"], capsys)
    assert rc == 2 and "error[server_not_found]" in err and "nope" in err
    rc, _, err = run(["uninstall-mcp", "nope"], capsys)
    assert rc == 2 and "error[server_not_found]" in err


def test_a_legacy_sse_server_is_refused(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = home / ".cursor" / "mcp.json"
    write(path, {"mcpServers": {"old": {"type": "sse", "url": "https://example.invalid/sse"}}})
    original = path.read_bytes()
    rc, _, err = run(["install-mcp", "old"], capsys)
    assert rc == 2 and "error[unsupported_server]" in err and "Streamable HTTP" in err
    assert path.read_bytes() == original


REMOTE: dict[str, Any] = {
    "type": "http",
    "url": "https://example.invalid/mcp",
    "headers": {"Authorization": "Bearer ${TOKEN}", "X-Team": "a b"},
    "x-note": [1],
}


@pytest.mark.parametrize("client", ["claude-code", "cursor", "claude-desktop"])
def test_an_http_server_is_wrapped_and_restored_exactly(
    home: Path, client: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if client == "claude-code":
        path = claude_config(home)
        data = json.loads(path.read_text())
        data["mcpServers"]["remote"] = REMOTE
        write(path, data)
    elif client == "cursor":
        path = home / ".cursor" / "mcp.json"
        write(path, {"mcpServers": {"remote": {k: v for k, v in REMOTE.items() if k != "type"}}})
    else:
        path = home / ".config" / "Claude" / "claude_desktop_config.json"  # linux (fixture)
        write(path, {"mcpServers": {"remote": REMOTE}, "globalShortcut": ""})
    original = path.read_bytes()
    rc, _, err = run(["install-mcp", "remote", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0, err
    entry = servers(path)["remote"]
    assert "url" not in entry and "headers" not in entry
    assert entry["command"] == LAUNCHER
    assert entry["args"] == [
        "proxy",
        "--name",
        "remote",
        "--upstream",
        "https://example.invalid/mcp",
        "--header",
        "Authorization: Bearer ${TOKEN}",
        "--header",
        "X-Team: a b",
    ]
    assert entry.get("type", "stdio") == "stdio" and entry["x-note"] == [1]
    parts = split_wrapped(entry)
    assert parts is not None and parts.url == "https://example.invalid/mcp"
    assert dict(parts.headers) == REMOTE["headers"]
    # Installing again changes nothing; uninstalling gives the very bytes back.
    assert run(["install-mcp", "remote", "--gcfkit", LAUNCHER], capsys)[0] == 0
    assert servers(path)["remote"] == entry
    rc, _, err = run(["uninstall-mcp", "remote"], capsys)
    assert rc == 0, err
    assert path.read_bytes() == original


def test_an_edited_http_wrapper_is_unwrapped_from_what_is_there(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".cursor" / "mcp.json"
    write(path, {"mcpServers": {"remote": REMOTE}})
    assert run(["install-mcp", "remote", "--gcfkit", LAUNCHER], capsys)[0] == 0
    data = json.loads(path.read_text())
    data["mcpServers"]["remote"]["args"][-1] = "X-Team: c"
    write(path, data)
    assert run(["uninstall-mcp", "remote"], capsys)[0] == 0
    entry = servers(path)["remote"]
    assert entry == {**REMOTE, "headers": {**REMOTE["headers"], "X-Team": "c"}}


# --- malformed configs ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"mcpServers": {"s": {"command": "c",}}}',  # trailing comma
        '{\n  // a comment\n  "mcpServers": {"s": {"command": "c"}}\n}',
        '{"mcpServers": {"s": {"command": "c"}}, "mcpServers": {}}',
        '["mcpServers"]',
        '{"mcpServers": ["s"]}',
        '{"mcpServers": {"s": {"command": "c", "x": NaN}}}',
        '{"mcpServers": {"s": "c"}}',
        '{"mcpServers": {"s": {"command": "c", "args": "a b"}}}',
        '{"mcpServers": {"s": {"command": "c"}}',
    ],
)
def test_malformed_config_is_left_untouched(
    home: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / "custom.json"
    path.write_text(text, encoding="utf-8")
    rc, _, err = run(["install-mcp", "s", "--config", str(path)], capsys)
    assert rc == 2
    assert "error[malformed_config]" in err
    assert path.read_text(encoding="utf-8") == text
    assert not (state(home) / "backups").exists()


def test_invalid_utf8_config_is_malformed(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = home / ".claude.json"
    raw = b'{"mcpServers": {"s": {"command": "\xff"}}}'
    path.write_bytes(raw)
    rc, _, err = run(["install-mcp", "s"], capsys)
    assert rc == 2 and "error[malformed_config]" in err and "UTF-8" in err
    assert path.read_bytes() == raw


def test_malformed_other_config_blocks_until_left_out(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = home / ".cursor" / "mcp.json"
    broken.parent.mkdir()
    broken.write_text("{nope")
    path = claude_config(home)
    rc, _, err = run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "error[malformed_config]" in err and "--client" in err
    assert broken.read_text() == "{nope"
    rc, _, _ = run(["install-mcp", "time", "--client", "claude-code", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0 and servers(path)["time"]["command"] == LAUNCHER


def test_malformed_config_is_reported_by_status(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text("{nope")
    claude_config(home)
    rc, out, _ = run(["mcp-status"], capsys)
    assert rc == 0
    assert "malformed_config" in out and "time" in out


# --- explicit --config and API ----------------------------------------------------------


def test_config_override(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "elsewhere" / "servers.json"
    original = write(path, {"mcpServers": {"s": {"command": "c", "args": []}}, "keep": 1})
    rc, out, _ = run(["install-mcp", "s", "--config", str(path), "--gcfkit", LAUNCHER], capsys)
    assert rc == 0 and "custom (user)" in out
    assert servers(path)["s"]["args"] == ["proxy", "--name", "s", "--", "c"]
    assert run(["uninstall-mcp", "s", "--config", str(path)], capsys)[0] == 0
    assert path.read_bytes() == original


def test_api_with_explicit_env(tmp_path: Path) -> None:
    h = tmp_path / "h"
    env = {"HOME": str(h), "GCFKIT_STATE_DIR": str(tmp_path / "st")}
    path = h / ".cursor" / "mcp.json"
    original = write(path, {"mcpServers": {"s": {"command": "c"}}})
    plans = install_mcp("s", env=env, cwd=tmp_path, launcher=[LAUNCHER], platform="linux")
    assert [a.action for p in plans for a in p.actions] == ["wrapped"]
    assert plans[0].written and plans[0].backup is not None and plans[0].backup.exists()
    status = mcp_status(env=env, cwd=tmp_path, platform="linux")
    assert [(s.name, s.wrapped, s.command) for s in status] == [("s", True, "c")]
    plans = uninstall_mcp("s", env=env, cwd=tmp_path, platform="linux")
    assert [a.action for p in plans for a in p.actions] == ["restored"]
    assert path.read_bytes() == original


def test_concurrent_change_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    write(path, {"mcpServers": {"s": {"command": "c"}}})
    locs = locations_for_file(path, cwd=tmp_path)
    plans = plan_install("s", locs, explicit=True, launcher=[LAUNCHER], state=tmp_path / "st")
    changed = write(path, {"mcpServers": {"s": {"command": "c"}}, "added": "by the client"})
    with pytest.raises(ConfigError) as e:
        apply_plans(plans, state=tmp_path / "st")
    assert e.value.code == "io_error" and "changed" in e.value.detail
    assert path.read_bytes() == changed


# --- mcp-status -------------------------------------------------------------------------


def test_status_lists_wrapped_and_not(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claude_config(home)
    write(home / ".cursor" / "mcp.json", {"mcpServers": {"c1": {"command": "x"}}})
    run(["install-mcp", "time", "--gcfkit", LAUNCHER, "--proxy-arg=--delta"], capsys)
    rc, out, _ = run(["mcp-status"], capsys)
    assert rc == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "wrapped (--name time --delta)" in lines["time"] and "uvx" in lines["time"]
    assert "not wrapped" in lines["bare"]
    assert "http" in lines["remote"]
    assert "not wrapped" in lines["git"]
    assert "not wrapped" in lines["c1"]
    rc, out, _ = run(["mcp-status", "--json"], capsys)
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["time"]["wrapped"] is True and rows["time"]["proxy_args"] == [
        "--name",
        "time",
        "--delta",
    ]
    assert rows["git"]["scope"] == "local" and rows["c1"]["client"] == "cursor"
    rc, out, _ = run(["mcp-status", "--client", "cursor", "--json"], capsys)
    assert [r["name"] for r in json.loads(out)] == ["c1"]


def test_status_with_no_configs(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["mcp-status"], capsys)
    assert rc == 0 and "no MCP servers found" in out
