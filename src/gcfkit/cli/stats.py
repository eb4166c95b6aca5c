"""``gcfkit stats``: what one JSON value costs in every format, or the proxy's savings.

``gcfkit stats FILE`` (or ``-``, or piped stdin) measures the JSON value as pretty JSON,
compact JSON, TOON, GCX1 and GCF: bytes, tokens in o200k_base and cl100k_base, the saving
against compact JSON (``--baseline pretty`` to compare with indented JSON instead) and a
type-strict lossless round trip per format. With no input (stdin a terminal, or empty)
or ``--ledger`` it shows the MCP proxy's savings ledger instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import tokens
from ..jsonio import read_json_bytes
from ..measure.report import Comparison, FormatResult, compare_formats, default_formats
from .io import read_input, write_text

_BASELINES = {"compact": "json-compact", "pretty": "json-pretty"}
_BAR_WIDTH = 10
_SHORT = {
    "json-pretty": "JSON pretty",
    "json-compact": "JSON compact",
    "toon": "TOON",
    "gcx1": "GCX1",
    "gcf": "GCF",
}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "stats",
        help="token cost of a JSON value per format, or the proxy's savings ledger",
        description="Measure a JSON value (FILE, '-' or piped stdin) as pretty JSON, compact "
        "JSON, TOON, GCX1 and GCF: bytes, tokens (o200k_base and cl100k_base), saving and a "
        "lossless round-trip check per format. Without input, or with --ledger, show the "
        "MCP proxy's savings ledger.",
    )
    p.add_argument("file", nargs="?", help="JSON file, or - for stdin")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--encoding",
        choices=tokens.ENCODINGS,
        default=tokens.DEFAULT_ENCODING,
        help="encoding for the saving column and bars (both are always counted)",
    )
    p.add_argument(
        "--baseline",
        choices=sorted(_BASELINES),
        default="compact",
        help="JSON form the savings are measured against (default: compact)",
    )
    p.add_argument("--tool", default="stats", help="tool name for the GCX1 header")
    p.add_argument("--ledger", action="store_true", help="show the proxy's savings ledger")
    p.add_argument("--since", help="ledger view: only records since 7d, 24h, 2026-01-02, ...")
    p.add_argument("--ledger-file", help="ledger view: read this ledger file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gcfkit stats``; returns the exit status."""
    if args.ledger:
        return _ledger_view(args)
    if args.file is None or args.file == "-":
        if args.file is None and _stdin_is_tty():
            return _ledger_view(args)
        data = sys.stdin.buffer.read()
        if args.file is None and not data.strip():
            return _ledger_view(args)
        source = "stdin"
    else:
        data = read_input(args.file)
        source = args.file
    value = read_json_bytes(data)
    cmp = compare_formats(
        value, formats=default_formats(args.tool), baseline=_BASELINES[args.baseline]
    )
    if args.json:
        out = {"input": source, "input_bytes": len(data), "encoding": args.encoding}
        out.update(cmp.to_dict())
        best = cmp.best_lossless(args.encoding)
        out["best_lossless"] = best.name if best is not None else None
        write_text(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
    else:
        _render(cmp, source, len(data), args.encoding)
    return 0


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is None or sys.stdin.isatty()
    except (AttributeError, ValueError):
        return True


# ---------------------------------------------------------------------------------------
# Format comparison view
# ---------------------------------------------------------------------------------------


def _bar(fraction: float) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * _BAR_WIDTH)
    return "█" * filled + "░" * (_BAR_WIDTH - filled)


def _lossless_cell(r: FormatResult) -> str:
    if r.text is None:
        return "—"
    return "yes" if r.lossless else "NO"


def _rows(cmp: Comparison, encoding: str) -> list[list[str]]:
    counted = [r.tokens[encoding] for r in cmp.results if r.text is not None]
    biggest = max(counted, default=0) or 1
    rows: list[list[str]] = []
    for r in cmp.results:
        label = _SHORT.get(r.name, r.label)
        if r.text is None:
            short = "not installed" if "not installed" in (r.error or "") else "n/a"
            rows.append([label, "", "", "", "", short, _lossless_cell(r)])
            continue
        s = cmp.saving(r.name, encoding)
        rows.append(
            [
                label,
                f"{r.bytes:,}",
                f"{r.tokens['o200k_base']:,}",
                f"{r.tokens['cl100k_base']:,}",
                "base" if r.name == cmp.baseline else f"{s:+.1%}" if s is not None else "",
                _bar(r.tokens[encoding] / biggest),
                _lossless_cell(r),
            ]
        )
    return rows


def _notes(cmp: Comparison, encoding: str) -> list[str]:
    methods = ", ".join(f"{e} {m}" for e, m in cmp.methods.items())
    base = "compact" if cmp.baseline == "json-compact" else "pretty"
    notes = [
        f"saved: {encoding} tokens saved versus {base} JSON",
        f"token counts: {methods}" + ("" if tokens.is_exact() else _ESTIMATE_HINT),
    ]
    best = cmp.best_lossless(encoding)
    if best is not None:
        notes.append(f"fewest {encoding} tokens, lossless: {_SHORT.get(best.name, best.label)}")
    for r in cmp.results:
        label = _SHORT.get(r.name, r.label)
        if r.error:
            notes.append(f"{label}: {r.error}")
        elif r.key_order_kept is False:
            notes.append(f"{label}: object key order changed (types, keys and values kept)")
    return notes


_ESTIMATE_HINT = " (estimates: pip install 'gcfkit[tokens]' for exact counts)"


def _headers(cmp: Comparison, encoding: str) -> list[str]:
    return [
        "format",
        "bytes",
        "o200k",
        "cl100k",
        "saved",
        f"{encoding.split('_')[0]} size",
        "lossless",
    ]


def _render(cmp: Comparison, source: str, size: int, encoding: str) -> None:
    rows = _rows(cmp, encoding)
    headers = _headers(cmp, encoding)
    notes = _notes(cmp, encoding)
    title = f"gcfkit stats: {source} ({size:,} bytes of JSON)"
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        write_text(_plain(title, headers, rows, notes))
        return
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if 0 < i < 5 else "left", no_wrap=True)
    for row in rows:
        style = "red" if row[-1] == "NO" else ("dim" if row[1] == "" else None)
        table.add_row(*row, style=style)
    console = Console()
    console.print(table)
    for note in notes:
        console.print(note, style="dim", markup=False, highlight=False)


def _plain(title: str, headers: list[str], rows: list[list[str]], notes: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([*lines, *notes]) + "\n"


# ---------------------------------------------------------------------------------------
# Ledger view (data and rendering belong to gcfkit.ledger)
# ---------------------------------------------------------------------------------------


def _ledger_view(args: argparse.Namespace) -> int:
    try:
        from .. import ledger
    except ImportError as e:
        print(
            f"The savings ledger is not available in this install ({e}); "
            "pass a JSON file to measure it: gcfkit stats FILE",
            file=sys.stderr,
        )
        return 1
    since = ledger.parse_since(args.since) if args.since else None
    records = ledger.read_records(args.ledger_file, since=since)
    summary = ledger.summarize(records, corrupt=records.corrupt)
    if args.json:
        write_text(json.dumps(ledger.summary_to_json(summary), ensure_ascii=False, indent=2) + "\n")
    else:
        ledger.render_summary(summary)
    return 0
