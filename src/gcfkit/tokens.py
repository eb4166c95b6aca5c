"""Token counts for the OpenAI ``o200k_base`` and ``cl100k_base`` encodings, offline.

With the ``gcfkit[tokens]`` extra installed, counts are exact. The ranks come from the
``bpe-openai`` wheel, whose rank files ship inside the wheel and are byte-identical to
tiktoken's (same sha256, checked on load; ``tests/test_tokens.py`` compares counts with
tiktoken). Nothing is downloaded, ever. The counting itself is done by gcfkit's own C
module ``gcfkit._bpe`` (about 5 MB for o200k_base where the wheel's compiled tokenizer
takes about 60 MB; ``tests/test_tokens_bpe.py`` holds it to bpe-openai's counts, code
point by code point); where that module is not built, or ``GCFKIT_TOKENIZER=bpe-openai``
is set, bpe-openai's own tokenizer counts.

Without the extra the core stays dependency-free and counts fall back to an estimate
(:func:`estimate`): a pre-tokenizer-shaped heuristic calibrated on the project corpus,
typically within a few percent on JSON text but *not* exact, and low on GCF and dense text
(by 8-11% over the corpus; ``bench/dense.md`` tables its error per form and encoding). It
runs in C when the accelerator is built, faster than an exact count. Every caller that
reports a number should say which method produced it: :func:`is_exact` and
:func:`method` tell.

>>> from gcfkit import tokens
>>> n = tokens.count('{"id": 1, "name": "Ada"}')
>>> n > 0
True
>>> tokens.method("o200k_base") in ("exact", "estimate")
True
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from . import speedups

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "Counter",
    "backend",
    "count",
    "count_till_limit",
    "counter",
    "estimate",
    "is_exact",
    "method",
]

#: The encodings gcfkit counts exactly (with the ``tokens`` extra).
ENCODINGS: Final = ("o200k_base", "cl100k_base")
DEFAULT_ENCODING: Final = "o200k_base"


def _sanitize(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; tiktoken replaces them with U+FFFD before
    # encoding, so do the same to keep counts identical.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _check_encoding(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; gcfkit counts {' and '.join(ENCODINGS)}")


# ---------------------------------------------------------------------------------------
# Exact backends
# ---------------------------------------------------------------------------------------

# tiktoken's published sha256 of each rank file: gcfkit's own counter only uses ranks it
# has been tested against.
_RANKS_SHA256: Final = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
#: ``GCFKIT_TOKENIZER=bpe-openai`` counts with bpe-openai's compiled tokenizer instead of
#: gcfkit's (same counts, ~60 MB more per encoding); read once, when a counter is built.
TOKENIZER_ENV: Final = "GCFKIT_TOKENIZER"


@functools.cache
def _compact_backend(encoding: str) -> Any | None:
    """``gcfkit._bpe.Encoding`` for ``encoding``, built from the wheel's rank file; None when
    the C module is not built, the wheel is absent or its file is not tiktoken's."""
    if os.environ.get(TOKENIZER_ENV, "").strip().lower() == "bpe-openai":
        return None
    try:
        from gcfkit import _bpe
    except ImportError:
        return None
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / f"{encoding}.tiktoken.gz"
    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error):
        return None
    if hashlib.sha256(data).hexdigest() != _RANKS_SHA256[encoding]:
        return None
    try:
        return _bpe.Encoding(data, encoding)
    except (ValueError, MemoryError):
        return None


def _load_bindings() -> Any:
    """bpe-openai's compiled tokenizer module, loaded without the package's ``__init__``.

    Importing the ``bpe_openai`` package parses both rank files in Python for its
    tiktoken-compatible metadata (about half a second, and a DeprecationWarning); the
    compiled module alone embeds the ranks and starts in ~50 ms. If the wheel's layout
    ever changes, fall back to the ordinary import.
    """
    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec("bpe_openai")
        if spec is not None and spec.origin is not None:
            folder = Path(spec.origin).parent
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = folder / f"_bindings{suffix}"
                if path.is_file():
                    ext = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
                    if ext is not None and ext.loader is not None:
                        module = importlib.util.module_from_spec(ext)
                        ext.loader.exec_module(module)
                        return module
    except (ImportError, OSError):
        pass
    from bpe_openai import _bindings

    return _bindings


