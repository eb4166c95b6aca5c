"""Graph sessions (spec §9): stable IDs, references, §9.5 limits and fallback, the reader."""

from __future__ import annotations

import pytest

from gcfkit.errors import GCFError
from gcfkit.graph import Edge, Graph, Session, SessionReader, Symbol, dumps, loads

A = Symbol("pkg.A", "function", 0.9, "lsp")
B = Symbol("pkg.B", "type", 0.5, "ast", 1)
C = Symbol("pkg.C", "var", 0.4, "ast")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(text: str) -> list[str]:
    return text.splitlines()[1:]


def test_ids_are_stable_and_new_ids_monotonic() -> None:
    s = Session()
    first = s.dumps(Graph([A, B]))
    assert first.splitlines()[0] == "GCF profile=graph symbols=2 session=true"
    second = s.dumps(Graph([C, B], [Edge("pkg.C", "pkg.B", "uses")]))
    assert second == (
        "GCF profile=graph symbols=2 edges=1 session=true\n"
        "## targets\n@2 var pkg.C 0.40 ast\n"
        "## related\n@1  # previously transmitted\n"
        "## edges [1]\n@1<@2 uses\n"
    )
    assert s.retained == 3


def test_changed_score_or_provenance_is_declared_again_under_the_same_id() -> None:
    s = Session()
    s.dumps(Graph([A, B]))
    moved = Symbol("pkg.A", "function", 0.75, "lsp", 2)
    assert body(s.dumps(Graph([moved]))) == ["## extended", "@0 fn pkg.A 0.75 lsp"]
    assert body(s.dumps(Graph([moved]))) == ["## extended", "@0  # previously transmitted"]
    # A distance change alone does not need a declaration (the group carries it).
    assert body(s.dumps(Graph([Symbol("pkg.A", "function", 0.75, "lsp")]))) == [
        "## targets",
        "@0  # previously transmitted",
    ]
    # Identity is (kind, qualified name): another kind is another symbol.
    assert body(s.dumps(Graph([Symbol("pkg.A", "class", 0.75, "lsp")]))) == [
        "## targets",
        "@2 class pkg.A 0.75 lsp",
    ]


def test_max_symbols_falls_back_to_full_non_session_payload_and_restarts() -> None:
    s = Session(max_symbols=2)
    s.dumps(Graph([A, B]))
    g = Graph([A, C], tool="t")
    assert s.dumps(g) == dumps(g)
    assert s.retained == 0
    again = s.dumps(g)
    assert again.splitlines()[0] == "GCF profile=graph tool=t symbols=2 session=true"
    assert "@0 fn pkg.A 0.90 lsp" in again and "@1 var pkg.C 0.40 ast" in again
    too_big = Session(max_symbols=1)
    assert too_big.dumps(Graph([A, B])) == dumps(Graph([A, B]))


def test_idle_expiry_boundary_and_lifetime() -> None:
    clock = FakeClock()
    s = Session(idle_timeout=60, max_lifetime=150, clock=clock)
    g = Graph([A])
    s.dumps(g)
    clock.now += 60  # exactly the idle limit: still alive
    assert body(s.dumps(g)) == ["## targets", "@0  # previously transmitted"]
    clock.now += 60.5
    assert s.expired()
    assert s.dumps(g) == dumps(g)
    assert s.retained == 0
    s.dumps(g)  # new session starts at t=1120.5
    for _ in range(3):
        clock.now += 50
        assert "session=true" in s.dumps(g)
    clock.now += 1  # 151 s since the session's first payload
    assert s.expired()
    assert s.dumps(g) == dumps(g)


def test_rejected_graph_leaves_the_session_unchanged() -> None:
    s = Session()
    s.dumps(Graph([A]))
    with pytest.raises(GCFError):
        s.dumps(Graph([A, Symbol("bad name", "var", 0.1, "p")]))
    with pytest.raises(GCFError):
        s.dumps(Graph([C], tool="bad tool"))
    assert s.retained == 1
    assert body(s.dumps(Graph([A, C]))) == [
        "## targets",
        "@0  # previously transmitted",
        "@1 var pkg.C 0.40 ast",
    ]


def test_reset_starts_over() -> None:
    s = Session()
    s.dumps(Graph([A]))
    s.reset()
    assert body(s.dumps(Graph([B]))) == ["## related", "@0 type pkg.B 0.50 ast"]


def test_limits_must_be_non_negative() -> None:
    with pytest.raises(ValueError):
        Session(max_symbols=-1)


def test_reader_resolves_references_across_calls() -> None:
    producer, reader = Session(), SessionReader()
    calls = [
        Graph([A, B], tool="t"),
        Graph([Symbol("pkg.B", "type", 0.5, "ast", 0), C], [Edge("pkg.C", "pkg.B", "x")]),
        Graph([A, C], [Edge("pkg.A", "pkg.C", "y")], budget=10),
    ]
    for g in calls:
        wire = producer.dumps(g)
        assert reader.loads(wire) == loads(dumps(g))
    assert "previously transmitted" in producer.dumps(calls[2])


def test_reader_rejects_unknown_reference_and_keeps_state() -> None:
    reader = SessionReader()
    reader.loads("GCF profile=graph symbols=1 session=true\n## targets\n@3 fn pkg.A 0.90 l\n")
    with pytest.raises(GCFError) as info:
        reader.loads(
            "GCF profile=graph symbols=2 session=true\n## targets\n"
            "@3  # previously transmitted\n@4  # previously transmitted\n"
        )
    assert (info.value.code, info.value.line) == ("unresolved_reference", 4)
    g = reader.loads(
        "GCF profile=graph symbols=1 session=true\n## related\n@3  # previously transmitted\n"
    )
    assert g.symbols == (Symbol("pkg.A", "function", 0.9, "l", 1),)


def test_plain_loads_cannot_resolve_references() -> None:
    with pytest.raises(GCFError) as info:
        loads(
            "GCF profile=graph symbols=1 session=true\n## targets\n@0  # previously transmitted\n"
        )
    assert info.value.code == "unresolved_reference"


def test_non_session_payload_ends_the_readers_session() -> None:
    reader = SessionReader()
    reader.loads("GCF profile=graph symbols=1 session=true\n## targets\n@0 fn pkg.A 0.90 l\n")
    reader.loads(dumps(Graph([B])))
    with pytest.raises(GCFError):
        reader.loads(
            "GCF profile=graph symbols=1 session=true\n## targets\n@0  # previously transmitted\n"
        )
