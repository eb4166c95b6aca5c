"""The strict generic decoder: every §16.5 rejection with its line, limits, and what the
conformance fixtures (run by tests/test_conformance.py) do not cover."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit.errors import CODES, GCFError
from gcfkit.generic.decoder import (
    MAX_DEPTH,
    MAX_LINE,
    decode_document,
    loads,
    parse_header,
)
from tests.codec_support import EDGE_TOKENS
from tests.conformance import strict_equal

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

H = "GCF profile=generic\n"


def _generic(text: Any) -> bool:
    return isinstance(text, str) and not text.startswith("GCF profile=graph")


def _err(payload: str | bytes) -> GCFError:
    with pytest.raises(GCFError) as info:
        loads(payload)
    return info.value


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------


def test_types_and_order() -> None:
    got = loads(H + 'b=true\na=1\nc=1.0\nd=-\ne="1"\nf=1e2\ng=-0\n')
    assert list(got) == ["b", "a", "c", "d", "e", "f", "g"]
    assert got["b"] is True and type(got["a"]) is int and type(got["c"]) is float
    assert got["d"] is None and got["e"] == "1" and got["f"] == 100.0 and got["g"] == 0
    assert not strict_equal(loads(H + "x=true\n"), {"x": 1})


def test_roots() -> None:
    assert loads(H) == {}
    assert loads(H + "=-\n") is None
    assert loads(H + '=" x "\n') == " x "
    assert loads(H + "## [0]\n") == []
    assert loads(H + "## [3]: 1,a,-\n") == [1, "a", None]
    assert loads(H + "## [2:]{key,v}\na|1\nb|2\n") == {"a": {"v": 1}, "b": {"v": 2}}
    assert loads(H + "## [2]\n@0 =1\n@1 {}\n") == [1, {}]


def test_crlf_blank_lines_comments() -> None:
    text = "GCF profile=generic\r\n\r\n# note\r\n## rows [2]{a,b}\r\n  # inner\r\n1|2\r\n"
    text += "# between\r\n3| 4 \r\n"
    assert loads(text) == {"rows": [{"a": 1, "b": 2}, {"a": 3, "b": 4}]}


def test_bytes_input() -> None:
    assert loads((H + "name=café\n").encode()) == {"name": "café"}


def test_nested_sections_and_arrays() -> None:
    text = H + (
        "name=top\n"
        "## level1\n"
        "  a=1\n"
        '  tags[2]: x,"y,z"\n'
        "  ## level2\n"
        "    b=2\n"
        "  ## rows [1]{id}\n"
        "  7\n"
        "  c=3\n"
        "## items [4]\n"
        "@0 =alpha\n"
        "@1 [2]{k,v}\n"
        "  a|1\n"
        "  b|2\n"
        "@2 [1:]{key,n}\n"
        "  m|5\n"
        "@3 [1]\n"
        "  @0 [0]\n"
        "tail=1\n"
    )
    assert loads(text) == {
        "name": "top",
        "level1": {
            "a": 1,
            "tags": ["x", "y,z"],
            "level2": {"b": 2},
            "rows": [{"id": 7}],
            "c": 3,
        },
        "items": ["alpha", [{"k": "a", "v": 1}, {"k": "b", "v": 2}], {"m": {"n": 5}}, [[]]],
        "tail": 1,
    }


def test_attachment_forms() -> None:
    text = H + (
        "## rows [2]{id,o,a,t,k,e}\n"
        "@0 1|^|^|^|^|^\n"
        ".o {}\n"
        "    x=1\n"
        "    ## deep\n"
        "      y=2\n"
        ".a [2]: p,q\n"
        ".t [1]{s}\n"
        "    z\n"
        ".k [1:]{key,v}\n"
        "    kk|9\n"
        ".e [1]\n"
        "    @0 =w\n"
        '."g>h" =lit\n'
        "@1 2|~|-|^|~|^\n"
        "  .t [1]\n"
        "    y\n"
        "  .e [0]\n"
    )
    assert loads(text) == {
        "rows": [
            {
                "id": 1,
                "o": {"x": 1, "deep": {"y": 2}},
                "a": ["p", "q"],
                "t": [{"s": "z"}],
                "k": {"kk": {"v": 9}},
                "e": ["w"],
                "g>h": "lit",
            },
            # .t [1] reuses the shared schema {s} set by row 0 (§7.4.5.3).
            {"id": 2, "a": None, "t": [{"s": "y"}], "e": []},
        ]
    }


def test_inline_schemas_positional_matching() -> None:
    text = H + (
        "## rows [2]{id,c,items,d}\n"
        "@0 1|^{n,m}|^|^{p,q,r}\n"
        "Al|a@x\n"
        ".items [1]: z\n"
        "  1|2|3\n"
        "@1 2|^|^|~\n"
        "  .items [0]\n"
        "Bo|b@x\n"
    )
    assert loads(text) == {
        "rows": [
            {"id": 1, "c": {"n": "Al", "m": "a@x"}, "items": ["z"], "d": {"p": 1, "q": 2, "r": 3}},
            {"id": 2, "c": {"n": "Bo", "m": "b@x"}, "items": []},
        ]
    }


def test_flattened_paths() -> None:
    text = H + ('## [4]{id,"a>b>c","a>d",">x","y>"}\n1|1|2|3|4\n2|~|~|5|6\n3|-|-|7|8\n4|-|~|9|0\n')
    assert loads(text) == [
        {"id": 1, "a": {"b": {"c": 1}, "d": 2}, ">x": 3, "y>": 4},
        {"id": 2, ">x": 5, "y>": 6},
        {"id": 3, "a": None, ">x": 7, "y>": 8},
        {"id": 4, "a": {"b": None}, ">x": 9, "y>": 0},
    ]


def test_streaming_counts() -> None:
    text = H + "## a [?]{x,y}\n1|2\n3|4\nt[?]: p,q,r\n## b [?:]{key,v}\nk|1\n"
    text += "##! summary counts=2,3,1\n"
    assert loads(text) == {
        "a": [{"x": 1, "y": 2}, {"x": 3, "y": 4}],
        "t": ["p", "q", "r"],
        "b": {"k": {"v": 1}},
    }
    # No trailer: actual counts are used (§8.6).
    assert loads(H + "## a [?]{x}\n1\n") == {"a": [{"x": 1}]}


def test_delta_participating_payload() -> None:
    doc = decode_document(
        "GCF profile=generic pack_root=sha256:ab key=id\n## orders [2]{@id,total}\n1|2.5\n2|3\n"
    )
    assert doc.value == {"orders": [{"id": 1, "total": 2.5}, {"id": 2, "total": 3}]}
    info = doc.tables[id(doc.value["orders"])]
    assert info.id_field == "id" and info.fields == ["id", "total"]
    keyed = "GCF profile=generic pack_root=sha256:ab key=key\n## [2:]{@key,v}\na|1\nb|2\n"
    assert loads(keyed) == {"a": {"v": 1}, "b": {"v": 2}}


def test_parse_header() -> None:
    assert parse_header("GCF profile=graph tool=x") == {"profile": "graph", "tool": "x"}


# ---------------------------------------------------------------------------------------
# Every strict-mode rejection, with its category and line
# ---------------------------------------------------------------------------------------

REJECT = [
    ("", "missing_header", 1),
    ("GCFX profile=generic\n", "missing_header", 1),
    ("GCF2 profile=generic\n", "missing_header", 1),
    ("\ufeffGCF profile=generic\n", "missing_header", 1),
    ("GCF tool=a profile=generic\n", "missing_profile", 1),
    ("GCF profile=generic tool=a tool=b\n", "duplicate_header_field", 1),
    ("GCF profile=generic tool\n", "malformed_header_field", 1),
    ("GCF profile=generic tokens=x\n", "malformed_header_field", 1),
    ("GCF profile=yaml\n", "unknown_profile", 1),
    ("GCF profile=graph\n## targets\n", "unsupported_profile", 1),
    ("GCF profile=generic delta=true base_root=a new_root=b\n", "unsupported_profile", 1),
    (H + 'x="abc\n', "unterminated_quote", 2),
    (H + 'x="a\\qb"\n', "invalid_escape", 2),
    (H + 'x="a\tb"\n', "invalid_escape", 2),
    (H + 'x="a"b\n', "trailing_characters", 2),
    (H + '## r [1]{a,b}\n"x"y|1\n', "trailing_characters", 3),
    (H + "t[2]: a,~\n", "invalid_missing", 2),
    (H + "## i [1]\n@0 =~\n", "invalid_missing", 3),
    (H + "=~\n", "invalid_missing", 2),
    (H + "x=^{a}\n", "invalid_attachment_marker", 2),
    (H + "## r [1]{a}\n@0 ^{a,a}\n", "invalid_attachment_marker", 3),
    (H + '## r [1]{"a>b"}\n@0 ^\n', "invalid_attachment_marker", 3),
    (H + 'x="\\udc00"\n', "invalid_surrogate", 2),
    (H + "x=\ud800\n", "invalid_surrogate", 2),
    (H + "a=1\n## a\n", "duplicate_key", 3),
    (H + "## s\n  a=1\n  a=2\n", "duplicate_key", 4),
    (H + '## [2]{a,"a>b"}\n1|2\n3|4\n', "duplicate_key", 2),
    (H + "## r [1]{a,b,a}\n1|2|3\n", "duplicate_field_name", 2),
    (H + "## r [1]{a,b}\n1\n", "row_width_mismatch", 3),
    (H + "## r [2]{a}\n1\n", "count_mismatch", 2),
    (H + "## r [1]{a,b}\n1|2\n3|4\n", "count_mismatch", 4),
    (H + "## i [1]\n@0 =1\n@1 =2\n", "count_mismatch", 4),
    (H + "t[1]: a,b\n", "count_mismatch", 2),
    (H + "## r [?]{a}\n1\n##! summary counts=2\n", "count_mismatch", 4),
    (H + "## r [?]{a}\n1\n##! summary counts=1,1\n", "count_mismatch", 4),
    (H + "## [2]: a,b\n@0 =x\n", "count_mismatch", 3),
    (H + "## r [01]{a}\n", "invalid_count", 2),
    (H + "## r [-1]{a}\n", "invalid_count", 2),
    (H + "t[x]: a\n", "invalid_count", 2),
    (H + "## s\n\tx=1\n", "tab_indentation", 3),
    (H + "## s\n \tx=1\n", "tab_indentation", 3),
    (H + "## s\n    x=1\n", "invalid_indent", 3),
    (H + "## s\n   x=1\n", "invalid_indent", 3),
    (H + "a=1\n  b=2\n", "invalid_indent", 3),
    (H + "## i [2]\n@0 =a\n@2 =b\n", "invalid_item_id", 4),
    (H + "## r [1]{a}\n@1 x\n", "invalid_item_id", 3),
    (H + "## r [1]{a}\n^\n", "invalid_item_id", 3),
    (H + "## r [1]{a,b}\n@0 1|2\n.b {}\n", "orphan_attachment", 4),
    (H + "## r [1]{a,b}\n@0 1|^{x,y}\n.b {}\n", "orphan_attachment", 4),
    (H + ".b {}\n", "orphan_attachment", 2),
    (H + "## r [1]{a,b}\n@0 1|^{x,y}\n  p|q\n  r|s\n", "orphan_inline_attachment", 5),
    (H + "## r [1]{a,b}\n@0 1|^\n", "missing_attachment", 3),
    (H + "## r [2]{a,b}\n@0 1|^\n@1 2|3\n", "missing_attachment", 3),
    (H + "## r [1]{a,b}\n@0 1|^\n.b [0]\n.b [0]\n", "duplicate_attachment", 5),
    (H + "## r [1]{a,b}\n@0 1|^{x,y}\np|q|r\n", "inline_width_mismatch", 4),
    (H + "## r [1]{a,b}\n@0 1|^\n.b =x\n", "invalid_line", 4),
    (H + "## r [1]{a,b}\n@0 1|^\n.b\n", "invalid_line", 4),
    (H + "## r [1]{a,b}\n@0 1|^\n.b {x}\n", "invalid_line", 4),
    (H + "a\n", "invalid_line", 2),
    (H + "a=1\n=2\n", "invalid_line", 3),
    (H + "=1\na=2\n", "invalid_line", 3),
    (H + "#x\n", "invalid_line", 2),
    (H + "## s x\n", "invalid_line", 2),
    (H + "## s [2]: a,b\n", "invalid_line", 2),
    (H + "a=1\n## [1]: x\n", "invalid_line", 3),
    (H + "## i [1]\n@0 x\n", "invalid_line", 3),
    (H + "-bad=1\n", "invalid_key", 2),
    (H + "## [2:]{key,v}\na|1\na|2\n", "duplicate_key", 4),
    (H + "## [1:]{key}\na\n", "invalid_keyed_map", 2),
    (H + "## [0:]{key,v}\n", "invalid_keyed_map", 2),
    (H + "## [1:]\n", "invalid_keyed_map", 2),
    (H + "## [1:]{key,v}\n5|1\n", "invalid_keyed_map", 3),
    (H + "## [1:]{key,v}\n~|1\n", "invalid_keyed_map", 3),
    (H + "## r [?]{a}\n1\n##! summary counts=r:1\n", "invalid_summary", 4),
    (H + "## r [?]{a}\n1\n##! summary counts=01\n", "invalid_summary", 4),
    (H + "a=1\n##! summary\nb=2\n", "invalid_summary", 4),
    (H + "##!summary\n", "invalid_summary", 2),
    (H + "x=9223372036854775808\n", "out_of_range", 2),
    (H + "x=1e400\n", "out_of_range", 2),
    (H + "## r [1]{a}\n-1e999\n", "out_of_range", 3),
    ("GCF profile=generic key=id pack_root=x\n## r [2]{@id,v}\n1|a\n1|b\n", "duplicate_key", 4),
    ("GCF profile=generic key=id pack_root=x\n## r [1]{@v,id}\n1|a\n", "invalid_key", 2),
    (H + "## r [1]{@id,v}\n1|a\n", "invalid_key", 2),
]


@pytest.mark.parametrize(("payload", "code", "line"), REJECT)
def test_rejections(payload: str, code: str, line: int) -> None:
    err = _err(payload)
    assert (err.code, err.line) == (code, line), str(err)
    assert err.code in CODES


def test_invalid_utf8_reports_its_line() -> None:
    err = _err(b"GCF profile=generic\na=1\nb=\xc3\x28\n")
    assert (err.code, err.line) == ("invalid_utf8", 3)


def test_keyed_phrases() -> None:
    assert "duplicate member key" in str(_err(H + "## [2:]{key,x}\na|1\na|2\n"))
    assert "at least two fields" in str(_err(H + "## [1:]{key}\na\n"))
    assert "zero count" in str(_err(H + "## [0:]{key,x}\n"))


# ---------------------------------------------------------------------------------------
# Limits (§12): answered with GCFError, quickly
# ---------------------------------------------------------------------------------------


def _nested_sections(depth: int) -> str:
    return H + "".join(f"{'  ' * i}## k\n" for i in range(depth)) + "  " * depth + "x=1\n"


def test_nesting_32_levels_works() -> None:
    value: Any = loads(_nested_sections(32))
    for _ in range(32):
        value = value["k"]
    assert value == {"x": 1}


def test_nesting_past_limit_is_rejected() -> None:
    err = _err(_nested_sections(MAX_DEPTH + 5))
    assert err.code == "limit_exceeded"


def test_huge_nesting_inputs_are_rejected_quickly() -> None:
    start = time.process_time()
    # 100,000 levels of nesting, written the only ways that fit in memory: a flattened
    # path of 100,000 segments, and 100,000 section lines each one level deeper than the
    # last (the decoder stops at its depth limit long before the deep lines).
    path = ">".join(["a"] * 100_000)
    assert _err(H + f'## [1]{{"{path}"}}\n1\n').code == "limit_exceeded"
    lines = (f"{'  ' * i}## k\n" for i in range(100_000))
    deep = H + "".join(line for _, line in zip(range(MAX_DEPTH + 10), lines, strict=False))
    assert _err(deep).code == "limit_exceeded"
    assert _err(H + "## r [1000000000000]{a}\n1\n").code == "limit_exceeded"
    assert _err(H + "t[99999999999999999999]: a\n").code == "limit_exceeded"
    assert time.process_time() - start < 30  # a generous bound: no hang


def test_long_line_is_rejected() -> None:
    err = _err(H + "x=" + "a" * (MAX_LINE + 1) + "\n")
    assert (err.code, err.line) == ("limit_exceeded", 2)
    row = H + "## r [1]{a}\n" + "b" * (MAX_LINE + 1) + "\n"
    assert _err(row).code == "limit_exceeded"


def test_large_but_legal_inputs() -> None:
    n = 20_000
    text = H + f"## r [{n}]{{i,s}}\n" + "".join(f"{i}|v{i % 7}\n" for i in range(n))
    rows = loads(text)["r"]
    assert len(rows) == n and rows[-1] == {"i": n - 1, "s": f"v{(n - 1) % 7}"}
    long_ok = H + "x=" + "a" * 70_000 + "\n"
    assert len(loads(long_ok)["x"]) == 70_000


# ---------------------------------------------------------------------------------------
# Property: decode(encode(x)) == x (membership; tabular rows share one field order)
# ---------------------------------------------------------------------------------------

_KEYS = st.one_of(
    st.sampled_from(["id", "a", "b", "key", "x>y", "", "a b", "#", "@", "1", "é"]),
    st.text(max_size=4),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["-", "~", "^", "true", "01", "a|b", "a,b", "^{a}", " x", "[1]: y", ".x"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_VALUES)
def test_encoder_output_decodes_to_the_value(value: Any) -> None:
    encoder = pytest.importorskip("gcfkit.generic.encoder")
    assert strict_equal(loads(encoder.dumps(value)), value, ordered=False)


def test_gt_named_bare_attachments() -> None:
    text = H + ('## [2]{id}\n@0 1\n."a>b" {}\n    k=1\n."c>d" [2]: x,y\n2\n')
    assert loads(text) == [{"id": 1, "a>b": {"k": 1}, "c>d": ["x", "y"]}, {"id": 2}]
    assert _err(H + '## [1]{id}\n@0 1\n."a>b" =1\n."a>b" =2\n').code == "duplicate_attachment"


def test_pipe_inside_a_quoted_inline_schema_name() -> None:
    # The splitter must not cut at a '|' inside ^{"a|b",...} (§7.4.5.1, §4.2).
    wire = 'GCF profile=generic\n## [2]{c}\n@0 ^{"a|b",c,"d}|"}\n1|2|3\n@1 ^\n4|5|6\n'
    assert loads(wire) == [{"c": {"a|b": 1, "c": 2, "d}|": 3}}, {"c": {"a|b": 4, "c": 5, "d}|": 6}}]


@pytest.mark.parametrize("tok", EDGE_TOKENS)
def test_table_cells_decode_exactly_like_key_value_scalars(tok: str) -> None:
    """Runs of plain rows take a batched column path; every cell must still mean exactly
    what the same token means in a key=value line (or fail with the same code)."""

    def outcome(wire: str) -> Any:
        try:
            return ("ok", loads(wire))
        except GCFError as e:
            return ("error", e.code)

    single = outcome(f"GCF profile=generic\nv={tok}\n")
    rows = "".join(f"{i}|{tok}\n" for i in range(12))
    table = outcome(f"GCF profile=generic\n## t [12]{{i,v}}\n{rows}")
    if single[0] == "error":
        assert table == single
    else:
        assert table[0] == "ok"
        cells = [row["v"] for row in table[1]["t"]]
        want = single[1]["v"]
        assert all(type(c) is type(want) and c == want for c in cells), (cells[:2], want)


@pytest.mark.parametrize("tok", EDGE_TOKENS)
def test_the_pure_python_number_scanner_agrees(tok: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without json's C accelerator the decoder scans numbers with an ASCII-only pattern
    (§2.3); it must decode every token exactly as the C scanner path does."""
    from gcfkit.generic import scan

    wire = f"GCF profile=generic\nv={tok}\n## t [9]{{v}}\n" + f"{tok}\n" * 9

    def outcome() -> Any:
        try:
            return ("ok", loads(wire))
        except GCFError as e:
            return ("error", e.code)

    with_c = outcome()
    monkeypatch.setattr(scan, "DEFAULT_NUMBERS", scan.Numbers(accelerated=False))
    assert repr(outcome()) == repr(with_c)


