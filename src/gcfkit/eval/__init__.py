"""``gcfkit eval``: do models read (and write) each format as well as JSON?

A harness, not a verdict: it asks a model questions with deterministic answers about the
same data rendered in several formats (each with the primer the proxy would send), stores
every prompt and answer, and reports accuracy with confidence intervals, paired
comparisons between formats and tokens per question. One module per concept:

* :mod:`~gcfkit.eval.datasets`: TOON's datasets, MCP corpus results, synthetic records
  and graphs, sampled by seed;
* :mod:`~gcfkit.eval.questions`: question kinds and their ground truth;
* :mod:`~gcfkit.eval.formats`: the format registry (JSON, TOON, GCF, GCF with extensions);
* :mod:`~gcfkit.eval.prompts`: the one prompt builder;
* :mod:`~gcfkit.eval.models`: OpenAI-compatible, Anthropic and command models;
* :mod:`~gcfkit.eval.runner`: rate limits, retries, concurrency, the JSONL store;
* :mod:`~gcfkit.eval.scoring` and :mod:`~gcfkit.eval.report`: statistics, markdown, HTML;
* :mod:`~gcfkit.eval.oracle` and :mod:`~gcfkit.eval.scripted`: a reference reader and a
  scripted server that test the harness (they are not models).

>>> from gcfkit.eval import run_plan
>>> p = run_plan(datasets=["synthetic:records:5"], formats=["json", "gcf"], per_kind=1)
>>> sorted({t.condition.name for t in p.tasks})
['gcf', 'json']
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .models import Model, Params
from .report import SCRIPTED_MODEL, render_html, render_markdown
from .runner import (
    Plan,
    PrimerMode,
    RetryPolicy,
    done_tasks,
    execute,
    plan,
    read_run,
    run_header,
)
from .scoring import Summary, summarise

__all__ = ["Outputs", "rescore", "run", "run_plan", "write_reports"]

run_plan = plan


@dataclass(frozen=True)
class Outputs:
    """Where a run's files went, and its summary."""

    run: Path
    markdown: Path
    html: Path
    summary: Summary


def _scripted(records: Sequence[dict[str, Any]]) -> bool:
    models = {str(r.get("reported_model") or "") for r in records if r.get("error") is None}
    return bool(models) and all(m.startswith(SCRIPTED_MODEL) for m in models)


def write_reports(
    header: dict[str, Any], records: Sequence[dict[str, Any]], out_dir: Path
) -> tuple[Path, Path, Summary]:
    """Score ``records`` and write ``report.md`` and ``report.html`` into ``out_dir``."""
    summary = summarise(
        records, conditions=header.get("conditions") or (), datasets=header.get("datasets") or ()
    )
    meta = {**header, "scripted": _scripted(records)}
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(render_markdown(summary, meta), encoding="utf-8")
    page.write_text(render_html(summary, meta), encoding="utf-8")
    return md, page, summary


def run(
    model: Model,
    out_dir: str | Path,
    *,
    datasets: Sequence[str],
    formats: Sequence[str],
    kinds: Sequence[str] | None = None,
    per_kind: int = 3,
    seed: int = 0,
    rows: int = 100,
    corpus: str | None = None,
    primer: PrimerMode = "proxy",
    params: Params | None = None,
    concurrency: int = 4,
    rpm: float | None = None,
    retry: RetryPolicy | None = None,
    resume: bool = False,
    progress: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> Outputs:
    """Plan, ask, store (``run.jsonl``) and report (``report.md``, ``report.html``).

    With ``resume``, tasks already answered in ``out_dir/run.jsonl`` are not asked again
    (the plan must be the same one: same datasets, formats, kinds and seed).
    """
    params = params or Params()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "run.jsonl"
    p: Plan = plan(
        datasets=datasets,
        formats=formats,
        kinds=kinds,
        per_kind=per_kind,
        seed=seed,
        rows=rows,
        corpus=corpus,
        primer=primer,
    )
    previous: list[dict[str, Any]] = []
    if resume and path.exists():
        header, previous = read_run(path)
        _check_same_plan(header, p)
        skip = done_tasks(previous)
        todo = [t for t in p.tasks if t.id not in skip]
        mode = "a"
    else:
        header = run_header(p, model, params)
        todo = p.tasks
        mode = "w"
    with open(path, mode, encoding="utf-8") as f:
        if mode == "w":
            f.write(json.dumps(header, ensure_ascii=False) + "\n")
            f.flush()
        asyncio.run(
            execute(
                model,
                todo,
                f,
                params=params,
                concurrency=concurrency,
                rpm=rpm,
                retry=retry,
                progress=progress,
            )
        )
    header, records = read_run(path)
    md, page, summary = write_reports(header, records, out)
    return Outputs(path, md, page, summary)


def _check_same_plan(header: dict[str, Any], p: Plan) -> None:
    from ..errors import ConfigError

    for key in ("question_seed", "datasets", "conditions", "kinds", "per_kind", "rows"):
        if header.get(key) != p.header.get(key):
            raise ConfigError(
                "invalid_option",
                f"--resume: the stored run has {key}={header.get(key)!r}, this one "
                f"{p.header.get(key)!r}; use another --out or the same options",
            )


def rescore(runs: Sequence[str | Path], out_dir: str | Path) -> tuple[Path, Path, Summary]:
    """Re-score stored runs offline (several runs: one report, the model as a dimension)."""
    headers: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for r in runs:
        h, recs = read_run(r)
        headers.append(h)
        records.extend(recs)
    header = dict(headers[0])
    if len(headers) > 1:
        header["model"] = ", ".join(dict.fromkeys(str(h.get("model")) for h in headers))
        conds: dict[str, None] = {}
        for h in headers:
            conds.update(dict.fromkeys(h.get("conditions") or ()))
        header["conditions"] = list(conds)
    return write_reports(header, records, Path(out_dir))
