"""``gcfkit ui``: the playground and the savings dashboard in the browser, on loopback."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from ..errors import ConfigError

__all__ = ["register"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="a local web page: format playground and savings dashboard",
        description="Serve a web page on this machine (http://127.0.0.1:8711/ by default) with "
        "a playground (paste JSON or GCF, or pick a real tool result, and see it in every "
        "format with exact token counts and a lossless check each) and the savings dashboard "
        "of the proxy's ledger (the numbers of gcfkit stats). Everything it loads ships with "
        "gcfkit; nothing is fetched from the network.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; another address makes your ledger "
        "visible to whoever can reach it, so it must be given explicitly)",
    )
    p.add_argument("--port", type=int, default=None, help="port (default 8711; 0 for any free)")
    p.add_argument("--ledger-file", metavar="FILE", help="the ledger the dashboard reads")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        from ..ui.server import DEFAULT_PORT, is_loopback, serve
    except ImportError as e:
        raise ConfigError(
            "invalid_option", f"gcfkit ui needs the ui extra: pip install 'gcfkit[ui]' ({e})"
        ) from None
    port = DEFAULT_PORT if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise ConfigError("invalid_option", f"--port {port}: expected 0..65535")
    if not is_loopback(args.host):
        print(
            f"gcfkit ui: warning: listening on {args.host}, not loopback: anyone who can "
            "reach this address can see your savings ledger. Open it by this machine's "
            "address (http://ADDRESS:PORT/); a name needs the bound host itself. Safer: "
            "keep 127.0.0.1 and tunnel (ssh -L PORT:127.0.0.1:PORT HOST)",
            file=sys.stderr,
        )

    def ready(url: str) -> None:
        print(f"gcfkit ui: {url}  (Ctrl-C to stop)", file=sys.stderr, flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(url)

    with contextlib.suppress(KeyboardInterrupt):
        serve(args.host, port, ledger=args.ledger_file, ready=ready)
    return 0
