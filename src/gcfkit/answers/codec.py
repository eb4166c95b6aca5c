"""The codec the answer layer works with: which encoder, decoder and token counter (and the
dense profile's, when this build has it) make and measure every form of a result, chosen
once, where the proxy or a server helper is built. Injectable for tests; picklable, so a
worker process receives it as it is (by reference).

>>> Codec().count("{}", "o200k_base")
1
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import dumps as gcf_dumps
from .. import loads as gcf_loads
from .. import tokens

__all__ = ["DENSE_CONSTRUCTS", "Codec", "DenseEncoded"]


#: The dense profile's constructs (docs/extensions/dense.md) the proxy can switch on.
DENSE_CONSTRUCTS: tuple[str, ...] = ("defs", "lists", "constants", "short_rows")


class DenseEncoded(Protocol):
    """What a dense encoder returns: the payload and the constructs it uses."""

    @property
    def text(self) -> str: ...

    @property
    def constructs(self) -> tuple[str, ...]: ...


def _dense_module() -> Any:
    # The dense profile is its own module (gcfkit.dense); a build without it has no dense form.
    if importlib.util.find_spec("gcfkit.dense") is None:
        return None
    return importlib.import_module("gcfkit.dense")


def _default_dense_encode() -> Callable[..., DenseEncoded] | None:
    module = _dense_module()
    return None if module is None else module.encode


def _default_dense_loads() -> Callable[[str], Any] | None:
    module = _dense_module()
    return None if module is None else module.loads


@dataclass(frozen=True, slots=True)
class Codec:
    """The functions the core encodes, decodes and counts with (injectable for tests):
    by default :func:`gcfkit.dumps`, :func:`gcfkit.loads` and :func:`gcfkit.tokens.count`.

    ``count_till_limit(text, limit, encoding)`` is the count of ``text`` when it is at most
    ``limit``, else None; left out, it is :func:`gcfkit.tokens.count_till_limit` for the
    default ``count`` and a full ``count`` compared with the limit for any other.

    >>> Codec().count("{}", "o200k_base")
    1
    >>> Codec(count=lambda t, e: len(t)).limited()("abcd", 3, "o200k_base") is None
    True
    """

    dumps: Callable[[Any], str] = gcf_dumps
    loads: Callable[[str], Any] = gcf_loads
    count: Callable[[str, str], int] = tokens.count
    count_till_limit: Callable[[str, int, str], int | None] | None = None
    dense_encode: Callable[..., DenseEncoded] | None = field(default_factory=_default_dense_encode)
    dense_loads: Callable[[str], Any] | None = field(default_factory=_default_dense_loads)
    #: Estimate mode (:meth:`estimating`): answers are chosen with ``estimate_count``, and a
    #: choice it cannot make clearly raises
    #: :class:`~gcfkit.answers.estimates.NeedsExactCounts` instead of guessing; ``count``
    #: is used only when exact counts are asked for.
    estimate: bool = False
    estimate_count: Callable[[str, str], int] = tokens.estimate
    #: Settled-estimate mode (the default; :attr:`settles`): whole texts are compared by
    #: ``estimate_count``, a close call is counted exactly, dense definitions and deltas
    #: get exact counts as on the exact path, and what the ledger needs is counted after
    #: the answer is out. The answers are the exact path's; nothing is raised.
    settle: bool = True

    @classmethod
    def exact(cls) -> Codec:
        """The default codec counting every choice exactly (the reference path).

        >>> Codec.exact().settles, Codec().settles
        (False, True)
        """
        return cls(settle=False)

    @property
    def settles(self) -> bool:
        """Whether answers are chosen in settled-estimate mode: asked for, not in estimate
        mode, and counting with :func:`gcfkit.tokens.count` (the counter
        :data:`~gcfkit.answers.estimates.MARGIN` was measured against; an injected counter
        is compared by itself)."""
        return (
            self.settle
            and not self.estimate
            and self.count is tokens.count
            and self.estimate_count is tokens.estimate
        )

    @classmethod
    def estimating(cls) -> Codec:
        """The default codec in estimate mode: :func:`gcfkit.tokens.estimate` chooses, no
        tokenizer is loaded until exact counts are asked for (a close call,
        :mod:`gcfkit.answers.estimates`).

        >>> codec = Codec.estimating()
        >>> codec.estimate, codec.estimate_count("{}", "o200k_base") == tokens.estimate("{}")
        (True, True)
        """
        return cls(estimate=True)

    def limited(self) -> Callable[[str, int, str], int | None]:
        """The limited counter that agrees with :attr:`count`."""
        if self.count_till_limit is not None:
            return self.count_till_limit
        if self.count is tokens.count:
            return tokens.count_till_limit
        count = self.count

        def by_full_count(text: str, limit: int, encoding: str) -> int | None:
            n = count(text, encoding)
            return n if n <= limit else None

        return by_full_count