# ---------------------------------------------------------------------------------------
# parse_float
# ---------------------------------------------------------------------------------------


def test_parse_float_sees_every_double_on_every_path() -> None:
    from decimal import Decimal

    rows = "".join(f"{i}|{i}.10|1e-{i + 1}\n" for i in range(12))  # a batch: the column scan
    wire = (
        H
        + "a=0.1000000000000000055511151231257827\nb=7\nc=1.50\nl[3]: 2.50,3,-0.0\n"
        + f"## t [12]{{i,x,y}}\n{rows}## s [2]{{x}}\n1.25\n2\n"
    )
    value = loads(wire, parse_float=Decimal)
    assert value["a"] == Decimal("0.1000000000000000055511151231257827")
    assert type(value["b"]) is int and value["c"] == Decimal("1.50")
    assert value["l"] == [Decimal("2.50"), 3, Decimal("-0.0")]
    assert all(type(r["i"]) is int and type(r["x"]) is Decimal for r in value["t"])
    assert value["t"][3]["x"] == Decimal("3.10") and value["t"][3]["y"] == Decimal("1e-4")
    assert value["s"] == [{"x": Decimal("1.25")}, {"x": 2}]
    # The same values as floats without the hook, and the fast paths read them alike.
    from tests.codec_support import general, outcome

    def with_decimal(text: str) -> Any:
        return loads(text, parse_float=Decimal)

    assert outcome(with_decimal, wire) == general(with_decimal, wire)
    assert loads(wire)["c"] == 1.5


@pytest.mark.parametrize("tok", ["1e999", "-1e999", "1.5e400"])
def test_parse_float_never_sees_an_out_of_range_double(tok: str) -> None:
    seen: list[str] = []

    def hook(text: str) -> float:
        seen.append(text)
        return float(text)

    for wire in (H + f"v={tok}\n", H + "## t [9]{v}\n" + f"{tok}\n" * 9):
        with pytest.raises(GCFError) as info:
            loads(wire, parse_float=hook)
        assert info.value.code == "out_of_range"
    assert tok not in seen
