"""Fuzzing the dense decoder: mutated dense payloads only ever decode or raise GCFError.

The mutators of tests/test_fuzz.py (and one that inserts dense syntax), applied to the dense
fixtures and to dense encodings of documents that use every construct. Seeded and bounded.
Any exception other than GCFError is a totality bug; every accepted payload must give a
JSON-model value that the dense codec round-trips. The same inputs decode alike with the
decoder's fast paths on and off (gcfkit.generic.fast's contract, tests/test_fast_paths.py).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gcfkit import dense
from gcfkit.errors import GCFError
from tests.codec_support import (
    EDGE_TOKENS,
    MUTATORS,
    assert_json_model,
    assert_same,
    mutants,
    rejected,
    same,
    wire_order,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dense"
H = "GCF-dense\n"
LONG = "authored 2026-08-07 by Dayna Blackwell"

_HANDWRITTEN = [
    H + f'$a={LONG}\n$b="x, y"\n## r [3]{{id,t=$a,l,o}}\n1|[2]: $b,"|"|^\n.o {{}}\n    k=$a\n'
    '2|[0]:\n@2 3|[1]: -|^{p,q,r}\n1|$b|"$c"\n',
    H + "## [3:]{key,a,b=x,c}\nk1|1|2\nk2|[1]: 3\nk3|~|4\n## t [2]{x,y}\n1\n2|~\n",
    H + "$q=v\n## o [2]{id,items}\n1|^\n.items [2]{sku,qty=1}\n    A\n    B\n"
    "2|^\n.items [1]\n    $q\n",
]


def _corpus() -> list[str]:
    out = list(_HANDWRITTEN)
    for path in sorted(FIXTURES.rglob("*.json")):
        fx = json.loads(path.read_text(encoding="utf-8"))
        for key in ("input", "expected"):
            text = fx.get(key)
            if isinstance(text, str) and text.startswith("GCF-dense"):
                out.append(text)
    rows = [{"id": i, "note": LONG, "tags": ["a", "$b"][: i % 3], "k": "c"} for i in range(5)]
    out.append(dense.dumps({"rows": rows, "m": {"x": {"v": LONG}, "y": {"v": 2}}}))
    return out


CORPUS = _corpus()
_DENSE_SPECIALS = ["$", "$a", "$b", "$zz", "[1]: ", "[0]:", "[2]: x,", "=", "=$a", "|~", "@0 ", "}"]


def _insert_dense(rng: random.Random, text: str) -> str | bytes:
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + rng.choice(_DENSE_SPECIALS) + text[pos:]


MUTATORS = [*MUTATORS, _insert_dense, _insert_dense]


def _check(payload: str | bytes) -> None:
    try:
        value: Any = dense.loads(payload)
    except GCFError as e:
        rejected(e)  # a decode error placed in its text, as every decoder's
        return
    assert_json_model(value)
    # What the decoder accepts, the codec carries: re-encoding loses nothing.
    assert same(dense.loads(dense.dumps(value)), wire_order(value))


def dense_mutants(seed: int, cases: int = 500) -> Iterator[str | bytes]:
    """``cases`` seeded mutations of the dense corpus, mostly of the body."""
    return mutants(seed, cases, CORPUS, keep_head_odds=0.9)


@pytest.mark.parametrize("seed", range(4))
def test_mutations_only_raise_gcferror(seed: int) -> None:
    for case, payload in enumerate(dense_mutants(seed)):
        try:
            _check(payload)
        except AssertionError:
            raise
        except Exception as e:  # any other exception is a totality bug
            pytest.fail(f"seed {seed} case {case}: {type(e).__name__}: {e}\n{payload!r:.2000}")


@pytest.mark.parametrize("seed", range(2))
def test_fast_paths_agree_on_dense_payloads(seed: int) -> None:
    for text in CORPUS:
        assert_same(text, dense.loads)
    for payload in dense_mutants(seed, 300):
        assert_same(payload, dense.loads)


_CONTEXTS = [
    "k={t}\n",
    "v[2]: {t},{t}\n",
    "## t [9]{{i,v}}\n" + "".join(f"{i}|{{t}}\n" for i in range(9)),
    "## t [2]{{i,v,w}}\n0|{t}\n1|{t}|x\n",
    "## t [2]{{i,v=x,w}}\n0|{t}\n1|{t}\n",
    "## m [9:]{{key,v}}\n" + "".join(f"k{i}|{{t}}\n" for i in range(9)),
    "## o [2]{{id,t}}\n1|^\n.t [1]{{u}}\n    {t}\n2|^\n.t [1]\n    {t}\n",
    "## o [2]{{id,t}}\n1|[2]: {t},{t}\n2|[1]: {t}\n",
    "={t}\n",
    "## [2]\n@0 ={t}\n@1 ={t}\n",
]
_DENSE_TOKENS = ["$a", "$b", "$", '"$a"', "[1]: $a", "[0]:", "[2]: x,", "[?]: x", "[1]: ~"]


@pytest.mark.parametrize("context", _CONTEXTS)
def test_tokens_decode_alike_in_every_dense_context(context: str) -> None:
    """Every awkward token, and the dense ones, wherever a fast path reads a dense scalar."""
    for tok in [*EDGE_TOKENS, *_DENSE_TOKENS]:
        assert_same(f"{H}$a=defined text\n" + context.format(t=tok), dense.loads)
