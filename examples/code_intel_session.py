"""A five-call code exploration through the official MCP client: JSON vs GCF tokens per call.

    .venv/bin/python examples/code_intel_session.py [PATH] [--query format] [--show]

Starts ``examples/code_intel_server.py`` twice over stdio on a temporary copy of PATH
(default: gcfkit's own ``src/``): one client asks nothing (JSON), the other declares
``experimental.output_format = {"format": "gcf"}``. Both make the same calls:

1. ``search_symbols(query)``
2. ``find_references(subject)``: the most-used search hit
3. ``blast_radius(subject)``: a graph (GCF graph profile, session starts)
4. ``blast_radius(caller)``: its top dependent's graph (symbols already sent: ``@N``)
5. ``list_symbols(module of subject)``: keyed rows with a ``pack_root``

then edit the module (one function added) and re-query ``list_symbols`` echoing that
``pack_root``: the GCF client receives a §10a delta. Tokens are o200k_base counts of the text
each client received (exact with the ``tokens`` extra, else an estimate: the output says
which). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from gcfkit import tokens
from gcfkit.mcp.client import with_output_format

HERE = Path(__file__).resolve().parent
SERVER = HERE / "code_intel_server.py"
REF = "# previously transmitted"


@dataclass
class Row:
    label: str
    json_tokens: int
    gcf_tokens: int
    form: str
    new: int | None
    reused: int | None


def _header(text: str) -> dict[str, str]:
    first = text.split("\n", 1)[0]
    if not first.startswith("GCF "):
        return {}
    return dict(p.split("=", 1) for p in first.split(" ")[1:] if "=" in p)


def _form(text: str) -> str:
    head = _header(text)
    if not head:
        return "JSON"
    if head.get("profile") == "graph":
        return "graph+session" if head.get("session") == "true" else "graph"
    if head.get("delta") == "true":
        return "delta"
    if head.get("unchanged") == "true":
        return "unchanged"
    return "keyed" if "key" in head else "generic"


def _symbol_counts(text: str) -> tuple[int, int] | None:
    if _header(text).get("profile") != "graph":
        return None
    lines = [ln for ln in text.splitlines() if ln.startswith("@") and "<" not in ln]
    reused = sum(1 for ln in lines if ln.endswith(REF))
    return len(lines) - reused, reused


def _text(result: Any) -> str:
    if result.is_error:
        raise SystemExit(f"tool error: {result.content[0].text}")
    return str(result.content[0].text)


def _pick_subject(root: Path, hits: list[dict[str, Any]]) -> str:
    """The agent's choice: the most-used definition among the search hits."""
    sys.path.insert(0, str(HERE))
    from code_intel_server import build_index

    index = build_index(root)
    best = max(hits, key=lambda h: (index.fan_in(h["qualified_name"]), -hits.index(h)))
    return str(best["qualified_name"])


def _module_of(qname: str, modules: set[str]) -> str:
    parts = qname.split(".")
    for n in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    raise SystemExit(f"no module for {qname}")


async def explore(root: Path, query: str, show: bool) -> list[Row]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), str(root)])
    rows: list[Row] = []
    with anyio.fail_after(120):  # two servers, a dozen calls: never hang a terminal
        async with AsyncExitStack() as stack:
            await _session(stack, params, root, query, show, rows)
    return rows


async def _session(
    stack: AsyncExitStack,
    params: StdioServerParameters,
    root: Path,
    query: str,
    show: bool,
    rows: list[Row],
) -> None:
    js = await stack.enter_async_context(Client(stdio_client(params), mode="legacy"))
    gcf = await stack.enter_async_context(
        Client(with_output_format(stdio_client(params), "gcf"), mode="legacy")
    )

    async def call(label: str, tool: str, args: dict[str, Any], **gcf_extra: Any) -> Any:
        j = await js.call_tool(tool, args)
        g = _text(await gcf.call_tool(tool, {**args, **gcf_extra}))
        jt = _text(j)
        counts = _symbol_counts(g)
        rows.append(
            Row(
                label,
                tokens.count(jt),
                tokens.count(g),
                _form(g),
                counts[0] if counts else None,
                counts[1] if counts else None,
            )
        )
        if show:
            print(f"--- {label} (GCF) ---\n{g}")
        return j.structured_content, g

    hits, _ = await call(f"search_symbols({query!r})", "search_symbols", {"query": query})
    found = hits["result"]
    if not found:
        raise SystemExit(f"no symbol matches {query!r}")
    subject = _pick_subject(root, found)
    await call(f"find_references({subject})", "find_references", {"symbol": subject})
    graph, _ = await call(f"blast_radius({subject})", "blast_radius", {"symbol": subject})
    callers = [s for s in graph["symbols"] if s["distance"] == 1] or graph["symbols"]
    caller = max(callers, key=lambda s: (s["score"], s["qualified_name"]))["qualified_name"]
    await call(f"blast_radius({caller})", "blast_radius", {"symbol": caller})
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for p in root.rglob("*.py")
    }
    module = _module_of(subject, modules)
    _, listed = await call(f"list_symbols({module})", "list_symbols", {"module": module})

    # An edit, then the same question again, echoing the pack_root the GCF client holds.
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    if not path.exists():
        path = root.joinpath(*module.split("."), "__init__.py")
    with path.open("a", encoding="utf-8") as f:
        f.write('\n\ndef added_by_the_session_script():\n    """A new helper."""\n')
    echo = _header(listed).get("pack_root")
    extra = {"pack_root": echo} if echo else {}
    await call(f"list_symbols({module}) after an edit", "list_symbols", {"module": module}, **extra)


def render(rows: list[Row], explored: int) -> str:
    out = [
        "| # | call | JSON tokens | GCF tokens | GCF form | new / reused symbols "
        "| cumulative JSON | cumulative GCF | cumulative savings |",
        "|---|---|---:|---:|---|---|---:|---:|---:|",
    ]
    cj = cg = 0
    for i, r in enumerate(rows, 1):
        cj += r.json_tokens
        cg += r.gcf_tokens
        syms = f"{r.new} / {r.reused}" if r.new is not None else ""
        num = str(i) if i <= explored else "re-query"
        out.append(
            f"| {num} | `{r.label}` | {r.json_tokens:,} | {r.gcf_tokens:,} | {r.form} | {syms} "
            f"| {cj:,} | {cg:,} | {100 * (1 - cg / cj):.1f}% |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("path", nargs="?", type=Path, help="source tree (default: gcfkit src/)")
    parser.add_argument("--query", default="format", help="what call 1 searches for")
    parser.add_argument("--show", action="store_true", help="print every GCF payload")
    args = parser.parse_args(argv)
    if args.path is None:
        import gcfkit

        source = Path(gcfkit.__file__).resolve().parent.parent
    else:
        source = args.path
    with tempfile.TemporaryDirectory(prefix="gcfkit-session-") as tmp:
        root = Path(tmp) / "src"
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        rows = anyio.run(explore, root, args.query, args.show)
    print(render(rows, explored=5))
    print(
        f"\nTokens: {tokens.DEFAULT_ENCODING}, {tokens.method(tokens.DEFAULT_ENCODING)} counts "
        "of the text each client received. JSON = compact JSON from the same server."
    )


if __name__ == "__main__":
    main()
