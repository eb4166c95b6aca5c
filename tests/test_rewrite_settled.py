"""The rewriter's settled-estimate mode (the default codec, :attr:`Codec.settles
<gcfkit.answers.codec.Codec.settles>`): whole texts compared by estimate, a close call, a
delta and a relative answer answered with exact counts, the ledger's counts taken after the
answer. It never raises, and its answers are the exact path's.

Every comparison is with a rewriter counting exactly (``Codec.exact()``) fed the same lines:
the delivered bytes, the ledger's decision and its figures once what is owed is counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gcfkit import tokens
from gcfkit.answers.codec import Codec
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.rewrite import Budget, Call, Outcome, Rewriter
from gcfkit.relative import ResultMemory
from tests.conformance import CORPUS_DIR
from tests.proxy_support import DELTA_CONFIG, orders

CORPUS = CORPUS_DIR / "mcp"
FILES = sorted(CORPUS.glob("*/[0-9][0-9][0-9]_*.json"))
SERVERS = sorted({f.parent.name for f in FILES})
TOON = sorted((CORPUS_DIR / "toon").glob("**/*.json"))

needs_corpus = pytest.mark.skipif(not FILES, reason="shared corpus not available")
needs_exact = pytest.mark.skipif(not tokens.is_exact(), reason="bpe-openai is not installed")


def entry_line(result: dict[str, Any], msg_id: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}).encode()


def entry_call(entry: dict[str, Any]) -> Call:
    return Call(entry["tool"], f"{entry['tool']} {json.dumps(entry['arguments'], sort_keys=True)}")


def pair(config: ProxyConfig | None = None, seed: int = 1) -> tuple[Rewriter, Rewriter]:
    """An exact rewriter and a settled one (the default codec), handles seeded alike; the
    settled one answers small results from estimates too (else counted exactly: faster)."""
    config = config or ProxyConfig()
    exact = Rewriter(config, Codec.exact(), memory=lambda: ResultMemory(seed=seed))
    settled = Rewriter(config, Codec(), memory=lambda: ResultMemory(seed=seed))
    settled.settle_min_chars = 0
    return exact, settled


def counted(outcome: Outcome, encoding: str = "o200k_base") -> Outcome:
    outcome.count_owed(lambda text: tokens.count(text, encoding))
    return outcome


def same_answer(
    exact: Rewriter,
    settled: Rewriter,
    line: bytes,
    call: Call,
    encoding: str = "o200k_base",
    where: str = "",
) -> Outcome:
    """``line`` through both rewriters: the settled one sends the exact one's line, and its
    ledger figures once owed counts are taken; returns the settled outcome, counted."""
    want, want_line = exact.rewrite_line(line, call, Budget.unlimited())
    got, got_line = settled.rewrite_line(line, call, Budget.unlimited())
    assert got_line == want_line, where
    assert counted(got, encoding) == counted(want, encoding), where
    return got


def test_the_default_codec_settles_and_an_injected_counter_does_not() -> None:
    assert Codec().settles
    assert not Codec.exact().settles
    assert not Codec.estimating().settles
    assert not Codec(count=lambda t, e: len(t)).settles
    assert Rewriter(ProxyConfig()).estimates is False  # it never raises: not estimate mode


@needs_exact
@needs_corpus
@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_result_answered_as_the_exact_path(path: Path) -> None:
    entry = json.loads(path.read_text(encoding="utf-8"))
    exact, settled = pair()
    line, call = entry_line(entry["result"]), entry_call(entry)
    same_answer(exact, settled, line, call)


@needs_exact
@needs_corpus
@pytest.mark.parametrize("server", SERVERS)
def test_sessions_answered_as_the_exact_path(server: str) -> None:
    """Each server's recorded session in order: every line, every ledger figure and every
    handle as the exact path's."""
    exact, settled = pair()
    for msg_id, path in enumerate(sorted((CORPUS / server).glob("[0-9][0-9][0-9]_*.json"))):
        entry = json.loads(path.read_text(encoding="utf-8"))
        line, call = entry_line(entry["result"], msg_id), entry_call(entry)
        same_answer(exact, settled, line, call, where=path.name)
    assert list(settled.names.memory.issued) == list(exact.names.memory.issued)


