"""Editing MCP client configs (Claude Code, Cursor, Claude Desktop) to put stdio servers
behind ``gcfkit proxy``, and restoring them.

:mod:`.locations` knows where configs live, :mod:`.jsondoc` edits a JSON file in its own
style, :mod:`.entries` wraps and unwraps one server entry, :mod:`.install` plans and applies
the edits (backups, atomic writes, the sidecar of originals) and :mod:`.status` reports
what is wrapped where.
"""

from __future__ import annotations

from .install import install_mcp, uninstall_mcp
from .status import mcp_status

__all__ = ["install_mcp", "mcp_status", "uninstall_mcp"]
