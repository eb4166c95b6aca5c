"""gcfkit's dense-profile fixtures (tests/fixtures/dense), run strictly, by ``operation``.

Contracts: tests/fixtures/dense/SOURCE.md. Exact bytes, key order, a bool never a number,
an int never a float, the exact error category; and every dense payload is rejected by two
strict v3.5.3 decoders, gcfkit's own ``loads`` and gcf-python's ``decode_generic``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gcfkit
from gcfkit import GCFError, dense, tokens
from gcfkit.errors import GCFDecodeError
from gcfkit.header import DENSE_MAGIC
from tests.codec_support import identical
from tests.gcf_python import rejects_at_line_1

# Run again on the pure-Python codec by make test (the marker's description).
pytestmark = pytest.mark.pure

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "dense"
FIXTURES = [
    (p.relative_to(FIXTURE_DIR).as_posix(), json.loads(p.read_text(encoding="utf-8")))
    for p in sorted(FIXTURE_DIR.rglob("*.json"))
]
OPERATIONS = ("encode", "roundtrip", "decode", "error")
DENSE_HEADER = DENSE_MAGIC


def _dumps(fx: dict[str, Any]) -> str:
    opts = dict(fx.get("options", {}))
    name = opts.pop("tokenizer", None)
    count = None
    if name is not None:
        counter = tokens.counter(name)
        if not counter.exact:
            pytest.skip(f"exact {name} counts need the tokens extra (bpe-openai)")
        count = counter.count
    return dense.dumps(fx["input"], count=count, **opts)


def _v353_rejects(text: str) -> None:
    """D2: a strict v3.5.3 decoder fails on a dense payload at its header."""
    with pytest.raises(GCFError) as err:
        gcfkit.loads(text)
    assert err.value.code == "unsupported_profile" and err.value.line == 1, err.value
    rejects_at_line_1(text)


def _payloads(fx: dict[str, Any]) -> list[str]:
    texts = [fx.get("expected"), fx.get("input")]
    return [t for t in texts if isinstance(t, str) and t.startswith(DENSE_HEADER)]


@pytest.mark.parametrize("path,fx", FIXTURES, ids=[p for p, _ in FIXTURES])
def test_fixture(path: str, fx: dict[str, Any]) -> None:
    op = fx["operation"]
    assert op in OPERATIONS, f"{path}: unknown operation {op!r}"
    if op in ("encode", "roundtrip"):
        wire = _dumps(fx)
        assert wire == fx["expected"], f"{path}\n--- got\n{wire}--- expected\n{fx['expected']}"
        back = dense.loads(wire)
        if op == "roundtrip":
            assert identical(back, fx["input"]), f"{path}: {back!r}"
        # Idempotence (D9): the canonical payload re-encodes to itself.
        assert _dumps({**fx, "input": back}) == wire
    elif op == "decode":
        got = dense.loads(fx["input"])
        assert identical(got, fx["expected"]), f"{path}: {got!r}"
        assert identical(gcfkit.decode(fx["input"]), fx["expected"])
    else:
        # Placed in the payload as every GCF decoder places its errors; gcfkit.decode
        # rejects it alike unless it is a v3.5.3 payload (which only dense.loads refuses).
        readers: list[Callable[[str], Any]] = [dense.loads]
        if fx["input"].startswith(DENSE_HEADER):
            readers.append(gcfkit.decode)
        for decode in readers:
            with pytest.raises(GCFDecodeError) as err:
                decode(fx["input"])
            e = err.value
            assert e.code == fx["expectedError"], f"{path}: {e}"
            assert e.doc == fx["input"] and e.line == e.lineno >= 1
            assert 0 <= e.pos <= len(e.doc) and e.colno >= 1
    for text in _payloads(fx):
        _v353_rejects(text)


def test_every_operation_and_folder_is_covered() -> None:
    ops = Counter(fx["operation"] for _, fx in FIXTURES)
    assert set(ops) == set(OPERATIONS), ops
    folders = {p.split("/", 1)[0] for p, _ in FIXTURES}
    assert {"definitions", "list-cells", "constants", "short-rows", "row-ids"} <= folders
    # Every new error code has a fixture.
    codes = {fx["expectedError"] for _, fx in FIXTURES if fx["operation"] == "error"}
    assert {"invalid_definition", "undefined_reference", "invalid_constant"} <= codes
