"""The C accelerator's ``text_spans`` (behind ``splice_texts``: where each plain ``text``
member's string value stands in a JSON-RPC line) against the reference,
``jsonrpc._text_spans_py``.

Inputs: the MCP corpus' results as response lines (compact, spaced, pretty, ASCII-escaped),
generated messages with ``text`` members anywhere (keys, string values and texts holding
quotes, backslash runs, ``"text"`` itself, characters of every width), hand-written edges
(a member spelled with an escape, a non-string value, whitespace around the colon), and
cut-off lines (an unterminated string: both say None). For each, the spans must be equal
and, for a valid line, each must be the literal of its member's value: json reads the same
string there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit import speedups
from gcfkit.proxy.jsonrpc import _text_spans_py
from tests.conformance import CORPUS_DIR

requires_c = pytest.mark.skipif(
    speedups.accelerator is None, reason="the C accelerator is not built or is switched off"
)


def spans_c(line: str) -> list[tuple[int, int]] | None:
    assert speedups.accelerator is not None
    return speedups.accelerator.text_spans(line)


def texts_in_order(value: Any) -> list[str]:
    """The string values of the members named ``text``, in document order."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                out.append(item)
            out += texts_in_order(item)
    elif isinstance(value, list):
        for item in value:
            out += texts_in_order(item)
    return out


def spellings(value: Any) -> list[str]:
    return [
        json.dumps(value),
        json.dumps(value, ensure_ascii=False, separators=(",", ":")),
        json.dumps(value, ensure_ascii=False, indent=2),
        json.dumps(value, separators=(" , ", " : ")),
    ]


def check(line: str, *, valid: bool = True) -> None:
    expected = _text_spans_py(line)
    assert spans_c(line) == expected
    if expected is None or not valid:
        return
    for (start, end), text in zip(expected, texts_in_order(json.loads(line)), strict=True):
        assert json.loads(line[start:end]) == text


def corpus_lines() -> list[str]:
    lines = []
    for path in sorted(CORPUS_DIR.glob("mcp/*/*.json")):
        data = json.loads(path.read_text())
        result = data.get("result", data) if isinstance(data, dict) else data
        lines += spellings({"jsonrpc": "2.0", "id": 1, "result": result})
    return lines


@requires_c
def test_the_corpus() -> None:
    lines = corpus_lines()
    assert len(lines) > 100
    for line in lines:
        check(line)


EDGES = [
    '{"text":"a"}',
    '{"text" :\t"a" , "b": {"text":\n"c\\\\"}}',
    '{"te\\u0078t": "a", "text": "b"}',
    '{"text": 5, "t": "text", "u": "\\"text\\": \\"x\\""}',
    '{"a": "\\\\\\\\", "text": "\\\\\\"text\\": \\""}',
    '["text", {"text": ""}, "\\"text\\":\\"", {"text": "\u00e9\u20ac\U0001f600"}]',
    '{"text": "\U0001f600", "x": "\\u00e9 text"}',
    '{"text": "unterminated',
    '{"text": "ends in a backslash\\',
    '"text"',
    "",
]


@requires_c
@pytest.mark.parametrize("line", EDGES)
def test_edges(line: str) -> None:
    expected = _text_spans_py(line)
    assert spans_c(line) == expected


KEYS = st.sampled_from(["text", "type", "t", "texts", "a"])
STRINGS = st.text(
    alphabet=st.sampled_from(['"', "\\", "t", "e", "x", ":", " ", "\n", "é", "€", "😀", "a"]),
    max_size=12,
)
VALUES = st.recursive(
    st.one_of(st.none(), st.integers(), STRINGS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(KEYS, STRINGS), inner, max_size=4)
    ),
    max_leaves=20,
)


@requires_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES)
def test_generated_messages(value: Any) -> None:
    for line in spellings({"jsonrpc": "2.0", "id": 1, "result": value}):
        check(line)
        check(line[: len(line) // 2], valid=False)  # cut off: the same spans so far, or None
