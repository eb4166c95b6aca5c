"""Errors shaped like the stdlib's: every decoder's rejection is a GCFDecodeError placed in
its text (msg, doc, pos, lineno, colno, as json.JSONDecodeError), every encoder's a
GCFEncodeError naming the value (path, as msgspec), bad settings a ConfigError."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

import gcfkit
from gcfkit import dense, gcx1, graph, keyed, relative
from gcfkit.errors import ConfigError, GCFDecodeError, GCFEncodeError, GCFError
from gcfkit.jsonio import loads_json, read_json_bytes
from gcfkit.stream import GenericStreamEncoder

G = "GCF profile=generic\n"
D = "GCF-dense\n"

# (decoder, payload, code, line, column, the text at the error's position)
_DECODE_CASES: list[tuple[Callable[[Any], Any], str | bytes, str, int, int, str]] = [
    (gcfkit.loads, G + "x=~\n", "invalid_missing", 2, 1, "x=~"),
    (gcfkit.loads, G + "  \tx=1\n", "tab_indentation", 2, 3, "\tx=1"),
    (gcfkit.loads, G + '## t [2]{a,b}\n1|"x\\q"\n2|y\n', "invalid_escape", 3, 5, "\\q"),
    (gcfkit.loads, G + 'k="abc\n', "unterminated_quote", 2, 3, '"abc'),
    (gcfkit.loads, G + "## s\n  ## t [2]{a,a}\n", "duplicate_field_name", 3, 14, "a}"),
    (gcfkit.loads, G + "## t [01]{a}\n", "invalid_count", 2, 7, "01]"),
    (gcfkit.loads, G + 'v="a"b\n', "trailing_characters", 2, 6, "b"),
    (gcfkit.loads, G + "a=1\n  b=2\n", "invalid_indent", 3, 1, "  b=2"),
    (gcfkit.loads, b"GCF profile=generic\nx=\xc3\xa9\xff\n", "invalid_utf8", 2, 4, "\ufffd"),
    (gcfkit.loads, "GCF profile=generic tool=a b=\n", "malformed_header_field", 1, 28, "b="),
    (gcfkit.decode, G + "## t [1]{a}\n1\n2\n", "count_mismatch", 4, 1, "2"),
    (graph.loads, "GCF profile=graph\n## targets\n@0 fn a 0.5 x\n", "invalid_score", 3, 9, "0.5"),
    (
        graph.loads,
        "GCF profile=graph\n## targets\n@x fn a 0.50 x\n",
        "invalid_symbol_id",
        3,
        1,
        "@x",
    ),
    (
        graph.loads_delta,
        "GCF profile=graph delta=true base_root=a new_root=b\n## bogus\n",
        "malformed_delta",
        2,
        1,
        "## bogus",
    ),
    (
        keyed.loads_delta,
        "GCF profile=generic delta=true base_root=a new_root=b key=id\n## x [1]{@id}\n1\n",
        "malformed_delta",
        2,
        1,
        "## x",
    ),
    # The dense profile's own errors, at the token that breaks D4-D6.
    (dense.loads, D + "k=$b\n", "undefined_reference", 2, 3, "$b"),
    (dense.loads, D + "## r [1]{a,b}\n1|[1]: $q\n", "undefined_reference", 3, 8, "$q"),
    (gcfkit.decode, D + "$a=12\nk=$a\n", "invalid_definition", 2, 4, "12"),
    (dense.loads, D + "## r [2]{a,b=~}\n1\n2\n", "invalid_constant", 2, 14, "~}"),
    (dense.loads, D + "## r [2]{a,b=$z}\n1\n2\n", "undefined_reference", 2, 14, "$z}"),
    (dense.loads, D + "## r [0]{a,b=$z}\n", "undefined_reference", 2, 14, "$z}"),
    (dense.loads, D + "## r [1]{a,b}\n1|[01]: x\n", "invalid_count", 3, 4, "01]"),
    (dense.loads, D + "## r [1]{a,b}\n@0 1|^{x=1,y}\n", "invalid_constant", 3, 6, "^{x=1"),
    # Relative answers (docs/extensions/relative-answers.md): the @@ line and the body.
    (gcfkit.decode, "@@ bogus tool=a since=1\n", "invalid_answer", 1, 4, "bogus"),
    (relative.loads, "@@ unchanged tool=t since=a+b\n", "invalid_answer", 1, 21, "since=a+b"),
    (relative.loads, "@@ edit tool=t since=1 lines=01\n", "invalid_answer", 1, 24, "lines=01"),
    (
        relative.loads,
        '@@ patch tool=t since=1\n## [1]{op,path}\ndel|"a\n',
        "unterminated_quote",
        3,
        5,
        '"a',
    ),
    (relative.loads, "@@ edit tool=t since=1 lines=1\nbogus\n", "invalid_edit", 2, 1, "bogus"),
    (gcx1.loads, "GCX1 tool=t fields=a\n1\t2\n", "row_width_mismatch", 2, 1, "1\t2"),
    (loads_json, '{"a": [1, 2,]}', "invalid_json", 1, 13, "]}"),
    (read_json_bytes, b'{"a": "\xff"}', "invalid_utf8", 1, 8, "\ufffd"),
]


@pytest.mark.parametrize(
    ("decode", "payload", "code", "lineno", "colno", "at"),
    _DECODE_CASES,
    ids=[f"{d.__module__}.{d.__name__}:{c}" for d, _, c, *_ in _DECODE_CASES],
)
def test_decode_errors_are_placed_in_their_text(
    decode: Callable[[Any], Any], payload: str | bytes, code: str, lineno: int, colno: int, at: str
) -> None:
    with pytest.raises(GCFDecodeError) as info:
        decode(payload)
    e = info.value
    assert (e.code, e.lineno, e.line, e.colno) == (code, lineno, lineno, colno)
    text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
    assert e.doc == text
    assert e.doc[e.pos :].startswith(at)
    # The message is the unformatted part of str(e), as json's msg is.
    assert str(e) == f"error[{code}] line {lineno}: {e.msg}"


def test_a_decode_error_pickles_with_its_place() -> None:
    with pytest.raises(GCFDecodeError) as info:
        gcfkit.loads(G + '## t [2]{a}\n"x\n')
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is GCFDecodeError
    assert (back.code, back.lineno, back.colno, back.pos, back.doc, str(back)) == (
        info.value.code,
        info.value.lineno,
        info.value.colno,
        info.value.pos,
        info.value.doc,
        str(info.value),
    )


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [{"b": 2**70}]}, "$.a[0].b"),
        ([1, {"groups": [0, 2**70]}], "$[1].groups[1]"),
        ({"users": [{"id": 1}, {"id": 2}, {"id": 2**64}]}, "$.users[2].id"),
        ({"users": [{"id": 1, "t": [1]}, {"id": float("nan"), "t": [2]}]}, "$.users[1].id"),
        ({"m": {"x": {"v": 1}, "y": {"v": float("inf")}}}, "$.m.y.v"),  # a keyed map
        ({"t": [{"o": {"p": 1, "q": 2**70}}, {"o": {"p": 1, "q": 2}}]}, "$.t[0].o.q"),  # flat
        ({"t": [{"a": 1, "b": [{"c": 2**70}]}]}, "$.t[0].b[0].c"),  # an attachment
        ({"a": {"b": [[1, [2, {1, 2}]]]}}, "$.a.b[0][1][1]"),
        ({"content-type": "\ud800"}, '$["content-type"]'),
        (2**70, "$"),
    ],
)
def test_encode_errors_name_the_value(value: Any, path: str) -> None:
    with pytest.raises(GCFEncodeError) as info:
        gcfkit.dumps(value)
    assert info.value.path == path
    assert info.value.line is None
    where = "" if path == "$" else f" at {path}"
    assert str(info.value).startswith(f"error[{info.value.code}]{where}: ")


def test_a_bad_key_is_the_error_of_its_object() -> None:
    with pytest.raises(GCFEncodeError) as info:
        gcfkit.dumps({"a": {1: "x"}})
    assert (info.value.code, info.value.path) == ("unsupported_type", "$.a")


def test_default_converts_and_its_result_is_checked_too() -> None:
    assert gcfkit.loads(gcfkit.dumps({"s": {3, 1}}, default=sorted)) == {"s": [1, 3]}
    with pytest.raises(GCFEncodeError) as info:
        gcfkit.dumps({"a": [object()]}, default=lambda o: o)  # gives the value back
    assert (info.value.code, info.value.path) == ("unsupported_type", "$.a[0]")
    with pytest.raises(GCFEncodeError) as info:
        gcfkit.dumps({"a": [{1, 2**70}]}, default=sorted)
    assert info.value.path == "$.a[0][1]"


def test_stream_errors_name_their_section_and_row() -> None:
    enc = GenericStreamEncoder(lambda _: None)
    enc.open_section("cfg")
    with pytest.raises(GCFEncodeError) as info:
        enc.field("x", {"y": [1, 2**70]})
    assert info.value.path == "$.cfg.x.y[1]"
    enc.open_table("rows", ["id"])
    enc.row({"id": 1})
    with pytest.raises(GCFEncodeError) as info:
        enc.row({"id": 2**70})
    assert info.value.path == "$.cfg.rows[1].id"


def test_graph_and_keyed_encode_errors_name_the_item() -> None:
    ok, bad_name = graph.Symbol("ok", "function", 0.5, "lsp"), graph.Symbol("a b", "function")
    bad = graph.Graph([ok, bad_name])
    with pytest.raises(GCFEncodeError) as info:
        graph.dumps(bad)
    assert (info.value.code, info.value.path) == ("invalid_graph", "$.symbols[1]")
    with pytest.raises(GCFEncodeError) as info:
        keyed.dumps_delta(keyed.GenericDelta("id", ["id"], "a b", "x"))
    assert info.value.code == "malformed_header_field"


def _sym(name: str) -> graph.Symbol:
    return graph.Symbol(name, "function", 0.5, "lsp")


def _stream_symbol(s: graph.Symbol) -> None:
    enc = graph.GraphStreamEncoder(lambda _: None)
    enc.add_symbol(_sym("ok"))
    enc.add_symbol(s)


def _stream_edge(e: graph.Edge) -> None:
    enc = graph.GraphStreamEncoder(lambda _: None)
    enc.add_symbol(_sym("ok"))
    enc.add_edge(graph.Edge("ok", "ok", "calls"))
    enc.add_edge(e)


_ROWS = ["id", "v"]

# (what is encoded or built, the code, the path of the bad item)
_ITEM_CASES: list[tuple[Callable[[], Any], str, str]] = [
    (lambda: _stream_symbol(_sym("a b")), "invalid_graph", "$.symbols[1]"),
    (
        lambda: _stream_edge(graph.Edge("ok", "nowhere", "calls")),
        "unknown_edge_reference",
        "$.edges[1]",
    ),
    (
        lambda: graph.dumps_delta(graph.GraphDelta("a", "b", added=[_sym("x"), _sym("a b")])),
        "invalid_graph",
        "$.added[1]",
    ),
    (
        lambda: graph.dumps_delta(
            graph.GraphDelta("a", "b", removed_edges=[graph.Edge("a", "b c", "calls")])
        ),
        "invalid_graph",
        "$.removed_edges[0]",
    ),
    (
        lambda: keyed.KeyedSet("id", _ROWS, [{"id": 1}, {"id": 2, "v": 2**70}]),
        "out_of_range",
        "$.rows[1].v",
    ),
    (lambda: keyed.KeyedSet("id", _ROWS, [{"id": 1}, {"id": 1}]), "duplicate_key", "$.rows[1].id"),
    (lambda: keyed.KeyedSet("id", _ROWS, [{"v": 1}]), "invalid_keyed_set", "$.rows[0]"),
    (
        lambda: keyed.GenericDelta("id", _ROWS, "a", "b", changed=[{"id": 1, "v": [1]}]),
        "unsupported_type",
        "$.changed[0].v",
    ),
    (
        lambda: keyed.GenericDelta("id", _ROWS, "a", "b", removed=[1, float("nan")]),
        "out_of_range",
        "$.removed[1]",
    ),
    (lambda: gcx1.dumps([{"a": 1}, {"a": float("nan")}], tool="t"), "out_of_range", "$[1].a"),
    (lambda: gcx1.dumps({"n": [{"a": 1}, {"a": {}}]}, tool="t"), "unsupported_shape", "$.n[1].a"),
    (lambda: gcx1.dumps({"n": [{"a": 1}, 3]}, tool="t"), "unsupported_shape", "$.n[1]"),
    (lambda: gcx1.dumps({"n": [{"a": 1}]}, tool="t u"), "unsupported_shape", "$"),  # an option
]


@pytest.mark.parametrize(("make", "code", "path"), _ITEM_CASES)
def test_every_encoder_names_the_bad_item(make: Callable[[], Any], code: str, path: str) -> None:
    with pytest.raises(GCFEncodeError) as info:
        make()
    assert (info.value.code, info.value.path) == (code, path), str(info.value)


def test_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        keyed.FixedN(0)
    with pytest.raises(ConfigError):
        keyed.SizeGuard(0)


def test_every_error_is_still_a_gcferror_and_a_valueerror() -> None:
    for cls in (GCFDecodeError, GCFEncodeError, ConfigError):
        assert issubclass(cls, GCFError) and issubclass(cls, ValueError)


def test_a_payload_that_is_not_text_is_refused_alike() -> None:
    decoders: list[Callable[[Any], Any]] = [
        gcfkit.loads,
        gcfkit.decode,
        dense.loads,
        relative.loads,
        graph.loads,
    ]
    for decode in decoders:
        with pytest.raises(GCFError) as info:
            decode(42)
        assert info.value.code == "unsupported_type", decode
