"""Where MCP clients keep their server configs, and the servers object inside one.

Which clients, which files and which key: :mod:`.known` (one table for every client). Here:
the :class:`ConfigLocation` those make, the selection by ``--client``, ``--scope`` and
``--config``, reading a config of either format (:func:`load_config`) and finding the
servers object in it (:func:`servers_of`).
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
from .known import (
    CLIENTS,
    KNOWN,
    Client,
    claude_desktop_config_path,
    client_named,
    guess_client,
    home_of,
)
from .shapes import STANDARD
from .tomldoc import TomlDocument

__all__ = [
    "CLIENTS",
    "SCOPES",
    "ConfigDocument",
    "ConfigLocation",
    "claude_desktop_config_path",
    "container_keys",
    "known_locations",
    "load_config",
    "locations_for_file",
    "select_locations",
    "servers_of",
]

#: A config file as read: JSON or TOML, edited in its own style either way.
ConfigDocument = JsonDocument | TomlDocument

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

    @property
    def kind(self) -> Client:
        """The client this location belongs to (its entry shape and servers key)."""
        return client_named(self.client)


def load_config(path: Path, *, jsonc: bool = False) -> ConfigDocument:
    """Read a config file: TOML for a ``.toml`` file, else JSON, with comments and trailing
    commas for a client that reads them (``jsonc``) or a ``.jsonc`` file.

    >>> load_config(Path("/nonexistent/config.toml")).data
    {}
    """
    if path.suffix == ".toml":
        return TomlDocument.load(path)
    return JsonDocument.load(path, jsonc=jsonc or path.suffix == ".jsonc")


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
    home = home_of(env) if home is None else home
    project = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    platform = sys.platform if platform is None else platform
    return [
        ConfigLocation(client.name, scope, path, nested)
        for client in KNOWN
        for scope, path, nested in client.files(home, project, env, platform)
    ]


def locations_for_file(
    path: Path, *, client: str | None = None, cwd: Path | None = None
) -> list[ConfigLocation]:
    """The locations inside one explicitly named config file (``--config``).

    Its top-level servers object, and for a file with ``mcpServers`` also
    ``projects[<cwd>].mcpServers`` as Claude Code's local scope. The client is ``client`` if
    given, else guessed from the file name (``custom`` when unknown).

    >>> [loc.scope for loc in locations_for_file(Path("/p/.mcp.json"), cwd=Path("/p"))]
    ['project', 'local']
    >>> [loc.client for loc in locations_for_file(Path("/p/.codex/config.toml"))]
    ['codex']
    """
    cwd = Path.cwd() if cwd is None else cwd
    if client is None or client == "all":
        client = guess_client(path)
    top_scope = "project" if path.name == ".mcp.json" else "user"
    top = ConfigLocation(client, top_scope, path)
    if top.kind.container != ("mcpServers",) or top.kind.shape is not STANDARD:
        return [top]
    return [top, ConfigLocation(client, "local", path, os.path.abspath(cwd))]


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


def container_keys(doc: ConfigDocument, location: ConfigLocation) -> tuple[str, ...] | None:
    """The key path of the location's servers object in this file, or None if absent."""
    if location.project is None:
        return location.kind.container_in(doc.data)
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
    doc: ConfigDocument, location: ConfigLocation, data: JsonObject | None = None
) -> JsonObject:
    """The location's servers object ({} if absent) in ``data`` (default: the document's)."""
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
