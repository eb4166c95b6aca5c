"""The decoder's fast paths against its general path: same value, or same error and line.

gcfkit.generic.fast reads the commonest lines optimistically (its module docstring states
the contract). With ``fast.ENABLED`` off every line takes the general state machine, so
decoding each input both ways and comparing checks the contract on every input we have:
all conformance fixtures, the fuzz corpus and its mutations, and the property tests'
examples (tests/test_properties.py compares both ways on each of them too).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

import gcfkit
from gcfkit import speedups
from gcfkit.generic import fast
from tests.codec_support import CORPUS, EDGE_TOKENS, assert_same, general, mutants, outcome
from tests.conformance import load_fixtures

FIXTURES = load_fixtures()


def _fixture_payloads() -> Iterator[Any]:
    """Every GCF text a fixture holds: inputs, expected wires, wires of deltas and sessions."""
    for path, fx in FIXTURES:
        if "inputBase64" in fx:
            yield pytest.param(base64.b64decode(fx["inputBase64"]), id=path)
        for key in ("input", "expected"):
            text = fx.get(key)
            if isinstance(text, str) and text.startswith("GCF"):
                yield pytest.param(text, id=f"{path}:{key}")
        nested = fx.get("input")
        if isinstance(nested, dict) and isinstance(nested.get("wire"), str):
            yield pytest.param(nested["wire"], id=f"{path}:wire")
        expected = fx.get("expected")
        if isinstance(expected, dict):
            wires = [expected.get("initialFull")]
            wires += [e.get("wire") for e in expected.get("emissions", [])]
            for n, wire in enumerate(w for w in wires if isinstance(w, str)):
                yield pytest.param(wire, id=f"{path}:emission{n}")


FIXTURE_PAYLOADS = list(_fixture_payloads())


def test_every_fixture_payload_is_collected() -> None:
    # Of the 281 fixtures, encode fixtures give their expected wire, decode and error
    # fixtures their input, round trips both or one, deltas and sessions their wires; the
    # pack-root and model-only fixtures none.
    assert len(FIXTURE_PAYLOADS) == 277


@pytest.mark.parametrize("payload", FIXTURE_PAYLOADS)
def test_fixture_payloads_decode_alike(payload: Any) -> None:
    assert_same(payload)
    if isinstance(payload, str) and payload.startswith("GCF profile=generic"):
        assert_same(payload, gcfkit.loads)


def test_the_fuzz_corpus_decodes_alike() -> None:
    for payload in CORPUS:
        assert_same(payload)


@pytest.mark.parametrize("seed", range(6))
def test_mutations_decode_alike(seed: int) -> None:
    for payload in mutants(seed):
        assert_same(payload)


def test_the_switch_really_turns_the_fast_paths_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the switch off, the fast loop is never entered (else this test proves nothing)."""
    calls = []
    real = fast.run

    def spy(p: Any, lines: list[str]) -> Any:
        calls.append(1)
        return real(p, lines)

    monkeypatch.setattr(fast, "run", spy)
    wire = "GCF profile=generic\nx=1\n## t [2]{a}\n1\n2\n"
    with speedups.pure_python():  # the C accelerator would read this canonical text itself
        gcfkit.loads(wire)
    assert calls == [1]
    general(gcfkit.loads, wire)
    assert calls == [1]


@pytest.mark.parametrize(
    "wire",
    [
        # A bad cell in a batch of plain rows: the general path names its line.
        "GCF profile=generic\n## t [12]{a,b}\n"
        + "".join(f"{i}|x\n" for i in range(9))
        + '9|"\\q"\n',
        # A short run with a bad cell: nothing of the run is kept by the fast path.
        "GCF profile=generic\n## t [3]{a}\n1\n1e999\n3\n",
        # A duplicate key, a count that does not match, a keyed map's duplicate member.
        "GCF profile=generic\na=1\na=2\n",
        "GCF profile=generic\ntags[3]: a,b\n",
        "GCF profile=generic\n## m [3:]{key,v}\nx|1\ny|2\nx|3\n",
        # A shared array schema's plain attachment, then one that breaks it.
        "GCF profile=generic\n## o [2]{id,t}\n@0 1|^\n.t [1]{u}\n    a\n@1 2|^\n.t [1]\n    ^\n",
    ],
)
def test_errors_are_the_general_paths(wire: str) -> None:
    want = general(gcfkit.loads, wire)
    assert want[0] == "error"
    assert outcome(gcfkit.loads, wire) == want


_CONTEXTS = [
    "a=0\nv={t}\n",
    "a=0\nv[2]: {t},{t}\n",
    "a=0\n## s\n  a=0\n  v={t}\n",
    "## t [9]{{i,v}}\n" + "".join(f"{i}|{{t}}\n" for i in range(9)),
    "## t [2]{{i,v}}\n0|{t}\n1|{t}\n",
    "## m [9:]{{key,v}}\n" + "".join(f"k{i}|{{t}}\n" for i in range(9)),
    "## o [2]{{id,t}}\n@0 1|^\n.t [1]{{u}}\n    {t}\n@1 2|^\n.t [1]\n    {t}\n",
    "## o [2]{{id,t}}\n@0 1|^\n.t [2]: {t},{t}\n@1 2|^\n.t [1]: {t}\n",
    "={t}\n",
    "## [2]\n@0 ={t}\n@1 ={t}\n",
]


@pytest.mark.parametrize("context", _CONTEXTS)
def test_edge_tokens_decode_alike_in_every_context(context: str) -> None:
    """Every awkward token (numbers at the int64 and double edges, number lookalikes,
    markers, quotes) in every place a fast path reads a scalar."""
    for tok in EDGE_TOKENS:
        assert_same("GCF profile=generic\n" + context.format(t=tok), gcfkit.loads)
