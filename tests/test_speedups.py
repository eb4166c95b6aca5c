"""The fast paths agree with the reference: the stdlib helpers the pure-Python codec borrows,
and the optional C accelerator (``gcfkit._speedups``) against the pure-Python codec.

The accelerator either answers exactly as the reference does or hands the document back
(None), so every check here is "same text, same value, or the same error" across the two
paths, run in one process with :func:`gcfkit.speedups.pure_python`.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit import GCFError, scalar, speedups
from gcfkit.generic.decoder import loads
from gcfkit.generic.encoder import dumps

_SETTINGS: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

# ---------------------------------------------------------------------------------------
# The stdlib json helpers of the pure-Python codec
# ---------------------------------------------------------------------------------------


@pytest.mark.skipif(scalar._C_QUOTE is None, reason="json has no C encode_basestring here")
def test_json_quoting_is_the_canonical_quoting_on_every_code_point() -> None:
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(chars), 8192):
        chunk = "".join(chars[i : i + 8192])
        assert scalar._C_QUOTE(chunk) == '"' + chunk.translate(scalar._QUOTE_TABLE) + '"'


def test_quoting_still_refuses_lone_surrogates() -> None:
    for s in ("\ud800", "a\udfffb", "\U0001f600\udc00"):
        with pytest.raises(GCFError) as info:
            scalar.quote_string(s)
        assert info.value.code == "invalid_surrogate"


def _parse_quoted(text: str) -> tuple[str, int] | str:
    try:
        return scalar.parse_quoted_at(text, 0, 3)
    except GCFError as e:
        assert e.line == 3
        return e.code


_QUOTED_PARTS = st.lists(
    st.sampled_from(
        ["a", "é", "\U0001f600", "\\", '\\"', "\\n", "\\t", "\\/", "\\u0041", "\\u00e9", "\\ud83d",
         "\\ude00", "\\uD83D\\uDE00", "\\ud800x", "\\x", "\\u12", "\x01", "\x1f", "\x7f", "\ud800",
         "\udc00", "|", '"', " "]
    ),
    max_size=8,
)  # fmt: skip


@settings(max_examples=1500, **_SETTINGS)
@given(_QUOTED_PARTS, st.sampled_from(["", '"', '"|x', '"x']))
def test_json_string_scanner_reads_quoted_strings_as_the_reference(
    parts: list[str], tail: str
) -> None:
    text = '"' + "".join(parts) + tail
    fast = _parse_quoted(text)
    saved = scalar._C_SCAN
    try:
        scalar._C_SCAN = None  # type: ignore[misc]
        reference = _parse_quoted(text)
    finally:
        scalar._C_SCAN = saved  # type: ignore[misc]
    assert fast == reference, text


def test_decoding_pauses_the_cyclic_gc_and_restores_it() -> None:
    seen: list[bool] = []
    gc.callbacks.append(lambda phase, info: seen.append(True))
    try:
        rows = "".join(f"{i}|x{i}|{{}}\n" for i in range(5000)).replace("{}", "y")
        value = loads("GCF profile=generic\n## r [5000]{a,b,c}\n" + rows)
    finally:
        gc.callbacks.pop()
    assert len(value["r"]) == 5000 and not seen
    assert gc.isenabled()
    with pytest.raises(GCFError):
        loads("GCF profile=generic\nx=~\n")
    assert gc.isenabled()
    gc.disable()
    try:
        loads("GCF profile=generic\nx=1\n")
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()


def test_cell_cache_is_bounded_and_only_keeps_short_strings() -> None:
    with speedups.pure_python():
        dumps([{"v": f"é{i}"} for i in range(scalar._STRING_TEXT_MAX + 10)])
        dumps([{"v": "é" * (scalar._STRING_TEXT_LEN + 1)}])
    kept = scalar._STRING_TEXT
    assert 0 < len(kept) <= scalar._STRING_TEXT_MAX
    assert all(len(k) <= scalar._STRING_TEXT_LEN for k in kept)
    assert all(kept[k] == scalar.format_scalar(k) for k in kept)


# ---------------------------------------------------------------------------------------
# Choosing the path
# ---------------------------------------------------------------------------------------

requires_c = pytest.mark.skipif(
    speedups.accelerator is None, reason="the C accelerator is not built or is switched off"
)


def test_the_active_path_is_reported() -> None:
    import gcfkit

    assert gcfkit.speedups_active() is (speedups.accelerator is not None)
    with speedups.pure_python():
        assert not gcfkit.speedups_active()
        assert speedups.status().startswith("pure Python")
    assert gcfkit.speedups_active() is (speedups.accelerator is not None)


def test_the_environment_variable_forces_pure_python() -> None:
    import subprocess
    import sys

    code = "import gcfkit, gcfkit.speedups as a; print(gcfkit.speedups_active(), a.status())"
    for value, pure in (("1", True), ("0", False), ("", False)):
        env = {"GCFKIT_PURE_PYTHON": value, "PATH": ""}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
        if pure:
            assert out.startswith("False pure Python: GCFKIT_PURE_PYTHON is set"), out
        else:
            assert out.split()[0] == str(speedups._LOADED is not None), out


# ---------------------------------------------------------------------------------------
# The C encoder against the reference
# ---------------------------------------------------------------------------------------


def _both_encode(value: Any, **options: Any) -> tuple[Any, Any]:
    """(accelerated, reference): the text, or the error's (code, path) when it raises."""

    def run() -> Any:
        try:
            return dumps(value, **options)
        except GCFError as e:
            return ("error", e.code, str(e))

    fast = run()
    with speedups.pure_python():
        reference = run()
    return fast, reference


