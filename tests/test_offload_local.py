"""Results answered in the relay's process, a worker only for big ones
(gcfkit.transports.local, .placement's answers_here, .tally, .pools).

* A small or medium result, a close call among them, starts no worker and gets the answer
  a worker gives; a big one starts a worker.
* A request of no session is answered in the relay by the worker's rule (unguessable
  handles, what it remembers reported to its lane).
* The relay process counts with gcfkit._bpe and never loads bpe-openai's compiled
  tokenizer (a subprocess, so that nothing else in the test run has loaded it before).
* The ledger's records of results answered in process are exact and complete once the
  pool is closed (counted in the relay after each answer is written).
* A session whose results alternate between the relay and a worker keeps its handles: a
  ``_since`` call answers ``@@ unchanged`` for a result named on either side.
* An idle worker exits.

Real worker processes, no network; every wait is bounded and each pool is closed by the
test that started it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gcfkit import relative
from gcfkit.ledger import read_entries
from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.proxy.core import SINCE_ARGUMENT, Output, ProxyCore
from gcfkit.proxy.rewrite import Budget, Call, Rewriter
from gcfkit.transports import booking
from gcfkit.transports import offload as offload_module
from gcfkit.transports.offload import Offload
from gcfkit.transports.placement import IN_PROCESS_BYTES
from gcfkit.transports.pools import server_pool, session_pool
from gcfkit.transports.relay import relay_one
from tests.proxy_support import request, response, text_result

ROOT = Path(__file__).resolve().parent.parent

#: Handles are random: equal answers are compared without them.
PLAIN = ProxyConfig(primer=False, refs="off", time_budget=60.0)
NAMED = ProxyConfig(primer=False, time_budget=60.0)


def rows(n: int, tag: str = "r") -> str:
    """``n`` uniform records, pretty: GCF's table wins clearly (no close call)."""
    records = [{"id": i, "name": f"{tag}-{i}", "qty": i * 3, "ok": i % 2 == 0} for i in range(n)]
    return json.dumps(records, indent=2)


