"""The official GCF v3.5.3 conformance suite, run strictly, dispatching on ``operation``.

The one runner of the fixtures (the per-module tests cover what they do not). Contracts:
../shared/conformance/SOURCE.md. Exact bytes for every encoder, key order kept on round
trips, a bool never equal to a number, the exact error category. Each fixture goes through
every entry point it applies to: a generic payload through ``gcfkit.decode`` and
``gcfkit.loads``, a graph payload through ``gcfkit.decode`` and ``gcfkit.graph.loads``.
The suite's directory is ``GCF_CONFORMANCE_DIR`` (default ``../shared/conformance``).
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from typing import Any

import pytest

import gcfkit
from gcfkit import GCFError, graph, keyed
from gcfkit.errors import GCFDecodeError, GCFEncodeError
from tests.conformance import CONFORMANCE_DIR, load_fixtures, strict_equal

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

FIXTURES = load_fixtures()
OUTCOMES: Counter[tuple[str, str]] = Counter()


def _is_graph_payload(text: Any) -> bool:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return isinstance(text, str) and text.startswith("GCF profile=graph")


def _is_answer(text: str | bytes) -> bool:
    """A delta or unchanged answer: the snapshot decoders refuse it by design."""
    head = (text if isinstance(text, str) else text.decode("utf-8", "replace")).split("\n")[0]
    return "delta=true" in head or "unchanged=true" in head


def _raw_input(fx: dict[str, Any]) -> str | bytes:
    if "inputBase64" in fx:
        return base64.b64decode(fx["inputBase64"])
    return str(fx["input"])


def _graph_types_hold(g: Any) -> None:
    """Decoded scores are floats and distances ints, whatever the wire spelled."""
    for s in g.symbols:
        assert type(s.score) is float and type(s.distance) is int, s


def _check_error(err: GCFError, expected: str) -> None:
    if re.fullmatch(r"[a-z0-9_]+", expected):
        assert err.code == expected, f"code {err.code!r} ({err}), expected {expected!r}"
    else:
        assert expected in str(err), f"message {str(err)!r} lacks the phrase {expected!r}"


def _graph_model_matches(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    """The fixture's model names the fields it pins; compare exactly those, in order."""
    for key, want in expected.items():
        got = actual.get(key)
        if isinstance(want, list):
            if not isinstance(got, list) or len(got) != len(want):
                return False
            for g, w in zip(got, want, strict=True):
                if not all(strict_equal(g.get(k), v, ordered=False) for k, v in w.items()):
                    return False
        elif not strict_equal(got, want, ordered=False):
            return False
    return True


# -- operations ----------------------------------------------------------------------------


def op_encode(fx: dict[str, Any]) -> None:
    if fx["expected"].startswith("GCF profile=graph"):
        g = graph.graph_from_model(fx["input"])
        assert graph.dumps(g) == fx["expected"]
        back = graph.loads(fx["expected"])
        assert graph.graph_to_model(back) == graph.graph_to_model(graph.loads(graph.dumps(back)))
    else:
        assert gcfkit.dumps(fx["input"]) == fx["expected"]
        # The expected wire decodes back to the input (membership: many inputs were written
        # from unordered maps, so the canonical wire's key order can differ).
        assert strict_equal(gcfkit.loads(fx["expected"]), fx["input"], ordered=False)


def _has_gt_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(">" in k or _has_gt_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_gt_key(v) for v in value)
    return False


def op_roundtrip(fx: dict[str, Any]) -> None:
    wire = gcfkit.dumps(fx["input"])
    assert wire == fx["expected"]
    back = gcfkit.loads(wire)
    # Key order is kept, except where the spec cannot keep it: a `>`-named field in a
    # tabular row travels as an attachment after the row's columns (§7.4.6.1.4).
    assert strict_equal(back, fx["input"]) or (
        _has_gt_key(fx["input"]) and strict_equal(back, fx["input"], ordered=False)
    ), back


def op_roundtrip_wire(fx: dict[str, Any]) -> None:
    value = gcfkit.loads(fx["input"])
    assert gcfkit.dumps(value) == fx["expected"]
    assert strict_equal(gcfkit.decode(fx["input"]), value, int_float=False)


def op_decode(fx: dict[str, Any]) -> None:
    if _is_graph_payload(fx["input"]):
        g = gcfkit.decode(fx["input"])
        assert g == graph.loads(fx["input"])
        _graph_types_hold(g)
        model = graph.graph_to_model(g)
        assert _graph_model_matches(model, fx["expected"]), model
    else:
        got = gcfkit.decode(fx["input"])
        assert strict_equal(got, fx["expected"], ordered=False), got
        assert strict_equal(gcfkit.loads(fx["input"]), got, int_float=False)


