"""A small code-intelligence MCP server over a Python source tree, answering in GCF on request.

Run it over stdio (default tree: gcfkit's own ``src/``)::

    .venv/bin/python examples/code_intel_server.py [PATH] [--default-format gcf]

Tools (all built on the stdlib ``ast`` module, re-indexed when a file changes):

* ``search_symbols(query, kind?, limit?)``: matching definitions, a list of rows
  (GCF generic: one tabular section).
* ``find_references(symbol, limit?)``: where a symbol is used (GCF generic).
* ``blast_radius(symbol, depth?, limit?)``: the symbol, its dependents and theirs, as a
  :class:`gcfkit.graph.Graph` with distance groups and ``calls``/``references`` edges
  (GCF graph profile; on a stateful connection, symbols already sent travel as ``@N``).
* ``list_symbols(module)``: the definitions of one module, keyed by ``name``; echo the
  ``pack_root`` of the previous answer to get only what changed (GCF generic delta, §10a).

Every tool answers JSON unless the client asked for GCF: at ``initialize``
(``experimental.output_format = {"format": "gcf"}``) or per call (``format="gcf"``).
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from gcfkit.graph import Edge, Graph, Symbol
from gcfkit.mcp.server import GCFResponder

Kind = Literal["function", "class", "method"]


@dataclass(frozen=True)
class Definition:
    qualified_name: str
    kind: Kind
    file: str
    line: int
    end_line: int
    doc: str


@dataclass(frozen=True)
class Reference:
    target: str
    file: str
    line: int
    col: int
    scope: str  # qualified name of the enclosing definition, or the module
    edge_type: Literal["calls", "references"]
    resolved: bool  # through scopes and imports, not by a unique short name


@dataclass
class Index:
    """Definitions and references of one source tree."""

    root: Path
    defs: dict[str, Definition] = field(default_factory=dict)
    refs: list[Reference] = field(default_factory=list)
    modules: dict[str, str] = field(default_factory=dict)  # module -> file
    by_name: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    by_target: dict[str, list[Reference]] = field(default_factory=lambda: defaultdict(list))

    def fan_in(self, qname: str) -> int:
        """How many distinct definitions use ``qname``."""
        return len({r.scope for r in self.by_target.get(qname, ())})

    def resolve_symbol(self, symbol: str) -> Definition:
        if symbol in self.defs:
            return self.defs[symbol]
        short = symbol.rsplit(".", 1)[-1]
        candidates = [q for q in self.by_name.get(short, []) if q.endswith(symbol)]
        if len(candidates) == 1:
            return self.defs[candidates[0]]
        if not candidates:
            raise ToolError(f"no symbol {symbol!r}; try search_symbols first")
        raise ToolError(f"{symbol!r} is ambiguous: {', '.join(sorted(candidates)[:10])}")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or path.stem


def _first_doc_line(node: ast.AST) -> str:
    doc = (
        ast.get_docstring(node, clean=True)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module))
        else None
    )
    line = (doc or "").strip().split("\n", 1)[0]
    return line if len(line) <= 80 else line[:77] + "..."


def _python_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath) / name


class _ModuleScan(ast.NodeVisitor):
    """One module's definitions, imports and the dotted names each scope uses; the names
    are resolved across modules afterwards, by :func:`build_index`."""

    def __init__(self, module: str, file: str, is_package: bool) -> None:
        self.module = module
        self.file = file
        self.is_package = is_package
        self.defs: list[Definition] = []
        self.aliases: dict[str, str] = {}  # local name -> qualified target
        self.uses: list[tuple[str, str, int, int, str, str]] = []  # dotted, scope, line, col...
        self._stack: list[tuple[str, str]] = []  # (qualified name, kind)

    # -- imports -------------------------------------------------------------------------

    def _package(self) -> str:
        return self.module if self.is_package else self.module.rpartition(".")[0]

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                top = a.name.split(".", 1)[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            pkg = self._package().split(".")
            keep = len(pkg) - (node.level - 1)
            pkg = pkg[: max(keep, 0)]
            base = ".".join([*pkg, base] if base else pkg)
        for a in node.names:
            if a.name != "*":
                self.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name

    # -- definitions ---------------------------------------------------------------------

    def _define(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        parent = self._stack[-1] if self._stack else None
        prefix = parent[0] if parent else self.module
        qname = f"{prefix}.{node.name}"
        if isinstance(node, ast.ClassDef):
            kind: Kind = "class"
        else:
            kind = "method" if parent and parent[1] == "class" else "function"
        if not parent:
            self.aliases[node.name] = qname  # the later binding wins, as at run time
        self.defs.append(
            Definition(
                qname,
                kind,
                self.file,
                node.lineno,
                node.end_lineno or node.lineno,
                _first_doc_line(node),
            )
        )
        for dec in node.decorator_list:
            self.visit(dec)
        self._stack.append((qname, kind))
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                self.visit(base)
        else:
            # annotations and defaults are what the function depends on, too
            self.visit(node.args)
            if node.returns is not None:
                self.visit(node.returns)
        for child in node.body:
            self.visit(child)
        self._stack.pop()

    visit_FunctionDef = _define
    visit_AsyncFunctionDef = _define
    visit_ClassDef = _define

    # -- uses ----------------------------------------------------------------------------

    def _scope(self) -> str:
        return self._stack[-1][0] if self._stack else self.module

    def visit_Call(self, node: ast.Call) -> None:
        dotted = _dotted(node.func)
        if dotted:
            # the receiver chain (``mod`` of ``mod.f()``) is part of this one use
            self._record(dotted, node.func, "calls")
        else:
            self.visit(node.func)
        for a in node.args:
            self.visit(a)
        for k in node.keywords:
            self.visit(k.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = _dotted(node)
        if dotted and isinstance(node.ctx, ast.Load):
            self._record(dotted, node, "references")
        else:
            self.visit(node.value)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._record(node.id, node, "references")

    def _record(self, dotted: str, node: ast.expr, edge_type: str) -> None:
        cls = next((q for q, k in reversed(self._stack) if k == "class"), None)
        self.uses.append(
            (dotted, self._scope(), node.lineno, node.col_offset, edge_type, cls or "")
        )


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def build_index(root: Path) -> Index:
    """Parse every ``.py`` file under ``root`` and resolve what each scope refers to."""
    index = Index(root)
    scans: list[_ModuleScan] = []
    for path in _python_files(root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(root).as_posix()
        module = _module_name(root, path)
        scan = _ModuleScan(module, rel, path.name == "__init__.py")
        for stmt in tree.body:
            scan.visit(stmt)
        index.modules[module] = rel
        scans.append(scan)
        for d in scan.defs:
            index.defs[d.qualified_name] = d
            index.by_name[d.qualified_name.rsplit(".", 1)[-1]].append(d.qualified_name)
    aliases = {s.module: s.aliases for s in scans}

    def follow(qname: str) -> str | None:
        # Re-exports: ``pkg.dumps`` may be ``from .encoder import dumps`` inside pkg.
        for _ in range(8):
            if qname in index.defs:
                return qname
            mod, _, name = qname.rpartition(".")
            target = aliases.get(mod, {}).get(name)
            if target is None or target == qname:
                break
            qname = target
        return qname if qname in index.defs else None

    for scan in scans:
        for dotted, scope, line, col, edge_type, cls in scan.uses:
            head, _, rest = dotted.partition(".")
            target: str | None = None
            if head in ("self", "cls") and cls and rest:
                target = follow(f"{cls}.{rest.split('.', 1)[0]}")
            elif head in scan.aliases:
                full = scan.aliases[head] + (f".{rest}" if rest else "")
                # the longest prefix that names a definition: ``mod.Cls.meth.attr`` -> meth
                parts = full.split(".")
                for n in range(len(parts), 0, -1):
                    target = follow(".".join(parts[:n]))
                    if target:
                        break
            resolved = target is not None
            if target is None and rest and edge_type == "calls":
                # A unique method/function name called through an unknown receiver.
                short = dotted.rsplit(".", 1)[-1]
                candidates = index.by_name.get(short, [])
                if len(candidates) == 1:
                    target = candidates[0]
            if target is None or target == scope:
                continue
            ref = Reference(
                target,
                scan.file,
                line,
                col,
                scope,
                "calls" if edge_type == "calls" else "references",
                resolved,
            )
            index.refs.append(ref)
            index.by_target[target].append(ref)
    return index


class Project:
    """The index of a tree, rebuilt when a file's size or mtime changes."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._stamp: tuple[tuple[str, int, int], ...] = ()
        self._index: Index | None = None

    def index(self) -> Index:
        stamp = tuple(
            (str(p), st.st_mtime_ns, st.st_size)
            for p in _python_files(self.root)
            for st in [p.stat()]
        )
        if self._index is None or stamp != self._stamp:
            self._index = build_index(self.root)
            self._stamp = stamp
        return self._index


