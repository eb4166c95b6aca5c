"""gcfkit's own fixtures for relative answers (tests/fixtures/relative), run strictly.

Same format as the official suite (``name``, ``description``, ``operation``, ``input``,
``expected`` / ``expectedError``), dispatching on ``operation``; the contracts are in
docs/extensions/relative-answers.md §12. Encoders must match byte for byte, applied values
strictly (key order, a bool never a number), errors by their exact code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gcfkit
from gcfkit import GCFError, relative
from gcfkit.errors import GCFDecodeError
from tests.conformance import strict_equal
from tests.gcf_python import rejects_at_line_1

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "relative"
FIXTURES = [
    (p.relative_to(FIXTURE_DIR).as_posix(), json.loads(p.read_text(encoding="utf-8")))
    for p in sorted(FIXTURE_DIR.rglob("*.json"))
]


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return bool(got == want)
    return strict_equal(got, want)


def op_relative_encode(fx: dict[str, Any]) -> None:
    inp = fx["input"]
    common = {"tool": inp["tool"], "since": inp["since"], "ref": inp.get("ref")}
    if inp["kind"] == "json":
        wire = relative.json_answer(inp["held"], inp["new"], key=inp.get("key"), **common)
    else:
        wire = relative.text_answer(inp["held"], inp["new"], **common)
    assert wire == fx["expected"]
    reader = relative.Reader()
    reader.hold(inp["since"], inp["held"], text=inp["kind"] == "text")
    assert _same(reader.read(wire), inp["new"])


def op_relative_apply(fx: dict[str, Any]) -> None:
    inp = fx["input"]
    answer = relative.loads(inp["answer"])
    reader = relative.Reader()
    reader.hold(answer.since, inp["held"], text=isinstance(answer, relative.Edit))
    before = json.dumps(inp["held"])
    assert _same(reader.resolve(answer), fx["expected"])
    assert json.dumps(inp["held"]) == before, "applying changed the held value"


def op_relative_error(fx: dict[str, Any]) -> None:
    inp = fx["input"]
    before = json.dumps(inp.get("held"))
    with pytest.raises(GCFError) as info:
        try:
            answer = relative.loads(inp["answer"])
        except GCFError as e:
            # A malformed answer is a decode error placed in its text.
            assert isinstance(e, GCFDecodeError) and e.doc == inp["answer"], repr(e)
            assert e.lineno >= 1 and 0 <= e.pos <= len(e.doc)
            raise
        reader = relative.Reader()
        reader.hold(answer.since, inp["held"], text=isinstance(answer, relative.Edit))
        reader.resolve(answer)
    assert info.value.code == fx["expectedError"], info.value
    assert json.dumps(inp.get("held")) == before, "a failed apply changed the held value"


def op_decode(fx: dict[str, Any]) -> None:
    assert strict_equal(gcfkit.decode(fx["input"]), fx["expected"])
    assert strict_equal(gcfkit.loads(fx["input"]), fx["expected"])


def op_error(fx: dict[str, Any]) -> None:
    with pytest.raises(GCFError) as info:
        gcfkit.loads(fx["input"])
    assert info.value.code == fx["expectedError"]


OPERATIONS = {
    "relative-encode": op_relative_encode,
    "relative-apply": op_relative_apply,
    "relative-error": op_relative_error,
    "decode": op_decode,
    "error": op_error,
}


def test_fixtures_were_found() -> None:
    assert len(FIXTURES) >= 60
    assert {fx["operation"] for _, fx in FIXTURES} == set(OPERATIONS)


@pytest.mark.parametrize(("path", "fx"), FIXTURES, ids=[p for p, _ in FIXTURES])
def test_fixture(path: str, fx: dict[str, Any]) -> None:
    assert set(fx) <= {"name", "description", "operation", "input", "expected", "expectedError"}
    OPERATIONS[fx["operation"]](fx)


def _answers(fx: dict[str, Any]) -> list[str]:
    """The relative answers a fixture holds (an encoder's output, an applied answer)."""
    inp = fx["input"]
    texts = [fx.get("expected"), inp.get("answer") if isinstance(inp, dict) else inp]
    return [t for t in texts if isinstance(t, str) and relative.is_answer(t)]


def test_every_answer_fails_at_line_1_in_gcf_python() -> None:
    answers = [a for _, fx in FIXTURES for a in _answers(fx)]
    assert len(answers) >= 40
    for text in answers:
        rejects_at_line_1(text)
