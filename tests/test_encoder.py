"""Unit tests of the buffered generic encoder, one group per spec rule.

The official fixtures run in test_conformance.py; these pin the rules the fixtures leave
open (options, limits, errors, ambiguity guards) and round-trip every case through the
strict decoder.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest

from gcfkit.errors import GCFError
from gcfkit.generic.decoder import loads
from gcfkit.generic.encoder import MAX_DEPTH, dumps, render_tabular

from .conformance import strict_equal

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

H = "GCF profile=generic\n"


def body(value: Any, *, ordered: bool = True, **kw: Any) -> str:
    """The payload without its header line, after checking the round trip.

    ``ordered=False`` for the documented exception: tabular rows come back in field
    union order.
    """
    text = dumps(value, **kw)
    assert text.startswith(H)
    assert text.endswith("\n")
    back = loads(text)
    assert strict_equal(back, value, ordered=ordered), (value, text, back)
    assert dumps(back, **kw) == text  # wire idempotence
    return text[len(H) :]


# ---------------------------------------------------------------------------------------
# §2.4 quoting obligation and canonical delimiter quoting
# ---------------------------------------------------------------------------------------

MUST_QUOTE = [
    "",
    "-",
    "~",
    "^",
    "true",
    "false",
    "^{a}",
    "^{a b}",
    "^{a,b}",
    "0",
    "-0",
    "12",
    "1.5",
    "1e10",
    "6.022E+23",
    "+1",
    "-.5",
    ".5",
    "01",
    "00.5",
    " x",
    "x ",
    "\tx",
    "#tag",
    "@id",
    ".hidden",
    'say "hi"',
    "back\\slash",
    "nul\x00",
    "line\nbreak",
    "cr\r",
    "c1\x85",
    "nb\u00a0sp",
    "ls\u2028",
    "ps\u2029",
    "bom\ufeff",
    "em\u2003space",
    "ERR[404]: Not Found",
    "[Speaker 1]: Hello",
    "[]:",
    "a|b",
    "a,b",
]

STAY_BARE = [
    "plain",
    "hello world",
    "x=y",
    "key: value",
    "value[0] ok",
    "http://example.com:8080/api",
    "123abc",
    "1.\u0665",
    "+\u0665",
    "0\u0665",
    "caf\u00e9",
    "smile \U0001f600",
    "^x",
    "~x",
    "a>b",
    "True",
    "null",
    "NaN",
    "Infinity",
    "2025-01-01",
    "del\x7f",
]


@pytest.mark.parametrize("s", MUST_QUOTE)
def test_quoted_in_every_context(s: str) -> None:
    doc = {"k": s, "arr": [s, "x"], "rows": [{"v": s}, {"v": "x"}]}
    text = body(doc)
    lines = text.split("\n")
    assert lines[0].startswith('k="')
    assert lines[1].startswith('arr[2]: "')
    assert lines[3].startswith('"')
    assert body(s).startswith('="')


@pytest.mark.parametrize("s", STAY_BARE)
def test_bare_in_every_context(s: str) -> None:
    text = body({"k": s, "arr": [s, "x"], "rows": [{"v": s}, {"v": "x"}]})
    assert text.split("\n")[:4] == [f"k={s}", f"arr[2]: {s},x", "## rows [2]{v}", s]


def test_escapes_are_canonical_json() -> None:
    s = 'q" b\\ /\b\f\n\r\t\x01\x1f'
    assert body({"k": s}) == 'k="q\\" b\\\\ /\\b\\f\\n\\r\\t\\u0001\\u001f"\n'


def test_non_ascii_is_literal() -> None:
    assert body({"k": "é\U0001f600"}) == "k=é\U0001f600\n"


def test_lone_surrogate_rejected_in_values_and_keys() -> None:
    for value in ("a\ud800", {"k": "\udc00x"}, {"a\ud800": 1}, [{"a": "\ud800"}]):
        with pytest.raises(GCFError) as e:
            dumps(value)
        assert e.value.code == "invalid_surrogate"


# ---------------------------------------------------------------------------------------
# §2.3 numbers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "0"),
        (-0.0, "0"),
        (0.0, "0"),
        (3.0, "3"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (1e-6, "0.000001"),
        (1.5e-5, "0.000015"),
        (9.99e-7, "9.99e-7"),
        (1e-7, "1e-7"),
        (123456.789, "123456.789"),
        (2.0**53 - 1, "9007199254740991"),
        (2.0**53, "9.007199254740992e+15"),
        (5e18, "5e+18"),
        (-1.25e21, "-1.25e+21"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (2**63 - 1, "9223372036854775807"),
        (-(2**63), "-9223372036854775808"),
    ],
)
def test_canonical_numbers(value: float, wire: str) -> None:
    assert dumps({"v": value}) == f"{H}v={wire}\n"
    assert dumps([{"v": value}]) == f"{H}## [1]{{v}}\n{wire}\n"
    back = loads(dumps(value))
    assert back == value and not isinstance(back, bool)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30, math.nan, math.inf, -math.inf])
def test_out_of_range(value: float) -> None:
    for doc in (value, {"v": value}, [value], [{"v": value}], {"a": {"v": value}, "b": {}}):
        with pytest.raises(GCFError) as e:
            dumps(doc)
        assert e.value.code == "out_of_range"


def test_bool_is_never_a_number() -> None:
    assert body([True, 1, False, 0, 1.0]) == "## [5]: true,1,false,0,1\n"
    assert loads(dumps([True, 1]))[0] is True


# ---------------------------------------------------------------------------------------
# §2a keys, §3.3 header
# ---------------------------------------------------------------------------------------


def test_keys_bare_and_quoted() -> None:
    doc = {"a_1": 1, "_x": 2, "1a": 3, "a-b": 4, "": 5, "a b": 6, "é": 7, 'q"': 8}
    assert body(doc) == 'a_1=1\n_x=2\n"1a"=3\n"a-b"=4\n""=5\n"a b"=6\n"é"=7\n"q\\""=8\n'


def test_tool_header() -> None:
    assert dumps({"a": 1}, tool="search_v2") == "GCF profile=generic tool=search_v2\na=1\n"
    for bad in ("two words", "", "é", "tab\t"):
        with pytest.raises(GCFError) as e:
            dumps(1, tool=bad)
        assert e.value.code == "malformed_header_field"


# ---------------------------------------------------------------------------------------
# §7.1 roots, §7.7 empty containers
# ---------------------------------------------------------------------------------------


def test_roots() -> None:
    assert body(None) == "=-\n"
    assert body("x") == "=x\n"
    assert body({}) == ""
    assert body([]) == "## [0]\n"
    assert body([[]]) == "## [1]\n@0 [0]\n"
    assert body([{}]) == "## [1]\n@0 {}\n"
    assert body({"e": {}, "l": []}) == "## e\n## l [0]\n"


def test_tuples_and_ordered_dicts_are_json() -> None:
    assert dumps((1, 2)) == dumps([1, 2])
    assert dumps(OrderedDict([("b", 1), ("a", 2)])) == f"{H}b=1\na=2\n"


# ---------------------------------------------------------------------------------------
# §7.3 form selection, §7.5 inline, §7.6 expanded
# ---------------------------------------------------------------------------------------


def test_expanded_items_of_every_kind() -> None:
    doc = {
        "xs": [
            "s",
            None,
            [],
            [1, "a,b"],
            [{"a": 1}, {"b": 2}],
            [[1], "x"],
            {},
            {"k": 1},
            {"m1": {"a": 1}, "m2": {"a": 2}},
        ]
    }
    assert body(doc) == (
        "## xs [9]\n"
        "@0 =s\n"
        "@1 =-\n"
        "@2 [0]\n"
        '@3 [2]: 1,"a,b"\n'
        "@4 [2]{a,b}\n"
        "  1|~\n"
        "  ~|2\n"
        "@5 [2]\n"
        "  @0 [1]: 1\n"
        "  @1 =x\n"
        "@6 {}\n"
        "@7 {}\n"
        "  k=1\n"
        "@8 [2:]{key,a}\n"
        "  m1|1\n"
        "  m2|2\n"
    )


def test_nested_sections_indent() -> None:
    doc = {"a": {"b": {"c": [{"x": 1}, {"x": 2}], "d": [1, 2]}}}
    assert body(doc) == "## a\n  ## b\n    ## c [2]{x}\n    1\n    2\n    d[2]: 1,2\n"


def test_all_gt_fields_fall_back_to_expanded() -> None:
    assert body([{"a>b": 1}, {"a>b": 2}]) == '## [2]\n@0 {}\n  "a>b"=1\n@1 {}\n  "a>b"=2\n'


# ---------------------------------------------------------------------------------------
# §7.4 tabular rows and attachments
# ---------------------------------------------------------------------------------------


def test_union_order_null_and_missing() -> None:
    rows = [{"b": 1, "a": None}, {"c": 3}, {"a": 2, "b": "x"}]
    assert body(rows, ordered=False) == "## [3]{b,a,c}\n1|-|~\n~|~|3\nx|2|~\n"
    assert list(loads(dumps(rows))[2]) == ["b", "a"]


def test_attachment_forms() -> None:
    rows = [
        {"id": 1, "o": {"k": 1}, "l": [1, 2], "t": [[1], 2], "m": {"x": {"a": 1}, "y": {"a": 2}}},
        {"id": 2, "o": "s", "l": [], "t": [{"a": 1}], "m": {}},
    ]
    assert body({"r": rows}) == (
        "## r [2]{id,o,l,t,m}\n"
        "@0 1|^|^|^|^\n"
        ".o {}\n"
        "    k=1\n"
        ".l [2]: 1,2\n"
        ".t [2]\n"
        "    @0 [1]: 1\n"
        "    @1 =2\n"
        ".m [2:]{key,a}\n"
        "    x|1\n"
        "    y|2\n"
        "@1 2|s|^|^|^\n"
        ".l [0]\n"
        ".t [1]{a}\n"
        "    1\n"
        ".m {}\n"
    )


def test_gt_fields_are_attachments_of_every_kind() -> None:
    rows = [{"id": 1, "a>b": "s", "c>d": None}, {"id": 2, "a>b": {"k": 1}, "c>d": [1]}, {"id": 3}]
    text = dumps(rows)
    assert text == (
        f"{H}## [3]{{id}}\n"
        '@0 1\n."a>b" =s\n."c>d" =-\n'
        '@1 2\n."a>b" {}\n    k=1\n."c>d" [1]: 1\n'
        "3\n"
    )
    # Key order is the documented exception: `>`-named fields come back after the columns.
    assert loads(text) == rows


def test_shared_array_schema_default_and_off() -> None:
    rows = [{"t": [{"a": 1}]}, {"t": [{"a": 2}, {"a": 3}]}, {"n": 0}, {"t": [{"a": 4}]}]
    assert body(rows) == (
        "## [4]{t,n}\n@0 ^|~\n.t [1]{a}\n    1\n@1 ^|~\n.t [2]\n    2\n    3\n"
        "~|0\n@3 ^|~\n.t [1]\n    4\n"
    )
    assert body(rows, shared_schemas=False).count("{a}") == 3


@pytest.mark.parametrize(
    "other",
    [
        [{"b": 1}],  # another declaration
        [],  # an empty array
        [1, 2],  # a primitive array
        [{"a": [1]}],  # a table with nested cells
        [{"a": {"x": 1}}],  # a table with path columns
        {"a": 1},  # an object
        "s",  # a scalar cell
        None,
        "first",  # the first row lacks the field
    ],
)
def test_schema_shared_only_when_every_row_agrees(other: Any) -> None:
    # As the reference implementation does: one odd row turns sharing off for the field.
    rows = [{"t": [{"a": 1}]}, {"t": other}, {"t": [{"a": 2}]}]
    if other == "first":
        rows = [{}, rows[0], rows[2]]
    text = body(rows)
    assert text.count(".t [1]{a}\n") >= 2 and ".t [1]\n" not in text


def test_expanded_array_after_a_tabular_one_is_not_tabular() -> None:
    # `.t [2]` after `.t [1]{a}` would read as rows of the established schema (§7.4.5.3),
    # so these records are not losslessly tabular: expanded form (§7.3), sections (§7.2).
    rows = [{"t": [{"a": 1}]}, {"t": [1, [2]]}]
    assert body(rows) == (
        "## [2]\n@0 {}\n  ## t [1]{a}\n  1\n@1 {}\n  ## t [2]\n  @0 =1\n  @1 [1]: 2\n"
    )
    assert body(rows, shared_schemas=False) == body(rows)
    assert body({"k1": rows[0], "k2": rows[1]}) == (
        "## k1\n  ## t [1]{a}\n  1\n## k2\n  ## t [2]\n  @0 =1\n  @1 [1]: 2\n"
    )
    # The other order is fine, and so is an array that is tabular only on the surface.
    assert body(rows[::-1]).startswith("## [2]{t}\n")
    inner = [{"u": [{"a": 1}]}, {"u": [[1]]}]
    assert body([{"t": [{"a": 1}]}, {"t": inner}]).startswith("## [2]\n")


def test_row_prefix_only_with_attachments() -> None:
    assert body([{"a": 1}, {"a": [1]}, {"a": 2}]) == "## [3]{a}\n1\n@1 ^\n.a [1]: 1\n2\n"


# ---------------------------------------------------------------------------------------
# §7.4.6 flattening and §7.4.5.1 inline schemas
# ---------------------------------------------------------------------------------------


def test_flatten_chains_and_null_absent() -> None:
    rows = [{"o": {"p": {"x": 1, "y": None}}}, {"o": None}, {}]
    assert body(rows) == '## [3]{"o>p>x","o>p>y"}\n1|-\n-|-\n~|~\n'
    assert body(rows, flatten=False).startswith("## [3]{o}\n@0 ^\n.o {}\n")


@pytest.mark.parametrize(
    "rows",
    [
        [{"o": {"a": None, "b": None}}, {"o": {"a": 1, "b": 2}}],  # all-null reads as null
        [{"o": {"p": {"a": None}, "q": 1}}, {"o": {"p": {"a": 1}, "q": 2}}],  # inner all-null
        [{"o": {"p": None}}, {"o": {"p": {"a": 1}}}],  # intermediate null
        [{"o": {"a": 1}}, {"o": {"b": 1}}],  # different keys
        [{"o": {"a": 1, "b": 2}}, {"o": {"b": 1, "a": 2}}],  # different order
        [{"o": {"a": [1]}}, {"o": {"a": [2]}}],  # array leaf
        [{"o": {"a": {}}}, {"o": {"a": {}}}],  # empty object leaf
        [{"o": {}}, {"o": {}}],  # nothing to flatten
        [{"o": {"": 1}}, {"o": {"": 2}}],  # empty key
        [{"": {"a": 1}}, {"": {"a": 2}}],  # empty field name
        [{"o": {"x>y": 1}}, {"o": {"x>y": 2}}],  # `>` in a key
        [{"o": {"a": 1}}, {"o": "s"}],  # scalar in another row
    ],
)
def test_flatten_refused_when_not_lossless(rows: list[dict[str, Any]]) -> None:
    text = body(rows)
    assert ">" not in text.split("\n")[0].replace('"x>y"', "")


def test_inline_schemas_option() -> None:
    rows = [
        {"id": 1, "c": {"a": 1, "b": "x|y", "d": None}},
        {"id": 2},
        {"id": 3, "c": {"a": 2, "b": "-", "d": True}},
    ]
    assert body(rows, flatten=False, inline_schemas=True) == (
        '## [3]{id,c}\n@0 1|^{a,b,d}\n1|"x|y"|-\n2|~\n@2 3|^\n2|"-"|true\n'
    )
    # Fewer than three keys, a nested value, or a first row without the field: traditional.
    for other in (
        [{"c": {"a": 1, "b": 2}}, {"c": {"a": 3, "b": 4}}],
        [{"c": {"a": 1, "b": 2, "d": [1]}}],
        [{"id": 0}, {"c": {"a": 1, "b": 2, "d": 3}}],
    ):
        assert "^{" not in body(other, flatten=False, inline_schemas=True)


def test_inline_schema_by_default_where_flattening_is_refused() -> None:
    rows = [{"c": {"a": None, "b": None, "d": None}}, {"c": {"a": 1, "b": 2, "d": 3}}]
    assert body(rows) == "## [2]{c}\n@0 ^{a,b,d}\n-|-|-\n@1 ^\n1|2|3\n"
    keyed = {"k1": rows[0], "k2": rows[1]}
    assert body(keyed) == "## [2:]{key,c}\n@0 k1|^{a,b,d}\n-|-|-\n@1 k2|^\n1|2|3\n"
    assert "^{" not in body(rows, inline_schemas=False)
    # Names a path column could not carry are fine in an inline schema.
    odd = [{"c": {"": 1, "x>y": 2, "d": 3}}, {"c": {"": 4, "x>y": 5, "d": 6}}]
    assert body(odd) == '## [2]{c}\n@0 ^{"","x>y",d}\n1|2|3\n@1 ^\n4|5|6\n'
    # A present null makes the field ineligible (§7.4.5.1).
    assert "^{" not in body([rows[0], {"c": None}])


# ---------------------------------------------------------------------------------------
# §7.2a keyed maps
# ---------------------------------------------------------------------------------------


def test_keyed_label_collisions() -> None:
    doc = {"r1": {"key": 1, "_key": 2}, "r2": {"key": 3, "_key": 4}}
    assert body(doc) == "## [2:]{__key,key,_key}\nr1|1|2\nr2|3|4\n"


def test_keyed_eligibility() -> None:
    assert body({"a": {"x": 1}}) == "## a\n  x=1\n"
    assert body({"a": {"x": 1}, "b": 2}) == "## a\n  x=1\nb=2\n"
    assert body({"a": {}, "b": {}}) == "## a\n## b\n"
    assert body({"w": {"a": {"x": 1}, "b": {"x": 2}}}) == "## w [2:]{key,x}\na|1\nb|2\n"


def test_keyed_member_keys_are_cells() -> None:
    doc = {"true": {"x": 1}, "1": {"x": 2}, "a b": {"x": 3}, "~": {"x": 4}}
    assert body(doc) == '## [4:]{key,x}\n"true"|1\n"1"|2\na b|3\n"~"|4\n'


def test_keyed_rows_take_member_index_ids() -> None:
    doc = {"a": {"x": 1}, "b": {"x": [1]}, "c": {"x": {"k": 1}, "y": 2}}
    assert body(doc) == ("## [3:]{key,x,y}\na|1|~\n@1 b|^|~\n.x [1]: 1\n@2 c|^|2\n.x {}\n    k=1\n")


def test_keyed_map_flattens_value_fields() -> None:
    doc = {"u1": {"loc": {"c": "A"}}, "u2": {"loc": {"c": "B"}}}
    assert body(doc) == '## [2:]{key,"loc>c"}\nu1|A\nu2|B\n'


# ---------------------------------------------------------------------------------------
# Values outside the JSON model, limits, determinism
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        b"bytes",
        bytearray(b"x"),
        Decimal("1.5"),
        object(),
        1j,
        {1: "a"},
        {("t",): 1},
        {"a": {"b": {2: 1}}},
        [{"a": 1}, {3: 2}],
        {"m1": {1: 1}, "m2": {"a": 1}},
        [{"a": b"x"}],
        [{"a": {"b": frozenset()}}],
        {"a": [{"b": 1}, {"b": {1, 2}}]},
    ],
)
def test_unsupported_types(value: Any) -> None:
    with pytest.raises(GCFError) as e:
        dumps(value)
    assert e.value.code == "unsupported_type"


def test_subclasses_of_json_types_encode_as_their_base() -> None:
    import enum

    class Color(str, enum.Enum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    assert dumps({"c": Color.RED, "l": Level.HIGH}) == f"{H}c=red\nl=3\n"
    assert dumps([{"c": Color.RED, "l": Level.HIGH}]) == f"{H}## [1]{{c,l}}\nred|3\n"


def _nest(depth: int) -> Any:
    value: Any = 0
    for i in range(depth):
        value = [value] if i % 3 == 0 else {"k": value, "n": i} if i % 3 == 1 else [value, 1]
    return value


def test_depth_limit() -> None:
    assert loads(dumps(_nest(MAX_DEPTH))) == _nest(MAX_DEPTH)
    for depth in (MAX_DEPTH + 1, 100_000):
        with pytest.raises(GCFError) as e:
            dumps(_nest(depth))
        assert e.value.code == "limit_exceeded"
    rows: Any = [{"a": 1}]
    for _ in range(MAX_DEPTH):
        rows = [{"a": rows, "b": 1}]
    with pytest.raises(GCFError) as e:
        dumps(rows)
    assert e.value.code == "limit_exceeded"


def test_deterministic_and_input_untouched() -> None:
    doc = {"r": [{"a": {"x": 1}, "b": [{"c": 1}]}, {"a": {"x": 2}, "b": [{"c": 2}]}]}
    snapshot = repr(doc)
    assert dumps(doc) == dumps(doc)
    assert repr(doc) == snapshot


# ---------------------------------------------------------------------------------------
# render_tabular, the helper for delta sections
# ---------------------------------------------------------------------------------------


def test_render_tabular() -> None:
    rows: list[dict[str, Any]] = [
        {"id": 1, "t": [{"a": 1}]},
        {"id": 2, "t": [{"a": 2}]},
        {"id": "3"},
    ]
    assert render_tabular("## added [3]{@id,t}", rows, ["id", "t"]) == [
        "## added [3]{@id,t}",
        "@0 1|^",
        ".t [1]{a}",
        "    1",
        "@1 2|^",
        ".t [1]",
        "    2",
        '"3"|~',
    ]
    assert render_tabular("## x [1]{b}", [{"b": 1}], ["b"], indent="  ") == ["## x [1]{b}", "  1"]


def test_render_tabular_never_drops_data() -> None:
    with pytest.raises(GCFError):
        render_tabular("## a [1]{x}", [{"x": 1, "y": 2}], ["x"])
    with pytest.raises(GCFError):
        render_tabular("## a [1]{x}", [{"a>b": 1}], ["a>b"])


def test_render_tabular_refuses_an_unreadable_field() -> None:
    rows: list[dict[str, Any]] = [{"t": [{"a": 1}]}, {"t": [[1]]}]
    with pytest.raises(GCFError) as e:
        render_tabular("## changed [2]{t}", rows, ["t"])
    assert e.value.code == "unsupported_type"
    # The other order needs no schema, so it renders.
    assert render_tabular("## changed [2]{t}", rows[::-1], ["t"])[1:3] == ["@0 ^", ".t [1]"]


def test_inline_schema_names_with_pipes_stay_traditional() -> None:
    rows = [{"c": {"a|b": 1, "c": 2, "d": 3}}, {"c": {"a|b": 4, "c": 5, "d": 6}}]
    text = body(rows, flatten=False, inline_schemas=True)
    assert "^{" not in text and '.c {}\n    "a|b"=1' in text


def test_conflict_inside_an_attachment_only_withdraws_that_table() -> None:
    inner = [{"u": [{"a": 1}]}, {"u": [[1]]}]
    text = body({"r": [{"t": inner}, {"t": [{"u": 2}]}]})
    # The outer table stands; its first attachment fell back to expanded form, so no
    # schema is established for `t` and the second one declares its fields.
    assert text.startswith("## r [2]{t}\n@0 ^\n.t [2]\n    @0 {}\n")
    assert "@1 ^\n.t [1]{u}\n" in text


def test_inline_schema_with_a_non_string_key_is_refused() -> None:
    rows = [{"c": {1: 1, "b": 2, "d": 3}}, {"c": {1: 4, "b": 5, "d": 6}}]
    with pytest.raises(GCFError) as e:
        dumps(rows, flatten=False, inline_schemas=True)
    assert e.value.code == "unsupported_type"
    with pytest.raises(GCFError):
        render_tabular("## a [1]{}", [{}], [])
    assert render_tabular("## a [0]", [], []) == ["## a [0]"]


def test_keyed_label_steps_aside_for_flattened_fields_too() -> None:
    doc = {"a": {"key": {"p": 1}}, "b": {"key": {"p": 2}, "_key": {"q": 3}}}
    assert body(doc).split("\n")[0] == '## [2:]{__key,"key>p","_key>q"}'


def test_bare_fast_path_never_skips_a_needed_quote() -> None:
    from gcfkit.grammar import SAFE_BARE
    from gcfkit.scalar import needs_quote

    ascii_chars = [chr(i) for i in range(128)]
    short = ascii_chars + [a + b for a in ascii_chars for b in ascii_chars]
    accepted = [s for s in short if SAFE_BARE.match(s)]
    assert len(accepted) > 5000  # the fast path does take the common strings
    assert not [s for s in accepted if needs_quote(s, "|") or needs_quote(s, ",")]
