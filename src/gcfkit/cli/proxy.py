"""``gcfkit proxy``: an MCP server behind the proxy, over stdio or Streamable HTTP.

* ``gcfkit proxy [OPTIONS] -- COMMAND [ARGS...]``: a stdio server, a stdio client;
* ``gcfkit proxy --upstream URL``: a remote server, a stdio client;
* ``gcfkit proxy --http HOST:PORT -- COMMAND [ARGS...]``: a stdio server, served over HTTP;
* ``gcfkit proxy --http HOST:PORT --upstream URL``: HTTP on both sides (a gateway).

Tool results reach the client as GCF (or compact JSON) when that costs fewer tokens; every
other message passes byte for byte. See :mod:`gcfkit.proxy.core` for the rules.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..proxy.config import DENSE_CONSTRUCTS, ProxyConfig
from ..proxy.policy import Policy, ToolPolicy, load_policy
from ..proxy.toolfilter import ToolFilter
from ..readers import CLIENTS, STRUCTURED_MODES

__all__ = [
    "add_capture_options",
    "add_client_options",
    "capture_opener",
    "open_capture",
    "proxy_config",
    "register",
]

_EPILOG = """\
what is rewritten:
  tools/call results whose text blocks are JSON (or Python literals that render back
  exactly): to GCF, or its dense profile, when that has fewer tokens than compact JSON,
  else to compact JSON when smaller, else left alone. For a client whose model reads
  structuredContent (Claude Code, Codex: --structured auto) the value of structuredContent
  is what is answered so, in the content, and structuredContent and the tool's outputSchema
  are dropped. Errors, UI tools (_meta.ui), images, audio, resources, non-JSON text and file
  contents pass unchanged. File reads are told by name (read_file, read-file, readFile,
  get_file_text_by_path, cat...), by a description about file contents with a path
  argument, and shells (bash, run_command) count too; when in doubt, text is left alone.

policy file (JSON, or TOML on Python 3.11+ / with tomli):
  {"defaults": {"format": "gcf", "join": true, "delta": false, "min_bytes": 0},
   "tools": {"read_*": {"format": "off"}, "list_orders": {"delta": true, "key": "sku"},
             "run_query": {"file": false}},
   "file_tools": ["fetch_doc"], "not_file_tools": ["get_report_*"],
   "tool_filter": "git_*,!git_push"}

