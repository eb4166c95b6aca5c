"""The HTTP shells rewrite tool results in the worker pool (gcfkit.transports.offload), as the
stdio shell does, and record sessions with ``--capture-dir``.

* While a result is being rewritten, a ping (another request of the same session) is
  answered; a rewrite that overruns the time budget sends the original bytes. The codec
  used (tests/fault_codec.py) never ends its encode and marks a file when it begins, so the
  tests know the result is inside the proxy without sleeping; before the offload the encode
  ran on the event loop and the ping waited for it (an hour).
* The pool itself: one session's stuck result holds up neither another session's result
  nor a later result of its own session.
* ``--capture-dir`` with ``--upstream``, the gateway and ``--http -- COMMAND``: each session
  in its own directory, the server's raw results, 2026-07-28 requests included; a session
  that starts over (``initialize`` again) keeps one recording, closed when it ends.
* The shared 2026-07-28 process: a cancelled request's late progress reaches no other client.
* ``DELETE`` ends every stream of the session, even when its server's stdout stays open.

Loopback only; every wait is bounded; each process is stopped by the test that started it
and the killed worker is checked to be gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx2

from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.proxy.rewrite import Call
from gcfkit.traffic.capture import Capture
from gcfkit.traffic.corpus import read_sessions
from gcfkit.transports.http_server import build_gateway
from gcfkit.transports.http_shared import SharedServer
from gcfkit.transports.offload import Offload, OffloadFailed
from tests.fault_codec import stuck_dumps
from tests.http_support import (
    CONFIG,
    INIT,
    START_TIMEOUT,
    Background,
    Servers,
    connect,
    env,
    gcfkit_http,
    read_line,
    run,
    servers,
    stop_process,
    text,
    upstream_params,
)
from tests.proxy_support import alive

__all__ = ["servers"]  # the module-scoped fixture, shared with tests/test_http.py

ROOT = Path(__file__).resolve().parent.parent
FAULT_SERVER = str(ROOT / "tests" / "fault_server.py")
#: The time budget of the stuck-encode tests: the margin a ping has to be answered while the
#: result is held (a ping takes milliseconds; a loaded machine gets a thousandfold).
BUDGET = 4.0

# Runs one HTTP shell with the codec whose encode never ends (the worker imports it by name).
_PROXY = """
import asyncio, sys
from gcfkit.proxy.config import Codec, ProxyConfig
from fault_codec import marked_stuck_dumps
config = ProxyConfig(primer=False, stats=False, time_budget=float(sys.argv[1]))
codec = Codec(dumps=marked_stuck_dumps)
shape, rest = sys.argv[2], sys.argv[3:]
if shape == "upstream":
    from gcfkit.transports.http_client import run_upstream
    sys.exit(asyncio.run(run_upstream(rest[0], config, codec=codec)))
from gcfkit.transports.http_server import serve_command, serve_gateway
if shape == "gateway":
    sys.exit(asyncio.run(serve_gateway(rest[0], "127.0.0.1", 0, config, codec=codec)))
sys.exit(asyncio.run(serve_command(rest, "127.0.0.1", 0, config, codec=codec)))
"""


def _stuck_env(mark: Path) -> dict[str, str]:
    environment = env(GCFKIT_TEST_MARK=str(mark))
    environment["PYTHONPATH"] += os.pathsep + str(ROOT / "tests")
    return environment


def rpc(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def tool_call(msg_id: Any, name: str, **arguments: Any) -> dict[str, Any]:
    return rpc(msg_id, "tools/call", {"name": name, "arguments": arguments})


async def post(
    http: httpx2.AsyncClient, url: str, msg: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    """The messages of one POST's answer (a JSON body or each SSE event's)."""
    answer = await http.post(
        url,
        json=msg,
        headers={"accept": "application/json, text/event-stream", **headers},
    )
    body = await answer.aread()
    found: list[dict[str, Any]] = []
    for line in body.splitlines():
        data = line[6:] if line.startswith(b"data: ") else line
        if data.startswith((b"{", b"[")):
            found.append(json.loads(data))
    return found


async def start_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """The headers of a new, initialized 2025-11-25 session at ``url``."""
    answer = await http.post(
        url, json=INIT, headers={"accept": "application/json, text/event-stream"}
    )
    await answer.aread()
    session = answer.headers.get("mcp-session-id")
    headers = {"mcp-session-id": session} if session else {}
    headers["mcp-protocol-version"] = "2025-11-25"
    await post(http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    return headers


async def wait_marked(mark: Path, timeout: float = START_TIMEOUT) -> int:
    """The pid of the worker whose encode began (polled: the mark is a file)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if mark.exists() and mark.read_text().strip():
            return int(mark.read_text().split()[0])
        await asyncio.sleep(0.02)
    raise AssertionError("the encode never began")


