"""gcfkit.mcp.sdk against the installed MCP SDK: the one private attribute the server helpers
read (``ServerSession._connection``) is still where they read it. When an SDK release moves
it, per-connection state (graph sessions, delta bases, named results) silently stops: every
answer would be a full one. This test fails instead.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context, MCPServer

from gcfkit.mcp.sdk import connection_of, request_context, tool_name


def test_a_handshake_era_request_has_its_connection_and_a_stateless_one_none() -> None:
    seen: list[tuple[Any, Any, str | None]] = []
    srv = MCPServer("sdk")

    @srv.tool()
    def probe(ctx: Context) -> str:
        seen.append((request_context(ctx), connection_of(ctx), tool_name(ctx)))
        return "ok"

    async def calls() -> None:
        with anyio.fail_after(20):
            async with Client(InMemoryTransport(srv), mode="legacy") as c:
                await c.call_tool("probe", {})
                await c.call_tool("probe", {})
            async with Client(srv) as c:  # the stateless 2026-07-28 protocol
                await c.call_tool("probe", {})

    anyio.run(calls)
    (rc1, first, name), (_, again, _), (rc3, stateless, _) = seen
    assert rc1 is not None and rc3 is not None and name == "probe"
    assert isinstance(first, Connection) and again is first  # one connection, both calls
    assert stateless is None  # a connection that lives for one request holds no state
