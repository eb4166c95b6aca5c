"""The lexical rules of gcfkit.grammar: each against its production, fast variants against
the rule they are derived from."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gcfkit import grammar

_SETTINGS = settings(max_examples=400, derandomize=True, database=None, deadline=None)
_ascii = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=8)
_numberish = st.text(alphabet="-+0123456789.eE ٥", max_size=8)


def _json_number(s: str) -> bool:
    """RFC 8259's number, as json reads it (its C scanner takes ASCII digits only)."""
    if not s or s.strip() != s or s[0] not in "-0123456789":
        return False
    try:
        value, end = json.JSONDecoder().raw_decode(s)
    except ValueError:
        return False
    # json's scanner also takes -Infinity, which is no JSON number (1e999 is one, out of
    # range: that is the numeric domain's concern, §2.3.2, not the grammar's).
    return end == len(s) and type(value) in (int, float) and "Infinity" not in s


@_SETTINGS
@given(st.one_of(_numberish, _ascii, st.sampled_from(["-Infinity", "NaN", "1e999", "-0.0"])))
def test_number_is_json_number(s: str) -> None:
    whole = grammar.NUMBER_RE.match(s) is not None
    assert whole == _json_number(s), s
    prefix = grammar.NUMBER_PREFIX.match(s)
    assert whole == (prefix is not None and prefix.end() == len(s))
    assert grammar.NUMBER_CELL.match(f" \t{s} ") is not None or not whole
    if whole:
        assert grammar.NUMBER_LIST_TEXT.fullmatch(f"{s}, {s}") is not None
        assert s[0] in grammar.NUMBER_FIRST


def test_number_groups_tell_doubles() -> None:
    for text, double in (("12", False), ("-0", False), ("1.5", True), ("1e3", True)):
        m = grammar.NUMBER_RE.match(text)
        assert m is not None and (m.lastindex is not None) == double


@_SETTINGS
@given(st.one_of(_ascii, st.text(max_size=6)))
def test_bare_key_is_an_ascii_identifier(s: str) -> None:
    # The decoder's hot loop tests bare keys with str methods instead of the regex.
    assert (grammar.BARE_KEY_RE.match(s) is not None) == (s.isidentifier() and s.isascii())
    m = grammar.BARE_KEY_AT.match(s)
    assert (m is not None and m.end() == len(s)) == (grammar.BARE_KEY_RE.match(s) is not None)


def test_counts() -> None:
    assert re.fullmatch(grammar.COUNT, "0") and re.fullmatch(grammar.COUNT, "120")
    assert not re.fullmatch(grammar.COUNT, "012")
    assert grammar.COUNT_10_RE.match("9999999999") and not grammar.COUNT_10_RE.match("1" * 11)
    assert grammar.COUNT_OR_DEFERRED.match("?") and not grammar.COUNT_OR_DEFERRED.match("01")
    m = grammar.PLAIN_BRACKET.match("[123:]")
    assert m is not None and m.groups() == ("123", ":")
    assert grammar.PLAIN_BRACKET.match("[1000000000]") is None  # left to the full check
    m = grammar.ITEM_ID.match("@17 x")
    assert m is not None and m.group(1) == "17" and grammar.ITEM_ID.match("@07 x") is None


def test_header_value_and_graph_fields_are_one_production() -> None:
    assert grammar.HEADER_VALUE_RE.match("sha256:ab~!")
    for bad in ("", "a b", "a\tb", "é", "\x7f"):
        assert grammar.HEADER_VALUE_RE.match(bad) is None, bad


def test_surrogate_class() -> None:
    assert grammar.SURROGATE.search("a\ud800") and grammar.SURROGATE.search("\udfff")
    assert grammar.SURROGATE.search("\U0001f600") is None


def test_line_shapes() -> None:
    kv = grammar.KV_LINE.match("name=Ada Lovelace")
    assert kv is not None and kv.groups() == ("name", "Ada Lovelace")
    m = grammar.MEMBER_LINE.match("tags[2]: a,b")
    assert m is not None and m.lastindex == 3 and m.group(1, 2, 3) == ("tags", "2", " a,b")
    m = grammar.MEMBER_LINE.match("## cfg")
    assert m is not None and m.lastindex == 4
    m = grammar.MEMBER_LINE.match("## rows [2]{a}")
    assert m is not None and m.lastindex == 5
    q = grammar.QUICK_ATTACHMENT.match(".items [3]")
    assert q is not None and q.groups() == ("items", "3", None, None)
    q = grammar.QUICK_ATTACHMENT.match(".o {}")
    assert q is not None and q.groups() == ("o", None, None, None)
    assert grammar.is_comment("# x") and not grammar.is_comment("#x")


def test_quoted_string_and_escape() -> None:
    m = grammar.QUOTED_STRING.match('"a\\"b"|c')
    assert m is not None and m.group(1) == 'a\\"b' and m.end() == 6
    assert grammar.QUOTED_STRING.match('"a\x01"') is None  # controls must be escaped
    e = grammar.ESCAPE.search("\\u00e9")
    assert e is not None and e.group(1) == "00e9"


@_SETTINGS
@given(st.one_of(_ascii, st.text(max_size=6), st.text(alphabet="$%ab1 ", max_size=4)))
def test_dense_rules(s: str) -> None:
    # The dense fast path is SAFE_BARE without a leading reference sigil (dense.md D4.3).
    dense_bare = grammar.DENSE_SAFE_BARE.match(s) is not None
    assert dense_bare == (grammar.SAFE_BARE.match(s) is not None and not s.startswith("$"))
    assert grammar.BARE_FIRST - {"$"} == grammar.DENSE_BARE_FIRST
    # A reference is the sigil and one or more name characters, nothing else (D4.1).
    name = s[1:]
    is_ref = (
        s[:1] == "$" and bool(name) and all(c.isascii() and (c.isalnum() or c == "_") for c in name)
    )
    assert (grammar.REFERENCE.match(s) is not None) == is_ref


def test_list_head() -> None:
    for text, inner in (("[2]: a,b", "2"), ("[0]:", "0"), ("[?]: x", "?"), ("[01]:", "01")):
        m = grammar.LIST_HEAD.match(text)
        assert m is not None and m.group(1) == inner
    assert grammar.LIST_HEAD.match("[2] a") is None and grammar.LIST_HEAD.match("x[2]:") is None
    # A cell ends at '|': the head of the next cell is not this one's.
    assert grammar.LIST_HEAD.match('[2: "x|y",z|2|[1]: w') is None
