"""Graph pack roots and deltas (spec §10): encode, strict decode, atomic application."""

from __future__ import annotations

import copy
import hashlib

import pytest

from gcfkit.errors import GCFError
from gcfkit.graph import (
    Edge,
    Graph,
    GraphDelta,
    Symbol,
    apply_delta,
    dumps_delta,
    dumps_unchanged,
    loads_delta,
    make_delta,
    pack_root,
)

AUTH = Symbol("pkg.Auth", "function", 0.78, "lsp_resolved", 0)
SERVER = Symbol("pkg.Server", "function", 0.54, "lsp_resolved", 1)
HANDLER = Symbol("pkg.Handler", "function", 0.85, "lsp_resolved", 1)
CALLS = Edge("pkg.Server", "pkg.Auth", "calls")
NEW_CALLS = Edge("pkg.Handler", "pkg.Auth", "calls")


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- pack roots ------------------------------------------------------------------------


def test_pack_root_hashes_sorted_canonical_records() -> None:
    syms = [Symbol("z.Foo", "function", 0.9, "p"), Symbol("a.Bar", "widget", 2.0, "q", 3)]
    edges = [Edge("a.Bar", "z.Foo", "imports")]
    expected = sha(
        b"S\tfn\tz.Foo\t0.9\tp\t0\nS\twidget\ta.Bar\t2\tq\t3\nE\twidget\ta.Bar\tfn\tz.Foo\timports\n"
    )
    assert pack_root(syms, edges) == expected
    assert pack_root(reversed(syms), edges) == expected


def test_pack_root_sees_every_field_but_not_edge_status() -> None:
    base = pack_root([AUTH, SERVER], [CALLS])
    for changed in (
        Symbol("pkg.Auth", "type", 0.78, "lsp_resolved"),
        Symbol("pkg.Auth", "function", 0.79, "lsp_resolved"),
        Symbol("pkg.Auth", "function", 0.78, "ast"),
        Symbol("pkg.Auth", "function", 0.78, "lsp_resolved", 2),
    ):
        edge = Edge("pkg.Server", changed.qualified_name, "calls")
        assert pack_root([changed, SERVER], [edge]) != base
    assert pack_root([AUTH, SERVER], [Edge("pkg.Server", "pkg.Auth", "calls", "added")]) == base


def test_pack_root_accepts_decoded_non_ascii_but_rejects_broken_strings() -> None:
    assert pack_root([Symbol("\u0bd7pkg", "function", 0.5, "lsp")], []).startswith("sha256:")
    for bad, code in (
        (Symbol("a\ud800", "function", 0.5, "lsp"), "invalid_surrogate"),
        (Symbol("a b", "function", 0.5, "lsp"), "invalid_graph"),
        (Symbol("a", "function", 0.5, ""), "invalid_graph"),
    ):
        with pytest.raises(GCFError) as info:
            pack_root([bad], [])
        assert info.value.code == code
    with pytest.raises(GCFError) as info:
        pack_root([AUTH], [CALLS])
    assert info.value.code == "unknown_edge_reference"


# --- encode / decode -------------------------------------------------------------------


def full_delta() -> GraphDelta:
    return GraphDelta(
        "sha256:aa",
        "sha256:bb",
        removed=[SERVER],
        added=[HANDLER, Symbol("pkg.X", "widget", 0.125, "rwr", 4)],
        removed_edges=[CALLS],
        added_edges=[NEW_CALLS],
        tool="ctx",
        delta_tokens=30,
        full_tokens=158,
    )


def test_dumps_delta_all_sections_in_order() -> None:
    assert dumps_delta(full_delta()) == (
        "GCF profile=graph tool=ctx delta=true base_root=sha256:aa new_root=sha256:bb "
        "tokens=30 savings=81%\n"
        "## removed\nfn pkg.Server\n"
        "## added\n@0 fn pkg.Handler 0.85 lsp_resolved 1\n@1 widget pkg.X 0.12 rwr 4\n"
        "## edges_removed\npkg.Server -> pkg.Auth calls\n"
        "## edges_added\npkg.Handler -> pkg.Auth calls\n"
    )


