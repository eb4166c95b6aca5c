"""The codec layer's own rules, read with ast: it imports nothing above it, its leaves import
only leaves, and it needs nothing but the stdlib.

Every import counts, the ones inside functions too (a lazy import is still a dependency).
tests/test_layout.py checks the whole package for import cycles, module sizes and private
names taken across modules.
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
    "gcfkit.dense",
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
