"""``/healthz``, ``/readyz`` and ``/metrics`` on the HTTP shells: what a load balancer probes
and Prometheus scrapes, none of them an MCP request, so none needs a session.

* ``/healthz``: the process lives and its event loop answers (200 ``ok``).
* ``/readyz``: the MCP server answers. For the gateway, the upstream gives any HTTP answer
  below 500 to a GET of its MCP URL (a 400 or 405 for want of a session, or a 401 for want
  of a token, is an answer: the server is up); for ``--http -- COMMAND``, the shared
  server process (started if it is not running: :mod:`gcfkit.transports.http_shared`)
  answers a ``ping``. 503 with the reason otherwise. Probes that come together share one
  check, and a check is reused for :data:`READY_FOR` seconds, so a fleet of probes costs the
  server one request a second at most.
* ``/metrics``: :class:`~gcfkit.transports.metrics.Metrics`, in the format the scraper's
  ``Accept`` asks for.

They answer GET and HEAD, behind the server's :class:`~gcfkit.transports.http_guard.Guard`
as every route is: a foreign ``Host`` or ``Origin`` is refused here as at the MCP endpoint.
:func:`probed` opens ``/healthz`` and ``/readyz`` to requests without the client token (a
load balancer's probe carries none, and they tell nothing but up or down); ``/metrics``
keeps it, for the series name the tools in use (a Prometheus scrape can send a bearer
token). It also counts every refusal the guard counts in ``gcfkit_refusals_total``. A
server whose MCP endpoint is one of these paths keeps it (that path is neither registered
nor opened here).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ..ledger import Ledger
from .http import ACCEPT_BOTH, redact_url
from .http_guard import Guard
from .metrics import MeteredLedger, Metrics
from .tracing import spans_from_env

if TYPE_CHECKING:
    import httpx2

    from .http_shared import SharedServer

__all__ = [
    "HEALTH_PATH",
    "METRICS_PATH",
    "READY_FOR",
    "READY_PATH",
    "Readiness",
    "command_ready",
    "health_routes",
    "metered",
    "probed",
    "upstream_ready",
]

HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
METRICS_PATH: Final = "/metrics"
#: The paths served without the client token (probes).
_OPEN: Final = frozenset({HEALTH_PATH, READY_PATH})

#: Seconds a readiness check is reused for.
READY_FOR: Final = 1.0
#: Seconds the server has to answer a readiness check.
PROBE_TIMEOUT: Final = 5.0

#: A check: None when the server answers, else why it is not ready.
Check = Callable[[], Awaitable[str | None]]


class Readiness:
    """One readiness check at a time, its answer reused for ``ttl`` seconds.

    >>> async def up() -> None:
    ...     return None
    >>> asyncio.run(Readiness(up).reason())
    """

    def __init__(self, check: Check, ttl: float = READY_FOR) -> None:
        self.check = check
        self.ttl = ttl
        self._lock = asyncio.Lock()
        self._at = float("-inf")
        self._reason: str | None = "not checked yet"

    async def reason(self) -> str | None:
        """None when the server answers, else why not."""
        async with self._lock:
            if time.monotonic() - self._at >= self.ttl:
                try:
                    self._reason = await asyncio.wait_for(self.check(), PROBE_TIMEOUT)
                except asyncio.TimeoutError:
                    self._reason = f"the MCP server did not answer within {PROBE_TIMEOUT:g} s"
                except Exception as e:  # a probe that breaks says why, it never raises
                    self._reason = f"the readiness check failed: {type(e).__name__}"
                self._at = time.monotonic()
            return self._reason


def metered(ledger: Ledger | None) -> tuple[Metrics, Ledger | None]:
    """A server's metrics (with traces when the environment configures them) and its
    ledger, metered (:class:`~gcfkit.transports.metrics.MeteredLedger`)."""
    metrics = Metrics(spans=spans_from_env(os.environ))
    return metrics, MeteredLedger.of(metrics, ledger)


def _served(paths: Iterable[str], mcp_path: str) -> list[str]:
    """``paths`` but the MCP endpoint's (which it keeps), in their order."""
    taken = mcp_path.rstrip("/") or "/"
    return [path for path in paths if path != taken]


def probed(guard: Guard, metrics: Metrics, mcp_path: str = "/mcp") -> Guard:
    """``guard`` for a server with the health routes (see the module docstring): the probes
    served without the client token, the Host and Origin checks kept, and each refusal the
    guard counts, of whatever kind, counted in ``metrics`` too. The refusals are ``guard``'s
    own (shared, not copied).

    >>> g = probed(Guard("127.0.0.1", client_token="t"), Metrics())
    >>> sorted(g.open_paths), g.refusal("GET", "/metrics", {"host": "localhost"}, None)[0]
    (['/healthz', '/readyz'], 401)
    """
    guard.refusals.listen(metrics.refused)
    opened = guard.open_paths | frozenset(_served(_OPEN, mcp_path))
    return dataclasses.replace(guard, open_paths=opened)


def health_routes(metrics: Metrics, ready: Check, *, mcp_path: str = "/mcp") -> list[BaseRoute]:
    """The three routes (see the module docstring), to go before the MCP endpoint's, behind
    a guard made by :func:`probed`."""
    readiness = Readiness(ready)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(request: Request) -> Response:
        reason = await readiness.reason()
        if reason is None:
            return PlainTextResponse("ready\n")
        return PlainTextResponse(f"not ready: {reason}\n", status_code=503)

    async def scrape(request: Request) -> Response:
        body, content_type = metrics.exposition(request.headers.get("accept"))
        return Response(body, headers={"content-type": content_type})

    mine = {HEALTH_PATH: healthz, READY_PATH: readyz, METRICS_PATH: scrape}
    return [
        Route(path, mine[path], methods=["GET", "HEAD"]) for path in _served(tuple(mine), mcp_path)
    ]


async def upstream_ready(
    http: httpx2.AsyncClient, url: str, headers: Mapping[str, str]
) -> str | None:
    """Whether the upstream MCP server at ``url`` answers (see the module docstring); the
    gateway's own ``--header`` headers go with the probe, no client's."""
    import httpx2

    request = http.build_request(
        "GET", url, headers={**headers, "accept": ACCEPT_BOTH}, timeout=PROBE_TIMEOUT
    )
    try:
        # Streamed and closed at once: a server that opens an SSE stream would never end it.
        response = await http.send(request, stream=True)
    except httpx2.HTTPError as e:
        return f"the MCP server at {redact_url(url)} is unreachable: {type(e).__name__}"
    await response.aclose()
    if response.status_code >= 500:
        return f"the MCP server at {redact_url(url)} answered {response.status_code}"
    return None


async def command_ready(shared: SharedServer) -> str | None:
    """Whether the stdio server answers a ``ping`` on the shared process (started if it is
    not running)."""
    if not await shared.start():
        return "the MCP server could not be started"
    sent = await shared.send(b'{"jsonrpc":"2.0","id":"readyz","method":"ping"}\n', "readyz")
    if sent is None:
        return "the MCP server does not read its input"
    async with contextlib.aclosing(shared.events(*sent)) as messages:
        async for data in messages:
            try:
                msg = json.loads(data)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") == "readyz":
                # A result, or an error from a live process ("method not found" is one: the
                # server reads and writes); an error once it exited is the proxy's own.
                if "result" in msg or shared.alive:
                    return None
                break
    return "the MCP server exited before answering"
