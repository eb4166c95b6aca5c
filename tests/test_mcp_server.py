"""gcfkit.mcp.server through the official MCP SDK: real client, real server, in memory or stdio."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult

import gcfkit
from gcfkit import graph as gmod
from gcfkit.graph import Edge, Graph, Symbol
from gcfkit.mcp.client import with_output_format
from gcfkit.mcp.server import (
    GCFResponder,
    SessionLimits,
    client_output_format,
    graph_to_json,
    negotiated_format,
    respond,
)
from tests.conformance import GCF_HEADS

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 20

ROWS = [{"id": i, "name": f"user{i}", "team": "core" if i % 2 else "web"} for i in range(8)]
REF = "  # previously transmitted"


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await body()

    anyio.run(bounded)


def _graph(center: str, callers: list[str]) -> Graph:
    syms = [Symbol(center, "function", 1.0, "ast", 0)]
    syms += [Symbol(c, "function", 0.5, "ast", 1) for c in callers]
    return Graph(syms, [Edge(c, center, "calls") for c in callers])


GRAPHS = {
    "a": _graph("pkg.a", ["pkg.b", "pkg.c", "pkg.d"]),
    "b": _graph("pkg.b", ["pkg.c", "pkg.e"]),
}


def make_server(
    responder: GCFResponder | None = None, data: dict[str, Any] | None = None
) -> MCPServer:
    """A server with one tool per behaviour; ``data["orders"]`` feeds the delta tool."""
    gcf = responder or GCFResponder()
    state = data if data is not None else {}
    srv = MCPServer("test")

    @srv.tool()
    @gcf.tool
    def users(team: str | None = None) -> list[dict[str, Any]]:
        """List users."""
        return [r for r in ROWS if team is None or r["team"] == team]

    @srv.tool()
    @gcf.tool
    def untyped(n: int):  # type: ignore[no-untyped-def]
        return {"items": [{"id": i, "label": f"item {i}"} for i in range(n)]}

    @srv.tool()
    @gcf.tool
    def tiny() -> dict[str, int]:
        return {"a": 1}

    @srv.tool()
    @gcf.tool
    def huge_int() -> dict[str, Any]:
        return {"rows": ROWS, "big": 2**70}

    @srv.tool()
    @gcf.tool
    async def callers(symbol: str, ctx: Context) -> Graph:
        """Graph tool with its own Context parameter."""
        assert ctx.request_id
        return GRAPHS[symbol]

    @srv.tool()
    @gcf.tool(delta_key="id")
    def orders(status: str = "any") -> list[dict[str, Any]]:
        return [dict(o) for o in state.get("orders", [])]

    return srv


@asynccontextmanager
async def connect(
    srv: MCPServer, fmt: str | None = None, *, legacy: bool = True
) -> AsyncIterator[Client]:
    """A client on a stateful (handshake-era) connection, or with ``legacy=False`` on the
    stateless 2026-07-28 protocol; ``fmt`` is the output format it declares."""
    if not legacy and fmt is None:
        async with Client(srv) as c:
            yield c
        return
    transport: Any = InMemoryTransport(srv)
    if fmt is not None:
        transport = with_output_format(transport, fmt)  # type: ignore[arg-type]
    async with Client(transport, mode="legacy" if legacy else "auto") as c:
        assert (c.protocol_version == "2026-07-28") is not legacy
        yield c


def text(result: CallToolResult) -> str:
    assert not result.is_error, result.content
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def is_gcf(t: str) -> bool:
    return t.startswith(GCF_HEADS)


def value(t: str) -> Any:
    """What a client reads from either format (small results may stay JSON)."""
    return gcfkit.decode(t) if is_gcf(t) else json.loads(t)


# ---------------------------------------------------------------------------------------
# Negotiation
# ---------------------------------------------------------------------------------------


def test_json_default_for_a_client_that_asks_nothing() -> None:
    srv = make_server()

    async def body() -> None:
        for legacy in (True, False):
            async with connect(srv, legacy=legacy) as c:
                t = text(await c.call_tool("users", {}))
                assert not is_gcf(t)
                assert t == json.dumps(ROWS, separators=(",", ":"))

    run(body)


def test_session_capability_gcf_and_json() -> None:
    srv = make_server()

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            t = text(await c.call_tool("users", {}))
            assert t.startswith("GCF profile=generic tool=users\n")
            assert gcfkit.loads(t) == ROWS
            t = text(await c.call_tool("untyped", {"n": 4}))
            assert gcfkit.loads(t) == {"items": [{"id": i, "label": f"item {i}"} for i in range(4)]}
        async with connect(srv, "json") as c:
            t = text(await c.call_tool("users", {}))
            assert json.loads(t) == ROWS

    run(body)


def test_per_call_format_overrides_the_session() -> None:
    srv = make_server()

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            t = text(await c.call_tool("users", {"format": "json"}))
            assert json.loads(t) == ROWS
        for legacy in (True, False):
            async with connect(srv, legacy=legacy) as c:
                t = text(await c.call_tool("users", {"team": "web", "format": "gcf"}))
                assert gcfkit.loads(t) == [r for r in ROWS if r["team"] == "web"]
        async with connect(srv) as c:
            bad = await c.call_tool("users", {"format": "xml"})
            assert bad.is_error

    run(body)


def test_server_default_is_configurable() -> None:
    srv = make_server(GCFResponder(default_format="gcf"))

    async def body() -> None:
        async with connect(srv) as c:
            assert is_gcf(text(await c.call_tool("users", {})))
        async with connect(srv, "json") as c:
            assert not is_gcf(text(await c.call_tool("users", {})))

    run(body)
    with pytest.raises(ValueError):
        GCFResponder(default_format="xml")  # type: ignore[arg-type]


def test_gcf_only_when_it_is_fewer_tokens_than_compact_json() -> None:
    srv = make_server()

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            assert text(await c.call_tool("tiny", {})) == '{"a":1}'

    run(body)


def test_negotiation_helpers_read_the_sdk_request_context() -> None:
    srv = MCPServer("probe")
    seen: list[tuple[str | None, str]] = []

    @srv.tool()
    def probe(ctx: Context) -> str:
        seen.append((client_output_format(ctx), negotiated_format(ctx)))
        return "ok"

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            await c.call_tool("probe", {})
        async with connect(srv, "json") as c:
            await c.call_tool("probe", {})
        async with connect(srv) as c:
            await c.call_tool("probe", {})
        async with connect(srv, legacy=False) as c:
            await c.call_tool("probe", {})
        async with connect(srv, "gcf", legacy=False) as c:
            await c.call_tool("probe", {})

    run(body)
    assert seen == [
        ("gcf", "gcf"),
        ("json", "json"),
        (None, "json"),
        (None, "json"),
        ("gcf", "gcf"),
    ]
    assert negotiated_format(None, "GCF") == "gcf"
    with pytest.raises(ValueError):
        negotiated_format(None, "yaml")


# ---------------------------------------------------------------------------------------
# Decorator shape and structured content
# ---------------------------------------------------------------------------------------


def test_tool_schema_and_description_stay_intact() -> None:
    srv = make_server()
    plain = MCPServer("plain")

    @plain.tool()
    def users(team: str | None = None) -> list[dict[str, Any]]:
        """List users."""
        return ROWS

    @plain.tool()
    def orders(status: str = "any") -> list[dict[str, Any]]:
        return []

    async def body() -> None:
        async with connect(srv) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
        async with connect(plain) as c:
            ref = {t.name: t for t in (await c.list_tools()).tools}
        for name in ("users", "orders"):
            got, want = tools[name], ref[name]
            assert got.description == want.description
            assert got.output_schema == want.output_schema
            extra = set(got.input_schema["properties"]) - set(want.input_schema["properties"])
            assert extra == ({"format", "pack_root"} if name == "orders" else {"format"})
            assert got.input_schema.get("required") == want.input_schema.get("required")
        fmt = tools["users"].input_schema["properties"]["format"]
        assert {"enum": ["gcf", "json"], "type": "string"} in fmt["anyOf"]
        # the injected Context never reaches the schema
        assert "gcf_context" not in tools["users"].input_schema["properties"]
        assert "ctx" not in tools["callers"].input_schema["properties"]

    run(body)


def test_structured_content_kept_when_an_output_schema_is_declared() -> None:
    srv = make_server()

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            r = await c.call_tool("users", {})
            assert is_gcf(text(r))
            assert r.structured_content == {"result": ROWS}
            r = await c.call_tool("untyped", {"n": 2})
            assert r.structured_content is None
            r = await c.call_tool("callers", {"symbol": "a"})
            assert r.structured_content is not None
            assert [s["qualified_name"] for s in r.structured_content["symbols"]] == [
                s.qualified_name for s in GRAPHS["a"].symbols
            ]

    run(body)


def test_decorator_argument_names() -> None:
    gcf = GCFResponder()

    def has_format(format: str) -> dict[str, Any]:
        return {"format": format, "rows": ROWS}

    with pytest.raises(TypeError, match="format_arg"):
        gcf.tool(has_format)
    wrapped = gcf.tool(format_arg="output")(has_format)
    srv = MCPServer("names")
    srv.tool()(wrapped)

    async def body() -> None:
        async with connect(srv) as c:
            t = text(await c.call_tool("has_format", {"format": "x", "output": "gcf"}))
            assert gcfkit.loads(t) == {"format": "x", "rows": ROWS}

    run(body)


def test_respond_outside_a_request() -> None:
    r = respond(ROWS, None)
    assert json.loads(text(r)) == ROWS and r.structured_content is None
    r = respond(ROWS, None, format="gcf", tool="users", structured={"result": ROWS})
    assert text(r).startswith("GCF profile=generic tool=users\n")
    assert r.structured_content == {"result": ROWS}
    assert gcfkit.loads(text(respond(ROWS, None, format="gcf"))) == ROWS


# ---------------------------------------------------------------------------------------
# Encoding failures
# ---------------------------------------------------------------------------------------


def test_encoding_failure_falls_back_to_json_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    srv = make_server()

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            r = await c.call_tool("huge_int", {})
            assert json.loads(text(r)) == {"rows": ROWS, "big": 2**70}
            assert r.structured_content == {"rows": ROWS, "big": 2**70}

    with caplog.at_level(logging.WARNING, logger="gcfkit.mcp.server"):
        run(body)
    assert any("huge_int" in rec.getMessage() for rec in caplog.records)
    with pytest.raises(gcfkit.GCFError):
        gcfkit.dumps({"big": 2**70})  # the fallback above was needed


# ---------------------------------------------------------------------------------------
# Graph sessions (§9)
# ---------------------------------------------------------------------------------------


def _refs_and_decls(t: str) -> tuple[set[int], dict[int, str]]:
    refs: set[int] = set()
    decls: dict[int, str] = {}
    for line in t.splitlines():
        if m := re.fullmatch(r"@(\d+)" + re.escape(REF), line):
            refs.add(int(m.group(1)))
        elif m := re.fullmatch(r"@(\d+) \S+ (\S+) \S+ \S+", line):
            decls[int(m.group(1))] = m.group(2)
    return refs, decls


def test_graph_session_references_only_what_this_session_sent() -> None:
    srv = make_server()

    async def body() -> None:
        async with connect(srv, "gcf") as a, connect(srv, "gcf") as b:
            reader = gmod.SessionReader()
            t1 = text(await a.call_tool("callers", {"symbol": "a"}))
            refs1, decls1 = _refs_and_decls(t1)
            assert " session=true" in t1.split("\n", 1)[0]
            assert not refs1 and set(decls1.values()) == {"pkg.a", "pkg.b", "pkg.c", "pkg.d"}
            assert reader.loads(t1) == GRAPHS["a"].__class__(
                GRAPHS["a"].symbols, GRAPHS["a"].edges, tool="callers"
            )

            t2 = text(await a.call_tool("callers", {"symbol": "b"}))
            refs2, decls2 = _refs_and_decls(t2)
            sent = {name: ident for ident, name in decls1.items()}
            # pkg.b changed score and distance: its declaration differs, so it is re-declared
            # under its old ID; pkg.c is identical and travels as a bare reference.
            assert refs2 == {sent["pkg.c"]}
            assert decls2 == {sent["pkg.b"]: "pkg.b", max(decls1) + 1: "pkg.e"}
            got = reader.loads(t2)
            assert set(got.symbols) == set(GRAPHS["b"].symbols)
            assert set(got.edges) == set(GRAPHS["b"].edges)

            # Another connection has been sent nothing: everything is declared in full.
            t3 = text(await b.call_tool("callers", {"symbol": "b"}))
            refs3, decls3 = _refs_and_decls(t3)
            assert not refs3 and set(decls3.values()) == {"pkg.b", "pkg.c", "pkg.e"}

            # Repeating the first call on the first connection: all bare references.
            refs4, decls4 = _refs_and_decls(text(await a.call_tool("callers", {"symbol": "a"})))
            assert refs4 == set(decls1) - {sent["pkg.b"]} and set(decls4.values()) == {"pkg.b"}

    run(body)


def test_graph_without_a_stateful_session() -> None:
    srv = make_server()

    async def body() -> None:
        # The 2026-07-28 protocol has no connection that outlives a request: no session=true.
        async with connect(srv, "gcf", legacy=False) as c:
            for _ in range(2):
                t = text(await c.call_tool("callers", {"symbol": "a"}))
                assert "session=true" not in t and REF not in t
                assert gmod.loads(t).symbols == GRAPHS["a"].symbols
        async with connect(srv) as c:
            t = text(await c.call_tool("callers", {"symbol": "a"}))
            assert json.loads(t) == graph_to_json(GRAPHS["a"])

    run(body)


def test_session_state_is_dropped_when_the_connection_ends() -> None:
    gcf = GCFResponder()
    srv = make_server(gcf)

    async def body() -> None:
        async with connect(srv, "gcf") as a:
            await a.call_tool("callers", {"symbol": "a"})
            async with connect(srv, "gcf") as b:
                await b.call_tool("callers", {"symbol": "a"})
                assert gcf.session_count == 2
            await a.call_tool("callers", {"symbol": "a"})
            assert gcf.session_count == 1
        assert gcf.session_count == 0

    run(body)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_session_limits_expire_and_evict() -> None:
    clock = FakeClock()
    gcf = GCFResponder(limits=SessionLimits(max_sessions=1, idle_seconds=60), clock=clock)
    srv = make_server(gcf)

    def session_flag(t: str) -> bool:
        return " session=true" in t.split("\n", 1)[0]

    async def body() -> None:
        async with connect(srv, "gcf") as a, connect(srv, "gcf") as b:
            assert session_flag(text(await a.call_tool("callers", {"symbol": "a"})))
            assert REF in text(await a.call_tool("callers", {"symbol": "a"}))
            # b's session evicts a's (max_sessions=1): a gets a full non-session payload...
            assert session_flag(text(await b.call_tool("callers", {"symbol": "a"})))
            t = text(await a.call_tool("callers", {"symbol": "a"}))
            assert not session_flag(t) and REF not in t
            # ...and then a new session that declares everything again.
            t = text(await a.call_tool("callers", {"symbol": "a"}))
            assert session_flag(t) and REF not in t
            assert REF in text(await a.call_tool("callers", {"symbol": "a"}))
            # Idle past the limit: expired, full non-session payload.
            clock.now += 61
            t = text(await a.call_tool("callers", {"symbol": "a"}))
            assert not session_flag(t) and REF not in t
            assert gcf.session_count == 1

    run(body)


def test_graph_session_symbol_limit() -> None:
    gcf = GCFResponder(limits=SessionLimits(max_symbols=5))
    srv = make_server(gcf)

    async def body() -> None:
        async with connect(srv, "gcf") as a:
            t = text(await a.call_tool("callers", {"symbol": "a"}))  # 4 symbols retained
            assert "session=true" in t
            t = text(await a.call_tool("callers", {"symbol": "b"}))  # +1 (pkg.e): 5, fits
            assert "session=true" in t
            t = text(await a.call_tool("callers", {"symbol": "b"}))
            assert "session=true" in t and REF in t
            srv_graph = Graph([Symbol("pkg.z", "function", 0.1, "ast")])
            assert "session=true" not in gcf.respond(srv_graph, None, format="gcf").content[0].text  # type: ignore[union-attr]

    run(body)


# ---------------------------------------------------------------------------------------
# Generic deltas (§10a)
# ---------------------------------------------------------------------------------------


def _header(t: str) -> dict[str, str]:
    first = t.split("\n", 1)[0].split(" ")[1:]
    return dict(p.split("=", 1) for p in first if "=" in p)


def consume(held: Any, t: str) -> Any:
    """A §10a consumer: the keyed set it holds after receiving ``t``."""
    from gcfkit import keyed

    head = _header(t)
    if head.get("unchanged") == "true":
        assert held is not None and keyed.pack_root(held) == head["pack_root"]
        return held
    if head.get("delta") == "true":
        return keyed.apply_delta(held, keyed.loads_delta(t))  # verified against new_root
    return keyed.loads_keyed(t)  # verified against pack_root


def test_delta_on_repeated_calls_verified_by_pack_root_on_the_client() -> None:
    from gcfkit import keyed

    data: dict[str, Any] = {
        "orders": [
            {"id": i, "total": round(10 + i * 1.25, 2), "status": "open", "customer": f"c{i % 7}"}
            for i in range(30)
        ]
    }
    srv = make_server(data=data)

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            full = text(await c.call_tool("orders", {"status": "open"}))
            head = _header(full)
            assert head.get("key") == "id" and head["pack_root"].startswith("sha256:")
            base = keyed.loads_keyed(full)  # verifies the rows against pack_root
            assert list(base.rows) == data["orders"] and base.name == "orders"
            assert gcfkit.loads(full) == {"orders": data["orders"]}
            root = head["pack_root"]

            # An edit: one changed, one removed, one added.
            data["orders"][3]["status"] = "shipped"
            del data["orders"][5]
            data["orders"].append({"id": 99, "total": 1.5, "status": "open", "customer": "c9"})
            t = text(await c.call_tool("orders", {"status": "open", "pack_root": root}))
            delta = keyed.loads_delta(t)
            new = keyed.apply_delta(base, delta)
            assert keyed.pack_root(new) == delta.new_root == _header(t)["new_root"]
            assert sorted(new.rows, key=lambda r: r["id"]) == sorted(
                data["orders"], key=lambda r: r["id"]
            )
            assert _header(t).get("delta") == "true"
            assert len(t.encode()) < 0.6 * len(full.encode())  # the §10a.2 size guard

            # Same data again: unchanged.
            t = text(await c.call_tool("orders", {"status": "open", "pack_root": delta.new_root}))
            assert _header(t).get("unchanged") == "true"
            assert _header(t)["pack_root"] == delta.new_root

            # A root the server does not hold for this call: a full payload.
            t = text(await c.call_tool("orders", {"status": "open", "pack_root": root}))
            assert "delta=true" not in t and _header(t)["pack_root"] == delta.new_root
            # Other arguments are another call: no base there yet.
            t = text(await c.call_tool("orders", {"status": "x", "pack_root": delta.new_root}))
            assert "delta=true" not in t and "unchanged" not in t

        # A new connection never gets a delta against another connection's base.
        async with connect(srv, "gcf") as other:
            t = text(await other.call_tool("orders", {"status": "open", "pack_root": root}))
            assert "delta=true" not in t and "unchanged" not in t
        # JSON clients always get the full JSON value.
        async with connect(srv) as j:
            t = text(await j.call_tool("orders", {"status": "open", "pack_root": root}))
            assert json.loads(t) == data["orders"]

    run(body)


def test_delta_bases_are_bounded_per_session() -> None:
    data: dict[str, Any] = {
        "orders": [{"id": i, "total": i * 2.5, "status": "open"} for i in range(20)]
    }
    srv = make_server(GCFResponder(limits=SessionLimits(max_delta_bases=1)), data)

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            root_a = _header(text(await c.call_tool("orders", {"status": "a"})))["pack_root"]
            t = text(await c.call_tool("orders", {"status": "a", "pack_root": root_a}))
            assert _header(t).get("unchanged") == "true"
            text(await c.call_tool("orders", {"status": "b"}))  # evicts the base of "a"
            t = text(await c.call_tool("orders", {"status": "a", "pack_root": root_a}))
            assert _header(t).get("unchanged") is None and _header(t)["pack_root"] == root_a

    run(body)


# ---------------------------------------------------------------------------------------
# The example server
# ---------------------------------------------------------------------------------------


def _load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> Any:
    return _load_example("code_intel_server")


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "shop"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .core import total\n")
    (pkg / "core.py").write_text(
        textwrap.dedent(
            '''
            def price(item):
                """Unit price."""
                return item["price"]


            def total(items):
                return sum(price(i) for i in items)


            class Cart:
                def __init__(self):
                    self.items = []

                def checkout(self):
                    return total(self.items)
            '''
        )
    )
    (pkg / "api.py").write_text(
        textwrap.dedent(
            """
            from shop import total
            from shop.core import Cart


            def handler(req):
                cart = Cart()
                return {"total": cart.checkout(), "raw": total(req)}
            """
        )
    )
    return tmp_path


def test_example_server_tools(example: Any, tree: Path) -> None:
    srv = example.build_server(tree)

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            hits = value(text(await c.call_tool("search_symbols", {"query": "total"})))
            assert hits[0]["qualified_name"] == "shop.core.total"
            refs = value(text(await c.call_tool("find_references", {"symbol": "total"})))
            assert {r["in"] for r in refs["references"]} == {
                "shop.core.Cart.checkout",
                "shop.api.handler",
            }
            t = text(await c.call_tool("blast_radius", {"symbol": "shop.core.price"}))
            g = gmod.loads(t)
            dist = {s.qualified_name: s.distance for s in g.symbols}
            assert dist == {
                "shop.core.price": 0,
                "shop.core.total": 1,
                "shop.core.Cart.checkout": 2,
                "shop.api.handler": 2,
            }
            assert Edge("shop.core.total", "shop.core.price", "calls") in g.edges
            t2 = text(await c.call_tool("blast_radius", {"symbol": "shop.core.total"}))
            assert REF in t2  # total, checkout, handler were sent by the first graph
            t = text(await c.call_tool("list_symbols", {"module": "shop.core"}))
            listed = gcfkit.loads(t)
            assert [s["name"] for s in listed["symbols"]] == [
                "price",
                "total",
                "Cart",
                "Cart.__init__",
                "Cart.checkout",
            ]
            assert _header(t)["key"] == "name"
            # an edit, then the same question with the echoed root: a delta
            with (tree / "shop" / "core.py").open("a") as f:
                f.write("\n\ndef discount(x):\n    return price(x) * 0.9\n")
            t2 = text(
                await c.call_tool(
                    "list_symbols", {"module": "shop.core", "pack_root": _header(t)["pack_root"]}
                )
            )
            held = consume(None, t)
            held = consume(held, t2)  # a delta, or a full payload when that is smaller
            assert {r["name"] for r in held.rows} == {s["name"] for s in listed["symbols"]} | {
                "discount"
            }
            bad = await c.call_tool("blast_radius", {"symbol": "nope"})
            assert bad.is_error

    run(body)


def test_example_server_over_stdio(example: Any, tree: Path) -> None:
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "examples" / "code_intel_server.py"), str(tree)],
        cwd=str(ROOT),
    )

    async def body() -> None:
        transport = with_output_format(stdio_client(params), "gcf")
        async with Client(transport, mode="legacy") as c:
            t = text(await c.call_tool("search_symbols", {"query": "price", "format": "json"}))
            assert [h["qualified_name"] for h in json.loads(t)] == ["shop.core.price"]
            t = text(await c.call_tool("blast_radius", {"symbol": "price"}))
            assert "session=true" in t
            t = text(await c.call_tool("blast_radius", {"symbol": "price"}))
            assert REF in t

    run(body)


def test_respond_in_a_lowlevel_server_handler() -> None:
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
    from mcp_types import CallToolRequestParams, ListToolsResult, Tool

    gcf = GCFResponder()

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {"symbol": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name="callers", input_schema=schema)])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return gcf.respond(GRAPHS[(params.arguments or {})["symbol"]], ctx)

    low: Server[Any] = Server("low", on_list_tools=list_tools, on_call_tool=call_tool)

    async def body() -> None:
        transport: Any = with_output_format(InMemoryTransport(low), "gcf")
        async with Client(transport, mode="legacy") as c:
            t1 = text(await c.call_tool("callers", {"symbol": "a"}))
            assert t1.startswith("GCF profile=graph tool=callers ")
            assert REF in text(await c.call_tool("callers", {"symbol": "a"}))

    run(body)


def test_session_script_prints_the_table(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = _load_example("code_intel_session")
    session.main([str(tree), "--query", "total"])
    out = capsys.readouterr().out
    table = [ln for ln in out.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert [ln.split(" | ")[0] for ln in table] == ["| 1", "| 2", "| 3", "| 4", "| 5", "| re-query"]
    forms = [ln.split(" | ")[4] for ln in table]
    assert forms[2:4] == ["graph+session", "graph+session"]
    assert forms[5] in ("delta", "keyed")  # keyed: the size guard found the full smaller
    json_total, gcf_total = (int(c.replace(",", "")) for c in table[-1].split(" | ")[6:8])
    assert 0 < gcf_total < json_total
    assert (tree / "shop" / "core.py").read_text().count("added_by_the_session_script") == 0


def test_with_output_format_is_still_importable_from_the_server_helpers() -> None:
    # The README's server section names it; the client wrapper now lives in gcfkit.mcp.client.
    from gcfkit.mcp import server

    assert server.with_output_format is with_output_format


# ---------------------------------------------------------------------------------------
# Relative answers and the dense profile, opt-in per tool (issue 10 item 5)
# ---------------------------------------------------------------------------------------


def read_named(reader: Any, result: CallToolResult, want: Any) -> str:
    """A full, named result as a reader takes it: GCF with ref= in its header, or JSON with a
    ref= block after it; returns the handle, after checking the value."""
    from gcfkit import relative

    blocks = [b.text for b in result.content if b.type == "text"]
    if blocks[0].startswith(GCF_HEADS):
        assert len(blocks) == 1 and reader.read(blocks[0]) == want
        ref = relative.ref_of(blocks[0])
    else:
        assert len(blocks) == 2 and json.loads(blocks[0]) == want
        ref = relative.ref_of(blocks[1])
        assert ref is not None
        reader.hold(ref, json.loads(blocks[0]))
    assert ref is not None
    return ref


def test_relative_answers_opt_in_per_tool() -> None:
    from gcfkit import relative

    graph: dict[str, Any] = {
        "entities": [
            {"name": f"commit {i:03d}", "entityType": "commit", "observations": [f"change {i}"]}
            for i in range(30)
        ]
    }
    gcf = GCFResponder(default_format="gcf")
    srv = MCPServer("relative")

    @srv.tool()
    @gcf.tool(relative=True)
    def read_graph() -> dict[str, Any]:
        copied: dict[str, Any] = json.loads(json.dumps(graph))
        return copied

    @srv.tool()
    @gcf.tool
    def plain() -> dict[str, Any]:
        return graph

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            listed = {t.name: t.input_schema for t in (await c.list_tools()).tools}
            assert "_since" in listed["read_graph"]["properties"]
            assert "_since" not in listed["plain"]["properties"]
            reader = relative.Reader()
            ref = read_named(reader, await c.call_tool("read_graph", {}), graph)
            same = text(await c.call_tool("read_graph", {"_since": ref}))
            assert same == f"@@ unchanged tool=read_graph since={ref}\n"
            assert reader.read(same) == graph
            graph["entities"][7]["observations"].append("reviewed")
            patch = text(await c.call_tool("read_graph", {"_since": ref}))
            assert patch.startswith(f"@@ patch tool=read_graph since={ref} ref=")
            assert "entities[name=commit 007].observations" in patch
            assert reader.read(patch) == graph
            # An unknown handle, or none: the full result (named anew).
            read_named(reader, await c.call_tool("read_graph", {"_since": "999999"}), graph)
        # Another connection holds nothing: the handle names nothing there.
        async with connect(srv, "gcf") as other:
            read_named(
                relative.Reader(), await other.call_tool("read_graph", {"_since": ref}), graph
            )
        # A JSON client gets JSON, whatever it passes.
        async with connect(srv) as j:
            result = await j.call_tool("read_graph", {"_since": ref})
            assert json.loads(result.content[0].text) == graph  # type: ignore[union-attr]

    run(body)


def test_a_named_json_answer_carries_its_ref_block() -> None:
    from gcfkit import relative

    gcf = GCFResponder(default_format="gcf")
    srv = MCPServer("small")

    @srv.tool()
    @gcf.tool(relative=True)
    def status() -> dict[str, Any]:
        return {"branch": "main", "clean": False, "note": "a status line the tool repeats " * 4}

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            result = await c.call_tool("status", {})
            blocks = [b.text for b in result.content if b.type == "text"]
            assert json.loads(blocks[0])["branch"] == "main"
            ref = relative.ref_of(blocks[1])
            assert ref is not None and blocks[1] == f"ref={ref}"
            again = await c.call_tool("status", {"_since": ref})
            assert text(again) == f"@@ unchanged tool=status since={ref}\n"

    run(body)


def test_dense_opt_in_per_tool() -> None:
    dense = pytest.importorskip("gcfkit.dense")
    rows = [
        {"name": f"commit {i:03d}", "entityType": "commit",
         "observations": [f"change {i}", "authored 2026-08-07 by Dayna Blackwell", "reviewed"]}
        for i in range(80)
    ]  # fmt: skip
    gcf = GCFResponder(default_format="gcf")
    srv = MCPServer("dense")

    @srv.tool()
    @gcf.tool(dense=True)
    def entities() -> dict[str, Any]:
        return {"entities": rows}

    @srv.tool()
    @gcf.tool
    def generic() -> dict[str, Any]:
        return {"entities": rows}

    async def body() -> None:
        async with connect(srv, "gcf") as c:
            d = text(await c.call_tool("entities", {}))
            g = text(await c.call_tool("generic", {}))
            assert not g.startswith("GCF-dense")  # not opted in: v3.5.3 or JSON
            assert d.startswith("GCF-dense")
            assert d.splitlines()[1].startswith("# dense adds:")
            assert dense.loads(d) == {"entities": rows}
            assert gcfkit.tokens.count(d) < gcfkit.tokens.count(g)
            with pytest.raises(gcfkit.GCFError):
                gcfkit.loads(d)  # a v3.5.3 decoder refuses it loudly

    run(body)
