"""The proxy under faults: shutdown by every route with a server that lingers and has
children, crashes, hostile and partial lines, many concurrent calls, huge lines, a client
that vanishes, and server-to-client requests.

Every test runs the real ``gcfkit proxy`` command over loopback pipes in front of
``tests/fault_server.py`` (or the real MCP SDK client in front of the proxy), bounds every
wait, asserts that nothing was lost, reordered or changed, and that no process is left:
each process the server reports (``--pids``) is checked by PID, and killed on the way out
whatever the outcome, so a failing test leaves nothing behind either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAULT_SERVER = str(ROOT / "tests" / "fault_server.py")


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    return out


def proxy_command(*server_args: str, options: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gcfkit.cli",
        "proxy",
        "--no-stats",
        *options,
        "--",
        sys.executable,
        FAULT_SERVER,
        *server_args,
    ]


# --------------------------------------------------------------------------------------
# Processes: read what the server reported, wait for them to go, kill what is left
# --------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: only its parent's reaping is
    left, and the kernel has already freed everything else)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def reported(pids_file: Path) -> list[dict[str, Any]]:
    if not pids_file.exists():
        return []
    return [json.loads(line) for line in pids_file.read_text().splitlines() if line.strip()]


def wait_reported(pids_file: Path, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = reported(pids_file)
        if len(found) >= count:
            return found
        time.sleep(0.02)
    raise AssertionError(f"the server reported {reported(pids_file)}, expected {count} entries")


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if alive(p)]
    return left


@contextlib.contextmanager
def cleanup(pids_file: Path, *procs: subprocess.Popen[bytes]) -> Iterator[None]:
    """Kill the given processes and every process the server reported, whatever happens."""
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
        for entry in reported(pids_file):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(entry["pid"], signal.SIGKILL)


def start_proxy(*server_args: str, options: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        proxy_command(*server_args, options=options),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env(),
    )


def send(proc: subprocess.Popen[bytes], msg: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()


def receive(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the proxy closed its stdout"
    msg: dict[str, Any] = json.loads(line)
    return msg


def call(name: str, msg_id: Any, **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


# --------------------------------------------------------------------------------------
# Shutdown: no route leaves a process behind
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("ignore_term", [False, True], ids=["lingers", "lingers-ignores-term"])
def test_the_sdk_client_shutdown_leaves_no_process(tmp_path: Path, ignore_term: bool) -> None:
    """The official SDK client closes stdin, waits 2 s, SIGTERMs the proxy's group and
    SIGKILLs it 2 s later: the proxy must have taken the whole server group down by then."""
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    pids = tmp_path / "pids.jsonl"
    server_args = ["--pids", str(pids), "--children", "2", "--linger"]
    if ignore_term:
        server_args.append("--ignore-term")
    command = proxy_command(*server_args)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env())

    async def session() -> str:
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                result = await s.call_tool("echo", {"hello": "world"})
                wait_reported(pids, 3)
                block = result.content[0]
                assert block.type == "text"
                return block.text

    with cleanup(pids):
        text = asyncio.run(asyncio.wait_for(session(), 60))
        assert json.loads(text) == {"hello": "world"}
        entries = reported(pids)
        server = next(e for e in entries if e["role"] == "server")
        everyone = [e["pid"] for e in entries]
        # The SDK has already waited up to 4 s; whatever is alive now was orphaned.
        assert wait_gone(everyone, 1.0) == [], f"left behind: {entries}"
        assert server["pgid"] == server["pid"]  # its own group, so the proxy can signal it


def _assert_all_gone(pids: Path, timeout: float = 5.0) -> None:
    everyone = [e["pid"] for e in reported(pids)]
    assert everyone, "the server reported no process"
    assert wait_gone(everyone, timeout) == [], f"left behind: {reported(pids)}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.parametrize("ignore_term", [False, True], ids=["plain", "ignores-term"])
def test_a_signal_to_the_proxy_takes_the_server_group_down(
    tmp_path: Path, sig: signal.Signals, ignore_term: bool
) -> None:
    pids = tmp_path / "pids.jsonl"
    server_args = ["--pids", str(pids), "--children", "2", "--linger"]
    if ignore_term:
        server_args.append("--ignore-term")
    proc = start_proxy(*server_args)
    with cleanup(pids, proc):
        wait_reported(pids, 3)
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert receive(proc) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        started = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 128 + sig
        elapsed = time.monotonic() - started
        _assert_all_gone(pids)
        # A SIGTERM-ignoring group is SIGKILLed 1 s after its SIGTERM; a client kills the
        # proxy 2 s after its own SIGTERM. (Generous for a loaded machine.)
        assert elapsed < 10, elapsed


@pytest.mark.parametrize("linger", [False, True], ids=["exits-on-eof", "lingers"])
def test_client_eof_takes_the_server_group_down(tmp_path: Path, linger: bool) -> None:
    pids = tmp_path / "pids.jsonl"
    server_args = ["--pids", str(pids), "--children", "2", *(["--linger"] if linger else [])]
    proc = start_proxy(*server_args, options=("--grace", "0.5"))
    with cleanup(pids, proc):
        wait_reported(pids, 3)
        assert proc.stdin is not None
        proc.stdin.close()
        status = proc.wait(timeout=30)
        assert status == (128 + signal.SIGTERM if linger else 0)
        _assert_all_gone(pids)


def test_a_server_crash_takes_its_children_down(tmp_path: Path) -> None:
    pids = tmp_path / "pids.jsonl"
    proc = start_proxy("--pids", str(pids), "--children", "2")
    with cleanup(pids, proc):
        wait_reported(pids, 3)
        send(proc, call("crash", 7))
        error = receive(proc)
        assert error["id"] == 7 and error["error"]["code"] == -32000
        assert proc.wait(timeout=30) == 3
        _assert_all_gone(pids)
