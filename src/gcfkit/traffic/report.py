"""The reports of ``gcfkit verify``: markdown, and one self-contained HTML page with charts.

Both show the lossless gate (and every call that failed it), the savings per server and per
tool (from :mod:`gcfkit.measure.savings`), what was left alone and why, and every call. The
HTML page has its style inline and its charts as inline SVG (:mod:`gcfkit.measure.charts`):
no script, nothing loaded from anywhere; every name a server chose is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Final

from .. import __version__
from ..measure.charts import before_after_bars, change
from ..measure.savings import Totals, describe_decision, is_left_alone
from .verify import CallCheck, VerifyResult

__all__ = ["gate_line", "headline", "render_html", "render_markdown"]


def _pct(t: Totals) -> str:
    # A result left alone grows only by the ref= block that names it: say so, or it reads
    # as a loss.
    why = f" ({t.ref_tokens:,} tokens of ref= handles)" if t.why_larger() else ""
    return change(t.tokens_before, t.tokens_after) + why


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _totals_row(t: Totals) -> list[str]:
    return [
        f"{t.calls:,}",
        f"{t.tokens_before:,}",
        f"{t.tokens_after:,}",
        f"{t.tokens_saved:,}",
        _pct(t),
        f"{t.bytes_before:,}",
        f"{t.bytes_after:,}",
    ]


_TOTAL_HEAD: Final = (
    "calls",
    "tokens sent",
    "tokens delivered",
    "saved",
    "change",
    "bytes sent",
    "bytes delivered",
)


def gate_line(result: VerifyResult) -> str:
    """The gate's verdict in one line."""
    n = len(result.checks)
    if result.passed:
        return f"lossless gate: PASS, all {n} results read back to exactly what the server sent"
    return f"lossless gate: FAIL, {len(result.failures)} of {n} results did not read back"


def headline(result: VerifyResult) -> str:
    """The savings in one line."""
    t = result.summary.total
    return (
        f"savings ({result.encoding}): {t.tokens_before:,} → {t.tokens_after:,} tokens, "
        f"{t.tokens_saved:,} saved ({t.token_savings:.1%})"
    )


def _decision_rows(result: VerifyResult) -> list[list[object]]:
    rows: list[list[object]] = []
    for word, n in sorted(result.summary.total.decisions.items(), key=lambda kv: -kv[1]):
        rows.append([word, n, "left alone" if is_left_alone(word) else "rewritten"])
        rows[-1].append(describe_decision(word))
    return rows


def render_markdown(result: VerifyResult, source: str) -> str:
    """The report as markdown."""
    s = result.summary
    out = [f"# gcfkit verify: {source}", ""]
    out.append(f"gcfkit {__version__}; {len(result.sessions)} session(s), {len(result.checks)} ")
    out[-1] += "calls replayed through the proxy core"
    if result.agent_since:
        out[-1] += ", as an agent that passes _since on repeated calls"
    out[-1] += f"; tokens counted exactly in {result.encoding}."
    out += ["", f"**{gate_line(result)}**", "", f"**{headline(result)}**", ""]
    if result.failures:
        out += ["## Failures", ""]
        rows = [[c.session, c.file, c.problem] for c in result.failures]
        out += [*_md_table(["session", "call", "problem"], rows), ""]
    out += ["## Per server", ""]
    rows = [[name, *_totals_row(t)] for name, t in s.servers.items()]
    rows.append(["**total**", *_totals_row(s.total)])
    out += [*_md_table(["server", *_TOTAL_HEAD], rows), ""]
    out += ["## Per tool", ""]
    rows = [[srv, tool, *_totals_row(t)] for (srv, tool), t in s.tools.items()]
    out += [*_md_table(["server", "tool", *_TOTAL_HEAD], rows), ""]
    out += ["## What the proxy did, and why", ""]
    out += [*_md_table(["decision", "calls", "", "meaning"], _decision_rows(result)), ""]
    out += ["## Every call", ""]
    rows = [_call_cells(c) for c in result.checks]
    out += [*_md_table(list(_CALL_HEAD), rows), ""]
    return "\n".join(out)


_CALL_HEAD: Final = (
    "session",
    "call",
    "gate",
    "delivered as",
    "decision",
    "tokens sent",
    "tokens delivered",
)


def _call_cells(c: CallCheck) -> list[str]:
    """One call's row of the "Every call" table, in both reports (plain text: each report
    escapes it its own way)."""
    r = c.record
    return [
        c.session,
        c.file,
        "ok" if c.ok else "FAIL: " + c.problem,
        c.how,
        r.decision if r else "",
        f"{r.tokens_before:,}" if r else "",
        f"{r.tokens_after:,}" if r else "",
    ]


