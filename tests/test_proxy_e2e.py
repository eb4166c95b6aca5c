"""End to end: the official MCP SDK client, through ``python -m gcfkit.cli proxy``, to real
servers (the bundled demo server, mcp-server-time, mcp-server-git). Loopback stdio only;
every await is bounded so a broken proxy fails a test instead of hanging it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

import gcfkit
from gcfkit.answers.primer import PRIMER, RELATIVE_PRIMER
from gcfkit.jsonio import same_value
from tests.conformance import GCF_HEADS

mcp = pytest.importorskip("mcp")
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "examples" / "demo_server.py")
sys.path.insert(0, str(ROOT / "examples"))
import demo_server  # noqa: E402

T = TypeVar("T")
TIMEOUT = 60.0


def run(coro_fn: Callable[[], Awaitable[T]], timeout: float = TIMEOUT) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(bounded())


def proxy_args(server: list[str], *options: str) -> list[str]:
    # A generous time budget: a loaded test machine must not turn rewrites into fallbacks.
    return [
        "-m",
        "gcfkit.cli",
        "proxy",
        "--no-stats",
        "--time-budget",
        "30",
        *options,
        "--",
        *server,
    ]


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    return out


@asynccontextmanager
async def session(
    server: list[str], *options: str, proxied: bool = True, errlog: Any = None, **kw: Any
) -> AsyncIterator[ClientSession]:
    if proxied:
        params = StdioServerParameters(
            command=sys.executable, args=proxy_args(server, *options), env=env(), cwd=str(ROOT)
        )
    else:
        params = StdioServerParameters(command=server[0], args=server[1:], env=env(), cwd=str(ROOT))
    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write, **kw) as s,
    ):
        await s.initialize()
        yield s


def texts(result: Any) -> list[str]:
    return [b.text for b in result.content if b.type == "text"]


def decode(text: str) -> Any:
    if text.startswith("GCF-dense"):
        import importlib

        return importlib.import_module("gcfkit.dense").loads(text)
    return gcfkit.loads(text) if text.startswith("GCF profile=generic") else json.loads(text)


# --------------------------------------------------------------------------------------
# The demo server
# --------------------------------------------------------------------------------------

DEMO_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_orders", {"limit": 20}),
    ("search", {"query": "refund"}),
    ("report", {}),
    ("hello", {"name": "Ada"}),
    ("fail", {}),
    ("inventory", {}),
]


def test_demo_results_are_lossless_and_the_rest_unchanged() -> None:
    async def body() -> None:
        server = [sys.executable, DEMO]
        async with session(server, proxied=False) as direct:
            want_tools = (await direct.list_tools()).model_dump()
            want = {name: await direct.call_tool(name, args) for name, args in DEMO_CALLS}
        async with session(server) as proxied:
            assert proxied.instructions is not None
            assert proxied.instructions.startswith("Order desk demo")
            # How to ask for relative answers up front; how to read GCF in each payload.
            assert RELATIVE_PRIMER in proxied.instructions and PRIMER not in proxied.instructions
            assert (await proxied.list_tools()).model_dump() == want_tools
            got = {name: await proxied.call_tool(name, args) for name, args in DEMO_CALLS}

        for name in ("list_orders", "search", "report"):
            (sent,) = texts(want[name])
            (delivered,) = texts(got[name])
            assert same_value(decode(delivered), json.loads(sent)), name
            assert len(delivered) < len(sent)
        assert texts(got["list_orders"])[0].startswith(GCF_HEADS)
        assert texts(got["search"])[0].startswith(GCF_HEADS)
        # Non-JSON text and error results arrive exactly as sent.
        assert got["hello"].model_dump() == want["hello"].model_dump()
        assert got["fail"].model_dump() == want["fail"].model_dump()
        assert got["fail"].is_error
        # Four JSON-object blocks arrive as one array.
        (joined,) = texts(got["inventory"])
        assert same_value(decode(joined), [json.loads(t) for t in texts(want["inventory"])])

    run(body)


def test_200_concurrent_calls_get_their_own_answers() -> None:
    async def body() -> None:
        async with session([sys.executable, DEMO]) as s:
            queries = [f"q{i}" for i in range(200)]
            results = await asyncio.gather(*(s.call_tool("search", {"query": q}) for q in queries))
        for q, result in zip(queries, results, strict=True):
            (text,) = texts(result)
            assert same_value(decode(text), demo_server.search(q))

    run(body, timeout=120)


def test_progress_and_server_to_client_requests_are_relayed() -> None:
    async def body() -> None:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        async def roots(context: Any) -> Any:
            from mcp import types
            from pydantic import FileUrl

            return types.ListRootsResult(
                roots=[types.Root(uri=FileUrl("file:///tmp/w"), name="work")]
            )

        async with session([sys.executable, DEMO], list_roots_callback=roots) as s:
            result = await s.call_tool("search", {"query": "x"}, progress_callback=on_progress)
            assert same_value(decode(texts(result)[0]), demo_server.search("x"))
            answer = await s.call_tool("ask_roots", {})
        assert seen == [1, 2]
        assert decode(texts(answer)[0]) == [{"uri": "file:///tmp/w", "name": "work"}]

    run(body)


def test_server_crash_mid_call_is_an_error_not_a_hang(tmp_path: Path) -> None:
    errlog = (tmp_path / "stderr.txt").open("w+")

    async def body() -> None:
        async with session([sys.executable, DEMO], errlog=errlog) as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("crash", {})
            assert "exited with status 3" in e.value.error.message

    run(body)
    errlog.seek(0)
    assert "demo_server: crashing on purpose" in errlog.read()  # stderr passes through


def test_file_read_then_exact_edit_through_the_proxy(tmp_path: Path) -> None:
    package = (
        '{\n  "name": "demo",\n  "version": "1.0.0",\n'
        '  "dependencies": {\n    "left-pad": "^1.3.0"\n  }\n}\n'
    )
    (tmp_path / "package.json").write_text(package)

    async def body() -> None:
        async with session([sys.executable, DEMO, "--root", str(tmp_path)]) as s:
            shown = texts(await s.call_tool("read_text_file", {"path": "package.json"}))[0]
            assert shown == package
            old = next(x for x in shown.splitlines() if "left-pad" in x)
            edit = {"path": "package.json", "oldText": old, "newText": old.replace("3", "4")}
            result = await s.call_tool("edit_file", edit)
            assert not result.is_error, texts(result)

    run(body)
    assert '"left-pad": "^1.4.0"' in (tmp_path / "package.json").read_text()


def test_decode_args_and_format_argument() -> None:
    async def body() -> None:
        server = [sys.executable, DEMO]
        async with session(server, "--decode-args", "--advertise-format") as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert "_format" in tools["list_orders"].input_schema["properties"]
            wire = gcfkit.dumps(demo_server.orders(3))
            created = await s.call_tool("create_orders", {"orders": wire, "memo": wire})
            assert texts(created) == ["created 3 orders"]
            plain = await s.call_tool("list_orders", {"limit": 5, "_format": "json"})
            assert json.loads(texts(plain)[0]) == demo_server.orders(5)
            assert texts(plain)[0].startswith("[{")
        async with session(server) as s:
            # Without --decode-args the GCF string reaches the server as a string.
            refused = await s.call_tool("create_orders", {"orders": wire})
            assert refused.is_error

    run(body)


def test_client_opts_out_for_the_session() -> None:
    # The SDK client sends no experimental capabilities, so speak the handshake by hand.
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"experimental": {"output_format": "json"}},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "list_orders", "arguments": {"limit": 4}},
    }
    lines = raw_exchange([init, call], expect=2)
    by_id = {m["id"]: m for m in lines}
    assert PRIMER not in by_id[0]["result"]["instructions"]
    text = by_id[1]["result"]["content"][0]["text"]
    assert text == json.dumps(demo_server.orders(4), separators=(",", ":"))


def raw_exchange(messages: list[dict[str, Any]], expect: int, *options: str) -> list[Any]:
    """Write ``messages`` to the proxied demo server, read ``expect`` lines, close stdin."""
    proc = subprocess.Popen(
        [sys.executable, *proxy_args([sys.executable, DEMO], *options)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env(),
        cwd=str(ROOT),
    )
    try:
        data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(data)
        proc.stdin.flush()
        out = [json.loads(proc.stdout.readline()) for _ in range(expect)]
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_exit_status_is_the_servers() -> None:
    code = "import sys; sys.stdin.readline(); sys.exit(7)"
    proc = subprocess.run(
        [sys.executable, *proxy_args([sys.executable, "-c", code])],
        input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        capture_output=True,
        env=env(),
        timeout=60,
    )
    assert proc.returncode == 7
    (line,) = proc.stdout.splitlines()
    error = json.loads(line)
    assert error["id"] == 1 and error["error"]["code"] == -32000


def test_client_eof_stops_a_server_that_ignores_it() -> None:
    # The server never reads stdin and never exits by itself: SIGTERM must end it.
    code = "import time\nwhile True: time.sleep(1)"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gcfkit.cli",
            "proxy",
            "--no-stats",
            "--",
            sys.executable,
            "-c",
            code,
        ],
        input=b"",
        capture_output=True,
        env=env(),
        timeout=60,
    )
    assert proc.returncode == 128 + 15


ECHO = (
    "import sys\n"
    "for line in sys.stdin.buffer:\n"
    "    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()"
)


def test_64_mb_message_flows_both_ways() -> None:
    big = "x" * (64 * 1024 * 1024)
    message = json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": big}}
    )
    data = message.encode() + b"\n"

    async def body() -> bytes:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *proxy_args([sys.executable, "-c", ECHO]),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env(),
            limit=256 * 1024 * 1024,
        )
        assert proc.stdin is not None and proc.stdout is not None

        async def feed() -> None:
            assert proc.stdin is not None
            proc.stdin.write(data)
            await proc.stdin.drain()

        feeder = asyncio.create_task(feed())
        echoed = await proc.stdout.readline()
        await feeder
        proc.stdin.close()
        await proc.wait()
        return echoed

    assert run(body, timeout=120) == data


# --------------------------------------------------------------------------------------
# Real servers: mcp-server-time and mcp-server-git
# --------------------------------------------------------------------------------------


def test_mcp_server_time() -> None:
    pytest.importorskip("mcp_server_time")

    async def body() -> None:
        server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
        async with session(server) as s:
            now = await s.call_tool("get_current_time", {"timezone": "UTC"})
            (text,) = texts(now)
            value = decode(text)
            assert value["timezone"] == "UTC"
            assert now.structured_content is None or now.structured_content == value
            args = {"source_timezone": "UTC", "time": "14:30", "target_timezone": "Asia/Tokyo"}
            converted = await s.call_tool("convert_time", args)
            assert decode(texts(converted)[0])["target"]["timezone"] == "Asia/Tokyo"
            bad = await s.call_tool("get_current_time", {"timezone": "Mars/Olympus_Mons"})
            assert bad.is_error
        async with session(server, proxied=False) as direct:
            want = await direct.call_tool("convert_time", args)
        assert same_value(decode(texts(converted)[0]), json.loads(texts(want)[0]))

    run(body)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    genv = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
        "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z",
        "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z",
    }

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=genv, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    for i in range(3):
        (repo / "notes.txt").write_text("".join(f"line {j}\n" for j in range(i + 2)))
        (repo / "data.json").write_text(json.dumps({"version": i, "items": list(range(i))}))
        git("add", "notes.txt", "data.json")
        git("commit", "-q", "-m", f"commit {i}")
    (repo / "notes.txt").write_text("changed\n")
    return repo


def test_mcp_server_git(git_repo: Path) -> None:
    pytest.importorskip("mcp_server_git")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("git_status", {"repo_path": str(git_repo)}),
        ("git_log", {"repo_path": str(git_repo), "max_count": 5}),
        ("git_diff_unstaged", {"repo_path": str(git_repo)}),
        ("git_show", {"repo_path": str(git_repo), "revision": "HEAD"}),
        ("git_show", {"repo_path": str(git_repo), "revision": "deadbeefcafe"}),
    ]

    async def body() -> None:
        server = [sys.executable, "-m", "mcp_server_git", "--repository", str(git_repo)]
        async with session(server, proxied=False) as direct:
            want_tools = (await direct.list_tools()).model_dump()
            want = [await direct.call_tool(n, a) for n, a in calls]
        async with session(server) as proxied:
            assert (await proxied.list_tools()).model_dump() == want_tools
            got = [await proxied.call_tool(n, a) for n, a in calls]
        # git results are plain text: they arrive exactly as the server wrote them.
        for (name, _), w, g in zip(calls, want, got, strict=True):
            assert g.model_dump() == w.model_dump(), name
        assert "commit 2" in texts(got[1])[0]

    run(body)


def test_regular_files_and_dev_null_as_client_streams(tmp_path: Path) -> None:
    requests = tmp_path / "in.jsonl"
    call = {"name": "search", "arguments": {"query": "files"}}
    requests.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        + "\n"
    )
    replies = tmp_path / "out.jsonl"
    command = [sys.executable, *proxy_args([sys.executable, DEMO])]
    with requests.open("rb") as stdin, replies.open("wb") as stdout:
        code = subprocess.run(command, stdin=stdin, stdout=stdout, env=env(), timeout=60)
    assert code.returncode == 0
    ping, result = (json.loads(x) for x in replies.read_text().splitlines())
    assert ping == {"jsonrpc": "2.0", "id": 1, "result": {}}
    text = result["result"]["content"][0]["text"]
    assert same_value(decode(text), demo_server.search("files"))
    # stdin from /dev/null is an immediate EOF, not a read that never returns.
    with open(os.devnull, "rb") as stdin:
        done = subprocess.run(command, stdin=stdin, capture_output=True, env=env(), timeout=60)
    assert done.returncode == 0 and done.stdout == b""


def test_delta_through_the_proxy_reconstructs_every_turn() -> None:
    keyed = pytest.importorskip("gcfkit.keyed")

    async def body() -> list[str]:
        async with session([sys.executable, DEMO], "--delta") as s:
            return [texts(await s.call_tool("stock", {}))[0] for _ in range(4)]

    delivered = run(body)
    held = None
    for turn, text in enumerate(delivered, start=1):
        head = text.split("\n", 1)[0].split(" ")
        if "delta=true" in head:
            held = keyed.apply_delta(held, keyed.loads_delta(text))
        else:
            rows = decode(text)
            held = keyed.KeyedSet("id", list(rows[0]), rows)
        want = sorted(demo_server.stock(turn), key=lambda r: r["id"])
        assert sorted(held.rows, key=lambda r: r["id"]) == want
    assert ["delta=true" in t.split("\n", 1)[0] for t in delivered] == [False, True, True, True]


def test_cli_options_policy_and_no_primer(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"tools": {"list_*": {"format": "json"}}}))
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
    }
    calls = [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate([("list_orders", {"limit": 6}), ("search", {"query": "q"})], 1)
    ]
    out = raw_exchange([init, *calls], 3, "--no-primer", "--policy", str(policy))
    by_id = {m["id"]: m for m in out}
    assert by_id[0]["result"]["instructions"] == "Order desk demo: orders, search, reports."
    orders = by_id[1]["result"]["content"][0]["text"]
    assert orders == json.dumps(demo_server.orders(6), separators=(",", ":"))
    found = by_id[2]["result"]["content"][0]["text"]
    assert found.startswith(GCF_HEADS)
    assert same_value(decode(found), demo_server.search("q"))
    bad = subprocess.run(
        [sys.executable, *proxy_args([sys.executable, DEMO], "--policy", str(tmp_path / "no"))],
        capture_output=True,
        env=env(),
        timeout=60,
    )
    assert bad.returncode == 2 and b"cannot read policy" in bad.stderr


def test_the_ledger_gets_one_payload_free_record_per_tool_result(tmp_path: Path) -> None:
    from gcfkit.ledger import read_entries

    ledger = tmp_path / "ledger.jsonl"
    calls = [("list_orders", {"limit": 8}), ("hello", {"name": "Zed-7731"}), ("fail", {})]
    messages = [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(calls)
    ]
    command = [sys.executable, "-m", "gcfkit.cli", "proxy", "--ledger", str(ledger)]
    command += ["--time-budget", "30", "--name", "demo", "--", sys.executable, DEMO]
    data = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    done = subprocess.run(command, input=data, capture_output=True, env=env(), timeout=60)
    assert done.returncode == 0
    assert len(done.stdout.splitlines()) == 3
    records = [e.record for e in read_entries(ledger)]
    assert [(r.server, r.tool) for r in records] == [("demo", n) for n, _ in calls]
    assert records[0].decision in ("gcf", "dense")
    assert records[0].tokens_after < records[0].tokens_before
    assert [r.decision for r in records[1:]] == ["unchanged", "unchanged"]
    assert b"Zed-7731" not in ledger.read_bytes() and b"Ada" not in ledger.read_bytes()


def test_split_lines_reassembles_any_chunking() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gcfkit.transports.stdio import split_lines

    @settings(max_examples=80, deadline=None, derandomize=True)
    @given(st.lists(st.binary(max_size=40), max_size=12), st.lists(st.integers(1, 17), min_size=1))
    def check(pieces: list[bytes], sizes: list[int]) -> None:
        data = b"".join(p.replace(b"\n", b"") + b"\n" for p in pieces) + b"tail"
        chunks: list[bytes] = []
        at = 0
        while at < len(data):
            n = sizes[len(chunks) % len(sizes)]
            chunks.append(data[at : at + n])
            at += n
        chunks.append(b"")

        async def read(n: int) -> bytes:
            return chunks.pop(0)

        async def collect() -> list[bytes]:
            return [line async for line in split_lines(read)]

        lines = asyncio.run(collect())
        assert b"".join(lines) == data
        assert all(x.endswith(b"\n") for x in lines[:-1]) and lines[-1] == b"tail"

    check()


@contextlib.contextmanager
def proxy_over(server_code: str) -> Iterator[tuple[subprocess.Popen[bytes], list[int]]]:
    """`gcfkit proxy --grace 0.5` in front of `python -c server_code`, as a subprocess.

    Yields the proxy and a list the test may append stray pids to; on the way out the
    proxy and every listed pid are killed, so no test leaves a process behind.
    """
    command = [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--grace", "0.5"]
    proc = subprocess.Popen(
        [*command, "--", sys.executable, "-c", server_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env(),
    )
    strays: list[int] = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        yield proc, strays
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pid in strays:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(1)"
    )
    with proxy_over(code) as (proc, _):
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == b"ready\n"  # SIGTERM is ignored from here on
        proc.stdin.close()
        assert proc.wait(timeout=30) == 128 + 9


def test_shutdown_reaches_the_servers_children() -> None:
    # A launcher-style server: the real work happens in a child that never reads stdin.
    child = "import time\nwhile True: time.sleep(1)"
    launcher = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "print(p.pid, flush=True)\n"
        "while True: time.sleep(1)"
    )
    with proxy_over(launcher) as (proc, strays):
        assert proc.stdout is not None and proc.stdin is not None
        grandchild = int(proc.stdout.readline())
        strays.append(grandchild)
        proc.stdin.close()
        proc.wait(timeout=30)
        for _ in range(100):  # bounded: up to 5 s for the group to be reaped
            try:
                os.kill(grandchild, 0)
            except ProcessLookupError:
                break
            if Path(f"/proc/{grandchild}/stat").exists():
                state = Path(f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state == "Z":
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the server's child outlived the proxy")


def test_a_stray_child_holding_stdout_does_not_hang_the_proxy() -> None:
    # The child leaves the server's process group and keeps the stdout pipe open.
    child = "import os, time\nos.setsid()\nwhile True: time.sleep(1)"
    server = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        "print(p.pid, flush=True)\n"
        "sys.stdin.read()\n"  # exits on stdin EOF, leaving the child behind
    )
    with proxy_over(server) as (proc, strays):
        assert proc.stdout is not None and proc.stdin is not None
        strays.append(int(proc.stdout.readline()))
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + 15)])
def test_signalling_the_proxy_stops_the_server(sig: int, status: int) -> None:
    code = "import os, time\nprint(os.getpid(), flush=True)\nwhile True: time.sleep(1)"
    with proxy_over(code) as (proc, strays):
        assert proc.stdout is not None
        server = int(proc.stdout.readline())
        strays.append(server)
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == status
        stat = Path(f"/proc/{server}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_server_that_closes_stdout_but_lives_on_is_stopped() -> None:
    code = "import os, sys, time\nsys.stdin.readline()\nos.close(1)\nwhile True: time.sleep(1)"
    with proxy_over(code) as (proc, _):
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","id":"q","method":"tools/list"}\n')
        proc.stdin.flush()
        error = json.loads(proc.stdout.readline())  # answered by the proxy, not left hanging
        assert error["id"] == "q" and error["error"]["code"] == -32000
        assert proc.wait(timeout=30) == 128 + 15


def test_relative_answers_through_the_sdk_client(git_repo: Path) -> None:
    """A client that passes _since gets @@ unchanged, @@ edit (git's text) and full results
    for other arguments, through the real SDK client, the proxy CLI and real servers."""
    pytest.importorskip("mcp_server_git")
    from gcfkit import relative

    log_args: dict[str, Any] = {"repo_path": str(git_repo), "max_count": 5}

    def commit(message: str) -> None:
        when = {
            "GIT_AUTHOR_DATE": "2026-01-03T03:04:05Z",
            "GIT_COMMITTER_DATE": "2026-01-03T03:04:05Z",
        }
        people = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org"}
        people |= {"GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org"}
        subprocess.run(
            ["git", "commit", "-q", "--allow-empty", "-m", message],
            cwd=git_repo, env={**os.environ, **when, **people}, check=True, capture_output=True,
        )  # fmt: skip

    async def body() -> None:
        git = [sys.executable, "-m", "mcp_server_git", "--repository", str(git_repo)]
        async with session(git, "--refs", "all") as s:
            assert s.instructions is None or "_since" in s.instructions
            log, block = texts(await s.call_tool("git_log", log_args))
            handle = relative.ref_of(block)
            assert handle is not None and block == f"ref={handle}"
            again = texts(await s.call_tool("git_log", {**log_args, "_since": handle}))
            assert again == [f"@@ unchanged tool=git_log since={handle}\n"]
            commit("commit 3")
            (edit,) = texts(await s.call_tool("git_log", {**log_args, "_since": handle}))
            assert edit.startswith(f"@@ edit tool=git_log since={handle} ref=")
            other = texts(await s.call_tool("git_log", {**log_args, "max_count": 2}))
            assert not other[0].startswith("@@") and relative.ref_of(other[1]) is not None
        async with session(git, proxied=False) as direct:
            (now,) = texts(await direct.call_tool("git_log", log_args))
        reader = relative.Reader()
        reader.hold(handle, log, text=True)
        assert reader.read(edit) == now
        assert "commit 3" in now

        async with session([sys.executable, DEMO]) as s:
            (full,) = texts(await s.call_tool("list_orders", {"limit": 20}))
            handle = relative.ref_of(full)
            assert handle is not None and full.split("\n", 1)[0].endswith(f" ref={handle}")
            assert full.startswith(GCF_HEADS)
            same = texts(await s.call_tool("list_orders", {"limit": 20, "_since": handle}))
            assert same == [f"@@ unchanged tool=list_orders since={handle}\n"]
            (fresh,) = texts(await s.call_tool("list_orders", {"limit": 5, "_since": handle}))
            assert fresh.startswith(GCF_HEADS) and " ref=" in fresh.split("\n", 1)[0]
            assert same_value(decode(fresh), demo_server.orders(5))

    run(body)