@functools.cache
def _exact_backend(encoding: str) -> Callable[[str], int] | None:
    """The cached exact counting function for ``encoding``, or None without the extra."""
    compact = _compact_backend(encoding)
    if compact is not None:
        fn: Callable[[str], int] = compact.count
        return fn
    return _bpe_openai_backend(encoding)


def _bpe_openai_backend(encoding: str) -> Callable[[str], int] | None:
    """bpe-openai's own counting function (the reference), or None without the extra."""
    if importlib.util.find_spec("bpe_openai") is None:
        return None
    try:
        # The compiled binding counts without materialising token ids.
        fn: Callable[[str], int] = _load_bindings().tokenizer_for_encoding(encoding).count
        return fn
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
    try:
        import bpe_openai
    except ImportError:
        return None
    enc = bpe_openai.get_encoding(encoding)

    def via_encoding(text: str) -> int:
        return len(enc.encode_ordinary(text))

    return via_encoding


@functools.cache
def _limited_backend(encoding: str) -> Callable[[str, int], int | None] | None:
    """The exact ``count_till_limit`` for ``encoding`` (None: count in full, compare)."""
    compact = _compact_backend(encoding)
    if compact is not None:
        fn: Callable[[str, int], int | None] = compact.count_till_limit
        return fn
    return _bpe_openai_limited(encoding)


def _bpe_openai_limited(encoding: str) -> Callable[[str, int], int | None] | None:
    """bpe-openai's ``count_till_limit`` for ``encoding``, or None."""
    try:
        fn: Callable[[str, int], int | None] = (
            _load_bindings().tokenizer_for_encoding(encoding).count_till_limit
        )
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    return fn


# ---------------------------------------------------------------------------------------
# Estimate
# ---------------------------------------------------------------------------------------

# A simplification of the o200k/cl100k pre-tokenizers: BPE never merges across these
# pieces, so counting pieces and then charging long pieces by length tracks the real
# count far better than a flat chars/4.
_PIECE: Final = re.compile(
    r"[A-Za-z]+|[0-9]{1,3}|[^\sA-Za-z0-9\x80-\U0010ffff]+|[\x80-\U0010ffff]+|\s+"
)
# Tokens per feature, fitted by least squares on corpus/toon (as JSON, GCX1 and TOON text),
# corpus/mcp text blocks and the GCF spec against exact counts: about 4% median error per
# text, 10-13% at the 90th percentile, ~0.2% on the corpus total. Features: runs of 2+
# whitespace, their characters, words, word characters, digit groups, punctuation
# characters; non-ASCII characters count half a token each.
_COEFFICIENTS: Final = {
    "o200k_base": (2.0877, 0.0676, 0.4251, 0.1806, 1.688, 0.2428),
    "cl100k_base": (1.7952, 0.1136, 0.3833, 0.1927, 1.681, 0.2223),
}
_NON_ASCII_TOKENS: Final = 0.5


