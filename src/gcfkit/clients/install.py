"""Wrap (and restore) stdio MCP servers in client configs so they run behind ``gcfkit proxy``.

Known configs (``mcpServers`` objects of ``{"command", "args", "env", ...}`` entries):

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

Wrapping replaces only ``command`` and ``args`` of one entry, in place::

    {"command": C, "args": A, ...}
      -> {"command": GCFKIT, "args": ["proxy", "--name", NAME, *OPTS, "--", C, *A], ...}

(``--name NAME`` lets the savings ledger use the name the config knows the server by.)

Every other field (``env``, ``type``, ``cwd``, unknown ones) and the key order stay as they were,
and so does the rest of the file: the JSON is rewritten in the file's own style (indent, key
order, newline at the end, CRLF, BOM), so an untouched part comes out byte-identical.

The original entry is kept in a sidecar, ``<state dir>/installed.json`` (see
:func:`gcfkit.paths.state_dir`), not inside the config: clients that validate entries
strictly never see an unknown key. Uninstall puts the stored original back exactly when the
wrapper is as gcfkit left it; if the wrapper was edited since (or the sidecar is gone), it
unwraps what is there instead: the command after ``--`` becomes ``command``/``args`` again and
the user's other edits are kept. Whether an entry is wrapped is read from the entry itself
(``gcfkit proxy ... -- ...``), so installing twice never double-wraps.

Every write makes a timestamped backup first, under ``<state dir>/backups/<UTC time>/`` mirroring
the config's absolute path, then replaces the file atomically (temporary file in the same
directory + rename, same permissions; a symlinked config keeps its link). A file that is not
valid JSON, has duplicate keys or comments, or has the wrong shape is never written: the
operation stops with :class:`GCFError` ``malformed_config``.

>>> import json, pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> cfg = d / "mcp.json"
>>> _ = cfg.write_text(json.dumps({"mcpServers": {"time": {"command": "uvx",
...     "args": ["mcp-server-time"]}}}, indent=2) + "\\n")
>>> plans = install_mcp("time", config=cfg, launcher=["gcfkit"], env={"GCFKIT_STATE_DIR": str(d)})
>>> json.loads(cfg.read_text())["mcpServers"]["time"]["args"]
['proxy', '--name', 'time', '--', 'uvx', 'mcp-server-time']
>>> _ = uninstall_mcp("time", config=cfg, env={"GCFKIT_STATE_DIR": str(d)})
>>> json.loads(cfg.read_text())["mcpServers"]["time"]["args"]
['mcp-server-time']
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import GCFError
from ..paths import state_dir

__all__ = [
    "CLIENTS",
    "SCOPES",
    "Action",
    "ConfigLocation",
    "FilePlan",
    "ServerStatus",
    "WrappedParts",
    "apply_plans",
    "claude_desktop_config_path",
    "default_launcher",
    "install_mcp",
    "is_http_entry",
    "known_locations",
    "locations_for_file",
    "mcp_status",
    "select_locations",
    "split_wrapped",
    "uninstall_mcp",
    "unwrap_entry",
    "wrap_entry",
]

CLIENTS: tuple[str, ...] = ("claude-code", "cursor", "claude-desktop")
SCOPES: tuple[str, ...] = ("user", "project", "local")

RECORDS_FILENAME = "installed.json"
_RECORDS_VERSION = 1

JsonObject = dict[str, Any]


# --- where configs live -----------------------------------------------------------------


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
        raise GCFError(
            "invalid_option", f"--client {client!r}: expected one of {', '.join(CLIENTS)}, all"
        )
    if scope is not None and scope not in SCOPES:
        raise GCFError("invalid_option", f"--scope {scope!r}: expected one of {', '.join(SCOPES)}")
    if config is not None:
        locations = locations_for_file(Path(config), client=client, cwd=cwd)
    else:
        locations = known_locations(home=home, cwd=cwd, env=env, platform=platform)
        if client is not None and client != "all":
            locations = [loc for loc in locations if loc.client == client]
    if scope is not None:
        locations = [loc for loc in locations if loc.scope == scope]
    return locations


# --- reading and writing config files in their own style --------------------------------


@dataclass(frozen=True)
class _Style:
    indent: str | None
    compact: bool
    ensure_ascii: bool
    newline: str
    final_newline: bool
    bom: bool

    def dump(self, data: Any) -> str:
        if self.indent is None:
            separators = (",", ":") if self.compact else (", ", ": ")
            text = json.dumps(data, ensure_ascii=self.ensure_ascii, separators=separators)
        else:
            text = json.dumps(data, ensure_ascii=self.ensure_ascii, indent=self.indent)
        if self.newline != "\n":
            # json.dumps escapes newlines inside strings, so every raw LF is layout.
            text = text.replace("\n", self.newline)
        if self.final_newline:
            text += self.newline
        return ("\ufeff" + text) if self.bom else text


def _detect_style(text: str, data: Any) -> _Style:
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    newline = "\r\n" if "\r\n" in body else "\n"
    final_newline = body.endswith("\n")
    stripped = body.rstrip("\r\n")
    guess_indent: str | None = None
    for line in stripped.splitlines()[1:]:
        lead = line[: len(line) - len(line.lstrip(" \t"))]
        if lead:
            guess_indent = lead
            break
    if guess_indent is None and "\n" in stripped:
        guess_indent = "  "
    escapes_non_ascii = stripped.isascii() and "\\u" in stripped
    indents: list[str | None] = [guess_indent, "  ", "    ", "\t", None]
    # Prefer a style that reproduces the file exactly: then untouched bytes stay untouched.
    for indent in indents:
        for compact in (False, True) if indent is None else (False,):
            for ensure_ascii in (escapes_non_ascii, not escapes_non_ascii):
                style = _Style(indent, compact, ensure_ascii, newline, final_newline, bom)
                if style.dump(data) == text:
                    return style
    compact = guess_indent is None and ": " not in stripped
    return _Style(guess_indent, compact, escapes_non_ascii, newline, final_newline, bom)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> JsonObject:
    result: JsonObject = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass
class _Document:
    path: Path
    raw: bytes | None
    data: JsonObject
    style: _Style

    @property
    def text(self) -> str:
        return "" if self.raw is None else self.raw.decode("utf-8")

    @classmethod
    def load(cls, path: Path) -> _Document:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, None, {}, _Style("  ", False, False, "\n", True, False))
        except OSError as e:
            raise GCFError("io_error", f"cannot read {path}: {e.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _malformed(path, "it is not UTF-8") from None
        body = text[1:] if text.startswith("\ufeff") else text
        if not body.strip():
            return cls(path, raw, {}, _Style("  ", False, False, "\n", True, False))
        try:
            data = json.loads(
                body, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
            )
        except json.JSONDecodeError as e:
            hint = " (comments and trailing commas are not JSON)" if "Expecting" in e.msg else ""
            raise _malformed(path, f"{e.msg} at line {e.lineno} column {e.colno}{hint}") from None
        except (ValueError, RecursionError) as e:
            raise _malformed(path, str(e)) from None
        if not isinstance(data, dict):
            raise _malformed(path, "the top level is not a JSON object")
        return cls(path, raw, data, _detect_style(text, data))

    def container_keys(self, location: ConfigLocation) -> tuple[str, ...] | None:
        """The key path of the location's ``mcpServers`` in this file, or None if absent."""
        if location.project is None:
            return ("mcpServers",)
        projects = self.data.get("projects")
        if projects is None:
            return None
        if not isinstance(projects, dict):
            raise _malformed(self.path, "'projects' is not an object")
        candidates = [location.project, os.path.realpath(location.project)]
        candidates.append(Path(location.project).as_posix())
        for key in candidates:
            if key in projects:
                return ("projects", key, "mcpServers")
        return None

    def servers(self, location: ConfigLocation, data: JsonObject | None = None) -> JsonObject:
        """The location's ``mcpServers`` object ({} if absent); ``data`` defaults to ours."""
        keys = self.container_keys(location)
        node: Any = self.data if data is None else data
        if keys is None:
            return {}
        for i, key in enumerate(keys):
            if not isinstance(node, dict):
                raise _malformed(self.path, f"{_dotted(keys[:i])} is not an object")
            node = node.get(key)
            if node is None:
                return {}
        if not isinstance(node, dict):
            raise _malformed(self.path, f"{_dotted(keys)} is not an object")
        return node


