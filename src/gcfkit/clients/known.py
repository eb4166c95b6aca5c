"""The MCP clients gcfkit knows: each one's name, config files, where its servers sit in
them and the shape of its entries, in one table (:data:`KNOWN`).

==============  =======  ===================================================  ================
client          scope    file                                                 servers under
==============  =======  ===================================================  ================
claude-code     user     ``~/.claude.json`` (or in ``$CLAUDE_CONFIG_DIR``)    ``mcpServers``
claude-code     local    the same file, for the current directory             ``projects[dir]``
claude-code     project  ``./.mcp.json``                                      ``mcpServers``
cursor          user     ``~/.cursor/mcp.json``                               ``mcpServers``
cursor          project  ``./.cursor/mcp.json``                               ``mcpServers``
claude-desktop  user     ``<app config>/Claude/claude_desktop_config.json``   ``mcpServers``
codex           user     ``~/.codex/config.toml`` (or in ``$CODEX_HOME``)     ``mcp_servers``
codex           project  ``./.codex/config.toml``                             ``mcp_servers``
vscode          user     ``<app config>/Code/User/mcp.json``                  ``servers``
vscode          project  ``./.vscode/mcp.json``                               ``servers``
gemini          user     ``~/.gemini/settings.json``                          ``mcpServers``
gemini          project  ``./.gemini/settings.json``                          ``mcpServers``
opencode        user     ``$XDG_CONFIG_HOME/opencode/opencode.json(c)``       ``mcp``
opencode        project  ``./opencode.json`` (or ``./opencode.jsonc``)        ``mcp``
==============  =======  ===================================================  ================

``<app config>`` is ``~/Library/Application Support`` on macOS, ``%APPDATA%`` on Windows and
``$XDG_CONFIG_HOME`` (default ``~/.config``) elsewhere; Claude Code's local scope is
``projects[<current dir>].mcpServers``, OpenCode's newer layout ``mcp.servers``. A client's
identity is its :attr:`Client.name`: what ``--client`` takes and what
:class:`~.locations.ConfigLocation` carries.

>>> client_named("vscode").container
('servers',)
>>> guess_client(Path("/h/.codex/config.toml"))
'codex'
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .shapes import CODEX, GEMINI, OPENCODE, STANDARD, EntryShape

__all__ = [
    "CLIENTS",
    "KNOWN",
    "Client",
    "FileSpot",
    "app_config_dir",
    "claude_desktop_config_path",
    "client_named",
    "guess_client",
    "home_of",
]

#: One config file of a client: its scope and path (the project for a nested scope).
FileSpot = tuple[str, Path, "str | None"]


@dataclass(frozen=True)
class Client:
    """One MCP client: its ``name`` (``--client``), a ``label`` for people, the key path of
    its servers object in a config file (``container``; OpenCode's newer ``mcp.servers`` is
    found by :meth:`container_in`), the :class:`~.shapes.EntryShape` of its entries, its
    config files (``files(home, project, env, platform)``), whether a file is its
    (``owns(path)``, for ``--config``) and whether it reads comments and trailing commas in
    its JSON (``jsonc``)."""

    name: str
    label: str
    container: tuple[str, ...]
    shape: EntryShape
    files: Callable[[Path, Path, Mapping[str, str], str], list[FileSpot]]
    owns: Callable[[Path], bool]
    jsonc: bool = False

    def container_in(self, data: Mapping[str, Any]) -> tuple[str, ...]:
        """The key path of the servers object in a file's ``data``.

        >>> client_named("opencode").container_in({"mcp": {"servers": {"x": {}}}})
        ('mcp', 'servers')
        >>> client_named("opencode").container_in({"mcp": {"x": {"type": "local"}}})
        ('mcp',)
        """
        if self.shape is OPENCODE:
            mcp = data.get("mcp")
            inner = mcp.get("servers") if isinstance(mcp, dict) else None
            # OpenCode 2 nests the servers under mcp.servers; a server named "servers" in the
            # older layout is an entry (it has a type or a command), not a set of entries.
            if isinstance(inner, dict) and not {"type", "command", "url"} & inner.keys():
                return ("mcp", "servers")
        return self.container


def home_of(env: Mapping[str, str]) -> Path:
    """The home directory: ``HOME`` (or ``USERPROFILE``) from ``env``, else the user's."""
    home = env.get("HOME") or env.get("USERPROFILE")
    return Path(home) if home else Path.home()


def app_config_dir(home: Path, env: Mapping[str, str], platform: str) -> Path:
    """Where desktop apps keep their settings (``sys.platform`` values for ``platform``).

    >>> app_config_dir(Path("/Users/u"), {}, "darwin").as_posix()
    '/Users/u/Library/Application Support'
    >>> app_config_dir(Path("/home/u"), {"XDG_CONFIG_HOME": "/x"}, "linux").as_posix()
    '/x'
    """
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith(("win", "cygwin")):
        appdata = env.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    return _xdg_config(home, env)


