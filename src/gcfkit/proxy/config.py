"""The proxy's options, and the codec it works with (:mod:`gcfkit.answers.codec`; both
picklable: the worker process that rewrites results, :mod:`gcfkit.transports.worker`,
receives them as they are).

>>> ProxyConfig().time_budget, Codec().count("{}", "o200k_base")
(0.5, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..answers.codec import DENSE_CONSTRUCTS, Codec
from ..answers.primer import PrimerMode
from ..answers.pyliteral import LiteralMode
from ..answers.since import FREE_NAMING_BYTES, RefMode
from ..readers import StructuredMode
from ..relative import DEFAULT_MAX_BYTES, DEFAULT_MAX_RESULTS
from .policy import Format, Policy

#: Codec and DENSE_CONSTRUCTS are the answer layer's, here too: the options come with them.
__all__ = ["DENSE_CONSTRUCTS", "Codec", "ProxyConfig"]


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Proxy options (the ``gcfkit proxy`` flags).

    ``format`` caps every tool's policy (``json`` makes the proxy a pure minifier);
    ``time_budget`` is seconds per result before the original is sent instead (a real
    bound when the shell runs rewrites in the worker process), and ``time_budget_per_mb``
    the seconds a result gets on top for each MB of its size (:meth:`budget_for`);
    ``max_text_bytes`` skips larger text blocks without trying.

    Relative answers (:mod:`gcfkit.answers.since`): ``refs`` (auto, all, off), ``ref_results`` and
    ``ref_bytes`` (the LRU), ``ref_min_bytes``, ``ref_free_bytes`` (auto names a result this
    large from the start), ``relative_ratio``, ``session_deltas``.

    ``dense``: the dense constructs the proxy may use (docs/extensions/dense.md; empty: none);
    ``primer_carrier``: where a reader's explanation travels (:mod:`gcfkit.answers.primer`);
    ``literals``: Python-literal results (:mod:`gcfkit.answers.pyliteral`): ``exact``,
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
    time_budget_per_mb: float = 0.6
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

    def budget_for(self, size: int) -> float:
        """Seconds a result of ``size`` bytes (its text, or the line that carries it) may
        take before its original is sent: :attr:`time_budget`, and :attr:`time_budget_per_mb`
        more per MB. A large result is rewritten too (1 MB takes 0.2-0.7 s and 10 MB 2-5 s
        on the shared 2-core machine), and a client never waits longer than it would without
        the proxy plus this bound (the defaults: 0.53 s at 45 KB, 1.1 s at 1 MB, 6.5 s at
        10 MB).

        >>> [round(ProxyConfig().budget_for(n), 2) for n in (45_000, 1_000_000, 10_000_000)]
        [0.53, 1.1, 6.5]
        """
        return self.time_budget + self.time_budget_per_mb * size / _MB


_MB = 1_000_000
