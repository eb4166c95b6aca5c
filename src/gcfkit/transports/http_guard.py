"""Who may talk to an HTTP server of gcfkit: ``Host`` and ``Origin`` checks on every bind, an
optional client token, and the request-body bounds, in one ASGI middleware.

The MCP transport requires a server to validate ``Origin`` on every connection: a web page
can POST ``text/plain`` to any address without a CORS preflight, and a DNS-rebinding page
reaches a server under a name of its own. So, whatever address the server is bound to:

* ``Host`` must be a loopback name, the address the connection arrived at (an IP literal:
  what a client on another machine types), the bound host, or a name of the allow-list
  (``--allow-host``; ``*`` allows any). Otherwise 421.
* ``Origin``, when a browser sends one, must be a loopback origin, the server's own origin
  (``Host``), or one of the allow-list (``--allow-origin``; ``*`` allows any). Otherwise 403.
* A request a browser marks as made by another site's page (``Sec-Fetch-Site``) without
  an ``Origin`` to judge (an ``<img>``, a link, a no-cors fetch) is refused (403).
* A POST must be ``application/json`` (415 otherwise): what a page elsewhere cannot send
  without a preflight, which this server never approves.
* With a client token (``--client-token``), every request must carry
  ``Authorization: Bearer <token>`` (401 otherwise), except the ``open_paths``.
* A body over ``max_body_bytes`` is refused (413) by its ``Content-Length`` before a byte of
  it is read, or as soon as the bytes read pass the bound; one that takes longer than
  ``body_timeout`` gets 408.

Each refusal is counted in the guard's :class:`~gcfkit.transports.http_limits.Refusals`.

>>> guard = Guard("0.0.0.0")
>>> guard.refusal("POST", "/mcp", {"host": "evil.example:8765"}, "192.0.2.7")
(421, 'host', 'Invalid Host header (allow a name with --allow-host)')
>>> guard.refusal("POST", "/mcp", {"host": "192.0.2.7:8765", "content-type": "application/json",
...     "origin": "http://evil.example"}, "192.0.2.7")
(403, 'origin', 'Invalid Origin header (allow an origin with --allow-origin)')
>>> guard.refusal("POST", "/mcp", {"host": "192.0.2.7:8765", "content-type": "application/json"},
...     "192.0.2.7") is None
True
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .http import is_loopback
from .http_limits import DEFAULT_LIMITS, HttpLimits, Refusal, Refusals

__all__ = [
    "Guard",
    "GuardMiddleware",
    "guarded_app",
    "host_allowed",
    "host_name",
    "origin_allowed",
]

_ANY: Final = "*"
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})
#: ``Sec-Fetch-Site`` values of a request a page of another site made.
_ELSEWHERE: Final = frozenset({"cross-site", "same-site"})


def host_name(host: str) -> str:
    """The name of a ``Host`` value, its port and IPv6 brackets removed, lower case.

    >>> host_name("[::1]:8765"), host_name("Example.ORG:80"), host_name("10.0.0.1")
    ('::1', 'example.org', '10.0.0.1')
    """
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") > 1:
        return host  # a bare IPv6 address
    return host.partition(":")[0]


def _same_address(name: str, address: str | None) -> bool:
    if not address:
        return False
    try:
        return ipaddress.ip_address(name) == ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return False


def host_allowed(
    host: str | None, local: str | None, bound: str = "", allowed: Iterable[str] = ()
) -> bool:
    """Whether a request with ``Host: host``, arrived at address ``local``, may be served by
    a server bound to ``bound`` with the allow-list ``allowed`` (see the module doc). A
    request without ``Host`` (HTTP/1.0; no browser sends one) passes.

    >>> host_allowed("localhost:1", None), host_allowed("evil.example", "127.0.0.1")
    (True, False)
    >>> host_allowed("192.0.2.7:80", "192.0.2.7"), host_allowed("a.lan", "10.0.0.2", "", ["a.lan"])
    (True, True)
    """
    if host is None:
        return True
    name = host_name(host)
    names = {host_name(a) for a in allowed}
    if _ANY in names or (name and is_loopback(name)) or name in names:
        return True
    if name and host_name(bound) not in _WILDCARDS and name == host_name(bound):
        return True
    return _same_address(name, local)


def _origin_key(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def origin_allowed(origin: str | None, host: str | None, allowed: Iterable[str] = ()) -> bool:
    """Whether a request with ``Origin: origin`` (None: not from a browser page) may pass,
    sent to ``Host: host`` with the allow-list ``allowed`` (see the module doc).

    >>> origin_allowed(None, "x"), origin_allowed("http://localhost:6274", "10.0.0.2:8765")
    (True, True)
    >>> origin_allowed("http://evil.example", "10.0.0.2"), origin_allowed("null", "10.0.0.2")
    (False, False)
    >>> origin_allowed("https://app.example", "10.0.0.2", ["https://app.example/"])
    True
    """
    if origin is None:
        return True
    keys = {_origin_key(a) for a in allowed}
    if _ANY in keys or _origin_key(origin) in keys:
        return True
    parts = urlsplit(origin.strip())
    if not parts.scheme or not parts.hostname:
        return False  # "null" (a sandboxed frame, a file) or no origin at all
    if is_loopback(parts.hostname):
        return True
    return host is not None and parts.netloc.lower() == host.strip().lower()


@dataclasses.dataclass(frozen=True)
class Guard:
    """The rules one server applies to every request (see the module doc). ``bound``: the
    host it listens on; ``open_paths``: paths served without the client token (health
    checks)."""

    bound: str
    allowed_hosts: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()
    client_token: str | None = dataclasses.field(default=None, repr=False)
    open_paths: frozenset[str] = frozenset()
    limits: HttpLimits = DEFAULT_LIMITS
    refusals: Refusals = dataclasses.field(default_factory=Refusals)

    def refusal(
        self, method: str, path: str, headers: Mapping[str, str], local: str | None
    ) -> tuple[int, Refusal, str] | None:
        """(status, kind, text) refusing the request, or None when it may pass (its body
        is checked as it is read)."""
        host = headers.get("host")
        if not host_allowed(host, local, self.bound, self.allowed_hosts):
            return 421, "host", "Invalid Host header (allow a name with --allow-host)"
        origin = headers.get("origin")
        if not origin_allowed(origin, host, self.allowed_origins):
            return 403, "origin", "Invalid Origin header (allow an origin with --allow-origin)"
        if origin is None and headers.get("sec-fetch-site") in _ELSEWHERE:
            # A page elsewhere loading this URL without CORS (an image, a link, a no-cors
            # fetch): no MCP client does that, and it sends no Origin to judge.
            return 403, "origin", "a request from another site's page"
        if self.client_token is not None and path not in self.open_paths:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            expected = self.client_token.encode("utf-8")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode("utf-8"), expected
            ):
                return 401, "unauthorized", "a client token is required (Authorization: Bearer)"
        if method == "POST":
            ctype = headers.get("content-type", "").partition(";")[0].strip().lower()
            if ctype != "application/json":
                return 415, "content_type", "a POST must be application/json"
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limits.max_body_bytes:
            return 413, "body_too_large", self._too_large()
        return None

    def _too_large(self) -> str:
        return f"the request body is over {self.limits.max_body_bytes:,} bytes"


class _Refused(Exception):
    def __init__(self, status: int, kind: Refusal, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.kind = kind
        self.text = text


def _error_body(text: str) -> bytes:
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": text}}
    return json.dumps(error).encode("utf-8")


async def _respond(send: Send, status: int, text: str) -> None:
    headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="gcfkit"'))
    body = _error_body(text)
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    """Applies a :class:`Guard` in front of an ASGI app (see the module doc)."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        guard = self.guard
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        server = scope.get("server")
        local = server[0] if server else None
        refused = guard.refusal(scope["method"], scope["path"], headers, local)
        if refused is not None:
            guard.refusals.refuse(refused[1])
            await _respond(send, refused[0], refused[2])
            return
        limits = guard.limits
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.body_timeout
        state: dict[str, Any] = {"read": 0, "done": False, "started": False}

        async def bounded_receive() -> Message:
            if state["done"]:
                return await receive()  # the body is in: a wait for the disconnect
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise _Refused(408, "body_timeout", "the request body came too slowly") from None
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > limits.max_body_bytes:
                    raise _Refused(413, "body_too_large", guard._too_large())
                state["done"] = not message.get("more_body", False)
            else:
                state["done"] = True
            return message

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, watched_send)
        except _Refused as e:
            guard.refusals.refuse(e.kind)
            if not state["started"]:
                await _respond(send, e.status, e.text)


def guarded_app(
    endpoint: Callable[[Request], Awaitable[Response]],
    methods: Sequence[str],
    guard: Guard,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]],
    routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The one way an HTTP shell is put together: ``routes`` first (health, metrics: each
    behind the guard too), then ``endpoint`` for every other path and ``methods``, all behind
    :class:`GuardMiddleware`.

    >>> from starlette.testclient import TestClient
    >>> async def ok(request: Request) -> Response:
    ...     return Response("ok")
    >>> import contextlib
    >>> @contextlib.asynccontextmanager
    ... async def nothing(app: Starlette):
    ...     yield
    >>> app = guarded_app(ok, ["GET"], Guard("127.0.0.1"), nothing)
    >>> client = TestClient(app, base_url="http://127.0.0.1")
    >>> client.get("/x").text, client.get("/x", headers={"host": "evil.example"}).status_code
    ('ok', 421)
    """
    app = Starlette(
        routes=[*routes, Route("/{path:path}", endpoint, methods=list(methods))],
        middleware=[Middleware(GuardMiddleware, guard=guard)],
        lifespan=lifespan,
    )
    app.state.refusals = guard.refusals  # what the limits refused, by kind (metrics)
    return app
