"""Serving the ``gcfkit ui`` application with uvicorn, on loopback unless told otherwise.

:func:`serve` binds first (so a port in use is a clear error, and port 0 picks a free one),
then tells ``ready`` the URL, then serves until interrupted.

>>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
(True, True, True, False)
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from ..transports.http import is_loopback
from .app import create_app

__all__ = ["DEFAULT_PORT", "is_loopback", "serve"]

DEFAULT_PORT = 8711


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        hint = " (another gcfkit ui? try --port 0 for any free port)" if port else ""
        raise ConfigError("io_error", f"cannot listen on {host}:{port}: {e.strerror}{hint}") from e
    sock.listen(64)
    sock.setblocking(False)
    return sock


def serve(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    ledger: Path | str | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the UI on ``host:port`` until interrupted; ``ready`` gets the page's URL."""
    import uvicorn

    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    app = create_app(ledger=ledger, bound=host)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    if ready is not None:
        ready(f"http://{shown}:{bound}/")
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
