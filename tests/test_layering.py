"""The codec's import graph, read with ast: one-way, private names kept private, stdlib only.

Every import counts, the ones inside functions too (a lazy import is still a dependency).
A package's implicit import of its parent ``__init__`` is not an edge: every submodule has
it, and the front door imports its submodules, not the other way round.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: The codec layer (LAYOUT.md): pure, zero-dependency, below everything else.
CODEC = (
    "gcfkit",
    "gcfkit.errors",
    "gcfkit.grammar",
    "gcfkit.scalar",
    "gcfkit.header",
    "gcfkit.jsonio",
    "gcfkit.generic",
    "gcfkit.graph",
    "gcfkit.keyed",
    "gcfkit.relative",
    "gcfkit.stream",
    "gcfkit.tokens",
    "gcfkit.gcx1",
)
#: The codec's leaves: shared by both profiles, so they import neither (nor anything else
#: of gcfkit but each other).
LEAVES = ("gcfkit.errors", "gcfkit.grammar", "gcfkit.scalar", "gcfkit.header", "gcfkit.jsonio")
#: Imports outside the stdlib the codec may make: the ``tokens`` extra's tokenizer.
OPTIONAL = {"gcfkit.tokens": {"bpe_openai"}}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_codec(name: str) -> bool:
    return name == "gcfkit" or any(
        name == c or name.startswith(c + ".") for c in CODEC if c != "gcfkit"
    )


MODULES = {_module_name(p): p for p in sorted((SRC / "gcfkit").rglob("*.py"))}
CODEC_MODULES = sorted(m for m in MODULES if _is_codec(m))


def _package(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package(module)
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _imports(module: str) -> list[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for every import in ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, "", node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                # `from . import graph` imports a module; `from .x import name` a name.
                if sub in MODULES:
                    out.append((sub, "", node.lineno))
                else:
                    out.append((target, alias.name, node.lineno))
    return out


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in CODEC_MODULES}
    for m in CODEC_MODULES:
        for target, _, _ in _imports(m):
            if target in MODULES and target != m:
                graph[m].add(target)
    return graph


def test_the_codec_modules_are_found() -> None:
    assert {"gcfkit.grammar", "gcfkit.generic.decoder", "gcfkit.graph.lines"} <= set(CODEC_MODULES)


def test_the_codec_imports_nothing_above_it() -> None:
    upward = [
        f"{m} imports {target} (line {line})"
        for m in CODEC_MODULES
        for target, _, line in _imports(m)
        if target.startswith("gcfkit") and not _is_codec(target)
    ]
    assert not upward, upward


def test_the_leaves_import_only_leaves() -> None:
    wrong = [
        f"{m} imports {target} (line {line})"
        for m in LEAVES
        for target, _, line in _imports(m)
        if target.startswith("gcfkit") and target not in LEAVES
    ]
    assert not wrong, wrong


def test_the_codec_needs_only_the_stdlib() -> None:
    foreign = [
        f"{m} imports {target} (line {line})"
        for m in CODEC_MODULES
        for target, _, line in _imports(m)
        if not target.startswith("gcfkit")
        and target.partition(".")[0] not in sys.stdlib_module_names
        and target.partition(".")[0] not in OPTIONAL.get(m, set())
        and target != "__future__"
    ]
    assert not foreign, foreign


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return [*path[path.index(n) :], n]
            if n not in state and (cycle := visit(n)) is not None:
                return cycle
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)) is not None:
            return cycle
    return None


def test_the_codec_import_graph_has_no_cycle() -> None:
    cycle = _find_cycle(_edges())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_a_cycle() -> None:
    """graph.decoder and graph.delta imported each other before graph/lines.py."""
    graph = _edges()
    graph["gcfkit.graph.lines"].add("gcfkit.graph.delta")
    cycle = _find_cycle(graph)
    assert cycle is not None and {"gcfkit.graph.lines", "gcfkit.graph.delta"} <= set(cycle)


def test_no_codec_module_imports_another_ones_private_names() -> None:
    private = []
    for m in CODEC_MODULES:
        for target, name, line in _imports(m):
            if target.startswith("gcfkit") and name.startswith("_") and not name.startswith("__"):
                private.append(f"{m} imports {target}.{name} (line {line})")
        # ... nor reaches them as module attributes (`decoder._SCAN`).
        tree = ast.parse(MODULES[m].read_text(encoding="utf-8"))
        aliases = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if f"{_resolve(m, node)}.{alias.name}" in MODULES
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                private.append(f"{m} uses {node.value.id}.{node.attr} (line {node.lineno})")
    assert not private, private