_OPTIONS: list[dict[str, Any]] = [
    {},
    {"flatten": False},
    {"inline_schemas": False},
    {"shared_schemas": False},
    {"flatten": False, "inline_schemas": False, "shared_schemas": False},
]


def _sample_values() -> list[tuple[str, Any]]:
    from tests.conformance import CORPUS_DIR, load_fixtures

    out: list[tuple[str, Any]] = []
    for name, fx in load_fixtures():
        if fx["operation"] in ("encode", "roundtrip", "encode-error") and not (
            str(fx.get("expected", "")).startswith("GCF profile=graph")
        ):
            out.append((name, fx["input"]))
    for path in sorted(CORPUS_DIR.glob("toon/*.json")):
        out.append((path.name, json.loads(path.read_text(encoding="utf-8"))))
    for path in sorted(CORPUS_DIR.glob("mcp/*/*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        for block in (record.get("result") or {}).get("content") or []:
            try:
                out.append((path.name, json.loads(block.get("text", ""))))
            except ValueError:
                continue
    return out


SAMPLES = _sample_values()


@requires_c
def test_c_encoder_writes_the_reference_text_for_every_sample() -> None:
    assert len(SAMPLES) > 200
    answered = 0
    for name, value in SAMPLES:
        for options in _OPTIONS:
            fast, reference = _both_encode(value, **options)
            assert fast == reference, (name, options)
            answered += (
                speedups.accelerator.encode(  # type: ignore[union-attr]
                    value, "GCF profile=generic", *_flags(options)
                )
                is not None
            )
    # It must actually serve them: only the encode-error fixtures go back to Python.
    assert answered >= 0.97 * len(SAMPLES) * len(_OPTIONS)


def _flags(options: dict[str, Any]) -> tuple[bool, bool, bool]:
    return (
        options.get("flatten", True),
        options.get("shared_schemas", True),
        options.get("inline_schemas", True),
    )


def _odd_values() -> st.SearchStrategy[Any]:
    """Values the reference refuses or treats specially: the accelerator must hand them back."""
    import collections
    import enum

    class Level(enum.IntEnum):
        LOW = 1

    class Name(str):
        pass

    return st.sampled_from(
        [float("nan"), float("inf"), -float("inf"), 2**63, -(2**63) - 1, "\ud800", "a\udfffb",
         Name("x"), Level.LOW, {1, 2}, b"x", object(), collections.OrderedDict(a=1), (1, 2)]
    )  # fmt: skip


def _encoder_inputs() -> st.SearchStrategy[Any]:
    from tests.codec_support import documents, field_names, json_values, key_strings, scalar_values

    keys = st.one_of(field_names, key_strings, st.sampled_from(["\ud800", "a>b", ">", "a>", "key"]))
    scalars = st.one_of(scalar_values, _odd_values(), st.floats())

    def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(keys, children, max_size=4),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(st.integers(0, 3), children, max_size=2),
        )

    odd = st.recursive(scalars, containers, max_leaves=30)
    rows = st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "c", "d>e"]), odd, max_size=4),
        min_size=1,
        max_size=6,
    )
    return st.one_of(documents, json_values, odd, rows, st.dictionaries(keys, rows, max_size=3))


