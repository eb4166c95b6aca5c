"""GraphStreamEncoder (spec §8): header, [?] edges, trailer counts, errors, constant memory."""

from __future__ import annotations

import tracemalloc

import pytest

from gcfkit.errors import GCFError
from gcfkit.graph import Edge, Graph, GraphStreamEncoder, Symbol, dumps, loads

A = Symbol("pkg.A", "function", 0.9, "lsp")
B = Symbol("pkg.B", "type", 0.5, "ast", 1)
C = Symbol("pkg.C", "var", 0.4, "ast", 7)


def stream(graph: Graph, **kw: object) -> str:
    out: list[str] = []
    enc = GraphStreamEncoder(
        out.append,
        tool=graph.tool,
        budget=graph.budget,
        tokens=graph.tokens,
        **kw,  # type: ignore[arg-type]
    )
    for s in graph.symbols:
        enc.add_symbol(s)
    for e in graph.edges:
        enc.add_edge(e)
    enc.close()
    return "".join(out)


def test_stream_matches_buffered_body_and_decodes_to_same_graph() -> None:
    g = Graph(
        [A, B, C], [Edge("pkg.B", "pkg.A", "calls"), Edge("pkg.C", "pkg.B", "uses")], "t", 9, 4
    )
    text = stream(g)
    assert text.splitlines()[0] == "GCF profile=graph tool=t budget=9 tokens=4"
    assert text.endswith("##! summary symbols=3 edges=2 counts=1,1,1,2\n")
    assert "## edges [?]\n" in text
    # Same node and edge lines as the buffered encoder for input already in canonical order.
    buffered = dumps(g).splitlines()[1:]
    streamed = text.splitlines()[1:-1]
    assert streamed == [ln.replace("## edges [2]", "## edges [?]") for ln in buffered]
    assert loads(text) == g


def test_labeled_counts_and_zero_edges() -> None:
    assert stream(Graph([A, B, C]), labeled_counts=True).endswith(
        "##! summary symbols=3 edges=0 counts=targets:1,related:1,distance_7:1,edges:0\n"
    )
    assert stream(Graph()) == "GCF profile=graph\n##! summary symbols=0 edges=0 counts=0\n"
    assert stream(Graph(), labeled_counts=True).endswith("counts=edges:0\n")


def test_rows_are_written_immediately() -> None:
    out: list[str] = []
    enc = GraphStreamEncoder(out.append)
    assert out == ["GCF profile=graph\n"]
    assert enc.add_symbol(A) == 0
    assert out[-2:] == ["## targets\n", "@0 fn pkg.A 0.90 lsp\n"]
    enc.add_edge(Edge("pkg.A", "pkg.A", "self", "added"))
    assert out[-2:] == ["## edges [?]\n", "@0<@0 self added\n"]
    assert (enc.symbols, enc.edges) == (1, 1)


def test_context_manager_closes_on_success_only() -> None:
    out: list[str] = []
    with GraphStreamEncoder(out.append) as enc:
        enc.add_symbol(A)
    assert out[-1].startswith("##! summary symbols=1")
    out.clear()
    with pytest.raises(RuntimeError), GraphStreamEncoder(out.append) as enc:
        enc.add_symbol(A)
        raise RuntimeError("producer failed")
    assert not any(line.startswith("##!") for line in out)


def test_close_is_idempotent_and_final() -> None:
    out: list[str] = []
    enc = GraphStreamEncoder(out.append)
    enc.close()
    enc.close()
    assert sum(line.startswith("##!") for line in out) == 1
    with pytest.raises(GCFError):
        enc.add_symbol(A)
    with pytest.raises(GCFError):
        enc.add_edge(Edge("pkg.A", "pkg.A", "x"))


def expect(code: str, fn: object, *args: object, **kw: object) -> None:
    with pytest.raises(GCFError) as info:
        fn(*args, **kw)  # type: ignore[operator]
    assert info.value.code == code


def test_stream_errors_leave_the_output_untouched() -> None:
    out: list[str] = []
    enc = GraphStreamEncoder(out.append)
    enc.add_symbol(B)
    written = list(out)
    expect("invalid_graph", enc.add_symbol, A)  # distance 0 after distance 1
    expect("invalid_graph", enc.add_symbol, B)  # already streamed
    expect("invalid_graph", enc.add_symbol, Symbol("bad name", "var", 0.1, "p", 1))
    expect("invalid_graph", enc.add_symbol, "not a symbol")
    expect("unknown_edge_reference", enc.add_edge, Edge("pkg.B", "pkg.Z", "x"))
    expect("unknown_edge_reference", enc.add_edge, Edge("a", "b", "x"), source_id=0, target_id=1)
    expect("invalid_graph", enc.add_edge, Edge("pkg.B", "pkg.B", "two words"))
    assert out == written
    enc.add_edge(Edge("pkg.B", "pkg.B", "x"))
    expect("invalid_graph", enc.add_symbol, C)  # symbols after edges


def test_shared_name_of_two_kinds_cannot_be_an_edge_endpoint() -> None:
    enc = GraphStreamEncoder(lambda _: None)
    enc.add_symbol(A)
    enc.add_symbol(Symbol("pkg.A", "type", 0.1, "p"))
    expect("invalid_graph", enc.add_edge, Edge("pkg.A", "pkg.A", "x"))
    enc.add_edge(Edge("pkg.A", "pkg.A", "x"), source_id=0, target_id=1)


def test_index_false_needs_ids() -> None:
    out: list[str] = []
    enc = GraphStreamEncoder(out.append, index=False)
    enc.add_symbol(A)
    expect("invalid_graph", enc.add_edge, Edge("pkg.A", "pkg.A", "x"))
    expect("invalid_graph", enc.add_edge, Edge("pkg.A", "pkg.A", "x"), source_id="0", target_id=0)
    enc.add_edge(Edge("pkg.A", "pkg.A", "x"), source_id=0, target_id=0)
    assert out[-1] == "@0<@0 x\n"


def test_header_values_are_validated() -> None:
    expect("invalid_graph", GraphStreamEncoder, print, tool="a b")
    expect("invalid_graph", GraphStreamEncoder, print, budget=-3)


class CharCounter:
    """A writer that keeps nothing but a character count."""

    def __init__(self) -> None:
        self.chars = 0

    def __call__(self, text: str) -> None:
        self.chars += len(text)


@pytest.mark.slow
def test_memory_does_not_grow_with_the_stream() -> None:
    rows = 200_000  # half symbols in four distance groups, half edges
    half = rows // 2
    warmup = 1_000
    symbols = [Symbol(f"pkg.S{d}", "function", 0.5, "lsp", d) for d in range(4)]
    edge = Edge("x", "y", "calls")
    sink = CharCounter()
    enc = GraphStreamEncoder(sink, tool="bench", index=False)
    per_group = half // 4
    tracemalloc.start()
    try:
        for i in range(warmup):
            enc.add_symbol(symbols[i // per_group])
        early_peak = tracemalloc.get_traced_memory()[1]
        for i in range(warmup, half):
            enc.add_symbol(symbols[i // per_group])
        for i in range(half):
            enc.add_edge(edge, source_id=i, target_id=half - 1 - i)
        enc.close()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (enc.symbols, enc.edges) == (half, half)
    assert sink.chars > 20 * rows  # every row really went through the writer
    # 100x more rows than the warm-up, yet the peak stays within a few small allocations.
    assert peak < early_peak + 4096, (early_peak, peak)
    print(f"stream of {rows} rows: early peak {early_peak} B, final peak {peak} B")
    assert current < 4096
