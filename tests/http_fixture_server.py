"""A real MCP server over Streamable HTTP for the HTTP tests: the official SDK's own server.

    python tests/http_fixture_server.py [--stateless] [--json] [--token T] [--events]

It binds 127.0.0.1 on a free port and prints ``PORT <n>`` on stdout once it listens. Tools:

* ``orders(limit)``: an order book as JSON text (what the proxy rewrites);
* ``steps(n)``: ``n`` progress notifications and ``n`` log messages, then a JSON result;
* ``echo(text)``: the text back, untouched;
* ``poll(n)``: one progress notification, then the server closes the SSE stream and the
  rest (``n`` more, then the result) waits for the client to resume with Last-Event-ID;
* ``die(after)``: sends ``after`` progress notifications, then the process exits mid-stream.

``--token T`` makes it an OAuth protected resource (the SDK's bearer middleware: 401 with
``WWW-Authenticate`` and protected-resource metadata) that accepts the bearer token ``T``;
``--events`` keeps an in-memory event store, so SSE streams are resumable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import warnings
from typing import Any

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventMessage, EventStore
from mcp.server.transport_security import TransportSecuritySettings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import demo_server


class Verifier:
    def __init__(self, token: str) -> None:
        self.token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != self.token:
            return None
        return AccessToken(token=token, client_id="tests", scopes=["mcp"])


class MemoryEvents(EventStore):
    """Every event kept, so a client can resume any stream with Last-Event-ID."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = f"{stream_id}:{len(self.events)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        at = next((i for i, e in enumerate(self.events) if e[0] == last_event_id), None)
        if at is None:
            return None
        stream = self.events[at][1]
        for event_id, stream_id, message in self.events[at + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def build(token: str | None, port: int) -> MCPServer:
    kwargs: dict[str, Any] = {}
    if token is not None:
        base = f"http://127.0.0.1:{port}"
        kwargs["token_verifier"] = Verifier(token)
        kwargs["auth"] = AuthSettings(
            issuer_url="http://127.0.0.1:9/issuer",  # never contacted: tokens come by --header
            resource_server_url=f"{base}/mcp",
            required_scopes=["mcp"],
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
        await ctx.report_progress(1, n + 1)
        await asyncio.sleep(0.1)
        await ctx.close_sse_stream()
        for i in range(n):
            await asyncio.sleep(0.05)
            await ctx.report_progress(i + 2, n + 1)
        return json.dumps([{"round": i, "done": True} for i in range(n)])

    @server.tool()
    async def die(after: int, ctx: Context) -> str:
        """Dies mid-stream."""
        for i in range(after):
            await ctx.report_progress(i + 1, after + 1)
        await asyncio.sleep(0.2)  # the events above reach the wire first
        os._exit(3)

    return server


def main() -> None:
    warnings.simplefilter("ignore")  # the SDK warns about the deprecated logging it serves
    parser = argparse.ArgumentParser()
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--token")
    parser.add_argument("--events", action="store_true")
    args = parser.parse_args()
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections accepted from such a
    # socket; without it each SSE event waits ~40 ms on Nagle and delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # before PORT is printed: a client may connect at once
    port = sock.getsockname()[1]
    server = build(args.token, port)
    app = server.streamable_http_app(
        json_response=args.json,
        stateless_http=args.stateless,
        event_store=MemoryEvents() if args.events else None,
        retry_interval=100 if args.events else None,
        transport_security=TransportSecuritySettings(
            allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
            allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
        ),
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {port}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