tool filters (--tools, and the policy's "tool_filter"; both apply when both are given):
  a comma list of tool-name globs; !GLOB hides what it matches, and when any plain GLOB is
  given a tool must match one. A hidden tool is left out of tools/list, and a tools/call of
  it is answered with a JSON-RPC error naming the filter, never sent to the server:
    --tools 'git_*,!git_push'     every git_ tool but git_push
    --tools '!write_*,!delete_*'  every tool but those

opting out from the client:
  session:  initialize capabilities
              {"experimental": {"output_format": {"format": "json"}}}
  one call: the argument "_format": "json" (or "off"), removed before forwarding;
            --advertise-format lists it in each tool's input schema

remote servers (Streamable HTTP, protocol 2025-11-25 sessions and 2026-07-28):
  --upstream URL            the server is at URL; the client talks stdio to the proxy
  --header "Name: value"    sent to the upstream on every request (repeatable); ${VAR}
                            in the value is the environment variable VAR, so a token
                            stays out of the config: --header 'Authorization: Bearer ${TOKEN}'
  --http HOST:PORT          serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio:
                            in front of COMMAND, or of --upstream URL (a gateway that passes
                            the client's own Authorization, session and OAuth discovery
                            through). HOST must be given; use 127.0.0.1 unless the proxy is
                            meant to be reached from other machines. On every bind, Host
                            and Origin are checked (--allow-host, --allow-origin), bodies,
                            sessions and slow clients are bounded; a gateway lends its
                            --header credential beyond loopback only with --client-token.
  --state redis://HOST:PORT/DB
                            with --http and --upstream: sessions' ref= results kept in
                            Redis too, so gateway replicas answer each other's _since
  --keepalive SECONDS       with --http: an SSE comment on a stream silent this long
                            (default 15; 0: none), so proxies on the way keep it open

examples:
  gcfkit proxy -- uvx mcp-server-git --repository .
  gcfkit proxy --delta --policy policy.json -- npx -y @modelcontextprotocol/server-memory
  gcfkit proxy --upstream https://mcp.example.com/mcp --header 'Authorization: Bearer ${TOKEN}'
  gcfkit proxy --http 127.0.0.1:8765 -- uvx mcp-server-git --repository .
  gcfkit proxy --http 127.0.0.1:8765 --upstream https://mcp.example.com/mcp
"""


def register(sub: Any) -> None:
    """Add the ``proxy`` command to the ``gcfkit`` subparsers."""
    p = sub.add_parser(
        "proxy",
        help="run an MCP server (stdio or Streamable HTTP) behind the GCF proxy",
        description=(
            "Relay an MCP server, delivering JSON tool results as GCF (or compact JSON) when "
            "that costs fewer tokens. Put a stdio server's command after --, or name a remote "
            "one with --upstream URL; --http HOST:PORT serves HTTP instead of stdio."
        ),
        usage=(
            "gcfkit proxy [OPTIONS] [--http HOST:PORT] -- COMMAND [ARGS...]\n"
            "       gcfkit proxy [OPTIONS] [--http HOST:PORT] --upstream URL [--header H]..."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--format",
        choices=("gcf", "json", "off"),
        default="gcf",
        help="most the proxy may do: gcf (default), json (pure minifier), off (relay only)",
    )
    p.add_argument("--policy", metavar="FILE", help="per-tool policy file (JSON or TOML)")
    p.add_argument(
        "--tools",
        metavar="GLOBS",
        help="which tools the client sees and may call: a comma list of globs, !GLOB hides "
        "(e.g. 'git_*,!git_push'); a call to a hidden tool is refused with a JSON-RPC error",
    )
    p.add_argument(
        "--no-join",
        action="store_true",
        help="do not join a result's JSON-object text blocks into one array",
    )
    p.add_argument(
        "--delta",
        nargs="?",
        const="keyed",
        choices=("keyed", "session"),
        help="keyed (or no value): send repeated calls' keyed-set results as GCF deltas "
        "(spec 10a); session: also answer every repeated call relative to its latest result, "
        "as if it passed _since (assumes the client keeps every result in context)",
    )
    p.add_argument(
        "--reanchor",
        type=int,
        default=15,
        metavar="N",
        help="with --delta, resend the full result every N turns (default 15); also the most "
        "relative answers in a row before a full one",
    )
    p.add_argument(
        "--refs",
        choices=("auto", "all", "off"),
        default=ProxyConfig().refs,
        help="name results (ref=) and answer calls that pass _since relative to the named "
        f"result: auto (default) names a result of {ProxyConfig().ref_free_bytes:,} bytes or more "
        "(a text result gets a 4-token ref= block), and a smaller one only within what it saves "
        "until the client uses _since; all names every result of 128 bytes or more; off",
    )
    p.add_argument(
        "--min-bytes",
        type=int,
        default=0,
        metavar="N",
        help="leave text blocks smaller than N bytes alone",
    )
    p.add_argument(
        "--dense",
        default="all",
        metavar="CONSTRUCTS",
        help="dense-profile constructs the proxy may use when they make a result fewer tokens: "
        "all (default), off, or a comma list of defs,lists,constants,short_rows",
    )
    p.add_argument(
        "--primer",
        choices=("payload", "instructions"),
        default=None,
        help="where a reader's explanation of GCF travels: a comment line in each payload that "
        f"needs it, or the server's instructions (default: {ProxyConfig().primer_carrier})",
    )
    p.add_argument("--no-primer", action="store_true", help="send no explanation of GCF at all")
    p.add_argument(
        "--literals",
        choices=("exact", "tuples", "off"),
        default="exact",
        help="Python-literal results ([{'id': 1}]): compress those that render back exactly "
        "(default), also read tuples as lists (lossy: the tuple type), or never",
    )
    add_client_options(p)
    p.add_argument(
        "--decode-args",
        action="store_true",
        help="decode GCF tool arguments where the tool's schema wants an object or array",
    )
    p.add_argument(
        "--advertise-format",
        action="store_true",
        help="add the optional _format argument to each tool's input schema in tools/list",
    )
    p.add_argument("--no-stats", action="store_true", help="do not write the savings ledger")
    p.add_argument("--ledger", metavar="FILE", help="ledger file (default: the state dir's)")
    p.add_argument(
        "--encoding",
        choices=("o200k_base", "cl100k_base"),
        default="o200k_base",
        help="tokenizer that decides what is smaller (default o200k_base)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="per result; past it the original is sent (default 0.5)",
    )
    p.add_argument(
        "--time-budget-per-mb",
        type=float,
        default=0.6,
        metavar="SECONDS",
        help="more per MB of a result (default 0.6: 1.1 s at 1 MB, 6.5 s at 10 MB)",
    )
    p.add_argument("--name", default="", help="server name for the ledger (default: serverInfo)")
    p.add_argument(
        "--grace",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="on shutdown, wait this long after closing the server's stdin before SIGTERM to "
        "its process group (default 2), then at most min(SECONDS, 1) before SIGKILL; a signal "
        "to the proxy sends SIGTERM at once, so it is gone within the 2 s clients give",
    )
    p.add_argument("--upstream", metavar="URL", help="the MCP server's Streamable HTTP URL")
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar='"NAME: VALUE"',
        help="an HTTP header for the upstream (repeatable); ${VAR} names an environment variable",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve Streamable HTTP on HOST:PORT (path /mcp) instead of stdio",
    )
    p.add_argument(
        "--state",
        metavar="URL",
        help="a gateway's sessions' ref= results shared with its other replicas in Redis "
        "(redis://HOST:PORT/DB), so any replica answers a _since",
    )
    add_http_options(p)
    p.add_argument(
        "--keepalive",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="with --http: an SSE comment on a stream silent this long, so that proxies "
        "between the client and gcfkit do not cut it (default 15; 0: none)",
    )
    add_capture_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the MCP server command, after --")
    p.set_defaults(func=_run)


def add_http_options(p: argparse.ArgumentParser) -> None:
    """Who may use an ``--http`` server, and its bounds (README: Running it for others)."""
    from ..transports.http_limits import DEFAULT_LIMITS as limits

    g = p.add_argument_group("serving over HTTP (--http)")
    g.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name clients may use besides loopback names and the address they "
        "connect to (repeatable; '*': any)",
    )
    g.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser Origin allowed besides loopback pages, e.g. https://app.example "
        "(repeatable; '*': any)",
    )
    g.add_argument(
        "--client-token",
        metavar="TOKEN",
        help="clients must send 'Authorization: Bearer TOKEN' (${VAR}: an environment "
        "variable); required to lend --header credentials beyond loopback",
    )
    g.add_argument(
        "--max-sessions",
        type=int,
        metavar="N",
        help=f"sessions at once: server processes with -- COMMAND (default "
        f"{limits.max_processes}), sessions remembered by a gateway (default "
        f"{limits.max_sessions})",
    )
    g.add_argument(
        "--max-memory-mb",
        type=int,
        default=limits.remembered_bytes // 2**20,
        metavar="MB",
        help="a gateway's ref= results remembered across sessions, least recently used "
        f"forgotten first (default {limits.remembered_bytes // 2**20})",
    )
    g.add_argument(
        "--idle-timeout",
        type=float,
        default=limits.idle_timeout,
        metavar="SECONDS",
        help=f"end a session idle this long (default {limits.idle_timeout:g})",
    )
    g.add_argument(
        "--max-body-mb",
        type=int,
        default=limits.max_body_bytes // 2**20,
        metavar="MB",
        help=f"largest request body (default {limits.max_body_bytes // 2**20})",
    )


def _guard(args: argparse.Namespace, host: str) -> Any:
    """The :class:`~gcfkit.transports.http_guard.Guard` the ``--http`` options ask for."""
    import dataclasses
    import os

    from ..transports.http import parse_header
    from ..transports.http_guard import Guard
    from ..transports.http_limits import DEFAULT_LIMITS

    token = None
    if args.client_token is not None:
        token = parse_header(f"Authorization: {args.client_token}", os.environ)[1]
        if not token:
            raise ConfigError("invalid_option", "--client-token is empty")
    sessions = {}
    if args.max_sessions is not None:
        key = "max_sessions" if args.upstream else "max_processes"
        sessions[key] = args.max_sessions
    try:
        limits = dataclasses.replace(
            DEFAULT_LIMITS,
            remembered_bytes=args.max_memory_mb * 2**20,
            idle_timeout=args.idle_timeout,
            max_body_bytes=args.max_body_mb * 2**20,
            **sessions,
        )
    except ValueError:
        raise ConfigError(
            "invalid_option",
            "--max-sessions, --max-memory-mb, --idle-timeout and --max-body-mb must be > 0",
        ) from None
    return Guard(
        host,
        allowed_hosts=frozenset(args.allow_host),
        allowed_origins=frozenset(args.allow_origin),
        client_token=token,
        limits=limits,
    )


def add_capture_options(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--capture-dir`` and ``--capture-max-mb`` (``gcfkit proxy`` and ``gcfkit capture``)."""
    if not required:
        p.add_argument(
            "--capture-dir",
            metavar="DIR",
            help="also record the server's raw tool results under DIR in the corpus format, "
            "for gcfkit verify DIR (never changes what is forwarded; results are your data: "
            "files are private to you); with --http, a directory per session",
        )
    p.add_argument(
        "--capture-max-mb",
        type=int,
        default=256,
        metavar="MB",
        help="stop recording past this many MB written (default 256)",
    )


def open_capture(args: argparse.Namespace) -> Any:
    """The :class:`~gcfkit.traffic.capture.Capture` the options ask for, or None."""
    if not getattr(args, "capture_dir", None):
        return None
    from ..traffic.capture import Capture

    return Capture(args.capture_dir, args.name, max_bytes=_capture_max_bytes(args))


def _capture_max_bytes(args: argparse.Namespace) -> int:
    if args.capture_max_mb < 1:
        raise ConfigError("invalid_option", "--capture-max-mb must be at least 1")
    return int(args.capture_max_mb) * 1024 * 1024


def capture_opener(args: argparse.Namespace) -> Callable[[], Any] | None:
    """What opens a recording per session (an HTTP server records each session in its own
    directory, a stdio proxy its one), the options checked now; None without
    ``--capture-dir``."""
    if not getattr(args, "capture_dir", None):
        return None
    _capture_max_bytes(args)
    return functools.partial(open_capture, args)


def _dense_constructs(spec: str) -> tuple[str, ...]:
    """``--dense``: all, off, or a comma list of construct names.

    >>> _dense_constructs("lists,constants"), _dense_constructs("off")
    (('lists', 'constants'), ())
    """
    if spec == "all":
        return DENSE_CONSTRUCTS
    if spec in ("off", "none", ""):
        return ()
    names = tuple(n.strip() for n in spec.split(","))
    unknown = sorted(set(names) - set(DENSE_CONSTRUCTS))
    if unknown:
        raise ConfigError(
            "invalid_option",
            f"--dense: unknown construct(s) {', '.join(unknown)}; "
            f"use all, off or some of {','.join(DENSE_CONSTRUCTS)}",
        )
    return tuple(c for c in DENSE_CONSTRUCTS if c in names)


def _run(args: argparse.Namespace) -> int:
    from ..ledger import Ledger

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.upstream and command:
        raise ConfigError("invalid_option", "give either --upstream URL or a server command")
    if not args.upstream and not command:
        raise ConfigError(
            "invalid_option",
            "no server: gcfkit proxy [OPTIONS] -- COMMAND, or gcfkit proxy --upstream URL",
        )
    if args.header and not args.upstream:
        raise ConfigError("invalid_option", "--header is for the --upstream server")
    if args.state and not (args.http and args.upstream):
        raise ConfigError("invalid_option", "--state is for a gateway (--http ... --upstream URL)")
    if args.keepalive < 0:
        raise ConfigError("invalid_option", "--keepalive must be >= 0")
    if args.time_budget_per_mb < 0:
        raise ConfigError("invalid_option", "--time-budget-per-mb must be >= 0")
    if not args.http and (args.allow_host or args.allow_origin or args.client_token):
        raise ConfigError(
            "invalid_option", "--allow-host, --allow-origin and --client-token are for --http"
        )
    if args.min_bytes < 0 or args.reanchor < 1 or not args.time_budget > 0 or args.grace < 0:
        raise ConfigError(
            "invalid_option", "--min-bytes, --reanchor, --time-budget and --grace must be > 0"
        )
    capture = capture_opener(args)
    config = proxy_config(args)
    ledger = Ledger(args.ledger) if args.ledger and not args.no_stats else None
    if args.upstream:
        url = _check_url(args.upstream)
        headers = _headers(args.header)
    if args.http:
        from ..transports.http_server import parse_listen, serve_command, serve_gateway

        host, port = parse_listen(args.http)
        guard = _guard(args, host)
        if args.upstream:
            return asyncio.run(
                serve_gateway(
                    url,
                    host,
                    port,
                    config,
                    headers=headers,
                    ledger=ledger,
                    guard=guard,
                    keepalive=args.keepalive,
                    capture=capture,
                    state=args.state,
                )
            )
        return asyncio.run(
            serve_command(
                command,
                host,
                port,
                config,
                ledger=ledger,
                guard=guard,
                grace=args.grace,
                keepalive=args.keepalive,
                capture=capture,
            )
        )
    if args.upstream:
        from ..transports.http_client import run_upstream

        return asyncio.run(
            run_upstream(
                url,
                config,
                headers=headers,
                ledger=ledger,
                grace=args.grace,
                capture=capture() if capture is not None else None,
            )
        )
    from ..transports.stdio import run_proxy

    opened = capture() if capture is not None else None
    return asyncio.run(run_proxy(command, config, ledger=ledger, grace=args.grace, capture=opened))


def proxy_config(args: argparse.Namespace) -> ProxyConfig:
    """The core's configuration from the proxy's options (``gcfkit verify`` has a subset of
    them: what it lacks takes the proxy's default)."""
    delta = getattr(args, "delta", None)
    base = ToolPolicy(
        format="gcf",
        join=not getattr(args, "no_join", False),
        delta=delta is not None,
        min_bytes=getattr(args, "min_bytes", 0),
    )
    policy_file = getattr(args, "policy", None)
    policy = load_policy(policy_file, base) if policy_file else Policy(defaults=base)
    tools = getattr(args, "tools", None)
    if tools is not None:
        policy = policy.with_filter(ToolFilter.parse(tools, "--tools"))
    return ProxyConfig(
        policy=policy,
        format=getattr(args, "format", "gcf"),
        primer=not getattr(args, "no_primer", False),
        decode_args=getattr(args, "decode_args", False),
        advertise_format=getattr(args, "advertise_format", False),
        stats=not getattr(args, "no_stats", False),
        encoding=getattr(args, "encoding", "o200k_base"),
        time_budget=getattr(args, "time_budget", 0.5),
        time_budget_per_mb=getattr(args, "time_budget_per_mb", 0.6),
        reanchor=getattr(args, "reanchor", 15),
        server_name=getattr(args, "name", ""),
        refs=getattr(args, "refs", ProxyConfig().refs),
        session_deltas=delta == "session",
        dense=_dense_constructs(getattr(args, "dense", "all")),
        primer_carrier=getattr(args, "primer", None) or ProxyConfig().primer_carrier,
        literals=getattr(args, "literals", "exact"),
        client=getattr(args, "client", "") or "",
        structured=getattr(args, "structured", "auto"),
    )


def add_client_options(p: argparse.ArgumentParser) -> None:
    """``--client`` and ``--structured`` (the proxy's, and ``gcfkit verify``'s: what the
    client's model reads decides what is delivered and what the ledger counts)."""
    known = ", ".join(n for c in CLIENTS for n in c.names[:1])
    p.add_argument(
        "--client",
        metavar="NAME",
        default="",
        help="the client in front, when it does not say so in initialize (clientInfo.name): "
        f"{known}; what its model reads decides --structured auto",
    )
    p.add_argument(
        "--structured",
        choices=STRUCTURED_MODES,
        default="auto",
        help="results carrying structuredContent: auto (default) delivers its value as the "
        "content, compressed, to a client whose model reads structuredContent (Claude Code, "
        "Codex) and drops the tools' outputSchema; keep never does; text does for any client",
    )


def _check_url(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("invalid_option", f"--upstream {url!r}: expected an http(s):// URL")
    return url


def _headers(specs: list[str]) -> dict[str, str]:
    import os

    from ..transports.http import parse_header

    out: dict[str, str] = {}
    for spec in specs:
        name, value = parse_header(spec, os.environ)
        out[name] = value
    return out
