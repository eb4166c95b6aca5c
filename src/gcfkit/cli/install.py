"""``gcfkit install-mcp``, ``uninstall-mcp`` and ``mcp-status``: put a configured MCP server
behind ``gcfkit proxy`` (and take it out again) in Claude Code, Cursor and Claude Desktop.

The work is done by :mod:`gcfkit.clients` (stdlib only); this module is argument parsing
and printing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from ..clients.install import Action, FilePlan, install_mcp, uninstall_mcp
from ..clients.locations import CLIENTS, SCOPES
from ..clients.status import ServerStatus, mcp_status

_CLIENT_HELP = (
    "which client's configs: claude-code, cursor, claude-desktop, or all "
    "(default: wherever NAME is configured, which must be one place)"
)
_SCOPE_HELP = (
    "user (~/.claude.json, ~/.cursor/mcp.json, Claude Desktop), "
    "project (./.mcp.json, ./.cursor/mcp.json) or local (~/.claude.json for this directory)"
)


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client", choices=[*CLIENTS, "all"], help=_CLIENT_HELP)
    parser.add_argument("--scope", choices=SCOPES, help=_SCOPE_HELP)
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="use this config file instead of the known ones (its top-level mcpServers, and "
        "projects[<this directory>].mcpServers)",
    )


def register(sub: Any) -> None:
    inst = sub.add_parser(
        "install-mcp",
        help="run a configured MCP server behind gcfkit proxy",
        description="Wrap the stdio MCP server NAME in its client config so that the client "
        "starts `gcfkit proxy -- COMMAND ARGS...` instead of COMMAND ARGS... Every other field "
        "stays as it was; the original entry is recorded in gcfkit's state directory and a "
        "backup of the file is made before writing. Running it again does not double-wrap.",
    )
    inst.add_argument("name", metavar="NAME", help="the server's name under mcpServers")
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
        help="how the client should start gcfkit (default: this installation's gcfkit, by "
        "absolute path)",
    )
    inst.set_defaults(func=_install)

    uninst = sub.add_parser(
        "uninstall-mcp",
        help="restore a server wrapped by install-mcp",
        description="Put back the original entry of NAME (exactly, if the wrapper was not "
        "edited since; otherwise the command after `--` is unwrapped and other edits kept). "
        "A server that is not wrapped is left alone.",
    )
    uninst.add_argument("name", metavar="NAME", help="the server's name under mcpServers")
    _add_selection(uninst)
    uninst.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    uninst.set_defaults(func=_uninstall)

    status = sub.add_parser(
        "mcp-status",
        help="list MCP servers in client configs, wrapped or not",
        description="List every MCP server found in the known client configs (or --config), "
        "and whether it runs behind gcfkit proxy.",
    )
    _add_selection(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=_status)


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
    return _MESSAGES[action.action].format(name=action.name, where=action.location.describe())


def _report(plans: Sequence[FilePlan], dry_run: bool) -> None:
    out = sys.stdout
    for plan in plans:
        for action in plan.actions:
            prefix = "[dry run] " if dry_run and action.changes else ""
            print(prefix + _message(action), file=out)
        if dry_run and plan.changed:
            out.write(plan.diff())
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
        args.name,
        client=args.client,
        scope=args.scope,
        config=args.config,
        proxy_args=args.proxy_args,
        launcher=launcher,
        name_option=args.name_option,
        dry_run=args.dry_run,
    )
    _report(plans, args.dry_run)
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    plans = uninstall_mcp(
        args.name,
        client=args.client,
        scope=args.scope,
        config=args.config,
        dry_run=args.dry_run,
    )
    _report(plans, args.dry_run)
    return 0


def _status_line(s: ServerStatus) -> str:
    if s.name is None:
        return f"  error: {s.error}"
    if s.error:
        return f"  {s.name}: {s.error}"
    if s.wrapped:
        opts = f" ({' '.join(s.proxy_args)})" if s.proxy_args else ""
        state = f"wrapped{opts}"
    elif s.transport == "http":
        state = "not wrappable (http)"
    else:
        state = "not wrapped"
    return f"  {s.name:<24} {s.transport:<6} {state:<24} {s.command}"


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
            print(where)
            current = where
        print(_status_line(s))
    return 0
