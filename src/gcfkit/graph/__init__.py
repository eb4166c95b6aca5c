"""The graph profile (spec §3.2, 5, 6, 6a, 8, 9, 10): scored, distance-grouped code graphs.

>>> from gcfkit.graph import Edge, Graph, Symbol, dumps, loads
>>> g = Graph([Symbol("pkg.Auth", "function", 0.78, "lsp"),
...            Symbol("pkg.Server", "function", 0.54, "lsp", distance=1)],
...           [Edge("pkg.Server", "pkg.Auth", "calls")], tool="ctx")
>>> loads(dumps(g)) == g
True

``graph_from_model``/``graph_to_model`` (and ``delta_from_model``/``delta_to_model``) map
the camelCase model of the conformance fixtures (``qualifiedName``, ``edgeType``,
``tokenBudget``, ``tokensUsed``, ``packRoot``, ``baseRoot``, ``removedEdges``...), every field
present. ``graph_to_json`` is the other JSON form, the one MCP clients that did not ask for GCF
get: the dataclasses' own field names, unset fields left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import GCFError, located
from ..header import first_line, parse_header, to_text
from . import decoder
from .delta import (
    GraphDelta,
    apply_delta,
    dumps_delta,
    dumps_unchanged,
    loads_delta,
    make_delta,
    pack_root,
    refuse_delta,
)
from .encoder import dumps
from .model import KIND_ABBREVIATIONS, KIND_FULL_FORMS, Edge, Graph, Symbol
from .session import Session, SessionReader
from .stream import GraphStreamEncoder

__all__ = [
    "KIND_ABBREVIATIONS",
    "KIND_FULL_FORMS",
    "Edge",
    "Graph",
    "GraphDelta",
    "GraphStreamEncoder",
    "Session",
    "SessionReader",
    "Symbol",
    "apply_delta",
    "delta_from_model",
    "delta_to_model",
    "dumps",
    "dumps_delta",
    "dumps_unchanged",
    "edge_from_model",
    "edge_to_model",
    "graph_from_model",
    "graph_to_json",
    "graph_to_model",
    "loads",
    "loads_delta",
    "make_delta",
    "pack_root",
    "symbol_from_model",
    "symbol_to_model",
]


def loads(text: str | bytes) -> Graph:
    """Strictly decode a graph payload, buffered or streaming (bytes must be UTF-8).

    Kinds come back in full form; unknown kinds verbatim. A payload with session
    references needs :class:`SessionReader`; a delta payload :func:`loads_delta` (given one,
    this raises the delta's own error if it is malformed, else ``unsupported_profile``).

    >>> g = loads("GCF profile=graph symbols=1\\n## targets\\n@0 iface pkg.H 0.90 lsp\\n")
    >>> g.symbols[0]
    Symbol(qualified_name='pkg.H', kind='interface', score=0.9, provenance='lsp', distance=0)
    """
    text = to_text(text)
    try:
        # The delta dispatch sits here, above both decoders, so neither imports the other.
        first = first_line(text)
        if "delta=" in first:
            header = parse_header(first)
            if header.profile == "graph" and header.flag("delta"):
                refuse_delta(text)
        return decoder.loads(text)
    except GCFError as e:
        raise located(e, text) from None


def _field(d: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = d.get(key, default)
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise GCFError("invalid_graph", f"model field {key}={value!r:.40} is not {kind.__name__}")
    return value


def symbol_from_model(d: Mapping[str, Any]) -> Symbol:
    """A :class:`Symbol` from ``{"qualifiedName", "kind", "score", "provenance", "distance"}``.

    >>> symbol_from_model({"qualifiedName": "pkg.A", "kind": "function"})
    Symbol(qualified_name='pkg.A', kind='function', score=0.0, provenance='', distance=0)
    """
    return Symbol(
        _field(d, "qualifiedName", str, None),
        _field(d, "kind", str, None),
        _field(d, "score", float, 0.0),
        _field(d, "provenance", str, ""),
        _field(d, "distance", int, 0),
    )


def symbol_to_model(s: Symbol) -> dict[str, Any]:
    """The camelCase model of a symbol (inverse of :func:`symbol_from_model`).

    >>> symbol_to_model(Symbol("pkg.A", "function", 0.5))["qualifiedName"]
    'pkg.A'
    """
    return {
        "qualifiedName": s.qualified_name,
        "kind": s.kind,
        "score": s.score,
        "provenance": s.provenance,
        "distance": s.distance,
    }


def edge_from_model(d: Mapping[str, Any]) -> Edge:
    """An :class:`Edge` from ``{"source", "target", "edgeType", "status"}``.

    >>> edge_from_model({"source": "a", "target": "b", "edgeType": "calls"})
    Edge(source='a', target='b', edge_type='calls', status='')
    """
    return Edge(
        _field(d, "source", str, None),
        _field(d, "target", str, None),
        _field(d, "edgeType", str, None),
        _field(d, "status", str, ""),
    )


def edge_to_model(e: Edge) -> dict[str, Any]:
    """The camelCase model of an edge (inverse of :func:`edge_from_model`).

    >>> edge_to_model(Edge("a", "b", "calls"))
    {'source': 'a', 'target': 'b', 'edgeType': 'calls', 'status': ''}
    """
    return {"source": e.source, "target": e.target, "edgeType": e.edge_type, "status": e.status}


def graph_from_model(d: Mapping[str, Any]) -> Graph:
    """A :class:`Graph` from the fixtures' camelCase model; absent fields take defaults.

    >>> g = graph_from_model({"tool": "t", "tokenBudget": 50, "symbols": [
    ...     {"qualifiedName": "pkg.A", "kind": "function", "score": 0.5}], "edges": []})
    >>> g.tool, g.budget, g.symbols[0].score
    ('t', 50, 0.5)
    """
    return Graph(
        tuple(symbol_from_model(s) for s in _field(d, "symbols", list, [])),
        tuple(edge_from_model(e) for e in _field(d, "edges", list, [])),
        _field(d, "tool", str, ""),
        _field(d, "tokenBudget", int, 0),
        _field(d, "tokensUsed", int, 0),
        _field(d, "packRoot", str, ""),
    )


def graph_to_model(g: Graph) -> dict[str, Any]:
    """The camelCase model of a graph, every field present (inverse of graph_from_model).

    >>> graph_to_model(Graph(tool="t"))
    {'tool': 't', 'tokenBudget': 0, 'tokensUsed': 0, 'packRoot': '', 'symbols': [], 'edges': []}
    """
    return {
        "tool": g.tool,
        "tokenBudget": g.budget,
        "tokensUsed": g.tokens,
        "packRoot": g.pack_root,
        "symbols": [symbol_to_model(s) for s in g.symbols],
        "edges": [edge_to_model(e) for e in g.edges],
    }


def graph_to_json(g: Graph) -> dict[str, Any]:
    """The JSON form of a graph that ``gcfkit.mcp.server`` sends a client that did not ask for
    GCF (and that ``gcfkit eval`` shows as a graph dataset's JSON): the dataclasses' field
    names, header fields that are unset (empty or zero) and empty edge statuses left out.

    >>> g = Graph([Symbol("a.f", "function", 0.5, "ast")], [Edge("a.g", "a.f", "calls")])
    >>> graph_to_json(g)["edges"]
    [{'source': 'a.g', 'target': 'a.f', 'edge_type': 'calls'}]
    >>> graph_to_json(Graph([Symbol("a.f", "function", 0.5)], tool="t"))["symbols"][0]["kind"]
    'function'
    """
    out: dict[str, Any] = {}
    for key in ("tool", "budget", "tokens", "pack_root"):
        value = getattr(g, key)
        if value:
            out[key] = value
    out["symbols"] = [dataclasses.asdict(s) for s in g.symbols]
    out["edges"] = [
        {k: v for k, v in dataclasses.asdict(e).items() if k != "status" or v} for e in g.edges
    ]
    return out


def delta_from_model(d: Mapping[str, Any]) -> GraphDelta:
    """A :class:`GraphDelta` from the camelCase delta model of the fixtures.

    >>> delta_from_model({"baseRoot": "a", "newRoot": "b", "deltaTokens": 3}).delta_tokens
    3
    """
    return GraphDelta(
        _field(d, "baseRoot", str, None),
        _field(d, "newRoot", str, None),
        tuple(symbol_from_model(s) for s in _field(d, "removed", list, [])),
        tuple(symbol_from_model(s) for s in _field(d, "added", list, [])),
        tuple(edge_from_model(e) for e in _field(d, "removedEdges", list, [])),
        tuple(edge_from_model(e) for e in _field(d, "addedEdges", list, [])),
        _field(d, "tool", str, ""),
        _field(d, "deltaTokens", int, 0),
        _field(d, "fullTokens", int, 0),
        _field(d, "savings", str, ""),
    )


def delta_to_model(delta: GraphDelta) -> dict[str, Any]:
    """The camelCase model of a delta (inverse of :func:`delta_from_model`).

    >>> delta_to_model(GraphDelta("a", "b", removed=[Symbol("pkg.X", "type")]))["removed"]
    [{'qualifiedName': 'pkg.X', 'kind': 'type'}]
    """
    return {
        "tool": delta.tool,
        "baseRoot": delta.base_root,
        "newRoot": delta.new_root,
        "removed": [{"qualifiedName": s.qualified_name, "kind": s.kind} for s in delta.removed],
        "added": [symbol_to_model(s) for s in delta.added],
        "removedEdges": [edge_to_model(e) for e in delta.removed_edges],
        "addedEdges": [edge_to_model(e) for e in delta.added_edges],
        "deltaTokens": delta.delta_tokens,
        "fullTokens": delta.full_tokens,
        "savings": delta.savings,
    }
