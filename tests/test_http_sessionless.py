"""Relative answers for requests of no session (the 2026-07-28 protocol) on one replica,
without a shared store: the results such a request is given are named unguessably, kept for
its caller (the hash of its credential) in the server's memory, bounded and expiring, and a
later ``_since`` of the same caller is answered relative to them; any other caller's, or a
guessed handle, gets the full result. Both HTTP shells (the gateway and ``--http --
COMMAND``). Loopback only; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
from typing import Any

import httpx2

import gcfkit
from gcfkit import relative
from gcfkit.answers.since import handle_of as since_handle
from gcfkit.proxy.core import SINCE_ARGUMENT
from gcfkit.proxy.held import Kept
from gcfkit.relative import ResultMemory
from gcfkit.transports.state import CallerResults, caller_key, named_since
from tests.http_support import (
    ACCEPT,
    FIXTURE,
    fixture_base,
    gcfkit_http,
    start_fixture,
    stop_process,
)

MODERN = "2026-07-28"
HEADERS = {
    **ACCEPT,
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "orders",
}


def kept(handle: str, size: int) -> Kept:
    return Kept(handle, "t", "{}", "text", handle * size, size, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_unguessable_handles_are_32_digits_a_reader_can_name() -> None:
    memory = ResultMemory(unguessable=True)
    handles = {memory.mint() for _ in range(200)}
    assert len(handles) == 200
    for handle in handles:
        assert handle is not None and len(handle) == 32 and handle.isdigit()
        assert handle[0] != "0" and relative.is_handle(handle)
        assert since_handle(handle) == handle
    # Seeded (tests) they repeat; a session's memory keeps its six digits.
    assert (
        ResultMemory(seed=4, unguessable=True).mint()
        == ResultMemory(seed=4, unguessable=True).mint()
    )
    assert len(ResultMemory().mint() or "") == 6


def test_unguessable_handles_spread_over_their_range_and_differ_in_a_forked_child() -> None:
    """The operating system's bytes are read ahead (a handle costs no system call): the
    leading digits still take every value (a session's six-digit handles too), threads
    draw apart, and a child forked with bytes read ahead draws its own, never the parent's
    next handles."""
    memory = ResultMemory(unguessable=True)
    firsts = {(memory.mint() or "")[0] for _ in range(400)}
    assert firsts == set("123456789")
    # A session's six-digit handles come from the same bytes, over their whole range.
    session = ResultMemory()
    short = [int(session.mint() or "0") for _ in range(400)]
    assert all(100_000 <= h <= 999_999 for h in short) and {h // 100_000 for h in short} == set(
        range(1, 10)
    )
    # Threads read their own bytes: no two draw the same handle.
    drawn: list[list[str]] = [[], [], [], []]

    def draw(into: list[str]) -> None:
        into.extend(ResultMemory(unguessable=True).mint() or "" for _ in range(300))

    threads = [threading.Thread(target=draw, args=(out,)) for out in drawn]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len({h for out in drawn for h in out}) == 1200
    if not hasattr(os, "fork"):
        return
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, ",".join(memory.mint() or "" for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    parent = {memory.mint() for _ in range(4)}
    assert len(child) == 4 and not child & parent


def test_a_callers_results_are_bounded_per_caller_and_in_all_and_expire() -> None:
    clock = Clock()
    store = CallerResults(max_results=2, max_bytes=100, total_bytes=150, ttl=10, clock=clock)
    alice, bob = caller_key("Bearer alice"), caller_key("Bearer bob")
    store.keep(alice, [kept("a", 40), kept("b", 40), kept("c", 40)])
    assert store.recall(alice, "a") is None  # three over two: the first went
    assert store.recall(bob, "b") is None  # alice's, not bob's
    assert store.recall(alice, "b") is not None  # used now: "c" is the least recent
    store.keep(bob, [kept("x", 80)])  # 160 bytes in all over 150: alice's "c" goes
    assert store.recall(alice, "c") is None
    assert store.recall(alice, "b") is not None and store.recall(bob, "x") is not None
    assert store.bytes == 120 and len(store) == 2
    store.keep(alice, [kept("big", 101)])  # more than a caller may keep: not kept
    assert store.recall(alice, "big") is None
    clock.now = 9.0
    assert store.recall(alice, "b") is not None  # a use keeps it 10 s more
    clock.now = 12.0
    assert store.recall(bob, "x") is None  # last used at 0
    assert store.recall(alice, "b") is not None
    clock.now = 30.0
    assert store.recall(alice, "b") is None and len(store) == 0 and store.bytes == 0


def test_named_since_reads_only_a_tools_calls_handle() -> None:
    call = {"method": "tools/call", "params": {"name": "t", "arguments": {"_since": 123456}}}
    assert named_since(call) == "123456"
    assert named_since({**call, "method": "tools/list"}) is None
    assert named_since({"method": "tools/call", "params": {"arguments": {"_since": "a b"}}}) is None
    assert named_since([call]) is None
    assert caller_key(None) == caller_key("") != caller_key("Bearer x")


def modern_call(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def texts(
    client: httpx2.Client, url: str, n: int, args: dict[str, Any], auth: str | None
) -> list[str]:
    headers = dict(HEADERS)
    if auth is not None:
        headers["authorization"] = auth
    response = client.post(url, json=modern_call(n, "orders", args), headers=headers)
    assert response.status_code == 200, response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        found = [
            json.loads(line[5:])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    else:
        found = [response.json()]
    (answer,) = [m for m in found if m.get("id") == n]
    return [b["text"] for b in answer["result"]["content"] if b.get("type") == "text"]


def the_handle(found: list[str]) -> str:
    refs = [r for r in map(relative.ref_of, found) if r is not None]
    assert len(refs) == 1, found[0][:300]
    return refs[0]


def orders_of(found: list[str]) -> Any:
    (body,) = [t for t in found if not t.startswith("ref=")]
    return json.loads(body) if body.startswith("[") else gcfkit.decode(body)


def check_sessionless(client: httpx2.Client, url: str) -> None:
    """What both shells do for requests of no session (module docstring)."""
    alice, bob = "Bearer alice", "Bearer bob"
    first = texts(client, url, 1, {"limit": 20}, alice)
    handle = the_handle(first)
    assert len(handle) == 32
    again = texts(client, url, 2, {"limit": 20, SINCE_ARGUMENT: handle}, alice)
    assert again[0].startswith("@@ unchanged"), again[0][:300]
    full = orders_of(first)
    for n, auth in ((3, bob), (4, None)):
        other = texts(client, url, n, {"limit": 20, SINCE_ARGUMENT: handle}, auth)
        assert not other[0].startswith("@@") and orders_of(other) == full
    guessed = str(10**31 + secrets.randbelow(9 * 10**31))
    wild = texts(client, url, 5, {"limit": 20, SINCE_ARGUMENT: guessed}, alice)
    assert not wild[0].startswith("@@") and orders_of(wild) == full
    # No credential at all: the handle alone binds (whoever was shown it may use it).
    anonymous = the_handle(texts(client, url, 6, {"limit": 20}, None))
    mine = texts(client, url, 7, {"limit": 20, SINCE_ARGUMENT: anonymous}, None)
    assert mine[0].startswith("@@ unchanged"), mine[0][:300]
    theirs = texts(client, url, 8, {"limit": 20, SINCE_ARGUMENT: anonymous}, alice)
    assert not theirs[0].startswith("@@")


def test_the_gateway_answers_a_since_of_no_session_from_its_memory() -> None:
    fixture = start_fixture()
    try:
        upstream = f"{fixture_base(fixture)}/stateful/mcp"
        with (
            gcfkit_http("--min-bytes", "0", "--upstream", upstream) as url,
            httpx2.Client(timeout=60) as client,
        ):
            check_sessionless(client, url)
    finally:
        stop_process(fixture)


def test_a_stdio_server_over_http_answers_a_since_of_no_session() -> None:
    with (
        gcfkit_http("--min-bytes", "0", "--", sys.executable, FIXTURE, "--stdio") as url,
        httpx2.Client(timeout=60) as client,
    ):
        check_sessionless(client, url)
