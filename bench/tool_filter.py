"""Benchmark: the tokens a tool filter (``--tools``) takes off the tool list, on the corpus.

A client puts every tool the server lists into the model's context on every turn, so a tool
the agent must not use costs tokens each turn on top of being a risk. For each server of
``../shared/corpus/mcp`` (its captured ``tools/list`` result), this runs the list through
the proxy core twice, without a filter and with the read-only filter below (the tools the
server itself marks ``readOnlyHint``, written as one would type it), and counts the result
as the client receives it (compact JSON of the ``tools/list`` result) in o200k_base and
cl100k_base. It checks that the filter keeps exactly the read-only tools and that a call to
each hidden one is refused.

    python bench/tool_filter.py            # prints the table, writes bench/tool_filter.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gcfkit import tokens
from gcfkit.jsonio import dumps_compact
from gcfkit.proxy.core import ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy
from gcfkit.proxy.toolfilter import ToolFilter

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "mcp"
OUT = Path(__file__).resolve().parent / "tool_filter.md"

#: Per server: the read-only view, as a user would write it (filesystem-npm is the same
#: server as filesystem, with another root: same list).
FILTERS = {
    "git": "!git_commit,!git_add,!git_reset,!git_create_branch,!git_checkout",
    "filesystem": "!write_file,!edit_file,!create_directory,!move_file",
    "memory": "read_graph,search_nodes,open_nodes",
    "serena": (
        "search_for_pattern,get_symbols_overview,find_*,get_diagnostics_for_file,"
        "read_memory,list_memories,initial_instructions"
    ),
    "everything": "!gzip-file-as-resource,!toggle-*,!simulate-research-query",
    "time": "get_current_time,convert_time",
}


def relayed(tools_list: dict[str, Any], spec: str | None) -> tuple[str, ProxyCore]:
    """The tools/list result as the client receives it through the proxy (and the core)."""
    policy = Policy() if spec is None else Policy().with_filter(ToolFilter.parse(spec))
    core = ProxyCore(ProxyConfig(policy=policy, primer=False, stats=False))
    core.from_client(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n')
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": tools_list}).encode() + b"\n"
    (out,) = core.from_server(line)
    return dumps_compact(json.loads(out.data)["result"]), core


def refused(core: ProxyCore, tool: str) -> bool:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool}}
    (sent,) = core.from_client(json.dumps(call).encode() + b"\n")
    (answer,) = core.from_server(b'{"jsonrpc":"2.0","id":2,"result":{}}\n')
    return json.loads(sent.data)["method"] == "ping" and "error" in json.loads(answer.data)


def main() -> int:
    rows = []
    totals = {e: [0, 0] for e in tokens.ENCODINGS}
    for server, spec in FILTERS.items():
        listed = json.loads((CORPUS / server / "meta" / "tools_list.json").read_text())
        names = [t["name"] for t in listed["tools"]]
        read_only = [t["name"] for t in listed["tools"] if t["annotations"]["readOnlyHint"]]
        full, _ = relayed(listed, None)
        kept_text, core = relayed(listed, spec)
        kept = [t["name"] for t in json.loads(kept_text)["tools"]]
        assert kept == read_only, (server, kept, read_only)
        assert all(refused(core, t) for t in names if t not in kept), server
        counts = {e: (tokens.count(full, e), tokens.count(kept_text, e)) for e in tokens.ENCODINGS}
        for e, (before, after) in counts.items():
            totals[e][0] += before
            totals[e][1] += after
        rows.append((server, f"{len(kept)} of {len(names)}", spec, counts))
    lines = [
        "# What a tool filter takes off the tool list",
        "",
        "`python bench/tool_filter.py`: each corpus server's captured `tools/list` result, "
        "relayed by the proxy core without and with the read-only filter (the tools the "
        "server marks `readOnlyHint`), counted as compact JSON. The tool list is in the "
        "model's context on every turn.",
        "",
        "| server | tools kept | `--tools` | o200k: list → filtered (saved) "
        "| cl100k: list → filtered (saved) |",
        "|---|---|---|---|---|",
    ]
    for server, shown, spec, counts in rows:
        cells = [_cell(*counts[e]) for e in tokens.ENCODINGS]
        lines.append(f"| {server} | {shown} | `{spec}` | {cells[0]} | {cells[1]} |")
    cells = [_cell(*totals[e]) for e in tokens.ENCODINGS]
    lines.append(f"| **all six** | | | {cells[0]} | {cells[1]} |")
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    sys.stdout.write(text)
    return 0


def _cell(before: int, after: int) -> str:
    saved = before - after
    return f"{before:,} → {after:,} ({saved:,}, {saved / before:.0%})" if before else "0"


if __name__ == "__main__":
    raise SystemExit(main())