def assert_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), f"worker {pid} left behind"


@contextlib.contextmanager
def stuck_http(shape: str, *args: str, mark: Path) -> Iterator[str]:
    """An HTTP server shell (``gateway``/``command``) with the stuck codec; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-c", _PROXY, str(BUDGET), shape, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_stuck_env(mark),
        cwd=str(ROOT),
    )
    try:
        assert process.stderr is not None
        yield read_line(process.stderr, r"serving (http://\S+)", START_TIMEOUT).group(1)
    finally:
        stop_process(process)


async def ping_while_stuck(
    url: str, call: dict[str, Any], mark: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """Send ``call``, then (once its encode began) a ping in the same session: the ping's
    answer, the call's, and whether the call was still unanswered when the ping's came."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http:
        headers = await start_session(http, url)
        called = asyncio.create_task(post(http, url, call, headers))
        waiting = asyncio.create_task(wait_marked(mark))
        await asyncio.wait({called, waiting}, return_when=asyncio.FIRST_COMPLETED)
        assert not called.done(), await called  # answered before its encode even began
        await waiting
        pinged = await post(http, url, rpc(99, "ping"), headers)
        held = not called.done()
        return pinged, await called, held


def direct_orders(url: str) -> str:
    async def ask() -> str:
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = await start_session(http, url)
            answer = await post(http, url, tool_call(2, "orders", limit=12), headers)
            return str(answer[-1]["result"]["content"][0]["text"])

    return run(ask)


def test_the_gateway_answers_a_ping_while_a_result_is_rewritten(
    servers: Servers, tmp_path: Path
) -> None:
    url = servers.url("stateful")
    want = direct_orders(url)
    mark = tmp_path / "mark"
    with stuck_http("gateway", url, mark=mark) as gateway:
        pinged, answer, held = run(
            lambda: ping_while_stuck(gateway, tool_call(2, "orders", limit=12), mark)
        )
        assert pinged == [{"jsonrpc": "2.0", "id": 99, "result": {}}]
        assert held  # the ping did not wait for the encode (before: an hour)
        # Past the budget: the original bytes, as the server sent them.
        assert answer[-1]["result"]["content"][0]["text"] == want
        worker = int(mark.read_text().split()[0])
    assert_gone(worker)


def test_http_in_front_of_a_command_answers_a_ping_while_a_result_is_rewritten(
    tmp_path: Path,
) -> None:
    rows = json.dumps([{"id": i, "v": i} for i in range(50)], indent=2)
    mark = tmp_path / "mark"
    with stuck_http("command", sys.executable, FAULT_SERVER, mark=mark) as url:
        pinged, answer, held = run(
            lambda: ping_while_stuck(url, tool_call(2, "text", text=rows), mark)
        )
        assert pinged == [{"jsonrpc": "2.0", "id": 99, "result": {}}]
        assert held
        assert answer[-1]["result"]["content"][0]["text"] == rows

        # A 2026-07-28 request (the shared process) is rewritten in the pool too.
        async def modern() -> list[dict[str, Any]]:
            meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
            msg = rpc(3, "tools/call", {"name": "text", "arguments": {"text": rows}})
            msg["params"]["_meta"] = meta
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http:
                return await post(http, url, msg, {"mcp-protocol-version": "2026-07-28"})

        answer = run(modern)
        assert answer[-1]["id"] == 3
        assert answer[-1]["result"]["content"][0]["text"] == rows
        workers = [int(pid) for pid in mark.read_text().split()]
        assert len(workers) == 2  # the first stuck worker was killed, another one started
    for worker in workers:
        assert_gone(worker)