def op_error(fx: dict[str, Any]) -> None:
    raw = _raw_input(fx)
    entry_points: list[Any] = [gcfkit.decode]
    if not _is_answer(raw):
        # Given a delta, graph.loads validates it first (fixture errors-v2/033 expects
        # malformed_delta from any graph decoder); a generic loads refuses answers outright.
        entry_points.append(graph.loads if _is_graph_payload(raw) else gcfkit.loads)
    elif _is_graph_payload(raw):
        entry_points.append(graph.loads)
    for decode in entry_points:
        with pytest.raises(GCFDecodeError) as info:
            decode(raw)
        _check_error(info.value, fx["expectedError"])
        assert info.value.lineno >= 1 and 0 <= info.value.pos <= len(info.value.doc)


def op_encode_error(fx: dict[str, Any]) -> None:
    with pytest.raises(GCFEncodeError) as info:
        gcfkit.dumps(fx["input"])
    _check_error(info.value, fx["expectedError"])


def op_pack_root(fx: dict[str, Any]) -> None:
    g = graph.graph_from_model(fx["input"])
    assert graph.pack_root(g.symbols, g.edges) == fx["expected"]


def op_session(fx: dict[str, Any]) -> None:
    session = graph.Session()
    for call in fx["calls"]:
        assert session.dumps(graph.graph_from_model(call["input"])) == call["expected"]


def op_graph_stream_encode(fx: dict[str, Any]) -> None:
    g = graph.graph_from_model(fx["input"])
    out: list[str] = []
    enc = graph.GraphStreamEncoder(
        out.append,
        tool=g.tool,
        budget=g.budget,
        tokens=g.tokens,
        pack_root=g.pack_root,
        labeled_counts=bool((fx.get("options") or {}).get("labeledTrailerCounts")),
    )
    for s in g.symbols:
        enc.add_symbol(s)
    for e in g.edges:
        enc.add_edge(e)
    enc.close()
    assert "".join(out) == fx["expected"]
    # What the stream wrote decodes back to the same graph.
    assert graph.loads("".join(out)) == g


def _snapshot(graph: Any, model: dict[str, Any]) -> tuple[Any, Any]:
    g = graph.graph_from_model(model)
    return g.symbols, g.edges


def op_delta(fx: dict[str, Any]) -> None:
    if isinstance(fx["input"], dict):
        assert graph.dumps_delta(graph.delta_from_model(fx["input"])) == fx["expected"]
        return
    symbols, edges = _snapshot(graph, fx["base_snapshot"])
    delta = graph.loads_delta(fx["input"])
    if "base_root" in fx:
        assert graph.pack_root(symbols, edges) == fx["base_root"] == delta.base_root
    if "new_root" in fx:
        assert delta.new_root == fx["new_root"]
    new_symbols, new_edges = graph.apply_delta(symbols, edges, delta)
    want_symbols, want_edges = _snapshot(graph, fx["expected_snapshot"])
    assert sorted(map(repr, new_symbols)) == sorted(map(repr, want_symbols))
    assert sorted(map(repr, new_edges)) == sorted(map(repr, want_edges))
    assert graph.pack_root(new_symbols, new_edges) == fx.get(
        "new_root", graph.pack_root(want_symbols, want_edges)
    )


def op_delta_verify(fx: dict[str, Any]) -> None:
    symbols, edges = _snapshot(graph, fx["base_snapshot"])
    before = (list(symbols), list(edges))
    with pytest.raises(GCFError) as info:
        graph.apply_delta(symbols, edges, graph.loads_delta(fx["input"]))
    _check_error(info.value, fx["expectedError"])
    assert (list(symbols), list(edges)) == before


def _keyed_set(keyed: Any, model: dict[str, Any]) -> Any:
    return keyed.KeyedSet(
        model["key"], list(model["fields"]), list(model["rows"]), model.get("name", "rows")
    )


def _generic_delta(keyed: Any, model: dict[str, Any]) -> Any:
    return keyed.GenericDelta(
        model["key"],
        list(model["fields"]),
        model["baseRoot"],
        model.get("newRoot", ""),
        added=tuple(model.get("added", ())),
        changed=tuple(model.get("changed", ())),
        removed=tuple(model.get("removed", ())),
        tool=model.get("tool", ""),
        delta_tokens=model.get("deltaTokens", 0),
        full_tokens=model.get("fullTokens", 0),
    )


