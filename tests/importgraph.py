"""gcfkit's import graph, read from the source with ``ast``: the one builder behind the layout
rules (tests/test_layout.py: cycles, sizes, private names, upward imports) and the codec's
layering rules (tests/test_layering.py).

Every import counts: the ones inside functions and ``importlib.import_module("...")`` calls
with a literal name too, so a lazy import can hide neither a cycle nor a dependency.

>>> module = MODULES["gcfkit.mcp.server"]
>>> "gcfkit.tokens" in {i.target for i in imports(module)}  # `from .. import tokens`
True
>>> "gcfkit.proxy.policy" in edges()["gcfkit.proxy.core"]
True
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "gcfkit"


@dataclass(frozen=True)
class Module:
    """One source file of the package: its dotted name, its path and its parsed tree."""

    name: str
    path: Path
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


@dataclass(frozen=True)
class Import:
    """One imported name: ``from source import name`` (``name`` is None for ``import
    source`` and ``import_module("source")``), and ``target``, the module it makes the importer
    depend on (``from . import tokens`` depends on gcfkit.tokens, not on gcfkit)."""

    source: str
    name: str | None
    line: int
    target: str


def _modules() -> dict[str, Module]:
    out: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        out[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return out


#: Every module of the package by dotted name.
MODULES = _modules()

#: Compiled modules (no source to read), each imported only by the one module that picks it,
#: as json picks _json.
EXTENSIONS = {"gcfkit._speedups": "gcfkit.speedups", "gcfkit._bpe": "gcfkit.tokens"}


def _resolve(module: Module, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _import(source: str, name: str | None, line: int) -> Import:
    sub = f"{source}.{name}"
    known = sub in MODULES or sub in EXTENSIONS
    return Import(source, name, line, sub if name is not None and known else source)


@cache
def imports(module: Module) -> tuple[Import, ...]:
    """Every import in ``module``, in the order ``ast.walk`` meets them."""
    out: list[Import] = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            out += [_import(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node.level, node.module)
            out += [_import(source, alias.name, node.lineno) for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append(_import(node.args[0].value, None, node.lineno))
    return tuple(out)


def edges() -> dict[str, set[str]]:
    """Module name to the package's modules it imports (itself left out)."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for module in MODULES.values():
        for imp in imports(module):
            if imp.target in MODULES and imp.target != module.name:
                graph[module.name].add(imp.target)
    return graph
