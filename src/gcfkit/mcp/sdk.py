"""What gcfkit's server helpers read from the MCP SDK about a request: its context, its
connection, the tool it calls. Every reach into the SDK's objects is here, so that an SDK
release that moves one breaks one module (and its test, tests/test_mcp_sdk.py).
"""

from __future__ import annotations

from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["ToolContext", "connection_of", "request_context", "tool_name"]

#: What a tool function may be handed: MCPServer's Context, the low-level server's request
#: context, or nothing (a direct call).
ToolContext = Context[Any, Any] | ServerRequestContext[Any, Any] | None


def request_context(ctx: ToolContext) -> ServerRequestContext[Any, Any] | None:
    """The SDK's context of the request ``ctx`` belongs to (None outside a request).

    >>> request_context(None) is None
    True
    """
    if ctx is None:
        return None
    if isinstance(ctx, ServerRequestContext):
        return ctx
    try:
        return ctx.request_context
    except ValueError:  # a Context built outside a request
        return None


def connection_of(ctx: ToolContext) -> Connection | None:
    """The MCP connection the request ``ctx`` belongs to, when it outlives the request (a
    handshake-era connection: stdio, or streamable HTTP with a session id); None otherwise.

    The one place gcfkit reads a private attribute of the SDK: MCPServer's ``Context`` does
    not expose the ``Connection``, the ``ServerSession`` holds it as ``_connection``. It is
    the SDK's own per-client state owner (``Connection.state``, ``Connection.exit_stack``).
    tests/test_mcp_sdk.py fails when an SDK release moves it.

    >>> connection_of(None) is None
    True
    """
    rc = request_context(ctx)
    if rc is None:
        return None
    conn = getattr(rc.session, "_connection", None)
    if not isinstance(conn, Connection):
        return None
    if conn.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # A 2026-07-28 connection lives for one request: nothing is "already sent" on it.
        return None
    return conn


def tool_name(ctx: ToolContext) -> str | None:
    """The name of the tool the request ``ctx`` calls (None outside a tools/call)."""
    rc = request_context(ctx)
    params = rc.params if rc is not None else None
    name = params.get("name") if params is not None else None
    return name if isinstance(name, str) else None
