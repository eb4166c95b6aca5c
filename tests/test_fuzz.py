"""Decoder fuzzing: mutated fixtures and payloads only ever decode or raise GCFError, and
whatever a decoder accepts round-trips.

Every entry point is fuzzed: ``gcfkit.loads`` and ``gcfkit.decode`` over generic payloads,
``gcfkit.graph.loads`` and ``loads_delta`` over graph payloads, ``gcfkit.keyed.loads_delta``
and ``loads_keyed`` over generic deltas and keyed sets. An accepted input is encoded again
and decoded again, and must give the same value (type-strict, as tomli's fuzzer asks
``loads(dumps(v)) == v``) and the same wire a second time (a fixed point). Seeded and
bounded: a few thousand cases per entry point. Any other exception (IndexError,
RecursionError, KeyError, ...) is a bug in a decoder's totality and fails the test.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

import gcfkit
from gcfkit import graph, keyed
from gcfkit.errors import GCFError
from gcfkit.generic.decoder import loads
from gcfkit.generic.encoder import MAX_DEPTH
from tests.codec_support import CORPUS, GRAPHS, assert_json_model, fixture_texts, mutants, rejected
from tests.conformance import strict_equal

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

H = "GCF profile=generic\n"


def _deep(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        body = "".join(f"{'  ' * i}## k\n" for i in range(depth)) + "  " * depth + "x=1\n"
    elif kind == 1:
        body = "## [1]\n" + "".join(f"{'  ' * i}@0 [1]\n" for i in range(depth))
        body += "  " * depth + "@0 =x\n"
    else:
        body = "## [1]{a}\n@0 ^\n" + "".join(
            f"{'    ' * i}.a [1]{{a}}\n{'    ' * (i + 1)}@0 ^\n" for i in range(depth)
        )
        body += "    " * depth + ".a [1]: leaf\n"
    return H + body


def _check(payload: str | bytes) -> None:
    """``loads`` and ``decode`` on one payload: they agree, and an accepted value round-trips."""
    try:
        value = loads(payload)
    except GCFError as e:
        rejected(e)
        try:
            gcfkit.decode(payload)
        except GCFError as e2:
            rejected(e2)
        return
    assert_json_model(value)
    assert strict_equal(gcfkit.decode(payload), value, int_float=False)
    _assert_round_trip(value)


def _levels(value: Any) -> int:
    """Container levels of ``value``, as the encoder counts them (the root container is 1)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, level = stack.pop()
        if isinstance(v, dict):
            deepest = max(deepest, level)
            stack.extend((x, level + 1) for x in v.values())
        elif isinstance(v, list):
            deepest = max(deepest, level)
            stack.extend((x, level + 1) for x in v)
    return deepest


def _assert_round_trip(value: Any) -> None:
    # The decoder's depth limit counts open frames, the encoder's container levels: a table
    # row is a level but no frame, so a decoded value can be deeper than the encoder takes.
    if _levels(value) > MAX_DEPTH:
        with pytest.raises(GCFError) as refused:
            gcfkit.dumps(value)
        assert refused.value.code == "limit_exceeded"
        return
    # Key order may move within a table's rows (a row's keys come back in the field union's
    # order, which re-encoding a decoded table can change when a row lacks a field), so
    # membership is compared; the second wire must be the first (a fixed point).
    wire = gcfkit.dumps(value)
    back = loads(wire)
    assert strict_equal(back, value, ordered=False), (value, wire, back)
    assert gcfkit.dumps(back) == wire


def _check_graph(payload: str | bytes) -> None:
    """The graph decoders on one payload; an accepted snapshot or delta round-trips."""
    try:
        g = graph.loads(payload)
    except GCFError as e:
        rejected(e)
    else:
        if not _writable(g.symbols, g.edges):
            with pytest.raises(GCFError) as refused:
                graph.dumps(g)
            assert refused.value.code == "invalid_graph"
            return
        wire = graph.dumps(g)
        back = graph.loads(wire)
        # The encoder orders symbols canonically (§16.1): the same graph, another order.
        assert Counter(back.symbols) == Counter(g.symbols)
        assert Counter(back.edges) == Counter(g.edges)
        assert (back.tool, back.budget, back.tokens, back.pack_root) == (
            g.tool,
            g.budget,
            g.tokens,
            g.pack_root,
        )
        assert graph.dumps(back) == wire
    try:
        d = graph.loads_delta(payload)
    except GCFError as e:
        rejected(e)
    else:
        changes = (d.removed, d.added, d.removed_edges, d.added_edges)
        if d.base_root != d.new_root or any(changes):  # else: an unchanged answer
            if _writable([*d.removed, *d.added], [*d.removed_edges, *d.added_edges], False):
                assert graph.loads_delta(graph.dumps_delta(d)) == d
            else:
                with pytest.raises(GCFError) as refused:
                    graph.dumps_delta(d)
                assert refused.value.code == "invalid_graph"
    try:
        gcfkit.decode(payload)
    except GCFError as e:
        rejected(e)


