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
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.proxy_support import alive

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


@pytest.mark.slow
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


def _assert_all_gone(pids: Path, timeout: float = 5.0, below: set[int] | None = None) -> None:
    """Every process the server reported is gone, and so is everything that was seen below
    the proxy (``below``: the watchdog and the worker, which a normal stop ends too)."""
    everyone = [e["pid"] for e in reported(pids)]
    assert everyone, "the server reported no process"
    assert wait_gone(everyone, timeout) == [], f"left behind: {reported(pids)}"
    left = wait_gone(sorted(below or ()), timeout)
    assert left == [], f"helpers left behind: {left}"


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
        below = descendants(proc.pid)
        started = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 128 + sig
        elapsed = time.monotonic() - started
        _assert_all_gone(pids, below=below)
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
        below = below_with_watchdog(proc.pid)
        assert proc.stdin is not None
        proc.stdin.close()
        status = proc.wait(timeout=30)
        assert status == (128 + signal.SIGTERM if linger else 0)
        _assert_all_gone(pids, below=below)


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


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "fault-tests", "version": "1"},
    },
}


def _initialize_over_http(proc: subprocess.Popen[bytes]) -> None:
    """Read the URL the HTTP proxy serves from its stderr, POST ``initialize`` (which starts
    the server) and check the answer."""
    import select
    import urllib.request

    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    seen = b""
    while (match := re.search(rb"serving (http://\S+)", seen)) is None:
        left = deadline - time.monotonic()
        assert left > 0 and select.select([proc.stderr], [], [], left)[0], seen
        chunk = os.read(proc.stderr.fileno(), 4096)
        assert chunk, f"the proxy exited: {seen!r}"
        seen += chunk
    request = urllib.request.Request(
        match.group(1).decode(),
        data=json.dumps(INITIALIZE).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.status == 200
        assert b'"serverInfo"' in answer.read()


@pytest.mark.parametrize("shell", ["stdio", "http"])
@pytest.mark.parametrize("ignore_term", [False, True], ids=["plain", "ignores-term"])
def test_a_sigkilled_proxy_takes_the_server_group_down(
    tmp_path: Path, shell: str, ignore_term: bool
) -> None:
    """SIGKILL (a client that gives up, the OOM killer) lets the proxy run no stop sequence:
    its watchdog sees the pipe only the proxy held close and stops the server's group.
    Before, the server and its child ran on forever."""
    pids = tmp_path / "pids.jsonl"
    server_args = ["--pids", str(pids), "--children", "1", "--linger"]
    if ignore_term:
        server_args.append("--ignore-term")
    options = ("--http", "127.0.0.1:0") if shell == "http" else ()
    proc = subprocess.Popen(
        proxy_command(*server_args, options=options),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if shell == "http" else None,
        env=env(),
    )
    below: set[int] = set()  # the watchdog and the worker too, to kill if the test fails
    try:
        with cleanup(pids, proc):
            if shell == "http":
                _initialize_over_http(proc)
            else:
                send(proc, INITIALIZE)
                assert receive(proc)["result"]["serverInfo"]["name"] == "fault"
            wait_reported(pids, 2)
            below = below_with_watchdog(proc.pid)  # it must be gone too once its work is done
            everyone = sorted(below | {e["pid"] for e in reported(pids)})
            proc.kill()
            proc.wait(timeout=10)
            # A group that ignores SIGTERM is SIGKILLed 1 s after it; 10 s for a slow machine.
            left = wait_gone(everyone, 10.0)
            assert left == [], f"left behind after SIGKILL: {left} of {reported(pids)}"
    finally:
        for pid in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


# A process that starts a watchdog for the group given, prints the watchdog's pid and
# waits to be killed: the proxy's part, without the proxy. "no-shell" takes the path of a
# system without /bin/sh (the interpreter waits itself). Its pipe's ends are above fd 9, as
# in a proxy with a few sessions open (dash refuses to redirect from those by number).
_HOLDER = """
import os, sys
from gcfkit.transports import process
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(16)]
if sys.argv[2] == "no-shell":
    process._SHELL = "/nonexistent/sh"
watchdog = process.start_watchdog(int(sys.argv[1]))
print(watchdog.process.pid if watchdog else 0, flush=True)
sys.stdin.read()
"""


def _group_and_watchdog(
    tmp_path: Path, stage: str, ignore_term: bool
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], Path]:
    """A lingering fault server with a child, in its own session, and a holder process
    whose watchdog guards it."""
    pids = tmp_path / "pids.jsonl"
    server_args = ["--pids", str(pids), "--children", "1", "--linger"]
    if ignore_term:
        server_args.append("--ignore-term")
    server = subprocess.Popen(
        [sys.executable, FAULT_SERVER, *server_args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(server.pid), stage],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env(),
    )
    return server, holder, pids


