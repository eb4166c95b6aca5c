"""The tree shows the design: no import cycle, no module over 1,000 lines, no module importing
another's private names, and configuration errors raised as ConfigError.

The import graph is tests/importgraph.py's (imports inside functions and
``importlib.import_module("...")`` calls with a literal name included), so a lazy import
cannot hide a cycle.

``PENDING`` lists what the codec refactoring of issue 9 has not fixed yet; each entry must
still be true (so the list shrinks as the fixes land, and cannot go stale).
"""

from __future__ import annotations

import ast

import pytest

from gcfkit.errors import CONFIG_CODES

from .importgraph import EXTENSIONS, MODULES, Module, edges, imports

MAX_LINES = 1000

# What is still open on the codec side (issue 9, branch codec9): (kind, detail).
PENDING: frozenset[tuple[str, str]] = frozenset()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe_cycle(component: list[str], graph: dict[str, set[str]]) -> str:
    # A readable loop through the component, starting at its first module.
    members = set(component)
    path = [component[0]]
    while True:
        nxt = sorted(graph[path[-1]] & members)
        step = next((m for m in nxt if m == path[0] and len(path) > 1), None)
        if step is not None or not nxt:
            return " -> ".join([*path, path[0]])
        unvisited = [m for m in nxt if m not in path]
        if not unvisited:
            return " -> ".join([*path, nxt[0]])
        path.append(unvisited[0])


def _findings() -> set[tuple[str, str]]:
    findings: set[tuple[str, str]] = set()
    graph = edges()
    for component in _cycles(graph):
        findings.add(("cycle", _describe_cycle(component, graph)))
    for module in MODULES.values():
        if len(module.path.read_text(encoding="utf-8").splitlines()) > MAX_LINES:
            findings.add(("size", module.name))
        for imp in imports(module):
            if EXTENSIONS.get(imp.target) == module.name:
                continue  # the picker of a compiled module takes its private name
            if (
                imp.name is not None
                and imp.name.startswith("_")
                and not imp.name.startswith("__")
                and imp.source.startswith("gcfkit")
                and imp.source != module.name
            ):
                findings.add(("private", f"{module.name} imports {imp.source}.{imp.name}"))
        for node in ast.walk(module.tree):
            finding = _config_error_finding(module, node)
            if finding is not None:
                findings.add(("config-error", finding))
    return findings


_ERROR_CLASSES = {"GCFError", "GCFDecodeError", "GCFEncodeError", "ConfigError"}


def _config_error_finding(module: Module, node: ast.AST) -> str | None:
    """A raise site whose class and literal code disagree: a configuration code raised as a
    payload error, or ConfigError with a payload code."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _ERROR_CLASSES
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return None
    code = node.args[0].value
    if (code in CONFIG_CODES) == (node.func.id == "ConfigError"):
        return None
    return f"{module.name}:{node.lineno} {node.func.id}({code!r})"


FINDINGS = _findings()


def test_the_scan_sees_the_whole_package() -> None:
    # A broken walk would make every check below pass vacuously.
    assert {"gcfkit", "gcfkit.proxy.core", "gcfkit.cli.stats", "gcfkit.clients.jsondoc"} <= set(
        MODULES
    )
    graph = edges()
    assert "gcfkit.proxy.policy" in graph["gcfkit.proxy.core"]
    assert "gcfkit.tokens" in graph["gcfkit.mcp.server"]  # `from .. import tokens`


@pytest.mark.parametrize("kind", ["cycle", "size", "private", "config-error"])
def test_nothing_new_breaks_the_layout(kind: str) -> None:
    new = sorted(d for k, d in FINDINGS if k == kind and (k, d) not in PENDING)
    assert new == []


def test_pending_exceptions_are_still_real() -> None:
    # When the codec side fixes one, it must leave PENDING too.
    stale = sorted(PENDING - FINDINGS)
    assert stale == []


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _describe_cycle(["a", "b", "c"], graph) == "a -> b -> c -> a"
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_application_layers_do_not_import_upward() -> None:
    # Data flows down: the proxy core never reaches for its shells, the CLI or the SDK helpers.
    graph = edges()
    upward = {
        "gcfkit.answers": (
            "gcfkit.proxy",
            "gcfkit.transports",
            "gcfkit.cli",
            "gcfkit.mcp",
            "gcfkit.ledger",
        ),
        "gcfkit.proxy": ("gcfkit.transports", "gcfkit.cli", "gcfkit.mcp", "gcfkit.ledger"),
        "gcfkit.transports": ("gcfkit.cli", "gcfkit.mcp"),
        "gcfkit.clients": ("gcfkit.proxy", "gcfkit.transports", "gcfkit.cli", "gcfkit.mcp"),
        "gcfkit.measure": ("gcfkit.cli", "gcfkit.transports", "gcfkit.mcp"),
    }

    def within(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    bad = []
    for module, targets in graph.items():
        for layer, forbidden in upward.items():
            if within(module, layer):
                bad += [f"{module} -> {t}" for t in targets if any(within(t, f) for f in forbidden)]
    assert bad == []
