"""Choosing a form from token estimates, and knowing when an estimate cannot decide.

A codec in estimate mode (:meth:`gcfkit.answers.codec.Codec.estimating`) counts with
:func:`gcfkit.tokens.estimate` and never loads a tokenizer. Every comparison that picks an
answer then goes through :func:`decide`: when the two estimates are within
:data:`MARGIN` (relative) plus :data:`SLACK` (absolute) of each other, the call is close and
:class:`NeedsExactCounts` is raised, so that the caller answers the result with exact counts
instead (the proxy's worker process); otherwise the estimate's order is the exact order.

The margin is measured (``bench/estimate_margin.py``) on the 92 results of
``corpus/mcp`` and the datasets of ``corpus/toon``: for every pair of forms one value could be
sent in (original, compact JSON, GCF, dense), the ratio of the two estimates' error ratios
(estimate / exact). See :data:`BIAS` and :data:`MARGIN` for the figures.

>>> decide(100, 130)
True
>>> decide(100, 103)
Traceback (most recent call last):
  ...
gcfkit.answers.estimates.NeedsExactCounts: a close call (100 vs 103 estimated tokens)
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BIAS",
    "MARGIN",
    "PAIR_MARGINS",
    "SLACK",
    "NeedsExactCounts",
    "close",
    "decide",
    "weighed",
]

#: The estimate's median error ratio (estimate / exact) per form (bench/estimate_margin.py,
#: both encodings within 0.01-0.04 of these): GCF text has more tokens per piece than the
#: estimator's JSON-heavy calibration expects (median 0.87-0.90 for GCF, 0.86-0.87 for
#: dense). :func:`weighed` divides it out, which halves the margin a safe choice needs.
#: The two GCF forms get one factor: they share their rows, so their estimates err
#: together, and separate factors would part two forms a few tokens apart.
BIAS: Final[dict[str, float]] = {"original": 1.0, "json": 1.025, "gcf": 0.88, "dense": 0.88}

#: Relative margin: two weighed estimates closer than this (of the smaller, plus
#: :data:`SLACK`) may be in either order exactly. Measured (bench/estimate_margin.py) over
#: 54 values (46 JSON text blocks of corpus/mcp, 8 TOON datasets), every pair of the forms
#: weighed (original, compact JSON, GCF, dense): the smallest margin at which no pair is
#: ordered differently from its exact counts is 0.088 (o200k_base) and 0.089 (cl100k_base)
#: with the biases divided out (0.222 / 0.177 without). The worst pair is GCF against
#: compact JSON (serena find_referencing_symbols: 936 vs 999 estimated, 911 vs 928 exact);
#: per pair: GCF against JSON 0.088 / 0.089, dense against JSON 0.083 / 0.084, GCF against
#: the original 0.077 / 0.062, dense against the original 0.057. 0.12 leaves a third more.
MARGIN: Final = 0.12

#: Absolute margin in tokens: short texts (a few tokens) are estimated within a token or
#: two whatever their ratio.
SLACK: Final = 3

#: (relative, absolute) margins of the pairs whose estimates err together. The two GCF
#: forms (the same rows, the dense one with a few constructs, often a few tokens apart):
#: ordered wrongly only where their estimates were at most 8 tokens apart (cl100k_base; 3
#: in o200k_base), in texts of 150 to 9,000 tokens. Compact JSON against an original that
#: is JSON too (mostly whitespace apart): never ordered wrongly beyond the slack.
PAIR_MARGINS: Final[dict[frozenset[str], tuple[float, int]]] = {
    frozenset({"dense", "gcf"}): (0.01, 10),
    frozenset({"json", "original"}): (0.05, SLACK),
}


class NeedsExactCounts(Exception):
    """An answer could not be chosen from estimates (a close call, or a form whose text
    depends on exact counts): nothing of the session was changed, and the same result
    answered with exact counts gives the answer the exact path gives.

    >>> str(NeedsExactCounts("dense definitions"))
    'dense definitions'
    """


def weighed(estimate: int, kind: str) -> int:
    """An estimate of a form of ``kind`` (a :data:`BIAS` key) with its bias divided out.

    >>> weighed(88, "gcf"), weighed(100, "original")
    (100, 100)
    """
    return round(estimate / BIAS[kind])


def close(a: float, b: float, kinds: tuple[str, str] | None = None) -> bool:
    """Whether estimates ``a`` and ``b`` (of forms of ``kinds``, when known) are too close
    to say which is smaller exactly.

    >>> close(100, 115), close(100, 116), close(1, 4), close(1, 5)
    (True, False, True, False)
    >>> close(100, 112, ("gcf", "dense")), close(100, 111, ("dense", "gcf"))
    (False, True)
    """
    low, high = (a, b) if a <= b else (b, a)
    pair = None if kinds is None else PAIR_MARGINS.get(frozenset(kinds))
    relative, absolute = pair if pair is not None else (MARGIN, SLACK)
    return high <= low * (1 + relative) + absolute


def decide(a: float, b: float) -> bool:
    """``a < b`` when the estimates say so clearly; raises :class:`NeedsExactCounts` when
    they are :func:`close` (by :data:`MARGIN`).

    >>> decide(10, 20), decide(20, 10)
    (True, False)
    """
    if close(a, b):
        raise NeedsExactCounts(f"a close call ({a:g} vs {b:g} estimated tokens)")
    return a < b