@requires_c
@settings(max_examples=800, **_SETTINGS)
@given(_encoder_inputs(), st.booleans(), st.booleans(), st.booleans())
def test_c_encoder_agrees_with_the_reference(
    value: Any, flatten: bool, shared: bool, inline: bool
) -> None:
    fast, reference = _both_encode(
        value, flatten=flatten, shared_schemas=shared, inline_schemas=inline
    )
    assert fast == reference


@requires_c
def test_default_and_parse_float_give_the_reference_results() -> None:
    # default= converts before either encoder runs; parse_float= is the reference's own.
    import datetime
    from decimal import Decimal

    day = datetime.date(2026, 8, 7)
    value = {"rows": [{"id": i, "on": day, "tags": {"x", "y"}} for i in range(4)]}
    hooks: list[Any] = [repr, lambda o: sorted(o) if isinstance(o, set) else str(o)]
    for default in hooks:
        fast, reference = _both_encode(value, default=default)
        assert fast == reference
    wire = dumps({"rows": [{"id": i, "p": i / 4, "q": [0.5, 2]} for i in range(9)], "x": 1.25})
    with speedups.pure_python():
        want = loads(wire, parse_float=Decimal)
    got = loads(wire, parse_float=Decimal)
    assert repr(got) == repr(want) and got["x"] == Decimal("1.25")


@requires_c
def test_c_number_text_of_short_decimals_is_the_reference() -> None:
    """Doubles read from decimals of up to 17 significant digits, where the C path writes
    the shortest text without dtoa (15 digits or fewer, plain notation), at and around the
    edges of that road: 1e-4, 1e15, 15 and 16 digits, every count of fraction digits (the
    compact JSON side: tests/test_speedups_jsonio.py)."""
    fmt = speedups.accelerator.format_number  # type: ignore[union-attr]
    rng = random.Random(2026)
    values: list[float] = [1e-4, 9.9999e-5, 1e15, 999999999999999.0, 999999999999999.9]
    for _ in range(60_000):
        digits = rng.randint(1, 17)
        n = rng.randrange(10 ** (digits - 1), 10**digits)
        values.append(float(f"{n}e-{rng.randint(0, 20)}"))
    for x in values:
        for v in (x, -x):
            assert fmt(v) == scalar.format_number(v), v


@requires_c
def test_c_number_text_is_the_reference_on_edge_cases() -> None:
    import math
    import struct

    fmt = speedups.accelerator.format_number  # type: ignore[union-attr]

    def check(v: float | int) -> None:
        try:
            want: str | None = scalar.format_number(v)
        except GCFError:
            want = None
        assert fmt(v) == want, v

    edges = [0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-4, 1e-6,
             2.0**53, 1e15, 1e16, 1e21, 1e22, 0.1, 0.3, 123456789.125, 9007199254740991.0,
             float("inf"), float("nan")]  # fmt: skip
    for e in edges:
        for x in (e, math.nextafter(e, 0), math.nextafter(e, math.inf)):
            check(x)
            check(-x)
    for k in range(-325, 309):
        for m in (1, 1.5, 3, 7.25, 9.999999):
            check(m * 10.0**k)
            check(-m * 10.0**k)
    rng = random.Random(2024)
    for _ in range(100_000):
        bits = rng.getrandbits(64).to_bytes(8, "little")
        check(struct.unpack("<d", bits)[0])
    for i in [*range(-300, 300), 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**19]:
        check(i)


@requires_c
@settings(max_examples=3000, **_SETTINGS)
@given(st.one_of(st.floats(), st.integers(), st.floats(min_value=-1e-3, max_value=1e-3)))
def test_c_number_text_is_the_reference(v: float | int) -> None:
    try:
        want: str | None = scalar.format_number(v)
    except GCFError:
        want = None
    assert speedups.accelerator.format_number(v) == want  # type: ignore[union-attr]


@requires_c
@settings(max_examples=3000, **_SETTINGS)
@given(
    st.one_of(
        st.text(),
        st.text(alphabet='ab|,"\\ >~^-.#@[]:{}=\n\t0123456789e+\x7f\x85\xa0\u2028\u3000'),
        st.sampled_from(["true", "false", "-", "~", "^", "^{a}", "^{", "1e5", "-0", "01"]),
    )
)
def test_c_string_cells_are_the_reference(s: str) -> None:
    try:
        want: str | None = scalar.format_scalar(s, "|")
    except GCFError:
        want = None
    assert speedups.accelerator.format_scalar(s) == want  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------
