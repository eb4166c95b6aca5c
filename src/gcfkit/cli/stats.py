"""``gcfkit stats``: what one JSON value costs in every format, or the proxy's savings.

``gcfkit stats FILE`` (or ``-``, or piped stdin) measures the JSON value as pretty JSON,
compact JSON, TOON, GCX1, GCF and GCF's dense profile (which the proxy sends where it is
fewest tokens): bytes, tokens in o200k_base and cl100k_base, the change against compact JSON
(``--baseline pretty`` to compare with indented JSON instead; ``−13.4%`` is 13.4% fewer
tokens, as everywhere in gcfkit) and a type-strict lossless round trip per format. With no
input (stdin a terminal, or empty) or ``--ledger`` it shows the MCP proxy's savings ledger
instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .. import tokens
from ..errors import ConfigError
from ..jsonio import read_json_bytes
from ..ledger import parse_since, read_entries
from ..measure.report import Comparison, FormatResult, compare_formats, default_formats
from ..measure.savings import Summary, Totals, signed_change, summarize, summary_to_json
from .io import printable, read_input, write_text

if TYPE_CHECKING:
    from rich.console import Console

_BASELINES = {"compact": "json-compact", "pretty": "json-pretty"}
_BAR_WIDTH = 10
_SHORT = {
    "json-pretty": "JSON pretty",
    "json-compact": "JSON compact",
    "toon": "TOON",
    "gcx1": "GCX1",
    "gcf": "GCF",
    "gcf-ext": "GCF dense",
}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "stats",
        help="token cost of a JSON value per format, or the proxy's savings ledger",
        description="Measure a JSON value (FILE, '-' or piped stdin) as pretty JSON, compact "
        "JSON, TOON, GCX1, GCF and GCF's dense profile: bytes, tokens (o200k_base and "
        "cl100k_base), change against compact JSON (−13.4% is 13.4% fewer tokens) and a "
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
    p.add_argument(
        "--prometheus",
        metavar="FILE",
        help="write the ledger's figures (results, tokens and bytes by server, tool and "
        "decision) to FILE in the Prometheus text format, for the node exporter's textfile "
        "collector (e.g. FILE=/var/lib/node_exporter/textfile/gcfkit.prom)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gcfkit stats``; returns the exit status."""
    if getattr(args, "prometheus", None):
        return _prometheus(args)
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
    formats = default_formats(args.tool, extensions=True)
    cmp = compare_formats(value, formats=formats, baseline=_BASELINES[args.baseline])
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
    """A ``_BAR_WIDTH``-cell bar for a fraction (clamped to 0..1): both views draw this one."""
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
        base = cmp.result(cmp.baseline)
        rows.append(
            [
                label,
                f"{r.bytes:,}",
                f"{r.tokens['o200k_base']:,}",
                f"{r.tokens['cl100k_base']:,}",
                "base"
                if r.name == cmp.baseline
                else signed_change(base.tokens[encoding], r.tokens[encoding])
                if base.text is not None
                else "",
                _bar(r.tokens[encoding] / biggest),
                _lossless_cell(r),
            ]
        )
    return rows


def _notes(cmp: Comparison, encoding: str) -> list[str]:
    methods = ", ".join(f"{e} {m}" for e, m in cmp.methods.items())
    base = "compact" if cmp.baseline == "json-compact" else "pretty"
    notes = [
        f"vs {base}: change in {encoding} tokens against {base} JSON (− is fewer)",
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
        f"vs {'compact' if cmp.baseline == 'json-compact' else 'pretty'}",
        f"{encoding.split('_')[0]} size",
        "lossless",
    ]


