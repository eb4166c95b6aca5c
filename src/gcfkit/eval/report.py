"""The report of a run: markdown, and a self-contained HTML page with inline SVG charts
(:mod:`gcfkit.measure.charts`).

The HTML has no script, no external style or font and no link that loads anything: it
opens offline. Everything a model wrote is escaped before it is shown.

>>> from gcfkit.eval.scoring import summarise
>>> rec = {"model": "m", "condition": "gcf", "format": "gcf", "answer": "3", "error": None,
...        "question": {"id": "q", "kind": "count", "dataset": "d", "answer_type": "int",
...                     "expected": 3, "text": "How many?"},
...        "tokens": {"prompt": {"o200k_base": 10, "cl100k_base": 11}}}
>>> md = render_markdown(summarise([rec]), {"model": "m"})
>>> "| gcf | 100.0% |" in md
True
>>> "<script" in render_html(summarise([rec]), {"model": "m"})
False
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any, Final

from .. import tokens
from ..measure.charts import grouped_bars
from .scoring import Cell, Summary

__all__ = ["SCRIPTED_MODEL", "render_html", "render_markdown"]

#: The model name the scripted test server reports; a report of its answers says so.
SCRIPTED_MODEL: Final = "gcfkit-scripted"
_ENCODINGS: Final = tokens.ENCODINGS
_FAILURES_SHOWN: Final = 25


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ci(cell: Cell) -> str:
    lo, hi = cell.interval
    return f"{_pct(lo)}–{_pct(hi)}"


def _scripted(records_meta: dict[str, Any]) -> bool:
    return bool(records_meta.get("scripted"))


def _info_lines(s: Summary, meta: dict[str, Any]) -> list[str]:
    lines = []
    for key, label in (
        ("model", "model"),
        ("temperature", "temperature"),
        ("seed", "seed"),
        ("question_seed", "question seed"),
        ("started", "started"),
        ("max_tokens", "max tokens"),
    ):
        if key in meta:
            lines.append(f"{label}: {meta[key]}")
    lines.append(f"datasets: {', '.join(s.datasets)}")
    lines.append(f"answers scored: {s.total}")
    methods = meta.get("token_method") or {e: tokens.method(e) for e in _ENCODINGS}
    lines.append("token counts: " + ", ".join(f"{e} {m}" for e, m in methods.items()))
    for name, note in (meta.get("format_notes") or {}).items():
        lines.append(f"{name}: {note}")
    for name, note in (meta.get("unavailable") or {}).items():
        lines.append(f"not run: {name} ({note})")
    return lines


_SCRIPTED_NOTE: Final = (
    "These answers come from gcfkit's scripted test server, not from a model: the figures "
    "check the harness and say nothing about how well any model reads any format."
)


def _overall_rows(s: Summary) -> list[list[str]]:
    rows = []
    for m in s.models:
        for c in s.conditions:
            cell = s.overall.get((m, c))
            if cell is None:
                continue
            row = [c] if len(s.models) == 1 else [m, c]
            row += [
                _pct(cell.accuracy),
                _ci(cell),
                str(cell.n),
                str(cell.errors),
                str(cell.unparsed),
            ]
            row += [f"{cell.mean_tokens('prompt', e):,.0f}" for e in _ENCODINGS]
            row += [f"{cell.mean_tokens('payload', e):,.0f}" for e in _ENCODINGS]
            rows.append(row)
    return rows


def _overall_head(s: Summary) -> list[str]:
    head = ["format"] if len(s.models) == 1 else ["model", "format"]
    head += ["accuracy", "95% CI", "n", "errors", "unreadable"]
    head += [f"prompt tokens ({e.split('_')[0]})" for e in _ENCODINGS]
    head += [f"data tokens ({e.split('_')[0]})" for e in _ENCODINGS]
    return head


def _grid(
    s: Summary, table: dict[tuple[str, str, str], Cell], rows: Sequence[str]
) -> list[list[str]]:
    out = []
    for m in s.models:
        for r in rows:
            line = [r] if len(s.models) == 1 else [m, r]
            for c in s.conditions:
                cell = table.get((m, c, r))
                line.append(f"{_pct(cell.accuracy)} ({cell.correct}/{cell.n})" if cell else "")
            out.append(line)
    return out


def _pair_rows(s: Summary) -> list[list[str]]:
    rows = []
    for p in s.pairs:
        row = [] if len(s.models) == 1 else [p.model]
        row += [
            f"{p.a} vs {p.b}",
            str(p.n),
            str(p.both),
            str(p.only_a),
            str(p.only_b),
            f"{100 * p.difference:+.1f} pts",
            f"{p.p_value:.3g}",
        ]
        rows.append(row)
    return rows


def _pair_head(s: Summary) -> list[str]:
    head = [] if len(s.models) == 1 else ["model"]
    return [
        *head,
        "pair (A vs B)",
        "questions",
        "both right",
        "only A",
        "only B",
        "A − B",
        "p (exact McNemar)",
    ]


def _failure_rows(s: Summary) -> list[list[str]]:
    rows = []
    for r, sc in s.failures[:_FAILURES_SHOWN]:
        q = r["question"]
        expected = (
            "(the data)"
            if q["answer_type"] == "payload"
            else json.dumps(q["expected"], ensure_ascii=False)
        )
        if r.get("error"):
            got = f"error: {r['error'].get('kind')}: {r['error'].get('message', '')}"
        else:
            got = str(r.get("answer"))
        if sc.detail:
            got = f"{got} [{sc.detail}]"
        rows.append(
            [r["condition"], q["kind"], r.get("text") or q["text"], expected[:80], got[:160]]
        )
    return rows


_FAILURE_HEAD: Final = ["format", "kind", "question", "expected", "answer"]


# ---------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return out


def render_markdown(s: Summary, meta: dict[str, Any]) -> str:
    """The run's report as markdown."""
    out = ["# gcfkit eval report", ""]
    if _scripted(meta):
        out += [f"> **{_SCRIPTED_NOTE}**", ""]
    out += [f"- {line}" for line in _info_lines(s, meta)]
    out += ["", "## Accuracy and tokens per format", ""]
    out += _md_table(_overall_head(s), _overall_rows(s))
    out += [
        "",
        "Accuracy counts errors (no answer after every retry) and unreadable answers as wrong. "
        "Prompt tokens are the whole prompt (instructions with the primer, data, question), "
        "data tokens the tool result(s) alone; both are means per question.",
        "",
        "## Accuracy per question kind",
        "",
    ]
    kind_head = (["kind"] if len(s.models) == 1 else ["model", "kind"]) + s.conditions
    out += _md_table(kind_head, _grid(s, s.by_kind, s.kinds))
    out += ["", "## Accuracy per dataset", ""]
    ds_head = (["dataset"] if len(s.models) == 1 else ["model", "dataset"]) + s.conditions
    out += _md_table(ds_head, _grid(s, s.by_dataset, s.datasets))
    out += ["", "## Paired comparisons (same questions)", ""]
    if s.pairs:
        out += _md_table(_pair_head(s), _pair_rows(s))
    else:
        out.append("Only one format was run.")
    out += ["", f"## Wrong answers (first {_FAILURES_SHOWN} of {len(s.failures)})", ""]
    if s.failures:
        out += _md_table(_FAILURE_HEAD, _failure_rows(s))
    else:
        out.append("None.")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------
