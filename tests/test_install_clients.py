"""install-mcp / uninstall-mcp / mcp-status / doctor for Codex, VS Code, Gemini CLI and
OpenCode, each in its own file format and entry shape, and several names in one call: every
config comes back byte for byte (never the real home: a fake HOME and state dir)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gcfkit.cli import main
from gcfkit.clients.install import install_mcp
from gcfkit.clients.jsondoc import blank_jsonc
from gcfkit.clients.locations import locations_for_file
from gcfkit.clients.shapes import CODEX, GEMINI, OPENCODE
from gcfkit.clients.status import mcp_status
from gcfkit.errors import ConfigError

pytest.importorskip("tomlkit")
# Read back by another TOML parser than the one that wrote it.
tomllib: Any = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

LAUNCHER = "/opt/gcfkit/bin/gcfkit"
ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "examples" / "demo_server.py")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("GCFKIT_STATE_DIR", str(tmp_path / "state"))
    for var in ("XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "APPDATA", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.chdir(project)
    return h


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def put(path: Path, text: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path.read_bytes()


def wrapped_args(name: str, *inner: str) -> list[str]:
    return ["proxy", "--name", name, "--", *inner]


# --- Codex: TOML, comments and layout kept ------------------------------------------------

CODEX_TOML = """\
# Codex settings, written by hand
model = "o4"  # the default model

[mcp_servers.git]
command = "uvx"   # the git server
args = [
    "mcp-server-git",
    "--repository", ".",  # this checkout
]
startup_timeout_sec = 20

[mcp_servers.git.env]
GIT_TOKEN = "s3cr\u00e9t"

[mcp_servers.bare]
command = "my-server"

[mcp_servers]
time = { command = "uvx", args = ['mcp-server-time'] }

[mcp_servers.remote]
url = "https://example.invalid/mcp"
http_headers = { "X-Team" = "core" }
tool_timeout_sec = 60.0

[mcp_servers.oauth]
url = "https://example.invalid/other"
bearer_token_env_var = "OTHER_TOKEN"