# The C decoder against the reference
# ---------------------------------------------------------------------------------------


def _reference_decode(text: str | bytes) -> tuple[str, Any]:
    from gcfkit.header import to_text

    with speedups.pure_python():
        try:
            return "value", loads(to_text(text))
        except GCFError as e:
            return "error", _place(e)


def _place(e: GCFError) -> tuple[Any, ...]:
    """An error's code and where it is: line, column and index into the text."""
    return (e.code, e.line, getattr(e, "colno", None), getattr(e, "pos", None))


def _strict(a: Any, b: Any) -> bool:
    """Equal values of equal types, key order included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_strict(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_strict(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _check_decode(text: str | bytes) -> bool:
    """The accelerator's answer, if it gives one, is the reference's value; and loads()
    (which uses it) gives the reference's value or error. True when it answered."""
    fast = speedups.accelerator
    assert fast is not None
    answer = None
    if isinstance(text, str):
        answer = fast.decode(text)
    reference = _reference_decode(text)
    if answer is not None:
        assert reference[0] == "value", (text, reference)
        assert _strict(answer[0], reference[1]), text
    try:
        got: tuple[str, Any] = ("value", loads(text))
    except GCFError as e:
        got = ("error", _place(e))
    assert got[0] == reference[0] and (
        _strict(got[1], reference[1]) if got[0] == "value" else got[1] == reference[1]
    ), text
    return answer is not None


def _fixture_payloads() -> list[str | bytes]:
    import base64

    from tests.conformance import load_fixtures

    out: list[str | bytes] = []
    for _, fx in load_fixtures():
        for key in ("input", "expected"):
            text = fx.get(key)
            if isinstance(text, str) and text.startswith("GCF profile=generic"):
                out.append(text)
        if "inputBase64" in fx:
            out.append(base64.b64decode(fx["inputBase64"]))
    return out


@requires_c
def test_c_decoder_reads_every_fixture_and_sample_as_the_reference() -> None:
    payloads = _fixture_payloads()
    for _, value in SAMPLES:
        for options in _OPTIONS:
            with contextlib.suppress(GCFError):
                payloads.append(dumps(value, **options))
    answered = sum(_check_decode(p) for p in payloads)
    # Canonical text is the accelerator's to read: everything dumps() wrote, at least.
    assert answered >= len(payloads) - 150, (answered, len(payloads))


