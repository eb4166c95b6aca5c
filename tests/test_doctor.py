"""gcfkit doctor (each wrapped entry started as the client would, through the proxy, with a
deadline, and its whole process group reaped) and the command install-mcp writes (the
gcfkit on PATH when it is this installation, so the entry outlives a deleted venv)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gcfkit.clients.doctor import check_entry, check_ledger, ledger_of
from gcfkit.clients.entries import default_launcher, own_script, same_installation

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "examples" / "demo_server.py")

# A stdio server that leaves a grandchild behind in its process group (as npx or uvx can),
# answers the handshake, or (with "silent") never answers at all.
FAKE = textwrap.dedent(
    """
    import json, subprocess, sys
    marker, mode = sys.argv[1], sys.argv[2]
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker])
    for line in sys.stdin:
        msg = json.loads(line)
        if mode == "silent" or "id" not in msg:
            continue
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fake\\x1b[2J", "version": "1"}}
        if msg["method"] == "tools/list":
            result = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    """
)


def alive(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and b"sleep(300)" in cmdline:
                found.append(int(pid))
    return found


def gone(marker: str, timeout: float = 5.0) -> bool:
    """Whether every process carrying ``marker`` is gone (a SIGKILLed one takes a moment)."""
    deadline = time.monotonic() + timeout
    while alive(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def env(state: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    out["GCFKIT_STATE_DIR"] = str(state)
    return out


def gcfkit_cli(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", *args],
        capture_output=True,
        text=True,
        env=env(state),
        timeout=timeout,
    )


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    path = tmp_path / "fake_server.py"
    path.write_text(FAKE)
    return path


def test_doctor_checks_each_wrapped_server_through_the_proxy(tmp_path: Path, fake: Path) -> None:
    marker = f"gcfkit-doctor-test-{os.getpid()}"
    config = tmp_path / "mcp.json"
    servers = {
        "demo": {"command": sys.executable, "args": [DEMO]},
        "fake": {"command": sys.executable, "args": [str(fake), marker, "ok"]},
        "broken": {"command": str(tmp_path / "no-such-server")},
        "plain": {"command": sys.executable, "args": [DEMO]},
    }
    config.write_text(json.dumps({"mcpServers": servers}, indent=2))
    state = tmp_path / "state"
    launcher = f"--gcfkit={sys.executable} -m gcfkit.cli"
    for name in ("demo", "fake", "broken"):
        proc = gcfkit_cli(state, "install-mcp", name, "--config", str(config), launcher)
        assert proc.returncode == 0, proc.stderr
        assert f"undo it:  gcfkit uninstall-mcp {name} --config={config}" in proc.stdout
        assert "check it: gcfkit doctor" in proc.stdout
    started = time.monotonic()
    proc = gcfkit_cli(state, "doctor", "--config", str(config))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "✓ demo: wrapped, gcfkit-demo 1.0 answered initialize and tools/list" in out
    assert "through the proxy" in out.split("✓ demo")[1].splitlines()[0]
    assert "✓ fake: wrapped, fake\\x1b[2J 1 answered" in out  # shown, never interpreted
    assert "\x1b" not in out
    assert "✗ broken: wrapped, failed at initialize" in out
    assert "cannot start" in out  # the proxy's own stderr, shown
    assert "- plain: not wrapped; gcfkit install-mcp plain to wrap it" in out
    assert f"ledger {state / 'ledger.jsonl'}: writable" in out
    assert "1 problem(s)" in out
    assert time.monotonic() - started < 60
    # (What the proxy leaves of its server's process group is the proxy's shutdown sequence,
    # tested with the proxy; doctor's own reaping is tested below, on a direct entry.)
    for pid in alive(marker):
        os.kill(pid, 9)

    only = gcfkit_cli(state, "doctor", "demo", "--config", str(config))
    assert only.returncode == 0 and "all good" in only.stdout and "fake" not in only.stdout
    missing = gcfkit_cli(state, "doctor", "nope", "--config", str(config))
    assert missing.returncode == 2 and "no server named 'nope'" in missing.stderr


def test_a_server_that_never_answers_is_stopped_at_the_deadline(fake: Path) -> None:
    marker = f"gcfkit-doctor-silent-{os.getpid()}"
    started = time.monotonic()
    check = check_entry(
        {"command": sys.executable, "args": [str(fake), marker, "silent"]}, timeout=2, grace=1
    )
    assert not check.ok and check.step == "initialize"
    assert "no answer to initialize in time" in check.problem
    assert time.monotonic() - started < 10
    assert gone(marker)  # the server's grandchild went with its process group
    ok = f"gcfkit-doctor-ok-{os.getpid()}"
    check = check_entry({"command": sys.executable, "args": [str(fake), ok, "ok"]}, timeout=20)
    assert check.ok and check.tools == 1 and check.server == "fake\x1b[2J"
    assert gone(ok)


def test_env_and_cwd_of_the_entry_are_the_clients(tmp_path: Path) -> None:
    script = tmp_path / "envcheck.py"
    script.write_text(
        "import json, os, sys\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' not in m: continue\n"
        "    info = {'name': os.environ['DOCTOR_NAME'], 'version': os.getcwd()}\n"
        "    r = {'serverInfo': info} if m['method'] == 'initialize' else {'tools': []}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n"
    )
    entry = {
        "command": sys.executable,
        "args": [str(script)],
        "env": {"DOCTOR_NAME": "from-env"},
        "cwd": str(tmp_path),
    }
    check = check_entry(entry, timeout=20)
    assert check.ok and check.server == "from-env" and check.version == str(tmp_path)
    assert check.tools == 0 and not check.primer


def test_ledger_checks(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert not check_ledger(tmp_path / "file" / "ledger.jsonl").ok
    assert not check_ledger(tmp_path).ok  # a directory
    assert check_ledger(tmp_path / "new" / "deeper" / "ledger.jsonl").ok
    assert not (tmp_path / "new").exists()  # checking writes nothing
    assert ledger_of(["--delta"]) is not None and ledger_of(["--no-stats"]) is None


def test_install_writes_the_gcfkit_on_path_when_it_is_this_installation(tmp_path: Path) -> None:
    own = own_script()
    if own is None:
        pytest.skip("gcfkit is not installed as a script beside this interpreter")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gcfkit").symlink_to(own)  # what uv tool install / pipx put on PATH
    assert default_launcher(search_path=str(bindir)) == [str(bindir / "gcfkit")]
    other = tmp_path / "other"
    other.mkdir()
    script = other / "gcfkit"
    script.write_text("#!/opt/another/venv/bin/python\nimport sys\n")
    script.chmod(0o755)
    assert not same_installation(script, own)
    assert default_launcher(search_path=str(other)) == [str(own)]  # not ours: our own script
    copied = other / "copy"
    copied.mkdir()
    (copied / "gcfkit").write_text(f"#!{own.parent / 'python'}\nimport sys\n")
    (copied / "gcfkit").chmod(0o755)
    assert default_launcher(search_path=str(copied)) == [str(copied / "gcfkit")]
    assert default_launcher(search_path=str(tmp_path / "empty")) == [str(own)]
