#!/usr/bin/env python3
"""``make demo``: the bundled demo MCP server behind ``gcfkit proxy``, driven by the official
MCP SDK client. For each call it prints the tokens the model would have read without the
proxy (what the server sent) and what it reads through it, then the total saved.

No network, no configuration: the server is ``examples/demo_server.py`` on stdio, and the
proxy runs with ``--no-stats`` so nothing is written to your ledger.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from gcfkit import tokens
from gcfkit.answers.primer import RELATIVE_PRIMER

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "demo_server.py")]
PROXY = [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--delta", "--"]

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_orders", {"limit": 30}),
    ("search", {"query": "refund"}),
    ("report", {}),
    ("inventory", {}),
    ("hello", {"name": "Ada"}),
    ("fail", {}),
    ("stock", {}),
    ("stock", {}),
    ("stock", {}),
]


def _text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


def _form(before: str, after: str) -> str:
    if after == before:
        return "as sent"
    head = after.split("\n", 1)[0].split(" ")
    if head[0] == "GCF-dense":
        return "GCF dense profile"
    if head[0] != "GCF":
        return "compact JSON"
    if "delta=true" in head:
        return "GCF delta (only what changed)"
    if "unchanged=true" in head:
        return "GCF unchanged"
    return "GCF"


async def _run(command: list[str]) -> tuple[str | None, list[str]]:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        texts = [_text_of(await session.call_tool(name, args)) for name, args in CALLS]
        return session.instructions, texts


async def main() -> int:
    _, sent = await asyncio.wait_for(_run(SERVER), 60)
    instructions, delivered = await asyncio.wait_for(_run(PROXY + SERVER), 60)
    enc = "o200k_base"
    print(f"gcfkit proxy demo: tokens the model reads ({enc}, exact: {tokens.is_exact(enc)})\n")
    print(f"{'call':<14} {'as sent':>8} {'delivered':>10} {'saved':>7}  form")
    total_sent = total_delivered = 0
    for (name, _), before, after in zip(CALLS, sent, delivered, strict=True):
        n_before = tokens.count(before, enc)
        n_after = tokens.count(after, enc)
        total_sent += n_before
        total_delivered += n_after
        form = _form(before, after)
        pct = 100.0 * (n_before - n_after) / n_before if n_before else 0.0
        print(f"{name:<14} {n_before:>8} {n_after:>10} {pct:>6.1f}%  {form}")
    saved = total_sent - total_delivered
    print(
        f"\n{'total':<14} {total_sent:>8} {total_delivered:>10} "
        f"{100.0 * saved / total_sent:>6.1f}%  ({saved} tokens saved)"
    )
    # The GCF explanation travels in each payload (--primer payload); only the sentence on
    # asking with _since has to be in the instructions, before the first call.
    if instructions and instructions.endswith(RELATIVE_PRIMER):
        primer = tokens.count(RELATIVE_PRIMER, enc)
        print(f"The server's instructions gained the _since sentence: {primer} tokens, once.")
    print("\nWhat the model reads for list_orders:\n")
    print("\n".join(delivered[0].splitlines()[:8]) + "\n...")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
