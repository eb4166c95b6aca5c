"""Shared helpers for tests: where the official fixtures live, and type-strict equality.

The conformance suite is read straight from ``../shared/conformance`` (relative to the repo
root), as CI lays it out; set ``GCF_CONFORMANCE_DIR`` to point elsewhere. The corpus is
``../shared/corpus``, or ``GCFKIT_CORPUS`` (the variable bench/ reads too).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gcfkit.header import DENSE_MAGIC
from gcfkit.jsonio import same_value

REPO = Path(__file__).resolve().parents[1]
CONFORMANCE_DIR = Path(
    os.environ.get("GCF_CONFORMANCE_DIR", REPO.parent / "shared" / "conformance")
)
#: How a GCF payload starts: v3.5.3 (any profile), or dense (docs/extensions/dense.md D2).
GCF_HEADS = ("GCF profile=", DENSE_MAGIC)
CORPUS_DIR = Path(os.environ.get("GCFKIT_CORPUS", REPO.parent / "shared" / "corpus"))


def missing_fixtures_hint() -> str:
    """What to tell someone whose checkout has no conformance suite next to it."""
    return (
        f"no conformance fixtures under {CONFORMANCE_DIR}: the suite is read from "
        "../shared/conformance next to the repository; set GCF_CONFORMANCE_DIR to the "
        "directory that holds it"
    )


def load_fixtures() -> list[tuple[str, dict[str, Any]]]:
    """Every fixture as (relative path, parsed JSON), sorted by path.

    A missing suite fails loudly (at collection) rather than leaving every fixture test
    with nothing to run.
    """
    out = []
    for path in sorted(CONFORMANCE_DIR.rglob("*.json")):
        with path.open(encoding="utf-8") as f:
            out.append((path.relative_to(CONFORMANCE_DIR).as_posix(), json.load(f)))
    if not out:
        raise FileNotFoundError(missing_fixtures_hint())
    return out


def strict_equal(a: Any, b: Any, *, ordered: bool = True, int_float: bool = True) -> bool:
    """Structural equality where a bool never equals a number and key order counts:
    :func:`gcfkit.jsonio.same_value`, with the fixtures' vocabulary.

    ``ordered=False`` compares object membership only (decode fixtures were written from
    unordered maps). ``int_float`` lets an integer-valued float equal the same int (§2.3.1:
    the wire does not keep ``1.0`` apart from ``1``).
    """
    return same_value(a, b, key_order=ordered, number_types=not int_float)
