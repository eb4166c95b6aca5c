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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit.generic.decoder import loads
from gcfkit.generic.encoder import dumps
from gcfkit.grammar import SAFE_BARE
from tests.test_fast_paths import general, outcome

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

AWKWARD = [
    "",
    " ",
    "-",
    "~",
    "^",
    "true",
    "false",
    "null",
    "0",
    "-0",
    "01",
    "007",
    "+1",
    "-.5",
    ".5",
    "1e5",
    "1.5",
    "6.022E+23",
    "1.\u0665",
    "123abc",
    "^{a,b}",
    "^{a}",
    "^{a b}",
    "^{",
    "#x",
    "# comment",
    "##! summary counts=1",
    "@0 x",
    ".x",
    " x",
    "x ",
    "\t",
    "\x00",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9f",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\ufeff",
    "a\u3000b",
    "[1]: x",
    "ERR[404]: Not Found",
    "x[0]",
    "a|b",
    "|",
    "a,b",
    ",",
    '"',
    '"q"',
    "back\\slash",
    "\\",
    "a>b",
    ">",
    "a>",
    ">b",
    "key",
    "_key",
    "__key",
    "x=y",
    "=",
    "{}",
    "[0]",
    "caf\u00e9",
    "\U0001f600",
    "line\nbreak",
    "\r\n",
]

_text = st.one_of(
    st.sampled_from(AWKWARD),
    st.text(max_size=6),
    st.text(alphabet='ab|,"\\ >~^-.#@[]:{}=\n\t0123456789e+', max_size=6),
)
_keys = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=4), st.sampled_from("abcdk"))
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-300, max_value=300),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_keys, children, max_size=4),
    )


json_values = st.recursive(_scalars, _containers, max_leaves=24)

# Shapes that reach tables, keyed maps, flattening and attachments far more often: rows
# drawn from a small field pool, with nested objects sharing their keys.
_pool = st.sampled_from(["a", "b", "key", "_key", "x>y", "", "c d"])
_leaf = st.one_of(_scalars, st.lists(_scalars, max_size=2))
_nested = st.one_of(
    st.none(),
    st.fixed_dictionaries({"p": _scalars, "q": _scalars}),
    st.fixed_dictionaries({"p": _scalars, "q": st.fixed_dictionaries({"r": _scalars})}),
    st.dictionaries(_pool, _leaf, max_size=3),
)
_row = st.dictionaries(_pool, st.one_of(_leaf, _nested), max_size=4)
_deep_row = st.dictionaries(
    _pool, st.one_of(_leaf, _nested, st.lists(_row, max_size=3)), max_size=4
)
tables = st.lists(st.one_of(_row, _deep_row), min_size=1, max_size=5)
keyed_maps = st.dictionaries(_keys, st.one_of(_row, _deep_row), min_size=2, max_size=5)
documents = st.one_of(
    tables,
    keyed_maps,
    st.dictionaries(_keys, st.one_of(tables, keyed_maps, json_values), max_size=3),
    st.lists(st.one_of(tables, keyed_maps, json_values), max_size=3),
)

_SETTINGS = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


# ---------------------------------------------------------------------------------------
# Type-strict, order-checking equality
# ---------------------------------------------------------------------------------------


