"""The C accelerator's token estimates and the dense definition choice against their
pure-Python references: the same numbers, and the same definitions.

``tokens.estimate`` (its features, ``speedups.token_features``) and the dense profile's
D9.3 estimate (``speedups.dense_estimate``) are compared on the MCP and TOON corpora as
JSON (compact and pretty), GCF and dense text, and on seeded random strings over every kind
of code point the two walks tell apart (ASCII classes, Unicode whitespace, lone surrogates,
astral characters). ``definitions.select`` keeps counts between calls; its choice is
compared with a plain re-statement of D9.2 that counts everything afresh, with exact
counts, on the same values, cold and warm, on both paths.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import gcfkit
from gcfkit import dense, speedups, tokens
from gcfkit.generic import definitions
from gcfkit.traffic.corpus import read_sessions
from tests.conformance import CORPUS_DIR

requires_c = pytest.mark.skipif(
    speedups.accelerator is None, reason="the C accelerator is not built or is switched off"
)


def _values() -> Iterator[Any]:
    for path in sorted((CORPUS_DIR / "toon").glob("*.json")):
        yield json.loads(path.read_text(encoding="utf-8"))
    for session in read_sessions(CORPUS_DIR / "mcp"):
        for call in session.calls:
            for block in (call.result or {}).get("content", []):
                try:
                    value = json.loads(block.get("text", ""))
                except ValueError:
                    continue
                if isinstance(value, (dict, list)):
                    yield value


VALUES = list(_values()) if CORPUS_DIR.is_dir() else []


def _corpus_texts() -> Iterator[str]:
    for session in read_sessions(CORPUS_DIR / "mcp"):
        for call in session.calls:
            for block in (call.result or {}).get("content", []):
                if block.get("type") == "text":
                    yield block["text"]
    for value in VALUES:
        yield json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        yield json.dumps(value, indent=2, ensure_ascii=False)
        yield gcfkit.dumps(value)
        yield dense.dumps(value)


# Code points the walks tell apart: every ASCII class, Unicode whitespace (which the token
# estimate's non-ASCII runs and whitespace runs treat differently), lone surrogates, BMP and
# astral letters, digits of other scripts.
_ALPHABET = (
    [chr(c) for c in range(128)]
    + ["\x85", "\xa0", "\u1680", "\u2000", "\u2028", "\u3000", "\ufeff", "\u200b"]
    + ["\ud800", "\udfff", "\udc00", "é", "ß", "漢", "٣", "𝟘", "😀", "\U0010ffff"]
)


def _random_texts(seed: int, cases: int) -> Iterator[str]:
    rng = random.Random(seed)
    runs = ["abc", "XYZ", "1234567", "  ", "\n\n", ", ", '":"', "\t ", " \xa0", "\xa0 "]
    for _ in range(cases):
        parts = [
            rng.choice(_ALPHABET) if rng.random() < 0.6 else rng.choice(runs) * rng.randint(1, 4)
            for _ in range(rng.randint(0, 40))
        ]
        yield "".join(parts)


EDGES = ["", " ", "  ", "a", "1", "1234", " \xa0x", "\xa0\xa0", "\xa0é", "é\xa0", "\x1c\x1d,"]


def _both(fn: Callable[[str], Any], text: str) -> tuple[Any, Any]:
    fast = fn(text)
    with speedups.pure_python():
        slow = fn(text)
    return fast, slow


@requires_c
def test_the_accelerator_counts_the_features() -> None:
    assert speedups.token_features("ab  12345 é") == (1, 2, 1, 2, 2, 0, 1)
    assert speedups.dense_estimate("authored 2026-08-07 by Dayna Blackwell") == 12
    with pytest.raises(TypeError):
        speedups.token_features(b"bytes")  # type: ignore[arg-type]


@requires_c
@pytest.mark.parametrize("source", ["corpus", "random", "edges"])
def test_estimates_match_the_reference(source: str) -> None:
    if source == "corpus":
        if not CORPUS_DIR.is_dir():
            pytest.skip("needs the shared corpus")
        texts = list(_corpus_texts())
        assert len(texts) > 100
    elif source == "random":
        texts = list(_random_texts(22, 3000))
    else:
        texts = [*EDGES, "x" * 5000, "9" * 10_001, " " * 77, "\ud800" * 9]
    for text in texts:
        assert speedups.token_features(text) == tokens._features(text), text[:80]
        for encoding in tokens.ENCODINGS:
            fast, slow = _both(functools.partial(tokens.estimate, encoding=encoding), text)
            assert fast == slow, text[:80]
        fast, slow = _both(definitions.estimate, text)
        assert fast == slow == definitions._estimate(text), text[:80]


def _reference_select(value: Any, cost: Callable[[str], int]) -> dict[str, str]:
    """D9.2 as the profile states it, every string counted afresh (the original select)."""
    ref = cost("|$a|")
    chosen = []
    for s, n in definitions._occurrences(value).items():
        if n < 2 or len(s) < definitions.MIN_LENGTH:
            continue
        w = definitions.spelling(s)
        gain = cost("|" + w + "|") - ref
        if gain <= 0:
            continue
        saving = n * gain - cost("$a=" + w + "\n")
        if saving >= 2:
            chosen.append((-saving, s))
    chosen.sort()
    return {s: name for (_, s), name in zip(chosen, definitions.names(), strict=False)}


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("encoding", tokens.ENCODINGS)
def test_the_kept_counts_choose_what_fresh_counts_choose(pure: bool, encoding: str) -> None:
    if not VALUES:
        pytest.skip("needs the shared corpus")
    count = tokens.counter(encoding).count
    with speedups.pure_python() if pure else contextlib.nullcontext():
        definitions.forget()
        expected = [_reference_select(v, count) for v in VALUES]
        cold = [definitions.select(v, count) for v in VALUES]  # the memo fills as it goes
        warm = [definitions.select(v, count) for v in VALUES]
        assert cold == expected
        assert warm == expected
        assert any(expected)
        # The payloads too, byte for byte, warm and with counts no memo can keep.
        for value in VALUES[:12]:
            wire = dense.dumps(value, count=count)
            assert wire == dense.dumps(value, count=_Unhashable(count))
        definitions.forget()


def test_the_memo_is_bounded_and_per_cost_function() -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text)

    value = {"a": ["a long repeated string"] * 3}
    definitions.forget()
    first = definitions.select(value, count)
    calls = len(seen)
    assert definitions.select(value, count) == first
    assert len(seen) == calls  # counted once, then kept
    # Another cost function has its own counts.
    assert definitions.select(value, lambda t: 1) == {}
    # Only the latest few cost functions keep theirs.
    for _ in range(definitions._MEMO_COSTS + 2):
        definitions.select(value, lambda t: len(t))
    assert len(definitions._MEMOS) == definitions._MEMO_COSTS
    assert definitions.select(value, count) == first
    assert len(seen) > calls  # evicted: counted again, same choice
    # Strings: the memo starts over at its bound; long strings are never kept.
    many = {"k": [f"string number {i:05}" for i in range(definitions._MEMO_STRINGS + 5)] * 2}
    definitions.select(many, count)
    memo = definitions._MEMOS[count]
    assert 0 < len(memo.costs) <= definitions._MEMO_STRINGS
    long = "x" * (definitions._MEMO_LENGTH + 1)
    definitions.select({"a": [long, long]}, count)
    assert long not in memo.costs
    definitions.forget()
    assert not definitions._MEMOS


def test_names_are_the_canonical_sequence() -> None:
    from itertools import islice

    assert definitions._first_names(800) == list(islice(definitions.names(), 800))
    assert definitions._first_names(3) == ["a", "b", "c"]


class _Unhashable:
    """A cost function the memo cannot key: counted afresh on every call."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count

    def __call__(self, text: str) -> int:
        return self._count(text)


def _reference_spelling(s: str) -> str | None:
    with speedups.pure_python():
        try:
            return definitions.spelling(s)
        except gcfkit.GCFError:
            return None


@requires_c
def test_spellings_match_the_reference() -> None:
    strings = [*EDGES, "$", "$5", "$a", "a|b", "-", "~", "true", "1e5", " x", "x ", "#x"]
    strings += list(_random_texts(23, 2000))
    for value in VALUES:
        strings += list(definitions._occurrences(value))
    for s in strings:
        got = speedups.spelling(s)
        want = _reference_spelling(s)
        # None: the C path hands the string back, and only the reference's error is left.
        assert got == want or (got is None and want is None), s[:80]
        if got is not None:
            assert definitions.spelling(s) == got