@pytest.mark.parametrize(
    ("delta_tokens", "full_tokens", "savings"),
    [
        (30, 200, "savings=85%"),
        (1, 200, "savings=100%"),
        (3, 200, "savings=99%"),
        (200, 200, "savings=0%"),
        (300, 200, "savings=-50%"),
        (5, 0, None),
    ],
)
def test_savings_is_a_rounded_integer_percentage(
    delta_tokens: int, full_tokens: int, savings: str | None
) -> None:
    header = dumps_delta(GraphDelta("a", "b", delta_tokens=delta_tokens, full_tokens=full_tokens))
    fields = header.split()
    assert (savings in fields) if savings else not any(f.startswith("savings=") for f in fields)


def test_loads_delta_round_trip() -> None:
    d = full_delta()
    back = loads_delta(dumps_delta(d))
    assert back.removed == (Symbol("pkg.Server", "function"),)
    assert back.added == (HANDLER, Symbol("pkg.X", "widget", 0.12, "rwr", 4))
    assert (back.removed_edges, back.added_edges) == (d.removed_edges, d.added_edges)
    assert (back.tool, back.delta_tokens, back.full_tokens, back.savings) == ("ctx", 30, 0, "81%")
    assert dumps_delta(back) == dumps_delta(d)


def test_sections_in_any_order_with_counts_comments_and_crlf() -> None:
    text = (
        "GCF profile=graph delta=true base_root=a new_root=b\r\n"
        "## edges_added [1]\r\npkg.Handler -> pkg.Auth calls\r\n# note\r\n"
        "## added\r\n@7 fn pkg.Handler 0.85 lsp_resolved 1\r\n## removed [1]\r\nfn pkg.Server\r\n"
    )
    d = loads_delta(text.encode())
    assert (d.added, d.removed, d.added_edges) == (
        (HANDLER,),
        (Symbol("pkg.Server", "function"),),
        (NEW_CALLS,),
    )


HEAD = "GCF profile=graph delta=true base_root=a new_root=b"


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        (HEAD + "\n## unexpected\nfn pkg.Foo\n", "malformed_delta", 2),
        (HEAD + "\n## targets\n@0 fn a 0.10 l\n", "malformed_delta", 2),
        (HEAD + "\nfn pkg.Foo\n", "malformed_delta", 2),
        (HEAD + "\n## removed\nfn\n", "malformed_delta", 3),
        (HEAD + "\n## removed\nfn a b\n", "malformed_delta", 3),
        (HEAD + "\n## added\n@0 fn a 0.10 l\n", "malformed_delta", 3),
        (HEAD + "\n## added\nfn a 0.10 l 0 x\n", "malformed_delta", 3),
        (HEAD + "\n## added\n@0 fn a 0.10 l x\n", "malformed_delta", 3),
        (HEAD + "\n## added\n@0 fn a 0.10 l -1\n", "malformed_delta", 3),
        (HEAD + "\n## added\n@z fn a 0.10 l 0\n", "invalid_symbol_id", 3),
        (HEAD + "\n## added\n@0 fn a 0.1 l 0\n", "invalid_score", 3),
        (HEAD + "\n## edges_added\na b calls\n", "malformed_delta", 3),
        (HEAD + "\n## edges_removed\na -> b\n", "malformed_delta", 3),
        (HEAD + "\n## edges_removed\n@0<@1 calls\n", "malformed_delta", 3),
        (HEAD + "\n## removed\nfn a\n## removed\nfn b\n", "malformed_delta", 4),
        (HEAD + "\n## removed [2]\nfn a\n", "count_mismatch", 2),
        (HEAD + "\n##! summary symbols=0\n", "malformed_delta", 2),
        ("GCF profile=graph delta=true base_root=a\n", "malformed_delta", 1),
        ("GCF profile=graph base_root=a new_root=b\n", "malformed_delta", 1),
        ("GCF profile=generic delta=true\n", "unsupported_profile", 1),
    ],
)
def test_loads_delta_errors(text: str, code: str, line: int) -> None:
    with pytest.raises(GCFError) as info:
        loads_delta(text)
    assert (info.value.code, info.value.line) == (code, line)


# --- apply -----------------------------------------------------------------------------