def op_generic_pack_root(fx: dict[str, Any]) -> None:
    assert keyed.pack_root(_keyed_set(keyed, fx["input"])) == fx["expected"]
    # Row order is not part of a set's identity.
    reordered = dict(fx["input"], rows=list(reversed(fx["input"]["rows"])))
    assert keyed.pack_root(_keyed_set(keyed, reordered)) == fx["expected"]


def op_generic_delta(fx: dict[str, Any]) -> None:
    wire = keyed.dumps_delta(_generic_delta(keyed, fx["input"]))
    assert wire == fx["expected"]
    # Decoding keeps everything but the token counts behind savings=.
    head, _, body = wire.partition("\n")
    head = " ".join(p for p in head.split() if not p.startswith("savings="))
    assert keyed.dumps_delta(keyed.loads_delta(wire)) == head + "\n" + body


def _verify_generic(keyed: Any, fx: dict[str, Any], delta_source: Any) -> None:
    base = _keyed_set(keyed, fx["input"]["base"])
    before = keyed.pack_root(base)
    rows_before = [dict(r) for r in base.rows]
    if "expectedError" in fx:
        with pytest.raises(GCFError) as info:
            delta = delta_source()
            keyed.apply_delta(base, delta, expected_root=fx["input"]["expectedNewRoot"])
        _check_error(info.value, fx["expectedError"])
        assert keyed.pack_root(base) == before
        assert [dict(r) for r in base.rows] == rows_before
        return
    result = keyed.apply_delta(base, delta_source(), expected_root=fx["input"]["expectedNewRoot"])
    assert keyed.pack_root(result) == fx["expected"]


def op_generic_delta_verify(fx: dict[str, Any]) -> None:
    _verify_generic(keyed, fx, lambda: _generic_delta(keyed, fx["input"]["delta"]))


def op_generic_delta_decode(fx: dict[str, Any]) -> None:
    _verify_generic(keyed, fx, lambda: keyed.loads_delta(fx["input"]["wire"]))


def op_generic_delta_session(fx: dict[str, Any]) -> None:
    policy = fx["input"]["policy"]
    reanchor = keyed.FixedN(policy["n"]) if policy["mode"] == "fixedN" else keyed.SizeGuard()
    session = keyed.DeltaSession(
        _keyed_set(keyed, fx["input"]["base"]), tool=fx["input"]["tool"], reanchor=reanchor
    )
    assert session.full() == fx["expected"]["initialFull"]
    emissions = fx["expected"]["emissions"]
    assert len(emissions) == len(fx["input"]["updates"])
    for update, want in zip(fx["input"]["updates"], emissions, strict=True):
        wire, is_full = session.next(_keyed_set(keyed, update))
        assert (wire, is_full) == (want["wire"], want["isFull"])


OPERATIONS = {
    "encode": op_encode,
    "roundtrip": op_roundtrip,
    "roundtrip-wire": op_roundtrip_wire,
    "decode": op_decode,
    "error": op_error,
    "encode-error": op_encode_error,
    "pack-root": op_pack_root,
    "session": op_session,
    "graph-stream-encode": op_graph_stream_encode,
    "delta": op_delta,
    "delta-verify": op_delta_verify,
    "generic-pack-root": op_generic_pack_root,
    "generic-delta": op_generic_delta,
    "generic-delta-verify": op_generic_delta_verify,
    "generic-delta-decode": op_generic_delta_decode,
    "generic-delta-session": op_generic_delta_session,
}


def test_suite_is_complete() -> None:
    """All 281 fixtures are present and every operation has a runner."""
    assert len(FIXTURES) == 281, (
        f"found {len(FIXTURES)} fixtures in {CONFORMANCE_DIR}; set GCF_CONFORMANCE_DIR to the "
        "v3.5.3 suite's directory"
    )
    unknown = {fx["operation"] for _, fx in FIXTURES} - set(OPERATIONS)
    assert not unknown, f"fixtures with unknown operations: {unknown}"


@pytest.mark.parametrize(("path", "fx"), FIXTURES, ids=[p for p, _ in FIXTURES])
def test_fixture(path: str, fx: dict[str, Any]) -> None:
    op = fx["operation"]
    outcome = "failed"
    try:
        OPERATIONS[op](fx)
        outcome = "passed"
    finally:
        OUTCOMES[(op, outcome)] += 1
