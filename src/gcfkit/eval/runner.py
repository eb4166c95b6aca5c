"""Plan an eval (questions x formats), ask the model, store every prompt and answer.

:func:`plan` builds one :class:`Task` per (question, condition); a condition is a format
with or without its primer (``gcf`` and ``gcf:noprimer``). :func:`execute` asks the model
under a concurrency bound and a requests-per-minute limit, retrying what may succeed
(429, 5xx, timeouts, malformed bodies) with exponential backoff and jitter, never sooner
than a ``Retry-After`` asks (a 429 pauses every worker, since the limit is shared). Each
finished task is appended to the run's JSONL file at once, after a header line that
records the model, temperature, seed and the plan, so an interrupted run can resume and
any run can be re-scored offline (:mod:`gcfkit.eval.scoring`).

>>> c = parse_conditions(["gcf", "json:noprimer"], primer="both")
>>> [x.name for x in c]
['gcf', 'gcf:noprimer', 'json']
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Literal

from .. import __version__, tokens
from ..errors import ConfigError
from .datasets import Dataset, load_datasets
from .formats import EvalFormat, get_format
from .models import Model, ModelError, Params
from .prompts import Prompt, build_prompt, extract_data, extract_results, question_line
from .questions import Question, generate_questions

__all__ = [
    "SCHEMA",
    "Condition",
    "Plan",
    "RateLimiter",
    "RetryPolicy",
    "Task",
    "execute",
    "parse_conditions",
    "plan",
    "read_run",
]

SCHEMA: Final = 1
PrimerMode = Literal["proxy", "none", "both"]


@dataclass(frozen=True)
class Condition:
    """A format as the model sees it: ``name`` is ``FORMAT`` or ``FORMAT:noprimer``;
    ``primer`` is None for a format that has no primer."""

    format: str
    primer: bool | None

    @property
    def name(self) -> str:
        return f"{self.format}:noprimer" if self.primer is False else self.format


def parse_conditions(names: Sequence[str], *, primer: PrimerMode = "proxy") -> list[Condition]:
    """Conditions from ``--formats`` entries; ``primer="both"`` adds a no-primer twin of
    every format that has a primer, ``"none"`` drops every primer. A format without a
    primer is one condition whatever the mode (``json`` and ``json:noprimer`` are the same
    prompt)."""
    out: list[Condition] = []
    for raw in names:
        name, _, flag = raw.strip().partition(":")
        if flag not in ("", "noprimer"):
            raise ConfigError("invalid_option", f"bad format {raw!r}: FORMAT or FORMAT:noprimer")
        fmt = get_format(name)
        has = bool(fmt.primer) and fmt.available
        wanted = [flag != "noprimer" and primer != "none"]
        if primer == "both" and not flag:
            wanted = [True, False]
        for p in wanted:
            c = Condition(fmt.name, p if has else None)
            if c not in out:
                out.append(c)
    return out


@dataclass(frozen=True)
class Task:
    """One prompt to ask: a question in one condition, with its token counts."""

    id: str
    question: Question
    condition: Condition
    prompt: Prompt
    tokens: dict[str, dict[str, int]]


@dataclass
class Plan:
    """What a run will ask: the tasks, the datasets, and the formats it had to skip."""

    tasks: list[Task]
    datasets: list[Dataset]
    conditions: list[Condition]
    unavailable: dict[str, str] = field(default_factory=dict)
    header: dict[str, Any] = field(default_factory=dict)


def _count_all(text: str, cache: dict[str, dict[str, int]]) -> dict[str, int]:
    got = cache.get(text)
    if got is None:
        got = cache[text] = {e: tokens.count(text, e) for e in tokens.ENCODINGS}
    return got


def plan(
    *,
    datasets: Sequence[str],
    formats: Sequence[str],
    kinds: Sequence[str] | None = None,
    per_kind: int = 3,
    seed: int = 0,
    rows: int = 100,
    corpus: str | None = None,
    primer: PrimerMode = "proxy",
) -> Plan:
    """The tasks of a run, in a seeded order that interleaves formats (so a slow or
    rate-limited stretch of the run does not fall on one format)."""
    conditions = parse_conditions(formats, primer=primer)
    unavailable: dict[str, str] = {}
    usable: list[tuple[Condition, EvalFormat]] = []
    for c in conditions:
        fmt = get_format(c.format)
        if fmt.available:
            usable.append((c, fmt))
        else:
            unavailable[c.format] = fmt.note
    loaded: list[Dataset] = []
    for spec in datasets:
        loaded.extend(load_datasets(spec, seed=seed, rows=rows, corpus=corpus))
    cache: dict[str, dict[str, int]] = {}
    tasks: list[Task] = []
    for ds in loaded:
        for q in generate_questions(ds, kinds=kinds, per_kind=per_kind, seed=seed):
            for c, fmt in usable:
                p = build_prompt(q, ds, fmt, primer=bool(c.primer))
                payload = "\n".join(extract_results(p.user)) or (extract_data(p.user) or "")
                counts = {
                    "prompt": _count_all(p.text, cache),
                    "payload": _count_all(payload, cache),
                }
                tasks.append(Task(f"{q.id}@{c.name}", q, c, p, counts))
    random.Random(f"order:{seed}").shuffle(tasks)
    header = {
        "type": "run",
        "schema": SCHEMA,
        "gcfkit": __version__,
        "question_seed": seed,
        "datasets": [d.name for d in loaded],
        "dataset_sources": {d.name: d.source for d in loaded},
        "conditions": [c.name for c, _ in usable],
        "unavailable": unavailable,
        "format_notes": {c.format: f.note for c, f in usable if f.note},
        "kinds": list(kinds) if kinds is not None else None,
        "per_kind": per_kind,
        "rows": rows,
        "tasks": len(tasks),
        "token_method": {e: tokens.method(e) for e in tokens.ENCODINGS},
    }
    return Plan(tasks, loaded, [c for c, _ in usable], unavailable, header)


# ---------------------------------------------------------------------------------------
# Rate limits and retries
# ---------------------------------------------------------------------------------------


class RateLimiter:
    """At most ``rpm`` request starts per minute (None: no limit), and a shared pause that
    a rate-limited answer sets for every worker."""

    def __init__(self, rpm: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        if rpm is not None and rpm <= 0:
            raise ConfigError("invalid_option", f"--rpm must be positive, not {rpm}")
        self.interval = 60.0 / rpm if rpm else 0.0
        self._clock = clock
        self._next = 0.0
        self._paused_until = 0.0
        self._lock = asyncio.Lock()

    def pause(self, seconds: float) -> None:
        """No request starts for ``seconds`` from now."""
        self._paused_until = max(self._paused_until, self._clock() + seconds)

    async def acquire(self) -> None:
        async with self._lock:
            while True:
                now = self._clock()
                start = max(self._next, self._paused_until)
                if start <= now:
                    break
                await asyncio.sleep(start - now)
            self._next = max(now, self._next) + self.interval


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; the n-th wait is ``base * 2**(n-1)`` seconds scaled by a
    jitter in [0.5, 1], at most ``cap``, and never less than the server's Retry-After."""

    attempts: int = 5
    base: float = 1.0
    cap: float = 60.0

    def wait(self, attempt: int, error: ModelError, rng: random.Random) -> float:
        backoff = float(min(self.cap, self.base * 2.0 ** (attempt - 1)) * rng.uniform(0.5, 1.0))
        if error.retry_after is not None:
            return max(backoff, float(error.retry_after))
        return backoff


