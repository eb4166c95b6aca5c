"""The full GCF forms of a value (proxy/forms.py) and how the proxy's rewriter races them:
each form checked before it is a candidate, its explanation counted with it, bounded counting
choosing what full counting chooses, the dense form where gcfkit.dense is installed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gcfkit
from gcfkit import tokens
from gcfkit.answers.choose import AnswerPolicy, choose
from gcfkit.answers.forms import GENERIC_SKIP_BYTES, FullForms, full_candidates
from gcfkit.answers.primer import NOTES
from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.proxy.rewrite import Budget, Call, Rewriter

ENC = "o200k_base"
NO_DENSE = {"dense_encode": None, "dense_loads": None}


def count(text: str) -> int:
    return tokens.count(text, ENC)


def rows(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": "Ada Lovelace", "city": "London"} for i in range(n)]


def test_a_gcf_form_that_does_not_decode_back_is_never_a_candidate() -> None:
    broken = Codec(loads=lambda text: {"not": "it"}, **NO_DENSE)  # type: ignore[arg-type]
    candidates, _ = full_candidates(rows(20), FullForms(broken, primer="off"), count)
    assert candidates.gcf is None
    assert [f.reason for f in candidates.fallbacks] == ["selfcheck"]


def test_a_dense_form_that_does_not_decode_back_is_refused() -> None:
    class Encoded:
        text = "GCF-dense\n=1\n"
        constructs = ("defs",)

    codec = Codec(dense_encode=lambda value, **kw: Encoded(), dense_loads=lambda t: 1)
    forms = FullForms(codec, dense=("defs",), primer="off")
    candidates, constructs = full_candidates(rows(20), forms, count)
    assert candidates.dense is None and candidates.gcf is not None and constructs == ()
    assert "selfcheck" in [f.reason for f in candidates.fallbacks]


def test_a_dense_encoder_that_crashes_leaves_the_v353_form() -> None:
    def crash(value: Any, **kw: Any) -> Any:
        raise KeyError("a bug in an extension")

    codec = Codec(dense_encode=crash, dense_loads=lambda t: None)
    candidates, _ = full_candidates(rows(20), FullForms(codec, dense=("lists",)), count)
    assert candidates.gcf is not None and candidates.dense is None
    assert [(f.reason, f.detail) for f in candidates.fallbacks] == [("encode", "KeyError")]


def test_the_payload_carrier_puts_the_explanation_in_the_form_and_counts_it() -> None:
    codec = Codec(**NO_DENSE)  # type: ignore[arg-type]
    plain, _ = full_candidates(rows(30), FullForms(codec, primer="off"), count)
    told, _ = full_candidates(rows(30), FullForms(codec, primer="payload"), count)
    assert plain.gcf is not None and told.gcf is not None
    assert told.gcf.text.splitlines()[1] == "# " + NOTES["gcf"]
    assert gcfkit.loads(told.gcf.text) == rows(30)
    assert told.gcf.tokens == count(told.gcf.text) > plain.gcf.tokens


def test_small_values_do_not_pay_for_their_explanation() -> None:
    value = {"timezone": "UTC", "datetime": "2026-11-30T10:00:00+00:00", "is_dst": False}
    codec = Codec(**NO_DENSE)  # type: ignore[arg-type]
    candidates, _ = full_candidates(value, FullForms(codec), count)
    assert choose(candidates, AnswerPolicy()).decision == "json"


def full_codec(**kw: Any) -> Codec:
    """Every count in full: what bounded counting must agree with."""

    def full(text: str, limit: int, encoding: str) -> int | None:
        n = tokens.count(text, encoding)
        return n if n <= limit else None

    return Codec(count_till_limit=full, **kw)


_rows = st.lists(
    st.fixed_dictionaries(
        {"id": st.integers(0, 10**6), "name": st.sampled_from(["a", "Ada Lovelace", "x" * 30])},
        optional={"tags": st.lists(st.sampled_from(["red", "blue"]), max_size=3)},
    ),
    max_size=12,
)


def answer(rewriter: Rewriter, value: Any, pretty: bool) -> tuple[str, list[str]]:
    text = json.dumps(value, indent=2 if pretty else None)
    out = rewriter.rewrite({"content": [{"type": "text", "text": text}]}, Call("t", "t"), BUDGET)
    got = [b["text"] for b in out.result["content"]] if out.result else [text]
    return out.decision, got


BUDGET = Budget.unlimited()


@settings(max_examples=60, deadline=None)
@given(_rows | st.fixed_dictionaries({"rows": _rows, "note": st.text(max_size=40)}), st.booleans())
def test_bounded_counts_choose_what_full_counts_choose(value: Any, pretty: bool) -> None:
    config = ProxyConfig(refs="off", time_budget=60.0)
    bounded = Rewriter(config)
    full = Rewriter(config, full_codec())
    assert answer(bounded, value, pretty) == answer(full, value, pretty)


def test_the_dense_form_wins_where_it_is_fewer_tokens_and_reads_back() -> None:
    dense = pytest.importorskip("gcfkit.dense")
    entities = [
        {"name": f"commit {i:03d}", "entityType": "commit",
         "observations": [f"change {i}", "authored 2026-08-07 by Dayna Blackwell"]}
        for i in range(200)
    ]  # fmt: skip
    value = {"entities": entities}
    assert len(json.dumps(value)) > GENERIC_SKIP_BYTES
    config = ProxyConfig(refs="off", time_budget=60.0)
    decision, (text,) = answer(Rewriter(config), value, True)
    assert decision == "dense" and text.startswith("GCF-dense\n# GCF is lossless JSON")
    assert dense.loads(text) == value
    assert answer(Rewriter(config, full_codec()), value, True) == (decision, [text])
    off = ProxyConfig(refs="off", time_budget=60.0, dense=())
    decision, (plain,) = answer(Rewriter(off), value, True)
    # v3.5.3 needs an attachment line per list: compact JSON is fewer tokens here.
    assert decision in ("gcf", "json-minified") and count(text) < count(plain)
