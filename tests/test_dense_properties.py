"""Property tests of the dense profile: lossless, canonical, idempotent, and loudly not v3.5.3.

Over the generic property tests' documents plus shapes that make every dense construct fire
(long strings repeated often enough to be defined, strings beginning with ``$``, primitive
lists in rows, constant and absent columns):

* ``dense.loads(dense.dumps(v))`` is ``v`` with types and key order kept (the two places
  where no GCF wire keeps key order are predicted by ``wire_order``, as for v3.5.3), and it is
  exactly what the v3.5.3 codec gives back for the same value;
* every construct configuration, and the exact o200k cost function, decode the same value;
* ``dense.dumps(dense.loads(x)) == x`` for every payload ``x`` the encoder writes;
* ``gcfkit.loads`` rejects every dense payload at line 1.

Deterministic (derandomized, no example database).
"""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gcfkit
from gcfkit import GCFError, dense, tokens
from gcfkit.errors import GCFEncodeError, at_path
from gcfkit.generic import definitions
from tests.codec_support import AWKWARD, documents, json_values, same, wire_order

# Run again on the pure-Python codec by make test (the marker's description).
pytestmark = pytest.mark.pure

BASE = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

REPEATED = [
    "authored 2026-08-07 by Dayna Blackwell",
    "commit 604a3d7",
    "Database connection timeout",
    "/api/users",
    "$HOME/.config/gcfkit",
    "$a",
    "$",
    "$$",
    "$1",
    "a|b, with both delimiters",
    "[2]: looks, like a list",
    "x}y",
    "k=v}",
    "^{a,b}",
]
_strings = st.one_of(st.sampled_from(REPEATED), st.sampled_from(AWKWARD), st.text(max_size=5))
_prims = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-2, 2), _strings)
_cell = st.one_of(_prims, st.lists(_prims, max_size=3))
_fields = st.sampled_from(["name", "type", "tags", "note", "x>y", "key"])
_row = st.dictionaries(_fields, _cell, max_size=5)
_nested_row = st.dictionaries(
    _fields, st.one_of(_cell, st.lists(_row, max_size=3), _row), max_size=4
)
# Rows that share most cells, so that constant columns and definitions appear.
_similar_rows = st.tuples(_row, st.integers(2, 6)).map(lambda t: [dict(t[0]) for _ in range(t[1])])
dense_documents = st.one_of(
    documents,
    st.lists(st.one_of(_row, _nested_row), min_size=1, max_size=6),
    _similar_rows,
    st.dictionaries(_strings, st.one_of(_row, _nested_row), min_size=2, max_size=4),
    st.dictionaries(
        st.sampled_from(["a", "b", "rows", "$k"]),
        st.one_of(json_values, _similar_rows, st.lists(_row, max_size=4), _strings),
        max_size=4,
    ),
)

CONFIGS: list[dict[str, bool]] = [
    {},
    {"defs": False},
    {"lists": False},
    {"constants": False},
    {"short_rows": False},
    {"defs": False, "lists": False, "constants": False, "short_rows": False},
]


def _round_trip(value: Any, **options: Any) -> str:
    wire = dense.dumps(value, **options)
    back = dense.loads(wire)
    assert same(back, wire_order(value)), (value, wire, back)
    assert dense.dumps(back, **options) == wire, (value, wire)
    return wire


@given(dense_documents)
@settings(BASE, max_examples=600)
def test_lossless_canonical_idempotent(value: Any) -> None:
    wire = _round_trip(value)
    # The same value the v3.5.3 codec gives back, key order and types included.
    assert same(dense.loads(wire), gcfkit.loads(gcfkit.dumps(value)))
    with pytest.raises(GCFError) as err:
        gcfkit.loads(wire)
    assert err.value.code == "unsupported_profile" and err.value.line == 1


@given(dense_documents, st.sampled_from(CONFIGS))
@settings(BASE, max_examples=300)
def test_every_configuration_decodes_the_same_value(value: Any, config: dict[str, bool]) -> None:
    _round_trip(value, **config)


@pytest.mark.skipif(not tokens.is_exact("o200k_base"), reason="needs exact o200k counts")
@given(dense_documents)
@settings(BASE, max_examples=200)
def test_exact_tokenizer_selection_round_trips(value: Any) -> None:
    _round_trip(value, count=tokens.counter("o200k_base").count)


@given(st.lists(st.sampled_from(REPEATED), min_size=2, max_size=12))
@settings(BASE, max_examples=200)
def test_defined_strings_and_dollar_literals(strings: list[str]) -> None:
    """Definitions and `$`-quoting in every value position: kv, inline arrays, rows,
    list cells, keyed-map keys and the root."""
    value: dict[str, Any] = {
        "kv": strings[0],
        "inline": strings,
        "rows": [{"s": s, "l": strings[:2]} for s in strings],
        "keyed": {s: {"v": 1, "w": s} for s in dict.fromkeys(strings)},
        "items": [*strings, {"k": strings[-1]}],
    }
    wire = _round_trip(value)
    # The definitions come first, named a, b, c... in order, each value a literal.
    defs = [m.groups() for m in re.finditer(r"^\$([a-z]+)=(.*)$", wire, re.MULTILINE)]
    names = [name for name, _ in defs]
    assert names == list(islice(definitions.names(), len(names)))
    assert not any(literal.startswith("$") for _, literal in defs)
    head = wire.split("\n")[1 : 1 + len(defs)]
    assert head == [f"${n}={v}" for n, v in defs]
    _round_trip(strings[0])


def _places(value: Any, path: str = "$") -> list[tuple[tuple[Any, ...], str]]:
    """Every place in ``value`` as (the keys and indexes that reach it, its error path)."""
    out: list[tuple[tuple[Any, ...], str]] = [((), path)]
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return out
    for k, v in items:
        step = at_path(GCFEncodeError("out_of_range", ""), k).path[1:]
        out += [((k, *steps), p) for steps, p in _places(v, path + step)]
    return out


def _replaced(value: Any, steps: tuple[Any, ...], new: Any) -> Any:
    if not steps:
        return new
    head, *rest = steps
    if isinstance(value, dict):
        return {k: _replaced(v, tuple(rest), new) if k == head else v for k, v in value.items()}
    return [_replaced(v, tuple(rest), new) if i == head else v for i, v in enumerate(value)]


@given(dense_documents, st.data())
@settings(BASE, max_examples=300)
def test_encode_errors_name_the_value_in_every_form(value: Any, data: st.DataObject) -> None:
    """One value outside the model anywhere: v3.5.3 and every dense configuration name it by
    the same path, whichever form (table, list cell, attachment, keyed map) holds it."""
    steps, path = data.draw(st.sampled_from(_places(value)))
    bad = data.draw(st.sampled_from([2**70, float("nan"), {1, 2}, "\ud800", object()]))
    broken = _replaced(value, steps, bad)
    configs: list[dict[str, Any] | None] = [None, *CONFIGS]
    for config in configs:
        with pytest.raises(GCFEncodeError) as err:
            gcfkit.dumps(broken) if config is None else dense.dumps(broken, **config)
        assert err.value.path == path, (config, broken, str(err.value))
