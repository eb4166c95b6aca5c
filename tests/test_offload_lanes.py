"""A session's state in the worker pool (gcfkit.transports.offload) stays what its client
holds when a result does not end with the worker's answer, and ends with the session.

* A rewrite the shell stopped waiting for (the gateway's SSE stream closed by its client:
  the task is cancelled) or one that never started (cancelled or past its deadline while
  queued: the original goes out) left the session's worker with a delta base the client
  does not hold, and the next delta was against it (the client could not apply it).
* A session closed while one of its results was still queued (``DELETE`` during a call)
  was created again in the worker that rewrote that result, where nothing dropped it.

Real worker processes, no network; every wait is bounded and the pool is closed by the test
that started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.proxy.core import ProxyCore
from gcfkit.proxy.policy import Policy, ToolPolicy
from gcfkit.proxy.rewrite import Call
from gcfkit.transports.offload import Offload, OffloadFailed
from gcfkit.transports.outbox import Outbox
from gcfkit.transports.stdio import write_chunked
from tests import fault_codec
from tests.proxy_support import Client, by_id

CONFIG = ProxyConfig(
    primer=False,
    stats=False,
    dense=(),
    time_budget=30.0,  # a loaded machine must not turn rewrites into fallbacks
    policy=Policy(defaults=ToolPolicy(delta=True)),
)


def stock(turn: int) -> list[dict[str, Any]]:
    """Row ``turn`` differs from the base each turn (and the previous turn's is back), so a
    delta against the wrong turn gives wrong rows."""
    return [{"id": f"S-{i}", "qty": 50 + i + (100 if i == turn else 0)} for i in range(30)]


def line(msg_id: int, value: Any) -> bytes:
    result = {"content": [{"type": "text", "text": json.dumps(value)}]}
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}).encode() + b"\n"


def text_of(data: bytes | None, original: bytes) -> str:
    got: str = json.loads(data if data is not None else original)["result"]["content"][0]["text"]
    return got


CALL = Call("stock", "stock")


@pytest.mark.parametrize("where", ["running", "queued"])
def test_a_result_the_shell_gave_up_on_leaves_no_stale_delta_base(where: str) -> None:
    """``running``: the client's stream closed while the worker rewrote turn 2 (the worker
    finishes it: its base is turn 2, the client never got it). ``queued``: turn 2 was given
    up before a worker took it (its original went out: the base is still turn 1)."""

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        offload = Offload(CONFIG)  # one worker: it is the session's home throughout
        assert await offload.start()
        try:
            lane, other = offload.session(), offload.session()
            client = Client()
            first = line(1, stock(1))
            client.read(text_of(await lane.rewrite(first, CALL, "s"), first))
            second = line(2, stock(2))
            busy = None
            if where == "queued":
                # The only worker is busy with another session's result when turn 2 comes.
                busy = asyncio.create_task(other.rewrite(line(9, stock(9)), CALL, "s"))
            given_up = asyncio.create_task(lane.rewrite(second, CALL, "s"))
            await asyncio.sleep(0)  # submitted (and, with the worker idle, sent to it)
            given_up.cancel()
            with pytest.raises(asyncio.CancelledError):
                await given_up
            if busy is not None:
                await busy
            if where == "queued":
                client.read(text_of(None, second))  # the shell sent the original
            third = line(3, stock(3))
            return client.read(text_of(await lane.rewrite(third, CALL, "s"), third)), stock(3)
        finally:
            await offload.close()

    got, want = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert got == by_id(want)


def test_a_session_closed_with_a_result_queued_is_not_kept_in_a_worker() -> None:
    async def scenario() -> tuple[str, list[set[int]]]:
        offload = Offload(CONFIG)
        assert await offload.start()
        try:
            lane, other = offload.session(), offload.session()
            busy = asyncio.create_task(other.rewrite(line(9, stock(9)), CALL, "s"))
            queued = asyncio.create_task(lane.rewrite(line(1, [1, 2]), CALL, "s"))
            await asyncio.sleep(0)  # both submitted; the second waits (the first may too)
            lane.close()  # DELETE: the session is over while its result waits
            other.close()
            await busy
            got = text_of(await queued, line(1, [1, 2]))
            # What each worker keeps a session's state for (``Offload._workers``).
            return got, [set(w.homes) for w in offload._workers]
        finally:
            await offload.close()

    got, homes = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert got == "[1,2]"  # still rewritten, as a request of no session is
    assert homes == [set()]


def test_a_result_after_a_kill_waits_for_the_next_worker_before_its_clock_runs(
    tmp_path: Path,
) -> None:
    """A worker killed at a deadline stays in the pool until its reader sees it go; a
    result that arrived in between started its clock as if a worker were ready, so the
    replacement's start-up (here a wrapper that sleeps longer than the budget) was charged
    to it and it fell back. Its clock starts when the replacement is ready."""
    slow_python = tmp_path / "slow-python"
    slow_python.write_text(f'#!/bin/sh\nsleep 3\nexec {shlex.quote(sys.executable)} "$@"\n')
    slow_python.chmod(0o755)
    config = dataclasses.replace(CONFIG, time_budget=1.5)

    async def scenario() -> str:
        offload = Offload(config, python=str(slow_python))
        assert await offload.start()
        try:
            lane = offload.session()
            first = line(1, [1, 2])
            assert await lane.rewrite(first, CALL, "s") is not None  # the first worker is ready
            [worker] = offload._workers
            offload._kill(worker)  # as a deadline does; its reader has not seen it go yet
            second = line(2, [3, 4])
            got = await lane.rewrite(second, CALL, "s")
            return text_of(got, second)
        finally:
            await offload.close()

    # Rewritten by the replacement, not the original past its budget.
    assert asyncio.run(asyncio.wait_for(scenario(), 120)) == "[3,4]"


def test_a_worker_that_dies_with_a_result_queued_is_replaced_once() -> None:
    """The replacement joins the pool only once it has been spawned: until then the pool
    looked empty to the dispatch that follows, which started a second one (two workers in a
    pool of at most one)."""

    async def scenario() -> tuple[int, int]:
        offload = Offload(CONFIG)
        assert await offload.start()
        try:
            lane = offload.session()
            assert await lane.rewrite(line(1, [1, 2]), CALL, "s") is not None
            [worker] = offload._workers
            offload._kill(worker)
            await lane.rewrite(line(2, [3, 4]), CALL, "s")
            await asyncio.wait_for(asyncio.gather(*offload._background), 30)
            return len(offload._workers), offload.restarts
        finally:
            await offload.close()

    assert asyncio.run(asyncio.wait_for(scenario(), 120)) == (1, 1)


def test_the_ledger_count_after_an_answer_is_charged_to_no_other_result(
    tmp_path: Path,
) -> None:
    """The worker counts a result's tokens for the ledger after its answer is out. The pool
    took the worker for idle meanwhile and sent it the next result, whose clock ran out
    during that count: the worker was killed (and with it the state of the sessions it
    held) and another started. The next result now either waits for the count in the pool
    (and, its budget shorter than the count, goes out as it came), or, sent before the pool
    asked for the count, is answered first and counted with it."""
    config = dataclasses.replace(CONFIG, time_budget=1.5)
    codec = Codec(count=fault_codec.slow_marked_count)
    ledger = tmp_path / "ledger.jsonl"
    ledger.touch()

    async def scenario() -> tuple[int, list[int], list[int], int]:
        offload = Offload(config, codec, ledger_path=ledger)
        assert await offload.start()
        try:
            lane = offload.session()
            await lane.rewrite(line(1, [1, 2]), CALL, "s")  # the worker is ready
            pids = offload.pids
            prose = line(2, "SLOW-COUNT, and not JSON: delivered unchanged")
            assert await lane.rewrite(prose, CALL, "s") is None
            answered = 0
            with contextlib.suppress(OffloadFailed):  # its budget is shorter than the count
                answered = int(await lane.rewrite(line(3, [3, 4]), CALL, "s") is not None)
            for _ in range(300):  # the prose's record: the count is over (a killed one never is)
                if len(ledger.read_text().splitlines()) >= 2 + answered:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # a worker that died would be gone from the pool by now
            return offload.restarts, pids, offload.pids, answered
        finally:
            await offload.close()

    restarts, before, after, answered = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (restarts, after) == (0, before)
    records = [json.loads(r)["tool"] for r in ledger.read_text().splitlines()]
    assert records == ["stock"] * (2 + answered)


def test_a_worker_that_cannot_be_spawned_once_is_spawned_again_later(tmp_path: Path) -> None:
    """A spawn that failed with OSError (a fork refused under load) after the pool had
    started turned the pool off for good: every shell then rewrote results in its event
    loop. Now a result meanwhile passes unrewritten at once (no worker to wait for), and
    one after the backoff starts a worker again."""

    async def scenario() -> tuple[bool, str, float, str, int]:
        offload = Offload(CONFIG)
        assert await offload.start()
        try:
            lane = offload.session()
            assert await lane.rewrite(line(1, [1, 2]), CALL, "s") is not None
            python, offload._python = offload._python, str(tmp_path / "no-such-python")
            [worker] = offload._workers
            offload._kill(worker)  # its replacement cannot be spawned
            for _ in range(600):
                if not offload._workers and not offload._background:
                    break
                await asyncio.sleep(0.05)
            offload._python = python  # the fork would succeed again
            available = lane.available
            started = asyncio.get_running_loop().time()
            reason = ""
            try:
                await lane.rewrite(line(2, [3, 4]), CALL, "s")
            except OffloadFailed as e:
                reason = e.reason
            waited = asyncio.get_running_loop().time() - started
            got = ""
            for _ in range(100):  # past the backoff, a result spawns a worker again
                try:
                    got = text_of(await lane.rewrite(line(3, [5, 6]), CALL, "s"), b"")
                    break
                except OffloadFailed:
                    await asyncio.sleep(0.2)
            return available, reason, waited, got, len(offload._workers)
        finally:
            await offload.close()

    available, reason, waited, got, workers = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert (available, reason, got, workers) == (True, "no-worker", "[5,6]", 1)
    assert waited < 5  # it did not wait for a worker's start-up deadline (30 s)


def test_a_write_the_outbox_let_go_is_finished_when_its_task_is_cancelled() -> None:
    """A task that hands the outbox a line (a 2026-07-28 request's stream, cancelled by its
    client while its answer is being written to a client that reads slowly) was cancelled
    inside the write: the rest of a line over a slice was never written (the next message
    was glued to half of it) and the lines let go with it were lost. The write finishes."""
    big = (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "x" * (3 << 20)},
            }
        ).encode()
        + b"\n"
    )
    small = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"y"}}\n'

    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        got = bytearray()

        def read_all() -> None:
            with os.fdopen(read_fd, "rb") as f:
                while chunk := f.read(1 << 16):
                    got.extend(chunk)

        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb")
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        reader = threading.Thread(target=read_all, daemon=True)

        async def write(data: bytes, _: None) -> None:
            await write_chunked(writer, data)

        outbox: Outbox[None] = Outbox(ProxyCore(CONFIG), None, write)
        try:
            task = asyncio.create_task(outbox.feed(big, None))
            for _ in range(500):  # until the write waits for the pipe (nobody reads yet)
                if transport.get_write_buffer_size():
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            reader.start()
            await asyncio.wait_for(outbox.feed(small, None), 30)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if not reader.is_alive():
                reader.start()
            await loop.run_in_executor(None, reader.join, 30)
        return bytes(got)

    got = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert got == big + small, (len(got), len(big + small))


def test_a_drain_with_a_timeout_gives_up_a_write_to_a_client_that_reads_no_more() -> None:
    """At shutdown (``drain`` with a timeout) a line still being written to a client that
    reads nothing more is given up on, as the task's cancellation did before the write had
    a task of its own: the drain returns."""
    big = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"'
    big += b"x" * (3 << 20) + b'"}}\n'

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        read_fd, write_fd = os.pipe()
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb")
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)

        async def write(data: bytes, _: None) -> None:
            await write_chunked(writer, data)

        outbox: Outbox[None] = Outbox(ProxyCore(CONFIG), None, write)
        try:
            task = asyncio.create_task(outbox.feed(big, None))
            for _ in range(500):  # until the write waits for the pipe (nobody reads)
                if transport.get_write_buffer_size():
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await asyncio.wait_for(outbox.drain(timeout=0), 30)
        finally:
            transport.abort()
            os.close(read_fd)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_result_queued_when_the_last_worker_dies_during_a_backoff_passes_at_once(
    tmp_path: Path,
) -> None:
    """A growth of the pool failed to spawn (OSError), then its one worker died: no worker
    could be started (the backoff), yet the result queued behind it waited for one (the
    start-up deadline, 30 s). It passes unrewritten at once."""
    codec = Codec(dumps=fault_codec.stuck_dumps)

    async def scenario() -> tuple[str, str]:
        offload = Offload(CONFIG, codec, max_workers=2)
        assert await offload.start()
        try:
            stuck_lane, lane = offload.session(), offload.session()
            assert await lane.rewrite(line(1, [1, 2]), CALL, "s") is not None  # ready
            # Every growth from now on fails, the one a busy pool may ask for at once too
            # (a second worker started then would be ready in time to take the queued result).
            python, offload._python = offload._python, str(tmp_path / "no-such-python")
            offload._respawn_wait = 60.0  # the backoff outlasts the test on a loaded machine
            stuck = asyncio.create_task(stuck_lane.rewrite(line(2, stock(2)), CALL, "s"))
            for _ in range(200):
                await asyncio.sleep(0.01)
                if offload._workers[0].job is not None:
                    break
            queued = asyncio.create_task(lane.rewrite(line(3, [3, 4]), CALL, "s"))
            for _ in range(600):  # the growth it asked for fails
                await asyncio.sleep(0.01)
                if offload._respawn_at and not offload._background:
                    break
            offload._python = python
            offload._kill(offload._workers[0])
            reasons = []
            for task in (stuck, queued):
                try:
                    await asyncio.wait_for(task, 10)
                    reasons.append("rewritten")
                except OffloadFailed as e:
                    reasons.append(e.reason)
            return reasons[0], reasons[1]
        finally:
            await offload.close()

    assert asyncio.run(asyncio.wait_for(scenario(), 120)) == ("worker-exited", "no-worker")


def test_results_pass_as_sent_once_workers_keep_dying(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers that die before they are ready, again and again (here: an interpreter that
    exits at once): once the pool gives up, results pass as the server wrote them; none is
    rewritten in the event loop instead (whatever kills the workers would kill the proxy)."""
    monkeypatch.setenv("GCFKIT_TEST_PARENT", str(os.getpid()))
    fault_codec.IN_PARENT.clear()
    config = dataclasses.replace(CONFIG, policy=Policy())
    codec = Codec(dumps=fault_codec.crash_dumps)

    async def scenario() -> list[tuple[bytes, bytes]]:
        from gcfkit.transports.relay import receive, rewrite_job

        offload = Offload(config, codec, python="/bin/false")
        try:
            if not await offload.start():
                pytest.skip("the pool did not start: nothing to give up")
            for _ in range(500):  # each death is seen within milliseconds; bounded anyway
                if not offload.available:
                    break
                await asyncio.sleep(0.02)
            assert not offload.available
            core = ProxyCore(config, codec)
            lane = offload.session()
            pairs = []
            for i in range(1, 4):
                request = {"jsonrpc": "2.0", "id": i, "method": "tools/call"}
                request["params"] = {"name": "stock", "arguments": {}}
                core.from_client(json.dumps(request).encode() + b"\n")
                sent = line(i, stock(i))
                got = receive(core, lane, sent)
                if not isinstance(got, list):
                    got = await rewrite_job(core, lane, got, core.pop_events())
                pairs.append((sent, b"".join(o.data for o in got if o.to == "client")))
            return pairs
        finally:
            await offload.close()

    pairs = asyncio.run(scenario())
    assert fault_codec.IN_PARENT == [], "rewritten in the event loop"
    assert all(out == sent for sent, out in pairs)
