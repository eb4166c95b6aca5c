"""The codec layer's own rules: it imports nothing above it, its leaves import only leaves, and
it needs nothing but the stdlib.

The import graph is tests/importgraph.py's, the one tests/test_layout.py checks the whole
package with (for import cycles, module sizes and private names taken across modules): every
import counts, the ones inside functions too (a lazy import is still a dependency).
"""

from __future__ import annotations

import sys

from .importgraph import EXTENSIONS, MODULES, imports

#: The codec layer (README.md, "Architecture"): pure, zero-dependency, below everything else.
CODEC = (
    "gcfkit",
    "gcfkit.speedups",
    "gcfkit._speedups",
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
    "gcfkit._bpe",
    "gcfkit.gcx1",
)
#: The codec's leaves: shared by both profiles, so they import neither (nor anything else
#: of gcfkit but each other).
LEAVES = (
    "gcfkit.errors",
    "gcfkit.grammar",
    "gcfkit.scalar",
    "gcfkit.header",
    "gcfkit.jsonio",
    "gcfkit.speedups",
)
#: Imports outside the stdlib the codec may make: the ``tokens`` extra's tokenizer.
OPTIONAL = {"gcfkit.tokens": {"bpe_openai"}}


def _is_codec(name: str) -> bool:
    return name == "gcfkit" or any(
        name == c or name.startswith(c + ".") for c in CODEC if c != "gcfkit"
    )


CODEC_MODULES = sorted(m for m in MODULES if _is_codec(m))


def test_the_codec_modules_are_found() -> None:
    assert {"gcfkit.grammar", "gcfkit.generic.decoder", "gcfkit.graph.lines"} <= set(CODEC_MODULES)


def test_the_codec_imports_nothing_above_it() -> None:
    upward = [
        f"{m} imports {imp.target} (line {imp.line})"
        for m in CODEC_MODULES
        for imp in imports(MODULES[m])
        if imp.target.startswith("gcfkit") and not _is_codec(imp.target)
    ]
    assert not upward, upward


def test_the_leaves_import_only_leaves() -> None:
    wrong = [
        f"{m} imports {imp.target} (line {imp.line})"
        for m in LEAVES
        for imp in imports(MODULES[m])
        if imp.target.startswith("gcfkit")
        and imp.target not in LEAVES
        and imp.target not in EXTENSIONS
    ]
    assert not wrong, wrong


def test_the_codec_needs_only_the_stdlib() -> None:
    foreign = [
        f"{m} imports {imp.target} (line {imp.line})"
        for m in CODEC_MODULES
        for imp in imports(MODULES[m])
        if not imp.target.startswith("gcfkit")
        and imp.target.partition(".")[0] not in sys.stdlib_module_names
        and imp.target.partition(".")[0] not in OPTIONAL.get(m, set())
        and imp.target != "__future__"
    ]
    assert not foreign, foreign


def test_each_extension_is_imported_by_its_picker_only() -> None:
    wrong = [
        f"{m} imports {imp.target} (line {imp.line})"
        for m in MODULES
        for imp in imports(MODULES[m])
        if imp.target in EXTENSIONS and EXTENSIONS[imp.target] != m
    ]
    assert not wrong, wrong
    assert all(
        any(imp.target == ext for imp in imports(MODULES[m])) for ext, m in EXTENSIONS.items()
    )