@needs_exact
@pytest.mark.skipif(not TOON, reason="shared corpus not available")
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("path", TOON, ids=lambda p: p.stem)
def test_toon_datasets_answered_as_the_exact_path(path: Path, encoding: str) -> None:
    value = json.loads(path.read_text(encoding="utf-8"))
    for indent in (None, 2):
        text = json.dumps(value, indent=indent, ensure_ascii=False)
        exact, settled = pair(ProxyConfig(encoding=encoding))
        line = entry_line({"content": [{"type": "text", "text": text}]})
        same_answer(exact, settled, line, Call("t", "t"), encoding)


@needs_exact
def test_deltas_and_since_answered_as_the_exact_path() -> None:
    exact, settled = pair(DELTA_CONFIG, seed=3)
    call = Call("list_orders", "list_orders {}")
    lines = [orders(30), orders(30, shift=1), orders(30, shift=1), orders(31)]
    decisions = []
    for line in lines:
        got = same_answer(exact, settled, line, call)
        decisions.append(got.decision)
    assert any(d.startswith("delta") or "unchanged" in d for d in decisions[1:]), decisions
    handle = exact.names.memory.issued[-1] if exact.names.memory.issued else None
    if handle is not None:
        since = Call("list_orders", "list_orders {}", since=str(handle))
        same_answer(exact, settled, orders(31, shift=2), since)


def same_estimate(text: str, encoding: str) -> int:
    return 100  # every form alike: every choice is a close call


@needs_exact
def test_a_close_call_is_counted_exactly_not_raised() -> None:
    exact, _ = pair()
    settled = Rewriter(ProxyConfig(), Codec(), memory=lambda: ResultMemory(seed=1))
    settled.settle_min_chars = 0
    # (tokens.estimate is what settles; an estimator that calls everything close is the
    # same road: every choice is left to the exact counts.)
    object.__setattr__(settled, "_estimate_fn", same_estimate)
    rows = [{"id": i, "name": f"item {i}"} for i in range(25)]
    line = entry_line({"content": [{"type": "text", "text": json.dumps(rows, indent=2)}]})
    want, want_line = exact.rewrite_line(line, Call("t", "t"), Budget.unlimited())
    got, got_line = settled.rewrite_line(line, Call("t", "t"), Budget.unlimited())
    assert got_line == want_line
    # The winner was counted on the exact road (only the name's block is owed).
    assert got.tokens_after > 0
    assert all(len(text) < 20 for text in got.owed_after)
    assert counted(got) == counted(want)


@needs_exact
@pytest.mark.slow
@pytest.mark.parametrize("indent", [None, 2])
def test_a_text_the_ledger_counts_by_its_size(indent: int | None) -> None:
    """Over 4 M characters the ledger counts an owed text by its size: the settled answer
    keeps the exact path's figures (a winning original counted exactly, compact JSON left to
    the exact path)."""
    import random

    rng = random.Random(5)
    rows = [
        {"id": i, "name": f"user {rng.randint(0, 10**6)}", "score": rng.random()}
        for i in range(70_000)
    ]
    text = json.dumps(rows, indent=indent)
    assert len(text) > 4 * 1024 * 1024
    for body in (text, json.dumps(text)):  # a table, and one huge JSON string
        exact, settled = pair()
        line = entry_line({"content": [{"type": "text", "text": body}]})
        same_answer(exact, settled, line, Call("t", "t"))


@needs_exact
@needs_corpus
@pytest.mark.parametrize("server", SERVERS)
def test_sessions_with_the_default_threshold(server: str) -> None:
    """As a worker runs them: small results counted exactly, the others settled."""
    exact, settled = pair()
    settled.settle_min_chars = Rewriter(ProxyConfig()).settle_min_chars
    for msg_id, path in enumerate(sorted((CORPUS / server).glob("[0-9][0-9][0-9]_*.json"))):
        entry = json.loads(path.read_text(encoding="utf-8"))
        line, call = entry_line(entry["result"], msg_id), entry_call(entry)
        same_answer(exact, settled, line, call, where=path.name)
