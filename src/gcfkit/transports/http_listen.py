"""The socket and the uvicorn server under ``--http``, with the connection bounds of
:class:`~gcfkit.transports.http_limits.HttpLimits`.

uvicorn already bounds what it can: the size of a request's headers (h11's limit), the idle
time between requests (``timeout_keep_alive``) and the connections served at once
(``limit_concurrency``: 503 past it). What it does not bound is the time a connection may
take to send its headers: a client that trickles a byte at a time holds a descriptor for
good, and a thousand of them leave none for real clients. :func:`protocol_for` adds that
deadline to uvicorn's own h11 protocol: from the connection's opening (and from each
response's end, for the next request) to the request's last header; past it the connection
is closed and counted (``header_timeout``). And the process may open as many descriptors as
the system lets it (:func:`raise_descriptor_limit`): the usual soft limit of 1,024 is what a
flood of idle connections exhausts first.

>>> sock = listen_socket("127.0.0.1", 0)
>>> sock.proto == socket.IPPROTO_TCP
True
>>> sock.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import ConfigError
from .http_limits import HttpLimits, Refusals

__all__ = ["listen_socket", "protocol_for", "raise_descriptor_limit", "uvicorn_config"]


def raise_descriptor_limit(wanted: int = 65536) -> int:
    """Raise this process's soft limit of open descriptors towards ``wanted`` (never past
    the hard limit); the limit now. POSIX only: elsewhere, and when refused, it stays.

    >>> raise_descriptor_limit(1) >= 1
    True
    """
    try:
        import resource
    except ImportError:  # Windows
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def listen_socket(host: str, port: int) -> socket.socket:
    """The bound socket ``--http HOST:PORT`` serves on (port 0: a free one); raises
    :class:`~gcfkit.errors.ConfigError` when it cannot be bound.

    Made with ``IPPROTO_TCP`` rather than protocol 0: asyncio sets ``TCP_NODELAY`` only on
    connections accepted from such a socket, and without it every response written in more
    than one piece (headers, then each SSE event) waits on Nagle's algorithm and the peer's
    delayed ACK, some 40 ms a call.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError("invalid_option", f"--http {host}:{port}: {e.strerror or e}") from e
    return sock


class _TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (module doc)."""

    header_timeout: float = 10.0
    refusals: Refusals | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._header_timer: asyncio.TimerHandle | None = None
        self._awaited: Any = self.cycle
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._awaited = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if self.cycle is self._awaited and not self.transport.is_closing():
            if self.refusals is not None:
                self.refusals.refuse("header_timeout")
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not self._awaited:
            self._disarm()  # a new request's headers are in

    def on_response_complete(self) -> None:
        finished = self.cycle
        super().on_response_complete()
        # The next request's headers are due in their turn (unless a pipelined one is in).
        if self.cycle is finished and not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def protocol_for(limits: HttpLimits, refusals: Refusals | None = None) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits.header_timeout`` (see the module doc)."""
    return type(
        "TimedH11Protocol",
        (_TimedH11Protocol,),
        {"header_timeout": limits.header_timeout, "refusals": refusals},
    )


def uvicorn_config(app: Any, limits: HttpLimits, refusals: Refusals | None = None) -> Config:
    """The uvicorn configuration serving ``app`` within ``limits``."""
    return Config(
        app,
        http=protocol_for(limits, refusals),
        log_level="warning",
        lifespan="on",
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=int(max(1, limits.keepalive_timeout)),
    )
