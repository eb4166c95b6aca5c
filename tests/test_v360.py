"""The reference's v3.6.0 table forms against the reference itself (gcf-python >= 2.8).

gcfkit reads what gcf-python writes (constant columns by default, value grouping on
request) and, with ``spec="3.6.0"``, writes it byte for byte: over every JSON value of
../shared/corpus, every (key, grouping column) pair of its arrays of objects that the
reference groups, and generated values. The fixtures (tests/fixtures/v360) pin the forms
and the errors for malformed ones.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gcfkit
from gcfkit import GCFDecodeError, GCFEncodeError, GCFError
from gcfkit.generic import v360
from gcfkit.header import DENSE_MAGIC
from tests.codec_support import PROPERTY_SETTINGS, documents, same, wire_order
from tests.conformance import CORPUS_DIR

gcf = pytest.importorskip("gcf")

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "v360"
FIXTURES = [
    (p.relative_to(FIXTURE_DIR).as_posix(), json.loads(p.read_text(encoding="utf-8")))
    for p in sorted(FIXTURE_DIR.rglob("*.json"))
]


def corpus_values() -> list[tuple[str, Any]]:
    """Every distinct JSON value of ../shared/corpus: the toon files, and each JSON text
    block and structuredContent of the MCP results."""
    found: dict[str, tuple[str, Any]] = {}
    for p in sorted((CORPUS_DIR / "toon").glob("*.json")):
        v = json.loads(p.read_text(encoding="utf-8"))
        found.setdefault(json.dumps(v), (p.name, v))
    for p in sorted((CORPUS_DIR / "mcp").glob("*/[0-9]*.json")):
        result = json.loads(p.read_text(encoding="utf-8")).get("result") or {}
        name = f"{p.parent.name}/{p.name}"
        values = []
        for block in result.get("content", []):
            try:
                values.append(json.loads(block.get("text", "")))
            except ValueError:
                continue
        if "structuredContent" in result:
            values.append(result["structuredContent"])
        for v in values:
            found.setdefault(json.dumps(v), (name, v))
    return list(found.values())


CORPUS = corpus_values()


def record_arrays(v: Any) -> Iterator[list[dict[str, Any]]]:
    """Every non-empty array of objects in ``v``."""
    if isinstance(v, list):
        if v and all(isinstance(x, dict) for x in v):
            yield v
        for x in v:
            yield from record_arrays(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from record_arrays(x)


def grouped(rows: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """``rows`` in the order a grouped table gives them back: by first appearance of their
    value in ``column``, stably."""
    first: dict[tuple[type, Any], int] = {}
    for r in rows:
        first.setdefault((type(r[column]), r[column]), len(first))
    return sorted(rows, key=lambda r: first[(type(r[column]), r[column])])


def check_reads(wire: str, value: Any) -> None:
    """gcfkit reads the reference's ``wire`` of ``value`` losslessly, as the reference
    reads it, through ``loads`` (the C accelerator first) and ``decode``."""
    got = gcfkit.decode(wire)
    assert same(got, wire_order(value)), wire
    assert same(gcfkit.loads(wire), got)
    ref = gcf.decode_generic(wire)
    if same(ref, wire_order(value)):
        assert same(got, ref)


def test_the_corpus_has_the_values_the_issue_counts() -> None:
    assert len(CORPUS) >= 54
    factored = [n for n, v in CORPUS if "=" in gcf.encode_generic(v).split("\n", 2)[1]]
    assert factored, "some corpus value has a constant column in its first table"


@pytest.mark.parametrize("name,value", CORPUS, ids=[n for n, _ in CORPUS])
def test_every_corpus_value_as_the_reference_writes_it(name: str, value: Any) -> None:
    wire = gcf.encode_generic(value)
    check_reads(wire, value)
    assert gcfkit.dumps(value, spec="3.6.0") == wire
    # Canonical output stays v3.5.3.
    plain = gcfkit.dumps(value)
    assert gcfkit.loads(plain, spec="3.5.3") == gcfkit.loads(plain)
    if plain != wire:
        with pytest.raises(GCFDecodeError) as err:
            gcfkit.loads(wire, spec="3.5.3")
        assert err.value.code == "invalid_line"


def _group_pairs() -> Iterator[tuple[str, list[dict[str, Any]], str, str]]:
    for name, value in CORPUS:
        for rows in record_arrays(value):
            fields = list(dict.fromkeys(f for r in rows for f in r))
            for key, column in itertools.permutations(fields, 2):
                yield name, rows, key, column


def test_every_corpus_array_grouped_as_the_reference_groups_it() -> None:
    checked = refused = 0
    for name, rows, key, column in _group_pairs():
        try:
            wire = gcf.encode_generic_grouped(rows, key, column)
        except ValueError:
            # What the reference refuses, gcfkit refuses too.
            with pytest.raises(GCFEncodeError):
                gcfkit.dumps(rows, spec="3.6.0", group_by=(key, column))
            refused += 1
            continue
        where = f"{name} key={key} group={column}"
        assert gcfkit.dumps(rows, spec="3.6.0", group_by=(key, column)) == wire, where
        got = gcfkit.decode(wire)
        assert same(got, gcf.decode_generic(wire)), where
        assert json.dumps(got, sort_keys=True) == json.dumps(grouped(rows, column), sort_keys=True)
        checked += 1
    assert checked > 1000 and refused > 0, (checked, refused)


# -- generated values -------------------------------------------------------------------

_cell = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-2, 2, allow_nan=False),
    st.sampled_from(["a", "b", "$x", "^{x", "}", "a,b", "", "-", "~", "x y", "[1]: x"]),
)
_names = st.sampled_from(["id", "v", "k", "c", "x y", '"q"'])
_flat_rows = st.lists(
    st.dictionaries(st.sampled_from(["id", "v", "x y"]), _cell, min_size=1, max_size=3),
    max_size=4,
)
# Tables whose columns are often constant: a few fixed cells, the rest varying; a cell is
# a scalar, a list of scalars or a table of its own.
_const_tables = st.builds(
    lambda fixed, rows: [{**fixed, **r} if i % 2 else {**r, **fixed} for i, r in enumerate(rows)],
    st.dictionaries(_names, _cell, max_size=3),
    st.lists(
        st.dictionaries(
            _names,
            st.one_of(_cell, st.lists(_cell, max_size=2), _flat_rows),
            min_size=1,
            max_size=3,
        ),
        max_size=5,
    ),
)
# Values around such tables (objects, arrays, sections at any depth). The reference and
# gcfkit write some v3.5.3 forms differently (nested objects whose leaves are all null,
# a row's empty object beside a shared array schema, a '>' field in an attachment table);
# those differences are v3.5.3's and stay out of these values.
_generated = st.recursive(
    st.one_of(_const_tables, _cell),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(_names, c, max_size=3)),
    max_leaves=6,
)


@settings(max_examples=400, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(_generated)
def test_generated_values_as_the_reference_writes_them(value: Any) -> None:
    wire = gcf.encode_generic(value)
    check_reads(wire, value)
    assert gcfkit.dumps(value, spec="3.6.0") == wire


@settings(max_examples=400, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(documents)
def test_gcfkit_reads_what_it_writes_as_v360(value: Any) -> None:
    wire = gcfkit.dumps(value, spec="3.6.0")
    assert same(gcfkit.loads(wire), wire_order(value)), wire
    assert same(gcfkit.loads(gcfkit.dumps(value), spec="3.5.3"), gcfkit.loads(wire))


_records = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 30), "g": _cell}, optional={"v": _cell, "w": _cell}
    ),
    min_size=1,
    max_size=8,
    unique_by=lambda r: r["id"],
)


@settings(max_examples=300, **PROPERTY_SETTINGS)  # type: ignore[arg-type]
@given(_records, st.sampled_from(["g", "v", "w"]))
def test_generated_groupings_as_the_reference_writes_them(
    rows: list[dict[str, Any]], column: str
) -> None:
    if any(column not in r for r in rows):
        # The reference groups such a row under null and reads null back; gcfkit refuses.
        with pytest.raises(GCFEncodeError):
            gcfkit.dumps(rows, spec="3.6.0", group_by=("id", column))
        return
    wire = gcf.encode_generic_grouped(rows, "id", column)
    assert gcfkit.dumps(rows, spec="3.6.0", group_by=("id", column)) == wire
    got = gcfkit.decode(wire)
    assert same(got, gcf.decode_generic(wire))
    assert same(got, wire_order(grouped(rows, column))) or json.dumps(
        got, sort_keys=True
    ) == json.dumps(grouped(rows, column), sort_keys=True)


# -- fixtures ---------------------------------------------------------------------------


@pytest.mark.parametrize("path,fx", FIXTURES, ids=[p for p, _ in FIXTURES])
def test_fixture(path: str, fx: dict[str, Any]) -> None:
    op = fx["operation"]
    if op == "decode":
        assert same(gcfkit.decode(fx["input"]), fx["expected"]), path
        assert same(gcf.decode_generic(fx["input"]), fx["expected"]), path
        with pytest.raises(GCFDecodeError):
            gcfkit.loads(fx["input"], spec="3.5.3")
    elif op == "encode":
        opts = fx.get("options", {})
        group = opts.get("group_by")
        by = None if group is None else (group[0], group[1])
        assert gcfkit.dumps(fx["input"], spec="3.6.0", group_by=by) == fx["expected"], path
        ref = (
            gcf.encode_generic(fx["input"])
            if by is None
            else gcf.encode_generic_grouped(fx["input"], *by)
        )
        assert ref == fx["expected"], f"{path}: the reference writes {ref!r}"
    else:
        assert op == "error", path
        with pytest.raises(GCFDecodeError) as err:
            gcfkit.decode(fx["input"])
        e = err.value
        got = {"code": e.code, "line": e.lineno, "column": e.colno}
        assert got == fx["expectedError"], f"{path}: {e}"
        # The reference rejects it too (its message names no line), unless the fixture
        # says where gcfkit is stricter than the reference reads.
        if not fx.get("referenceAccepts"):
            with pytest.raises(ValueError):
                gcf.decode_generic(fx["input"])


def test_the_fixtures_cover_each_form_and_error() -> None:
    ops = {fx["operation"] for _, fx in FIXTURES}
    assert ops == {"decode", "encode", "error"}
    codes = {fx["expectedError"]["code"] for _, fx in FIXTURES if fx["operation"] == "error"}
    assert {"invalid_constant", "invalid_group", "count_mismatch", "duplicate_key"} <= codes


# -- options ----------------------------------------------------------------------------


def test_spec_must_name_a_version() -> None:
    with pytest.raises(ValueError, match="spec must be"):
        gcfkit.loads("GCF profile=generic\n=1\n", spec="3.6")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="group_by"):
        gcfkit.dumps([{"id": 1, "g": 1}], group_by=("id", "g"))


def test_a_strict_reader_names_the_column_of_the_form_it_rejects() -> None:
    text = "GCF profile=generic\n## rows [2]{id,kind=a,s}\n1|x\n2|y\n"
    with pytest.raises(GCFDecodeError) as err:
        gcfkit.loads(text, spec="3.5.3")
    assert (err.value.code, err.value.lineno, err.value.colno) == ("invalid_line", 2, 20)
    with pytest.raises(GCFDecodeError, match="unexpected '='"):
        gcfkit.decode(text, spec="3.5.3")
    assert gcfkit.loads(text) == gcfkit.decode(text)
    grouped = "GCF profile=generic\n## [1]{@id,k} group=k\nk=a [1]\n1\n"
    with pytest.raises(GCFDecodeError) as err:
        gcfkit.loads(grouped, spec="3.5.3")
    assert (err.value.code, err.value.lineno, err.value.colno) == ("invalid_key", 2, 8)


def test_dense_keeps_its_own_constant_meaning() -> None:
    # dense.md D6: a constant is a row cell written once, so $a names a definition there;
    # in a generic payload (the reference's form) it is the literal string.
    from gcfkit import dense

    body = "## r [2]{k,v=$a}\n1\n2\n"
    assert gcfkit.loads("GCF profile=generic\n" + body)["r"][0]["v"] == "$a"
    assert dense.loads(DENSE_MAGIC + "\n$a=x y\n" + body)["r"][0]["v"] == "x y"


def test_grouping_refuses_what_it_cannot_carry() -> None:
    cases: list[tuple[list[Any], str]] = [
        ([], "a non-empty array"),
        ([{"id": 1, "g": [1]}], "scalar values only"),
        ([{"id": 1, "g": 1}, {"id": 1, "g": 2}], "unique"),
        ([{"id": None, "g": 1}], "not null"),
        ([{"id": 1}], "in every row"),
    ]
    for rows, why in cases:
        with pytest.raises(GCFEncodeError, match=why) as err:
            v360.dumps_grouped(rows, "id", "g")
        assert isinstance(err.value, GCFError) and err.value.code == "unsupported_shape"
