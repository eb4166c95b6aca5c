"""Fuzzing the relative-answer decoder: mutated answers only ever decode or raise a coded
GCFError, whether they are only decoded or also applied to the result they name.

Seeded and bounded (a few thousand cases). The mutations are the generic decoder's fuzzer's
(tests/test_fuzz.py), applied to the answers of gcfkit's own fixtures and a few built here.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit import relative
from gcfkit.errors import CODES, GCFError
from tests.codec_support import MUTATORS, SPECIALS, lossy

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "relative"

_EXTRA_SPECIALS = [
    "@@ ", "@@ patch ", "@@ edit ", " since=", " ref=", " lines=", "=1-", "+", "[=", "[id=", "]",
]  # fmt: skip


def _cases() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for path in sorted(FIXTURE_DIR.rglob("*.json")):
        fx = json.loads(path.read_text(encoding="utf-8"))
        inp = fx["input"]
        if isinstance(inp, dict) and "answer" in inp:
            out.append((inp["answer"], inp.get("held")))
        elif fx["operation"] == "relative-encode":
            expected = fx["expected"]
            out.append((expected, inp["held"]))
    return out


CASES = _cases()


def _check(payload: str | bytes, held: Any) -> None:
    try:
        answer = relative.loads(payload)
        reader = relative.Reader()
        as_text = isinstance(held, str) and isinstance(answer, relative.Edit)
        reader.hold(answer.since, held, text=as_text)
        reader.resolve(answer)
    except GCFError as e:
        assert e.code in CODES, e
        assert e.line is None or e.line >= 1


def _insert_special(rng: random.Random, text: str) -> str:
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + rng.choice(SPECIALS + _EXTRA_SPECIALS) + text[pos:]


@pytest.mark.parametrize("seed", range(4))
def test_mutated_answers_only_raise_gcferror(seed: int) -> None:
    rng = random.Random(seed)
    mutators = [*MUTATORS, _insert_special]
    for case in range(600):
        text, held = rng.choice(CASES)
        payload: str | bytes = text
        for _ in range(rng.randint(1, 3)):
            mutate = rng.choice(mutators)
            payload = mutate(rng, payload if isinstance(payload, str) else lossy(payload))
        try:
            _check(payload, held)
        except AssertionError:
            raise
        except Exception as e:  # any other exception is a totality bug
            pytest.fail(f"seed {seed} case {case}: {type(e).__name__}: {e}\n{payload!r:.2000}")


@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(
    st.sampled_from(["@@ unchanged ", "@@ patch ", "@@ edit ", "@@ "]),
    st.text(max_size=40),
    st.lists(st.text(alphabet='=+-"\\ 0123456789abc[]|,.{}:~^@#', max_size=20), max_size=6),
)
def test_arbitrary_answers_only_raise_gcferror(head: str, pairs: str, lines: list[str]) -> None:
    payload = head + pairs + "\n" + "\n".join(lines) + "\n"
    for held in ("alpha\nbeta\n", {"a": [1, {"id": 1}]}, [1, 2]):
        _check(payload, held)