@pytest.mark.parametrize("stage", ["shell", "no-shell"])
@pytest.mark.parametrize("ignore_term", [False, True], ids=["plain", "ignores-term"])
def test_the_watchdog_stops_the_group_once_its_holder_dies(
    tmp_path: Path, stage: str, ignore_term: bool
) -> None:
    server, holder, pids = _group_and_watchdog(tmp_path, stage, ignore_term)
    watchdog = 0
    try:
        with cleanup(pids, holder, server):
            wait_reported(pids, 2)
            assert holder.stdout is not None
            watchdog = int(holder.stdout.readline())
            assert watchdog > 0
            assert server.poll() is None  # armed, it does nothing
            holder.kill()
            holder.wait(timeout=10)
            everyone = [watchdog, *(e["pid"] for e in reported(pids))]
            assert wait_gone(everyone, 10.0) == [], f"left: {wait_gone(everyone, 0)}"
            # SIGTERM first; SIGKILL (1 s later) only for what ignores it.
            assert server.wait(timeout=10) == -(signal.SIGKILL if ignore_term else signal.SIGTERM)
    finally:
        if watchdog:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(watchdog, signal.SIGKILL)


def test_a_waiting_watchdog_without_a_shell_leaves_once_the_group_is_gone(
    tmp_path: Path,
) -> None:
    """Nobody stopped the server (it ended on its own): the watchdog does not wait for the
    proxy's death to find that out, so it never outlives the group by more than a second."""
    server, holder, pids = _group_and_watchdog(tmp_path, "no-shell", False)
    watchdog = 0
    try:
        with cleanup(pids, holder, server):
            wait_reported(pids, 2)
            assert holder.stdout is not None
            watchdog = int(holder.stdout.readline())
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
            assert wait_gone([watchdog], 10.0) == []
            assert holder.poll() is None  # the holder (the proxy) still runs
    finally:
        if watchdog:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(watchdog, signal.SIGKILL)


