"""A tool result takes one road whether it is rewritten in the event loop's process or in a
worker: the core receives it, the same code rewrites it, the core finishes it.

The defect this guards against: the file-passthrough rule was written twice (the core's
large-line shortcut and the rewriter) and they differed, so a 1.2 MB file re-read with
``_since`` was answered ``@@ unchanged`` in process but sent again in full (1.28 MB) through
the worker pool, which is what every shell uses.

One real worker process per pool test, no network; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from gcfkit import relative
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.core import SINCE_ARGUMENT, Output, ProxyCore, ToolJob
from gcfkit.proxy.rewrite import Budget, Rewriter
from gcfkit.relative import ResultMemory
from gcfkit.transports.offload import Offload
from gcfkit.transports.relay import relay_one
from tests.proxy_support import request, response, text_result

CONFIG = ProxyConfig(primer=False, dense=(), time_budget=60.0)

#: A source file of 1.2 MB: over the core's 1 MB sniffing threshold, under max_text_bytes.
SOURCE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40_000))


def read_call(msg_id: int, since: str | None) -> bytes:
    args: dict[str, Any] = {"path": "src/big.py"}
    if since is not None:
        args[SINCE_ARGUMENT] = since
    return request(msg_id, "tools/call", {"name": "read_text_file", "arguments": args})


def texts(outputs: list[Output]) -> list[str]:
    (out,) = outputs
    assert out.to == "client"
    content = json.loads(out.data)["result"]["content"]
    return [block["text"] for block in content]


def reread_in_process() -> tuple[list[str], list[str]]:
    core = ProxyCore(CONFIG, memory=lambda: ResultMemory(seed=1))
    core.from_client(read_call(1, None))
    first = texts(core.from_server(response(1, text_result(SOURCE))))
    handle = relative.ref_of(first[-1])
    core.from_client(read_call(2, handle))
    return first, texts(core.from_server(response(2, text_result(SOURCE))))


def reread_in_a_worker() -> tuple[list[str], list[str]]:
    async def scenario() -> tuple[list[str], list[str]]:
        offload = Offload(CONFIG)
        assert await offload.start()
        try:
            core, lane = ProxyCore(CONFIG), offload.session()
            core.from_client(read_call(1, None))
            first = texts(await relay_one(core, lane, response(1, text_result(SOURCE))))
            handle = relative.ref_of(first[-1])
            core.from_client(read_call(2, handle))
            return first, texts(await relay_one(core, lane, response(2, text_result(SOURCE))))
        finally:
            await offload.close()

    return asyncio.run(asyncio.wait_for(scenario(), 120))


@pytest.mark.parametrize("road", [reread_in_process, reread_in_a_worker])
def test_a_large_file_reread_with_since_is_unchanged_on_either_road(road: Any) -> None:
    assert len(SOURCE.encode()) > 1_200_000
    first, second = road()
    assert first[0] == SOURCE  # a file read goes byte for byte
    assert relative.ref_of(first[1]) is not None  # and is named (it is large)
    assert second == [second[0]] and second[0].startswith("@@ unchanged tool=read_text_file ")


def test_a_tool_job_carries_the_message_the_core_parsed_and_is_answered_the_same() -> None:
    rows = [{"id": i, "name": f"n{i}", "tags": ["a", "b"]} for i in range(30)]
    answers = []
    for reuse in (False, True):
        core = ProxyCore(ProxyConfig(primer=False))
        core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
        line = response(1, text_result(json.dumps(rows, indent=2)))
        job = core.receive_server(line)
        assert isinstance(job, ToolJob)
        assert job.message == json.loads(line)
        rewriter = Rewriter(ProxyConfig(primer=False))
        message = job.message if reuse else None
        outcome, out = rewriter.rewrite_line(
            job.line, job.call, Budget.unlimited(), message=message
        )
        assert out is not None
        named = re.sub(rb"ref=\w+", b"ref=R", out)  # (each rewriter its own handle)
        answers.append((named, outcome.decision, outcome.tokens_before, outcome.tokens_after))
    assert answers[0] == answers[1]
    # Not safe to re-serialize: the core relays the line itself, no job (and no message).
    core = ProxyCore(ProxyConfig(primer=False))
    core.from_client(request(2, "tools/call", {"name": "t", "arguments": {}}))
    unsafe = b'{"jsonrpc":"2.0","id":2,"result":{"content":[],"content":[]}}\n'
    assert core.receive_server(unsafe) == [Output("client", unsafe, response=True)]