# ---------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _record(task: Task, model: Model, params: Params) -> dict[str, Any]:
    return {
        "type": "answer",
        "task": task.id,
        "question": task.question.to_json(),
        "condition": task.condition.name,
        "format": task.condition.format,
        "primer": bool(task.condition.primer),
        "text": question_line(task.prompt.user),
        "prompt": {"system": task.prompt.system, "user": task.prompt.user},
        "tokens": task.tokens,
        "model": model.spec,
        "temperature": params.temperature,
        "seed": params.seed,
        "max_tokens": params.max_tokens,
    }


async def _ask(
    task: Task,
    model: Model,
    params: Params,
    limiter: RateLimiter,
    retry: RetryPolicy,
    sem: asyncio.Semaphore,
) -> dict[str, Any]:
    rec = _record(task, model, params)
    attempts: list[dict[str, Any]] = []
    rng = random.Random(f"backoff:{task.id}")
    async with sem:
        for n in range(1, retry.attempts + 1):
            await limiter.acquire()
            try:
                c = await model.complete(task.prompt, params)
            except ModelError as e:
                entry: dict[str, Any] = {"attempt": n, **e.to_json()}
                attempts.append(entry)
                if not e.retryable or n == retry.attempts:
                    rec.update(answer=None, error=e.to_json())
                    break
                wait = retry.wait(n, e, rng)
                entry["waited"] = round(wait, 3)
                if e.kind == "rate_limited":
                    limiter.pause(wait)
                await asyncio.sleep(wait)
                continue
            rec.update(
                answer=c.text,
                error=None,
                reported_model=c.model,
                finish_reason=c.finish_reason,
                usage=c.usage,
                latency=round(c.latency, 4),
                sent=c.sent,
            )
            break
    rec["attempts"] = attempts
    rec["time"] = _now()
    return rec