# --------------------------------------------------------------------------------------
# The fault suite: raw JSON-RPC over asyncio pipes, both directions logged by the server
# --------------------------------------------------------------------------------------


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (by parent pid, read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    stack = [root]
    while stack:
        for pid in children.get(stack.pop(), []):
            if pid not in found:
                found.add(pid)
                stack.append(pid)
    return found


def watchdogs(pids: set[int]) -> set[int]:
    """Which of ``pids`` are a server's watchdog (by the code on their command line)."""
    from gcfkit.transports.process import _WATCHDOG

    found = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if _WATCHDOG.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.add(pid)
    return found


def below_with_watchdog(root: int, timeout: float = 10.0) -> set[int]:
    """Every process below ``root`` once a watchdog is among them (bounded wait)."""
    deadline = time.monotonic() + timeout
    while not watchdogs(below := descendants(root)):
        assert time.monotonic() < deadline, f"no watchdog below the proxy: {below}"
        time.sleep(0.02)
    return below


def is_response(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg)


def parsed(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def texts_value(msg: dict[str, Any]) -> Any:
    """A result's text blocks as values (GCF or JSON decoded), with everything else."""
    import gcfkit
    from tests.conformance import GCF_HEADS

    result = msg.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return msg
    content = result["content"]
    last = content[-1] if len(content) >= 2 else None
    if isinstance(last, dict) and re.fullmatch(r"ref=[1-9][0-9]{5}", str(last.get("text"))):
        content = content[:-1]  # the proxy's name for a large result (--refs auto)
    blocks = []
    for block in content:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str):
            with contextlib.suppress(ValueError):
                text = gcfkit.decode(text) if text.startswith(GCF_HEADS) else json.loads(text)
        blocks.append({**block, "text": text} if isinstance(block, dict) else block)
    return {**msg, "result": {**result, "content": blocks}}


def check_relay(server: list[bytes], client: list[bytes]) -> None:
    """Every line the server wrote reached the client once, unchanged (byte for byte) or, for
    a tool result, rewritten to the same value; and no two lines changed places except two
    responses (a response may overtake a result that was being rewritten)."""
    from gcfkit.jsonio import same_value

    by_id: dict[str, int] = {}
    for i, data in enumerate(server):
        msg = parsed(data)
        if is_response(msg):
            by_id.setdefault(json.dumps(msg["id"]), i)
    used: set[int] = set()
    order: list[int] = []
    for data in client:
        msg = parsed(data)
        if is_response(msg) and json.dumps(msg["id"]) in by_id:
            i = by_id[json.dumps(msg["id"])]
            if data != server[i]:
                want = parsed(server[i])
                assert same_value(texts_value(msg), texts_value(want)), (
                    data[:200],
                    server[i][:200],
                )
        else:
            i = next((k for k, s in enumerate(server) if k not in used and s == data), -1)
            assert i >= 0, f"the client got a line the server never wrote: {data[:200]!r}"
        assert i not in used, f"delivered twice: {data[:200]!r}"
        used.add(i)
        order.append(i)
    lost = [server[i][:200] for i in range(len(server)) if i not in used]
    assert not lost, f"lost: {lost}"
    for at, i in enumerate(order):
        for j in order[at + 1 :]:
            if j < i:  # j was written before i, and arrived after it
                assert is_response(parsed(server[i])) and is_response(parsed(server[j])), (
                    server[j][:120],
                    server[i][:120],
                )


class Session:
    """``gcfkit proxy`` as a subprocess in front of tests/fault_server.py, spoken to in raw
    lines; the server logs what it reads and writes, and every process below the proxy is
    watched by PID, checked gone at the end and killed on the way out whatever happens."""

    def __init__(self, tmp_path: Path, *server_args: str, options: tuple[str, ...] = ()) -> None:
        self.out_log = tmp_path / "server-wrote.bin"
        self.in_log = tmp_path / "server-read.bin"
        self.pids = tmp_path / "pids.jsonl"
        self.command = proxy_command(
            "--log",
            str(self.out_log),
            "--inlog",
            str(self.in_log),
            "--pids",
            str(self.pids),
            *server_args,
            options=("--time-budget", "30", *options),
        )
        self.received: list[bytes] = []
        self.sent: list[bytes] = []
        self.seen: set[int] = set()
        self._arrived = asyncio.Event()

    async def __aenter__(self) -> Session:
        self.proc = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env(),
            limit=1 << 28,
        )
        self._reader = asyncio.create_task(self._read())
        self._watcher = asyncio.create_task(self._watch())
        return self

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            data = await self.proc.stdout.readline()
            if not data:
                return
            self.received.append(data)
            self._arrived.set()

    async def _watch(self) -> None:
        while self.proc.returncode is None:
            self.seen |= descendants(self.proc.pid)
            await asyncio.sleep(0.05)

    async def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.sent.append(data)
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def request(self, msg: dict[str, Any]) -> None:
        await self.send(json.dumps(msg).encode() + b"\n")

    async def until(self, done: Any, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.received):
            left = deadline - time.monotonic()
            assert left > 0, f"waited {timeout} s; got {[r[:80] for r in self.received]}"
            self._arrived.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.5))

    def responses(self) -> dict[Any, dict[str, Any]]:
        out: dict[Any, dict[str, Any]] = {}
        for data in self.received:
            msg = parsed(data)
            if is_response(msg):
                out[json.dumps(msg["id"])] = msg
        return out

    async def close(self, timeout: float = 30.0) -> int:
        """Client EOF, then the proxy's exit status (bounded)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            self.proc.stdin.close()
        status = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.wait_for(self._reader, timeout)
        return status

    def server_wrote(self) -> list[bytes]:
        return self.out_log.read_bytes().splitlines(keepends=True) if self.out_log.exists() else []

    def server_read(self) -> list[bytes]:
        return self.in_log.read_bytes().splitlines(keepends=True) if self.in_log.exists() else []

    def everyone(self) -> list[int]:
        return sorted(self.seen | {e["pid"] for e in reported(self.pids)})

    async def __aexit__(self, *exc: Any) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.proc.wait(), 10)
        self._watcher.cancel()
        self._reader.cancel()
        left = wait_gone(self.everyone(), 5.0)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if exc[0] is None:
            assert left == [], f"processes left behind: {left}"


def in_session(body: Any, tmp_path: Path, *server_args: str, **kw: Any) -> Any:
    async def main() -> Any:
        async with Session(tmp_path, *server_args, **kw) as s:
            return await body(s)

    return asyncio.run(asyncio.wait_for(main(), 240))


def rpc(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def test_1000_concurrent_calls_nothing_lost_reordered_or_changed(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        ids: list[Any] = []
        for i in range(1000):
            msg_id: Any = i if i % 3 else f"call-{i}"
            ids.append(msg_id)
            if i % 10 == 5:
                await s.request(rpc(msg_id, "ping"))
            elif i % 10 == 7:
                await s.request(call("notify", msg_id, n=2))
            else:
                await s.request(call("echo", msg_id, i=i, pad=["x" * 20] * (i % 7)))
        await s.until(lambda got: len(s.responses()) >= 1000)
        assert await s.close() == 0
        assert s.server_read() == s.sent  # client to server: byte for byte, in order
        check_relay(s.server_wrote(), s.received)
        assert set(s.responses()) == {json.dumps(i) for i in ids}

    in_session(body, tmp_path)


def test_malformed_and_partial_lines_pass_both_ways_byte_for_byte(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        await s.send(b"not json at all\n")
        await s.send(b"\xff\xfe invalid utf-8 \xc3\n")
        await s.send(b'{"jsonrpc":"2.0","id":1,"method":"ping","x":1,"x":2}\n')  # duplicate key
        await s.send(b"\n")
        await s.send(b"   \r\n")
        for piece in (b'{"jsonrpc":"2.0",', b'"id":"split","me', b'thod":"ping"}\n'):
            await s.send(piece)  # one line, three writes
            await asyncio.sleep(0.05)
        await s.request(call("garbage", 2))
        await s.send(b'{"truncated": \n')
        await s.until(lambda got: {'"split"', "2", "1"} <= set(s.responses()))
        await s.send(b'{"jsonrpc":"2.0","id":"last","method":"ping"}')  # no LF, then EOF
        assert await s.close() == 0
        assert b"".join(s.server_read()) == b"".join(s.sent)
        check_relay(s.server_wrote(), s.received)
        wrote = b"".join(s.server_wrote())
        assert b"this is not json\n" in wrote and b"this is not json\n" in s.received

    in_session(body, tmp_path)


def test_server_to_client_requests_are_relayed_and_answered(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        for i in range(5):
            await s.request(call("ask", f"q{i}"))

        def asks(got: list[bytes]) -> list[dict[str, Any]]:
            return [m for d in got if (m := parsed(d)) and m.get("method") == "roots/list"]

        answered = 0
        while answered < 5:
            await s.until(lambda got, n=answered: len(asks(got)) > n)
            for ask in asks(s.received)[answered:]:
                root = {"roots": [{"uri": f"file:///{ask['id']}"}]}
                await s.request({"jsonrpc": "2.0", "id": ask["id"], "result": root})
                answered += 1
        await s.until(lambda got: {f'"q{i}"' for i in range(5)} <= set(s.responses()))
        assert await s.close() == 0
        assert s.server_read() == s.sent
        check_relay(s.server_wrote(), s.received)
        result = s.responses()['"q3"']["result"]["content"][0]["text"]
        assert json.loads(result) == {"roots": [{"uri": "file:///ask-q3"}]}

    in_session(body, tmp_path)


def test_a_server_crash_mid_call_answers_every_pending_request(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        await s.request(call("sleep", "slow", seconds=30))  # the server is busy...
        await s.request(rpc("p", "ping"))  # ...so these wait behind it,
        await s.request(call("crash", "boom"))  # and this one is never read: it dies first
        for _ in range(600):
            if len(reported(s.pids)) >= 2 and s.server_read():
                break
            await asyncio.sleep(0.05)
        os.kill(reported(s.pids)[0]["pid"], signal.SIGKILL)
        await s.until(lambda got: {'"slow"', '"p"', '"boom"'} <= set(s.responses()))
        for msg_id in ('"slow"', '"p"', '"boom"'):
            assert s.responses()[msg_id]["error"]["code"] == -32000
        assert await s.close() == 128 + signal.SIGKILL

    in_session(body, tmp_path, "--children", "1")


def test_a_client_that_vanishes_takes_everything_down(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        await s.request(call("echo", 1, x=1))
        await s.until(lambda got: len(got) >= 1)
        await s.request(call("sleep", 2, seconds=1))
        s.seen |= descendants(s.proc.pid)
        assert len(s.seen) >= 3  # the server, its child and the worker
        # The client dies: both pipes close under the proxy, mid-call.
        assert s.proc.stdin is not None and s.proc.stdout is not None
        s.proc.stdin.close()
        s._reader.cancel()
        transport = getattr(s.proc.stdout, "_transport", None)
        if transport is not None:
            transport.close()
        await asyncio.wait_for(s.proc.wait(), 30)

    in_session(body, tmp_path, "--children", "1", "--linger")


@pytest.mark.slow
def test_a_64_mb_line_both_ways_holds_nothing_up(tmp_path: Path) -> None:
    size = 64 * 1024 * 1024

    async def body(s: Session) -> int:
        blob = json.dumps({"data": "y" * size})
        await s.request(call("echo", "up", blob=blob))  # 64 MB to the server (and back)
        await s.until(lambda got: '"up"' in s.responses(), 120)
        await s.request(call("blob", "down", bytes=size))  # 64 MB from the server
        await s.request(rpc("after", "ping"))
        await s.until(lambda got: {'"down"', '"after"'} <= set(s.responses()), 120)
        peak = int(
            next(
                x
                for x in Path(f"/proc/{s.proc.pid}/status").read_text().splitlines()
                if x.startswith("VmHWM")
            ).split()[1]
        )
        assert await s.close() == 0
        assert s.server_read() == s.sent
        check_relay(s.server_wrote(), s.received)
        return peak * 1024

    peak = in_session(body, tmp_path)
    # Before: 285-349 MB at peak (a strict parse of the whole line, and a copy into the
    # pipe's buffer). Now the line is read from its envelope and written a slice at a time:
    # the line and the chunks it was joined from, over the proxy's own ~30 MB.
    assert peak < 2.5 * size + 40 * 1024 * 1024, peak


# --------------------------------------------------------------------------------------
# Item 1 end to end: the relay stays responsive, the budget is a real bound
# --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_ping_is_answered_while_a_large_result_is_rewritten(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        await s.request(call("records", "big", n=150_000, shape="uniform"))
        await s.until(lambda got: True)
        await asyncio.sleep(0.05)  # the result is on its way through the proxy
        await s.request(rpc("ping", "ping"))
        await s.until(lambda got: {'"big"', '"ping"'} <= set(s.responses()), 120)
        ids = [json.dumps(m["id"]) for d in s.received if is_response(m := parsed(d))]
        # Before: the ping waited for the encode (seconds: the loop was blocked).
        assert ids.index('"ping"') < ids.index('"big"')
        text = s.responses()['"big"']["result"]["content"][0]["text"]
        assert text.startswith("GCF profile=generic")
        assert await s.close() == 0
        check_relay(s.server_wrote(), s.received)

    in_session(body, tmp_path)


def test_an_exploding_result_goes_out_at_once_and_pings_flow(tmp_path: Path) -> None:
    async def body(s: Session) -> None:
        started = time.monotonic()
        await s.request(call("records", "union", n=8000, shape="union"))
        await s.request(rpc("ping", "ping"))
        await s.until(lambda got: {'"union"', '"ping"'} <= set(s.responses()), 120)
        elapsed = time.monotonic() - started
        text = s.responses()['"union"']["result"]["content"][0]["text"]
        assert not text.startswith("GCF")  # 64 M cells: compact JSON, never built
        assert elapsed < 5, elapsed  # 11-17 s of a frozen relay before (0.1 s now)
        assert await s.close() == 0
        check_relay(s.server_wrote(), s.received)

    in_session(body, tmp_path)


_STUCK_PROXY = """
import asyncio, sys
from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.transports.stdio import run_proxy
from fault_codec import stuck_dumps
config = ProxyConfig(primer=False, stats=False, time_budget=0.5)
sys.exit(asyncio.run(run_proxy(sys.argv[1:], config, codec=Codec(dumps=stuck_dumps))))
"""


def test_the_time_budget_is_a_real_bound(tmp_path: Path) -> None:
    """An encode that never ends (a codec that sleeps for an hour): the original goes out
    at the deadline and the relay never stops. Before, the budget was checked only between
    steps: the proxy froze for as long as the step took."""
    pids = tmp_path / "pids.jsonl"
    command = [
        sys.executable,
        "-c",
        _STUCK_PROXY,
        sys.executable,
        FAULT_SERVER,
        "--pids",
        str(pids),
    ]
    environment = env()  # the worker imports the stuck codec by name, from tests/
    environment["PYTHONPATH"] += os.pathsep + str(ROOT / "tests")
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)
    with cleanup(pids, proc):
        wait_reported(pids, 1)
        rows = json.dumps([{"id": i, "v": i} for i in range(50)], indent=2)
        started = time.monotonic()
        send(proc, call("text", 1, text=rows))
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
        first, second = receive(proc), receive(proc)
        elapsed = time.monotonic() - started
        assert first == {"jsonrpc": "2.0", "id": 2, "result": {}}  # not held up
        assert second["result"]["content"][0]["text"] == rows  # the original, untouched
        assert elapsed < 15, elapsed  # 0.5 s budget; generous for a loaded machine
        send(proc, call("text", 3, text=rows))  # a fresh worker is started for the next
        assert receive(proc)["result"]["content"][0]["text"] == rows
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        _assert_all_gone(pids)


def test_a_file_read_through_the_worker_is_byte_for_byte(tmp_path: Path) -> None:
    """The file-read decision (here by the name readFile) reaches the worker process."""
    text = json.dumps([{"id": i, "path": f"src/{i}.py"} for i in range(200)], indent=2) + "\n"

    async def body(s: Session) -> None:
        await s.request(call("readFile", "file", text=text))
        await s.request(call("text", "data", text=text))
        await s.until(lambda got: {'"file"', '"data"'} <= set(s.responses()))
        assert s.responses()['"file"']["result"]["content"][0]["text"] == text
        assert s.responses()['"data"']["result"]["content"][0]["text"].startswith("GCF")
        assert await s.close() == 0
        check_relay(s.server_wrote(), s.received)

    in_session(body, tmp_path)


def test_a_replaced_shared_server_s_leftovers_are_stopped(tmp_path: Path) -> None:
    """The shared 2026-07-28 process of ``--http -- COMMAND`` dies leaving a child in its
    group; the next request starts another process, and the dead one's group is stopped then
    (it used to wait for the proxy's exit)."""
    from gcfkit.proxy.core import ProxyConfig
    from gcfkit.transports.http_shared import SharedServer

    pids_file = tmp_path / "pids"
    command = [sys.executable, FAULT_SERVER, "--children", "1", "--pids", str(pids_file)]

    async def body() -> list[int]:
        shared = SharedServer(command, ProxyConfig(), None, grace=0.2)
        try:
            assert await shared.start()
            first = await asyncio.to_thread(wait_reported, pids_file, 2)
            server = next(p["pid"] for p in first if p["role"] == "server")
            os.kill(server, signal.SIGKILL)  # its child is not signalled: it lingers
            old = shared.process
            assert old is not None
            for _ in range(500):  # the exit is seen within seconds; bounded either way
                if old.returncode is not None:
                    break
                await asyncio.sleep(0.02)
            assert not shared.alive
            assert await shared.start()  # the next request's start
            assert shared.process is not old
            await asyncio.to_thread(wait_reported, pids_file, 4)
            child = next(p["pid"] for p in first if p["role"] == "child")
            return await asyncio.to_thread(wait_gone, [child], 10.0)
        finally:
            await shared.stop()

    with cleanup(pids_file):
        left = asyncio.run(body())
    assert not left, f"the dead server's child still runs: {left}"