def test_upstream_answers_a_ping_while_a_result_is_rewritten(
    servers: Servers, tmp_path: Path
) -> None:
    url = servers.url("stateful")
    want = direct_orders(url)
    mark = tmp_path / "mark"

    async def session() -> list[dict[str, Any]]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _PROXY,
            str(BUDGET),
            "upstream",
            url,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_stuck_env(mark),
            cwd=str(ROOT),
            limit=1 << 24,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:

            def send(msg: dict[str, Any]) -> None:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(msg).encode() + b"\n")

            async def receive() -> dict[str, Any]:
                assert proc.stdout is not None
                got: dict[str, Any] = json.loads(await proc.stdout.readline())
                return got

            send(INIT)
            assert (await receive())["id"] == 1
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            send(tool_call(2, "orders", limit=12))
            await wait_marked(mark)
            send(rpc(99, "ping"))
            first, second = await receive(), await receive()
            proc.stdin.close()
            assert await asyncio.wait_for(proc.wait(), 30) == 0
            return [first, second]
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    first, second = run(session)
    assert first == {"jsonrpc": "2.0", "id": 99, "result": {}}  # not held up by the encode
    assert second["id"] == 2
    assert second["result"]["content"][0]["text"] == want  # past the budget: the original
    assert_gone(int(mark.read_text().split()[0]))


def test_the_pool_holds_no_session_up_behind_another_ones_stuck_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Session A's result never finishes encoding; session B's result, and A's next one,
    are rewritten meanwhile by the pool's other worker; A's stuck one goes out as it came
    at its deadline, and its worker is replaced."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests") + os.pathsep + str(ROOT / "src"))
    budget = 8.0  # B's and A's second results may wait for the second worker to start
    config = ProxyConfig(primer=False, stats=False, time_budget=budget, dense=())
    rows = json.dumps([{"id": i, "v": i} for i in range(50)])

    def line(msg_id: int, text: str) -> bytes:
        result = {"content": [{"type": "text", "text": text}]}
        return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}).encode() + b"\n"

    async def scenario() -> dict[str, Any]:
        offload = Offload(config, Codec(dumps=stuck_dumps), workers=2)
        assert await offload.start()
        first = set(offload.pids)
        try:
            a, b = offload.session(), offload.session()
            started = time.monotonic()
            stuck = asyncio.create_task(a.rewrite(line(1, rows), Call("t", "t"), "s"))
            await asyncio.sleep(0)  # A's result reaches the pool first
            other = await b.rewrite(line(2, "[1, 2]"), Call("t", "t"), "s")
            again = await a.rewrite(line(3, "[3, 4]"), Call("u", "u"), "s")
            meanwhile = time.monotonic() - started
            held = not stuck.done()
            with pytest.raises(OffloadFailed) as failed:
                await stuck
            # The stuck worker is killed and another one takes its place.
            for _ in range(600):
                if len(offload.pids) == 2 and set(offload.pids) != first:
                    break
                await asyncio.sleep(0.05)
            replaced = len(offload.pids) == 2 and len(first - set(offload.pids)) == 1
            return {
                "other": other,
                "again": again,
                "held": held,
                "meanwhile": meanwhile,
                "reason": failed.value.reason,
                "replaced": replaced,
                "strays": offload.strays,
            }
        finally:
            await offload.close()
            assert offload.pids == []

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        got = asyncio.run(asyncio.wait_for(scenario(), 120))
    # A killed worker reaped by the pool's own kill instead of the child watcher made it
    # log "Unknown child process" (to the proxy's stderr).
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
    # Rewritten (to compact JSON) meanwhile, by the other worker.
    assert json.loads(got["other"])["result"]["content"][0]["text"] == "[1,2]"
    assert json.loads(got["again"])["result"]["content"][0]["text"] == "[3,4]"  # stray
    assert got["held"], got
    assert got["reason"] == "time-budget"
    assert got["strays"] == 1
    assert got["replaced"]


