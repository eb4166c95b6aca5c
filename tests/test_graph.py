"""Buffered graph encoder and strict decoder (spec §3.2, 5, 6, 6a, 8, 13, 16.1, 16.3, 16.5)."""

from __future__ import annotations

import pytest

from gcfkit.errors import GCFError
from gcfkit.graph import (
    KIND_ABBREVIATIONS,
    Edge,
    Graph,
    Symbol,
    dumps,
    loads,
)

A = Symbol("pkg.A", "function", 0.9, "lsp")
B = Symbol("pkg.B", "type", 0.5, "ast", 1)


def err(text: str | bytes) -> GCFError:
    with pytest.raises(GCFError) as info:
        loads(text)
    return info.value


def payload(*body: str, header: str = "GCF profile=graph") -> str:
    return "\n".join((header, *body)) + "\n"


# --- encoder ---------------------------------------------------------------------------


def test_header_omits_zero_fields_but_always_symbols() -> None:
    assert dumps(Graph()) == "GCF profile=graph symbols=0\n"
    g = Graph([A], tool="t", budget=0, tokens=7, pack_root="sha256:ab")
    assert (
        dumps(g).splitlines()[0]
        == "GCF profile=graph tool=t tokens=7 symbols=1 pack_root=sha256:ab"
    )


def test_groups_and_score_order() -> None:
    syms = [
        Symbol("d5", "var", 0.1, "p", 5),
        Symbol("low", "var", 0.2, "p", 0),
        Symbol("tie1", "var", 0.5, "p", 2),
        Symbol("high", "var", 0.8, "p", 0),
        Symbol("tie2", "var", 0.5, "p", 2),
        Symbol("neg", "var", -1.5, "p", 0),
    ]
    assert dumps(Graph(syms)) == payload(
        "## targets",
        "@0 var high 0.80 p",
        "@1 var low 0.20 p",
        "@2 var neg -1.50 p",
        "## extended",
        "@3 var tie1 0.50 p",
        "@4 var tie2 0.50 p",
        "## distance_5",
        "@5 var d5 0.10 p",
        header="GCF profile=graph symbols=6",
    )


@pytest.mark.parametrize(
    ("score", "wire"),
    [
        (0.125, "0.12"),
        (0.375, "0.38"),
        (0.625, "0.62"),
        (2.675, "2.67"),
        (1, "1.00"),
        (0.005, "0.01"),
        (-0.125, "-0.12"),
        (12345.678, "12345.68"),
    ],
)
def test_score_two_decimals_half_even_on_exact_double(score: float, wire: str) -> None:
    text = dumps(Graph([Symbol("q", "var", score, "p")]))
    assert text.splitlines()[2] == f"@0 var q {wire} p"


def test_edges_sorted_by_source_then_target_id_with_status() -> None:
    c = Symbol("pkg.C", "class", 0.1, "x")
    edges = [
        Edge("pkg.C", "pkg.A", "calls", "added"),
        Edge("pkg.A", "pkg.C", "imports"),
        Edge("pkg.A", "pkg.A", "recurses"),
        Edge("pkg.B", "pkg.A", "calls", "removed"),
    ]
    text = dumps(Graph([c, A, B], edges))
    assert text.split("## edges [4]\n")[1] == (
        "@0<@0 recurses\n@1<@0 imports\n@0<@1 calls added\n@0<@2 calls removed\n"
    )
    assert "edges=4" in text.splitlines()[0]


@pytest.mark.parametrize(("full", "abbr"), sorted(KIND_ABBREVIATIONS.items()))
def test_every_kind_abbreviation_both_ways(full: str, abbr: str) -> None:
    text = dumps(Graph([Symbol("q", full, 0.5, "p")]))
    assert text.splitlines()[2] == f"@0 {abbr} q 0.50 p"
    assert loads(text).symbols[0].kind == full


def test_unknown_kind_verbatim() -> None:
    text = dumps(Graph([Symbol("q", "widget_2", 0.5, "p")]))
    assert "@0 widget_2 q 0.50 p" in text
    assert loads(text).symbols[0].kind == "widget_2"


@pytest.mark.parametrize(
    ("graph", "code"),
    [
        (Graph([Symbol("has space", "var", 0.1, "p")]), "invalid_graph"),
        (Graph([Symbol("caf\u00e9", "var", 0.1, "p")]), "invalid_graph"),
        (Graph([Symbol("q", "var", 0.1, "")]), "invalid_graph"),
        (Graph([Symbol("q", "var", 0.1, "a\tb")]), "invalid_graph"),
        (Graph([Symbol("q", "my-kind", 0.1, "p")]), "invalid_graph"),
        (Graph([Symbol("q", "var", float("nan"), "p")]), "out_of_range"),
        (Graph([Symbol("q", "var", True, "p")]), "invalid_graph"),
        (Graph([Symbol("q", "var", 0.1, "p", -1)]), "invalid_graph"),
        (Graph([A], [Edge("pkg.A", "pkg.A", "two words")]), "invalid_graph"),
        (Graph([A], [Edge("pkg.A", "pkg.A", "calls", "odd status")]), "invalid_graph"),
        (Graph([A], [Edge("pkg.A", "pkg.Z", "calls")]), "unknown_edge_reference"),
        (Graph([A, A]), "invalid_graph"),
        (
            Graph([A, Symbol("pkg.A", "type", 0.1, "p")], [Edge("pkg.A", "pkg.A", "x")]),
            "invalid_graph",
        ),
        (Graph([A], tool="two words"), "invalid_graph"),
        (Graph([A], budget=-1), "invalid_graph"),
    ],
)
def test_encode_rejects_values_outside_the_graph_profile(graph: Graph, code: str) -> None:
    with pytest.raises(GCFError) as info:
        dumps(graph)
    assert info.value.code == code
    assert info.value.line is None


