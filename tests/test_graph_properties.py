"""Property tests: graph round trips through every encoder keep what the spec promises."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gcfkit.graph import (
    KIND_ABBREVIATIONS,
    KIND_FULL_FORMS,
    Edge,
    Graph,
    GraphStreamEncoder,
    Session,
    SessionReader,
    Symbol,
    apply_delta,
    dumps,
    dumps_delta,
    loads,
    loads_delta,
    make_delta,
    pack_root,
)

PRINTABLE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=10)
# An abbreviation given as a kind decodes to its full form, so leave those out of "unknown".
UNKNOWN_KIND = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda k: k not in KIND_FULL_FORMS or k in KIND_ABBREVIATIONS
)
KIND = st.one_of(st.sampled_from(sorted(KIND_ABBREVIATIONS)), UNKNOWN_KIND)
SCORE = st.one_of(
    st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False),
    st.integers(-100_000, 100_000).map(lambda k: k / 100),
    st.sampled_from([0.125, 0.375, 0.625, 0.005, -0.125, 2.675]),
)
TWO_DP_SCORE = st.integers(-10_000, 10_000).map(lambda k: float(f"{k / 100:.2f}"))
STATUS = st.one_of(st.sampled_from(["", "added", "removed"]), PRINTABLE)


@st.composite
def graphs(draw: Any, score: Any = SCORE, max_symbols: int = 12) -> Graph:
    names = draw(st.lists(PRINTABLE, unique=True, max_size=max_symbols))
    symbols = [
        Symbol(n, draw(KIND), draw(score), draw(PRINTABLE), draw(st.integers(0, 8))) for n in names
    ]
    edges = []
    if names:
        for _ in range(draw(st.integers(0, 2 * len(names)))):
            edges.append(
                Edge(
                    draw(st.sampled_from(names)),
                    draw(st.sampled_from(names)),
                    draw(PRINTABLE),
                    draw(STATUS),
                )
            )
    return Graph(
        symbols,
        edges,
        draw(st.one_of(st.just(""), PRINTABLE)),
        draw(st.integers(0, 2**40)),
        draw(st.integers(0, 2**40)),
        draw(st.one_of(st.just(""), PRINTABLE)),
    )


def two_dp(score: float) -> float:
    return float(f"{score:.2f}")


def canonical(g: Graph) -> Graph:
    """What a decoder sees: canonical order, scores at two decimals."""
    symbols = sorted(g.symbols, key=lambda s: (s.distance, -s.score))
    return Graph(
        [
            Symbol(s.qualified_name, s.kind, two_dp(s.score), s.provenance, s.distance)
            for s in symbols
        ],
        g.edges,
        g.tool,
        g.budget,
        g.tokens,
        g.pack_root,
    )


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(graphs())
def test_buffered_round_trip(g: Graph) -> None:
    text = dumps(g)
    back = loads(text)
    assert (back.tool, back.budget, back.tokens, back.pack_root) == (
        g.tool,
        g.budget,
        g.tokens,
        g.pack_root,
    )
    expected = canonical(g)
    assert back.symbols == expected.symbols
    assert Counter(back.edges) == Counter(g.edges)
    # Canonical order on the wire: distance ascending, score descending within a group.
    keys = [(s.distance, -s.score) for s in back.symbols]
    assert keys == sorted(keys)
    assert dumps(back) == text
    assert loads(text.encode()) == back


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(graphs())
def test_stream_of_canonical_graph_decodes_like_buffered(g: Graph) -> None:
    expected = loads(dumps(g))
    out: list[str] = []
    enc = GraphStreamEncoder(
        out.append, tool=g.tool, budget=g.budget, tokens=g.tokens, pack_root=g.pack_root
    )
    for s in expected.symbols:
        enc.add_symbol(s)
    for e in g.edges:
        enc.add_edge(e)
    enc.close()
    back = loads("".join(out))
    assert back.symbols == expected.symbols
    assert back.edges == g.edges


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(st.lists(graphs(max_symbols=6), min_size=1, max_size=5), st.integers(1, 20))
def test_session_reader_sees_what_plain_decode_sees(calls: list[Graph], limit: int) -> None:
    producer, reader = Session(max_symbols=limit), SessionReader()
    for g in calls:
        assert _id_free(reader.loads(producer.dumps(g))) == _id_free(loads(dumps(g)))


def _id_free(g: Graph) -> Graph:
    """``g`` without the order its IDs impose. §16.1 orders edges by source then target ID
    (and ties of score by ID), and a session keeps its own stable IDs, so a session payload
    lists the same edges in another order than a fresh payload does."""
    return Graph(
        tuple(sorted(g.symbols, key=lambda s: (s.distance, -s.score, s.qualified_name))),
        tuple(sorted(g.edges, key=lambda e: (e.source, e.target, e.edge_type, e.status))),
        g.tool,
        g.budget,
        g.tokens,
        g.pack_root,
    )


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(graphs(score=TWO_DP_SCORE), graphs(score=TWO_DP_SCORE))
def test_delta_through_the_wire_rebuilds_the_new_snapshot(old: Graph, new: Graph) -> None:
    # A snapshot is a set: repeated (source, target, type) edges collapse.
    old = Graph(old.symbols, _unique_edges(old.edges))
    new = Graph(new.symbols, _unique_edges(new.edges))
    d = make_delta(old, new)
    wire = loads_delta(dumps_delta(d))
    symbols, edges = apply_delta(list(old.symbols), list(old.edges), wire)
    assert Counter(symbols) == Counter(new.symbols)
    # Status is presentation, not identity: pack roots and deltas ignore it.
    assert Counter((e.source, e.target, e.edge_type) for e in edges) == Counter(
        (e.source, e.target, e.edge_type) for e in new.edges
    )
    assert pack_root(symbols, edges) == pack_root(new.symbols, new.edges)


def _unique_edges(edges: tuple[Edge, ...]) -> list[Edge]:
    seen: dict[tuple[str, str, str], Edge] = {}
    for e in edges:
        seen.setdefault((e.source, e.target, e.edge_type), e)
    return list(seen.values())