def line(msg_id: int, text: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": text_result(text)}).encode()


SMALL = line(1, rows(20))
MEDIUM = line(4, rows(500))  # ~50 KB: the relay's still
LARGE = line(2, rows(2_000))
CLOSE = line(3, "[1, 2, 3]")  # compact JSON or the original: equal by estimate


def exact(config: ProxyConfig, data: bytes, call: Call) -> bytes | None:
    """The answer a worker (exact counts) gives."""
    return Rewriter(config, Codec()).rewrite_line(data, call, Budget.unlimited())[1]


def test_the_sizes_are_on_both_sides_of_the_rule() -> None:
    assert len(SMALL) < 8 * 1024 < 40 * 1024 < len(MEDIUM) < IN_PROCESS_BYTES < len(LARGE)


@pytest.mark.parametrize("shape", ["stdio", "server"])
@pytest.mark.parametrize("data", [SMALL, MEDIUM, CLOSE], ids=["small", "medium", "close-call"])
def test_a_result_not_big_starts_no_worker(shape: str, data: bytes) -> None:
    async def scenario() -> tuple[bytes | None, list[int], int]:
        pool = session_pool(PLAIN, None, None) if shape == "stdio" else server_pool(PLAIN)
        assert await pool.start()
        try:
            lane = pool.session()
            got = await lane.rewrite(data, Call("t", "t"), "s")
            return got, pool.pids, pool.answered_here
        finally:
            await pool.close()

    got, pids, here = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (pids, here) == ([], 1)
    assert got == exact(PLAIN, data, Call("t", "t"))


def test_a_request_of_no_session_is_answered_here_by_the_workers_rule() -> None:
    # worker.fresh: unguessable handles, and what it remembers goes back to its lane (the
    # shell keeps it under its handle alone: gcfkit.transports.state).
    async def scenario() -> tuple[bytes | None, list[int], int, list[str]]:
        pool = server_pool(NAMED)
        assert await pool.start()
        try:
            lane = pool.fresh()
            got = await lane.rewrite(MEDIUM, Call("t", "t"), "s")
            return got, pool.pids, pool.answered_here, list(lane.memory.snapshot().order)
        finally:
            await pool.close()

    got, pids, here, held = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (pids, here) == ([], 1)
    assert got is not None
    texts = [block["text"] for block in json.loads(got)["result"]["content"]]
    handle = relative.ref_of(texts[-1])
    assert handle is not None and held == [handle]
    short = relative.ResultMemory().mint()  # a session's
    assert short is not None and len(handle) > len(short)  # unguessable


def test_a_big_result_starts_a_worker() -> None:
    async def scenario() -> tuple[bytes | None, int, int]:
        pool = session_pool(PLAIN, None, None)
        assert await pool.start()
        try:
            got = await pool.session().rewrite(LARGE, Call("t", "t"), "s")
            return got, len(pool.pids), pool.answered_here
        finally:
            await pool.close()

    got, workers, here = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (workers, here) == (1, 0)
    assert got == exact(PLAIN, LARGE, Call("t", "t"))


_NO_TOKENIZER = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from gcfkit.proxy.rewrite import Call
from gcfkit.transports.pools import session_pool
from tests.test_offload_local import NAMED, SMALL, CLOSE, line, rows

def loaded() -> bool:
    return "bpe_openai._bindings" in sys.modules or "bpe_openai" in sys.modules

async def main() -> dict:
    pool = session_pool(NAMED, None, sys.argv[2])
    await pool.start()
    lane = pool.session()
    for i in range(5):
        await lane.rewrite(line(10 + i, rows(10 + i, f"t{i}")), Call(f"t{i}", f"t{i}"), "s")
    after_small = loaded()
    await lane.rewrite(CLOSE, Call("c", "c"), "s")  # a close call: counted exactly, here
    here = pool.answered_here
    await pool.close()
    return {"small": after_small, "closed": loaded(), "here": here, "pids": pool.pids,
            "bpe": "gcfkit._bpe" in sys.modules}

print(json.dumps(asyncio.run(asyncio.wait_for(main(), 120))))
"""


def test_the_relay_process_never_loads_the_tokenizer(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _NO_TOKENIZER, str(ROOT), str(ledger)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=str(ROOT),
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {"small": False, "closed": False, "here": 6, "pids": [], "bpe": True}
    assert len(read_entries(ledger)) == 6


def test_ledger_records_are_exact_and_complete_after_shutdown(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = dataclasses.replace(PLAIN, stats=True)
    results = {f"tool{i}": line(20 + i, rows(5 + 3 * i, f"x{i}")) for i in range(12)}
    results["pretty"] = line(40, json.dumps({"a": [1, 2, {"b": "c"}]}, indent=2))
    results["text"] = line(41, "plain words, not JSON at all")

    async def scenario() -> tuple[list[int], int]:
        pool = session_pool(config, None, ledger)
        assert await pool.start()
        try:
            lane = pool.session()
            for tool, data in results.items():
                await lane.rewrite(data, Call(tool, tool), "srv")
            return pool.pids, pool.answered_here
        finally:
            await pool.close()

    pids, here = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert pids == [] and here == len(results)  # no worker ran before the close
    got = {e.record.tool: e.record for e in read_entries(ledger)}
    assert sorted(got) == sorted(results)
    for tool, data in results.items():
        outcome, _ = Rewriter(config, Codec()).rewrite_line(
            data, Call(tool, tool), Budget.unlimited()
        )
        want = outcome.ledger_record(
            Rewriter(config).count, server="srv", tool=tool, encoding="o200k_base", encode_ms=0
        )
        fields = ("decision", "bytes_before", "bytes_after", "tokens_before", "tokens_after")
        assert [getattr(got[tool], f) for f in fields] == [getattr(want, f) for f in fields]
        assert got[tool].server == "srv"


def _call(msg_id: int, tool: str, since: str | None = None) -> bytes:
    args: dict[str, Any] = {"n": msg_id}
    if since is not None:
        args[SINCE_ARGUMENT] = since
    return request(msg_id, "tools/call", {"name": tool, "arguments": args})


def _texts(outputs: list[Output]) -> list[str]:
    (out,) = outputs
    return [block["text"] for block in json.loads(out.data)["result"]["content"]]


def test_a_session_alternating_small_and_big_results_keeps_since_on_both_sides() -> None:
    small, big, other = rows(20, "s"), rows(2_000, "b"), rows(25, "o")

    async def scenario() -> list[tuple[str, list[str], int, int]]:
        pool = session_pool(NAMED, None, None)
        assert await pool.start()
        core, lane = ProxyCore(NAMED), pool.session()
        seen: list[tuple[str, list[str], int, int]] = []

        async def call(msg_id: int, tool: str, text: str, since: str | None = None) -> str:
            core.from_client(_call(msg_id, tool, since))
            got = _texts(await relay_one(core, lane, response(msg_id, text_result(text))))
            seen.append((tool, got, pool.answered_here, len(pool.pids)))
            handle = relative.ref_of(got[-1])
            return handle or ""

        try:
            h_small = await call(1, "small", small)  # here: no worker yet
            h_big = await call(2, "big", big)  # a worker
            await call(3, "small", small, h_small)  # named here, recalled here after the visit
            await call(4, "big", big, h_big)  # named there, recalled there after the visit
            h_other = await call(5, "other", other)  # back here
            await call(6, "other", other, h_other)
            return seen
        finally:
            await pool.close()

    seen = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert [(here, workers) for _, _, here, workers in seen][:2] == [(1, 0), (1, 1)]
    # The session came back to the relay each time, the worker's result caught up with.
    assert [here for _, _, here, _ in seen] == [1, 1, 2, 2, 3, 4]
    for tool, got, _, _ in (seen[0], seen[1], seen[4]):
        assert relative.ref_of(got[-1]) is not None, (tool, got[-1][:80])
    for tool, got, _, _ in (seen[2], seen[3], seen[5]):
        assert len(got) == 1 and got[0].startswith(f"@@ unchanged tool={tool} "), got[0][:80]


def test_an_idle_worker_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offload_module, "IDLE_EXIT", 0.2)

    async def scenario() -> tuple[int, list[int], bytes | None]:
        pool: Offload = session_pool(PLAIN, None, None)
        assert await pool.start()
        try:
            await pool.session().rewrite(LARGE, Call("t", "t"), "s")
            started = len(pool.pids)
            for _ in range(400):  # bounded: 20 s at most
                if not pool.pids:
                    break
                await asyncio.sleep(0.05)
            gone = pool.pids
            # The next large result starts a worker again.
            again = await pool.session().rewrite(LARGE, Call("t", "t"), "s")
            return started, gone, again
        finally:
            await pool.close()

    started, gone, again = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (started, gone) == (1, [])
    assert again == exact(PLAIN, LARGE, Call("t", "t"))


def test_the_tally_keeps_at_most_its_bound_of_owed_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from gcfkit.proxy.rewrite import Outcome
    from gcfkit.transports import tally as tally_module

    monkeypatch.setattr(tally_module, "MAX_CHARS", 100)
    tally = tally_module.Tally()
    for i in range(3):
        outcome = Outcome(None, "unchanged", lazy=["x" * 40])
        tally.add(tally_module.Owed(outcome, "s", f"t{i}", 0.0))
    kept = tally.take()
    assert tally.chars == 0 and [len(item.outcome.lazy) for item in kept] == [1, 1, 0]
    # Past the bound the record is counted by estimate at once: nothing of it is lost.
    assert (kept[2].outcome.tokens_before, kept[2].outcome.bytes_after) == (10, 40)


def test_the_ledger_is_counted_in_a_pause_without_a_close(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"

    async def scenario() -> tuple[int, int]:
        pool = session_pool(PLAIN, None, ledger)
        assert await pool.start()
        try:
            lane = pool.session()
            for i in range(3):
                await lane.rewrite(line(60 + i, rows(5 + i)), Call("t", "t"), "s")
            before = len(read_entries(ledger)) if ledger.exists() else 0
            for _ in range(200):  # bounded: 10 s at most
                if ledger.exists() and len(read_entries(ledger)) == 3:
                    break
                await asyncio.sleep(0.05)
            return before, len(read_entries(ledger))
        finally:
            await pool.close()

    before, after = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (before, after) == (0, 3)  # none counted while results came, all in the pause


def test_records_are_written_without_a_pause_once_enough_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flow of results with no pause writes its records every ``COUNT_RECORDS`` results,
    so a relay that never rests does not keep them all until it does."""
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setattr(booking, "QUIET_SECONDS", 3600.0)
    monkeypatch.setattr(booking, "COUNT_RECORDS", 4)

    async def scenario() -> int:
        pool = session_pool(PLAIN, None, ledger)
        assert await pool.start()
        try:
            lane = pool.session()
            for i in range(4):
                await lane.rewrite(line(80 + i, rows(5 + i)), Call("t", "t"), "s")
            await asyncio.sleep(0.1)  # (the count runs once the last answer is out)
            return len(read_entries(ledger)) if ledger.exists() else 0
        finally:
            await pool.close()

    assert asyncio.run(asyncio.wait_for(scenario(), 120)) == 4


def test_a_small_result_does_not_wait_behind_its_sessions_big_one_in_a_worker() -> None:
    huge = line(70, rows(12_000, "h"))  # ~1 MB: a worker takes a while

    async def scenario() -> tuple[bool, bool, list[str], list[str], str]:
        pool = session_pool(NAMED, None, None)
        assert await pool.start()
        core, lane = ProxyCore(NAMED), pool.session()
        try:
            big = asyncio.ensure_future(lane.rewrite(huge, Call("big", "big"), "s"))
            for _ in range(6000):  # bounded: until the worker has started it (30 s at most)
                if not pool._queue and pool.pids:
                    break
                await asyncio.sleep(0.005)
            started = not big.done()
            got = await lane.rewrite(SMALL, Call("small", "small"), "s")
            stray = not big.done()  # answered while the big one was still in the worker
            assert got is not None
            small = [b["text"] for b in json.loads(got)["result"]["content"]]
            big_line = await big
            assert big_line is not None
            held = [b["text"] for b in json.loads(big_line)["result"]["content"]]
            # The session's state is whole after it: the big result is named, and recalled.
            core.from_client(_call(71, "big", relative.ref_of(held[-1])))
            again = _texts(
                await relay_one(core, lane, response(71, text_result(rows(12_000, "h"))))
            )
            return started, stray, small, held, again[0]
        finally:
            await pool.close()

    started, stray, small, held, again = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert relative.ref_of(held[-1]) is not None
    assert again.startswith("@@ unchanged tool=big "), again[:80]
    if started and stray:  # (a slow machine may start it late or finish it early)
        assert relative.ref_of(small[-1]) is None  # stray: named by no handle
