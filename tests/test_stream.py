"""GenericStreamEncoder (spec §8): exact wire, strict decode, refusals, O(1) rows."""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import pytest

from gcfkit.errors import GCFError
from gcfkit.generic.decoder import loads
from gcfkit.stream import GenericStreamEncoder

from .conformance import strict_equal

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure


class Sink:
    """A writer that keeps what it is given."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def __call__(self, s: str) -> None:
        assert s.endswith("\n")
        self.parts.append(s)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def stream() -> tuple[GenericStreamEncoder, Sink]:
    sink = Sink()
    return GenericStreamEncoder(sink), sink


def test_every_section_kind_decodes() -> None:
    enc, sink = stream()
    enc.field("title", "report")
    enc.field("meta", {"a": [1, 2], "b": {"c": None}})
    enc.open_table("rows", ["id", "a,b", "x|y", ""])
    enc.row({"id": 1, "a,b": "p|q", "x|y": None, "": True})
    enc.row({"id": 2})
    enc.open_section("inner")
    enc.field("n", 1.5)
    enc.open_keyed("servers", ["cpu", "key"])
    enc.member("web-01", {"cpu": 3, "key": "k"})
    enc.member("true", {"cpu": 4})
    enc.end()  # closes the keyed map and returns to "inner"
    enc.field("after", "-")
    enc.end()
    enc.open_items("mixed")
    enc.item("s")
    enc.item([{"a": 1}, {"a": 2}])
    enc.item({"k": {"m1": {"v": 1}, "m2": {"v": 2}}})
    enc.close()
    assert sink.text == (
        "GCF profile=generic\n"
        "title=report\n"
        "## meta\n"
        "  a[2]: 1,2\n"
        "  ## b\n"
        "    c=-\n"
        '## rows [?]{id,"a,b","x|y",""}\n'
        '1|"p|q"|-|true\n'
        "2|~|~|~\n"
        "## inner\n"
        "  n=1.5\n"
        "  ## servers [?:]{_key,cpu,key}\n"
        "  web-01|3|k\n"
        '  "true"|4|~\n'
        '  after="-"\n'
        "## mixed [?]\n"
        "@0 =s\n"
        "@1 [2]{a}\n"
        "  1\n"
        "  2\n"
        "@2 {}\n"
        "  ## k [2:]{key,v}\n"
        "  m1|1\n"
        "  m2|2\n"
        "##! summary counts=2,2,3\n"
    )
    expected = {
        "title": "report",
        "meta": {"a": [1, 2], "b": {"c": None}},
        "rows": [{"id": 1, "a,b": "p|q", "x|y": None, "": True}, {"id": 2}],
        "inner": {
            "n": 1.5,
            "servers": {"web-01": {"cpu": 3, "key": "k"}, "true": {"cpu": 4}},
            "after": "-",
        },
        "mixed": ["s", [{"a": 1}, {"a": 2}], {"k": {"m1": {"v": 1}, "m2": {"v": 2}}}],
    }
    assert strict_equal(loads(sink.text), expected)


@pytest.mark.parametrize("kind", ["table", "keyed", "items"])
def test_anonymous_root_sections(kind: str) -> None:
    enc, sink = stream()
    if kind == "table":
        enc.open_table(None, ["id"])
        enc.row({"id": 1})
        value: Any = [{"id": 1}]
    elif kind == "keyed":
        enc.open_keyed(None, ["id"])
        enc.member("a", {"id": 1})
        value = {"a": {"id": 1}}
    else:
        enc.open_items(None)
        enc.item(None)
        value = [None]
    with pytest.raises(GCFError) as e:
        enc.field("x", 1)
    assert e.value.code == "invalid_stream_call"
    enc.close()
    assert sink.parts[1].startswith("## [?")
    assert sink.parts[-1] == "##! summary counts=1\n"
    assert strict_equal(loads(sink.text), value)


def test_anonymous_root_must_be_alone() -> None:
    enc, _ = stream()
    enc.field("x", 1)
    with pytest.raises(GCFError) as e:
        enc.open_table(None, ["a"])
    assert e.value.code == "invalid_stream_call"


def test_empty_sections_need_no_deferred_count() -> None:
    enc, sink = stream()
    enc.open_table("t", ["a"])
    enc.open_keyed("k", ["a"])
    enc.open_items("i")
    enc.open_section("s")
    enc.end()
    enc.open_keyed("k2", ["a"])
    enc.member("m", {"a": 1})
    enc.close()
    assert sink.text == (
        "GCF profile=generic\n## t [0]\n## k\n## i [0]\n## s\n"
        "## k2 [?:]{key,a}\nm|1\n##! summary counts=1\n"
    )
    assert loads(sink.text) == {"t": [], "k": {}, "i": [], "s": {}, "k2": {"m": {"a": 1}}}
    enc, sink = stream()
    enc.open_keyed(None, ["a"])
    enc.close()
    assert sink.text == "GCF profile=generic\n##! summary\n"
    assert loads(sink.text) == {}


def test_tool_header_and_context_manager() -> None:
    sink = Sink()
    with GenericStreamEncoder(sink, tool="db_query") as enc:
        enc.field("a", 1)
    assert sink.text == "GCF profile=generic tool=db_query\na=1\n##! summary\n"
    enc.close()  # idempotent
    assert sink.text.count("##!") == 1
    sink = Sink()
    with pytest.raises(RuntimeError), GenericStreamEncoder(sink) as enc:
        raise RuntimeError("producer failed")
    assert "##!" not in sink.text  # a failed stream is not sealed as complete


# ---------------------------------------------------------------------------------------
# Refusals: never drop data, never write half a row
# ---------------------------------------------------------------------------------------


def _fails(code: str, call: Any, *args: Any) -> None:
    with pytest.raises(GCFError) as e:
        call(*args)
    assert e.value.code == code


def test_header_refusals() -> None:
    enc, sink = stream()
    _fails("unsupported_type", enc.open_table, "t", ["a>b"])
    _fails("unsupported_type", enc.open_keyed, "t", ["x", "p>q"])
    _fails("duplicate_field_name", enc.open_table, "t", ["a", "a"])
    _fails("invalid_stream_call", enc.open_table, "t", [])
    _fails("unsupported_type", enc.open_table, "t", "ab")
    _fails("unsupported_type", enc.open_table, "t", ["a", 1])
    assert sink.text == "GCF profile=generic\n"


def test_row_refusals_write_nothing() -> None:
    enc, sink = stream()
    enc.open_table("t", ["a", "b"])
    enc.row({"a": 1})
    before = sink.text
    _fails("undeclared_field", enc.row, {"a": 1, "c": 2})
    _fails("undeclared_field", enc.row, {"c": "~"})
    _fails("unsupported_type", enc.row, {"a": [1]})
    _fails("unsupported_type", enc.row, {"b": {"x": 1}})
    _fails("unsupported_type", enc.row, [1, 2])
    _fails("unsupported_type", enc.row, {"a": {1, 2}})
    _fails("out_of_range", enc.row, {"a": float("nan")})
    _fails("invalid_surrogate", enc.row, {"a": "\ud800"})
    assert sink.text == before
    enc.row({"a": "~", "b": "c"})
    enc.close()
    assert loads(sink.text) == {"t": [{"a": 1}, {"a": "~", "b": "c"}]}


def test_keyed_and_object_key_refusals() -> None:
    enc, _ = stream()
    enc.field("a", 1)
    _fails("duplicate_key", enc.field, "a", 2)
    _fails("duplicate_key", enc.open_section, "a")
    _fails("unsupported_type", enc.field, 3, 1)
    _fails("unsupported_type", enc.field, "bad", {1, 2})
    enc.field("bad", 1)  # the failed call did not claim the key
    enc.open_keyed("k", ["v"])
    enc.member("m", {"v": 1})
    _fails("duplicate_key", enc.member, "m", {"v": 2})
    _fails("unsupported_type", enc.member, 5, {"v": 2})
    _fails("undeclared_field", enc.member, "n", {"w": 2})


def test_state_refusals() -> None:
    enc, _ = stream()
    _fails("invalid_stream_call", enc.row, {"a": 1})
    _fails("invalid_stream_call", enc.member, "k", {"a": 1})
    _fails("invalid_stream_call", enc.item, 1)
    _fails("invalid_stream_call", enc.end)
    enc.open_table("t", ["a"])
    _fails("invalid_stream_call", enc.item, 1)
    enc.close()
    _fails("invalid_stream_call", enc.field, "x", 1)
    _fails("invalid_stream_call", enc.row, {"a": 1})
    _fails("invalid_stream_call", enc.end)


def test_section_depth_is_bounded() -> None:
    enc, _ = stream()
    with pytest.raises(GCFError) as e:
        for i in range(10_000):
            enc.open_section(f"s{i}")
    assert e.value.code == "limit_exceeded"


# ---------------------------------------------------------------------------------------
# O(1) memory per row
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rows_stream_in_constant_memory() -> None:
    written = [0]

    def count(s: str) -> None:
        written[0] += len(s)

    enc = GenericStreamEncoder(count)
    enc.open_table("rows", ["id", "name", "note"])
    row = {"id": "r1", "name": "n"}
    tracemalloc.start()
    try:
        for _ in itertools.repeat(None, 1_000):
            enc.row(row)
        _, early_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in itertools.repeat(None, 99_000):
            enc.row(row)
        _, late_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    enc.close()
    # 100x the rows, and the peak is the same few kilobytes (slack for interpreter noise):
    # a byte kept per row would be 99 KB by the end.
    assert late_peak < early_peak + 4096
    assert written[0] == len("GCF profile=generic\n## rows [?]{id,name,note}\n") + 100_000 * len(
        "r1|n|~\n"
    ) + len("##! summary counts=100000\n")


def test_bad_member_key_leaves_no_trace() -> None:
    enc, sink = stream()
    enc.open_keyed("k", ["v"])
    _fails("invalid_surrogate", enc.member, "\ud800", {"v": 1})
    assert sink.text == "GCF profile=generic\n"
    enc.member("ok", {"v": 1})
    enc.close()
    assert loads(sink.text) == {"k": {"ok": {"v": 1}}}


def test_item_depth_counts_every_container() -> None:
    from gcfkit.generic.encoder import MAX_DEPTH

    def nest(n: int) -> Any:
        v: Any = 0
        for _ in range(n):
            v = [v]
        return v

    enc, sink = stream()
    enc.open_items(None)  # the root array is level 1
    enc.item(nest(MAX_DEPTH - 1))
    enc.close()
    assert loads(sink.text) == [nest(MAX_DEPTH - 1)]
    enc, sink = stream()
    enc.open_items("x")  # the root object is level 1, the array level 2
    _fails("limit_exceeded", enc.item, nest(MAX_DEPTH - 1))
    enc.item(nest(MAX_DEPTH - 2))
