"""The proxy's options and the codec it works with (both picklable: the worker process that
rewrites results, :mod:`gcfkit.transports.worker`, receives them as they are).

>>> ProxyConfig().time_budget, Codec().count("{}", "o200k_base")
(0.5, 1)
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
from ..readers import StructuredMode
from ..relative import DEFAULT_MAX_BYTES, DEFAULT_MAX_RESULTS
from .policy import Format, Policy
from .primer import PrimerMode
from .pyliteral import LiteralMode
from .since import FREE_NAMING_BYTES, RefMode

__all__ = ["DENSE_CONSTRUCTS", "Codec", "DenseEncoded", "ProxyConfig"]

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


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Proxy options (the ``gcfkit proxy`` flags).

    ``format`` caps every tool's policy (``json`` makes the proxy a pure minifier);
    ``time_budget`` is seconds per result before the original is sent instead (a real
    bound when the shell runs rewrites in the worker process);
    ``max_text_bytes`` skips larger text blocks without trying.

    Relative answers (:mod:`gcfkit.proxy.since`): ``refs`` (auto, all, off), ``ref_results`` and
    ``ref_bytes`` (the LRU), ``ref_min_bytes``, ``ref_free_bytes`` (auto names a result this
    large from the start), ``relative_ratio``, ``session_deltas``.

    ``dense``: the dense constructs the proxy may use (docs/extensions/dense.md; empty: none);
    ``primer_carrier``: where a reader's explanation travels (:mod:`gcfkit.proxy.primer`);
    ``literals``: Python-literal results (:mod:`gcfkit.proxy.pyliteral`): ``exact``,
    ``tuples`` or ``off``.

    ``client``: the client's name when the user gives it (``--client``; else the name it
    declares in ``initialize``), which says what its model reads (:mod:`gcfkit.readers`);
    ``structured``: ``auto``, ``keep`` or ``text``, whether results carrying
    ``structuredContent`` are delivered as their value (:mod:`gcfkit.proxy.structured`).

    >>> ProxyConfig().format, ProxyConfig().encoding
    ('gcf', 'o200k_base')
    """

    policy: Policy = field(default_factory=Policy)
    format: Format = "gcf"
    primer: bool = True
    decode_args: bool = False
    advertise_format: bool = False
    stats: bool = True
    encoding: str = "o200k_base"
    selfcheck: bool = True
    time_budget: float = 0.5
    max_text_bytes: int = 16 * 1024 * 1024
    reanchor: int = 15
    delta_ratio: float = 0.6
    server_name: str = ""
    refs: RefMode = "auto"
    session_deltas: bool = False
    relative_ratio: float = 0.6
    ref_results: int = DEFAULT_MAX_RESULTS
    ref_bytes: int = DEFAULT_MAX_BYTES
    ref_min_bytes: int = 128
    ref_free_bytes: int = FREE_NAMING_BYTES
    dense: tuple[str, ...] = DENSE_CONSTRUCTS
    primer_carrier: PrimerMode = "payload"
    literals: LiteralMode = "exact"
    client: str = ""
    structured: StructuredMode = "auto"