def estimate(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """A dependency-free token estimate (not exact); used when ``bpe-openai`` is absent.

    The features are counted in C when the accelerator is built (``gcfkit.speedups``; several
    hundred MB/s, faster than an exact count), else by :func:`_features`, the reference;
    both give the same numbers, and the weighted sum below is the same arithmetic either way.

    >>> estimate("hello world") >= 1
    True
    """
    _check_encoding(encoding)
    if not text:
        return 0
    features = speedups.token_features(text)
    ws_runs, ws_chars, words, word_chars, digits, punct, other = (
        features if features is not None else _features(text)
    )
    k = _COEFFICIENTS[encoding]
    total = (
        k[0] * ws_runs
        + k[1] * ws_chars
        + k[2] * words
        + k[3] * word_chars
        + k[4] * digits
        + k[5] * punct
        + _NON_ASCII_TOKENS * other
    )
    return max(1, round(total))


def _features(text: str) -> tuple[int, int, int, int, int, int, int]:
    """:func:`estimate`'s features of ``text``, the pure-Python reference: runs of 2+
    whitespace, their characters, words, word characters, digit groups, punctuation
    characters, non-ASCII characters.

    >>> _features("ab  12345 é")
    (1, 2, 1, 2, 2, 0, 1)
    """
    ws_runs = ws_chars = words = word_chars = digits = punct = other = 0
    for m in _PIECE.finditer(text):
        piece = m.group()
        c = piece[0]
        n = len(piece)
        if c.isspace():
            # A single space fuses with the following word: free.
            if n > 1:
                ws_runs += 1
                ws_chars += n
        elif c.isascii() and c.isalpha():
            words += 1
            word_chars += n
        elif c.isascii() and c.isdigit():
            digits += 1
        elif c.isascii():
            punct += n
        else:
            other += n
    return ws_runs, ws_chars, words, word_chars, digits, punct, other


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


class Counter:
    """A token counter bound to one encoding; ``.exact`` says whether counts are exact.

    >>> c = counter("cl100k_base")
    >>> c.count("GCF profile=generic") > 0, c.encoding
    (True, 'cl100k_base')
    """

    __slots__ = ("_fn", "_limited", "encoding", "exact")

    encoding: str
    exact: bool

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        _check_encoding(encoding)
        self.encoding = encoding
        fn = _exact_backend(encoding)
        self.exact = fn is not None
        self._fn = fn
        self._limited = _limited_backend(encoding) if fn is not None else None

    @property
    def method(self) -> str:
        """``"exact"`` or ``"estimate"``."""
        return "exact" if self.exact else "estimate"

    @property
    def backend(self) -> str:
        """Who counts: ``"gcfkit"`` (the C module), ``"bpe-openai"`` or ``"estimate"``."""
        if not self.exact:
            return "estimate"
        return "gcfkit" if _compact_backend(self.encoding) is not None else "bpe-openai"

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (special-token text counts as ordinary text)."""
        if not text:
            return 0
        if self._fn is None:
            return estimate(text, self.encoding)
        try:
            return self._fn(text)
        except UnicodeEncodeError:
            return self._fn(_sanitize(text))

    __call__ = count

    def count_till_limit(self, text: str, limit: int) -> int | None:
        """The number of tokens of ``text`` if it is at most ``limit``, else None; the exact
        backend stops counting at the limit, so a text that loses a comparison costs only
        as much counting as the text it lost to.

        >>> c = counter()
        >>> c.count_till_limit("hello world", 10) == c.count("hello world")
        True
        >>> c.count_till_limit("hello world", 0) is None
        True
        """
        if limit < 0:
            return None
        if self._limited is not None and text:
            try:
                n: int | None = self._limited(text, limit)
            except UnicodeEncodeError:
                n = self._limited(_sanitize(text), limit)
            return n
        n = self.count(text)
        return n if n <= limit else None

    def __repr__(self) -> str:
        return f"Counter({self.encoding!r}, {self.method})"


_COUNTERS: dict[str, Counter] = {}


def counter(encoding: str = DEFAULT_ENCODING) -> Counter:
    """The cached :class:`Counter` for ``encoding`` (the encoder object is built once).

    >>> counter() is counter("o200k_base")
    True
    """
    c = _COUNTERS.get(encoding)
    if c is None:
        c = _COUNTERS.setdefault(encoding, Counter(encoding))
    return c


def count(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of ``text`` in ``encoding``: exact with ``gcfkit[tokens]``, else estimated.

    >>> count("") == 0 and count("hello") >= 1
    True
    """
    return counter(encoding).count(text)


def count_till_limit(text: str, limit: int, encoding: str = DEFAULT_ENCODING) -> int | None:
    """Tokens of ``text`` if at most ``limit``, else None (see :meth:`Counter.count_till_limit`).

    >>> count_till_limit("hello", 100) == count("hello"), count_till_limit("hello", 0)
    (True, None)
    """
    return counter(encoding).count_till_limit(text, limit)


def is_exact(encoding: str = DEFAULT_ENCODING) -> bool:
    """True when :func:`count` is exact for ``encoding`` (``bpe-openai`` is installed).

    >>> isinstance(is_exact(), bool)
    True
    """
    return counter(encoding).exact


def method(encoding: str = DEFAULT_ENCODING) -> str:
    """``"exact"`` or ``"estimate"``: what :func:`count` uses for ``encoding``; for reports.

    >>> method() in ("exact", "estimate")
    True
    """
    return counter(encoding).method


def backend(encoding: str = DEFAULT_ENCODING) -> str:
    """Who counts ``encoding``: ``"gcfkit"``, ``"bpe-openai"`` or ``"estimate"``.

    >>> backend() in ("gcfkit", "bpe-openai", "estimate")
    True
    """
    return counter(encoding).backend