def same(got: Any, want: Any) -> bool:
    """Structural equality of decoded ``got`` and ``want``, key order included."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, float):
        if type(got) is float:
            return got == want
        return type(got) is int and want.is_integer() and got == want
    if isinstance(want, int):
        return type(got) is int and got == want
    if isinstance(want, dict):
        return (
            type(got) is dict
            and list(got) == list(want)
            and all(same(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            type(got) is list
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


# An independent statement of the encoder's form choices, from the spec and the encoder's
# documented options, so that a wrong plan cannot make its own expectation.


def _is_table(arr: list[Any]) -> bool:
    """§7.3 rule 3: a non-empty array of objects with some column (a field without ``>``,
    §7.4.6.1 rule 4) whose attachments can all be spelled (see _schema_conflict)."""
    return (
        bool(arr)
        and all(isinstance(x, dict) for x in arr)
        and any(">" not in k for row in arr for k in row)
        and not _schema_conflict(arr)
    )


def _schema_conflict(rows: list[dict[str, Any]]) -> bool:
    """A field holding a tabular array and, in a later row, an expanded one (§7.4.5.3):
    the first tabular attachment establishes a schema the later one cannot carry."""
    tabular: set[str] = set()
    for row in rows:
        for f, v in row.items():
            if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
                if _is_table(v):
                    tabular.add(f)
                elif f in tabular:
                    return True
    return False


def _has_null_object(obj: dict[str, Any]) -> bool:
    """Some object in ``obj`` (itself included) whose members are all null."""
    return all(v is None for v in obj.values()) or any(
        _has_null_object(v) for v in obj.values() if isinstance(v, dict)
    )


def _flattens(values: list[Any], top: bool = True) -> bool:
    """§7.4.6.1: one field's present values become ``>`` path columns when each is an
    object (null allowed only at the top, rule 10) with the same non-empty keys in the same
    order (rule 1), no key empty or holding ``>`` (rule 3), and every leaf a scalar or such
    an object itself (rules 2, 6); an object of only nulls would come back as null
    (§7.4.6.2 rule 5), so it blocks flattening."""
    objs = [v for v in values if not (top and v is None)]
    if not objs or not all(isinstance(v, dict) for v in objs):
        return False
    keys = list(objs[0])
    if not keys or any(not k or ">" in k for k in keys) or any(list(o) != keys for o in objs):
        return False
    for k in keys:
        sub = [o[k] for o in objs]
        if any(isinstance(x, (dict, list)) for x in sub) and not _flattens(sub, top=False):
            return False
    return not top or not any(_has_null_object(o) for o in objs)


def _as_rows(rows: list[dict[str, Any]], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows as a table gives them back: columns in field-union order (§7.4.3), then the
    ``>``-named fields, which travel as attachments after them (§7.4.6.1 rule 4)."""
    union = list(dict.fromkeys(k for row in rows for k in row))
    flat = {
        f
        for f in union
        if options.get("flatten", True)
        and f
        and ">" not in f
        and _flattens([r[f] for r in rows if f in r])
    }
    order = [f for f in union if ">" not in f] + [f for f in union if ">" in f]
    # A flattened object comes back exactly as it was (same keys in every row); every
    # other value follows its own form's rules.
    return [
        {f: row[f] if f in flat else wire_order(row[f], options) for f in order if f in row}
        for row in rows
    ]


def wire_order(v: Any, options: dict[str, Any] | None = None) -> Any:
    """``v`` with every table row's keys in the order the wire gives them back."""
    options = options or {}
    if isinstance(v, list):
        if _is_table(v):
            return _as_rows(v, options)
        return [wire_order(x, options) for x in v]
    if isinstance(v, dict):
        values = list(v.values())
        if len(v) >= 2 and _is_table(values):  # a keyed map (§7.2a.1)
            return dict(zip(v, _as_rows(values, options), strict=True))
        return {k: wire_order(x, options) for k, x in v.items()}
    return v


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


@settings(max_examples=900, **_SETTINGS)  # type: ignore[arg-type]
@given(json_values)
def test_any_json_value_round_trips(value: Any) -> None:
    check_round_trip(value)


@settings(max_examples=800, **_SETTINGS)  # type: ignore[arg-type]
@given(documents)
def test_tables_and_keyed_maps_round_trip(value: Any) -> None:
    check_round_trip(value)


@settings(max_examples=300, **_SETTINGS)  # type: ignore[arg-type]
@given(documents, st.booleans(), st.booleans(), st.booleans())
def test_every_option_combination_round_trips(
    value: Any, flatten: bool, shared: bool, inline: bool
) -> None:
    check_round_trip(value, flatten=flatten, shared_schemas=shared, inline_schemas=inline)


@settings(max_examples=300, **_SETTINGS)  # type: ignore[arg-type]
@given(st.lists(_text, max_size=5), st.dictionaries(_keys, _text, max_size=5), _text)
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


@settings(max_examples=400, **_SETTINGS)  # type: ignore[arg-type]
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
