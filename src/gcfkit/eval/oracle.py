"""A reference reader: answers an eval prompt by decoding its payloads with gcfkit.

It is what the scripted test server says when its script says "correct", and what
``examples/eval_command_model.py`` prints: it reads the question back into its query
(:func:`gcfkit.eval.questions.parse_question`), decodes each tool result strictly (JSON,
GCF in any profile, a delta or an unchanged answer applied to the first result, TOON when
installed) and evaluates the query on what it read. A prompt it cannot read raises
ValueError. It is no model: a format that carries the data losslessly always gets 100%.

>>> from gcfkit.eval.datasets import load_dataset
>>> from gcfkit.eval.questions import generate_questions
>>> from gcfkit.eval.formats import get_format
>>> from gcfkit.eval.prompts import build_prompt
>>> ds = load_dataset("synthetic:records:12", seed=2)
>>> q = generate_questions(ds, kinds=["count_where"], per_kind=1, seed=2)[0]
>>> answer(build_prompt(q, ds, get_format("gcf"), primer=True).user) == str(q.expected)
True
"""

from __future__ import annotations

import json
from typing import Any

from ..jsonio import loads_json
from .formats import FORMATS, EvalFormat, format_by_label, get_format
from .prompts import extract_data, extract_results, question_line
from .questions import evaluate, parse_question

__all__ = ["answer", "format_answer", "read_result"]


# Strict readers first: a GCF or JSON reader refuses anything else loudly, while a lenient
# one (TOON's) might read a GCF text as something.
_READ_FIRST = ("gcf", "gcf-ext", "json")


def _candidates() -> list[EvalFormat]:
    names = [n for n in _READ_FIRST if n in FORMATS]
    names += [n for n in FORMATS if n not in names]
    return [f for f in (get_format(n) for n in names) if f.available]


def read_result(text: str) -> Any:
    """Decode one tool result text in whichever available format reads it strictly."""
    errors = []
    for fmt in _candidates():
        try:
            return fmt.decode(text)
        except Exception as e:
            errors.append(f"{fmt.name}: {e}")
    raise ValueError("no format reads this result: " + "; ".join(errors)[:300])


def _read_pair(first: str, second: str) -> Any:
    errors = []
    for fmt in _candidates():
        try:
            return fmt.read_after(first, second)
        except Exception as e:
            errors.append(f"{fmt.name}: {e}")
    raise ValueError("no format reads these results: " + "; ".join(errors)[:300])


def format_answer(value: Any) -> str:
    """How a reader states a value: strings bare, everything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def answer(user: str) -> str:
    """The correct answer to an eval prompt's user part (see the module docstring)."""
    query = parse_question(question_line(user))
    if query.op == "generate":
        data = extract_data(user)
        fmt = format_by_label(query.format)
        if data is None or fmt is None:
            raise ValueError(f"cannot write {query.format!r}")
        return fmt.render(loads_json(data), "", None)
    results = extract_results(user)
    if not results:
        raise ValueError("the prompt holds no tool result")
    if query.after and len(results) >= 2:
        value = _read_pair(results[0], results[1])
    else:
        value = read_result(results[0])
    return format_answer(evaluate(query, value))