def test_same_name_different_kinds_without_edges_is_fine() -> None:
    g = Graph([A, Symbol("pkg.A", "type", 0.1, "p")])
    assert loads(dumps(g)) == g


def test_graph_normalises_lists_to_tuples() -> None:
    assert Graph([A], [Edge("pkg.A", "pkg.A", "x")]) == Graph((A,), (Edge("pkg.A", "pkg.A", "x"),))


# --- decoder ---------------------------------------------------------------------------


def test_decode_round_trip_with_header_fields() -> None:
    g = Graph([A, B], [Edge("pkg.B", "pkg.A", "calls")], "ctx", 5000, 1847, "sha256:00")
    assert loads(dumps(g)) == g
    assert loads(dumps(g).encode()) == g


def test_crlf_comments_blank_lines_and_trailing_blanks() -> None:
    text = (
        "GCF profile=graph symbols=2 edges=1\r\n# lead comment\r\n\r\n## targets\r\n"
        "  # indented comment\r\n@0 fn pkg.A 0.90 lsp  \r\n## related\r\n"
        "@1 type pkg.B 0.50 ast\r\n#\r\n## edges [1]\r\n@0<@1 calls\r\n"
    )
    assert loads(text) == Graph([A, B], [Edge("pkg.B", "pkg.A", "calls")])


def test_streaming_payload_with_trailers() -> None:
    body = ("## targets", "@0 fn pkg.A 0.90 lsp", "## edges [?]", "@0<@0 calls")
    g = Graph([A], [Edge("pkg.A", "pkg.A", "calls")])
    assert loads(payload(*body)) == g  # no trailer: actual counts
    for counts in ("1,1", "targets:1,edges:1", "garbage", "x:y,1"):
        trailer = f"##! summary symbols=1 edges=1 counts={counts}"
        assert loads(payload(*body, trailer)) == g


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("value=1\n", "missing_header", 1),
        ("", "missing_header", 1),
        (" GCF profile=graph\n", "missing_header", 1),
        ("GCF2 profile=graph\n", "missing_header", 1),
        ("GCF tool=x\n## targets\n", "missing_profile", 1),
        ("GCF tool=x profile=graph\n", "missing_profile", 1),
        ("GCF profile=tree\n", "unknown_profile", 1),
        ("GCF profile=graph broken\n", "malformed_header_field", 1),
        ("GCF profile=graph tool=\n", "malformed_header_field", 1),
        ("GCF profile=graph tool=a tool=b\n", "duplicate_header_field", 1),
        ("GCF profile=graph profile=graph\n", "duplicate_header_field", 1),
        ("GCF profile=graph symbols=x\n", "malformed_header_field", 1),
        ("GCF profile=graph session=yes\n", "malformed_header_field", 1),
        ("GCF profile=generic\nx=1\n", "unsupported_profile", 1),
    ],
)
def test_header_errors(text: str, code: str, line: int) -> None:
    e = err(text)
    assert (e.code, e.line) == (code, line)


