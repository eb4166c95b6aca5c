"""The ``gcfkit ui`` web application (Starlette): the page, its assets and its JSON API.

Everything the page loads comes from this package (``static/``): no CDN, no font service, no
analytics. The API:

* ``GET /api/info``: version, ledger path, whether token counts are exact, whether the
  extensions are measured (always true: the key stays for the API's readers), the playground's
  input limit;
* ``GET /api/examples`` and ``GET /api/examples/{id}``: the bundled examples;
* ``POST /api/playground`` with ``{"text": "..."}``: :func:`gcfkit.ui.playground.analyze`
  (400 with ``{"error": {"code", "message", "line"}}`` for input it cannot measure);
* ``GET /api/savings?since=7d&width=1140``: the ledger summarised by
  :mod:`gcfkit.measure.savings` (the numbers of ``gcfkit stats --json``), its timeline, what
  each decision means, and the charts as inline SVG, the timeline drawn ``width`` pixels wide
  (the page asks for the width it has, so a phone's chart has labels it can read).

Requests are accepted only for the hosts the server was started for (loopback names by
default: a DNS-rebinding page cannot talk to it), and a POST must be JSON from the page's own
origin. Responses carry a Content-Security-Policy that allows nothing from elsewhere.

>>> from starlette.testclient import TestClient
>>> client = TestClient(create_app(ledger=None), base_url="http://127.0.0.1")
>>> client.get("/api/info").json()["version"] != ""
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__, tokens
from ..errors import ConfigError
from ..ledger import parse_since, read_entries
from ..measure.charts import before_after_bars, timeline_chart
from ..measure.savings import (
    describe_decision,
    is_left_alone,
    summarize,
    summary_to_json,
    timeline,
    timeline_to_json,
)
from ..paths import default_ledger_path
from ..transports.http_guard import host_allowed
from .playground import (
    MAX_INPUT_BYTES,
    PlaygroundError,
    analyze,
    example_text,
    examples,
)

__all__ = ["LOOPBACK_HOSTS", "create_app", "savings_payload"]

STATIC: Final = Path(__file__).resolve().parent / "static"
#: The Host names a loopback-bound server answers to.
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]", "::1")

_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class _SecurityHeaders:
    """Adds the page's security headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cache-control", b"no-store"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _error(status: int, code: str, message: str, line: int | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "line": line}}, status)


