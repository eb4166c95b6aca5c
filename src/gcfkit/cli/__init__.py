"""The ``gcfkit`` command line: one submodule per command group.

Each module named in ``_COMMAND_MODULES`` exposes ``register(subparsers)``, which adds its
subcommands and sets ``func`` (``(args) -> int``) as each subparser's default.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .. import __version__, speedups
from ..errors import GCFError

# Command groups, in --help order. A group whose optional extra is missing still registers
# (its commands then explain which extra to install).
_COMMAND_MODULES: tuple[str, ...] = (
    "codec",
    "proxy",
    "install",
    "stats",
    "traffic",
    "ui",
    "eval",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gcfkit",
        description="GCF (Graph Compact Format): fewer tokens for the same JSON.",
    )
    parser.add_argument(
        "--version", action="version", version=f"gcfkit {__version__} ({speedups.status()})"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gcfkit`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args))
    except GCFError as e:
        print(str(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