# HTML with inline SVG
# ---------------------------------------------------------------------------------------


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    h = "".join(f"<th>{_esc(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}.note{background:#fff4d6;border:1px solid #e0b84a;padding:.6em 1em}"
    "svg{display:block;margin:1em 0}"
)


def render_html(s: Summary, meta: dict[str, Any]) -> str:
    """The run's report as one self-contained HTML page."""
    label = (lambda m, c: c) if len(s.models) == 1 else (lambda m, c: f"{m} · {c}")
    groups = [label(m, c) for m in s.models for c in s.conditions if (m, c) in s.overall]
    acc = {(label(m, c), "accuracy"): cell.accuracy for (m, c), cell in s.overall.items()}
    cis = {(label(m, c), "accuracy"): cell.interval for (m, c), cell in s.overall.items()}
    tok = {
        (label(m, c), e): cell.mean_tokens("prompt", e)
        for (m, c), cell in s.overall.items()
        for e in _ENCODINGS
    }
    kind_vals = {
        (k if len(s.models) == 1 else f"{m} · {k}", c): cell.accuracy
        for (m, c, k), cell in s.by_kind.items()
    }
    kind_groups = [k if len(s.models) == 1 else f"{m} · {k}" for m in s.models for k in s.kinds]
    body = ["<h1>gcfkit eval report</h1>"]
    if _scripted(meta):
        body.append(f'<p class="note"><strong>{_esc(_SCRIPTED_NOTE)}</strong></p>')
    body.append("<ul>" + "".join(f"<li>{_esc(x)}</li>" for x in _info_lines(s, meta)) + "</ul>")
    body.append("<h2>Accuracy and tokens per format</h2>")
    body.append(
        grouped_bars(
            "Accuracy (95% Wilson interval)",
            groups,
            ["accuracy"],
            acc,
            intervals=cis,
            maximum=1.0,
            fmt="{:.1%}",
        )
    )
    body.append(
        grouped_bars(
            "Mean prompt tokens per question", groups, list(_ENCODINGS), tok, fmt="{:,.0f}"
        )
    )
    body.append(_html_table(_overall_head(s), _overall_rows(s)))
    body.append("<h2>Accuracy per question kind</h2>")
    body.append(
        grouped_bars(
            "Accuracy per kind", kind_groups, s.conditions, kind_vals, maximum=1.0, fmt="{:.0%}"
        )
    )
    kind_head = (["kind"] if len(s.models) == 1 else ["model", "kind"]) + s.conditions
    body.append(_html_table(kind_head, _grid(s, s.by_kind, s.kinds)))
    body.append("<h2>Accuracy per dataset</h2>")
    ds_head = (["dataset"] if len(s.models) == 1 else ["model", "dataset"]) + s.conditions
    body.append(_html_table(ds_head, _grid(s, s.by_dataset, s.datasets)))
    body.append("<h2>Paired comparisons (same questions)</h2>")
    body.append(
        _html_table(_pair_head(s), _pair_rows(s)) if s.pairs else "<p>Only one format was run.</p>"
    )
    body.append(f"<h2>Wrong answers (first {_FAILURES_SHOWN} of {len(s.failures)})</h2>")
    body.append(_html_table(_FAILURE_HEAD, _failure_rows(s)) if s.failures else "<p>None.</p>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>gcfkit eval report</title><style>{_STYLE}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
