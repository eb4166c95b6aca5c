"""Property tests of the generic codec: decode(encode(v)) == v over the JSON model (§1.1).

Values mix arbitrary text with every awkward string the spec names. Equality is
type-strict (a bool never equals a number; an integer-valued float may come back as the
same int, §2.3.1) and checks key ORDER, except in the two places where the wire itself
cannot carry it, which :func:`wire_order` predicts:

1. a tabular row (an array element, or a keyed-map member value) comes back with its keys
   in the table's field-union order (§7.4.3), whatever order the input row had;
2. a ``>``-named field of such a row is carried as an attachment (§7.4.6.1 rule 4) and
   comes back after the row's columns.

Runs are deterministic (derandomized, no example database); about 2,300 examples in all.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gcfkit.generic.decoder import loads
from gcfkit.generic.encoder import dumps
from gcfkit.grammar import SAFE_BARE
from tests.codec_support import (
    AWKWARD,
    PROPERTY_SETTINGS,
    documents,
    general,
    json_values,
    key_strings,
    outcome,
    same,
    text_values,
    wire_order,
)

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

# ---------------------------------------------------------------------------------------
# Type-strict, order-checking equality
# ---------------------------------------------------------------------------------------


def check_round_trip(value: Any, **options: Any) -> None:
    snapshot = copy.deepcopy(value)
    wire = dumps(value, **options)
    assert dumps(snapshot, **options) == wire  # deterministic, input untouched
    assert same(value, snapshot)
    back = loads(wire)
    assert same(back, wire_order(value, options)), (value, wire, back)
    # The decoder's fast paths read it as its general path does (tests/test_fast_paths.py).
    assert outcome(loads, wire) == general(loads, wire)
    assert dumps(back, **options) == wire  # the wire is a fixed point


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------


@settings(max_examples=900, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(json_values)
def test_any_json_value_round_trips(value: Any) -> None:
    check_round_trip(value)


@settings(max_examples=800, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(documents)
def test_tables_and_keyed_maps_round_trip(value: Any) -> None:
    check_round_trip(value)


@settings(max_examples=300, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(documents, st.booleans(), st.booleans(), st.booleans())
def test_every_option_combination_round_trips(
    value: Any, flatten: bool, shared: bool, inline: bool
) -> None:
    check_round_trip(value, flatten=flatten, shared_schemas=shared, inline_schemas=inline)


@settings(max_examples=300, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(
    st.lists(text_values, max_size=5),
    st.dictionaries(key_strings, text_values, max_size=5),
    text_values,
)
def test_strings_keep_every_code_point(items: list[str], obj: dict[str, str], s: str) -> None:
    for value in (items, obj, s, [{"v": x} for x in items], {"m": {k: {"v": k} for k in obj}}):
        check_round_trip(value)


def test_order_exceptions_are_real() -> None:
    """The two documented reorderings happen, and nothing else moves."""
    rows = [{"b": 1, "a": 2}, {"a": 3, "b": 4}]
    assert list(loads(dumps(rows))[1]) == ["b", "a"]
    gt = [{"a>b": 1, "c": 2}, {"c": 3}]
    assert list(loads(dumps(gt))[0]) == ["c", "a>b"]
    assert same(loads(dumps(rows)), wire_order(rows))
    assert same(loads(dumps(gt)), wire_order(gt))
    plain = {"z": 1, "a": {"y": 1, "b": 2}}
    assert wire_order(plain) == plain and list(loads(dumps(plain))) == ["z", "a"]


@settings(max_examples=400, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(
    st.one_of(
        st.sampled_from(AWKWARD),
        st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=8),
    )
)
def test_bare_fast_path_agrees_with_the_quoting_rule(s: str) -> None:
    from gcfkit.scalar import needs_quote

    if SAFE_BARE.match(s):
        assert not needs_quote(s, "|") and not needs_quote(s, ",")
    assert loads(dumps({"k": s, "a": [s], "t": [{"v": s}]})) == {"k": s, "a": [s], "t": [{"v": s}]}