[profiles.fast]
model = "o4-mini"
"""


def test_codex_round_trip_keeps_comments_and_layout(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".codex" / "config.toml"
    original = put(path, CODEX_TOML)
    argv = ["install-mcp", "git", "bare", "remote", "time", "--gcfkit", LAUNCHER]
    rc, out, err = run(argv, capsys)
    assert rc == 0, err
    assert "wrapped 'git' in codex (user)" in out and "wrapped 'remote' in codex (user)" in out
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)["mcp_servers"]
    assert data["git"]["command"] == LAUNCHER
    assert data["git"]["args"] == wrapped_args("git", "uvx", "mcp-server-git", "--repository", ".")
    assert (
        data["git"]["env"] == {"GIT_TOKEN": "s3cr\u00e9t"}
        and data["git"]["startup_timeout_sec"] == 20
    )
    assert data["bare"] == {"command": LAUNCHER, "args": wrapped_args("bare", "my-server")}
    assert data["remote"] == {
        "tool_timeout_sec": 60.0,
        "command": LAUNCHER,
        "args": [
            "proxy",
            "--name",
            "remote",
            "--upstream",
            "https://example.invalid/mcp",
            "--header",
            "X-Team: core",
        ],
    }
    # The comments and every other line are where they were.
    for line in (
        "# Codex settings, written by hand",
        'model = "o4"  # the default model',
        "[profiles.fast]",
        "[mcp_servers.git.env]",
    ):
        assert line in text
    assert f'command = "{LAUNCHER}"   # the git server' in text
    status = {s.name: s for s in mcp_status(client="codex")}
    assert status["git"].wrapped and status["remote"].wrapped and not status["oauth"].wrapped
    assert data["time"]["args"] == wrapped_args("time", "uvx", "mcp-server-time")
    rc, out, _ = run(["uninstall-mcp", "git", "bare", "remote", "time"], capsys)
    assert rc == 0 and out.count("restored the original") == 4
    assert path.read_bytes() == original


def test_codex_refuses_a_server_that_authenticates_itself(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".codex" / "config.toml"
    original = put(path, CODEX_TOML)
    rc, _, err = run(["install-mcp", "oauth", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "bearer_token_env_var" in err and path.read_bytes() == original


def test_codex_home_and_a_malformed_toml(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    path = tmp_path / "codex" / "config.toml"
    broken = put(path, '[mcp_servers.git]\ncommand = "uvx"\ncommand = "twice"\n')
    rc, _, err = run(["install-mcp", "git", "--client", "codex", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "not valid TOML" in err and path.read_bytes() == broken


# --- VS Code: "servers", workspace and user profile ----------------------------------------

VSCODE = {
    "inputs": [{"type": "promptString", "id": "token", "description": "API token"}],
    "servers": {
        "time": {
            "type": "stdio",
            "command": "uvx",
            "args": ["mcp-server-time"],
            "env": {"TOKEN": "${input:token}"},
        },
        "remote": {"type": "http", "url": "https://example.invalid/mcp", "headers": {"K": "v"}},
    },
}


@pytest.mark.parametrize("scope", ["project", "user"])
def test_vscode_round_trip(home: Path, scope: str, capsys: pytest.CaptureFixture[str]) -> None:
    if scope == "project":
        path = Path.cwd() / ".vscode" / "mcp.json"
    else:
        path = home / ".config" / "Code" / "User" / "mcp.json"
    original = put(path, json.dumps(VSCODE, indent="\t") + "\n")
    rc, out, err = run(["install-mcp", "time", "remote", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0, err
    assert f"wrapped 'time' in vscode ({scope})" in out
    servers = json.loads(path.read_text())["servers"]
    assert servers["time"] == {
        "type": "stdio",
        "command": LAUNCHER,
        "args": wrapped_args("time", "uvx", "mcp-server-time"),
        "env": {"TOKEN": "${input:token}"},
    }
    assert servers["remote"]["type"] == "stdio" and "--upstream" in servers["remote"]["args"]
    assert path.read_text().startswith('{\n\t"inputs"')  # the file's own tab indent
    assert run(["uninstall-mcp", "time", "remote"], capsys)[0] == 0
    assert path.read_bytes() == original


# --- Gemini CLI: httpUrl is Streamable HTTP, url is SSE -----------------------------------

GEMINI_SETTINGS = {
    "theme": "Dracula",
    "mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git"], "cwd": "./repo", "trust": False},
        "remote": {
            "httpUrl": "https://example.invalid/mcp",
            "headers": {"Authorization": "Bearer ${TOKEN}"},
            "timeout": 30000,
        },
        "legacy": {"url": "https://example.invalid/sse"},
    },
}


def test_gemini_round_trip(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = home / ".gemini" / "settings.json"
    original = put(path, json.dumps(GEMINI_SETTINGS, indent=2) + "\n")
    rc, _, err = run(["install-mcp", "git", "remote", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0, err
    servers = json.loads(path.read_text())["mcpServers"]
    assert servers["git"] == {
        "command": LAUNCHER,
        "args": wrapped_args("git", "uvx", "mcp-server-git"),
        "cwd": "./repo",
        "trust": False,
    }
    assert servers["remote"] == {
        "command": LAUNCHER,
        "args": [
            "proxy",
            "--name",
            "remote",
            "--upstream",
            "https://example.invalid/mcp",
            "--header",
            "Authorization: Bearer ${TOKEN}",
        ],
        "timeout": 30000,
    }
    wrapped = path.read_bytes()
    rc, _, err = run(["install-mcp", "legacy", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "does not speak" in err and path.read_bytes() == wrapped
    assert run(["uninstall-mcp", "git", "remote"], capsys)[0] == 0
    assert path.read_bytes() == original


def test_gemini_unwraps_an_edited_remote_wrapper_to_httpurl() -> None:
    common = GEMINI.to_common({"httpUrl": "https://x/mcp", "timeout": 5})
    assert common == {"url": "https://x/mcp", "timeout": 5}
    assert GEMINI.from_common(common) == {"httpUrl": "https://x/mcp", "timeout": 5}
    assert GEMINI.to_common({"url": "https://x/sse"})["type"] == "sse"


# --- OpenCode: command is one array, mcp or mcp.servers -----------------------------------

OPENCODE_CONFIG = {
    "$schema": "https://opencode.ai/config.json",
    "mcp": {
        "memory": {
            "type": "local",
            "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
            "enabled": True,
            "environment": {"MEMORY_FILE_PATH": "/tmp/m.json"},
        },
        "sentry": {"type": "remote", "url": "https://example.invalid/mcp", "enabled": True},
    },
}


@pytest.mark.parametrize("nested", [False, True], ids=["mcp", "mcp.servers"])
def test_opencode_round_trip(home: Path, nested: bool, capsys: pytest.CaptureFixture[str]) -> None:
    data: dict[str, Any] = json.loads(json.dumps(OPENCODE_CONFIG))
    if nested:
        data["mcp"] = {"servers": data["mcp"]}
    path = Path.cwd() / "opencode.json"
    original = put(path, json.dumps(data, indent=2) + "\n")
    rc, out, err = run(["install-mcp", "memory", "sentry", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0, err
    assert "wrapped 'memory' in opencode (project)" in out
    mcp = json.loads(path.read_text())["mcp"]
    servers = mcp["servers"] if nested else mcp
    assert servers["memory"] == {
        "type": "local",
        "command": [
            LAUNCHER,
            *wrapped_args("memory", "npx", "-y", "@modelcontextprotocol/server-memory"),
        ],
        "enabled": True,
        "environment": {"MEMORY_FILE_PATH": "/tmp/m.json"},
    }
    assert servers["sentry"] == {
        "type": "local",
        "command": [
            LAUNCHER,
            "proxy",
            "--name",
            "sentry",
            "--upstream",
            "https://example.invalid/mcp",
        ],
        "enabled": True,
    }
    status = {s.name: s for s in mcp_status(client="opencode")}
    assert status["memory"].wrapped and status["memory"].command == "npx"
    # doctor starts it as OpenCode would: the environment is the entry's env.
    assert status["memory"].entry is not None
    assert status["memory"].entry["env"] == {"MEMORY_FILE_PATH": "/tmp/m.json"}
    assert run(["uninstall-mcp", "memory", "sentry"], capsys)[0] == 0
    assert path.read_bytes() == original


def test_opencode_shape_both_ways() -> None:
    own = {"type": "remote", "url": "https://x/mcp", "headers": {"K": "v"}, "enabled": False}
    common = OPENCODE.to_common(own)
    assert common == {
        "type": "http",
        "url": "https://x/mcp",
        "headers": {"K": "v"},
        "enabled": False,
    }
    assert OPENCODE.from_common(common) == own
    assert CODEX.to_common({"url": "u", "http_headers": {"K": "v"}}) == {
        "url": "u",
        "headers": {"K": "v"},
    }


def test_doctor_starts_an_opencode_entry_through_the_proxy(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path.cwd() / "opencode.json"
    config = {"mcp": {"demo": {"type": "local", "command": [sys.executable, DEMO]}}}
    put(path, json.dumps(config, indent=2) + "\n")
    launcher = f"--gcfkit={sys.executable} -m gcfkit.cli"
    assert run(["install-mcp", "demo", launcher], capsys)[0] == 0
    rc, out, _ = run(["doctor", "demo", "--client", "opencode"], capsys)
    assert rc == 0, out
    assert "✓ demo: wrapped, gcfkit-demo 1.0 answered initialize and tools/list" in out


# --- several names in one call --------------------------------------------------------------


def test_several_names_in_one_call_all_or_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".cursor" / "mcp.json"
    servers = {"git": {"command": "uvx", "args": ["mcp-server-git"]}, "memory": {"command": "m"}}
    original = put(path, json.dumps({"mcpServers": servers}, indent=2) + "\n")
    rc, _, err = run(["install-mcp", "git", "nope", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "'nope'" in err and path.read_bytes() == original  # nothing written
    rc, out, err = run(["install-mcp", "git", "memory", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0, err
    assert "wrapped 'git'" in out and "wrapped 'memory'" in out
    assert "undo it:  gcfkit uninstall-mcp git memory" in out
    backups = list((home.parent / "state" / "backups").rglob("mcp.json"))
    assert len(backups) == 1  # one file, one write
    rc, out, _ = run(["uninstall-mcp", "git", "memory"], capsys)
    assert rc == 0 and out.count("restored the original") == 2
    assert path.read_bytes() == original


def test_several_names_across_clients(home: Path) -> None:
    codex = home / ".codex" / "config.toml"
    put(codex, '[mcp_servers.git]\ncommand = "uvx"\nargs = ["mcp-server-git"]\n')
    gemini = home / ".gemini" / "settings.json"
    put(gemini, json.dumps({"mcpServers": {"memory": {"command": "m"}}}) + "\n")
    plans = install_mcp(["git", "memory"], launcher=[LAUNCHER])
    assert sorted(a.location.client for p in plans for a in p.actions) == ["codex", "gemini"]
    with pytest.raises(ConfigError, match=r"ambiguous|several"):
        put(home / ".cursor" / "mcp.json", json.dumps({"mcpServers": {"git": {"command": "g"}}}))
        install_mcp(["git"], launcher=[LAUNCHER])


def test_config_option_tells_the_client_by_the_file_name(tmp_path: Path) -> None:
    guesses = {
        tmp_path / "x" / "config.toml": "codex",
        tmp_path / ".vscode" / "mcp.json": "vscode",
        tmp_path / ".gemini" / "settings.json": "gemini",
        tmp_path / "opencode.jsonc": "opencode",
        tmp_path / "servers.json": "custom",
    }
    for path, client in guesses.items():
        assert locations_for_file(path, cwd=tmp_path)[0].client == client


# --- JSON with comments: VS Code, Gemini CLI and OpenCode read it --------------------------

VSCODE_JSONC = """\
{
  // Servers for this workspace
  "servers": {
    "time": {
      "type": "stdio",
      "command": "uvx", // from PyPI
      "args": ["mcp-server-time"],
      /* the zone */
      "env": {"TZ": "Europe/Paris",},
    },
  },
}
"""


def test_vscode_jsonc_keeps_its_comments_and_comes_back(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path.cwd() / ".vscode" / "mcp.json"
    original = put(path, VSCODE_JSONC)
    rc, _, err = run(["install-mcp", "time", "--gcfkit", LAUNCHER], capsys)
    assert rc == 0, err
    text = path.read_text()
    for comment in ("// Servers for this workspace", "// from PyPI", "/* the zone */"):
        assert comment in text
    assert f'"command": "{LAUNCHER}", // from PyPI' in text
    data = json.loads(blank_jsonc(text))
    assert data["servers"]["time"]["args"] == wrapped_args("time", "uvx", "mcp-server-time")
    assert mcp_status(client="vscode")[0].wrapped
    assert run(["uninstall-mcp", "time"], capsys)[0] == 0
    assert path.read_bytes() == original


def test_opencode_jsonc_round_trip(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = Path.cwd() / "opencode.jsonc"
    original = put(
        path,
        '{\n  "$schema": "https://opencode.ai/config.json",\n  "mcp": {\n'
        '    // local memory\n    "memory": {\n      "type": "local",\n'
        '      "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],\n    },\n  },\n}\n',
    )
    assert run(["install-mcp", "memory", "--gcfkit", LAUNCHER], capsys)[0] == 0
    text = path.read_text()
    assert "// local memory" in text
    command = json.loads(blank_jsonc(text))["mcp"]["memory"]["command"]
    assert command[:4] == [LAUNCHER, "proxy", "--name", "memory"]
    assert run(["uninstall-mcp", "memory"], capsys)[0] == 0
    assert path.read_bytes() == original


def test_a_client_that_reads_strict_json_still_refuses_comments(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".cursor" / "mcp.json"
    original = put(path, '{"mcpServers": {"time": {"command": "uvx"}}, // mine\n}\n')
    rc, _, err = run(["install-mcp", "time", "--client", "cursor", "--gcfkit", LAUNCHER], capsys)
    assert rc == 2 and "comments and trailing commas are not JSON" in err
    assert path.read_bytes() == original


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab/*,"\\\n ]}'),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(_JSON, st.sampled_from([None, 2]))
def test_blanking_comments_never_touches_json(value: Any, indent: int | None) -> None:
    # Strings full of slashes, stars, commas and quotes are values, never comments.
    text = json.dumps({"v": value}, indent=indent)
    assert blank_jsonc(text) == text


def test_status_tells_a_wrappable_remote_server_from_one_that_is_not(home: Path) -> None:
    put(
        home / ".gemini" / "settings.json",
        json.dumps({"mcpServers": GEMINI_SETTINGS["mcpServers"]}),
    )
    status = {s.name: s for s in mcp_status(client="gemini")}
    assert status["remote"].wrappable and not status["legacy"].wrappable
    put(home / ".codex" / "config.toml", CODEX_TOML)
    status = {s.name: s for s in mcp_status(client="codex")}
    assert status["remote"].wrappable and not status["oauth"].wrappable


def test_codex_headers_in_a_table_of_their_own_come_back(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = home / ".codex" / "config.toml"
    original = put(
        path,
        '[mcp_servers.r]\nurl = "https://example.invalid/mcp"\n\n'
        '[mcp_servers.r.http_headers]\nX-Team = "core"  # the team\n\n[other]\nk = 1\n',
    )
    assert run(["install-mcp", "r", "--gcfkit", LAUNCHER], capsys)[0] == 0
    entry = tomllib.loads(path.read_text())["mcp_servers"]["r"]
    assert entry["args"][-2:] == ["--header", "X-Team: core"] and "http_headers" not in entry
    assert run(["uninstall-mcp", "r"], capsys)[0] == 0
    assert path.read_bytes() == original
