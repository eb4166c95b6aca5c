"""Gateway replicas sharing sessions' remembered results in Redis (``--state``,
gcfkit.transports.state): a ``_since`` naming a result one replica answered is answered
``@@ unchanged`` by another. A real ``redis-server`` on a loopback port of the OS's choosing
(no persistence, a temporary directory); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

import gcfkit
from gcfkit import relative
from gcfkit.proxy.core import SINCE_ARGUMENT
from gcfkit.proxy.held import Kept, MemoryReport
from gcfkit.transports.state import RedisState, caller_key, ref_key, session_key
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
            read = Kept("c", "read_file", "{}", "file", "c" * 40, 40, 0)
            memory = MemoryReport(
                ("a", "b", "c"), (kept("a", 60), kept("b", 30), read), {"t {}": "c"}
            )
            stamp = await store.save("session-1", memory, ["a", "b", "c", "z"], "claude-code")
            assert stamp and await store.stamp("session-1") == stamp
            stored = await store.load("session-1")
            assert stored is not None and stored.stamp == stamp
            # 130 bytes over a bound of 100: the least recently used ("a") goes.
            assert stored.memory.order == ("b", "c")
            assert [k.text for k in stored.memory.new] == ["b" * 30, "c" * 40]
            assert stored.memory.new[1].kind == "file" and stored.client == "claude-code"
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


# ---------------------------------------------------------------------------------------
# Requests of no session, the client's declared name, and a round-robin relay
# ---------------------------------------------------------------------------------------

MODERN = "2026-07-28"
MODERN_HEADERS = {
    **ACCEPT,
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "orders",
}


def modern_call(n: int, arguments: dict[str, Any], client: str = "t") -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` of ``orders``: no session, everything in its ``_meta``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "orders", "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def init_as(client: str) -> dict[str, Any]:
    params: dict[str, Any] = dict(INIT["params"])  # type: ignore[call-overload]
    return {**INIT, "params": {**params, "clientInfo": {"name": client, "version": "1"}}}


class RoundRobin:
    """An HTTP relay on a loopback port of the OS's choosing, as a load balancer without
    affinity: each request goes to the next replica. One request per connection (it is
    sent on with ``connection: close`` and its answer read to the end), so a client's
    kept-alive connection never pins it to one replica."""

    def __init__(self, replicas: list[str]) -> None:
        self.replicas = [urlsplit(url) for url in replicas]
        self.turn = 0
        #: (replica, request body), in the order the requests came.
        self.log: list[tuple[int, bytes]] = []
        self.server: asyncio.Server | None = None

    async def start(self, path: str) -> str:
        self.server = await asyncio.start_server(self.relay, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}{path}"

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
            writer.close()
            return
        try:
            first, *lines = head[:-4].split(b"\r\n")
            headers = [h for h in lines if h.split(b":")[0].strip().lower() != b"connection"]
            length = 0
            for line in headers:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await asyncio.wait_for(reader.readexactly(length), 30)
            index = self.turn % len(self.replicas)
            self.turn += 1
            self.log.append((index, body))
            target = self.replicas[index]
            assert target.hostname is not None and target.port is not None
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(target.hostname, target.port), 30
            )
            try:
                request = b"\r\n".join([first, *headers, b"connection: close", b"", b""])
                up_writer.write(request + body)
                await up_writer.drain()
                answer = await asyncio.wait_for(up_reader.read(), 90)  # to the end
            finally:
                up_writer.close()
            writer.write(answer)
            await writer.drain()
        finally:
            writer.close()


async def apost(
    http: httpx2.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> list[Any]:
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code in (200, 202), response.text
    return messages(response) if response.status_code == 200 else []


def texts_of(found: list[Any], n: int) -> list[str]:
    (answer,) = [m for m in found if isinstance(m, dict) and m.get("id") == n]
    return [b["text"] for b in answer["result"]["content"] if b.get("type") == "text"]


def orders_of(texts: list[str]) -> Any:
    """The orders a full answer carries (GCF or JSON; its ref= block aside)."""
    (body,) = [t for t in texts if relative.ref_of(t) is None or not t.startswith("ref=")]
    return json.loads(body) if body.startswith("[") else gcfkit.decode(body)


def test_replicas_behind_a_round_robin_relay_answer_each_others_since(redis_url: str) -> None:
    """Two gateway processes share a real redis-server behind a relay that sends each
    request to the next one: a ``_since`` is answered ``@@ unchanged`` by the replica that
    did not answer the call it names, with a session and without (2026-07-28); there, the
    handle is the caller's alone: another credential, none, or a guessed handle gets the
    full result."""
    fixture = start_fixture()
    try:
        upstream = f"{fixture_base(fixture)}/stateful/mcp"
        options = ("--min-bytes", "0", "--state", redis_url, "--upstream", upstream)
        with gcfkit_http(*options) as a, gcfkit_http(*options) as b:
            asyncio.run(asyncio.wait_for(_round_robin(a, b, redis_url), 240))
    finally:
        stop_process(fixture)


async def _round_robin(a: str, b: str, redis_url: str) -> None:
    relay = RoundRobin([a, b])
    url = await relay.start(urlsplit(a).path)
    alice = {**MODERN_HEADERS, "authorization": "Bearer alice-token"}
    mallory = {**MODERN_HEADERS, "authorization": "Bearer mallory-token"}
    try:
        async with httpx2.AsyncClient(timeout=90) as http:
            # No session: the handle is long, and only alice's.
            first = texts_of(await apost(http, url, modern_call(1, {"limit": 20}), alice), 1)
            handle = handle_of(first)
            assert len(handle) == 32 and handle.isdigit()
            since = {"limit": 20, SINCE_ARGUMENT: handle}
            again = texts_of(await apost(http, url, modern_call(2, since), alice), 2)
            assert again[0].startswith("@@ unchanged"), again[0][:300]
            assert relay.log[0][0] != relay.log[1][0]  # answered by the other replica
            full = orders_of(first)
            for n, headers in ((3, mallory), (4, MODERN_HEADERS)):
                other = texts_of(await apost(http, url, modern_call(n, since), headers), n)
                assert not other[0].startswith("@@"), other[0][:300]
                assert orders_of(other) == full
            guessed = {"limit": 20, SINCE_ARGUMENT: str(10**31 + secrets.randbelow(9 * 10**31))}
            wild = texts_of(await apost(http, url, modern_call(5, guessed), alice), 5)
            assert not wild[0].startswith("@@") and orders_of(wild) == full
            # Neither the credential nor the handle is written to the store in clear.
            import redis.asyncio as aioredis

            store: Any = aioredis.Redis.from_url(redis_url, decode_responses=True)
            try:
                keys: list[str] = await store.keys("gcfkit:*")
                values = [await store.get(k) for k in keys if k.startswith("gcfkit:ref:")]
            finally:
                await store.aclose()
            assert values and all(isinstance(v, str) for v in values)
            for text in [*keys, *values]:
                assert handle not in text and "alice" not in text

            # A session: initialize and the calls alternate between the replicas.
            start = len(relay.log)
            response = await http.post(url, json=INIT, headers=ACCEPT)
            assert response.status_code == 200, response.text
            sid = response.headers["mcp-session-id"]
            session = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await apost(http, url, initialized, session)
            body = {"name": "orders", "arguments": {"limit": 20}}
            call_ = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": body}
            named = handle_of(texts_of(await apost(http, url, call_, session), 2))
            assert len(named) == 6  # a session's handles stay short: the id binds them
            body = {"name": "orders", "arguments": {"limit": 20, SINCE_ARGUMENT: named}}
            call_ = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": body}
            answer = texts_of(await apost(http, url, call_, session), 3)
            assert answer[0].startswith("@@ unchanged"), answer[0][:300]
            turns = [index for index, _ in relay.log[start:]]
            assert turns[2] != turns[3], turns
    finally:
        await relay.close()


def test_a_replica_treats_a_session_as_the_client_that_initialized_it(redis_url: str) -> None:
    """The client's declared name travels with the session's copy: a session Claude Code
    initialized on replica A gets Claude Code's view on replica B (results carrying
    ``structuredContent`` delivered as their value, output schemas dropped); another
    client's session keeps them on B."""
    fixture = start_fixture()
    try:
        upstream = f"{fixture_base(fixture)}/stateful/mcp"
        options = ("--state", redis_url, "--upstream", upstream)
        with gcfkit_http(*options) as a, gcfkit_http(*options) as b, httpx2.Client(timeout=60) as c:
            seen: dict[str, tuple[bool, bool]] = {}
            for client in ("claude-code", "some-client"):
                response = c.post(a, json=init_as(client), headers=ACCEPT)
                assert response.status_code == 200, response.text
                sid = response.headers["mcp-session-id"]
                headers = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                c.post(a, json=initialized, headers=headers)
                listed = c.post(
                    b, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers
                )
                (tools,) = [m for m in messages(listed) if m.get("id") == 2]
                (orders,) = [t for t in tools["result"]["tools"] if t["name"] == "orders"]
                body = {"name": "orders", "arguments": {"limit": 3}}
                called = c.post(
                    b,
                    json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": body},
                    headers=headers,
                )
                (result,) = [m for m in messages(called) if m.get("id") == 3]
                seen[client] = ("outputSchema" in orders, "structuredContent" in result["result"])
            assert seen == {"claude-code": (False, False), "some-client": (True, True)}
    finally:
        stop_process(fixture)


