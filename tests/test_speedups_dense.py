"""The C accelerator's dense profile (``encode_dense``, ``decode_dense``) against the
pure-Python reference, as tests/test_speedups.py does for v3.5.3.

Every check compares the two paths in one process (:func:`gcfkit.speedups.pure_python`):
the same text and the same reported constructs, or the same error; the same value (types
and key order included), or the same error code and place. The inputs are the dense
fixtures, the MCP and TOON corpora, the dense property tests' documents in every construct
configuration, and seeded mutations of dense payloads. And the accelerator must actually
serve canonical text, or it would be tested for nothing.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit import GCFError, dense, speedups
from gcfkit.generic import definitions
from gcfkit.generic.encoder import encode_dense
from gcfkit.header import dense_header_line, to_text
from tests.test_dense_properties import CONFIGS, REPEATED, dense_documents
from tests.test_speedups import SAMPLES, _place, _strict

requires_c = pytest.mark.skipif(
    speedups.accelerator is None, reason="the C accelerator is not built or is switched off"
)

_SETTINGS: dict[str, Any] = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

FIXTURES = Path(__file__).parent / "fixtures" / "dense"
HEADER = dense_header_line()


def _fixtures() -> list[dict[str, Any]]:
    out = []
    for path in sorted(FIXTURES.rglob("*.json")):
        fx = json.loads(path.read_text(encoding="utf-8"))
        fx["name"] = str(path.relative_to(FIXTURES))
        out.append(fx)
    return out


FIXTURE_CASES = _fixtures()


def _flags(config: dict[str, bool]) -> tuple[bool, bool, bool, dict[str, Any]]:
    """The accelerator's three switches, and encode_dense's keywords (``defs`` apart)."""
    return (
        config.get("lists", True),
        config.get("constants", True),
        config.get("short_rows", True),
        {k: v for k, v in config.items() if k != "defs"},
    )


def _both_encode(value: Any, config: dict[str, bool]) -> tuple[Any, Any, bool]:
    """(accelerated, reference, served): encode_dense's (text, constructs), or the error's
    code and text; served when the accelerator answered itself."""
    defs = definitions.select(value) if config.get("defs", True) else {}
    lists, constants, short_rows, flags = _flags(config)

    def run() -> Any:
        try:
            return encode_dense(value, defs, **flags)
        except GCFError as e:
            return ("error", e.code, str(e))

    fast = run()
    with speedups.pure_python():
        reference = run()
    accel = speedups.accelerator
    served = accel is not None and (
        accel.encode_dense(value, HEADER, defs, lists, constants, short_rows) is not None
    )
    return fast, reference, served


def _encode_values() -> list[tuple[str, Any]]:
    out = [
        (fx["name"], fx["input"])
        for fx in FIXTURE_CASES
        if fx["operation"] in ("encode", "roundtrip")
    ]
    return out + SAMPLES


@requires_c
def test_c_dense_encoder_writes_the_reference_text_for_every_sample() -> None:
    values = _encode_values()
    assert len(values) > 250
    served = 0
    for name, value in values:
        for config in CONFIGS:
            fast, reference, answered = _both_encode(value, config)
            assert fast == reference, (name, config)
            served += answered
    assert served >= 0.97 * len(values) * len(CONFIGS)


@requires_c
def test_c_dense_encoder_reports_each_construct_it_writes() -> None:
    rows: list[dict[str, Any]] = [
        {"name": f"commit {i}", "type": "commit", "tags": ["v2", REPEATED[0]], "err": None}
        for i in range(4)
    ]
    rows[0]["x"] = {"a": 1}  # attachments, row ids, a short row
    for config in CONFIGS:
        fast, reference, served = _both_encode({"rows": rows, "o": REPEATED[0]}, config)
        assert served and fast == reference
        off = {k for k, v in config.items() if not v}
        assert fast[1] == {"defs", "lists", "constants", "short_rows"} - off, config


@requires_c
@settings(max_examples=700, **_SETTINGS)
@given(dense_documents, st.sampled_from(CONFIGS))
def test_c_dense_encoder_agrees_with_the_reference(value: Any, config: dict[str, bool]) -> None:
    fast, reference, served = _both_encode(value, config)
    assert fast == reference
    if isinstance(reference[0], str) and reference[0] != "error":
        assert served, reference[0]


@requires_c
def test_c_dense_encoder_hands_back_what_it_cannot_do_exactly() -> None:
    class Name(str):
        pass

    odd: list[Any] = [
        {"a": float("nan")},
        {"rows": [{"k": Name("x")}, {"k": "y"}]},
        {"rows": [{"k": 2**64}, {"k": 1}]},
        {Name("$k"): ["\ud800"]},
        {"t": [[1], [2]]},
    ]
    accel = speedups.accelerator
    assert accel is not None
    for value in odd:
        fast, reference, _ = _both_encode(value, {})
        assert fast == reference
    assert accel.encode_dense({"a": float("inf")}, HEADER, {}, True, True, True) is None
    # A definition the reference spells itself (a str subclass key) goes back too.
    assert accel.encode_dense({"a": "x"}, HEADER, {Name("x"): "a"}, True, True, True) is None


def _reference(text: str | bytes) -> tuple[str, Any]:
    with speedups.pure_python():
        return _read(text)


def _read(text: str | bytes) -> tuple[str, Any]:
    try:
        return "value", dense.loads(text)
    except GCFError as e:
        return "error", _place(e)


def _check_decode(text: str | bytes) -> bool:
    """dense.loads gives the reference's value or error, and the accelerator's own answer,
    when it gives one, is the reference's value. True when it answered."""
    accel = speedups.accelerator
    assert accel is not None
    reference = _reference(text)
    got = _read(text)
    assert got[0] == reference[0], (text, got, reference)
    if got[0] == "value":
        assert _strict(got[1], reference[1]), text
    else:
        assert got[1] == reference[1], text
    try:
        answer = accel.decode_dense(to_text(text), dense_header_line())
    except GCFError:
        answer = None  # not UTF-8: to_text's error, before the accelerator
    if answer is not None:
        assert reference[0] == "value" and _strict(answer[0], reference[1]), text
    return answer is not None