def create_app(
    *,
    ledger: Path | str | None = None,
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    bound: str = "127.0.0.1",
) -> Starlette:
    """The application; ``ledger`` is the savings ledger the dashboard reads (default: the one
    the proxy writes, :func:`gcfkit.paths.default_ledger_path`). ``bound``: the host the
    server listens on; requests are served for a loopback ``Host``, the address they arrived
    at, ``bound`` itself and ``allowed_hosts``
    (:func:`~gcfkit.transports.http_guard.host_allowed`, the proxy's rule)."""
    ledger_path = Path(ledger) if ledger is not None else default_ledger_path()

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def info(request: Request) -> Response:
        return JSONResponse(
            {
                "version": __version__,
                "ledger": str(ledger_path),
                "token_counts": {e: tokens.method(e) for e in tokens.ENCODINGS},
                "extensions": True,
                "max_input_bytes": MAX_INPUT_BYTES,
            }
        )

    async def example_list(request: Request) -> Response:
        return JSONResponse(
            [{"id": e.id, "title": e.title, "source": e.source} for e in examples()]
        )

    async def example(request: Request) -> Response:
        text = example_text(request.path_params["id"])
        if text is None:
            return _error(404, "not_found", "no such example")
        return JSONResponse({"id": request.path_params["id"], "text": text})

    async def playground(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _error(415, "unsupported_media_type", 'send JSON: {"text": "..."}')
        body = await request.body()
        if len(body) > 2 * MAX_INPUT_BYTES + 1024:
            return _error(
                413, "too_large", f"the playground measures up to {MAX_INPUT_BYTES:,} bytes"
            )
        try:
            payload = json.loads(body)
        except ValueError:
            return _error(400, "bad_request", "the request body is not JSON")
        text = payload.get("text") if isinstance(payload, dict) else None
        if not isinstance(text, str):
            return _error(400, "bad_request", 'expected {"text": "..."}')
        try:
            # Measuring a large value takes a while: off the event loop, so the page stays live.
            return JSONResponse(await run_in_threadpool(analyze, text))
        except PlaygroundError as e:
            return JSONResponse({"error": e.to_dict()}, 400)
        except Exception as e:  # the page shows a message, never a bare 500
            return _error(500, "internal_error", f"{type(e).__name__}: {e}")

    async def savings(request: Request) -> Response:
        since_text = request.query_params.get("since") or ""
        width = request.query_params.get("width") or ""
        try:
            chart_width = int(width) if width else _CHART_WIDTH
        except ValueError:
            return _error(400, "invalid_option", f"width={width!r}: expected a number of pixels")
        try:
            # A long ledger takes a moment to read and sum: off the event loop.
            payload = await run_in_threadpool(
                savings_payload, ledger_path, since_text, chart_width=chart_width
            )
            return JSONResponse(payload)
        except ConfigError as e:
            return _error(400, e.code, e.detail)

    routes = [
        Route("/", index),
        Route("/api/info", info),
        Route("/api/examples", example_list),
        Route("/api/examples/{id}", example),
        Route("/api/playground", playground, methods=["POST"]),
        Route("/api/savings", savings),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [
        Middleware(_HostCheck, bound=bound, allowed=allowed_hosts),
        Middleware(_SameOrigin),
        Middleware(_SecurityHeaders),
    ]
    return Starlette(routes=routes, middleware=middleware)


#: The timeline's width on a wide screen, and the narrowest it is drawn (a phone's column).
_CHART_WIDTH: Final = 1140
_CHART_MIN_WIDTH: Final = 300


def savings_payload(
    ledger_path: Path, since_text: str = "", *, chart_width: int = _CHART_WIDTH
) -> dict[str, Any]:
    """What ``GET /api/savings`` answers: the ledger (entries at or after ``since_text``, an
    age like ``7d`` or an ISO date; ``all`` or empty for everything) summarised by
    :mod:`gcfkit.measure.savings`, its timeline, the decisions explained, the charts as SVG.
    Raises :class:`~gcfkit.errors.ConfigError` for a bad ``since_text`` or an unreadable ledger.

    >>> import tempfile, pathlib
    >>> empty = savings_payload(pathlib.Path(tempfile.mkdtemp()) / "none.jsonl")
    >>> empty["summary"]["total"]["calls"], empty["timeline"]["buckets"]
    (0, [])
    """
    since = parse_since(since_text) if since_text and since_text != "all" else None
    entries = read_entries(ledger_path, since=since)
    summary = summarize(entries, corrupt=entries.corrupt)
    period, buckets = timeline(entries)
    decisions = [
        {
            "decision": word,
            "calls": n,
            "left_alone": is_left_alone(word),
            "meaning": describe_decision(word),
        }
        for word, n in sorted(summary.total.decisions.items(), key=lambda kv: (-kv[1], kv[0]))
    ]

    # Axis labels: month-day (and the hour); the page shows the year in its range.
    def label(start: str) -> str:
        return start[5:10] + (f" {start[11:13]}h" if period == "hour" else "")

    points = [(label(b.start), b.totals.tokens_before, b.totals.tokens_after) for b in buckets]
    server_rows = [(n, t.tokens_before, t.tokens_after) for n, t in summary.servers.items()]
    return {
        "ledger": str(ledger_path),
        "since": since.isoformat() if since is not None else None,
        "summary": summary_to_json(summary),
        "timeline": timeline_to_json(period, buckets),
        "decisions": decisions,
        "charts": {
            "timeline": timeline_chart(
                f"Tokens per {period}",
                points,
                width=min(max(chart_width, _CHART_MIN_WIDTH), _CHART_WIDTH),
                height=240,
            ),
            "servers": before_after_bars(
                "Tokens per server", server_rows, width=min(max(chart_width, _CHART_MIN_WIDTH), 540)
            ),
        },
    }


class _HostCheck:
    """Refuses (400) a request whose ``Host`` this server was not started for: what a
    DNS-rebinding page sends."""

    def __init__(self, app: ASGIApp, bound: str, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.bound = bound
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            raw = dict(scope.get("headers", [])).get(b"host")
            server = scope.get("server")
            local = str(server[0]) if server else None
            host = raw.decode("latin-1") if raw is not None else ""
            if not host_allowed(host, local, self.bound, self.allowed):
                response = Response("Invalid host header", status_code=400)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _SameOrigin:
    """Refuses a state-changing request whose ``Origin`` is another site's (a page elsewhere
    posting to the loopback server)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD", "OPTIONS"):
            headers = dict(scope.get("headers", []))
            origin = headers.get(b"origin")
            host = headers.get(b"host", b"")
            if origin is not None and origin.split(b"://", 1)[-1] != host:
                response = _error(403, "forbidden", "requests from another origin are refused")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
