"""Editing MCP client configs (Claude Code, Cursor, Claude Desktop, Codex, VS Code, Gemini CLI,
OpenCode) to put servers behind ``gcfkit proxy``, and restoring them.

:mod:`.known` is the table of clients (one row each: name, files, servers key, entry shape),
:mod:`.locations` selects config locations and reads a file, :mod:`.jsondoc` edits a JSON
file and :mod:`.tomldoc` a TOML one in its own style, :mod:`.shapes` renames a client's entry
into the common shape and back, :mod:`.entries` wraps and unwraps one entry of that shape,
:mod:`.install` plans and applies the edits (backups, atomic writes, the sidecar of
originals) and :mod:`.status` reports what is wrapped where.
"""

from __future__ import annotations

from .install import install_mcp, uninstall_mcp
from .status import mcp_status

__all__ = ["install_mcp", "mcp_status", "uninstall_mcp"]