# -- --capture-dir ---------------------------------------------------------------------------


def captured(root: Path) -> dict[str, list[tuple[str, Any]]]:
    """Per recorded session directory: its calls (tool, result)."""
    return {
        s.path.name: [(c.tool, c.result) for c in s.calls]
        for s in read_sessions(root)
        if s.calls or s.initialize
    }


async def sdk_calls(target: Any, mode: str) -> str:
    async with connect(target, mode) as client:
        return text(await client.call_tool("orders", {"limit": 12}))


def test_capture_dir_records_the_upstream_session(servers: Servers, tmp_path: Path) -> None:
    url = servers.url("stateful")
    want = direct_orders(url)
    cap = tmp_path / "cap"
    got = run(lambda: sdk_calls(upstream_params(url, "--capture-dir", str(cap)), "legacy"))
    assert got != want and got.startswith("GCF")  # rewritten for the client
    sessions = captured(cap)
    assert len(sessions) == 1, sessions
    [(tool, result)] = next(iter(sessions.values()))
    assert tool == "orders" and result["content"][0]["text"] == want  # the server's own


@pytest.mark.parametrize("shape", ["gateway", "command"])
def test_capture_dir_records_each_http_session(
    servers: Servers, tmp_path: Path, shape: str
) -> None:
    url = servers.url("stateful")
    want = direct_orders(url)
    cap = tmp_path / "cap"
    if shape == "gateway":
        args = ["--upstream", url]
    else:
        fixture = str(ROOT / "tests" / "http_fixture_server.py")
        args = ["--", sys.executable, fixture, "--stdio"]
    with gcfkit_http("--capture-dir", str(cap), *args) as proxy:
        for mode in ("legacy", "legacy", "2026-07-28"):
            assert run(functools.partial(sdk_calls, proxy, mode)).startswith("GCF")
    sessions = captured(cap)
    # Two sessions, each in its own directory, and the 2026-07-28 request in a third.
    assert len(sessions) == 3, sessions
    for calls in sessions.values():
        assert [(tool, result["content"][0]["text"]) for tool, result in calls] == [
            ("orders", want)
        ]


def test_an_initialize_again_in_a_gateway_session_leaves_no_recording_open(
    servers: Servers, tmp_path: Path
) -> None:
    """A client may start over in its session (``initialize`` with its ``Mcp-Session-Id``:
    the SDK's server answers it in the same session). The gateway opened a new recording
    and lane for it and left the first ones open (a writer thread, a worker's state) with
    nothing to ever close them; ``DELETE`` must leave no recording of the session open."""
    url = servers.url("stateful")
    before = {t for t in threading.enumerate() if t.name == "gcfkit-capture"}
    app = build_gateway(url, CONFIG, capture=lambda: Capture(tmp_path / "cap"))
    background = Background()
    try:
        gateway = background.serve(app) + "/stateful/mcp"

        async def twice() -> int:
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http:
                headers = await start_session(http, gateway)
                again = await post(http, gateway, INIT, headers)
                assert again[-1]["result"]["serverInfo"], again
                ended = await http.delete(gateway, headers=headers)
                status: int = ended.status_code
                return status

        assert run(twice) in (200, 204)
        # Recordings are closed in a thread (bounded): wait for their writers to end.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = [t for t in threading.enumerate() if t.name == "gcfkit-capture"]
            if not set(left) - before:
                break
            time.sleep(0.05)
        assert not set(left) - before, "a recording of the ended session is still open"
    finally:
        background.close()