async def execute(
    model: Model,
    tasks: Sequence[Task],
    out: IO[str],
    *,
    params: Params,
    concurrency: int = 4,
    rpm: float | None = None,
    retry: RetryPolicy | None = None,
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Ask every task; append each record to ``out`` (flushed) as it completes."""
    if concurrency < 1:
        raise ConfigError("invalid_option", f"--concurrency must be >= 1, not {concurrency}")
    limiter = RateLimiter(rpm)
    policy = retry or RetryPolicy()
    sem = asyncio.Semaphore(concurrency)
    records: list[dict[str, Any]] = []
    pending = [asyncio.ensure_future(_ask(t, model, params, limiter, policy, sem)) for t in tasks]
    try:
        for fut in asyncio.as_completed(pending):
            rec = await fut
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            out.flush()
            records.append(rec)
            if progress is not None:
                progress(len(records), len(tasks), rec)
    finally:
        for p in pending:
            p.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await model.aclose()
    return records


def run_header(plan_: Plan, model: Model, params: Params, **extra: Any) -> dict[str, Any]:
    """The run's first JSONL line: the plan plus the model and its sampling parameters."""
    return {
        **plan_.header,
        "model": model.spec,
        "temperature": params.temperature,
        "seed": params.seed,
        "max_tokens": params.max_tokens,
        "timeout": params.timeout,
        "started": _now(),
        **extra,
    }


def read_run(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, answer records) of a stored run; a later record of a task replaces an
    earlier one (a resumed run re-asks what had failed)."""
    header: dict[str, Any] = {}
    by_task: dict[str, dict[str, Any]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ConfigError("io_error", f"cannot read {path}: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise ConfigError("malformed_config", f"{path}:{n}: not a JSON line") from None
        if rec.get("type") == "run":
            header = header or rec
        elif rec.get("type") == "answer":
            by_task[rec["task"]] = rec
    if not header:
        raise ConfigError("malformed_config", f"{path}: no run header line")
    return header, list(by_task.values())


def done_tasks(records: Sequence[dict[str, Any]]) -> set[str]:
    """Tasks that have an answer (a failed one is asked again on resume)."""
    return {r["task"] for r in records if r.get("error") is None and r.get("answer") is not None}
