"""GCX1 codec: the write-up's example, the grammar's edge cases, refusals, properties."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gcfkit import gcx1
from gcfkit.errors import GCFError
from gcfkit.jsonio import same_value

# The write-up's example, verbatim (fields= before the other metadata, 5 values for 6 fields).
EXAMPLE = (
    "GCX1 tool=search_symbols fields=id,kind,name,path,line,sig rows=5 total=5 truncated=false\n"
    "internal/mcp/server.go::NewServer\tfunction\tNewServer\tinternal/mcp/server.go\t62\n"
    "internal/mcp/server.go::Server.Start\tmethod\tStart\tinternal/mcp/server.go\t118\n"
    "internal/mcp/server.go::Server.Shutdown\tmethod\tShutdown\tinternal/mcp/server.go\t140\n"
    "internal/mcp/tools_core.go::registerCoreTools\tmethod\tregisterCoreTools\t"
    "internal/mcp/tools_core.go\t307\n"
    "internal/mcp/tools_coding.go::registerCodingTools\tmethod\tregisterCodingTools\t"
    "internal/mcp/tools_coding.go\t1\n"
)
FIELDS = ["id", "kind", "name", "path", "line", "sig"]


def test_example_decodes_to_typed_rows() -> None:
    rows = gcx1.loads(EXAMPLE)
    assert len(rows) == 5
    assert rows[0] == {
        "id": "internal/mcp/server.go::NewServer",
        "kind": "function",
        "name": "NewServer",
        "path": "internal/mcp/server.go",
        "line": 62,
    }
    assert all(type(r["line"]) is int for r in rows)
    assert all("sig" not in r for r in rows)
    (section,) = gcx1.parse(EXAMPLE)
    assert section.tool == "search_symbols"
    assert section.fields == FIELDS
    assert section.meta == {"rows": 5, "total": 5, "truncated": False}


def test_example_round_trips_exactly_with_fields_last() -> None:
    head, body = EXAMPLE.split("\n", 1)
    fields_tok = "fields=" + ",".join(FIELDS)
    want = head.replace(" " + fields_tok, "") + " " + fields_tok + "\n" + body
    value = gcx1.loads(EXAMPLE)
    again = gcx1.dumps(value, tool="search_symbols", fields=FIELDS, total=5, truncated=False)
    assert again == want
    assert gcx1.dumps_sections(gcx1.parse(EXAMPLE)) == want
    assert gcx1.dumps_sections(gcx1.parse(want)) == want
    assert same_value(gcx1.loads(want), value, key_order=False, number_types=True)


def test_emitted_header_follows_grammar_order() -> None:
    text = gcx1.dumps([{"a": 1}], tool="t", total=3, truncated=True, cursor="x1")
    assert text.splitlines()[0] == "GCX1 tool=t rows=1 total=3 truncated=true cursor=x1 fields=a"
    assert gcx1.parse(text)[0].meta == {"rows": 1, "total": 3, "truncated": True, "cursor": "x1"}


def test_three_escapes() -> None:
    rows = [{"s": "tab\there", "n": "line\nbreak", "b": "back\\slash", "crlf": "a\r\nb"}]
    text = gcx1.dumps(rows, tool="t")
    body = text.split("\n", 1)[1]
    assert body == "tab\\there\tline\\nbreak\tback\\\\slash\ta\r\\nb\n"
    assert gcx1.loads(text) == rows


@pytest.mark.parametrize("bad", ["a\\x", "a\\", "\\r"])
def test_unknown_escape_is_refused(bad: str) -> None:
    with pytest.raises(GCFError) as e:
        gcx1.loads(f"GCX1 tool=t fields=a\n{bad}\n")
    assert e.value.code == "invalid_escape"
    assert e.value.line == 2


def test_types_declared_when_literal_reading_would_change_values() -> None:
    rows: list[dict[str, Any]] = [
        {"code": "007", "flag": "true", "n": 1.0, "z": -0.0, "nothing": None},
        {"code": "12", "flag": "x", "n": 2, "z": 5, "nothing": "null"},
    ]
    text = gcx1.dumps(rows, tool="t")
    assert " types=s,s,a,a,j " in text.splitlines()[0]
    back = gcx1.loads(text)
    assert same_value(back, rows, key_order=False, number_types=True)
    assert math.copysign(1.0, back[0]["z"]) == -1.0


def test_absent_fields_and_trailing_omission() -> None:
    rows: list[dict[str, Any]] = [{"a": 1, "b": 2, "c": 3}, {"a": 1}, {"c": 3}, {}]
    text = gcx1.dumps(rows, tool="t")
    assert text.split("\n")[1:] == ["1\t2\t3", "1", "\t\t3", "", ""]
    assert gcx1.loads(text) == rows


def test_absent_in_the_middle_of_a_string_column_uses_json_cells() -> None:
    rows: list[dict[str, Any]] = [{"a": "", "b": 1}, {"b": 2}]
    text = gcx1.dumps(rows, tool="t")
    assert "types=j,a" in text
    assert same_value(gcx1.loads(text), rows, key_order=False, number_types=True)


@pytest.mark.parametrize("first", ["#comment", "GCX1 tool=x fields=a", "GCX2", ""])
def test_rows_that_would_look_like_comments_or_headers(first: str) -> None:
    rows = [{"a": first, "b": "x"}, {"a": "plain", "b": "y"}]
    text = gcx1.dumps(rows, tool="t")
    assert same_value(gcx1.loads(text), rows, key_order=False, number_types=True)
    only = [{"a": first}]
    back = gcx1.loads(gcx1.dumps(only, tool="t"))
    assert same_value(back, only, key_order=False, number_types=True)


def test_comments_are_skipped() -> None:
    text = "GCX1 tool=t fields=a rows=2\n1\n# a note\n2\n"
    assert gcx1.loads(text) == [{"a": 1}, {"a": 2}]


def test_multi_section_payload() -> None:
    value = {
        "nodes": [{"id": "a", "kind": "function"}, {"id": "b", "kind": "method"}],
        "edges": [{"from": "a", "to": "b", "type": "calls"}],
    }
    text = gcx1.dumps(value, tool="get_callers")
    lines = text.splitlines()
    assert lines[0] == "GCX1 tool=get_callers section=nodes rows=2 fields=id,kind"
    assert lines[3] == "GCX1 tool=get_callers section=edges rows=1 fields=from,to,type"
    assert gcx1.loads(text) == value
    assert [s.name for s in gcx1.parse(text)] == ["nodes", "edges"]


def test_empty_table() -> None:
    text = gcx1.dumps([], tool="t")
    assert text == "GCX1 tool=t rows=0 fields=\n"
    assert gcx1.loads(text) == []


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ({"a": 1}, "unsupported_shape"),
        ([1, 2], "unsupported_shape"),
        ([{"a": {"b": 1}}], "unsupported_shape"),
        ([{"a": [1]}], "unsupported_shape"),
        ([{"a b": 1}], "unsupported_shape"),
        ([{"a,b": 1}], "unsupported_shape"),
        ([{"": 1}], "unsupported_shape"),
        ("text", "unsupported_shape"),
        ({}, "unsupported_shape"),
        ([{"a": float("nan")}], "out_of_range"),
        ([{"a": 2**64}], "out_of_range"),
        ([{"a": {1, 2}}], "unsupported_type"),
        ([{"a": "\ud800"}], "invalid_surrogate"),
    ],
)
def test_refusals(value: Any, code: str) -> None:
    with pytest.raises(GCFError) as e:
        gcx1.dumps(value, tool="t")
    assert e.value.code == code


def test_fields_argument_is_checked() -> None:
    with pytest.raises(GCFError) as e:
        gcx1.dumps([{"a": 1, "b": 2}], tool="t", fields=["a"])
    assert e.value.code == "unsupported_shape"
    with pytest.raises(GCFError) as e:
        gcx1.dumps([{"a": 1}], tool="t", fields=["a", "a"])
    assert e.value.code == "duplicate_field_name"


def test_bad_tool_name_is_refused() -> None:
    with pytest.raises(GCFError) as e:
        gcx1.dumps([{"a": 1}], tool="two words")
    assert e.value.code == "unsupported_shape"


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("", "missing_header", 1),
        ("a\tb\n", "missing_header", 1),
        ("GCX2 tool=t fields=a\n1\n", "unsupported_profile", 1),
        ("GCX1 fields=a\n", "malformed_header_field", 1),
        ("GCX1 tool=t\n", "malformed_header_field", 1),
        ("GCX1 tool=t fields=a junk\n", "malformed_header_field", 1),
        ("GCX1 tool=t tool=u fields=a\n", "duplicate_header_field", 1),
        ("GCX1 tool=t fields=a,a\n", "duplicate_field_name", 1),
        ("GCX1 tool=t fields=a rows=2\n1\n", "count_mismatch", 2),
        ("GCX1 tool=t fields=a rows=01\n1\n", "malformed_header_field", 1),
        ("GCX1 tool=t fields=a truncated=yes\n", "malformed_header_field", 1),
        ("GCX1 tool=t fields=a types=q\n", "malformed_header_field", 1),
        ("GCX1 tool=t fields=a\n1\t2\n", "row_width_mismatch", 2),
        ("GCX1 tool=t fields=a\n99999999999999999999\n", "out_of_range", 2),
        ("GCX1 tool=t fields=a types=j\n[1]\n", "invalid_line", 2),
        ("GCX1 tool=t fields=a types=j\nNaN\n", "invalid_line", 2),
        ("GCX1 tool=t fields=a\n1\nGCX1 tool=t fields=a\n2\n", "malformed_header_field", 1),
        ("GCX1 tool=t fields=a\nok\nx\ud800\n", "invalid_surrogate", 3),
    ],
)
def test_decode_errors(text: str, code: str, line: int | None) -> None:
    with pytest.raises(GCFError) as e:
        gcx1.loads(text)
    assert e.value.code == code
    assert e.value.line == line


def test_bytes_input_and_invalid_utf8() -> None:
    assert gcx1.loads(b"GCX1 tool=t fields=a\n\xc3\xa9\n") == [{"a": "é"}]
    with pytest.raises(GCFError) as e:
        gcx1.loads(b"GCX1 tool=t fields=a\n\xff\n")
    assert e.value.code == "invalid_utf8"


def test_missing_final_lf_is_tolerated() -> None:
    assert gcx1.loads("GCX1 tool=t fields=a\n1") == [{"a": 1}]


# ---------------------------------------------------------------------------------------
# Properties: every shape GCX1 can carry round-trips type-strictly, and re-encodes
# byte-identically.
# ---------------------------------------------------------------------------------------

_names = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters=" ,\t\n\r"),
    min_size=1,
    max_size=6,
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.sampled_from(["", "null", "true", "1", "-0", "1e5", "#x", "GCX1 a", "\\t", "a\tb"]),
)
_rows = st.lists(st.dictionaries(_names, _scalars, max_size=5), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_rows)
def test_property_tables_round_trip(rows: list[dict[str, Any]]) -> None:
    text = gcx1.dumps(rows, tool="prop")
    back = gcx1.loads(text)
    assert same_value(back, rows, key_order=False, number_types=True)
    assert gcx1.dumps(back, tool="prop") == text


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_names, _rows, min_size=1, max_size=3))
def test_property_sections_round_trip(value: dict[str, list[dict[str, Any]]]) -> None:
    text = gcx1.dumps(value, tool="prop", total=7)
    back = gcx1.loads(text)
    assert same_value(back, value, key_order=False, number_types=True)
    assert list(back) == list(value)
    assert all(s.meta["total"] == 7 for s in gcx1.parse(text))