# A stdio server that reports progress on a request after the client cancelled it (its
# notification crosses the cancellation), then answers the other request in flight.
_LATE_PROGRESS_SERVER = r"""
import json, sys
waiting = []
for raw in sys.stdin:
    msg = json.loads(raw)
    if msg.get("method") == "tools/call":
        waiting.append(msg)
    elif msg.get("method") == "notifications/cancelled":
        token = msg["params"]["requestId"]
        note = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "message": "secret"}}
        print(json.dumps(note), flush=True)
        for other in waiting:
            if other["id"] != token:
                result = {"content": [{"type": "text", "text": "done"}]}
                print(json.dumps({"jsonrpc": "2.0", "id": other["id"], "result": result}),
                      flush=True)
"""


def test_a_cancelled_2026_requests_late_progress_goes_to_no_other_client() -> None:
    """Two clients' 2026-07-28 requests share the process; A closes its stream (the proxy
    cancels the request) while the server is reporting progress on it. That notification
    names A's request: it went to B, the one request left in flight, as if it named none."""

    def call(token: str) -> str:
        params = {"name": "t", "arguments": {}, "_meta": {"progressToken": token}}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})

    async def scenario() -> list[bytes]:
        shared = SharedServer([sys.executable, "-c", _LATE_PROGRESS_SERVER], CONFIG, None)
        assert await shared.start()
        try:
            a = await shared.send(call("a").encode(), 1)
            b = await shared.send(call("b").encode(), 1)  # clients number alike
            assert a is not None and b is not None
            stream = shared.events(*a)
            closed = asyncio.create_task(stream.__anext__())
            await asyncio.sleep(0)  # A's stream is open, waiting
            closed.cancel()  # A's client goes away: its request is cancelled
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await closed
            await stream.aclose()
            got = []
            async for data in shared.events(*b):
                got.append(data)
            return got
        finally:
            await shared.stop()

    got = run(scenario)
    assert [json.loads(d) for d in got] == [
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "done"}]}}
    ]


# A stdio server whose child leaves its process group with the server's stdout: stopping
# the server's group leaves the pipe open. It answers initialize, never a tools/call.
_STRAY_CHILD_SERVER = r"""
import json, os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
with open(os.environ["GCFKIT_TEST_CHILD"], "w") as f:
    f.write(str(child.pid))
for raw in sys.stdin:
    msg = json.loads(raw)
    if msg.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stray", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def test_delete_ends_the_sessions_streams_when_a_stray_holds_the_servers_stdout(
    tmp_path: Path,
) -> None:
    """``DELETE`` stops the session's process; its stdout stays open (a child that left the
    group holds it), so the session's reader is given up on. The request still waiting on
    its stream got nothing, and its stream stayed open for good (kept alive by comments)."""
    pidfile = tmp_path / "child.pid"
    script = str(tmp_path / "server.py")
    Path(script).write_text(_STRAY_CHILD_SERVER)
    proxy = gcfkit_http(
        "--grace",
        "0.5",
        "--",
        sys.executable,
        script,
        extra_env={"GCFKIT_TEST_CHILD": str(pidfile)},
    )
    try:
        with proxy as url:

            async def session() -> list[dict[str, Any]]:
                async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http:
                    headers = await start_session(http, url)
                    accept = {"accept": "application/json, text/event-stream", **headers}
                    call = tool_call(2, "t")
                    async with http.stream("POST", url, json=call, headers=accept) as stream:
                        # Its headers came: the call is written to the server (no answer).
                        ended = await http.delete(url, headers=headers)
                        assert ended.status_code == 200
                        body = await asyncio.wait_for(stream.aread(), 30)
                lines = [line[6:] for line in body.splitlines() if line.startswith(b"data: ")]
                return [json.loads(line) for line in lines]

            answer = run(session)
        assert [m.get("id") for m in answer] == [2]
        assert "error" in answer[0], answer
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), 9)
