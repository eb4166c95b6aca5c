"""``gcfkit capture`` and ``gcfkit verify``: record your own MCP traffic, then check what the
proxy would do with it (the lossless gate and the savings, with markdown and HTML reports).

The work is done by :mod:`gcfkit.traffic`; this module is argument parsing and printing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .io import write_text
from .progress import Progress
from .proxy import add_capture_options, add_client_options, proxy_config

__all__ = ["register"]

_VERIFY_EPILOG = """\
the lossless gate:
  every result the proxy would deliver is read back as a client reads it (GCF decoded,
  the ref= block taken off, joined blocks split, relative answers applied to the result
  they name) and compared with what the server sent: the same JSON values (types and key
  order), texts and file contents byte for byte, every other block and field untouched.
  Exit status 0 when every result passes, 1 when one does not.

examples:
  gcfkit proxy --capture-dir ~/gcfkit-capture -- uvx mcp-server-git --repository .
  gcfkit verify ~/gcfkit-capture
  gcfkit verify ../shared/corpus/mcp --agent-since --out /tmp/verify
"""


def register(sub: Any) -> None:
    cap = sub.add_parser(
        "capture",
        help="run an MCP server untouched and record its tool results for gcfkit verify",
        description="Relay the stdio MCP server COMMAND without changing anything (like "
        "gcfkit proxy --format off --no-primer --no-stats) and record its initialize, "
        "tools/list and every tools/call result under DIR in the corpus format, for "
        "gcfkit verify DIR. To record while compressing, use gcfkit proxy --capture-dir DIR.",
        usage="gcfkit capture [--name NAME] [--capture-max-mb MB] DIR -- COMMAND [ARGS...]",
    )
    cap.add_argument("capture_dir", metavar="DIR", help="where the session directory goes")
    cap.add_argument("--name", default="", help="session name (default: the server's own)")
    add_capture_options(cap, required=True)
    cap.add_argument("--grace", type=float, default=2.0, help=argparse.SUPPRESS)
    cap.add_argument("command", nargs=argparse.REMAINDER, help="the MCP server command, after --")
    cap.set_defaults(func=_capture)

    ver = sub.add_parser(
        "verify",
        help="replay recorded MCP sessions through the proxy: lossless gate and savings",
        description="Replay every recorded session under DIR (written by gcfkit capture or "
        "gcfkit proxy --capture-dir, or a corpus in the same format) through the proxy's "
        "logic, check that every result reads back to exactly what the server sent, and show "
        "the savings per server and tool. Writes report.md and report.html (charts, no "
        "script, nothing loaded from outside) into --out.",
        epilog=_VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ver.add_argument("dir", metavar="DIR", help="a session directory, or a directory of them")
    ver.add_argument(
        "--out",
        metavar="DIR",
        default="gcfkit-verify",
        help="where report.md and report.html go (default: ./gcfkit-verify)",
    )
    ver.add_argument("--no-report", action="store_true", help="write no report files")
    ver.add_argument("--json", action="store_true", help="print the results as JSON")
    ver.add_argument(
        "--agent-since",
        action="store_true",
        help="play an agent that passes _since on every call of a tool it holds a result of",
    )
    ver.add_argument(
        "--format", choices=("gcf", "json", "off"), default="gcf", help="as for the proxy"
    )
    ver.add_argument("--policy", metavar="FILE", help="per-tool policy file, as for the proxy")
    ver.add_argument("--no-join", action="store_true", help="as for the proxy")
    ver.add_argument(
        "--delta", nargs="?", const="keyed", choices=("keyed", "session"), help="as for the proxy"
    )
    ver.add_argument(
        "--refs", choices=("auto", "all", "off"), default="auto", help="as for the proxy"
    )
    add_client_options(ver)  # whose model reads the results: what is delivered and counted
    ver.add_argument(
        "--encoding",
        choices=("o200k_base", "cl100k_base"),
        default="o200k_base",
        help="tokenizer the proxy decides and counts with (default o200k_base)",
    )
    ver.add_argument(
        "--time-budget",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="per result (default 5: a replay measures decisions, not the live relay's 0.5)",
    )
    ver.set_defaults(func=_verify)


def _capture(args: argparse.Namespace) -> int:
    from ..proxy.core import ProxyConfig
    from ..transports.stdio import run_proxy
    from .proxy import open_capture

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    elif command and command[0].startswith("-"):
        raise ConfigError(
            "invalid_option", f"{command[0]}: options go before DIR (gcfkit capture --help)"
        )
    if not command:
        raise ConfigError("invalid_option", "no server command: gcfkit capture DIR -- COMMAND")
    config = ProxyConfig(format="off", primer=False, stats=False, server_name=args.name)
    capture = open_capture(args)
    status = asyncio.run(run_proxy(command, config, grace=args.grace, capture=capture))
    if capture is not None and capture.path is not None:
        print(f"gcfkit capture: recorded in {capture.path}", file=sys.stderr)
    return status


def _verify(args: argparse.Namespace) -> int:
    from ..traffic.corpus import read_sessions
    from ..traffic.report import render_html, render_markdown
    from ..traffic.verify import dumps_result, verify_sessions

    if not args.time_budget > 0:
        raise ConfigError("invalid_option", "--time-budget must be > 0")
    sessions = read_sessions(args.dir)
    config = proxy_config(args)
    total = sum(len(s.calls) for s in sessions)
    with Progress(total, "replaying") as bar:
        result = verify_sessions(
            sessions, config, agent_since=args.agent_since, progress=bar.advance
        )
    written: list[Path] = []
    if not args.no_report:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in (
                ("report.md", render_markdown(result, args.dir)),
                ("report.html", render_html(result, args.dir)),
            ):
                (out / name).write_text(text, encoding="utf-8")
                written.append(out / name)
        except OSError as e:
            raise ConfigError("io_error", f"cannot write the reports to {out}: {e}") from e
    if args.json:
        write_text(dumps_result(result))
    else:
        _print(result, written)
    return 0 if result.passed else 1


def _print(result: Any, written: list[Path]) -> None:
    from ..traffic.report import gate_line, headline

    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        lines = [gate_line(result)]
        lines += [f"  FAIL {c.session}/{c.file}: {c.problem}" for c in result.failures]
        for name, t in result.summary.servers.items():
            lines.append(f"{name:<24} {t.calls:>5} {t.tokens_before:>10,} {t.tokens_after:>10,}")
        lines.append(headline(result))
        lines += [f"report: {p}" for p in written]
        write_text("\n".join(lines) + "\n")
        return
    console = Console()
    console.print(Text(gate_line(result), style="bold green" if result.passed else "bold red"))
    for c in result.failures:
        console.print(Text(f"  {c.session}/{c.file}: {c.problem}", style="red"))
    table = Table(show_footer=True, title=Text(f"savings per server ({result.encoding})"))
    s = result.summary
    table.add_column("server", footer="total")
    table.add_column("calls", justify="right", footer=str(s.total.calls))
    table.add_column("tokens sent", justify="right", footer=f"{s.total.tokens_before:,}")
    table.add_column("delivered", justify="right", footer=f"{s.total.tokens_after:,}")
    table.add_column("saved", justify="right", footer=f"{s.total.token_savings:.1%}")
    for name, t in s.servers.items():
        table.add_row(
            Text(name),
            str(t.calls),
            f"{t.tokens_before:,}",
            f"{t.tokens_after:,}",
            f"{t.token_savings:.1%}",
        )
    console.print(table)
    console.print(Text(headline(result), style="bold"))
    for p in written:
        console.print(Text(f"report: {p}", style="dim"))
