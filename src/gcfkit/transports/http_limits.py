"""The bounds of the Streamable HTTP shells (``--http``), their defaults, and the refusals
they count.

Every resource a client can make the proxy hold has a bound here, each with a default that
is safe on any bind; past a bound the client gets a clear HTTP error (and a JSON-RPC one when
the request had an id), never a crash and never another client's state taken away:

* sessions: ``--http -- COMMAND`` starts one server process per session, so past
  :attr:`HttpLimits.max_processes` a new ``initialize`` is refused (503) until one ends;
  the gateway keeps at most :attr:`HttpLimits.max_sessions` sessions' state, and at most
  :attr:`HttpLimits.remembered_bytes` of results across them, forgetting the least recently
  used (their next results start from a full answer, as after a restart);
* idle sessions end after :attr:`HttpLimits.idle_timeout` seconds;
* a request body over :attr:`HttpLimits.max_body_bytes` is refused (413) before it is
  buffered: by its ``Content-Length`` at once, else as the bytes arrive;
* a connection must send a request's headers within :attr:`HttpLimits.header_timeout`
  seconds, its body within :attr:`HttpLimits.body_timeout`, and may idle between requests
  :attr:`HttpLimits.keepalive_timeout` seconds; past :attr:`HttpLimits.max_connections`
  connections, requests get 503.

:class:`Refusals` counts what the limits and the guard (:mod:`gcfkit.transports.http_guard`)
refused, by kind, and tells any listener (a metrics endpoint, a log) as it happens.

>>> refusals = Refusals()
>>> seen: list[str] = []
>>> refusals.listen(seen.append)
>>> refusals.refuse("body_too_large")
>>> refusals.counts["body_too_large"], seen
(1, ['body_too_large'])
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable
from typing import Final, Literal

__all__ = ["DEFAULT_LIMITS", "HttpLimits", "Refusal", "Refusals"]

_MIB: Final = 1024 * 1024

#: What a refusal was for: a foreign ``Host`` (421) or ``Origin`` (403), a missing or wrong
#: client token (401), a POST that is not JSON (415), a body too large (413) or too slow
#: (408), headers too slow (the connection closed), a path the gateway does not relay (404),
#: an unknown session (404), no room for another session (503), a request id already in
#: flight in its session (409).
Refusal = Literal[
    "host",
    "origin",
    "unauthorized",
    "content_type",
    "body_too_large",
    "body_timeout",
    "header_timeout",
    "not_relayed",
    "unknown_session",
    "sessions",
    "duplicate_id",
]


@dataclasses.dataclass(frozen=True)
class HttpLimits:
    """The bounds one HTTP server keeps (see the module doc); every field has a default.

    >>> HttpLimits().max_body_bytes // (1024 * 1024), HttpLimits(max_processes=4).max_processes
    (16, 4)
    """

    #: ``--http -- COMMAND``: sessions (each its own server process) at once.
    max_processes: int = 32
    #: The gateway: sessions whose state it keeps (least recently used forgotten first).
    max_sessions: int = 1024
    #: The gateway: bytes of results remembered across all sessions (the ``ref=`` results
    #: relative answers refer to, as ``ProxyConfig.ref_bytes`` counts them, 8 MiB at most
    #: per session). The gateway keeps their text and the worker holding a session the
    #: parsed values, several times the text; hence a modest default.
    remembered_bytes: int = 64 * _MIB
    #: Seconds a session may go without a request or an open stream before it ends.
    idle_timeout: float = 3600.0
    #: Bytes of one request body.
    max_body_bytes: int = 16 * _MIB
    #: Seconds from a connection's opening (or its last response) to a request's last header.
    header_timeout: float = 10.0
    #: Seconds a request's body may take to arrive.
    body_timeout: float = 60.0
    #: Seconds an idle keep-alive connection is kept between requests.
    keepalive_timeout: float = 5.0
    #: Connections (and requests in progress) at once; past it, 503. Idle and slow ones
    #: count too (until a deadline above cuts them), so it is well above what clients use.
    max_connections: int = 2048

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if not getattr(self, field.name) > 0:
                raise ValueError(f"HttpLimits.{field.name} must be > 0")


DEFAULT_LIMITS: Final = HttpLimits()


class Refusals:
    """Counts refusals by kind (:data:`Refusal`) and calls each listener with the kind; a
    listener that raises is ignored (counting never breaks a request)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._listeners: list[Callable[[Refusal], None]] = []

    def listen(self, listener: Callable[[Refusal], None]) -> None:
        """Call ``listener`` with the kind of each refusal from now on."""
        self._listeners.append(listener)

    def refuse(self, kind: Refusal) -> None:
        """Count one refusal of ``kind``."""
        self.counts[kind] += 1
        for listener in self._listeners:
            with contextlib.suppress(Exception):
                listener(kind)
