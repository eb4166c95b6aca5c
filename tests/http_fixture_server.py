"""A real MCP server over Streamable HTTP for the HTTP tests: the official SDK's own server.

    python tests/http_fixture_server.py [--stdio]

It binds 127.0.0.1 on a free port and prints ``PORT <n>`` on stdout once it listens
(``--stdio``: the same server and tools on stdio instead, both protocol generations). One
process serves the SDK's server in every configuration the tests need, each at its own path
(one process to start instead of one per configuration keeps the suite fast):

* ``/stateful/mcp``: sessions, SSE responses;
* ``/stateless/mcp``: no sessions;
* ``/json/mcp``: sessions, JSON responses;
* ``/events/mcp``: sessions with an in-memory event store, so SSE streams are resumable;
* ``/token/mcp``: an OAuth protected resource (the SDK's bearer middleware: 401 with
  ``WWW-Authenticate`` and protected-resource metadata) that accepts the bearer token
  ``s3cret``;
* ``/oauth/mcp``: a protected resource whose authorization server is this process (the
  SDK's own: metadata, dynamic registration, ``/authorize`` that approves at once, ``/token``
  with PKCE), for the whole OAuth flow of the SDK client.

Tools:

* ``orders(limit)``: an order book as JSON text (what the proxy rewrites);
* ``steps(n)``: ``n`` progress notifications and ``n`` log messages, then a JSON result;
* ``echo(text)``: the text back, untouched;
* ``poll(n)``: one progress notification, then the server closes the SSE stream and the
  rest (``n`` more, then the result) waits for the client to resume with Last-Event-ID;
* ``die(after)``: ``after`` progress notifications, then the process exits mid-stream;
* ``whoami()``: the resource (RFC 8707) the caller's token was issued for (``/oauth/mcp``);
* ``hold(key)``: one progress notification, then it waits until cancelled;
  ``was_cancelled(key)`` says whether that happened (both bounded).

Nothing here synchronizes by sleeping. A tool that must know an event reached the client
before it goes on (``poll`` before closing the stream, ``die`` before exiting) waits until
the server has written that event to the connection (:class:`Wire`): TCP keeps the order,
so whatever the server does next reaches the client after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import sys
import time
import warnings
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage, EventStore
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import JSONRPCError, JSONRPCResponse
from pydantic import AnyHttpUrl
from starlette.types import Receive, Scope, Send

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import demo_server

TOKEN = "s3cret"
WAIT = 30.0  # every wait here is bounded: a broken client fails its test, it cannot hang us
_WIRE = "gcfkit.tests.wire"


class Wire:
    """What the server has written so far on one HTTP response (one per request)."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.changed = asyncio.Condition()

    async def note(self, body: bytes) -> None:
        async with self.changed:
            self.written += body
            self.changed.notify_all()

    async def sent(self, marker: str) -> None:
        """Return once ``marker`` is on the wire (the transport has the bytes)."""
        needle = marker.encode()
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: needle in self.written), WAIT)


def wire_of(ctx: Context) -> Wire:
    request: Any = ctx.request_context.request
    wire: Wire = request.scope[_WIRE]
    return wire


