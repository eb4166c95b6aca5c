"""Python-literal results (issue 10 item 3): read exactly, answered like JSON, proven to render
back to the server's exact text before they are sent; everything else left alone."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gcfkit
from gcfkit.answers.pyliteral import MAX_LITERAL_BYTES, literal_value, renders
from gcfkit.jsonio import same_value
from gcfkit.proxy.core import ProxyConfig, ProxyCore
from tests.conformance import GCF_HEADS

ROOT = Path(__file__).resolve().parent.parent

# What mcp-server-sqlite's read_query answers: str([dict(row) for row in rows]).
ROWS = [
    {"id": i, "title": f"Track {i}", "artist": "Dayna Blackwell", "bpm": None if i % 4 else 120.5}
    for i in range(1, 30)
]
SQLITE_TEXT = str(ROWS)


def test_sqlite_shapes_are_read_exactly() -> None:
    assert literal_value(SQLITE_TEXT) == ROWS
    assert literal_value("[{'id': 1, 'bpm': None}]") == [{"id": 1, "bpm": None}]
    assert literal_value("[]") == [] and literal_value("{}") == {}
    tricky = [{"q": "it's", "d": 'say "hi"', "both": 'it\'s "x"', "tab": "a\tb\n", "e": "é😀"}]
    assert literal_value(str(tricky)) == tricky
    nums = {"neg": -3, "z": -0.0, "big": 1e16, "small": 1e-07, "t": True, "f": False}
    got = literal_value(str(nums))
    assert got == nums and repr(got) == str(nums)


@pytest.mark.parametrize(
    "text",
    [
        "[(1, 'a')]",  # a tuple
        "[{1, 2}]",  # a set
        "[b'x']",  # bytes
        "[Decimal('1.5')]",  # a call
        "[datetime.date(2024, 1, 2)]",
        "{1: 'a'}",  # a non-string key
        "[{'a': 1},]",  # not what repr writes
        "[{'a':1}]",
        '[{"a": 1}]',  # repr writes single quotes
        "[nan]",
        "[inf]",
        "[1+2j]",
        "[x]",
        "[__import__('os').system('true')]",
        "'just a string'",
        "[{'a': 1}] trailing",
        "[{'a': None, 'a': 1}]",  # a key twice: repr never writes it
    ],
)
def test_anything_but_an_exact_literal_is_left_alone(text: str) -> None:
    assert literal_value(text) is None


def test_tuples_only_by_opt_in() -> None:
    assert literal_value("[(1, 'a'), (2, None)]", tuples=True) == [[1, "a"], [2, None]]
    assert literal_value("[(1, 'a')]", tuples=True, max_bytes=3) is None
    assert literal_value("[{1, 2}]", tuples=True) is None
    assert literal_value("[Decimal('1')]", tuples=True) is None


def test_size_bound() -> None:
    text = str([{"k": "x" * 100}] * (MAX_LITERAL_BYTES // 100))
    assert literal_value(text) is None
    assert literal_value(text, max_bytes=len(text)) is not None


_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text()
_floats = st.floats(allow_nan=False, allow_infinity=False)
_values = st.recursive(
    _scalars | _floats,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_values, max_size=5) | st.dictionaries(st.text(), _values, max_size=5))
def test_every_repr_of_a_json_model_value_is_read_back(value: Any) -> None:
    text = repr(value)
    got = literal_value(text)
    assert got is not None and repr(got) == text
    assert same_value(got, value, number_types=True)


# -- through the proxy core ----------------------------------------------------------------


def exchange(core: ProxyCore, text: str, msg_id: int = 1) -> tuple[list[str], str]:
    req = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
           "params": {"name": "read_query", "arguments": {"query": "SELECT"}}}  # fmt: skip
    core.from_client(json.dumps(req).encode() + b"\n")
    resp = {"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": text}]}}
    (out,) = core.from_server(json.dumps(resp).encode() + b"\n")
    result = json.loads(out.data)["result"]
    records = core.pop_records()
    return [b["text"] for b in result["content"]], records[-1].decision


def core_of(**kw: Any) -> ProxyCore:
    kw.setdefault("primer", False)
    kw.setdefault("refs", "off")
    return ProxyCore(ProxyConfig(time_budget=60.0, **kw))


def decoded(text: str) -> Any:
    return json.loads(text) if text[:1] in "[{" else gcfkit.decode(text)


def test_a_sqlite_result_becomes_gcf_that_renders_back_exactly() -> None:
    texts, decision = exchange(core_of(), SQLITE_TEXT)
    assert decision in ("gcf", "dense")
    assert texts[0].startswith(GCF_HEADS)
    assert repr(decoded(texts[0])) == SQLITE_TEXT
    assert gcfkit.tokens.count(texts[0]) < gcfkit.tokens.count(SQLITE_TEXT)


def test_small_literals_go_as_compact_json_or_stay() -> None:
    texts, decision = exchange(core_of(), "[{'id': 1, 'bpm': None}]")
    assert decision in ("json-minified", "unchanged")
    assert repr(decoded(texts[0])) == "[{'id': 1, 'bpm': None}]"


def test_a_form_that_does_not_render_back_is_refused() -> None:
    # GCF writes 1.0 as 1 (§2.3.1): decoded, it renders '1', not the server's '1.0'.
    rows = [{"bpm": float(i), "title": f"Track number {i}"} for i in range(40)]
    texts, decision = exchange(core_of(dense=()), str(rows))
    assert decision == "fallback:selfcheck"
    assert not texts[0].startswith("GCF")
    assert repr(json.loads(texts[0])) == str(rows)  # compact JSON keeps 1.0


def test_tuples_and_off() -> None:
    rows = str([(i, f"Track {i}", "Dayna Blackwell") for i in range(30)])
    texts, decision = exchange(core_of(), rows)
    assert texts == [rows] and decision == "unchanged"
    texts, decision = exchange(core_of(literals="tuples"), rows)
    assert decision in ("gcf", "dense", "json-minified")
    assert decoded(texts[0]) == [[i, f"Track {i}", "Dayna Blackwell"] for i in range(30)]
    texts, _ = exchange(core_of(literals="off"), SQLITE_TEXT)
    assert texts == [SQLITE_TEXT]


def test_renders() -> None:
    assert renders(ROWS, SQLITE_TEXT)
    assert not renders([{**ROWS[0], "bpm": 1}], str([{**ROWS[0], "bpm": 1.0}]))


# -- end to end: the SDK client, the proxy's CLI, an SDK server answering str(rows) ----------


def test_sqlite_server_through_the_proxy() -> None:
    mcp = pytest.importorskip("mcp")
    del mcp
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = [sys.executable, str(ROOT / "tests" / "sqlite_server.py")]
    proxy = [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--time-budget", "30"]
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_query", {"query": "SELECT * FROM tracks"}),
        ("read_query", {"query": "SELECT id, bpm FROM tracks WHERE id < 3"}),
        ("describe_table", {"table_name": "tracks"}),
        ("list_tables", {}),
        ("read_tuples", {"query": "SELECT * FROM tracks"}),
    ]

    async def run(command: list[str]) -> list[list[str]]:
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        out: list[list[str]] = []
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            for name, args in calls:
                result = await s.call_tool(name, args)
                out.append([b.text for b in result.content if b.type == "text"])
        return out

    async def both() -> tuple[list[list[str]], list[list[str]]]:
        direct = await run(server)
        proxied = await run([*proxy, "--", *server])
        return direct, proxied

    direct, proxied = asyncio.run(asyncio.wait_for(both(), 90))
    assert direct[0][0].startswith("[{'id': 1, 'title': 'Track 1'")
    big = proxied[0][0]
    assert big.startswith(GCF_HEADS)
    assert gcfkit.tokens.count(big) < gcfkit.tokens.count(direct[0][0])
    for want, got in zip(direct, proxied, strict=True):
        if len(got) == 2 and re.fullmatch(r"ref=[1-9][0-9]{5}", got[1]):
            got = got[:1]  # a large text passed untouched is named beside it (--refs auto)
        assert len(got) == len(want) == 1
        if got[0] == want[0]:
            continue
        assert repr(decoded(got[0])) == want[0]
    assert proxied[4][0] == direct[4][0]  # tuples: untouched without the opt-in