def _dotted(keys: Sequence[str]) -> str:
    return "".join(f"[{json.dumps(k)}]" for k in keys) or "the top level"


def _malformed(path: Path, why: str) -> GCFError:
    return GCFError(
        "malformed_config", f"{path}: {why}; the file was left exactly as it was, fix it first"
    )


def _same(a: Any, b: Any) -> bool:
    # Equal including key order, which dict equality ignores.
    return json.dumps(a, sort_keys=False) == json.dumps(b, sort_keys=False)


# --- wrapping ---------------------------------------------------------------------------


def default_launcher() -> list[str]:
    """The command a client should run for ``gcfkit``: an absolute path to the ``gcfkit``
    script of this installation, else ``[python, "-m", "gcfkit.cli"]``.

    Absolute, because desktop clients start servers with a minimal ``PATH``.

    >>> default_launcher()[0] != ""
    True
    """
    # The script sits next to this interpreter (a venv's bin/ or Scripts/); do not resolve
    # symlinks, or a venv's python would lead to the base interpreter's directory.
    here = Path(sys.executable).parent
    for candidate in (here / "gcfkit", here / "gcfkit.exe", here / "Scripts" / "gcfkit.exe"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [str(candidate)]
    found = shutil.which("gcfkit")
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-m", "gcfkit.cli"]


def is_http_entry(entry: Mapping[str, Any]) -> bool:
    """True for a remote (``url``, ``http``/``sse``) entry, which the stdio proxy cannot wrap.

    >>> is_http_entry({"type": "http", "url": "https://example.invalid/mcp"})
    True
    >>> is_http_entry({"type": "stdio", "command": "uvx"})
    False
    """
    kind = entry.get("type", entry.get("transport"))
    if isinstance(kind, str) and kind.lower() in ("http", "sse", "streamable-http", "ws"):
        return True
    return "command" not in entry and ("url" in entry or "serverUrl" in entry)


@dataclass(frozen=True)
class WrappedParts:
    """A wrapper entry taken apart: how gcfkit is launched, proxy options, the real server."""

    launcher: tuple[str, ...]
    proxy_args: tuple[str, ...]
    command: str
    args: tuple[str, ...]


def _is_gcfkit_command(command: str) -> bool:
    base = command.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return base in ("gcfkit", "gcfkit.exe")


def split_wrapped(
    entry: Mapping[str, Any], launchers: Sequence[Sequence[str]] = ()
) -> WrappedParts | None:
    """Take a ``gcfkit proxy [OPTS] -- CMD [ARGS]`` entry apart; None if it is not one.

    ``launchers`` are extra launch prefixes to recognise (e.g. a custom ``--gcfkit`` path).

    >>> split_wrapped({"command": "/bin/gcfkit", "args": ["proxy", "--delta", "--", "uvx", "x"]})
    WrappedParts(launcher=('/bin/gcfkit',), proxy_args=('--delta',), command='uvx', args=('x',))
    >>> split_wrapped({"command": "uvx", "args": ["x"]}) is None
    True
    """
    command = entry.get("command")
    args = entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return None
    if not all(isinstance(a, str) for a in args):
        return None
    full = [command, *args]
    start: int | None = None
    for prefix in launchers:
        n = len(prefix)
        if n and full[:n] == list(prefix) and full[n : n + 1] == ["proxy"]:
            start = n + 1
            break
    if start is None:
        if _is_gcfkit_command(command) and full[1:2] == ["proxy"]:
            start = 2
        elif full[1:3] in (["-m", "gcfkit.cli"], ["-m", "gcfkit"]) and full[3:4] == ["proxy"]:
            start = 4
        else:
            return None
    try:
        sep = full.index("--", start)
    except ValueError:
        return None
    inner = full[sep + 1 :]
    if not inner:
        return None
    return WrappedParts(
        launcher=tuple(full[: start - 1]),
        proxy_args=tuple(full[start:sep]),
        command=inner[0],
        args=tuple(inner[1:]),
    )


def _check_stdio(entry: Any, name: str, where: str) -> JsonObject:
    if not isinstance(entry, dict):
        raise GCFError("malformed_config", f"server {name!r} in {where} is not a JSON object")
    if is_http_entry(entry):
        raise GCFError(
            "unsupported_server",
            f"server {name!r} in {where} is an HTTP server (url); gcfkit proxy wraps stdio "
            "servers (command/args) only, so it was left as it was",
        )
    command = entry.get("command")
    args = entry.get("args", [])
    if not isinstance(command, str) or not command:
        raise GCFError("malformed_config", f"server {name!r} in {where} has no command")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise GCFError(
            "malformed_config", f"server {name!r} in {where}: args is not a list of strings"
        )
    return entry


def wrap_entry(
    entry: Mapping[str, Any], launcher: Sequence[str], proxy_args: Sequence[str] = ()
) -> JsonObject:
    """The entry with ``command``/``args`` replaced by ``launcher proxy OPTS -- command args``.

    Every other key keeps its value and position; ``args`` is added right after ``command``
    when the entry had none.

    >>> wrap_entry({"type": "stdio", "command": "uvx", "env": {"A": "1"}}, ["gcfkit"])
    {'type': 'stdio', 'command': 'gcfkit', 'args': ['proxy', '--', 'uvx'], 'env': {'A': '1'}}
    """
    command = entry["command"]
    wrapper_args = [*launcher[1:], "proxy", *proxy_args, "--", command, *entry.get("args", [])]
    result: JsonObject = {}
    for key, value in entry.items():
        if key == "command":
            result[key] = launcher[0]
            if "args" not in entry:
                result["args"] = wrapper_args
        elif key == "args":
            result[key] = wrapper_args
        else:
            result[key] = copy.deepcopy(value)
    return result


def unwrap_entry(
    entry: Mapping[str, Any], parts: WrappedParts, *, keep_empty_args: bool = True
) -> JsonObject:
    """The entry with the real server's ``command``/``args`` back; other keys untouched.

    ``keep_empty_args=False`` drops an empty ``args`` (for entries that had none).

    >>> e = {"command": "gcfkit", "args": ["proxy", "--", "uvx", "x"], "env": {}}
    >>> unwrap_entry(e, split_wrapped(e))
    {'command': 'uvx', 'args': ['x'], 'env': {}}
    """
    result: JsonObject = {}
    for key, value in entry.items():
        if key == "command":
            result[key] = parts.command
        elif key == "args":
            if parts.args or keep_empty_args:
                result[key] = list(parts.args)
        else:
            result[key] = copy.deepcopy(value)
    return result


# --- the sidecar of original entries ----------------------------------------------------


def _record_key(path: Path, keys: Sequence[str], name: str) -> str:
    return json.dumps([os.path.realpath(path), list(keys), name])


@dataclass
class _Records:
    path: Path
    entries: dict[str, JsonObject] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> _Records:
        records = cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return records
        except (OSError, ValueError) as e:
            # Uninstall still works without it (it unwraps the entry), so warn and go on.
            print(f"gcfkit: warning: ignoring unreadable {path}: {e}", file=sys.stderr)
            return records
        servers = data.get("servers") if isinstance(data, dict) else None
        for item in servers if isinstance(servers, list) else []:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                records.entries[item["key"]] = item
        return records

    def save(self) -> None:
        payload = {"version": _RECORDS_VERSION, "servers": list(self.entries.values())}
        text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        # The originals hold env values, which are often secrets.
        _write_atomic(self.path, text.encode("utf-8"), expected=None, mode=0o600)


# --- plans: what would change, applied atomically per file ------------------------------


@dataclass(frozen=True)
class Action:
    """What happens to one server: ``wrapped``, ``rewrapped``, ``already-wrapped``,
    ``restored`` (the stored original), ``unwrapped`` (the wrapper was edited, or no stored
    original) or ``not-wrapped``."""

    location: ConfigLocation
    name: str
    action: str

    @property
    def changes(self) -> bool:
        """Whether this action rewrites the file."""
        return self.action in ("wrapped", "rewrapped", "restored", "unwrapped")


@dataclass
class FilePlan:
    """Every action on one config file, with the file's text before and after."""

    path: Path
    before: str
    after: str
    actions: list[Action] = field(default_factory=list)
    backup: Path | None = None
    written: bool = False
    _raw: bytes | None = field(default=None, repr=False)
    _new_data: JsonObject = field(default_factory=dict, repr=False)
    _record_updates: dict[str, JsonObject | None] = field(default_factory=dict, repr=False)

    @property
    def changed(self) -> bool:
        """Whether the file's content would change."""
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the file, before and after."""
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=str(self.path),
                tofile=f"{self.path} (after)",
            )
        )


def _find(
    name: str, locations: Sequence[ConfigLocation]
) -> tuple[dict[Path, _Document], list[ConfigLocation]]:
    docs: dict[Path, _Document] = {}
    found: list[ConfigLocation] = []
    for loc in locations:
        try:
            doc = docs.get(loc.path)
            if doc is None:
                doc = docs[loc.path] = _Document.load(loc.path)
            if doc.raw is not None and name in doc.servers(loc):
                found.append(loc)
        except GCFError as e:
            # NAME might be in the broken file, so guessing past it could wrap the wrong copy.
            if e.code == "malformed_config" and len(locations) > 1:
                raise GCFError(
                    e.code, f"{e.detail} (or leave it out with --client, --scope or --config)"
                ) from None
            raise
    return docs, found


def _not_found(name: str, locations: Sequence[ConfigLocation]) -> GCFError:
    looked = "\n  ".join(loc.describe() for loc in locations) or "(no config selected)"
    return GCFError(
        "server_not_found",
        f"no MCP server named {name!r} in the configs looked at:\n  {looked}\n"
        "(see `gcfkit mcp-status`; --config PATH names another file)",
    )


def _ambiguous(name: str, found: Sequence[ConfigLocation]) -> GCFError:
    where = "\n  ".join(loc.describe() for loc in found)
    return GCFError(
        "ambiguous_server",
        f"server {name!r} is in several configs:\n  {where}\n"
        "choose with --client (all for every one) and/or --scope",
    )


def _plan_for(doc: _Document, plans: dict[Path, FilePlan]) -> tuple[FilePlan, JsonObject]:
    plan = plans.get(doc.path)
    if plan is None:
        plan = FilePlan(doc.path, doc.text, doc.text, _raw=doc.raw)
        plan._new_data = copy.deepcopy(doc.data)
        plans[doc.path] = plan
    return plan, plan._new_data


def plan_install(
    name: str,
    locations: Sequence[ConfigLocation],
    *,
    explicit: bool,
    launcher: Sequence[str] | None = None,
    proxy_args: Sequence[str] | None = None,
    name_option: bool = True,
    state: Path | None = None,
) -> list[FilePlan]:
    """Plan wrapping ``name``; nothing is written (see :func:`apply_plans`).

    ``explicit`` (a ``--client`` was given) allows acting on several configs at once; without
    it, ``name`` must be in exactly one. ``proxy_args=None`` keeps the options of an already
    wrapped entry; a sequence replaces them. ``name_option`` puts ``--name NAME`` first among
    the proxy options (unless they have a ``--name``), so the savings ledger and ``gcfkit
    stats`` show the name the config uses rather than the server's self-reported one.
    """
    launcher = list(launcher) if launcher else default_launcher()
    options = _proxy_options(name, proxy_args or (), name_option)
    docs, found = _find(name, locations)
    if not found:
        raise _not_found(name, locations)
    if len(found) > 1 and not explicit:
        raise _ambiguous(name, found)
    records = _Records.load((state or state_dir()) / RECORDS_FILENAME)
    plans: dict[Path, FilePlan] = {}
    for loc in found:
        doc = docs[loc.path]
        entry = _check_stdio(doc.servers(loc)[name], name, loc.describe())
        keys = doc.container_keys(loc)
        assert keys is not None  # found means the container exists
        key = _record_key(loc.path, keys, name)
        plan, data = _plan_for(doc, plans)
        parts = split_wrapped(entry, [launcher, *_recorded_launchers(records, key)])
        if parts is not None:
            if proxy_args is None or tuple(options) == parts.proxy_args:
                plan.actions.append(Action(loc, name, "already-wrapped"))
                continue
            inner = unwrap_entry(entry, parts)
            new = wrap_entry(inner, list(parts.launcher), options)
            action = "rewrapped"
            original = records.entries.get(key, {}).get("original", inner)
        else:
            new = wrap_entry(entry, launcher, options)
            action = "wrapped"
            original = entry
        doc.servers(loc, data)[name] = new
        plan.actions.append(Action(loc, name, action))
        plan._record_updates[key] = {
            "key": key,
            "config": str(loc.path),
            "client": loc.client,
            "scope": loc.scope,
            "name": name,
            "original": original,
            "wrapped": new,
        }
    return _finish(plans, docs)


def _proxy_options(name: str, proxy_args: Sequence[str], name_option: bool) -> list[str]:
    options = list(proxy_args)
    if name_option and not any(o == "--name" or o.startswith("--name=") for o in options):
        options = ["--name", name, *options]
    return options


def _recorded_launchers(records: _Records, key: str) -> list[list[str]]:
    item = records.entries.get(key)
    wrapped = item.get("wrapped") if item else None
    if not isinstance(wrapped, dict):
        return []
    command = wrapped.get("command")
    args = wrapped.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list) or "proxy" not in args:
        return []
    return [[command, *args[: args.index("proxy")]]]


def plan_uninstall(
    name: str,
    locations: Sequence[ConfigLocation],
    *,
    explicit: bool,
    state: Path | None = None,
) -> list[FilePlan]:
    """Plan restoring ``name``; nothing is written (see :func:`apply_plans`).

    Without ``explicit``, only configs where ``name`` is wrapped count toward ambiguity.
    """
    docs, found = _find(name, locations)
    if not found:
        raise _not_found(name, locations)
    records = _Records.load((state or state_dir()) / RECORDS_FILENAME)
    parts_of: dict[ConfigLocation, WrappedParts | None] = {}
    keys_of: dict[ConfigLocation, str] = {}
    for loc in found:
        doc = docs[loc.path]
        entry = doc.servers(loc)[name]
        keys = doc.container_keys(loc)
        assert keys is not None
        keys_of[loc] = key = _record_key(loc.path, keys, name)
        is_object = isinstance(entry, dict)
        parts_of[loc] = (
            split_wrapped(entry, _recorded_launchers(records, key)) if is_object else None
        )
    wrapped_locs = [loc for loc in found if parts_of[loc] is not None]
    if not explicit and len(wrapped_locs) > 1:
        raise _ambiguous(name, wrapped_locs)
    targets = found if explicit or not wrapped_locs else wrapped_locs
    plans: dict[Path, FilePlan] = {}
    for loc in targets:
        doc = docs[loc.path]
        plan, data = _plan_for(doc, plans)
        parts = parts_of[loc]
        if parts is None:
            plan.actions.append(Action(loc, name, "not-wrapped"))
            continue
        entry = doc.servers(loc)[name]
        item = records.entries.get(keys_of[loc])
        original = item.get("original") if item else None
        if item and isinstance(original, dict) and _same(entry, item.get("wrapped")):
            new, action = copy.deepcopy(original), "restored"
        else:
            had_args = not isinstance(original, dict) or "args" in original
            new, action = unwrap_entry(entry, parts, keep_empty_args=had_args), "unwrapped"
        doc.servers(loc, data)[name] = new
        plan.actions.append(Action(loc, name, action))
        plan._record_updates[keys_of[loc]] = None
    return _finish(plans, docs)


def _finish(plans: dict[Path, FilePlan], docs: dict[Path, _Document]) -> list[FilePlan]:
    for path, plan in plans.items():
        if any(a.changes for a in plan.actions):
            plan.after = docs[path].style.dump(plan._new_data)
    return list(plans.values())


def _backup(path: Path, state: Path, stamp: str) -> Path:
    target = Path(os.path.realpath(path))
    drive = target.drive.replace(":", "").strip("\\/") or ""
    relative = target.relative_to(target.anchor)
    dest = state / "backups" / stamp / drive / relative
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copy2(target, dest)
    return dest


def _write_atomic(path: Path, data: bytes, *, expected: bytes | None, mode: int | None) -> None:
    target = Path(os.path.realpath(path))
    try:
        if expected is not None and target.read_bytes() != expected:
            # A client (Claude Code rewrites ~/.claude.json often) changed it under us.
            raise GCFError(
                "io_error",
                f"{path} changed while gcfkit was editing it; nothing was written, run the "
                "command again (ideally with the client closed)",
            )
        if mode is None:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise GCFError("io_error", f"cannot write {path}: {e.strerror or e}") from None


def apply_plans(plans: Sequence[FilePlan], *, state: Path | None = None) -> None:
    """Write planned changes: backup, atomic replace, then the sidecar of originals.

    Files whose content does not change are neither backed up nor written.
    """
    state = state or state_dir()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    records: _Records | None = None
    for plan in plans:
        if not plan.changed:
            continue
        try:
            plan.backup = _backup(plan.path, state, stamp)
        except OSError as e:
            raise GCFError(
                "io_error", f"cannot back up {plan.path} ({e.strerror or e}); nothing was written"
            ) from None
        _write_atomic(plan.path, plan.after.encode("utf-8"), expected=plan._raw, mode=None)
        plan.written = True
        if records is None:
            records = _Records.load(state / RECORDS_FILENAME)
        for key, item in plan._record_updates.items():
            if item is None:
                records.entries.pop(key, None)
            else:
                records.entries[key] = item
        # Saved per file, so a failure on a later file cannot orphan this one's original.
        records.save()


# --- the front doors --------------------------------------------------------------------


def install_mcp(
    name: str,
    *,
    client: str | None = None,
    scope: str | None = None,
    config: Path | str | None = None,
    proxy_args: Sequence[str] | None = None,
    launcher: Sequence[str] | None = None,
    name_option: bool = True,
    dry_run: bool = False,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[FilePlan]:
    """Wrap server ``name`` with ``gcfkit proxy`` where it is configured; return the plans.

    See the module docstring for the rules. ``dry_run`` plans without writing. Raises
    :class:`GCFError` (``server_not_found``, ``ambiguous_server``, ``unsupported_server``,
    ``malformed_config``, ``io_error``); nothing is written when it does.
    """
    locations = select_locations(
        client=client, scope=scope, config=config, home=home, cwd=cwd, env=env, platform=platform
    )
    state = state_dir(env)
    plans = plan_install(
        name,
        locations,
        explicit=client is not None or config is not None,
        launcher=launcher,
        proxy_args=proxy_args,
        name_option=name_option,
        state=state,
    )
    if not dry_run:
        apply_plans(plans, state=state)
    return plans


def uninstall_mcp(
    name: str,
    *,
    client: str | None = None,
    scope: str | None = None,
    config: Path | str | None = None,
    dry_run: bool = False,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[FilePlan]:
    """Restore server ``name`` where it is wrapped; return the plans (see :func:`install_mcp`).

    An entry that is not wrapped is left alone (its action is ``not-wrapped``).
    """
    locations = select_locations(
        client=client, scope=scope, config=config, home=home, cwd=cwd, env=env, platform=platform
    )
    state = state_dir(env)
    plans = plan_uninstall(
        name, locations, explicit=client is not None or config is not None, state=state
    )
    if not dry_run:
        apply_plans(plans, state=state)
    return plans


@dataclass(frozen=True)
class ServerStatus:
    """One server entry found in a config (or, with ``name`` None, a config that failed)."""

    location: ConfigLocation
    name: str | None
    transport: str
    wrapped: bool
    command: str
    proxy_args: tuple[str, ...] = ()
    error: str | None = None

    def to_dict(self) -> JsonObject:
        """A JSON-ready dict."""
        return {
            "client": self.location.client,
            "scope": self.location.scope,
            "config": str(self.location.path),
            "project": self.location.project,
            "name": self.name,
            "transport": self.transport,
            "wrapped": self.wrapped,
            "command": self.command,
            "proxy_args": list(self.proxy_args),
            "error": self.error,
        }


def mcp_status(
    *,
    client: str | None = None,
    scope: str | None = None,
    config: Path | str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[ServerStatus]:
    """Every server in every selected config that exists, wrapped or not.

    A config that cannot be read or parsed gives one entry with ``error`` set and no name.

    >>> mcp_status(config="/nonexistent/mcp.json")
    []
    """
    locations = select_locations(
        client=client, scope=scope, config=config, home=home, cwd=cwd, env=env, platform=platform
    )
    result: list[ServerStatus] = []
    docs: dict[Path, _Document | GCFError] = {}
    for loc in locations:
        doc = docs.get(loc.path)
        if doc is None:
            try:
                doc = _Document.load(loc.path)
            except GCFError as e:
                doc = e
                result.append(ServerStatus(loc, None, "", False, "", error=str(e)))
            docs[loc.path] = doc
        if isinstance(doc, GCFError) or doc.raw is None:
            continue
        try:
            servers = doc.servers(loc)
        except GCFError as e:
            result.append(ServerStatus(loc, None, "", False, "", error=str(e)))
            continue
        for name, entry in servers.items():
            if not isinstance(entry, dict):
                result.append(ServerStatus(loc, name, "?", False, "", error="not an object"))
                continue
            if is_http_entry(entry):
                url = entry.get("url", entry.get("serverUrl", ""))
                result.append(ServerStatus(loc, name, "http", False, str(url)))
                continue
            parts = split_wrapped(entry)
            if parts is not None:
                result.append(
                    ServerStatus(loc, name, "stdio", True, parts.command, parts.proxy_args)
                )
            else:
                command = entry.get("command")
                result.append(
                    ServerStatus(
                        loc, name, "stdio", False, command if isinstance(command, str) else ""
                    )
                )
    return result