# ---------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(
    head: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[int] = ()
) -> str:
    h = "".join(
        f'<th class="{"num" if i in numeric else ""}">{_e(c)}</th>' for i, c in enumerate(head)
    )
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="{"num" if i in numeric else ""}">{_e(c)}</td>' for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{h}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_STYLE: Final = """
:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--accent:#2f6fde;--ok:#0f8a5f;--bad:#c2410c}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);
background:#f6f7f9}
header{background:#111827;color:#fff;padding:18px 32px}
header h1{margin:0;font-size:18px;font-weight:600}
header p{margin:4px 0 0;color:#cbd5e1;font-size:13px}
main{max-width:1080px;margin:0 auto;padding:24px 32px 48px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px;margin-bottom:20px}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px 16px}
.card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:21px;font-weight:650;margin-top:2px;white-space:nowrap}
.pass{color:var(--ok)}.fail{color:var(--bad)}
section{background:#fff;border:1px solid var(--line);border-radius:10px;padding:16px 20px;
margin-bottom:16px;overflow-x:auto}
h2{font-size:15px;margin:0 0 10px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12px}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{color:var(--bad)}
svg{display:block;max-width:100%;height:auto}
footer{color:var(--muted);font-size:12px;text-align:center;padding:16px}
"""


def render_html(result: VerifyResult, source: str) -> str:
    """The report as one self-contained HTML page (inline style, inline SVG charts)."""
    s = result.summary
    t = s.total
    gate = "PASS" if result.passed else "FAIL"
    cards = [
        ("lossless gate", gate, "pass" if result.passed else "fail"),
        ("results checked", f"{len(result.checks):,}", ""),
        (f"tokens ({result.encoding})", f"{t.tokens_before:,} → {t.tokens_after:,}", ""),
        ("saved", f"{t.tokens_saved:,} ({t.token_savings:.1%})", "pass" if t.tokens_saved else ""),
    ]
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>gcfkit verify: {_e(source)}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>gcfkit verify · {_e(source)}</h1>",
        f"<p>{_e(gate_line(result))}. {_e(headline(result))}.</p></header><main>",
        '<div class="cards">',
    ]
    for label, value, cls in cards:
        parts.append(
            f'<div class="card"><div class="label">{_e(label)}</div>'
            f'<div class="value {cls}">{_e(value)}</div></div>'
        )
    parts.append("</div>")
    if result.failures:
        rows = [[c.session, c.file, c.problem] for c in result.failures]
        parts.append('<section><h2 class="fail">Results that failed the gate</h2>')
        parts.append(_html_table(["session", "call", "problem"], rows) + "</section>")
    server_rows = [(name, x.tokens_before, x.tokens_after) for name, x in s.servers.items()]
    tool_rows = [
        (f"{srv} · {tool}", x.tokens_before, x.tokens_after) for (srv, tool), x in s.tools.items()
    ]
    parts.append("<section>" + before_after_bars("Tokens per server", server_rows) + "</section>")
    parts.append("<section>" + before_after_bars("Tokens per tool", tool_rows) + "</section>")
    numeric = (1, 2, 3, 4, 5, 6, 7)
    rows = [[name, *_totals_row(x)] for name, x in s.servers.items()]
    rows.append(["total", *_totals_row(t)])
    parts.append("<section><h2>Per server</h2>")
    parts.append(_html_table(["server", *_TOTAL_HEAD], rows, numeric) + "</section>")
    rows = [[srv, tool, *_totals_row(x)] for (srv, tool), x in s.tools.items()]
    parts.append("<section><h2>Per tool</h2>")
    parts.append(
        _html_table(["server", "tool", *_TOTAL_HEAD], rows, tuple(i + 1 for i in numeric))
        + "</section>"
    )
    parts.append("<section><h2>What the proxy did, and why</h2>")
    parts.append(
        _html_table(["decision", "calls", "", "meaning"], _decision_rows(result), (1,))
        + "</section>"
    )
    parts.append("<section><h2>Every call</h2><table><thead><tr>")
    parts.append(
        "".join(
            f'<th class="{"num" if i > 4 else ""}">{_e(h)}</th>' for i, h in enumerate(_CALL_HEAD)
        )
    )
    parts.append("</tr></thead><tbody>")
    for c in result.checks:
        cells = _call_cells(c)
        tds = "".join(
            f'<td class="{"num" if i > 4 else ""}">{_e(x)}</td>' for i, x in enumerate(cells)
        )
        parts.append(f'<tr class="{"" if c.ok else "bad"}">{tds}</tr>')
    parts.append("</tbody></table></section></main>")
    parts.append(f"<footer>gcfkit {_e(__version__)} · generated by gcfkit verify</footer>")
    parts.append("</body></html>\n")
    return "".join(parts)
