"""Token counts for the OpenAI ``o200k_base`` and ``cl100k_base`` encodings, offline.

With the ``gcfkit[tokens]`` extra installed, counts are exact: they come from the
``bpe-openai`` wheel, whose rank files ship inside the wheel and are byte-identical to
tiktoken's (same sha256; ``tests/test_tokens.py`` checks it and compares counts with
tiktoken). Nothing is downloaded, ever.

Without the extra the core stays dependency-free and counts fall back to an estimate
(:func:`estimate`): a pre-tokenizer-shaped heuristic calibrated on the project corpus,
typically within a few percent on JSON-like text but *not* exact. Every caller that
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
import math
import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "Counter",
    "count",
    "counter",
    "estimate",
    "is_exact",
    "method",
]

#: The encodings gcfkit counts exactly (with the ``tokens`` extra).
ENCODINGS: Final = ("o200k_base", "cl100k_base")
DEFAULT_ENCODING: Final = "o200k_base"

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _sanitize(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; tiktoken replaces them with U+FFFD before
    # encoding, so do the same to keep counts identical.
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _check_encoding(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; gcfkit counts {' and '.join(ENCODINGS)}")


# ---------------------------------------------------------------------------------------
# Exact backend
# ---------------------------------------------------------------------------------------


@functools.cache
def _exact_backend(encoding: str) -> Callable[[str], int] | None:
    """The cached exact counting function for ``encoding``, or None without the extra."""
    try:
        import bpe_openai
    except ImportError:
        return None
    try:
        # The compiled binding counts without materialising token ids and without the
        # Python-side rank tables the public Encoding builds (a second of start-up).
        from bpe_openai import _bindings

        fn: Callable[[str], int] = _bindings.tokenizer_for_encoding(encoding).count
        return fn
    except (ImportError, AttributeError, TypeError, ValueError):
        pass
    enc = bpe_openai.get_encoding(encoding)

    def via_encoding(text: str) -> int:
        return len(enc.encode_ordinary(text))

    return via_encoding


# ---------------------------------------------------------------------------------------
# Estimate
# ---------------------------------------------------------------------------------------

# A simplification of the o200k/cl100k pre-tokenizers: BPE never merges across these
# pieces, so counting pieces and then charging long pieces by length tracks the real
# count far better than a flat chars/4.
_PIECE: Final = re.compile(
    r"[A-Za-z]+|[0-9]{1,3}|[^\sA-Za-z0-9\x80-\U0010ffff]+|[\x80-\U0010ffff]+|\s+"
)
# Characters per token inside a piece, by piece class; calibrated on corpus/toon and
# corpus/mcp against the exact o200k_base counts (cl100k_base runs a few percent higher).
_LETTERS_PER_TOKEN: Final = 6.0
_PUNCT_PER_TOKEN: Final = 2.2
_NON_ASCII_PER_TOKEN: Final = 1.4
_SPACE_PER_TOKEN: Final = 16.0
_CL100K_FACTOR: Final = 1.04


def estimate(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """A dependency-free token estimate (not exact); used when ``bpe-openai`` is absent.

    >>> estimate("hello world") >= 1
    True
    """
    _check_encoding(encoding)
    total = 0.0
    for m in _PIECE.finditer(text):
        piece = m.group()
        c = piece[0]
        n = len(piece)
        if c.isspace():
            # A single space usually fuses with the following word.
            total += 0.0 if n == 1 else math.ceil(n / _SPACE_PER_TOKEN)
        elif c.isascii() and c.isalpha():
            total += math.ceil(n / _LETTERS_PER_TOKEN)
        elif c.isascii() and c.isdigit():
            total += 1
        elif c.isascii():
            total += math.ceil(n / _PUNCT_PER_TOKEN)
        else:
            total += math.ceil(n / _NON_ASCII_PER_TOKEN)
    if encoding == "cl100k_base":
        total *= _CL100K_FACTOR
    return round(total)


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


class Counter:
    """A token counter bound to one encoding; ``.exact`` says whether counts are exact.

    >>> c = counter("cl100k_base")
    >>> c.count("GCF profile=generic") > 0, c.encoding
    (True, 'cl100k_base')
    """

    __slots__ = ("_fn", "encoding", "exact")

    encoding: str
    exact: bool

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        _check_encoding(encoding)
        self.encoding = encoding
        fn = _exact_backend(encoding)
        self.exact = fn is not None
        self._fn = fn

    @property
    def method(self) -> str:
        """``"exact"`` or ``"estimate"``."""
        return "exact" if self.exact else "estimate"

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
