"""Replay every recorded MCP tool result of ../shared/corpus/mcp through the proxy core:
lossless on every one, never larger, file contents and non-JSON text untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import gcfkit
from gcfkit import tokens
from gcfkit.answers.choose import utf8_len
from gcfkit.answers.since import FREE_NAMING_BYTES
from gcfkit.jsonio import same_value
from gcfkit.proxy.core import Output, ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy, ToolPolicy
from tests.conformance import CORPUS_DIR, GCF_HEADS

CORPUS = CORPUS_DIR / "mcp"
FILES = sorted(CORPUS.glob("*/[0-9][0-9][0-9]_*.json"))

pytestmark = pytest.mark.skipif(not FILES, reason="shared corpus not available")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def texts(result: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for b in result.get("content", [])
        if b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def json_value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


def replay(core: ProxyCore, entry: dict[str, Any], msg_id: int) -> dict[str, Any]:
    params = {"name": entry["tool"], "arguments": entry["arguments"]}
    request = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}
    up = core.from_client(json.dumps(request).encode() + b"\n")
    assert [o.to for o in up] == ["server"]
    response = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": entry["result"]}).encode()
    (out,) = core.from_server(response + b"\n")
    assert isinstance(out, Output) and out.to == "client"
    if out.data == response + b"\n":
        return dict(entry["result"])
    result: dict[str, Any] = json.loads(out.data)["result"]
    return result


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_recorded_result_is_lossless_and_never_larger(path: Path, encoding: str) -> None:
    entry = load(path)
    core = ProxyCore(ProxyConfig(primer=False, encoding=encoding, time_budget=60.0))
    before = entry["result"]
    after = replay(core, entry, 1)
    (record,) = core.pop_records()
    assert sum(tokens.count(t, encoding) for t in texts(after)) == record.tokens_after
    named = texts(after)[-1] if len(texts(after)) == len(texts(before)) + 1 else None
    if named is not None:
        # A large result is named from the start (--refs auto): its own blocks are never
        # larger, and the ref= block beside them is at most 2% of it.
        assert re.fullmatch(r"ref=[1-9][0-9]{5}", named)
        assert utf8_len("".join(texts(before))) >= FREE_NAMING_BYTES
        block = tokens.count(named, encoding)
        assert record.tokens_after - block <= record.tokens_before
        assert block <= 0.02 * record.tokens_before
    else:
        assert record.tokens_after <= record.tokens_before
    # Everything but the text blocks is exactly as the server sent it.
    assert {k: v for k, v in after.items() if k != "content"} == {
        k: v for k, v in before.items() if k != "content"
    }
    non_text_before = [b for b in before.get("content", []) if b.get("type") != "text"]
    non_text_after = [b for b in after.get("content", []) if b.get("type") != "text"]
    assert non_text_after == non_text_before

    sent = texts(before)
    got = texts(after)
    if len(got) == len(sent) + 1 and re.fullmatch(r"ref=[1-9][0-9]{5}", got[-1]):
        got = got[:-1]  # the result's name (relative answers), after its own blocks
    elif got and got[0].startswith(GCF_HEADS) and " ref=" in got[0].split("\n", 1)[0]:
        # v3.5.3, or the dense profile where gcfkit.dense is installed and it is fewer tokens;
        # named where naming is free (--refs auto).
        assert re.match(r"(GCF profile=generic|GCF-dense) ref=[1-9][0-9]{5}\n", got[0]), got[0][:60]
    if got == sent:
        return
    values = [json_value(t) for t in sent]
    assert all(v is not None for v in values), "only JSON text may be rewritten"
    if len(got) == 1 and len(sent) > 1:
        values = [values]  # joined blocks
    assert len(got) == len(values)
    for text, value in zip(got, values, strict=True):
        decoded = gcfkit.decode(text) if text.startswith(GCF_HEADS) else json.loads(text)
        assert same_value(decoded, value)
    assert entry["tool"] not in Policy().file_tools
    assert not before.get("isError")


def test_file_reads_are_byte_faithful_even_when_json() -> None:
    npm = sorted((CORPUS / "filesystem-npm").glob("[0-9]*_read_text_file.json"))
    assert npm, "the corpus has JSON files read through read_text_file"
    core = ProxyCore(ProxyConfig(primer=False, time_budget=60.0))
    for i, path in enumerate(npm):
        entry = load(path)
        assert json_value(texts(entry["result"])[0]) is not None
        got = replay(core, entry, i)
        blocks = got["content"]
        if len(blocks) == len(entry["result"]["content"]) + 1:  # named: a ref= block after
            assert re.fullmatch(r"ref=[1-9][0-9]{5}", blocks[-1]["text"])
            got = {**got, "content": blocks[:-1]}
        assert got == entry["result"]


def test_whole_sessions_save_tokens_on_structured_results() -> None:
    """Per server, in recorded order, as one proxy session: the JSON servers get smaller."""
    saved: dict[str, tuple[int, int]] = {}
    for server in sorted({p.parent.name for p in FILES}):
        core = ProxyCore(ProxyConfig(primer=False, time_budget=60.0))
        for i, path in enumerate(p for p in FILES if p.parent.name == server):
            replay(core, load(path), i)
        records = core.pop_records()
        saved[server] = (
            sum(r.tokens_before for r in records),
            sum(r.tokens_after for r in records),
        )
    for server in ("memory", "serena", "time"):
        before, after = saved[server]
        assert after < before * 0.9, (server, before, after)
    for server in ("git", "filesystem-npm"):
        # Their texts pass untouched; a large one carries a 4-token ref= block beside it.
        before, after = saved[server]
        assert before <= after <= before * 1.01, server


def test_delta_sessions_are_never_larger() -> None:
    policy = Policy(defaults=ToolPolicy(delta=True))
    for server in sorted({p.parent.name for p in FILES}):
        core = ProxyCore(ProxyConfig(policy=policy, primer=False, time_budget=60.0))
        plain = ProxyCore(ProxyConfig(primer=False, time_budget=60.0))
        for i, path in enumerate(p for p in FILES if p.parent.name == server):
            entry = load(path)
            replay(core, entry, i)
            replay(plain, entry, i)
        with_delta = sum(r.tokens_after for r in core.pop_records())
        without = sum(r.tokens_after for r in plain.pop_records())
        assert with_delta <= without, server