def watch_wire(app: Any) -> Any:
    """ASGI middleware giving each request a :class:`Wire` of its response body."""

    async def watched(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        wire = scope[_WIRE] = Wire()

        async def send_and_note(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and message.get("body"):
                await wire.note(message["body"])

        await app(scope, receive, send_and_note)

    return watched


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        if token != TOKEN:
            return None
        return AccessToken(token=token, client_id="tests", scopes=["mcp"])


class Approver:
    """The SDK's OAuth provider interface, in memory, approving every authorization: what a
    test needs of an authorization server (registration, PKCE codes, tokens that name the
    resource they were asked for)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.tokens: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = AuthorizationCode(
            code=secrets.token_hex(16),
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        token = AccessToken(
            token=secrets.token_hex(16),
            client_id=authorization_code.client_id,
            scopes=authorization_code.scopes,
            expires_at=int(time.time()) + 3600,
            resource=authorization_code.resource,
        )
        self.tokens[token.token] = token
        return OAuthToken(access_token=token.token, expires_in=3600, scope=" ".join(token.scopes))

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> None:
        return None

    async def exchange_refresh_token(self, *args: Any) -> OAuthToken:
        raise TokenError("invalid_grant", "no refresh tokens here")

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.tokens.get(token)

    async def revoke_token(self, token: Any) -> None:
        self.tokens.pop(getattr(token, "token", ""), None)


class MemoryEvents(EventStore):
    """Every event kept, so a client can resume any stream with Last-Event-ID.

    A request's stream is replayed only once it is complete (its response stored). The SDK
    registers a resumed stream for live events only after the replay, and an event stored
    in between is lost: that is the SDK server's own window, not the proxy's, and a test of
    the proxy's resumption must not depend on where its resuming GET lands in it.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.complete: dict[str, asyncio.Event] = {}

    def _complete(self, stream_id: str) -> asyncio.Event:
        return self.complete.setdefault(stream_id, asyncio.Event())

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = f"{stream_id}:{len(self.events)}"
        self.events.append((event_id, stream_id, message))
        if isinstance(message, (JSONRPCResponse, JSONRPCError)):
            self._complete(stream_id).set()
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        at = next((i for i, e in enumerate(self.events) if e[0] == last_event_id), None)
        if at is None:
            return None
        stream = self.events[at][1]
        if stream != GET_STREAM_KEY:
            await asyncio.wait_for(self._complete(stream).wait(), WAIT)
        for event_id, stream_id, message in self.events[at + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def build(name: str, base: str, approver: Approver) -> MCPServer:
    kwargs: dict[str, Any] = {}
    if name == "oauth":
        kwargs["auth_server_provider"] = approver
        kwargs["auth"] = AuthSettings(
            issuer_url=AnyHttpUrl(base),
            resource_server_url=AnyHttpUrl(f"{base}/oauth/mcp"),
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
            ),
            required_scopes=["mcp"],
            validate_token_resource=False,
        )
    if name == "token":
        kwargs["token_verifier"] = Verifier()
        kwargs["auth"] = AuthSettings(
            issuer_url=AnyHttpUrl("http://127.0.0.1:9/issuer"),  # never contacted
            resource_server_url=AnyHttpUrl(f"{base}/token/mcp"),
            required_scopes=["mcp"],
            validate_token_resource=False,
        )
    server = MCPServer(
        "http-fixture", instructions="Fixture server.", log_level="WARNING", **kwargs
    )

    @server.tool()
    def orders(limit: int = 20) -> str:
        """The order book."""
        return json.dumps(demo_server.orders(limit), indent=2)

    @server.tool()
    async def steps(n: int, ctx: Context) -> str:
        """Progress and logs, then a result."""
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
            await ctx.info(f"log {i + 1}")
        return json.dumps([{"step": i + 1, "ok": True} for i in range(n)])

    @server.tool()
    def echo(text: str) -> str:
        """The text back."""
        return text

    @server.tool()
    async def poll(n: int, ctx: Context) -> str:
        """Progress, then the server closes the stream (SEP-1699): the rest comes on resume."""
        marker = f"poll-{secrets.token_hex(8)}"
        await ctx.report_progress(1, n + 1, marker)
        await wire_of(ctx).sent(marker)  # the client holds an event id to resume from
        await ctx.close_sse_stream()
        for i in range(n):
            await ctx.report_progress(i + 2, n + 1)
        return json.dumps([{"round": i, "done": True} for i in range(n)])

    @server.tool()
    async def die(after: int, ctx: Context) -> str:
        """Dies mid-stream, once its progress notifications are on the wire."""
        marker = f"die-{secrets.token_hex(8)}"
        for i in range(after):
            await ctx.report_progress(i + 1, after + 1, f"{marker}-{i + 1}")
        if after:  # on stdio (no wire to watch) it dies at once
            await wire_of(ctx).sent(f"{marker}-{after}")
        os._exit(3)

    cancelled: dict[str, asyncio.Event] = {}

    @server.tool()
    async def hold(key: str, ctx: Context) -> str:
        """Reports progress, then waits until the client cancels it (bounded)."""
        event = cancelled.setdefault(key, asyncio.Event())
        await ctx.report_progress(1, 2)
        try:
            await asyncio.sleep(WAIT)  # the scenario is a call that never ends by itself
        except asyncio.CancelledError:
            event.set()
            raise
        return "not cancelled"

    @server.tool()
    async def was_cancelled(key: str) -> str:
        """Whether ``hold(key)`` was cancelled (waits for it, bounded)."""
        event = cancelled.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), WAIT)
        except asyncio.TimeoutError:
            return "not cancelled"
        return "cancelled"

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The resource the caller's token names."""
        headers = ctx.headers or {}
        token = approver.tokens.get(headers.get("authorization", "").removeprefix("Bearer "))
        return json.dumps({"resource": token.resource if token else None})

    return server


CONFIGS: dict[str, dict[str, Any]] = {
    "stateful": {},
    "stateless": {"stateless_http": True},
    "json": {"json_response": True},
    "events": {"event_store": MemoryEvents, "retry_interval": 100},
    "token": {},
    "oauth": {},
}
#: The authorization server's own endpoints (RFC 8414 metadata at the issuer, the root).
AS_PATHS = ("/.well-known/oauth-authorization-server", "/authorize", "/token", "/register")


def app_for(port: int) -> Any:
    base = f"http://127.0.0.1:{port}"
    security = TransportSecuritySettings(
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
        allowed_origins=[base, f"http://localhost:{port}"],
    )
    servers: list[MCPServer] = []
    routes: dict[str, Any] = {}
    approver = Approver()
    for name, options in CONFIGS.items():
        server = build(name, base, approver)
        options = dict(options)
        if "event_store" in options:
            options["event_store"] = options["event_store"]()
        app = server.streamable_http_app(
            streamable_http_path=f"/{name}/mcp", transport_security=security, **options
        )
        servers.append(server)
        routes[f"/{name}/mcp"] = app
        routes[f"/.well-known/oauth-protected-resource/{name}/mcp"] = app
        if name == "oauth":
            routes.update(dict.fromkeys(AS_PATHS, app))

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            assert message["type"] == "lifespan.startup"
            async with lifespan():
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        app = routes.get(scope["path"].rstrip("/"))
        if app is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"Not Found"})
            return
        await app(scope, receive, send)

    return watch_wire(dispatch)


def main() -> None:
    warnings.simplefilter("ignore")  # the SDK warns about the deprecated logging it serves
    if sys.argv[1:] == ["--stdio"]:
        build("stdio", "", Approver()).run("stdio")
        return
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections accepted from such a
    # socket; without it each SSE event waits ~40 ms on Nagle and delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # before PORT is printed: a client may connect at once
    port = sock.getsockname()[1]
    config = uvicorn.Config(app_for(port), log_level="warning", lifespan="on")
    print(f"PORT {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