def _xdg_config(home: Path, env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else home / ".config"


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
    return app_config_dir(home, env, platform) / "Claude" / "claude_desktop_config.json"


def _one_of(directory: Path, names: tuple[str, ...]) -> Path:
    """The first of ``names`` that exists in ``directory``, else the first name."""
    for name in names:
        if (directory / name).exists():
            return directory / name
    return directory / names[0]


def _claude_code(home: Path, project: Path, env: Mapping[str, str], _: str) -> list[FileSpot]:
    claude_dir = env.get("CLAUDE_CONFIG_DIR")
    claude_json = Path(claude_dir) / ".claude.json" if claude_dir else home / ".claude.json"
    return [
        ("user", claude_json, None),
        ("local", claude_json, str(project)),
        ("project", project / ".mcp.json", None),
    ]


def _codex(home: Path, project: Path, env: Mapping[str, str], _: str) -> list[FileSpot]:
    codex_home = env.get("CODEX_HOME")
    base = Path(codex_home) if codex_home else home / ".codex"
    return [
        ("user", base / "config.toml", None),
        ("project", project / ".codex" / "config.toml", None),
    ]


def _opencode(home: Path, project: Path, env: Mapping[str, str], _: str) -> list[FileSpot]:
    names = ("opencode.json", "opencode.jsonc")
    return [
        ("user", _one_of(_xdg_config(home, env) / "opencode", names), None),
        ("project", _one_of(project, names), None),
    ]


def _named(*names: str, parent: str | None = None) -> Callable[[Path], bool]:
    def owns(path: Path) -> bool:
        return path.name in names and (parent is None or path.parent.name == parent)

    return owns


KNOWN: tuple[Client, ...] = (
    Client(
        "claude-code",
        "Claude Code",
        ("mcpServers",),
        STANDARD,
        _claude_code,
        _named(".claude.json", ".mcp.json"),
    ),
    Client(
        "cursor",
        "Cursor",
        ("mcpServers",),
        STANDARD,
        lambda home, project, env, platform: [
            ("user", home / ".cursor" / "mcp.json", None),
            ("project", project / ".cursor" / "mcp.json", None),
        ],
        _named("mcp.json", parent=".cursor"),
    ),
    Client(
        "claude-desktop",
        "Claude Desktop",
        ("mcpServers",),
        STANDARD,
        lambda home, project, env, platform: [
            ("user", claude_desktop_config_path(home, env, platform), None)
        ],
        _named("claude_desktop_config.json"),
    ),
    Client(
        "codex",
        "Codex",
        ("mcp_servers",),
        CODEX,
        _codex,
        lambda path: path.suffix == ".toml",  # the one client whose config is TOML
    ),
    Client(
        "vscode",
        "VS Code",
        ("servers",),
        STANDARD,
        lambda home, project, env, platform: [
            ("user", app_config_dir(home, env, platform) / "Code" / "User" / "mcp.json", None),
            ("project", project / ".vscode" / "mcp.json", None),
        ],
        lambda path: path.name == "mcp.json" and path.parent.name in (".vscode", "User"),
        jsonc=True,
    ),
    Client(
        "gemini",
        "Gemini CLI",
        ("mcpServers",),
        GEMINI,
        lambda home, project, env, platform: [
            ("user", home / ".gemini" / "settings.json", None),
            ("project", project / ".gemini" / "settings.json", None),
        ],
        _named("settings.json", parent=".gemini"),
        jsonc=True,
    ),
    Client(
        "opencode",
        "OpenCode",
        ("mcp",),
        OPENCODE,
        _opencode,
        _named("opencode.json", "opencode.jsonc"),
        jsonc=True,
    ),
)

#: Every ``--client`` name, in the order of :data:`KNOWN`.
CLIENTS: tuple[str, ...] = tuple(c.name for c in KNOWN)

#: A config file of no known client (``--config`` naming something else): ``mcpServers``.
_CUSTOM = Client(
    "custom", "a custom config", ("mcpServers",), STANDARD, lambda *_: [], lambda _: False
)


def client_named(name: str) -> Client:
    """The client called ``name`` (an unknown name is a file with a top-level ``mcpServers``).

    >>> client_named("gemini").label, client_named("custom").container
    ('Gemini CLI', ('mcpServers',))
    """
    for client in KNOWN:
        if client.name == name:
            return client
    return _CUSTOM


def guess_client(path: Path) -> str:
    """The client a config file belongs to, by its name (``custom`` when none claims it).

    >>> guess_client(Path("/p/.vscode/mcp.json")), guess_client(Path("/p/servers.json"))
    ('vscode', 'custom')
    """
    for client in KNOWN:
        if client.owns(path):
            return client.name
    return "custom"
