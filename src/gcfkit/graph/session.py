"""Graph sessions (spec §9): stable IDs and ``@N  # previously transmitted`` references.

:class:`Session` is the producer side, :class:`SessionReader` the consumer side. One
instance serves exactly one session scope (§9.3: one principal, one conversation, one
producer namespace); never share an instance between users or conversations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from ..errors import GCFError, located
from ..header import first_line, parse_header, to_text
from .decoder import decode_graph
from .delta import refuse_delta
from .encoder import prepare, render
from .model import Graph, Symbol

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_LIFETIME",
    "DEFAULT_MAX_SYMBOLS",
    "Session",
    "SessionReader",
]

#: Default §9.5 limits: retained symbol IDs, idle seconds before expiry, session lifetime.
DEFAULT_MAX_SYMBOLS: Final = 10_000
DEFAULT_IDLE_TIMEOUT: Final = 30 * 60.0
DEFAULT_MAX_LIFETIME: Final = 24 * 3600.0


class Session:
    """Producer-side graph session: each call's symbols keep the ID they first received.

    A symbol (identity: kind + qualified name, §9.1) already declared with the same score
    and provenance is sent as a bare reference; one whose score or provenance changed is
    declared again under its old ID. Limits (§9.5), all configurable:

    - ``max_symbols``: retained symbol IDs (default 10,000);
    - ``idle_timeout``: seconds since the previous call after which the session expired
      (default 30 minutes);
    - ``max_lifetime``: seconds since the session's first payload (default 24 hours).

    When a limit is exceeded the call returns a full non-session payload (what
    :func:`gcfkit.graph.dumps` gives) and the session restarts empty, so the next call
    declares everything again from ``@0``. ``clock`` (seconds, monotonic) is injectable for
    tests. Call :meth:`reset` when a payload may not have reached the consumer (§9.4).

    >>> from gcfkit.graph import Symbol, Graph
    >>> s = Session()
    >>> a = Symbol("pkg.A", "function", 0.9, "lsp")
    >>> print(s.dumps(Graph([a], tool="t")), end="")
    GCF profile=graph tool=t symbols=1 session=true
    ## targets
    @0 fn pkg.A 0.90 lsp
    >>> print(s.dumps(Graph([a], tool="t")), end="")
    GCF profile=graph tool=t symbols=1 session=true
    ## targets
    @0  # previously transmitted
    """

    def __init__(
        self,
        *,
        max_symbols: int = DEFAULT_MAX_SYMBOLS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_lifetime: float = DEFAULT_MAX_LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_symbols < 0 or idle_timeout < 0 or max_lifetime < 0:
            raise ValueError("session limits must be non-negative")
        self.max_symbols = max_symbols
        self.idle_timeout = idle_timeout
        self.max_lifetime = max_lifetime
        self._clock = clock
        self._ids: dict[tuple[str, str], int] = {}
        self._sent: dict[int, str] = {}
        self._started = 0.0
        self._last = 0.0

    @property
    def retained(self) -> int:
        """How many symbol IDs the session currently holds."""
        return len(self._ids)

    def reset(self) -> None:
        """Forget every ID: the next payload starts a new session."""
        self._ids.clear()
        self._sent.clear()

    def expired(self) -> bool:
        """True when the idle or lifetime limit has passed (the next call falls back)."""
        if not self._ids:
            return False
        now = self._clock()
        return now - self._last > self.idle_timeout or now - self._started > self.max_lifetime

    def dumps(self, graph: Graph) -> str:
        """The session payload of ``graph`` (``session=true``), or a full fallback (§9.5).

        Raises :class:`GCFError` for a graph :func:`gcfkit.graph.dumps` rejects; the session
        is then left as it was.
        """
        prep = prepare(graph)
        if self.expired():
            self.reset()
            return render(prep, range(len(prep.symbols)))
        keys = [(s.kind, s.qualified_name) for s in prep.symbols]
        new = sum(1 for k in keys if k not in self._ids)
        if len(self._ids) + new > self.max_symbols:
            self.reset()
            return render(prep, range(len(prep.symbols)))
        now = self._clock()
        if not self._ids:
            self._started = now
        next_id = len(self._ids)
        ids: list[int] = []
        refs: list[bool] = []
        for key, node in zip(keys, prep.nodes, strict=True):
            ident = self._ids.get(key)
            if ident is None:
                ident = next_id
                next_id += 1
                self._ids[key] = ident
            ids.append(ident)
            refs.append(self._sent.get(ident) == node)
        for ident, node, ref in zip(ids, prep.nodes, refs, strict=True):
            if not ref:
                self._sent[ident] = node
        self._last = now
        return render(prep, ids, refs, [("session", "true")])


class SessionReader:
    """Consumer-side graph session: resolves ``@N  # previously transmitted`` references.

    A non-session payload ends the session (the producer fell back, §9.4), so the reader
    forgets what it knew. An unresolvable reference raises ``unresolved_reference``; the
    reader then keeps its prior state and the consumer should request a full payload.

    >>> from gcfkit.graph import Session, Symbol, Graph
    >>> producer, reader = Session(), SessionReader()
    >>> g = Graph([Symbol("pkg.A", "function", 0.9, "lsp")])
    >>> reader.loads(producer.dumps(g)) == reader.loads(producer.dumps(g)) == g
    True
    """

    def __init__(self) -> None:
        self._known: dict[int, Symbol] = {}

    def reset(self) -> None:
        """Forget every symbol seen so far."""
        self._known.clear()

    def loads(self, text: str | bytes) -> Graph:
        """Decode one payload of the session; see :func:`gcfkit.graph.loads`."""
        text = to_text(text)
        try:
            header = parse_header(first_line(text))
            session = header.flag("session")
            if header.profile == "graph" and header.flag("delta"):
                refuse_delta(text)
            graph, declared = decode_graph(text, self._known if session else None)
        except GCFError as e:
            raise located(e, text) from None
        if not session:
            self._known.clear()
            return graph
        self._known.update(declared)
        return graph