def _dense_payloads() -> list[str]:
    out: list[str] = []
    for fx in FIXTURE_CASES:
        for key in ("input", "expected"):
            text = fx.get(key)
            if isinstance(text, str) and text.startswith("GCF"):
                out.append(text)
    return out


@requires_c
def test_c_dense_decoder_reads_every_fixture_and_sample_as_the_reference() -> None:
    canonical = []
    for _, value in SAMPLES:
        for config in CONFIGS:
            try:
                canonical.append(dense.dumps(value, **dict[str, Any](config)))
            except GCFError:
                continue
    for text in _dense_payloads():
        _check_decode(text)
    # Everything the encoder writes is the accelerator's to read.
    assert all(_check_decode(text) for text in canonical)


@requires_c
def test_c_dense_decoder_reads_mutated_payloads_as_the_reference() -> None:
    from tests.test_dense_fuzz import dense_mutants

    answered = 0
    for seed in range(3):
        for payload in dense_mutants(2000 + seed, 700):
            answered += _check_decode(payload)
    assert answered > 100  # the mutations that stay canonical are served too


@requires_c
@settings(max_examples=500, **_SETTINGS)
@given(dense_documents, st.sampled_from(CONFIGS), st.randoms())
def test_c_dense_decoder_serves_canonical_text_and_agrees_on_its_mutations(
    value: Any, config: dict[str, bool], rng: random.Random
) -> None:
    from tests import codec_support

    try:
        wire = dense.dumps(value, **dict[str, Any](config))
    except GCFError:
        return
    assert _check_decode(wire), wire
    for _ in range(3):
        payload: str | bytes = wire
        for _ in range(rng.randint(1, 2)):
            mutate = rng.choice(codec_support.MUTATORS)
            payload = mutate(rng, payload if isinstance(payload, str) else payload.decode(
                "utf-8", "replace"))  # fmt: skip
        _check_decode(payload)


@requires_c
def test_c_dense_decoder_resolves_references_only_by_their_canonical_names() -> None:
    # Names out of order, unknown names and non-canonical spellings go to the reference,
    # which accepts or rejects them; the value is the same either way.
    for text in [
        "GCF profile=dense\n$b=x y\n$a=z w\nv=$a\n",
        "GCF profile=dense\n$a=x y\nv=$b\n",
        "GCF profile=dense\n$a1=x y\nv=$a1\n",
        "GCF profile=dense\n$a=x y\n\nv=$a\n",
        "GCF profile=dense\n$a=$b\nv=$a\n",
        "GCF profile=dense\n$a=12\nv=$a\n",
        "GCF profile=dense\n$a=x y\n## r [2]{k,v=$a}\n1\n2\n",
        "GCF profile=dense\n## r [2]{k,v=[1]: a}\n1\n2\n",
        "GCF profile=dense\n## r [2]{k=1,v=2}\n\n",
        'GCF profile=dense tool=git\n## r [2]{k,l}\n1|[2]: "a|b",c\n2\n',
    ]:
        _check_decode(text)


@requires_c
@settings(max_examples=400, **_SETTINGS)
@given(dense_documents)
def test_c_occurrences_count_as_the_python_walk(value: Any) -> None:
    fast = speedups.occurrences(value)
    with speedups.pure_python():
        walk = definitions._occurrences(value)
    assert fast == walk and list(fast) == list(walk)


@requires_c
def test_c_occurrences_hand_back_values_outside_the_plain_model() -> None:
    class Name(str):
        pass

    assert speedups.occurrences({"a": [Name("x")]}) is None
    assert definitions._occurrences({"a": [Name("x"), "x"]}) == {"x": 2}


@requires_c
def test_c_decoders_read_the_proxys_primer_comment_as_the_reference() -> None:
    from gcfkit import dumps
    from gcfkit.answers.primer import annotate
    from tests import test_speedups

    for _, value in SAMPLES[::3]:
        try:
            wire, generic = dense.encode(value), dumps(value)
        except GCFError:
            continue
        assert _check_decode(annotate(wire.text, ("dense", *wire.constructs)))
        assert test_speedups._check_decode(annotate(generic, ("gcf",)))
    # Comments the reference reads otherwise, or rejects, are its own to answer.
    for head in ("GCF profile=dense", "GCF profile=generic"):
        for comment in ("#", "# a|b", "#x", "# " + "x" * 10, "#\t", "## x"):
            text = f"{head}\n{comment}\n## r [2]{{k}}\n1\n2\n"
            if head.endswith("dense"):
                _check_decode(text)
            else:
                test_speedups._check_decode(text)
