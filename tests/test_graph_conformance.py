"""Every graph-profile fixture of the official conformance suite, strictly.

Selection is by operation (pack-root, session, graph-stream-encode, delta, delta-verify)
or, for encode/decode/error, by a graph-profile payload.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from gcfkit.errors import GCFError
from gcfkit.graph import (
    Graph,
    GraphStreamEncoder,
    Session,
    apply_delta,
    delta_from_model,
    dumps,
    dumps_delta,
    graph_from_model,
    graph_to_model,
    loads,
    loads_delta,
    pack_root,
)
from tests.conformance import CONFORMANCE_DIR, missing_fixtures_hint

CONFORMANCE = CONFORMANCE_DIR  # GCF_CONFORMANCE_DIR, or ../shared/conformance
GRAPH_OPS = {"pack-root", "session", "graph-stream-encode", "delta", "delta-verify"}


def _is_graph(fixture: dict[str, Any]) -> bool:
    op = fixture["operation"]
    if op in GRAPH_OPS:
        return True
    if op == "encode":
        return str(fixture["expected"]).startswith("GCF profile=graph")
    if op in ("decode", "error"):
        data = fixture.get("input")
        if data is None:
            data = base64.b64decode(fixture["inputBase64"]).decode("utf-8", "replace")
        return isinstance(data, str) and data.startswith("GCF profile=graph")
    return False


def _fixtures() -> list[Any]:
    out = []
    for path in sorted(CONFORMANCE.rglob("*.json")):
        fixture = json.loads(path.read_text(encoding="utf-8"))
        if _is_graph(fixture):
            out.append(pytest.param(fixture, id=str(path.relative_to(CONFORMANCE))))
    return out


FIXTURES = _fixtures()


def test_fixture_selection_is_complete() -> None:
    # 4 encode + 5 decode + 9 error + 4 pack-root + 3 session + 8 stream + 2 delta + 1 verify
    assert FIXTURES, missing_fixtures_hint()
    assert len(FIXTURES) == 36


def _edges_with_status(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"status": "", **e} for e in edges]


def _check_model(got: dict[str, Any], expected: dict[str, Any]) -> None:
    # Decode fixtures were written from unordered maps and omit default header fields:
    # compare the keys they state; symbols and edges in full and in order.
    for key, value in expected.items():
        if key == "edges":
            assert got["edges"] == _edges_with_status(value)
        elif key == "symbols":
            assert got["symbols"] == value
            for g, e in zip(got["symbols"], value, strict=True):
                assert type(g["score"]) is type(float(e["score"]))
                assert type(g["distance"]) is int
        else:
            assert got[key] == value, key


def _snapshot_model(symbols: Any, edges: Any) -> dict[str, Any]:
    model = graph_to_model(Graph(symbols, edges))
    return {"symbols": model["symbols"], "edges": model["edges"]}


@pytest.mark.parametrize("fixture", FIXTURES)
def test_graph_fixture(fixture: dict[str, Any]) -> None:
    op = fixture["operation"]
    if op == "encode":
        assert dumps(graph_from_model(fixture["input"])) == fixture["expected"]
    elif op == "decode":
        _check_model(graph_to_model(loads(fixture["input"])), fixture["expected"])
    elif op == "error":
        data = fixture.get("input")
        payload: str | bytes = (
            data if data is not None else base64.b64decode(fixture["inputBase64"])
        )
        with pytest.raises(GCFError) as info:
            loads(payload)
        assert info.value.code == fixture["expectedError"]
    elif op == "pack-root":
        g = graph_from_model(fixture["input"])
        assert pack_root(g.symbols, g.edges) == fixture["expected"]
    elif op == "session":
        session = Session()
        for call in fixture["calls"]:
            assert session.dumps(graph_from_model(call["input"])) == call["expected"]
    elif op == "graph-stream-encode":
        g = graph_from_model(fixture["input"])
        out: list[str] = []
        labeled = bool(fixture.get("options", {}).get("labeledTrailerCounts", False))
        enc = GraphStreamEncoder(
            out.append,
            tool=g.tool,
            budget=g.budget,
            tokens=g.tokens,
            pack_root=g.pack_root,
            labeled_counts=labeled,
        )
        for s in g.symbols:
            enc.add_symbol(s)
        for e in g.edges:
            enc.add_edge(e)
        enc.close()
        assert "".join(out) == fixture["expected"]
        # What the stream wrote decodes back to the same graph.
        assert loads("".join(out)) == g
    elif op == "delta" and isinstance(fixture["input"], dict):
        assert dumps_delta(delta_from_model(fixture["input"])) == fixture["expected"]
    elif op == "delta":
        base = graph_from_model(fixture["base_snapshot"])
        delta = loads_delta(fixture["input"])
        assert delta.base_root == fixture["base_root"] == pack_root(base.symbols, base.edges)
        assert delta.new_root == fixture["new_root"]
        symbols, edges = apply_delta(base.symbols, base.edges, delta)
        assert pack_root(symbols, edges) == fixture["new_root"]
        got = _snapshot_model(symbols, edges)
        expected = fixture["expected_snapshot"]
        assert got["symbols"] == expected["symbols"]
        assert got["edges"] == _edges_with_status(expected["edges"])
    elif op == "delta-verify":
        base = graph_from_model(fixture["base_snapshot"])
        before = (base.symbols, base.edges)
        with pytest.raises(GCFError) as info:
            apply_delta(base.symbols, base.edges, loads_delta(fixture["input"]))
        assert info.value.code == fixture["expectedError"]
        assert (base.symbols, base.edges) == before
    else:  # pragma: no cover - selection above admits nothing else
        pytest.fail(f"unhandled operation {op}")