def test_the_store_keeps_a_callers_results_bounded_and_hashed(redis_url: str) -> None:
    async def scenario() -> None:
        store = RedisState(redis_url, max_bytes=1 << 20, ttl=30, ref_results=2, ref_bytes=100)
        try:
            caller, other = caller_key("Bearer x"), caller_key("Bearer y")
            await store.keep(caller, [kept("a", 40), kept("b", 40)])
            await store.keep(caller, [kept("c", 40)])  # three results over a bound of two
            assert await store.recall(caller, "a") is None
            found = await store.recall(caller, "b")
            assert found is not None and found.text == "b" * 40 and found.handle == "b"
            assert await store.recall(other, "b") is None  # another caller's
            await store.keep(caller, [kept("d", 50)])  # "b" was used last: "c" goes
            assert await store.recall(caller, "c") is None
            assert await store.recall(caller, "b") is not None
            # Three over two: "d" goes; then "b" and "f" are 101 bytes over 100: "b" goes.
            await store.keep(caller, [kept("f", 61)])
            assert await store.recall(caller, "d") is None
            assert await store.recall(caller, "b") is None
            assert await store.recall(caller, "f") is not None
            assert 0 < await store._client.ttl("gcfkit:ref:" + ref_key(caller, "f")) <= 30
            await store.keep(caller, [kept("e", 101)])  # larger than a caller may keep
            assert await store.recall(caller, "e") is None
            read = Kept("r", "read_file", "{}", "file", "text of a file", 14, 0)
            await store.keep(caller, [read])
            assert await store.recall(caller, "r") == read  # a file stays a file
        finally:
            await store.aclose()

    asyncio.run(asyncio.wait_for(scenario(), 30))
