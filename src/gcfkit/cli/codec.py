"""``gcfkit encode`` (JSON to GCF) and ``gcfkit decode`` (GCF to JSON)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .. import decode, dumps
from ..jsonio import read_json_bytes, to_json_model
from .io import read_input, write_text


def register(sub: Any) -> None:
    enc = sub.add_parser(
        "encode",
        help="JSON to GCF",
        description="Read JSON (FILE or stdin) and write canonical GCF to stdout.",
    )
    enc.add_argument("file", nargs="?", help="JSON file (default: stdin)")
    enc.add_argument("--tool", help="tool name to put in the GCF header")
    enc.add_argument(
        "--graph",
        action="store_true",
        help="the input is the camelCase graph model (symbols, edges); write the graph profile",
    )
    enc.add_argument(
        "--dense",
        action="store_true",
        help="write the dense profile (a gcfkit extension, docs/extensions/dense.md; "
        "definitions chosen with exact o200k counts when the tokens extra is installed)",
    )
    enc.set_defaults(func=_encode)

    dec = sub.add_parser(
        "decode",
        help="GCF to JSON",
        description="Read any GCF payload (FILE or stdin) and write it as JSON to stdout. "
        "Graph payloads and deltas come out as their camelCase JSON model; dense payloads "
        "(docs/extensions/dense.md) as their value.",
    )
    dec.add_argument("file", nargs="?", help="GCF file (default: stdin)")
    dec.add_argument("--indent", type=int, default=None, help="pretty-print with N spaces")
    dec.set_defaults(func=_decode)


def _encode(args: argparse.Namespace) -> int:
    value = read_json_bytes(read_input(args.file))
    if args.graph:
        from .. import graph

        write_text(graph.dumps(graph.graph_from_model(value)))
    elif args.dense:
        from .. import dense, tokens

        counter = tokens.counter("o200k_base")
        count = counter.count if counter.exact else None
        write_text(dense.dumps(value, count=count, tool=args.tool))
    else:
        write_text(dumps(value, tool=args.tool))
    return 0


def _decode(args: argparse.Namespace) -> int:
    from .. import graph

    decoded = decode(read_input(args.file))
    if isinstance(decoded, graph.Graph):
        value = graph.graph_to_model(decoded)
    else:
        value = to_json_model(decoded)
    write_text(json.dumps(value, ensure_ascii=False, indent=args.indent) + "\n")
    return 0