def _writable(
    symbols: Iterable[graph.Symbol], edges: Iterable[graph.Edge], snapshot: bool = True
) -> bool:
    """Whether the graph encoder takes what a graph decoder gave: the two differ by design.

    The decoders read fields as code points (fixture graph-decode/004 decodes a non-ASCII
    qualified name) and any kind token, while the encoders write printable ASCII only (§20)
    and bare-key kinds (§4), and a snapshot cannot name an edge endpoint whose qualified
    name two kinds share.
    """
    symbols, edges = list(symbols), list(edges)
    fields = [x for s in symbols for x in (s.qualified_name, s.provenance or "p", s.kind)]
    fields += [x for e in edges for x in (e.source, e.target, e.edge_type, e.status) if x]
    if not all(x.isascii() and x.isprintable() and " " not in x for x in fields):
        return False
    if not all(s.kind in graph.KIND_ABBREVIATIONS or s.kind.isidentifier() for s in symbols):
        return False
    kinds: dict[str, set[str]] = {}
    for s in symbols:
        kinds.setdefault(s.qualified_name, set()).add(s.kind)
    return not snapshot or all(len(kinds[n]) == 1 for e in edges for n in (e.source, e.target))


def _check_keyed(payload: str | bytes) -> None:
    """The generic delta decoders on one payload; an accepted delta or set round-trips."""
    try:
        d = keyed.loads_delta(payload)
    except GCFError as e:
        rejected(e)
    else:
        if d.base_root != d.new_root:  # an unchanged answer has no delta wire of its own
            again = keyed.loads_delta(keyed.dumps_delta(d))
            assert again.key == d.key and again.fields == d.fields
            assert (again.base_root, again.new_root, again.tool) == (
                d.base_root,
                d.new_root,
                d.tool,
            )
            for a, b in ((again.added, d.added), (again.changed, d.changed)):
                assert strict_equal(list(a), list(b), int_float=True)
            assert strict_equal(list(again.removed), list(d.removed))
    try:
        s = keyed.loads_keyed(payload)
    except GCFError as e:
        rejected(e)
    else:
        again_set = keyed.loads_keyed(keyed.dumps_full(s))
        assert keyed.pack_root(again_set) == keyed.pack_root(s)
        assert again_set.key == s.key and again_set.fields == s.fields


GRAPH_CORPUS = GRAPHS + fixture_texts("GCF profile=graph")
KEYED_CORPUS = [t for t in CORPUS if " key=" in t.split("\n", 1)[0]]


def _fuzz(check: Callable[[str | bytes], None], seed: int, corpus: list[str]) -> None:
    for case, payload in enumerate(mutants(seed, corpus=corpus)):
        try:
            check(payload)
        except AssertionError:
            raise
        except Exception as e:  # any other exception is a totality bug
            pytest.fail(f"seed {seed} case {case}: {type(e).__name__}: {e}\n{payload!r:.2000}")


@pytest.mark.parametrize("seed", range(6))
def test_mutations_only_raise_gcferror(seed: int) -> None:
    _fuzz(_check, seed, CORPUS)


@pytest.mark.parametrize("seed", range(4))
def test_graph_mutations_only_raise_gcferror(seed: int) -> None:
    _fuzz(_check_graph, seed, GRAPH_CORPUS)


@pytest.mark.parametrize("seed", range(4))
def test_keyed_mutations_only_raise_gcferror(seed: int) -> None:
    _fuzz(_check_keyed, seed, KEYED_CORPUS)


def test_the_corpora_hold_every_kind() -> None:
    assert len(CORPUS) > 150 and len(GRAPH_CORPUS) > 30 and len(KEYED_CORPUS) > 10
    for payload in CORPUS:
        _check(payload)
    for payload in GRAPH_CORPUS:
        _check_graph(payload)
    for payload in KEYED_CORPUS:
        _check_keyed(payload)


def test_deep_nesting_decodes_or_hits_the_limit() -> None:
    rng = random.Random(99)
    for depth in (1, 31, 64, 100, 200, 254, 256, 300, 1000):
        for _ in range(3):
            payload = _deep(rng, depth)
            try:
                _check(payload)
            except GCFError as e:  # pragma: no cover - _check swallows GCFError
                pytest.fail(str(e))


def test_limits_are_reported_as_limit_exceeded() -> None:
    rng = random.Random(7)
    for depth in (300, 1000):
        with pytest.raises(GCFError) as info:
            loads(_deep(rng, depth))
        assert info.value.code == "limit_exceeded"
