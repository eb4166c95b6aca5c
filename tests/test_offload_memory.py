"""What a session remembers (its ``ref=`` results) outlives the worker that rewrote them
(gcfkit.proxy.held): the pool keeps a copy, and a worker the session moves to starts from it.

Before, the results lived only in the worker: a worker killed at another session's deadline,
crashed or retired took every handle of the sessions it held with it (4 HTTP sessions x 6
calls of 150 KB went through 10 workers, and 3 of the 4 had lost their last handle 3 s
later), so a ``_since`` naming one got the full result again.

Real worker processes, no network; every wait is bounded and the pool is closed by the test
that started it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from gcfkit import relative
from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.proxy.core import SINCE_ARGUMENT, ProxyCore
from gcfkit.proxy.held import SessionMemory
from gcfkit.transports.offload import Lane, Offload
from gcfkit.transports.relay import relay_one
from tests import fault_codec
from tests.proxy_support import request, response, text_result

CONFIG = ProxyConfig(primer=False, dense=(), time_budget=60.0)
LOG = "".join(f"Commit: {i:040x}\nAuthor: A. Author\nMessage: change {i}\n\n" for i in range(40))


def rows(session: int, turn: int) -> str:
    """About 150 KB of JSON rows, different for each session and turn."""
    value = [
        {"id": i, "session": session, "turn": turn, "name": f"item {i}", "note": "x" * 80}
        for i in range(1_100)
    ]
    return json.dumps(value, indent=1)


class Session:
    """One client session through the pool: its core, its lane, the handle of its last
    result."""

    def __init__(self, lane: Lane) -> None:
        self.core = ProxyCore(CONFIG)
        self.lane = lane
        self.n = 0

    async def call(self, tool: str, text: str, since: str | None = None) -> list[str]:
        self.n += 1
        args: dict[str, Any] = {} if since is None else {SINCE_ARGUMENT: since}
        self.core.from_client(request(self.n, "tools/call", {"name": tool, "arguments": args}))
        (out,) = await relay_one(self.core, self.lane, response(self.n, text_result(text)))
        return [b["text"] for b in json.loads(out.data)["result"]["content"]]


def handle_of(texts: list[str]) -> str:
    refs = [r for r in map(relative.ref_of, texts) if r is not None]
    assert len(refs) == 1, texts[-1][:200]
    return refs[0]


def test_another_sessions_overrun_costs_a_session_none_of_its_handles() -> None:
    """One worker: session A's result is named there, then session B's encode never ends and
    the worker is killed at B's deadline. A's ``_since`` still names its result."""
    config = dataclasses.replace(CONFIG, time_budget=2.0)
    codec = Codec(dumps=fault_codec.stuck_on_mark_dumps)

    async def scenario() -> tuple[list[str], list[str], int]:
        offload = Offload(config, codec)
        assert await offload.start()
        try:
            a, b = Session(offload.session()), Session(offload.session())
            first = await a.call("git_log", LOG)
            stuck = await b.call("list", json.dumps([{"id": i, "v": "STUCK"} for i in range(50)]))
            assert not any("GCF" in t for t in stuck)  # B's original went out, unrewritten
            again = await a.call("git_log", LOG, since=handle_of(first))
            return first, again, offload.restarts
        finally:
            await offload.close()

    first, again, restarts = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert restarts == 1  # the worker was killed at B's deadline and another started
    assert first[0] == LOG
    assert again == [again[0]] and again[0].startswith("@@ unchanged tool=git_log ")


def test_parallel_large_results_then_since_keep_their_handles() -> None:
    """Four sessions, three 150 KB results each, all at once through a pool of two workers
    (sessions move between them), then every worker goes (killed, as at a deadline, or
    retired): each session's ``_since`` naming its last result is answered ``@@ unchanged``."""

    async def scenario() -> list[list[str]]:
        offload = Offload(CONFIG, workers=1, max_workers=2)
        assert await offload.start()
        try:
            sessions = [Session(offload.session()) for _ in range(4)]

            async def three(i: int, s: Session) -> str:
                texts: list[str] = []
                for turn in range(3):
                    texts = await s.call("list_items", rows(i, turn))
                    assert texts[0].startswith("GCF profile=generic")
                return handle_of(texts)

            handles = await asyncio.gather(*(three(i, s) for i, s in enumerate(sessions)))
            killed = list(offload._workers)
            for worker in killed:
                offload._kill(worker)
            got = await asyncio.gather(
                *(
                    s.call("list_items", rows(i, 2), since=h)
                    for i, (s, h) in enumerate(zip(sessions, handles, strict=True))
                )
            )
            # Reaped before the loop ends (the pool's close waits for its live workers only).
            await asyncio.wait([w.reader for w in killed if w.reader is not None], timeout=30)
            return list(got)
        finally:
            await offload.close()

    for texts in asyncio.run(asyncio.wait_for(scenario(), 300)):
        assert texts == [texts[0]] and texts[0].startswith("@@ unchanged tool=list_items ")


def test_the_copy_follows_the_reports_and_a_reset() -> None:
    """The pool's copy holds what the last report says, in its order, and nothing after the
    session starts over (no process: the copy alone)."""
    from gcfkit.answers.since import Names
    from gcfkit.proxy.held import report
    from gcfkit.relative import ResultMemory

    names = Names(
        mode="all", reanchor=15, min_bytes=0, count=len, memory=ResultMemory(max_results=2, seed=5)
    )
    known: set[str] = set()
    copy = SessionMemory()
    first = names.memory.remember("t", "a", "text", "one", size=3)
    copy.apply(report(names, known))
    second = names.memory.remember("t", "b", "json", {"k": [1]}, size=9)
    third = names.memory.remember("t", "c", "text", "three", size=5)
    later = report(names, known)
    assert [k.handle for k in later.new] == [second, third]  # only what the copy lacks
    copy.apply(later)
    assert first is not None and copy.snapshot().order == (second, third)
    copy.clear()
    assert len(copy) == 0 and copy.snapshot().new == ()