@requires_c
def test_c_decoder_reads_mutated_payloads_as_the_reference_and_never_crashes() -> None:
    from tests import codec_support

    corpus = codec_support.CORPUS + [p for p in _fixture_payloads() if isinstance(p, str)]
    for _, value in SAMPLES[:: max(1, len(SAMPLES) // 60)]:
        with contextlib.suppress(GCFError):
            corpus.append(dumps(value))
    answered = 0
    for seed in range(4):
        rng = random.Random(1000 + seed)
        for _ in range(1500):
            text = rng.choice(corpus)
            head, _, body = text.partition("\n")
            payload: str | bytes = body
            for _ in range(rng.randint(1, 3)):
                mutate = rng.choice(codec_support.MUTATORS)
                payload = mutate(rng, payload if isinstance(payload, str) else payload.decode(
                    "utf-8", "replace"))  # fmt: skip
            if isinstance(payload, str):
                payload = head + "\n" + payload
            else:
                payload = head.encode() + b"\n" + payload
            answered += _check_decode(payload)
    assert answered > 500  # the mutations that stay canonical are served too


@requires_c
@settings(max_examples=700, **_SETTINGS)
@given(_encoder_inputs(), st.booleans(), st.booleans(), st.booleans(), st.randoms())
def test_c_decoder_serves_canonical_text_and_agrees_on_its_mutations(
    value: Any, flatten: bool, shared: bool, inline: bool, rng: random.Random
) -> None:
    from tests import codec_support

    try:
        wire = dumps(value, flatten=flatten, shared_schemas=shared, inline_schemas=inline)
    except GCFError:
        return
    assert _check_decode(wire), wire  # all canonical text is read in C
    for _ in range(3):
        payload: str | bytes = wire
        for _ in range(rng.randint(1, 2)):
            mutate = rng.choice(codec_support.MUTATORS)
            payload = mutate(rng, payload if isinstance(payload, str) else payload.decode(
                "utf-8", "replace"))  # fmt: skip
        _check_decode(payload)


# ---------------------------------------------------------------------------------------
# The C JSON-model equality (the lossless check) against the Python walk
# ---------------------------------------------------------------------------------------


def _near(value: Any, rng: random.Random) -> Any:
    """A copy of ``value`` changed at most slightly: an int for an integral float, a tuple
    for a list, a reordered or dropped key, a bool for 1, a changed leaf."""
    if isinstance(value, dict):
        items = [(k, _near(v, rng)) for k, v in value.items()]
        roll = rng.random()
        if roll < 0.05 and len(items) > 1:
            items[0], items[1] = items[1], items[0]
        elif roll < 0.08 and items:
            items.pop()
        return dict(items)
    if isinstance(value, list):
        out = [_near(v, rng) for v in value]
        return tuple(out) if rng.random() < 0.1 else out
    roll = rng.random()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 and roll < 0.5:
        return int(value)
    if value is True and roll < 0.1:
        return 1
    if roll < 0.03:
        return rng.choice([None, "x", 0, 0.5, False, [], {}])
    return value


@requires_c
@settings(max_examples=600, **_SETTINGS)
@given(_encoder_inputs(), st.randoms())
def test_c_same_value_is_the_python_walk(value: Any, rng: random.Random) -> None:
    from gcfkit import jsonio

    other = _near(value, rng)
    for a, b in ((value, other), (other, value), (value, value)):
        fast = speedups.same_value(a, b)
        with speedups.pure_python():
            walk = jsonio.same_value(a, b)
        assert fast is None or fast == walk, (a, b)
        assert jsonio.same_value(a, b) == walk


@requires_c
def test_c_same_value_takes_integral_floats_in_one_pass() -> None:
    rows: list[dict[str, Any]] = [
        {"id": i, "price": 25.0, "tags": ["a", True, None]} for i in range(50)
    ]
    decoded: list[dict[str, Any]] = [
        {"id": i, "price": 25, "tags": ["a", True, None]} for i in range(50)
    ]
    assert speedups.same_value(decoded, rows) is True
    decoded[7]["tags"][1] = 1
    assert speedups.same_value(decoded, rows) is False
    # Outside the plain model (a subclass) the walk decides.
    assert speedups.same_value({"a": collections.OrderedDict()}, {"a": {}}) is None


def _loads_json(text: str) -> Any:
    from gcfkit import jsonio

    try:
        value = jsonio.loads_json(text)
    except GCFError as e:
        return ("error", e.code, str(e))
    return ("value", json.dumps(value), repr(value))


@requires_c
@settings(max_examples=600, **_SETTINGS)
@given(_encoder_inputs(), st.randoms())
def test_c_json_hooks_parse_as_the_python_hooks(value: Any, rng: random.Random) -> None:
    try:
        text = json.dumps(value, default=repr)
    except (TypeError, ValueError):
        return
    # Duplicate keys, overflowing and long numbers, NaN: the refusals, placed at random.
    extra = rng.choice(['"k": 1, "k": 2', '"x": 1e999', '"x": -1.5e308', '"x": NaN',
                        '"x": 1.0000000000000002', '"x": 12345678901234567890123'])  # fmt: skip
    for candidate in (text, "{" + extra + "}", "[" + text + ", {" + extra + "}]"):
        got = _loads_json(candidate)
        with speedups.pure_python():
            assert got == _loads_json(candidate), candidate


@requires_c
@settings(max_examples=600, **_SETTINGS)
@given(_encoder_inputs(), st.one_of(st.none(), st.integers(0, 40)))
def test_c_table_cells_is_the_python_walk(value: Any, stop: int | None) -> None:
    from gcfkit.proxy.rewrite import gcf_cells

    fast = speedups.table_cells(value, stop)
    with speedups.pure_python():
        assert fast == gcf_cells(value, stop)


@requires_c
@settings(max_examples=400, **_SETTINGS)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40))
def test_c_utf8_len_is_the_encoded_size(text: str) -> None:
    assert speedups.utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))
    for wide in (text + "é", text + "€", text + "\U0001f600", text + "\ud800"):
        assert speedups.utf8_len(wide) == len(wide.encode("utf-8", "surrogatepass"))