@pytest.mark.parametrize(
    ("body", "code", "line"),
    [
        (["## targets", "@0 fn pkg.Foo 0.90"], "invalid_node_line", 3),
        (["## targets", "@0 fn pkg.Foo 0.90 lsp extra"], "invalid_node_line", 3),
        (["## targets", "fn pkg.Foo 0.90 lsp"], "invalid_node_line", 3),
        (["## targets", "@x fn pkg.Foo 0.90 lsp"], "invalid_symbol_id", 3),
        (["## targets", "@-1 fn pkg.Foo 0.90 lsp"], "invalid_symbol_id", 3),
        (["## targets", "@1 fn pkg.Foo 0.90 lsp"], "invalid_symbol_id", 3),
        (["## targets", "@0 fn a 0.90 l", "@0 fn b 0.90 l"], "invalid_symbol_id", 4),
        (["## targets", "@0 fn pkg.Foo nope lsp"], "invalid_score", 3),
        (["## targets", "@0 fn pkg.Foo 0.9 lsp"], "invalid_score", 3),
        (["## targets", "@0 fn pkg.Foo .90 lsp"], "invalid_score", 3),
        (["## targets", "@0 fn pkg.Foo 1e2 lsp"], "invalid_score", 3),
        (["## targets", "@0 fn pkg.F\x01 0.90 lsp"], "invalid_node_line", 3),
        (["## targets", "@0 fn a 0.90 l", "## edges [1]", "@0 @0 calls"], "invalid_edge_syntax", 5),
        (["## targets", "@0 fn a 0.90 l", "## edges", "@0<@0"], "invalid_edge_syntax", 5),
        (["## targets", "@0 fn a 0.90 l", "## edges", "@0<@0 a b c"], "invalid_edge_syntax", 5),
        (["## targets", "@0 fn a 0.90 l", "## edges", "@0<0 calls"], "invalid_edge_syntax", 5),
        (["## targets", "@0 fn a 0.90 l", "## edges", "@0<@y calls"], "invalid_symbol_id", 5),
        (["## targets", "@0 fn a 0.90 l", "## edges", "@0<@1 calls"], "unknown_edge_reference", 5),
        (["## edges", "@0<@0 calls", "## targets", "@0 fn a 0.90 l"], "unknown_edge_reference", 3),
        (["## targets", "@0 fn a 0.90 l", "## edges [2]", "@0<@0 calls"], "count_mismatch", 4),
        (["## targets [2]", "@0 fn a 0.90 l"], "count_mismatch", 2),
        (["## targets [01]", "@0 fn a 0.90 l"], "invalid_count", 2),
        (["## targets [x]"], "invalid_count", 2),
        (["## targets [1]{a}", "@0 fn a 0.90 l"], "invalid_line", 2),
        (["## callers", "@0 fn a 0.90 l"], "invalid_line", 2),
        (["## removed", "fn a"], "malformed_delta", 2),
        (["@0 fn a 0.90 l"], "invalid_line", 2),
        (["## targets", "  @0 fn a 0.90 l"], "invalid_indent", 3),
        (["## targets", "\t@0 fn a 0.90 l"], "tab_indentation", 3),
        (["## targets", "#comment"], "invalid_node_line", 3),
        (["## edges", "## edges"], "invalid_line", 3),
        (["## targets", "@0  # previously transmitted"], "invalid_node_line", 3),
        (["##! summary symbols=0", "## targets"], "invalid_summary", 3),
        (["##! totals symbols=0"], "invalid_summary", 2),
        (["##! summary symbols"], "invalid_summary", 2),
        (["##! summary symbols=x"], "invalid_summary", 2),
        (["##! summary symbols=1"], "count_mismatch", 2),
        (["## targets", "@0 fn a 0.90 l", "##! summary edges=1"], "count_mismatch", 4),
    ],
)
def test_body_errors_with_line_numbers(body: list[str], code: str, line: int) -> None:
    e = err(payload(*body))
    assert (e.code, e.line) == (code, line)


def test_header_counts_are_checked() -> None:
    body = ("## targets", "@0 fn a 0.90 l", "## edges", "@0<@0 x")
    assert err(payload(*body, header="GCF profile=graph symbols=2")).code == "count_mismatch"
    assert err(payload(*body, header="GCF profile=graph edges=2")).code == "count_mismatch"
    assert len(loads(payload(*body, header="GCF profile=graph symbols=1 edges=1")).edges) == 1


def test_invalid_utf8_bytes() -> None:
    e = err(b"GCF profile=graph symbols=1\n## targets\n@0 fn \xff 0.90 l\n")
    assert (e.code, e.line) == ("invalid_utf8", 3)


def test_literal_surrogate_in_str_input() -> None:
    assert err(payload("## targets", "@0 fn a\ud800 0.90 l")).code == "invalid_surrogate"


def test_non_ascii_fields_decode_by_code_point() -> None:
    g = loads(payload("## targets", "@0 fn \u0bd7pkg 0.95 \u0bd7ast"))
    assert g.symbols[0].qualified_name == "\u0bd7pkg"
    assert g.symbols[0].provenance == "\u0bd7ast"


def test_distance_n_groups_and_explicit_low_distances() -> None:
    g = loads(payload("## distance_1", "@0 fn a 0.90 l", "## distance_12", "@1 fn b 0.10 l"))
    assert [s.distance for s in g.symbols] == [1, 12]


def test_delta_payload_through_loads() -> None:
    bad = "GCF profile=graph delta=true base_root=aaa new_root=bbb\n## unexpected\nfn pkg.Foo\n"
    assert err(bad).code == "malformed_delta"
    ok = "GCF profile=graph delta=true base_root=a new_root=b\n## removed\nfn pkg.Foo\n"
    assert err(ok).code == "unsupported_profile"


def test_unchanged_payload_is_header_only() -> None:
    root = "sha256:" + "0" * 64
    g = loads(f"GCF profile=graph tool=t unchanged=true pack_root={root} symbols=10\n")
    assert g == Graph(tool="t", pack_root=root)
    assert (
        err(f"GCF profile=graph unchanged=true pack_root={root}\n## targets\n@0 fn a 0.10 l\n").code
        == "invalid_line"
    )


def test_session_payload_ids_need_not_be_contiguous() -> None:
    text = payload(
        "## targets",
        "@4 fn a 0.90 l",
        "@2 fn b 0.80 l",
        "## edges [1]",
        "@4<@2 x",
        header="GCF profile=graph symbols=2 edges=1 session=true",
    )
    assert loads(text).edges == (Edge("b", "a", "x"),)
