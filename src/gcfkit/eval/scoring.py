"""Scoring a stored run: answer normalisation per question kind, accuracy with Wilson
intervals, paired comparisons between formats (exact McNemar test) and tokens per question.

Everything here reads only the run's JSONL records, so a run is re-scored offline, and a
change to normalisation re-scores old runs the same way.

>>> score_answer("**42**", "int", 42).correct
True
>>> score_answer("The answer is 41.", "int", 42).correct
False
>>> lo, hi = wilson(9, 10)
>>> round(lo, 3), round(hi, 3)
(0.596, 0.982)
>>> mcnemar_exact(0, 6)
0.03125
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..jsonio import same_value
from .formats import get_format
from .questions import KINDS

__all__ = [
    "Cell",
    "Pair",
    "Score",
    "Summary",
    "mcnemar_exact",
    "normalise",
    "score_answer",
    "score_records",
    "summarise",
    "wilson",
]

_FENCE: Final = re.compile(r"\A```[^\n`]*\n(.*?)\n?```\s*\Z", re.S)
_INT: Final = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.0+)?\Z")
_NUM: Final = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
_ANY_NUM: Final = re.compile(r"(?<![\w.])[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
_LEAD: Final = re.compile(r"\A(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)\s*", re.I)
_PRESENCE: Final = {
    "absent": "absent",
    "missing": "absent",
    "null": "null",
    "value": "value",
    "set": "value",
}


@dataclass(frozen=True)
class Score:
    """How one answer scored: ``parsed`` False means the answer had no readable form for
    its kind (it counts as wrong); ``got`` is what it was read as."""

    correct: bool
    parsed: bool
    got: Any = None
    detail: str = ""


def _strip(text: str) -> str:
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1).strip()
    for mark in ("**", "__", "`"):
        if len(t) > 2 * len(mark) and t.startswith(mark) and t.endswith(mark):
            t = t[len(mark) : -len(mark)].strip()
    return t


def _unquote(t: str) -> str:
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        try:
            v = json.loads(t) if t[0] == '"' else t[1:-1]
        except ValueError:
            v = t[1:-1]
        return v if isinstance(v, str) else t
    return t


def _number(t: str, pattern: re.Pattern[str]) -> float | int | None:
    t = t.rstrip(".")
    if not pattern.match(t):
        return None
    t = t.replace(",", "")
    v = float(t)
    return int(v) if pattern is _INT else v


def normalise(text: str, answer_type: str) -> tuple[bool, Any]:
    """(parsed, value): an answer read as its kind says. Lenient about wrapping (code
    fences, bold, quotes, "The answer is", a final period, thousands separators), strict
    about the value itself.

    >>> normalise("1,204", "int"), normalise("`Null`", "presence")
    ((True, 1204), (True, 'null'))
    """
    t = _LEAD.sub("", _strip(text)).strip()
    if answer_type in ("int", "number"):
        pattern = _INT if answer_type == "int" else _NUM
        v = _number(t, pattern)
        if v is None:
            # A sentence with exactly one number in it says that number.
            found = _ANY_NUM.findall(t)
            if len(found) == 1:
                v = _number(found[0], pattern)
        return (v is not None), v
    if answer_type == "presence":
        words = re.findall(r"[a-z]+", t.lower())
        hits = {_PRESENCE[w] for w in words if w in _PRESENCE}
        if len(hits) == 1:
            return True, hits.pop()
        return False, None
    if answer_type == "bool":
        w = t.rstrip(".").strip().lower()
        if w in ("true", "yes"):
            return True, True
        if w in ("false", "no"):
            return True, False
        return False, None
    if answer_type == "null":
        return True, None if t.rstrip(".").lower() in ("null", "none") else _unquote(t)
    if answer_type == "payload":
        return True, _strip(text)
    return True, _unquote(t)


def score_answer(text: str | None, answer_type: str, expected: Any, fmt: str = "") -> Score:
    """Score one answer text against the ground truth (``fmt`` decodes payloads)."""
    if text is None:
        return Score(False, False, detail="no answer")
    parsed, got = normalise(text, answer_type)
    if not parsed:
        return Score(False, False, detail="unreadable answer")
    if answer_type == "payload":
        try:
            value = get_format(fmt).decode(got)
        except Exception as e:
            return Score(False, True, None, f"invalid: {type(e).__name__}: {e}"[:200])
        ok = same_value(value, expected, key_order=False)
        return Score(ok, True, value, "" if ok else "valid, but not the given data")
    if answer_type == "number" or answer_type == "int":
        ok = isinstance(expected, (int, float)) and math.isclose(
            float(got), float(expected), rel_tol=1e-9, abs_tol=1e-9
        )
        return Score(ok, True, got)
    # A sentence-final period is punctuation unless the value has one.
    if (
        answer_type == "string"
        and isinstance(got, str)
        and got != expected
        and got.endswith(".")
        and not str(expected).endswith(".")
    ):
        got = got[:-1]
    return Score(same_value(got, expected, key_order=False), True, got)


def score_records(records: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], Score]]:
    """Every answer record with its score."""
    out = []
    for r in records:
        q = r["question"]
        s = score_answer(r.get("answer"), q["answer_type"], q["expected"], r.get("format", ""))
        out.append((r, s))
    return out


# ---------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value (the sign test on the discordant pairs)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2.0 * float(tail))


@dataclass
class Cell:
    """Accuracy of one group of answers, with the tokens its prompts cost."""

    n: int = 0
    correct: int = 0
    unparsed: int = 0
    errors: int = 0
    prompt_tokens: dict[str, int] = field(default_factory=dict)
    payload_tokens: dict[str, int] = field(default_factory=dict)

    def add(self, rec: dict[str, Any], s: Score) -> None:
        self.n += 1
        self.correct += s.correct
        self.unparsed += (not s.parsed) and rec.get("error") is None
        self.errors += rec.get("error") is not None
        for key, into in (("prompt", self.prompt_tokens), ("payload", self.payload_tokens)):
            for enc, v in (rec.get("tokens") or {}).get(key, {}).items():
                into[enc] = into.get(enc, 0) + int(v)

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.correct, self.n)

    def mean_tokens(self, key: str, encoding: str) -> float:
        src = self.prompt_tokens if key == "prompt" else self.payload_tokens
        return src.get(encoding, 0) / self.n if self.n else 0.0


@dataclass(frozen=True)
class Pair:
    """A paired comparison of two conditions over the questions both answered."""

    model: str
    a: str
    b: str
    n: int
    both: int
    only_a: int
    only_b: int
    p_value: float

    @property
    def difference(self) -> float:
        return (self.only_a - self.only_b) / self.n if self.n else 0.0


@dataclass
class Summary:
    """Every table a report shows."""

    models: list[str]
    conditions: list[str]
    kinds: list[str]
    datasets: list[str]
    overall: dict[tuple[str, str], Cell]
    by_kind: dict[tuple[str, str, str], Cell]
    by_dataset: dict[tuple[str, str, str], Cell]
    pairs: list[Pair]
    failures: list[tuple[dict[str, Any], Score]]
    total: int


def _order(values: Iterable[str], preferred: Sequence[str] = ()) -> list[str]:
    present = list(dict.fromkeys(values))
    ordered = dict.fromkeys(v for v in preferred if v in present)
    ordered.update(dict.fromkeys(present))
    return list(ordered)


def summarise(
    records: Sequence[dict[str, Any]],
    *,
    conditions: Sequence[str] = (),
    datasets: Sequence[str] = (),
    scorer: Callable[[Iterable[dict[str, Any]]], list[tuple[dict[str, Any], Score]]] = (
        score_records
    ),
) -> Summary:
    """All aggregates of a run (or of several runs: the model is a dimension)."""
    scored = scorer(records)
    models = _order(r["model"] for r, _ in scored)
    conds = _order((r["condition"] for r, _ in scored), conditions)
    kinds = _order((r["question"]["kind"] for r, _ in scored), list(KINDS))
    dsets = _order((r["question"]["dataset"] for r, _ in scored), datasets)
    overall: dict[tuple[str, str], Cell] = {}
    by_kind: dict[tuple[str, str, str], Cell] = {}
    by_ds: dict[tuple[str, str, str], Cell] = {}
    outcome: dict[tuple[str, str], dict[str, bool]] = {}
    for r, s in scored:
        m, c = r["model"], r["condition"]
        q = r["question"]
        overall.setdefault((m, c), Cell()).add(r, s)
        by_kind.setdefault((m, c, q["kind"]), Cell()).add(r, s)
        by_ds.setdefault((m, c, q["dataset"]), Cell()).add(r, s)
        outcome.setdefault((m, q["id"]), {})[c] = s.correct
    pairs = []
    for m in models:
        for i, a in enumerate(conds):
            for b in conds[i + 1 :]:
                both = only_a = only_b = n = 0
                for (mm, _), got in outcome.items():
                    if mm != m or a not in got or b not in got:
                        continue
                    n += 1
                    both += got[a] and got[b]
                    only_a += got[a] and not got[b]
                    only_b += got[b] and not got[a]
                if n:
                    p = mcnemar_exact(only_a, only_b)
                    pairs.append(Pair(m, a, b, n, both, only_a, only_b, p))
    failures = [(r, s) for r, s in scored if not s.correct]
    return Summary(
        models, conds, kinds, dsets, overall, by_kind, by_ds, pairs, failures, len(scored)
    )
