"""The C accelerator's compact JSON (``speedups.minify_json``, behind
``jsonio.compact_of``) against the reference, ``dumps_compact(loads_json(text))``.

For every text ``loads_json`` accepts, the C pass must give the same compact text or hand
the text back (None); it is never asked about a text ``loads_json`` refuses. Inputs: the
MCP corpus' JSON text blocks and TOON's datasets in several spellings, generated values
dumped every way ``json.dumps`` can (ASCII escapes, indents, other separators), hand-written
spellings of numbers and escapes, and seeded mutations of all of these.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit import GCFError, speedups
from gcfkit.jsonio import compact_of, dumps_compact, loads_compact, loads_json
from gcfkit.traffic.corpus import read_sessions
from tests.conformance import CORPUS_DIR

requires_c = pytest.mark.skipif(
    speedups.accelerator is None, reason="the C accelerator is not built or is switched off"
)


def _reference(text: str) -> str | None:
    """The compact text of ``text``, or None when loads_json refuses it."""
    try:
        value = loads_json(text)
    except (GCFError, RecursionError):
        return None
    return dumps_compact(value)


def _check(text: str) -> None:
    want = _reference(text)
    if want is None:
        return
    got = speedups.minify_json(text)
    assert got is None or got == want, text[:200]
    assert compact_of(text, loads_json(text)) == want
    with speedups.pure_python():
        assert loads_compact(text) == (loads_json(text), want)


def _spellings(value: Any) -> Iterator[str]:
    yield json.dumps(value, ensure_ascii=False)
    yield json.dumps(value, ensure_ascii=True)
    yield json.dumps(value, indent=2, ensure_ascii=False)
    yield json.dumps(value, indent="\t", ensure_ascii=True, separators=(" ,", " : "))


def _corpus_texts() -> Iterator[str]:
    for path in sorted((CORPUS_DIR / "toon").glob("*.json")):
        text = path.read_text(encoding="utf-8")
        yield text
        yield from _spellings(json.loads(text))
    for session in read_sessions(CORPUS_DIR / "mcp"):
        for call in session.calls:
            for block in (call.result or {}).get("content", []):
                text = block.get("text", "")
                if text[:1] in ("{", "[") or text.lstrip()[:1] in ("{", "["):
                    yield text


HAND = [
    "[-0, 0, -0.0, 0.0, 1E2, 1e-7, 1E+2, 0.1e1, 123456789012345678901234567890, -1]",
    "[1.0, 2.50, 1e22, 1e23, 5e-324, 1.7976931348623157e308, 0.30000000000000004]",
    '["\\u00e9\\u00E9", "\\/", "\\b\\f\\n\\r\\t", "\\u001f\\u007f\\u0000", "\\"\\\\"]',
    '["\\ud83d\\ude00", "\\uD83D\\uDE00", "\\ud83d", "\\ude00", "\\ud83d\\u0041", "\\ud83dx"]',
    '["\\ud83d\\ud83d\\ude00", "\\udbff\\udfff", "\\u2028\\u2029", "\u2028", "\ud800"]',
    ' \r\n\t{ "a" :\t[ ] , "b" : { } , "c" : [ true , false , null ] } \n',
    '{"": "", "k": "\\u0022", "e": "é😀\x7f"}',
    "[1e400]",
    "[NaN]",
    "[Infinity, -Infinity]",
    "[01]",
    '["\\x"]',
    "[" + "9" * 5000 + "]",
    "[" + "1" * 100 + ".5e-" + "0" * 80 + "1]",
    "\ufeff[1]",
]


@requires_c
def test_hand_written_spellings() -> None:
    for text in HAND:
        _check(text)
    # What the C pass must itself answer (not hand back), so that it is tested at all.
    assert speedups.minify_json(HAND[0]) == _reference(HAND[0])
    assert speedups.minify_json(HAND[3]) == _reference(HAND[3])
    assert speedups.minify_json("[1e400]") is None


@requires_c
def test_the_corpus() -> None:
    if not CORPUS_DIR.is_dir():
        pytest.skip("needs the shared corpus")
    texts = [t for t in _corpus_texts() if _reference(t) is not None]
    assert len(texts) > 40
    for text in texts:
        _check(text)
    # The C pass answers every JSON text of the corpus itself.
    assert all(speedups.minify_json(t) is not None for t in texts)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=30,
)


@requires_c
@settings(
    max_examples=1500,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_JSON)
def test_generated_values_in_every_spelling(value: Any) -> None:
    for text in _spellings(value):
        _check(text)


@requires_c
def test_mutations() -> None:
    rng = random.Random(2212)
    seeds = [*HAND[:7], json.dumps({"a": [1.5, "x\\y", {"b": None}]}, indent=1)]
    pieces = ['"', "\\", "\\u", "\\ud83d", "-", "0", "e", ".", " ", ",", "]", "}", "1", "é"]
    for _ in range(4000):
        text = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            if rng.random() < 0.5:
                text = text[:i] + rng.choice(pieces) + text[i:]
            else:
                text = text[:i] + text[i + rng.randint(1, 3) :]
        _check(text)


@requires_c
def test_short_decimals_are_spelled_as_the_dump_spells_them() -> None:
    """Numbers of up to 17 significant digits in every plain and exponent spelling: the C
    pass writes the shortest text of 15 digits or fewer without dtoa, the rest with it."""
    rng = random.Random(2026)
    numbers: list[str] = ["0.0001", "0.00009999", "1e15", "999999999999999.9", "-0.0", "0e5"]
    for _ in range(20_000):
        digits = rng.randint(1, 17)
        n = str(rng.randrange(10 ** (digits - 1), 10**digits))
        point = rng.randint(0, len(n))
        shift = rng.randint(-22, 3)
        sign = rng.choice(["", "-"])
        numbers.append(f"{sign}{n[:point] or '0'}.{n[point:] or '0'}e{shift}")
        numbers.append(f"{sign}0.{'0' * rng.randint(0, 5)}{n}")
    for chunk in range(0, len(numbers), 500):
        _check("[" + ", ".join(numbers[chunk : chunk + 500]) + "]")
