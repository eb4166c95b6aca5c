"""Gateway replicas sharing sessions' remembered results in Redis (``--state``,
gcfkit.transports.state): a ``_since`` naming a result one replica answered is answered
``@@ unchanged`` by another. A real ``redis-server`` on a loopback port of the OS's choosing
(no persistence, a temporary directory); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gcfkit import relative
from gcfkit.proxy.core import SINCE_ARGUMENT
from gcfkit.proxy.held import Kept, MemoryReport
from gcfkit.transports.state import RedisState, session_key
from tests.http_support import (
    ACCEPT,
    INIT,
    fixture_base,
    gcfkit_http,
    start_fixture,
    stop_process,
)

REDIS = shutil.which("redis-server")
VERSION = "2025-11-25"  # INIT's
pytestmark = pytest.mark.skipif(REDIS is None, reason="redis-server is not installed")


def loopback_port() -> int:
    # Redis takes --port 0 as "no TCP", so the OS picks a port here and Redis binds it.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert REDIS is not None
    folder: Path = tmp_path_factory.mktemp("redis")
    port = loopback_port()
    process = subprocess.Popen(
        [
            REDIS,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert process.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not listen in 30 s"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_process(process)


def kept(handle: str, size: int) -> Kept:
    return Kept(handle, "t", "{}", "text", handle * size, size, 0)


def test_the_store_bounds_bytes_expires_and_keeps_spent_handles(redis_url: str) -> None:
    async def scenario() -> None:
        store = RedisState(redis_url, max_bytes=100, ttl=30)
        try:
            memory = MemoryReport(
                ("a", "b", "c"), (kept("a", 60), kept("b", 30), kept("c", 40)), {"t {}": "c"}
            )
            stamp = await store.save("session-1", memory, ["a", "b", "c", "z"])
            assert stamp and await store.stamp("session-1") == stamp
            stored = await store.load("session-1")
            assert stored is not None and stored.stamp == stamp
            # 130 bytes over a bound of 100: the least recently used ("a") goes.
            assert stored.memory.order == ("b", "c")
            assert [k.text for k in stored.memory.new] == ["b" * 30, "c" * 40]
            assert stored.memory.latest == {"t {}": "c"}
            assert stored.spent == ("a", "b", "c", "z")  # never issued again
            ttl = await store._client.ttl(session_key("session-1"))
            assert 0 < ttl <= 30
            # The raw id is not a key: only its hash is.
            assert await store._client.exists("session-1") == 0
            assert await store.save("session-1", MemoryReport(), []) != stamp
            await store.drop("session-1")
            assert await store.load("session-1") is None
            assert await store.load("never-seen") is None
        finally:
            await store.aclose()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_store_that_is_down_costs_nothing_but_the_copy() -> None:
    async def scenario() -> None:
        store = RedisState(f"redis://127.0.0.1:{loopback_port()}/0", max_bytes=100, ttl=30)
        try:
            assert await store.load("s") is None
            assert await store.save("s", MemoryReport(), []) == ""
        finally:
            await store.aclose()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def messages(response: httpx2.Response) -> list[Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [
            json.loads(line[5:])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    return [response.json()]


def call(client: httpx2.Client, url: str, sid: str, n: int, arguments: dict[str, Any]) -> list[str]:
    body = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": "orders", "arguments": arguments},
    }
    headers = {
        **ACCEPT,
        "mcp-session-id": sid,
        "mcp-protocol-version": VERSION,
    }
    response = client.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    (answer,) = [m for m in messages(response) if m.get("id") == n]
    return [b["text"] for b in answer["result"]["content"] if b.get("type") == "text"]


def handle_of(texts: list[str]) -> str:
    refs = [r for r in map(relative.ref_of, texts) if r is not None]
    assert len(refs) == 1, texts[0][:300]
    return refs[0]


def test_a_since_issued_by_one_replica_is_answered_by_another(redis_url: str) -> None:
    fixture = start_fixture()
    try:
        upstream = f"{fixture_base(fixture)}/stateful/mcp"
        options = ("--min-bytes", "0", "--state", redis_url, "--upstream", upstream)
        with (
            gcfkit_http(*options) as a,
            gcfkit_http(*options) as b,
            httpx2.Client(timeout=60) as client,
        ):
            response = client.post(a, json=INIT, headers=ACCEPT)
            assert response.status_code == 200, response.text
            sid = response.headers["mcp-session-id"]
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            version = VERSION
            client.post(
                a,
                json=initialized,
                headers={**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": version},
            )
            first = call(client, a, sid, 2, {"limit": 20})
            handle = handle_of(first)
            again = call(client, b, sid, 3, {"limit": 20, SINCE_ARGUMENT: handle})
            assert again[0].startswith("@@ unchanged"), again[0][:300]
            # And back: replica A takes the copy replica B wrote (a new handle, not reissued).
            later = call(client, b, sid, 4, {"limit": 5})
            other = handle_of(later)
            assert other != handle
            back = call(client, a, sid, 5, {"limit": 5, SINCE_ARGUMENT: other})
            assert back[0].startswith("@@ unchanged"), back[0][:300]
    finally:
        stop_process(fixture)
