"""Buffered graph encoder (spec §3.2, 5, 6, 6a, 16.1).

Canonical output: symbols grouped by distance (ascending) and ordered by score descending
within a group, IDs assigned in that order from 0, edges ordered by source then target ID.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import GCFEncodeError, at_path
from ..header import format_header
from .model import (
    KIND_ABBREVIATIONS,
    Edge,
    Graph,
    Symbol,
    abbreviate_kind,
    check_token,
    format_score,
    group_name,
    resolve,
    symbol_index,
)

__all__ = ["Prepared", "dumps", "node_line", "prepare", "render"]

REF_SUFFIX = "  # previously transmitted"


@dataclass(frozen=True)
class Prepared:
    """A validated graph in canonical symbol order, ready to render with any ID scheme.

    ``nodes[i]`` is the wire text after ``@id `` of ``symbols[i]``; ``edges`` hold positions
    into ``symbols``.
    """

    graph: Graph
    symbols: tuple[Symbol, ...]
    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int, str], ...]


def node_fields(s: Symbol) -> str:
    """``kind qname score provenance`` of a symbol, validated (§5, §20)."""
    kind = KIND_ABBREVIATIONS.get(s.kind) or abbreviate_kind(s.kind)
    qname = check_token("qualified name", s.qualified_name)
    score = format_score(s.score)
    prov = check_token("provenance", s.provenance)
    if type(s.distance) is not int or s.distance < 0:
        group_name(s.distance)  # raises the distance error
    return f"{kind} {qname} {score} {prov}"


def node_line(ident: int, s: Symbol) -> str:
    """One node line, ``@id kind qname score provenance`` (no terminator).

    >>> node_line(0, Symbol("pkg.Auth", "function", 0.78, "lsp"))
    '@0 fn pkg.Auth 0.78 lsp'
    """
    return f"@{ident} {node_fields(s)}"


def edge_tail(e: Edge) -> str:
    """`` type[ status]`` of an edge line, validated."""
    tail = " " + check_token("edge type", e.edge_type)
    if e.status:
        tail += " " + check_token("edge status", e.status)
    return tail


def _sort_key(s: Symbol) -> tuple[int, float]:
    return (s.distance, -s.score)


def prepare(graph: Graph) -> Prepared:
    """Validate ``graph`` and put its symbols in canonical order (§16.1)."""
    nodes_by_symbol = []
    for i, s in enumerate(graph.symbols):
        try:
            if not isinstance(s, Symbol):
                raise GCFEncodeError("invalid_graph", f"{s!r:.60} is not a Symbol")
            nodes_by_symbol.append(node_fields(s))
        except GCFEncodeError as err:
            raise at_path(at_path(err, i), "symbols") from None
    order = sorted(range(len(graph.symbols)), key=lambda i: _sort_key(graph.symbols[i]))
    position = [0] * len(order)
    for pos, i in enumerate(order):
        position[i] = pos
    symbols = tuple(graph.symbols[i] for i in order)
    index = symbol_index(symbols)
    edges = []
    for i, e in enumerate(graph.edges):
        try:
            if not isinstance(e, Edge):
                raise GCFEncodeError("invalid_graph", f"{e!r:.60} is not an Edge")
            ends = (resolve(index, e.source, "source"), resolve(index, e.target, "target"))
            edges.append((*ends, edge_tail(e)))
        except GCFEncodeError as err:
            raise at_path(at_path(err, i), "edges") from None
    # Validate the header now so that rendering cannot fail after a session allocated IDs.
    format_header("graph", header_pairs(graph, 0, 0))
    return Prepared(graph, symbols, tuple(nodes_by_symbol[i] for i in order), tuple(edges))


def header_pairs(graph: Graph, n_symbols: int, n_edges: int | None) -> list[tuple[str, str]]:
    """Header fields in canonical order; zero budget/tokens/edges are omitted (§3.2).

    ``n_edges=None`` is the streaming form: no symbols= or edges= count at all.
    """
    pairs: list[tuple[str, str]] = []
    if graph.tool:
        pairs.append(("tool", graph.tool))
    for key, value in (("budget", graph.budget), ("tokens", graph.tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GCFEncodeError("invalid_graph", f"{key}={value!r:.40} must be a non-negative int")
        if value:
            pairs.append((key, str(value)))
    if n_edges is not None:
        pairs.append(("symbols", str(n_symbols)))
        if n_edges:
            pairs.append(("edges", str(n_edges)))
    if graph.pack_root:
        pairs.append(("pack_root", graph.pack_root))
    return pairs


def render(
    prep: Prepared,
    ids: Sequence[int],
    refs: Sequence[bool] = (),
    extra: Sequence[tuple[str, str]] = (),
) -> str:
    """The payload text of ``prep`` with ``ids[pos]`` as each symbol's ID.

    Positions flagged in ``refs`` become session references (§9); ``extra`` header pairs
    follow the canonical ones.
    """
    pairs = header_pairs(prep.graph, len(prep.symbols), len(prep.edges))
    pairs.extend(extra)
    out = [format_header("graph", pairs)]
    current = -1
    for pos, s in enumerate(prep.symbols):
        if s.distance != current:
            current = s.distance
            out.append("## " + group_name(current))
        if refs and refs[pos]:
            out.append(f"@{ids[pos]}{REF_SUFFIX}")
        else:
            out.append(f"@{ids[pos]} {prep.nodes[pos]}")
    if prep.edges:
        out.append(f"## edges [{len(prep.edges)}]")
        ordered = sorted(prep.edges, key=lambda e: (ids[e[0]], ids[e[1]]))
        out.extend(f"@{ids[t]}<@{ids[s]}{tail}" for s, t, tail in ordered)
    out.append("")
    return "\n".join(out)


def dumps(graph: Graph) -> str:
    """Canonical buffered graph payload of ``graph`` (§16.1); ends with LF.

    >>> from gcfkit.graph import Edge, Graph, Symbol
    >>> g = Graph([Symbol("pkg.Auth", "function", 0.78, "lsp"),
    ...            Symbol("pkg.Server", "function", 0.54, "lsp", distance=1)],
    ...           [Edge("pkg.Server", "pkg.Auth", "calls")], tool="ctx")
    >>> print(dumps(g), end="")
    GCF profile=graph tool=ctx symbols=2 edges=1
    ## targets
    @0 fn pkg.Auth 0.78 lsp
    ## related
    @1 fn pkg.Server 0.54 lsp
    ## edges [1]
    @0<@1 calls
    """
    if not isinstance(graph, Graph):
        raise GCFEncodeError(
            "unsupported_type", f"dumps() takes a Graph, not {type(graph).__name__}"
        )
    prep = prepare(graph)
    return render(prep, range(len(prep.symbols)))
