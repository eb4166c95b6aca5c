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

#: The estimate's median error ratio (estimate / exact) per form, both encodings within
#: 0.01-0.04 of these: GCF text has more tokens per piece than the estimator's JSON-heavy
#: calibration expects. :func:`weighed` divides it out, which halves the margin a safe
#: choice needs (0.22 to 0.11 at a slack of 3 tokens, o200k_base).
BIAS: Final[dict[str, float]] = {"original": 1.0, "json": 1.025, "gcf": 0.89, "dense": 0.86}

#: Relative margin: two weighed estimates closer than this (of the smaller) may be in
#: either order exactly. Measured (bench/estimate_margin.py) over 54 values (46 JSON text
#: blocks of corpus/mcp, 8 TOON datasets), every pair of the forms weighed (original,
#: compact JSON, GCF, dense): the smallest margin at
#: which no pair is ordered differently from the exact counts (at :data:`SLACK`) is 0.109
#: in both encodings with the biases divided out (0.222 o200k_base / 0.177 cl100k_base
#: without); the worst pair is compact JSON against dense (serena
#: find_referencing_symbols: 999 vs 932 estimated, 928 vs 906 exact). Per pair: dense
#: against JSON 0.109, GCF against the original 0.085 / 0.051, dense against the original
#: 0.082, GCF against JSON 0.077; and see :data:`PAIR_MARGINS`. 0.15 leaves a third more.
MARGIN: Final = 0.15

#: Pairs whose estimates err together, so a smaller margin separates them safely: the two
#: GCF forms (the same rows, the dense one with a few constructs; 0.028 needed in both
#: encodings) and compact JSON against an original that is JSON too (mostly whitespace
#: apart; no pair ordered wrongly beyond the slack). Both 0.05.
PAIR_MARGINS: Final[dict[frozenset[str], float]] = {
    frozenset({"dense", "gcf"}): 0.05,
    frozenset({"json", "original"}): 0.05,
}

#: Absolute margin in tokens: short texts (a few tokens) are estimated within a token or
#: two whatever their ratio.
SLACK: Final = 3


class NeedsExactCounts(Exception):
    """An answer could not be chosen from estimates (a close call, or a form whose text
    depends on exact counts): nothing of the session was changed, and the same result
    answered with exact counts gives the answer the exact path gives.

    >>> str(NeedsExactCounts("dense definitions"))
    'dense definitions'
    """


def weighed(estimate: int, kind: str) -> int:
    """An estimate of a form of ``kind`` (a :data:`BIAS` key) with its bias divided out.

    >>> weighed(89, "gcf"), weighed(100, "original")
    (100, 100)
    """
    return round(estimate / BIAS[kind])


def close(a: float, b: float, kinds: tuple[str, str] | None = None) -> bool:
    """Whether estimates ``a`` and ``b`` (of forms of ``kinds``, when known) are too close
    to say which is smaller exactly.

    >>> close(100, 117), close(100, 119), close(1, 4), close(1, 5)
    (True, False, True, False)
    >>> close(100, 109, ("gcf", "dense")), close(100, 107, ("dense", "gcf"))
    (False, True)
    """
    low, high = (a, b) if a <= b else (b, a)
    margin = MARGIN if kinds is None else PAIR_MARGINS.get(frozenset(kinds), MARGIN)
    return high <= low * (1 + margin) + SLACK


def decide(a: float, b: float) -> bool:
    """``a < b`` when the estimates say so clearly; raises :class:`NeedsExactCounts` when
    they are :func:`close` (by :data:`MARGIN`).

    >>> decide(10, 20), decide(20, 10)
    (True, False)
    """
    if close(a, b):
        raise NeedsExactCounts(f"a close call ({a:g} vs {b:g} estimated tokens)")
    return a < b
