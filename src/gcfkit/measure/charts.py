"""Small SVG charts, drawn as text: the savings dashboard, the verify report and the eval
report use them.

No script, no style sheet, nothing loaded from anywhere: each chart is one ``<svg>`` element
that can be inlined into any page (every label is escaped). Colours are the same in every
before/after chart: what the server sent in grey, what gcfkit sent in blue;
:func:`grouped_bars` (any number of series) takes its colours from :data:`SERIES`.

>>> svg = before_after_bars("tokens per server", [("git", 1200, 900), ("time", 50, 30)])
>>> svg.startswith("<svg") and svg.endswith("</svg>") and "git" in svg
True
>>> "<script" in before_after_bars("x", [("<script>", 1, 1)])
False
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Final

from .savings import signed_change

__all__ = [
    "AFTER",
    "BEFORE",
    "SERIES",
    "before_after_bars",
    "change",
    "grouped_bars",
    "timeline_chart",
]

#: Fill of "what the server sent" and of "what gcfkit sent".
BEFORE: Final = "#c7cedb"
AFTER: Final = "#2f6fde"
#: The fills of :func:`grouped_bars`' series, in order (and again past the last).
SERIES: Final = ("#3b6fb6", "#e07b39", "#4a9a5b", "#b5475a", "#7d5fb2", "#8c7a3c", "#3a9ca6")
_TEXT: Final = "#1f2937"
_MUTED: Final = "#6b7280"
_GRID: Final = "#e5e7eb"
_FONT: Final = "font-family=\"system-ui,-apple-system,'Segoe UI',Roboto,sans-serif\""


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _svg(width: int, height: int, title: str, attrs: str = f" {_FONT}") -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}"{attrs}>'
    )


def _num(n: float) -> str:
    return f"{n:,.0f}"


def change(before: int, after: int) -> str:
    """The change from ``before`` to ``after`` as a signed percentage, a minus sign for a saving.

    >>> change(200, 150), change(100, 120), change(0, 0)
    ('−25%', '+20%', '±0%')
    """
    return signed_change(before, after, digits=0)


def _legend(x: float, y: float) -> str:
    return (
        f'<rect x="{x}" y="{y - 9}" width="10" height="10" rx="2" fill="{BEFORE}"/>'
        f'<text x="{x + 14}" y="{y}" font-size="11" fill="{_MUTED}">server sent</text>'
        f'<rect x="{x + 96}" y="{y - 9}" width="10" height="10" rx="2" fill="{AFTER}"/>'
        f'<text x="{x + 110}" y="{y}" font-size="11" fill="{_MUTED}">gcfkit sent</text>'
    )


def before_after_bars(
    title: str,
    rows: Sequence[tuple[str, int, int]],
    *,
    unit: str = "tokens",
    width: int = 720,
    max_rows: int = 30,
) -> str:
    """Horizontal bars, two per row (before, after), with the saving at the end of each.

    ``rows`` are ``(label, before, after)``; past ``max_rows`` the rest is summed into one
    "others" row, so the chart stays readable.
    """
    shown = list(rows[:max_rows])
    if len(rows) > max_rows:
        rest = rows[max_rows:]
        shown.append((f"{len(rest)} others", sum(r[1] for r in rest), sum(r[2] for r in rest)))
    # On a narrow chart (a phone) the labels and the bars give way, never the figures.
    label_w = min(260, width // 3, max([60, *(7 * len(r[0]) + 12 for r in shown)]))
    value_w = 200
    plot_w = max(60, width - label_w - value_w)
    bar, pair_gap = 11, 10
    top = 44
    height = top + len(shown) * (2 * bar + pair_gap) + 8
    biggest = max([1, *(max(b, a) for _, b, a in shown)])
    out = [
        _svg(width, height, title),
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{_TEXT}">{_esc(title)}</text>',
        _legend(label_w, 34),
    ]
    y = top
    for label, before, after in shown:
        short = label if len(label) * 7 + 12 <= label_w else label[: max(1, label_w // 7 - 2)] + "…"
        out.append(
            f'<text x="{label_w - 8}" y="{y + bar + 4}" font-size="12" text-anchor="end" '
            f'fill="{_TEXT}"><title>{_esc(label)}</title>{_esc(short)}</text>'
        )
        for i, (value, fill) in enumerate(((before, BEFORE), (after, AFTER))):
            w = max(1.0, plot_w * value / biggest) if value else 0.0
            out.append(
                f'<rect x="{label_w}" y="{y + i * bar}" width="{w:.1f}" height="{bar - 2}" '
                f'rx="2" fill="{fill}"><title>{_esc(label)}: {_num(value)} {unit} '
                f"{'sent by the server' if i == 0 else 'sent by gcfkit'}</title></rect>"
            )
        saved = 1 - after / before if before else 0.0
        out.append(
            f'<text x="{label_w + plot_w + 8}" y="{y + bar + 4}" font-size="12" fill="{_TEXT}">'
            f"{_num(before)} → {_num(after)}"
            f'<tspan fill="{AFTER if saved > 0 else _MUTED}" font-weight="600"> '
            f"{change(before, after)}</tspan></text>"
        )
        y += 2 * bar + pair_gap
    out.append("</svg>")
    return "".join(out)


def timeline_chart(
    title: str,
    points: Sequence[tuple[str, int, int]],
    *,
    unit: str = "tokens",
    width: int = 720,
    height: int = 220,
) -> str:
    """Columns over time, two per period (before, after); ``points`` are
    ``(period label, before, after)``, oldest first. Axis labels are thinned to fit."""
    left, right, top, bottom = 64, 12, 44, 36
    plot_w = width - left - right
    plot_h = height - top - bottom
    n = max(1, len(points))
    slot = plot_w / n
    biggest = max([1, *(max(b, a) for _, b, a in points)])
    out = [
        _svg(width, height, title),
        f'<text x="0" y="16" font-size="14" font-weight="600" fill="{_TEXT}">{_esc(title)}</text>',
        _legend(left, 34),
    ]
    for i in range(5):
        value = biggest * i / 4
        y = top + plot_h - plot_h * i / 4
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="{_GRID}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end" '
            f'fill="{_MUTED}">{_num(value)}</text>'
        )
    widest = max([1, *(len(label) for label, _, _ in points)])
    every = max(1, -(-n * (6 * widest + 12) // max(1, int(plot_w))))  # labels never overlap
    col = max(1.0, min(18.0, slot * 0.38))
    for i, (label, before, after) in enumerate(points):
        x = left + i * slot + slot / 2
        for j, (value, fill) in enumerate(((before, BEFORE), (after, AFTER))):
            h = plot_h * value / biggest
            cx = x - col + j * col
            out.append(
                f'<rect x="{cx:.1f}" y="{top + plot_h - h:.1f}" width="{col - 1:.1f}" '
                f'height="{h:.1f}" fill="{fill}"><title>{_esc(label)}: {_num(value)} {unit} '
                f"{'sent by the server' if j == 0 else 'sent by gcfkit'}</title></rect>"
            )
        if i % every == 0:
            out.append(
                f'<text x="{x:.1f}" y="{height - bottom + 16}" font-size="10" '
                f'text-anchor="middle" fill="{_MUTED}">{_esc(label)}</text>'
            )
    if not points:
        out.append(
            f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" font-size="12" '
            f'text-anchor="middle" fill="{_MUTED}">no data yet</text>'
        )
    out.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" '
        f'stroke="{_MUTED}"/>'
    )
    out.append("</svg>")
    return "".join(out)


def grouped_bars(
    title: str,
    groups: Sequence[str],
    series: Sequence[str],
    values: dict[tuple[str, str], float],
    *,
    intervals: dict[tuple[str, str], tuple[float, float]] | None = None,
    maximum: float | None = None,
    fmt: str = "{:.0f}",
) -> str:
    """Horizontal bars, one per series in each group, with the value at the end and optional
    interval whiskers; ``values`` and ``intervals`` are keyed ``(group, series)`` (a missing
    key is no bar). Bars are scaled to ``maximum``, or to the largest value.

    >>> svg = grouped_bars("accuracy", ["json", "gcf"], ["a"], {("json", "a"): 0.5}, fmt="{:.0%}")
    >>> svg.count("<rect"), ">50%</text>" in svg
    (1, True)
    """
    bar, gap, label_w, plot_w, value_w = 16, 10, 170, 420, 90
    top = 34 + (18 if len(series) > 1 else 0)
    rows = max(1, len(series))
    height = top + len(groups) * (rows * bar + gap) + 10
    width = label_w + plot_w + value_w
    top_value = maximum if maximum else max([*values.values(), 0.0]) or 1.0
    parts = [
        _svg(width, height, title, ""),
        f'<text x="4" y="18" font-size="14" font-weight="bold">{_esc(title)}</text>',
    ]
    if len(series) > 1:
        x = label_w
        for i, name in enumerate(series):
            color = SERIES[i % len(SERIES)]
            parts.append(f'<rect x="{x}" y="28" width="12" height="12" fill="{color}"/>')
            parts.append(f'<text x="{x + 16}" y="38" font-size="12">{_esc(name)}</text>')
            x += 24 + 7 * len(name)
    y = top
    for g in groups:
        mid = y + rows * bar / 2 + 4
        parts.append(
            f'<text x="{label_w - 6}" y="{mid:.0f}" font-size="12" '
            f'text-anchor="end">{_esc(g)}</text>'
        )
        for i, name in enumerate(series):
            v = values.get((g, name))
            if v is not None:
                w = plot_w * min(1.0, v / top_value)
                color = SERIES[i % len(SERIES)]
                parts.append(
                    f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar - 3}" '
                    f'fill="{color}">'
                    f"<title>{_esc(g)} / {_esc(name)}: {_esc(fmt.format(v))}</title></rect>"
                )
                ci = (intervals or {}).get((g, name))
                if ci is not None:
                    x0 = label_w + plot_w * ci[0] / top_value
                    x1 = label_w + plot_w * ci[1] / top_value
                    cy = y + (bar - 3) / 2
                    parts.append(
                        f'<line x1="{x0:.1f}" y1="{cy:.1f}" x2="{x1:.1f}" y2="{cy:.1f}" '
                        'stroke="#222" stroke-width="1.5"/>'
                    )
                parts.append(
                    f'<text x="{label_w + plot_w + 6}" y="{y + bar - 5}" font-size="11">'
                    f"{_esc(fmt.format(v))}</text>"
                )
            y += bar
        y += gap
    parts.append("</svg>")
    return "".join(parts)
