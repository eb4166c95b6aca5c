"""gcfkit._bpe, gcfkit's own exact counter, held to bpe-openai's counts (the reference).

Every difference is a failure: the corpus in several renderings, every code point in
several contexts, random mixes, contractions, long runs, and ``count_till_limit``.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import gcfkit
from gcfkit import dense, tokens
from gcfkit.traffic.corpus import read_sessions
from tests.conformance import CORPUS_DIR

pytest.importorskip("bpe_openai")
_bpe = pytest.importorskip("gcfkit._bpe")

Count = Callable[[str], int]


def _compact(name: str) -> Any:
    enc = tokens._compact_backend(name)
    assert enc is not None, "the rank file did not load into gcfkit._bpe"
    return enc


def _reference(name: str) -> Count:
    fn = tokens._bpe_openai_backend(name)
    assert fn is not None
    return fn


def _mismatches(name: str, texts: Iterator[str] | list[str]) -> list[tuple[str, int, int]]:
    enc, ref = _compact(name), _reference(name)
    out = []
    for t in texts:
        mine, theirs = enc.count(t), ref(t)
        if mine != theirs:
            out.append((t[:80], mine, theirs))
    return out


def _renderings(value: Any) -> Iterator[str]:
    yield json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    yield json.dumps(value, indent=2)
    for dumps in (gcfkit.dumps, dense.dumps):
        try:
            text = dumps(value)
        except (ValueError, TypeError):
            continue  # a value a profile refuses is no text to count
        yield text


def _corpus_texts() -> Iterator[str]:
    for path in sorted(CORPUS_DIR.rglob("*")):
        if path.is_file() and path.suffix in (".json", ".md", ".txt", ".jsonl"):
            raw = path.read_text(encoding="utf-8", errors="replace")
            yield raw
            if path.suffix == ".json" and path.parent.name == "toon":
                yield from _renderings(json.loads(raw))
    for session in read_sessions(CORPUS_DIR / "mcp"):
        for call in session.calls:
            for block in (call.result or {}).get("content", []):
                if block.get("type") != "text":
                    continue
                yield block["text"]
                try:
                    value = json.loads(block["text"])
                except ValueError:
                    continue
                yield from _renderings(value)


@pytest.mark.skipif(not CORPUS_DIR.is_dir(), reason="no corpus")
@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_corpus_counts_are_bpe_openais(name: str) -> None:
    texts = list(_corpus_texts())
    assert len(texts) > 300
    assert _mismatches(name, texts) == []


@pytest.mark.skipif(not CORPUS_DIR.is_dir(), reason="no corpus")
@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_count_till_limit_is_consistent(name: str) -> None:
    enc = _compact(name)
    limited = tokens._bpe_openai_limited(name)
    assert limited is not None
    for text in itertools.islice(_corpus_texts(), 0, None, 7):
        n = enc.count(text)
        for limit in (0, n - 1, n, n + 1, n // 2):
            want = n if limit >= 0 and n <= limit else None
            assert enc.count_till_limit(text, limit) == want
            if limit >= 0:
                assert limited(text, limit) == want


def _contexts(c: str) -> str:
    # Each context puts c where another class would split or join differently: after a
    # letter, a space, a digit, a tab, an apostrophe, before 's, between digits, before
    # and after whitespace runs, doubled, upper- and lower-case neighbours.
    return "\n".join(
        (
            "a" + c,
            " " + c,
            c + "'s",
            "'" + c,
            c + "a",
            "1" + c,
            c + c + "x",
            "A" + c + "b",
            "x" + c + "1",
            "1" + c + "23",
            "\t" + c,
            c + "  x",
            "\r" + c + "\r\n",
            "!" + c + "?",
            c + "'RE",
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_every_code_point_counts_as_bpe_openai_counts_it(name: str) -> None:
    # This is what proves the Unicode classes (tests/gen_bpe_unicode.py) are the ones
    # bpe-openai's regex uses (Unicode 16.0), not the interpreter's or the regex module's.
    enc, ref = _compact(name), _reference(name)
    bad = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        for text in (c, _contexts(c)):
            if enc.count(text) != ref(text):
                bad.append(hex(cp))
                break
    assert bad == []


_POOLS = (
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    "      \t\n\n\r\u00a0\u3000\u2028",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "漢字かなカタカナ한국어中文",
    "😀🧪👍🏽🇫🇷\u200d❤️",
    "\u0301\u0308\u0327\u20dd\u0903",  # combining marks
    "éàüßœæøÅÉÑçİıſǅ",
    "ѐжЯΩωאבعربيहिन्दी",
    "٠١٢३४५Ⅻ½²",
)


def _random_texts(seed: int, n: int, longest: int) -> Iterator[str]:
    rng = random.Random(seed)
    for _ in range(n):
        pools = rng.sample(_POOLS, rng.randint(1, len(_POOLS)))
        alphabet = "".join(pools)
        size = rng.randint(1, longest)
        yield "".join(rng.choice(alphabet) for _ in range(size))


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_random_mixes(name: str) -> None:
    assert _mismatches(name, list(_random_texts(22, 3000, 60))) == []


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_random_long_pieces_take_the_heap_path_alike(name: str) -> None:
    # Pieces over 128 bytes are merged with a heap instead of in place: same result.
    rng = random.Random(5)
    texts = []
    for _ in range(200):
        alphabet = rng.choice(("ab", "abc", "etaoinshr", "xyzzy", "!?.", "é漢", "0 "))
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(100, 3000))))
    assert _mismatches(name, texts) == []


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_contractions_in_every_case(name: str) -> None:
    endings = ["s", "t", "re", "ve", "m", "ll", "d", "ſ", "x", "", "r", "v", "l"]
    variants = set()
    for e in endings:
        for cased in itertools.product(*((ch.lower(), ch.upper()) for ch in e)):
            variants.add("'" + "".join(cased))
    texts = []
    for v in sorted(variants):
        for before in ("it", "IT", "It", "iT", "ǅ", "1", " ", "", "!", "\n", "é"):
            for after in ("", " x", "x", "1", "'", "'s", "\n"):
                texts.append(before + v + after)
    assert _mismatches(name, texts) == []


@pytest.mark.skipif(not CORPUS_DIR.is_dir(), reason="no corpus")
@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_long_pieces_of_real_text(name: str) -> None:
    # The corpus with everything but its letters (or its punctuation) dropped: pieces of
    # tens of kilobytes whose merges are those of real words.
    texts = []
    for text in itertools.islice(_corpus_texts(), 0, None, 5):
        texts.append("".join(ch for ch in text if ch.isalpha())[:50_000])
        texts.append("".join(ch for ch in text if not ch.isalnum() and ch != " ")[:50_000])
    assert _mismatches(name, texts) == []


LONG_RUNS = ["!", " ", "\n", "\r\n", "7", "a", "ab", "A", "漢", "😀", " a", "\t", "\u3000", "é"]


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_long_runs(name: str) -> None:
    texts = []
    for unit in LONG_RUNS:
        texts.append(unit * (200_000 // len(unit.encode())))
        texts.append("x" + unit * 5000 + "x")
    assert _mismatches(name, texts) == []


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_lone_surrogates_count_as_replacement_characters(name: str) -> None:
    text = "lone \ud800 surrogate \udfff end"
    c = tokens.counter(name)
    assert c.backend == "gcfkit"
    assert c.count(text) == _reference(name)(tokens._sanitize(text))
    assert c.count_till_limit(text, 100) == c.count(text)


def test_the_environment_switch_counts_with_bpe_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tokens.TOKENIZER_ENV, "bpe-openai")
    tokens._compact_backend.cache_clear()
    try:
        c = tokens.Counter("cl100k_base")
        assert c.backend == "bpe-openai" and c.exact
        assert c.count("hello world") == 2
    finally:
        monkeypatch.delenv(tokens.TOKENIZER_ENV)
        tokens._compact_backend.cache_clear()
    assert tokens.Counter("cl100k_base").backend == "gcfkit"


def test_tables_are_compact() -> None:
    # The point of the module: a few MB per encoding where bpe-openai takes ~60 MB.
    assert _compact("o200k_base").size == 199_998
    assert _compact("cl100k_base").size == 100_256
    assert _compact("o200k_base").nbytes < 8_000_000


@pytest.mark.parametrize(
    "data",
    [b"", b"not base64 at all\n", b"YQ== x\n", b"YQ== 1\nYQ== 2\n", b"YQ==\n", b" 3\n"],
)
def test_malformed_rank_files_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        _bpe.Encoding(data, "o200k_base")


def test_a_tiny_table_merges_by_lowest_rank() -> None:
    # a=0 b=1 c=2 ab=3 bc=4 abc=5: "abc" is one token; "abcb" merges ab (rank 3) before
    # bc (4), then abc (5): 2 tokens; "bcab": bc, ab: 2.
    ranks = b"YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYmM= 4\nYWJj 5\n"
    enc = _bpe.Encoding(ranks, "o200k_base")
    assert enc.size == 6
    assert [enc.count(t) for t in ("abc", "abcb", "bcab", "b")] == [1, 2, 2, 1]
    assert enc.split("ab cd's  x\n") == ["ab", " cd's", " ", " x", "\n"]
    with pytest.raises(ValueError):
        _bpe.Encoding(ranks, "p50k_base")
    with pytest.raises(TypeError):
        enc.count(b"abc")
    assert enc.count_till_limit("abcb", 10**30) == 2
    assert enc.count_till_limit("abcb", -(10**30)) is None
    assert enc.count_till_limit("abcb", 1) is None
    with pytest.raises(RuntimeError):
        enc.__init__(ranks, "o200k_base")


def test_an_uninitialised_encoding_refuses_to_count() -> None:
    enc = _bpe.Encoding.__new__(_bpe.Encoding)
    assert enc.size == 0 and enc.nbytes == 0
    with pytest.raises(RuntimeError):
        enc.count("abc")
    with pytest.raises(RuntimeError):
        enc.count_till_limit("abc", 3)


def test_threads_count_alike_while_the_gil_is_released() -> None:
    # Texts of 4 KB and more are counted without the GIL; the tables are shared read-only.
    enc = _compact("o200k_base")
    texts = [t * 20 for t in _random_texts(3, 8, 500)]
    want = [enc.count(t) for t in texts]
    got: list[list[int]] = []

    def work() -> None:
        got.append([enc.count(t) for t in texts])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert got == [want] * 4


# ASCII text takes a path of its own in the pre-tokenizer, which hands over to the general
# one wherever a non-ASCII character could continue or end a piece: each kind of ASCII
# run, followed by a character of each Unicode class the patterns tell apart.
_ASCII_RUNS = (
    "abc",
    "ABC",
    "Abc",
    "aB",
    "x",
    "1",
    "12",
    "123",
    "1234",
    "!",
    " !",
    "'",
    '"a',
    " a",
    "a's",
    "'s",
    " ",
    "  ",
    "\n",
    " \n ",
    "\t ",
    "x/",
    "!\n",
)
_NON_ASCII = (
    "é",
    "É",
    "ǅ",
    "ʰ",
    "漢",
    "\u0301",
    "٣",
    "Ⅻ",
    "—",
    "€",
    "\u00a0",
    "\u3000",
    "\u0085",
    "\u2028",
    "ſ",
    "😀",
)


@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_ascii_runs_meeting_non_ascii_characters(name: str) -> None:
    texts = [
        before + run + other + after
        for run in _ASCII_RUNS
        for other in _NON_ASCII
        for before in ("", "x", " ", "\n")
        for after in ("", "x", " y", "1", "'s", "\n")
    ]
    texts += [other + run for run in _ASCII_RUNS for other in _NON_ASCII]
    assert _mismatches(name, texts) == []


# Short pieces' counts are cached per thread (4096 slots, pieces up to 26 bytes).
@pytest.mark.parametrize("name", tokens.ENCODINGS)
def test_the_piece_cache_never_answers_for_another_piece(name: str) -> None:
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    # More distinct pieces than slots (every slot is shared), of every length around the
    # longest cached one, counted in one order and then in another.
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(1, 32))) for _ in range(20_000)}
    pieces = sorted(words)
    # Pieces of 25 and 26 bytes that differ only in bytes 16 and 17, which the cache's hash
    # does not read: they always land in the same slot.
    pieces += ["a" * 16 + x + y + "b" * 8 for x in letters for y in letters]
    pieces += ["c" * 16 + x + "d" * 8 for x in letters]
    shuffled = pieces[:]
    rng.shuffle(shuffled)
    texts = []
    for order in (pieces, shuffled, pieces[::-1]):
        for k in range(0, len(order), 300):
            chunk = order[k : k + 300]
            texts += ["\n".join(chunk), " ".join(chunk), ",".join(chunk)]
    assert _mismatches(name, texts) == []
    enc, ref = _compact(name), _reference(name)
    for text in texts[::9]:
        n = ref(text)
        assert enc.count_till_limit(text, n) == n
        assert enc.count_till_limit(text, n - 1) is None


def test_the_piece_cache_keeps_encodings_apart() -> None:
    # "cab" is one o200k token; the tiny table has a, b, c, ab, bc, abc: c + ab, 2. A
    # second tiny table made after the first is gone may reuse its memory: it must not
    # reuse its cached counts ("cab" is a token of its own there).
    big = _compact("o200k_base")
    tiny = _bpe.Encoding(b"YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nYmM= 4\nYWJj 5\n", "o200k_base")
    for _ in range(3):
        assert [big.count("cab"), tiny.count("cab"), big.count("cab cab")] == [1, 2, 2]
    assert tiny.count("cab cab") == 5
    del tiny
    other = _bpe.Encoding(b"YQ== 0\nYg== 1\nYw== 2\nYWI= 3\nY2Fi 4\n", "o200k_base")
    assert [other.count("cab"), big.count("cab"), other.count("cab cab")] == [1, 1, 3]


def test_threads_with_their_own_caches_count_alike() -> None:
    # Two threads count large texts (the GIL released) at once, one per encoding, made of
    # the same words, each of which the two encodings count differently: a cache shared
    # between the threads would sooner or later hand one a count the other wrote.
    rng = random.Random(11)
    o200k, cl100k = _reference("o200k_base"), _reference("cl100k_base")
    words: set[str] = set()
    while len(words) < 3000:
        w = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 14)))
        if o200k(w) != cl100k(w):
            words.add(w)
    pool = sorted(words)
    texts = [" ".join(rng.sample(pool, 1200)) for _ in range(8)]
    assert all(len(t) > 4096 for t in texts)
    want = {name: [_reference(name)(t) for t in texts] for name in tokens.ENCODINGS}
    got: dict[str, list[list[int]]] = {name: [] for name in tokens.ENCODINGS}

    def work(name: str) -> None:
        enc = _compact(name)
        for _ in range(50):
            got[name].append([enc.count(t) for t in texts])

    threads = [threading.Thread(target=work, args=(name,)) for name in tokens.ENCODINGS]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert got == {name: [want[name]] * 50 for name in tokens.ENCODINGS}
