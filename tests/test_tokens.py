"""Token counting: exact against tiktoken (offline), the estimate fallback, the API."""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.machinery
import json
import sys
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from gcfkit import tokens
from gcfkit.traffic.corpus import read_sessions
from tests.conformance import CORPUS_DIR

CORPUS = CORPUS_DIR

# tiktoken's expected sha256 of the rank files (tiktoken_ext.openai_public).
TIKTOKEN_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


def _bundled_rank_file(name: str) -> bytes:
    blob = (resources.files("bpe_openai.data") / f"{name}.tiktoken.gz").read_bytes()
    return gzip.decompress(blob)


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_bundled_rank_files_are_tiktokens(name: str) -> None:
    pytest.importorskip("bpe_openai")
    assert hashlib.sha256(_bundled_rank_file(name)).hexdigest() == TIKTOKEN_SHA256[name]


def _offline_tiktoken(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """tiktoken's own Encoding, fed the bundled files instead of a download.

    tiktoken's constructor passes its expected hash along; we check the file against it,
    so the reference is tiktoken's pattern, special tokens and verified ranks.
    """
    pytest.importorskip("bpe_openai")
    tiktoken = pytest.importorskip("tiktoken")
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")

    def load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        stem = blobpath.rsplit("/", 1)[-1].removesuffix(".tiktoken")
        data = _bundled_rank_file(stem)
        assert hashlib.sha256(data).hexdigest() == expected_hash
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        return ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", load)
    spec = getattr(openai_public, name)()
    return tiktoken.Encoding(
        name=spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )


def _corpus_texts() -> Iterator[str]:
    for path in sorted((CORPUS / "toon").glob("*.json")):
        value = json.loads(path.read_text(encoding="utf-8"))
        yield json.dumps(value, indent=2, ensure_ascii=False)
        yield json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for session in read_sessions(CORPUS / "mcp"):
        for call in session.calls:
            for block in (call.result or {}).get("content", []):
                if block.get("type") == "text":
                    yield block["text"]


EDGE_CASES = [
    "",
    " ",
    "hello world",
    "<|endoftext|> and <|endofprompt|> are plain text here",
    "lone \ud800 surrogate",
    "emoji 🧪🧪 and CJK 漢字かな and accents éàü",
    "1234567890123456789 0.000001 -42",
    "tabs\tand\r\nnewlines\n\n\n   indented",
    "GCF profile=generic\nusers[2]{id,name}:\n1|Ada\n2|Bob\n",
    "x" * 5000,
]


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_counts_match_tiktoken(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _offline_tiktoken(name, monkeypatch)
    assert tokens.is_exact(name)
    texts = list(_corpus_texts()) if CORPUS.is_dir() else []
    texts += EDGE_CASES
    mismatches = [
        (t[:60], tokens.count(t, name), len(ref.encode_ordinary(t)))
        for t in texts
        if tokens.count(t, name) != len(ref.encode_ordinary(t))
    ]
    assert mismatches == []
    assert len(texts) > len(EDGE_CASES) or not CORPUS.is_dir()


def test_counter_is_cached_and_reports_its_method() -> None:
    c = tokens.counter("cl100k_base")
    assert tokens.counter("cl100k_base") is c
    assert tokens.counter() is tokens.counter(tokens.DEFAULT_ENCODING)
    assert c.encoding == "cl100k_base"
    assert c.method == ("exact" if c.exact else "estimate")
    assert tokens.method("cl100k_base") == c.method
    assert c("a b c") == c.count("a b c") == tokens.count("a b c", "cl100k_base")
    assert tokens.count("") == 0


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown encoding"):
        tokens.count("x", "p50k_base")
    with pytest.raises(ValueError):
        tokens.estimate("x", "gpt2")


def test_without_the_extra_counts_are_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_exact_backend", lambda encoding: None)
    c = tokens.Counter("o200k_base")
    assert not c.exact
    assert c.method == "estimate"
    text = '{"id": 1, "name": "Ada Lovelace", "tags": ["math", "engines"]}'
    assert c.count(text) == tokens.estimate(text)
    assert c.count("") == 0


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_estimate_is_close_on_the_corpus(name: str) -> None:
    if not CORPUS.is_dir() or not tokens.is_exact(name):
        pytest.skip("needs the shared corpus and exact counts")
    texts = [t for t in _corpus_texts() if len(t) > 500]
    exact = sum(tokens.count(t, name) for t in texts)
    approx = sum(tokens.estimate(t, name) for t in texts)
    assert abs(approx - exact) / exact < 0.05
    within = sum(
        abs(tokens.estimate(t, name) - tokens.count(t, name)) <= 0.2 * tokens.count(t, name)
        for t in texts
    )
    assert within / len(texts) > 0.85


def test_estimate_grows_with_text() -> None:
    one = tokens.estimate("alpha beta gamma, 123; ")
    assert 0 < one < tokens.estimate("alpha beta gamma, 123; " * 10)
    assert tokens.estimate("") == 0


def test_binding_loads_through_the_package_when_the_fast_path_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("bpe_openai")
    monkeypatch.setattr(importlib.machinery, "EXTENSION_SUFFIXES", [".none"])
    monkeypatch.delitem(sys.modules, "bpe_openai._bindings", raising=False)
    module = tokens._load_bindings()
    assert module.tokenizer_for_encoding("o200k_base").count("hello world") == 2


def test_public_encoding_fallback_counts_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("bpe_openai")

    def broken() -> Any:
        raise ImportError("no binding")

    monkeypatch.setattr(tokens, "_load_bindings", broken)
    fn = tokens._bpe_openai_backend("cl100k_base")
    assert fn is not None
    text = "GCF profile=generic\n## [2]{id,name}\n1|Ada\n2|Bob\n"
    assert fn(text) == tokens.count(text, "cl100k_base")