def _render(cmp: Comparison, source: str, size: int, encoding: str) -> None:
    rows = _rows(cmp, encoding)
    headers = _headers(cmp, encoding)
    notes = [printable(n) for n in _notes(cmp, encoding)]
    title = printable(f"gcfkit stats: {source} ({size:,} bytes of JSON)")
    try:
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        write_text(_plain(title, headers, rows, notes))
        return
    console = Console()

    def table(with_bar: bool) -> Table:
        t = Table(title=Text(title), box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(headers):
            if i == 5 and not with_bar:
                continue
            # Numbers are never cut: their columns are as wide as their widest cell.
            widest = max([len(h), *(len(r[i]) for r in rows)])
            if i == 0:  # the label wraps at spaces: its longest word must fit
                widest = max(len(w) for r in rows for w in [h, *r[0].split()])
            numeric = 0 < i < 5
            t.add_column(
                h,
                justify="right" if numeric else "left",
                no_wrap=i != 0,  # the label may wrap ("JSON / compact"); nothing else
                min_width=widest,
            )
        for row in rows:
            style = "red" if row[-1] == "NO" else ("dim" if row[1] == "" else None)
            cells = row if with_bar else row[:5] + row[6:]
            t.add_row(*(Text(c) for c in cells), style=style)
        return t

    full = table(with_bar=True)
    natural = console.measure(full, options=console.options.update(width=1 << 16)).maximum
    if not console.is_terminal:
        # Piped or redirected: there is no screen to fit, so nothing gets cut.
        console = Console(width=max(natural, 40), file=console.file)
        console.print(full)
    else:
        console.print(full if natural <= console.width else table(with_bar=False))
    for note in notes:
        console.print(Text(note), style="dim")


def _plain(title: str, headers: list[str], rows: list[list[str]], notes: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([*lines, *notes]) + "\n"


# ---------------------------------------------------------------------------------------
# Ledger view (the numbers come from gcfkit.measure.savings)
# ---------------------------------------------------------------------------------------


def _ledger_view(args: argparse.Namespace) -> int:
    since = parse_since(args.since) if args.since else None
    entries = read_entries(args.ledger_file, since=since)
    summary = summarize(entries, corrupt=entries.corrupt)
    if args.json:
        write_text(json.dumps(summary_to_json(summary), ensure_ascii=False, indent=2) + "\n")
    else:
        render_summary(summary)
    return 0


def _prometheus(args: argparse.Namespace) -> int:
    """``--prometheus FILE``: the ledger as series (:mod:`gcfkit.transports.metrics`, the
    same series the HTTP shells serve at /metrics), written whole or not at all."""
    try:
        from ..transports.metrics import write_textfile
    except ImportError:
        raise ConfigError(
            "invalid_option", "--prometheus needs prometheus-client: pip install 'gcfkit[stats]'"
        ) from None
    since = parse_since(args.since) if args.since else None
    entries = read_entries(args.ledger_file, since=since)
    try:
        write_textfile(args.prometheus, (e.record for e in entries))
    except OSError as e:
        raise ConfigError("io_error", f"cannot write {args.prometheus}: {e.strerror or e}") from e
    print(f"gcfkit stats: {len(entries)} ledger records -> {args.prometheus}", file=sys.stderr)
    return 0


def render_summary(summary: Summary, console: Console | None = None) -> None:
    """Print a summary with ``rich``: one row per tool and a total, with savings bars.

    ``console`` defaults to a new ``rich.console.Console()`` (stdout). Without ``rich``
    installed it prints a plain-text table to stdout instead, so ``gcfkit stats`` still works
    on a minimal install.

    >>> import io
    >>> from rich.console import Console
    >>> buf = io.StringIO()
    >>> render_summary(summarize([]), console=Console(file=buf, width=100))
    >>> "no tool results" in buf.getvalue()
    True
    """
    try:
        from rich.console import Console as _Console
        from rich.table import Table
    except ImportError:
        write_text(_plain_summary(summary))
        return
    from rich.text import Text

    out = console if console is not None else _Console()
    if summary.total.calls == 0:
        out.print(Text("The ledger has no tool results yet" + _corrupt_note(summary) + "."))
        return
    title = "gcfkit savings"
    if summary.first and summary.last:
        title += printable(f" ({summary.first[:10]} .. {summary.last[:10]})")
    # Fewer, denser columns fit 80 terminal columns: the server and the tool share one, which
    # wraps between the two names and is as wide as the longest name where that fits, so a
    # name is never cut mid-word (memory-ser|ver); the bar is the first thing to go.
    total = summary.total
    names = [printable(n) for key in summary.tools for n in key]
    rows = [(f"{printable(s)} {printable(t)}", t_) for (s, t), t_ in summary.tools.items()]
    numbers = [_before_after(total), *(_before_after(t) for _, t in rows)]
    fixed = 5 + max(map(len, numbers)) + 8 + 4 * 3 + 4  # calls, tokens, change, padding
    longest = max(map(len, names), default=5)
    bar = out.width >= max(80, fixed + longest + _BAR_WIDTH + 3)
    table = Table(title=Text(title), show_footer=True)
    table.add_column(
        "server tool",
        footer="total",
        overflow="fold",
        min_width=longest if out.width >= fixed + longest else None,
    )
    table.add_column("calls", justify="right", footer=str(total.calls), no_wrap=True)
    table.add_column("tokens → gcfkit", justify="right", footer=_before_after(total), no_wrap=True)
    table.add_column("change", justify="right", footer=_change(total), no_wrap=True)
    if bar:
        table.add_column("", footer=_bar(total.token_savings), no_wrap=True)
    why: list[str] = []
    for name, t in rows:
        # Server and tool names are the server's choice: Text, so that rich reads no markup
        # (a tool named "[/bold]" or "[link=...]") in them, and printable (no escapes).
        reason = t.why_larger()
        mark = ""
        if reason is not None:
            why.append(f"{'†' * (len(why) + 1)} {name.split(' ', 1)[1]} is larger by {reason}")
            mark = " " + "†" * len(why)
        cells = [name, str(t.calls), _before_after(t), _change(t) + mark]
        table.add_row(*(Text(c) for c in cells), *([_bar(t.token_savings)] if bar else []))
    out.print(table)
    for line in why:
        out.print(Text(printable(line)), style="dim")
    notes = [f"token counts: {', '.join(summary.encodings)}"]
    notes.append("change: − is fewer tokens than the server sent")
    decisions = ", ".join(f"{k} {v}" for k, v in sorted(total.decisions.items()))
    notes.append(f"decisions: {decisions}")
    if summary.corrupt:
        notes.append(f"{summary.corrupt} corrupt ledger line(s) skipped")
    out.print(Text(printable("; ".join(notes))), style="dim")


def _before_after(t: Totals) -> str:
    return f"{t.tokens_before:,} → {t.tokens_after:,}"


def _change(t: Totals) -> str:
    return signed_change(t.tokens_before, t.tokens_after)


def _corrupt_note(summary: Summary) -> str:
    return f" ({summary.corrupt} corrupt line(s) skipped)" if summary.corrupt else ""


def _plain_summary(summary: Summary) -> str:
    if summary.total.calls == 0:
        return "The ledger has no tool results yet" + _corrupt_note(summary) + ".\n"
    lines = []
    rows = [((s, t), v) for (s, t), v in summary.tools.items()]
    rows.append((("total", ""), summary.total))
    for (server, tool), t in rows:
        server, tool = printable(server), printable(tool)
        lines.append(
            f"{server:<16} {tool:<24} {t.calls:>6} {t.tokens_before:>10} {t.tokens_after:>10} "
            f"{_change(t):>7} {_bar(t.token_savings)}"
        )
    if summary.corrupt:
        lines.append(f"{summary.corrupt} corrupt ledger line(s) skipped")
    return "\n".join(lines) + "\n"
