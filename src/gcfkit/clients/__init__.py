"""Editing MCP client configs (Claude Code, Cursor, Claude Desktop) to put stdio servers
behind ``gcfkit proxy``, and restoring them; see :mod:`gcfkit.clients.install`."""