def _score(fan_in: int) -> float:
    # A property of the symbol, not of the query: how much of the tree leans on it. The same
    # symbol keeps the same node line in every answer, so a session can reference it (§9).
    return round(min(0.99, 0.3 + 0.12 * math.log2(1 + fan_in)), 2)


def build_server(root: Path, *, default_format: Literal["gcf", "json"] = "json") -> MCPServer:
    """The example server over ``root``; ``default_format`` for clients that ask nothing."""
    project = Project(root)
    gcf = GCFResponder(default_format=default_format)
    mcp = MCPServer(
        "code-intel",
        instructions="Python code intelligence (ast). Results are JSON, or GCF when asked.",
    )

    @mcp.tool()
    @gcf.tool
    def search_symbols(
        query: str, kind: Kind | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        """Find definitions whose name contains `query` (case-insensitive)."""
        q = query.lower()
        hits: list[tuple[int, str, Definition]] = []
        for qname, d in project.index().defs.items():
            name = qname.rsplit(".", 1)[-1].lower()
            if kind and d.kind != kind:
                continue
            if name == q:
                rank = 0
            elif name.startswith(q):
                rank = 1
            elif q in name:
                rank = 2
            elif q in qname.lower():
                rank = 3
            else:
                continue
            hits.append((rank, qname, d))
        hits.sort(key=lambda h: (h[0], h[1]))
        return [
            {
                "qualified_name": d.qualified_name,
                "kind": d.kind,
                "file": d.file,
                "line": d.line,
                "doc": d.doc,
            }
            for _, _, d in hits[: max(limit, 0)]
        ]

    @mcp.tool()
    @gcf.tool
    def find_references(symbol: str, limit: int = 50) -> dict[str, Any]:
        """Where `symbol` (a qualified or unambiguous short name) is used."""
        index = project.index()
        d = index.resolve_symbol(symbol)
        refs = sorted(
            index.by_target.get(d.qualified_name, []), key=lambda r: (r.file, r.line, r.col)
        )
        return {
            "symbol": d.qualified_name,
            "defined_at": f"{d.file}:{d.line}",
            "count": len(refs),
            "references": [
                {"file": r.file, "line": r.line, "col": r.col, "in": r.scope, "kind": r.edge_type}
                for r in refs[: max(limit, 0)]
            ],
        }

    @mcp.tool()
    @gcf.tool
    def blast_radius(symbol: str, depth: int = 2, limit: int = 40) -> Graph:
        """What may break if `symbol` changes: its dependents up to `depth` hops, as a graph."""
        index = project.index()
        d = index.resolve_symbol(symbol)
        distance = {d.qualified_name: 0}
        provenance: dict[str, str] = {d.qualified_name: "ast_resolved"}
        edges: dict[tuple[str, str], str] = {}
        frontier = [d.qualified_name]
        for hop in range(1, max(depth, 0) + 1):
            nxt: list[str] = []
            for target in frontier:
                for r in index.by_target.get(target, []):
                    scope = r.scope
                    if scope not in index.defs:
                        continue  # module-level uses have no symbol to show
                    key = (scope, target)
                    if edges.get(key) != "calls":
                        edges[key] = r.edge_type
                    if scope not in distance:
                        if len(distance) >= limit:
                            continue
                        distance[scope] = hop
                        provenance[scope] = "ast_resolved" if r.resolved else "ast_inferred"
                        nxt.append(scope)
            frontier = sorted(nxt)
        symbols = tuple(
            Symbol(q, index.defs[q].kind, _score(index.fan_in(q)), provenance[q], dist)
            for q, dist in distance.items()
        )
        return Graph(
            symbols,
            tuple(Edge(s, t, kind) for (s, t), kind in sorted(edges.items()) if s in distance),
        )

    @mcp.tool()
    @gcf.tool(delta_key="name")
    def list_symbols(module: str) -> dict[str, list[dict[str, Any]]]:
        """The definitions of one module (dotted name or file path), keyed by `name`.

        Pass the `pack_root` of a previous answer to receive only what changed."""
        index = project.index()
        if module not in index.modules:
            by_file = {f: m for m, f in index.modules.items()}
            module = by_file.get(module.replace(os.sep, "/"), module)
        if module not in index.modules:
            raise ToolError(f"no module {module!r}")
        prefix = module + "."
        symbols = [
            {
                "name": q[len(prefix) :],
                "kind": d.kind,
                "line": d.line,
                "end_line": d.end_line,
                "doc": d.doc,
            }
            for q, d in sorted(index.defs.items(), key=lambda kv: kv[1].line)
            if d.file == index.modules[module] and q.startswith(prefix)
        ]
        return {"symbols": symbols}

    return mcp


def default_root() -> Path:
    """gcfkit's own ``src/`` tree."""
    import gcfkit

    return Path(gcfkit.__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("path", nargs="?", type=Path, default=None, help="source tree")
    parser.add_argument("--default-format", choices=("json", "gcf"), default="json")
    args = parser.parse_args(argv)
    root = args.path or default_root()
    if not root.is_dir():
        sys.exit(f"not a directory: {root}")
    build_server(root, default_format=args.default_format).run("stdio")


if __name__ == "__main__":
    main()
