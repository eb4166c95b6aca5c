"""The one answer policy (gcfkit.answers.choose) and its promise at both entry points: an
answer never costs more tokens than compact JSON of the same value (nor, in the proxy, than
what the tool wrote), whatever the sequence of calls, and it always reads back exactly.

There is no mode in which a caller asks for GCF regardless of size: ``format="gcf"`` means
"the cheapest lossless form", so the property holds with no exception.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer

import gcfkit
from gcfkit import keyed, tokens
from gcfkit.answers.choose import (
    AnswerPolicy,
    Candidates,
    Choice,
    Cost,
    Decision,
    Fallback,
    Form,
    advance,
    choose,
    held_after,
    settle,
)
from gcfkit.graph import Edge, Graph, SessionReader, Symbol
from gcfkit.jsonio import dumps_compact, same_value
from gcfkit.mcp.client import with_output_format
from gcfkit.mcp.server import GCFResponder, graph_to_json
from gcfkit.proxy import ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy, ToolPolicy
from gcfkit.proxy.record import ledger_decision
from tests.conformance import GCF_HEADS

ENC = "o200k_base"
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def count(text: str) -> int:
    return tokens.count(text, ENC)


def form(text: str, n: int) -> Form:
    return Form(text, n, len(text))


# --------------------------------------------------------------------------------------
# choose(): the rule, case by case
# --------------------------------------------------------------------------------------

JS = form('[{"id":1}]', 10)


@pytest.mark.parametrize(
    ("candidates", "ratio", "decision"),
    [
        (Candidates(json=JS), 1.0, "json"),
        (Candidates(json=JS, gcf=form("G", 9)), 1.0, "gcf"),
        (Candidates(json=JS, gcf=form("G", 10)), 1.0, "json"),  # a tie is not fewer
        (Candidates(json=JS, original=Cost(10, 10)), 1.0, "original"),  # not larger: kept
        (Candidates(json=JS, original=Cost(10, 99)), 1.0, "json"),  # same tokens, fewer bytes
        (Candidates(json=JS, original=Cost(8, 8), gcf=form("G", 9)), 1.0, "original"),
        (Candidates(json=JS, original=Cost(30, 30), gcf=form("G", 9)), 1.0, "gcf"),
        (Candidates(json=JS, gcf=form("G", 9), delta=form("D", 6)), 0.6, "gcf"),  # 6 >= 5.4
        (Candidates(json=JS, gcf=form("G", 9), delta=form("D", 5)), 0.6, "delta"),
        (Candidates(json=JS, delta=form("D", 9)), 1.0, "delta"),
        (Candidates(json=JS, delta=form("D", 11)), 1.0, "json"),  # the §7.3 case
        (Candidates(json=JS, delta=form("U", 3), unchanged=True), 1.0, "unchanged"),
        (Candidates(json=JS, original=Cost(4, 4), delta=form("D", 4)), 1.0, "original"),
    ],
)
def test_choose(candidates: Candidates, ratio: float, decision: str) -> None:
    assert choose(candidates, AnswerPolicy(delta_ratio=ratio)).decision == decision


@given(
    st.integers(1, 200),
    st.one_of(st.none(), st.integers(1, 200)),
    st.one_of(st.none(), st.integers(1, 200)),
    st.one_of(st.none(), st.integers(1, 200)),
    st.floats(0.1, 1.0),
)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_choose_is_never_more_than_json_or_the_original(
    js: int, original: int | None, gcf: int | None, delta: int | None, ratio: float
) -> None:
    c = Candidates(
        json=form("j", js),
        original=None if original is None else Cost(original, original),
        gcf=None if gcf is None else form("g", gcf),
        delta=None if delta is None else form("d", delta),
    )
    choice = choose(c, AnswerPolicy(delta_ratio=ratio))
    assert choice.tokens <= js and (original is None or choice.tokens <= original)
    assert (choice.text is None) == (choice.decision == "original")


def test_settle_verifies_only_the_winner_and_falls_back_in_order() -> None:
    c = Candidates(json=JS, gcf=form("G", 8), delta=form("D", 2))
    seen: list[str] = []

    def refuse_all(choice: Choice) -> bool:
        seen.append(choice.decision)
        return False

    choice = settle(c, AnswerPolicy(), refuse_all)
    assert seen == ["delta", "gcf"] and choice.decision == "json"
    assert [f.reason for f in choice.fallbacks] == ["delta-selfcheck", "selfcheck"]
    assert ledger_decision([choice]) == "fallback:delta-selfcheck"
    assert settle(c, AnswerPolicy(), None).decision == "delta"


def test_ledger_words() -> None:
    decisions: tuple[Decision, ...] = ("gcf", "json", "delta", "unchanged", "original")
    words = {
        d: ledger_decision([Choice(None if d == "original" else "x", 1, d)]) for d in decisions
    }
    assert words == {
        "gcf": "gcf",
        "json": "json-minified",
        "delta": "delta",
        "unchanged": "unchanged-delta",
        "original": "unchanged",
    }
    refused = Choice("[1]", 1, "json", (Fallback("encode", "RecursionError"),))
    assert ledger_decision([Choice("G", 1, "gcf"), refused]) == "fallback:encode-RecursionError"


def test_advance_leaves_the_held_state_alone_and_held_after_follows_the_policy() -> None:
    def start(ks: keyed.KeyedSet) -> keyed.DeltaSession:
        return keyed.DeltaSession(ks, reanchor=keyed.FixedN(2))

    a = keyed.KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}, {"id": 2, "v": 0}])
    b = keyed.KeyedSet("id", ["id", "v"], [{"id": 1, "v": 1}, {"id": 2, "v": 0}])
    held = advance(None, a, start).after
    root = held.root
    step = advance(held, b, start)
    assert step.wire is not None and not step.is_full and step.before is held
    # Diffing again from the same held state gives the same answer: nothing was consumed.
    again = advance(held, b, start)
    assert again.wire == step.wire and held.root == root == keyed.pack_root(a)
    assert step.after.root == keyed.pack_root(b)
    # FixedN(2): the second delta turn re-anchors.
    assert advance(step.after, a, start).is_full
    json_choice = Choice("[]", 1, "json")
    assert held_after(json_choice, step, AnswerPolicy()) is None
    assert held_after(json_choice, step, AnswerPolicy(tracks_delivery=True)) is step.after
    assert held_after(Choice("D", 1, "delta"), step, AnswerPolicy()) is step.after


# --------------------------------------------------------------------------------------
# Row sets for both entry points
# --------------------------------------------------------------------------------------

NAMES = st.text(alphabet="abcdefgh xyz", min_size=0, max_size=12)


@st.composite
def row_sets(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """A sequence of keyed row sets for one call: each an edit of the one before (rows
    changed, added, removed), sizes from empty to dozens, a schema change now and then."""
    n = draw(st.integers(0, 40))
    rows: list[dict[str, Any]] = [
        {"id": i, "name": draw(NAMES), "n": draw(st.integers(-5, 5))} for i in range(n)
    ]
    out = [rows]
    next_id = n
    for _ in range(draw(st.integers(1, 5))):
        rows = [dict(r) for r in out[-1]]
        action = draw(st.sampled_from(["edit", "shrink", "grow", "same", "schema", "tiny"]))
        if action == "edit" and rows:
            i = draw(st.integers(0, len(rows) - 1))
            rows[i]["n"] += 1
        elif action == "shrink":
            rows = rows[: draw(st.integers(0, len(rows)))]
        elif action == "grow":
            for _ in range(draw(st.integers(1, 10))):
                rows.append({"id": next_id, "name": draw(NAMES), "n": 0})
                next_id += 1
        elif action == "schema":
            rows = [{**r, "extra": True} for r in rows]
        elif action == "tiny":
            rows = rows[:1]
        out.append(rows)
    return out


def by_id(rows: Any) -> dict[Any, Any]:
    return {r["id"]: r for r in rows}


# --------------------------------------------------------------------------------------
# Entry point 1: the server helpers (GCFResponder), through the real SDK in memory
# --------------------------------------------------------------------------------------


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(60):
            await body()

    anyio.run(bounded)


def server(responder: GCFResponder, state: dict[str, Any]) -> MCPServer:
    srv = MCPServer("answers")

    @srv.tool()
    @responder.tool(delta_key="id")
    def rows() -> list[dict[str, Any]]:
        return [dict(r) for r in state["rows"]]

    @srv.tool()
    @responder.tool
    def value() -> Any:
        return state["value"]

    @srv.tool()
    @responder.tool
    def graph() -> Graph:
        return state["graph"]  # type: ignore[no-any-return]

    return srv


@asynccontextmanager
async def gcf_client(srv: MCPServer) -> AsyncIterator[Client]:
    transport: Any = with_output_format(InMemoryTransport(srv), "gcf")
    async with Client(transport, mode="legacy") as c:
        yield c


def text_of(result: Any) -> str:
    assert not result.is_error
    (block,) = result.content
    return str(block.text)


def header(text: str) -> dict[str, str]:
    first = text.split("\n", 1)[0]
    if not first.startswith("GCF "):
        return {}
    return dict(p.split("=", 1) for p in first.split(" ")[1:] if "=" in p)


class KeyedConsumer:
    """A §10a client: reads any answer, remembers the last pack root it saw and echoes it."""

    def __init__(self) -> None:
        self.held: keyed.KeyedSet | None = None
        self.root: str | None = None

    def read(self, text: str) -> list[dict[str, Any]]:
        head = header(text)
        if not head:
            value = json.loads(text)
            return list(value)
        if head.get("unchanged") == "true":
            assert self.held is not None and keyed.pack_root(self.held) == head["pack_root"]
        elif head.get("delta") == "true":
            assert self.held is not None
            self.held = keyed.apply_delta(self.held, keyed.loads_delta(text))  # root-checked
        else:
            self.held = keyed.loads_keyed(text)  # checked against its pack_root
        self.root = keyed.pack_root(self.held)
        return list(self.held.rows)


@pytest.mark.parametrize("reanchor", [None, keyed.FixedN(3)], ids=["size-guard", "fixed-3"])
@given(sequence=row_sets())
@SETTINGS
def test_server_answers_never_cost_more_than_json(
    reanchor: keyed.FixedN | None, sequence: list[list[dict[str, Any]]]
) -> None:
    state: dict[str, Any] = {}
    srv = server(GCFResponder(default_format="gcf", reanchor=reanchor), state)

    async def body() -> None:
        consumer = KeyedConsumer()
        async with gcf_client(srv) as c:
            for rows in sequence:
                state["rows"] = rows
                args = {} if consumer.root is None else {"pack_root": consumer.root}
                text = text_of(await c.call_tool("rows", args))
                assert count(text) <= count(dumps_compact(rows)), (len(rows), text)
                got = consumer.read(text)
                assert by_id(got).keys() == by_id(rows).keys()
                assert all(same_value(by_id(got)[k], r) for k, r in by_id(rows).items())

    run(body)


def test_server_reanchor_to_a_tiny_set_answers_in_json() -> None:
    # Review 2026-12-01 §7.3: with the default SizeGuard, a 40-row set goes out as GCF; the
    # next echoed call returning 1 row re-anchored with the full keyed payload (its 64-hex
    # pack_root header alone costs dozens of tokens), several times what compact JSON costs.
    # One answer policy for both entry points makes it JSON.
    rows = [{"id": i, "name": f"user{i}", "team": "core"} for i in range(40)]
    state: dict[str, Any] = {"rows": rows}
    srv = server(GCFResponder(default_format="gcf"), state)

    async def body() -> None:
        async with gcf_client(srv) as c:
            full = text_of(await c.call_tool("rows", {}))
            assert header(full)["pack_root"] and count(full) < count(dumps_compact(rows))
            state["rows"] = rows[:1]
            text = text_of(await c.call_tool("rows", {"pack_root": header(full)["pack_root"]}))
            assert text == dumps_compact(rows[:1])
            resent = keyed.dumps_full(keyed.KeyedSet("id", ["id", "name", "team"], rows[:1]))
            assert count(resent) > 3 * count(text)

    run(body)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | NAMES,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(NAMES, inner, max_size=6),
    max_leaves=30,
)


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    names = draw(st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6))
    symbols = [
        Symbol(f"pkg.{n}", "function", draw(st.sampled_from([0.5, 1.0])), "ast") for n in names
    ]
    edges = [Edge(f"pkg.{a}", f"pkg.{b}", "calls") for a, b in itertools.pairwise(names)]
    return Graph(symbols, edges)


@given(st.lists(JSON_VALUES, min_size=1, max_size=3), st.lists(graphs(), min_size=1, max_size=4))
@SETTINGS
def test_server_generic_and_graph_answers_never_cost_more_than_json(
    values: list[Any], graph_calls: list[Graph]
) -> None:
    state: dict[str, Any] = {}
    srv = server(GCFResponder(default_format="gcf"), state)

    async def body() -> None:
        reader = SessionReader()
        async with gcf_client(srv) as c:
            for v in values:
                state["value"] = v
                text = text_of(await c.call_tool("value", {}))
                assert count(text) <= count(dumps_compact(v))
                back = gcfkit.loads(text) if text.startswith("GCF") else json.loads(text)
                assert same_value(back, v)
            for g in graph_calls:
                state["graph"] = g
                text = text_of(await c.call_tool("graph", {}))
                want = graph_to_json(g)
                assert count(text) <= count(dumps_compact(want))
                if text.startswith("GCF"):
                    got = reader.loads(text)
                    # The graph profile sends symbols in its canonical order (§16.1).
                    assert set(got.symbols) == set(g.symbols) and set(got.edges) == set(g.edges)
                else:
                    assert json.loads(text) == want

    run(body)


def test_an_empty_graph_is_answered_in_json() -> None:
    state: dict[str, Any] = {"graph": Graph()}
    srv = server(GCFResponder(default_format="gcf"), state)

    async def body() -> None:
        async with gcf_client(srv) as c:
            text = text_of(await c.call_tool("graph", {}))
            assert json.loads(text) == {"symbols": [], "edges": []}

    run(body)


# --------------------------------------------------------------------------------------
# Entry point 2: the proxy core
# --------------------------------------------------------------------------------------


def tool_call(core: ProxyCore, msg_id: int, text: str) -> str:
    core.from_client(
        json.dumps(
            {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": {"name": "t"}}
        ).encode()
        + b"\n"
    )
    result = {"content": [{"type": "text", "text": text}]}
    (out,) = core.from_server(
        json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}).encode() + b"\n"
    )
    return str(json.loads(out.data)["result"]["content"][0]["text"])


class ProxyConsumer:
    """A client behind the proxy: reads GCF, compact JSON, the original, or a delta against
    the last set it read."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] | None = None

    def read(self, text: str) -> Any:
        head = header(text)
        if head.get("unchanged") == "true":
            assert self.rows is not None
            return self.rows
        if head.get("delta") == "true":
            assert self.rows is not None
            base = keyed.KeyedSet(head["key"], list(self.rows[0]), self.rows)
            value = list(keyed.apply_delta(base, keyed.loads_delta(text)).rows)
        else:
            # v3.5.3 or the dense profile: gcfkit.decode reads either by its header.
            value = gcfkit.decode(text) if text.startswith(GCF_HEADS) else json.loads(text)
        self.rows = value if isinstance(value, list) and value else None
        return value


@pytest.mark.parametrize("delta", [False, True], ids=["plain", "delta"])
@given(sequence=row_sets(), indent=st.sampled_from([None, 1, 2]))
@SETTINGS
def test_proxy_answers_never_cost_more_than_json_or_the_original(
    delta: bool, sequence: list[list[dict[str, Any]]], indent: int | None
) -> None:
    policy = Policy(defaults=ToolPolicy(delta=delta))
    core = ProxyCore(ProxyConfig(policy=policy, primer=False, stats=False, time_budget=60))
    consumer = ProxyConsumer()
    for i, rows in enumerate(sequence):
        original = json.dumps(rows, indent=indent)
        text = tool_call(core, i, original)
        assert count(text) <= min(count(dumps_compact(rows)), count(original))
        got = consumer.read(text)
        assert by_id(got).keys() == by_id(rows).keys()
        assert all(same_value(by_id(got)[k], r) for k, r in by_id(rows).items())
