"""``gcfkit install-mcp``, ``uninstall-mcp``, ``mcp-status`` and ``doctor``: put configured MCP
servers behind ``gcfkit proxy`` (and take them out again) in every client of
:data:`gcfkit.clients.known.KNOWN` (Claude Code, Cursor, Claude Desktop, Codex, VS Code,
Gemini CLI, OpenCode).

The work is done by :mod:`gcfkit.clients` (stdlib only); this module is argument parsing
and printing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..clients.entries import default_launcher, own_script, same_installation
from ..clients.install import Action, FilePlan, install_mcp, uninstall_mcp
from ..clients.known import CLIENTS
from ..clients.locations import SCOPES
from ..clients.status import ServerStatus, mcp_status
from ..errors import ConfigError
from .io import printable

_CLIENT_HELP = (
    f"which client's configs: {', '.join(CLIENTS)}, or all "
    "(default: wherever NAME is configured, which must be one place)"
)
_SCOPE_HELP = (
    "user (in your home: ~/.claude.json, ~/.codex/config.toml, ...), project (in this "
    "directory: .mcp.json, .vscode/mcp.json, opencode.json, ...) or local (~/.claude.json "
    "for this directory)"
)


_STATUS_CLIENT_HELP = f"which client's configs: {', '.join(CLIENTS)}, or all (default: all)"


def _add_selection(parser: argparse.ArgumentParser, client_help: str = _CLIENT_HELP) -> None:
    parser.add_argument("--client", choices=[*CLIENTS, "all"], help=client_help)
    parser.add_argument("--scope", choices=SCOPES, help=_SCOPE_HELP)
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="use this config file instead of the known ones (its servers: mcpServers, and "
        "projects[<this directory>].mcpServers; servers, mcp_servers or mcp for the clients "
        "that use those, told by the file's name or --client)",
    )


def register(sub: Any) -> None:
    inst = sub.add_parser(
        "install-mcp",
        help="run a configured MCP server behind gcfkit proxy",
        description="Wrap the MCP server NAME in its client config so that the client "
        "starts `gcfkit proxy -- COMMAND ARGS...` instead of COMMAND ARGS... (a Streamable "
        "HTTP entry's url and headers become `gcfkit proxy --upstream URL --header ...`). "
        "Every other field stays as it was; the original entry is recorded in gcfkit's state "
        "directory and a backup of the file is made before writing. Running it again does not "
        "double-wrap. Several names wrap several servers; if one cannot be wrapped, none is.",
    )
    inst.add_argument(
        "names", metavar="NAME", nargs="+", help="a server's name in the client's config"
    )
    _add_selection(inst)
    inst.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    inst.add_argument(
        "--proxy-arg",
        dest="proxy_args",
        action="append",
        metavar="ARG",
        help="an option for gcfkit proxy, repeatable; write it attached: --proxy-arg=--delta "
        "(on an already wrapped server, replaces its proxy options)",
    )
    inst.add_argument(
        "--no-name",
        dest="name_option",
        action="store_false",
        help="do not pass --name NAME to the proxy (the savings ledger then shows the "
        "server's self-reported name)",
    )
    inst.add_argument(
        "--gcfkit",
        metavar="COMMAND",
        help="how the client should start gcfkit (default: the gcfkit on PATH if it is this "
        "installation, else this installation's own script, by absolute path)",
    )
    inst.set_defaults(func=_install)

    uninst = sub.add_parser(
        "uninstall-mcp",
        help="restore a server wrapped by install-mcp",
        description="Put back the original entry of NAME (exactly, if the wrapper was not "
        "edited since; otherwise the command after `--` is unwrapped and other edits kept). "
        "A server that is not wrapped is left alone.",
    )
    uninst.add_argument(
        "names", metavar="NAME", nargs="+", help="a server's name in the client's config"
    )
    _add_selection(uninst)
    uninst.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    uninst.set_defaults(func=_uninstall)

    status = sub.add_parser(
        "mcp-status",
        help="list MCP servers in client configs, wrapped or not",
        description="List every MCP server found in the known client configs (or --config), "
        "and whether it runs behind gcfkit proxy.",
    )
    _add_selection(status, _STATUS_CLIENT_HELP)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=_status)

    doc = sub.add_parser(
        "doctor",
        help="check that wrapped MCP servers start and answer through the proxy",
        description="For each server wrapped by install-mcp (or NAME), start its config entry "
        "exactly as the client would and go through initialize and tools/list, with a "
        "deadline; then stop it and its children. Also check that the proxy can write its "
        "savings ledger. Exit status 0 when everything checked is fine, 1 otherwise.",
    )
    doc.add_argument("names", metavar="NAME", nargs="*", help="check only these servers")
    _add_selection(doc)
    doc.add_argument(
        "--all", action="store_true", help="also start the servers that are not wrapped"
    )
    doc.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="per server, start to tools/list (default 30; npx and uvx may download first)",
    )
    doc.set_defaults(func=_doctor)


_MESSAGES = {
    "wrapped": "wrapped {name!r} in {where}",
    "rewrapped": "updated the proxy options of {name!r} in {where}",
    "already-wrapped": "{name!r} is already wrapped in {where}; nothing to do",
    "restored": "restored the original {name!r} in {where}",
    "unwrapped": "unwrapped {name!r} in {where} (the wrapper had been edited or its original "
    "was not recorded: the command after -- is back, other fields kept as they are now)",
    "not-wrapped": "{name!r} is not wrapped in {where}; nothing to do",
}


def _message(action: Action) -> str:
    text = _MESSAGES[action.action].format(name=action.name, where=action.location.describe())
    return printable(text)


def _report(plans: Sequence[FilePlan], dry_run: bool) -> None:
    out = sys.stdout
    for plan in plans:
        for action in plan.actions:
            prefix = "[dry run] " if dry_run and action.changes else ""
            print(prefix + _message(action), file=out)
        if dry_run and plan.changed:
            out.write(printable(plan.diff(), keep="\t\n"))
        if plan.backup is not None:
            print(f"  backup of the previous file: {plan.backup}", file=out)
    if dry_run:
        print("dry run: nothing was written", file=out)
    elif any(plan.written for plan in plans):
        print("restart the client (or reload its MCP servers) to apply", file=out)


def _install(args: argparse.Namespace) -> int:
    launcher = None
    if args.gcfkit:
        launcher = shlex.split(args.gcfkit, posix=os.name != "nt")
    plans = install_mcp(
        args.names,
        client=args.client,
        scope=args.scope,
        config=args.config,
        proxy_args=args.proxy_args,
        launcher=launcher,
        name_option=args.name_option,
        dry_run=args.dry_run,
    )
    _report(plans, args.dry_run)
    if any(a.action in ("wrapped", "rewrapped") for plan in plans for a in plan.actions):
        _explain_install(args, launcher or default_launcher())
    return 0


def _explain_install(args: argparse.Namespace, launcher: Sequence[str]) -> None:
    """What the client will run now, how to check it and how to undo it."""
    out = sys.stdout
    print(f"  the client now starts: {shlex.join(launcher)} proxy ... -- <the server>", file=out)
    where = [f"--{k}={v}" for k in ("client", "scope", "config") if (v := getattr(args, k))]
    undo = shlex.join(["gcfkit", "uninstall-mcp", *args.names, *where])
    print(f"  check it: {shlex.join(['gcfkit', 'doctor', *where])}", file=out)
    print(f"  undo it:  {undo}", file=out)
    own = own_script()
    if launcher and own is not None and launcher[0] == str(own) and not _on_path(own):
        print(
            f"  note: {own} is not on PATH (a virtual environment?): if that environment is "
            "deleted, the client cannot start the server. `uv tool install` or `pipx install` "
            "puts gcfkit on PATH; then run install-mcp again.",
            file=out,
        )


def _on_path(script: Path) -> bool:
    found = shutil.which(script.name)
    return found is not None and same_installation(Path(found), script)


def _uninstall(args: argparse.Namespace) -> int:
    plans = uninstall_mcp(
        args.names,
        client=args.client,
        scope=args.scope,
        config=args.config,
        dry_run=args.dry_run,
    )
    _report(plans, args.dry_run)
    return 0


def _status_line(s: ServerStatus) -> str:
    # Names, commands and options come from config files anyone may have edited: shown
    # through printable(), so an escape sequence in them never reaches the terminal.
    if s.name is None:
        return printable(f"  error: {s.error}")
    name = printable(s.name)
    if s.error:
        return f"  {name}: {printable(s.error)}"
    if s.wrapped:
        opts = f" ({shlex.join(s.proxy_args)})" if s.proxy_args else ""
        state = f"wrapped{opts}"
    elif not s.wrappable:
        state = "not wrappable (http)"
    else:
        state = "not wrapped"
    return printable(f"  {name:<24} {s.transport:<6} {state:<24} {s.command}")


def _status(args: argparse.Namespace) -> int:
    found = mcp_status(client=args.client, scope=args.scope, config=args.config)
    if args.json:
        print(json.dumps([s.to_dict() for s in found], indent=2, ensure_ascii=False))
        return 0
    if not found:
        print("no MCP servers found in the known client configs (--config PATH for another)")
        return 0
    current = None
    for s in found:
        where = s.location.describe()
        if where != current:
            print(printable(where))
            current = where
        print(_status_line(s))
    return 0


def _shown(text: str) -> str:
    """Text a server or a config chose, safe for the terminal: anything unprintable (escape
    sequences included) is shown as a backslash escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _doctor(args: argparse.Namespace) -> int:
    from ..clients.doctor import check_entry, check_ledger, ledger_of
    from ..paths import default_ledger_path

    if not args.timeout > 0:
        raise ConfigError("invalid_option", "--timeout must be > 0")
    found = mcp_status(client=args.client, scope=args.scope, config=args.config)
    if args.names:
        found = [s for s in found if s.name in args.names or s.name is None]
        missing = [n for n in args.names if not any(s.name == n for s in found)]
        if missing:
            named = ", ".join(map(repr, missing))
            raise ConfigError("server_not_found", f"no server named {named} in the configs")
    failed = 0
    checked = 0
    ledgers: set[Path] = set()
    current = None
    for s in found:
        where = s.location.describe()
        if where != current:
            print(where if where.isprintable() else _shown(where))
            current = where
        if s.name is None or s.error:
            print(f"  ✗ {_shown(s.name or 'config')}: {_shown(str(s.error))}")
            failed += 1
            continue
        name = _shown(s.name)
        if not s.wrapped and not args.all:
            if s.wrappable:
                how = f"gcfkit install-mcp {shlex.quote(s.name)} to wrap it"
                print(f"  - {name}: not wrapped; {how}")
            else:
                print(f"  - {name}: not wrappable (a remote server the proxy cannot relay)")
            continue
        if s.entry is None or s.transport != "stdio":
            print(f"  - {name}: a remote server; not started")
            continue
        checked += 1
        check = check_entry(s.entry, timeout=args.timeout)
        label = "wrapped" if s.wrapped else "not wrapped"
        if check.ok:
            about = _shown(f"{check.server} {check.version}".strip()) or "a server"
            via = ", through the proxy" if check.primer else ""
            if s.wrapped and not check.primer:
                via = (
                    " (nothing the proxy appends in its instructions: --no-primer or "
                    "--refs off, or not the proxy?)"
                )
            print(
                f"  ✓ {name}: {label}, {about} answered initialize and tools/list "
                f"({check.tools} tools){via} in {check.seconds:.1f} s"
            )
            if s.wrapped:
                ledger = ledger_of(s.proxy_args)
                if ledger is not None:
                    ledgers.add(ledger)
        else:
            failed += 1
            print(f"  ✗ {name}: {label}, failed at {check.step}: {_shown(check.problem)}")
            for line in check.stderr.splitlines()[-8:]:
                print(f"      stderr: {_shown(line)}")
    if not ledgers and checked == 0:
        ledgers.add(default_ledger_path())
    for path in sorted(ledgers):
        lc = check_ledger(path)
        if lc.ok:
            print(f"ledger {_shown(str(path))}: writable")
        else:
            failed += 1
            print(f"ledger {_shown(str(path))}: ✗ {_shown(lc.problem)}")
    if checked == 0 and not failed:
        print("no wrapped server to check: gcfkit install-mcp NAME wraps one")
        return 1
    print("all good" if not failed else f"{failed} problem(s)")
    return 0 if not failed else 1
