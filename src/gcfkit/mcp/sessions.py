"""The state a :class:`~gcfkit.mcp.server.GCFResponder` keeps per MCP connection (graph
sessions, delta bases, named results), bounded by :class:`SessionLimits` (spec §9.5) and
dropped when the connection closes.

>>> SessionStore(SessionLimits(), clock=lambda: 0.0).get(None) is None
True
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from mcp.server.connection import Connection

from ..answers.choose import DeltaState
from ..answers.since import Names
from ..graph import Session as GraphSession

__all__ = ["SessionLimits", "SessionState", "SessionStore"]


@dataclass(frozen=True)
class SessionLimits:
    """Bounds on the state a :class:`GCFResponder` keeps (spec §9.5).

    ``max_sessions`` connections are tracked at once (the least recently used is expired
    first); a session idle for ``idle_seconds`` or older than ``max_lifetime_seconds`` is
    expired; a graph session stops at ``max_symbols`` retained symbol IDs and a session keeps
    at most ``max_delta_bases`` delta bases (one per tool and arguments). Whatever is expired
    answers with a full non-session payload and starts over.

    >>> SessionLimits().max_symbols
    10000
    """

    max_sessions: int = 1024
    max_symbols: int = 10_000
    idle_seconds: float = 30 * 60.0
    max_lifetime_seconds: float = 24 * 3600.0
    max_delta_bases: int = 64


@dataclass
class SessionState:
    """What one connection's client holds: its graph session, its delta bases, its named
    results."""

    created: float
    last_used: float
    graph: GraphSession | None = None  # created on first use
    # What the client holds per tool + arguments (least recently used first).
    deltas: OrderedDict[str, DeltaState] = field(default_factory=OrderedDict)
    # The results this connection was sent and named, for relative answers (created on use).
    names: Names | None = None


class SessionStore:
    """Session states keyed by connection; bounded, expiring, dropped on close."""

    def __init__(self, limits: SessionLimits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self._clock = clock
        self._states: weakref.WeakKeyDictionary[Connection, SessionState] = (
            weakref.WeakKeyDictionary()
        )
        self._expired: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, conn: Connection | None) -> SessionState | None:
        """This connection's state, or None when the call must be answered session-less."""
        if conn is None:
            return None
        now = self._clock()
        with self._lock:
            self._sweep(now)
            state = self._states.get(conn)
            if state is not None:
                state.last_used = now
                return state
            fresh = SessionState(created=now, last_used=now)
            self._states[conn] = fresh
            self._evict()
            if conn in self._expired:
                # §9.4: an expired session answers with a full non-session payload; the
                # fresh state starts the new session from the next call on.
                self._expired.discard(conn)
                return None
            conn.exit_stack.callback(self._forget, weakref.ref(conn))
            return fresh

    def expire(self, conn: Connection) -> None:
        with self._lock:
            if self._states.pop(conn, None) is not None:
                self._expired.add(conn)

    def _forget(self, ref: weakref.ref[Connection]) -> None:
        conn = ref()
        if conn is not None:
            with self._lock:
                self._states.pop(conn, None)
                self._expired.discard(conn)

    def _sweep(self, now: float) -> None:
        lim = self.limits
        stale = [
            c
            for c, s in self._states.items()
            if now - s.last_used > lim.idle_seconds or now - s.created > lim.max_lifetime_seconds
        ]
        for c in stale:
            del self._states[c]
            self._expired.add(c)

    def _evict(self) -> None:
        while len(self._states) > self.limits.max_sessions:
            oldest = min(self._states.items(), key=lambda kv: kv[1].last_used)[0]
            del self._states[oldest]
            self._expired.add(oldest)