def verified(removed=(), added=(), removed_edges=(), added_edges=()) -> GraphDelta:  # type: ignore[no-untyped-def]
    """A delta against [AUTH, SERVER] + [CALLS] whose new_root is computed honestly."""
    base_syms, base_edges = [AUTH, SERVER], [CALLS]
    rk = {(s.kind, s.qualified_name) for s in removed}
    syms = [s for s in base_syms if (s.kind, s.qualified_name) not in rk] + list(added)
    edges = [e for e in base_edges if e not in removed_edges] + list(added_edges)
    try:
        new_root = pack_root(syms, edges)
    except GCFError:
        new_root = "sha256:" + "1" * 64
    return GraphDelta(
        pack_root(base_syms, base_edges), new_root, removed, added, removed_edges, added_edges
    )


def test_apply_returns_new_snapshot() -> None:
    d = verified([SERVER], [HANDLER], [CALLS], [NEW_CALLS])
    assert apply_delta([AUTH, SERVER], [CALLS], d) == ((AUTH, HANDLER), (NEW_CALLS,))


def test_apply_remove_and_re_add_updates_a_symbol() -> None:
    moved = Symbol("pkg.Server", "function", 0.6, "lsp_resolved", 2)
    d = verified([SERVER], [moved])
    assert apply_delta([AUTH, SERVER], [CALLS], d) == ((AUTH, moved), (CALLS,))


@pytest.mark.parametrize(
    ("delta", "code"),
    [
        (GraphDelta("sha256:" + "0" * 64, "x"), "root_mismatch"),
        (verified([HANDLER]), "invalid_delta"),  # removing what is not there
        (verified([], [AUTH]), "invalid_delta"),  # adding what is there
        (verified([], [HANDLER, HANDLER]), "invalid_delta"),  # duplicate op
        (verified([SERVER, SERVER], [], [CALLS]), "invalid_delta"),
        (verified([], [], [NEW_CALLS]), "invalid_delta"),  # removing an absent edge
        (verified([], [], [], [CALLS]), "invalid_delta"),  # adding an existing edge
        (verified([SERVER]), "invalid_delta"),  # CALLS would dangle
        (verified([], [], [], [NEW_CALLS]), "invalid_delta"),  # endpoint not in snapshot
        (
            GraphDelta(pack_root([AUTH, SERVER], [CALLS]), "sha256:" + "0" * 64, added=[HANDLER]),
            "root_mismatch",
        ),
    ],
)
def test_apply_is_atomic(delta: GraphDelta, code: str) -> None:
    symbols, edges = [AUTH, SERVER], [CALLS]
    before = copy.deepcopy((symbols, edges))
    with pytest.raises(GCFError) as info:
        apply_delta(symbols, edges, delta)
    assert info.value.code == code
    assert (symbols, edges) == before
    assert [id(s) for s in symbols] == [id(AUTH), id(SERVER)]


def test_make_delta_then_apply_through_the_wire() -> None:
    old = Graph([AUTH, SERVER], [CALLS])
    new = Graph([AUTH, HANDLER, Symbol("pkg.Extra", "type", 0.25, "ast", 3)], [NEW_CALLS])
    d = make_delta(old, new, tool="ctx")
    assert d.base_root == pack_root(old.symbols, old.edges)
    assert d.new_root == pack_root(new.symbols, new.edges)
    wire = loads_delta(dumps_delta(d))
    symbols, edges = apply_delta(old.symbols, old.edges, wire)
    assert set(symbols) == set(new.symbols) and set(edges) == set(new.edges)


def test_unchanged_answer_is_the_identity_delta() -> None:
    root = pack_root([AUTH, SERVER], [CALLS])
    wire = dumps_unchanged(root, 2, tool="ctx")
    assert wire == f"GCF profile=graph tool=ctx unchanged=true pack_root={root} symbols=2\n"
    d = loads_delta(wire)
    assert (d.base_root, d.new_root, d.tool) == (root, root, "ctx")
    assert apply_delta([AUTH, SERVER], [CALLS], d) == ((AUTH, SERVER), (CALLS,))
    with pytest.raises(GCFError) as info:
        apply_delta([AUTH], [], d)
    assert info.value.code == "root_mismatch"
    for bad in ("GCF profile=graph unchanged=true symbols=2\n", wire + "## removed\n"):
        with pytest.raises(GCFError) as info:
            loads_delta(bad)
        assert info.value.code == "malformed_delta"
    with pytest.raises(GCFError):
        dumps_unchanged(root, -1)
