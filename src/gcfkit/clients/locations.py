"""Where MCP clients keep their server configs, and the ``mcpServers`` object inside one.

================  =======  ====================================================================
client            scope    file and place
================  =======  ====================================================================
claude-code       user     ``~/.claude.json`` (or ``$CLAUDE_CONFIG_DIR/.claude.json``), top level
claude-code       local    the same file, ``projects[<current dir>].mcpServers``
claude-code       project  ``./.mcp.json``
cursor            user     ``~/.cursor/mcp.json``
cursor            project  ``./.cursor/mcp.json``
claude-desktop    user     ``claude_desktop_config.json``: macOS ``~/Library/Application
                           Support/Claude``, Windows ``%APPDATA%\\Claude``, Linux
                           ``$XDG_CONFIG_HOME/Claude`` (default ``~/.config/Claude``)
================  =======  ====================================================================
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .jsondoc import JsonDocument, JsonObject, malformed

__all__ = [
    "CLIENTS",
    "SCOPES",
    "ConfigLocation",
    "claude_desktop_config_path",
    "container_keys",
    "known_locations",
    "locations_for_file",
    "select_locations",
    "servers_of",
]

CLIENTS: tuple[str, ...] = ("claude-code", "cursor", "claude-desktop")
SCOPES: tuple[str, ...] = ("user", "project", "local")


@dataclass(frozen=True)
class ConfigLocation:
    """One ``mcpServers`` object: a client, a scope, a file, and for Claude Code's local scope
    the ``projects`` key (the project's absolute path) it sits under.

    >>> ConfigLocation("cursor", "user", Path("/h/.cursor/mcp.json")).describe()
    'cursor (user) /h/.cursor/mcp.json'
    """

    client: str
    scope: str
    path: Path
    project: str | None = None

    def describe(self) -> str:
        """``client (scope) path``, plus the project for Claude Code's local scope."""
        where = f"{self.client} ({self.scope}) {self.path}"
        return f"{where} [project {self.project}]" if self.project is not None else where


def claude_desktop_config_path(
    home: Path, env: Mapping[str, str] | None = None, platform: str | None = None
) -> Path:
    """Claude Desktop's ``claude_desktop_config.json`` for an OS (``sys.platform`` values).

    >>> claude_desktop_config_path(Path("/Users/u"), {}, "darwin").as_posix()
    '/Users/u/Library/Application Support/Claude/claude_desktop_config.json'
    >>> claude_desktop_config_path(Path("/home/u"), {}, "linux").as_posix()
    '/home/u/.config/Claude/claude_desktop_config.json'
    """
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    name = "claude_desktop_config.json"
    if platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / name
    if platform.startswith(("win", "cygwin")):
        appdata = env.get("APPDATA")
        base = Path(appdata) if appdata else home / "AppData" / "Roaming"
        return base / "Claude" / name
    xdg = env.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".config"
    return base / "Claude" / name


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME") or env.get("USERPROFILE")
    return Path(home) if home else Path.home()


def known_locations(
    *,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[ConfigLocation]:
    """Every config location gcfkit knows, for a home and a current directory.

    ``home`` defaults to ``HOME`` from ``env`` (default ``os.environ``), ``cwd`` to the
    current directory. Files are not opened here; missing ones are simply skipped later.

    >>> locs = known_locations(home=Path("/h"), cwd=Path("/p"), env={}, platform="linux")
    >>> [(loc.client, loc.scope) for loc in locs][:3]
    [('claude-code', 'user'), ('claude-code', 'local'), ('claude-code', 'project')]
    """
    env = os.environ if env is None else env
    home = _home(env) if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    project = os.path.abspath(cwd)
    claude_dir = env.get("CLAUDE_CONFIG_DIR")
    claude_json = Path(claude_dir) / ".claude.json" if claude_dir else home / ".claude.json"
    return [
        ConfigLocation("claude-code", "user", claude_json),
        ConfigLocation("claude-code", "local", claude_json, project),
        ConfigLocation("claude-code", "project", Path(project) / ".mcp.json"),
        ConfigLocation("cursor", "user", home / ".cursor" / "mcp.json"),
        ConfigLocation("cursor", "project", Path(project) / ".cursor" / "mcp.json"),
        ConfigLocation("claude-desktop", "user", claude_desktop_config_path(home, env, platform)),
    ]


def locations_for_file(
    path: Path, *, client: str | None = None, cwd: Path | None = None
) -> list[ConfigLocation]:
    """The locations inside one explicitly named config file (``--config``).

    Its top-level ``mcpServers``, and ``projects[<cwd>].mcpServers`` as Claude Code's local
    scope. The client is ``client`` if given, else guessed from the file name (``custom``
    when unknown).

    >>> [loc.scope for loc in locations_for_file(Path("/p/.mcp.json"), cwd=Path("/p"))]
    ['project', 'local']
    """
    cwd = Path.cwd() if cwd is None else cwd
    name = path.name
    if client is None or client == "all":
        if name in (".claude.json", ".mcp.json"):
            client = "claude-code"
        elif name == "claude_desktop_config.json":
            client = "claude-desktop"
        elif name == "mcp.json" and path.parent.name == ".cursor":
            client = "cursor"
        else:
            client = "custom"
    top_scope = "project" if name == ".mcp.json" else "user"
    return [
        ConfigLocation(client, top_scope, path),
        ConfigLocation(client, "local", path, os.path.abspath(cwd)),
    ]


def select_locations(
    *,
    client: str | None = None,
    scope: str | None = None,
    config: Path | str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[ConfigLocation]:
    """The locations the ``--client``/``--scope``/``--config`` options pick.

    >>> locs = select_locations(client="cursor", home=Path("/h"), cwd=Path("/p"), env={})
    >>> [loc.scope for loc in locs]
    ['user', 'project']
    """
    if client is not None and client != "all" and client not in CLIENTS:
        raise ConfigError(
            "invalid_option", f"--client {client!r}: expected one of {', '.join(CLIENTS)}, all"
        )
    if scope is not None and scope not in SCOPES:
        raise ConfigError(
            "invalid_option", f"--scope {scope!r}: expected one of {', '.join(SCOPES)}"
        )
    if config is not None:
        locations = locations_for_file(Path(config), client=client, cwd=cwd)
    else:
        locations = known_locations(home=home, cwd=cwd, env=env, platform=platform)
        if client is not None and client != "all":
            locations = [loc for loc in locations if loc.client == client]
    if scope is not None:
        locations = [loc for loc in locations if loc.scope == scope]
    return locations


def container_keys(doc: JsonDocument, location: ConfigLocation) -> tuple[str, ...] | None:
    """The key path of the location's ``mcpServers`` in this file, or None if absent."""
    if location.project is None:
        return ("mcpServers",)
    projects = doc.data.get("projects")
    if projects is None:
        return None
    if not isinstance(projects, dict):
        raise malformed(doc.path, "'projects' is not an object")
    candidates = [location.project, os.path.realpath(location.project)]
    candidates.append(Path(location.project).as_posix())
    for key in candidates:
        if key in projects:
            return ("projects", key, "mcpServers")
    return None


def servers_of(
    doc: JsonDocument, location: ConfigLocation, data: JsonObject | None = None
) -> JsonObject:
    """The location's ``mcpServers`` object ({} if absent) in ``data`` (default: the document's)."""
    keys = container_keys(doc, location)
    node: Any = doc.data if data is None else data
    if keys is None:
        return {}
    for i, key in enumerate(keys):
        if not isinstance(node, dict):
            raise malformed(doc.path, f"{_dotted(keys[:i])} is not an object")
        node = node.get(key)
        if node is None:
            return {}
    if not isinstance(node, dict):
        raise malformed(doc.path, f"{_dotted(keys)} is not an object")
    return node


def _dotted(keys: Sequence[str]) -> str:
    return "".join(f"[{json.dumps(k)}]" for k in keys) or "the top level"
