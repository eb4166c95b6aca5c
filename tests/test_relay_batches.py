"""What one read brings in leaves in one write: the stdio relay writes the lines it makes of
one read of the client (or of the server) at once, so under load it wakes its reader once
per read rather than once per line; nothing is reordered, nothing waits for more input.

* The Outbox, ``joined``: lines fed with ``release=False`` go out with the next released
  one, in one write, a tool result answered in line among them in its place; without
  ``joined`` (an SSE stream: one event per line) each line is its own write.
* A real relay (``python -m gcfkit.cli proxy``) between a client that writes three requests
  in one write and a server that answers a whole read in one write: the server reads the
  three in one read, and the client the three answers in one read.

Loopback pipes only; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
import time
from typing import Any, cast

import gcfkit
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.core import ProxyCore
from gcfkit.transports.offload import Lane
from gcfkit.transports.outbox import JOIN_BYTES, Outbox
from gcfkit.transports.pools import session_pool
from tests.proxy_support import request, response, text_result

CONFIG = ProxyConfig(primer=False, refs="off", stats=False, time_budget=60.0)
ROWS = json.dumps([{"id": i, "name": f"n{i}", "qty": i} for i in range(3)], indent=2)


def fed(joined: bool) -> list[bytes]:
    """The writes an Outbox makes of a ping's answer, a tool result and another ping's
    answer fed as the lines of one read."""

    async def scenario() -> list[bytes]:
        core = ProxyCore(CONFIG)
        for msg_id, method in ((1, "ping"), (2, "tools/call"), (3, "ping")):
            params = {"name": "rows", "arguments": {}} if method == "tools/call" else None
            core.from_client(request(msg_id, method, params))
        pool = session_pool(CONFIG, None, None)
        writes: list[bytes] = []

        async def write(data: bytes, _: None) -> None:
            writes.append(data)

        outbox: Outbox[None] = Outbox(core, pool.session(), write, joined=joined)
        try:
            lines = [response(1, {}), response(2, text_result(ROWS)), response(3, {})]
            for i, line in enumerate(lines):
                await outbox.feed(line, None, release=i == len(lines) - 1)
            await outbox.drain(timeout=60)
        finally:
            await pool.close()
        return writes

    return asyncio.run(asyncio.wait_for(scenario(), 120))


def test_the_lines_of_one_read_leave_in_one_write_in_order() -> None:
    writes = fed(joined=True)
    assert len(writes) == 1
    lines = writes[0].splitlines(keepends=True)
    assert [json.loads(x)["id"] for x in lines] == [1, 2, 3]
    result = json.loads(lines[1])["result"]["content"][0]["text"]
    assert gcfkit.decode(result) == json.loads(ROWS) and result != ROWS  # rewritten, in line


def test_an_output_not_joined_writes_each_line_on_its_own() -> None:
    writes = fed(joined=False)
    assert [json.loads(x)["id"] for x in writes] == [1, 2, 3]


def test_a_big_line_is_written_on_its_own() -> None:
    """Joining copies: a line over ``JOIN_BYTES`` goes in a write of its own, between the
    joined runs of small ones, in order."""
    note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
    big = note + b"x" * (JOIN_BYTES + 1) + b'"}}\n'

    async def scenario() -> list[bytes]:
        core = ProxyCore(CONFIG)
        for msg_id in (1, 2, 3):
            core.from_client(request(msg_id, "ping"))
        writes: list[bytes] = []

        async def write(data: bytes, _: None) -> None:
            writes.append(data)

        outbox: Outbox[None] = Outbox(core, None, write, joined=True)
        lines = [response(1, {}), response(2, {}), big, response(3, {})]
        for i, line in enumerate(lines):
            await outbox.feed(line, None, release=i == len(lines) - 1)
        return writes

    writes = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert writes == [response(1, {}) + response(2, {}), big, response(3, {})]


class _SlowLane:
    """A lane whose every result goes to a "worker" that answers when told to."""

    available = True
    gave_up = False

    def __init__(self) -> None:
        self.go = asyncio.Event()

    def answer_now(self, *args: Any, **kw: Any) -> tuple[bool, bytes | None]:
        return False, None

    async def submit(self, *args: Any) -> bytes | None:
        await self.go.wait()
        return None


def test_what_is_ready_ahead_of_a_result_in_a_worker_does_not_wait_for_it() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes]]:
        core = ProxyCore(CONFIG)
        core.from_client(request(1, "ping"))
        core.from_client(request(2, "tools/call", {"name": "rows", "arguments": {}}))
        writes: list[bytes] = []

        async def write(data: bytes, _: None) -> None:
            writes.append(data)

        lane = _SlowLane()
        outbox: Outbox[None] = Outbox(core, cast(Lane, lane), write, joined=True)
        await outbox.feed(response(1, {}), None, release=False)
        await outbox.feed(response(2, text_result(ROWS)), None)  # the read's last line
        before = list(writes)
        lane.go.set()
        await outbox.drain(timeout=60)
        return before, writes

    before, after = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert before == [response(1, {})]
    assert after == [response(1, {}), response(2, text_result(ROWS))]


#: Answers each request with how many lines the read that brought it held; all the answers
#: to one read in one write.
SERVER = r"""
import json, os, sys
buffered = b""
while True:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    buffered += chunk
    *lines, buffered = buffered.split(b"\n")
    out = b""
    for line in lines:
        msg = json.loads(line)
        answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"lines_in_read": len(lines)}}
        out += json.dumps(answer).encode() + b"\n"
    os.write(1, out)
"""


def test_a_relay_forwards_a_read_in_one_write_both_ways() -> None:
    command = [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--grace", "0.5"]
    proc = subprocess.Popen(
        [*command, "--", sys.executable, "-c", SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # One write of three requests (well under PIPE_BUF: it arrives whole).
        proc.stdin.write(b"".join(request(i, "ping") for i in (1, 2, 3)))
        proc.stdin.flush()
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + 60
        while not select.select([fd], [], [], 1.0)[0]:
            assert time.monotonic() < deadline, "no answer in 60 s"
        first_read = os.read(fd, 1 << 16)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    answers = [json.loads(x) for x in first_read.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert [a["result"]["lines_in_read"] for a in answers] == [3, 3, 3]
