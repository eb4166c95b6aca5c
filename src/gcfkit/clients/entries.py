"""One ``mcpServers`` entry, wrapped and unwrapped: the rule of what gcfkit writes.

Wrapping replaces only ``command`` and ``args`` of one entry, in place::

    {"command": C, "args": A, ...}
      -> {"command": GCFKIT, "args": ["proxy", "--name", NAME, *OPTS, "--", C, *A], ...}

A remote (Streamable HTTP) entry becomes a stdio entry in the same place, its ``url`` and
``headers`` moved into the proxy's arguments (``type``, if any, says ``stdio``)::

    {"type": "http", "url": U, "headers": {"Authorization": "Bearer ${TOKEN}"}, ...}
      -> {"type": "stdio", "command": GCFKIT,
          "args": ["proxy", "--name", NAME, *OPTS, "--upstream", U,
                   "--header", "Authorization: Bearer ${TOKEN}"], ...}

A ``${VAR}`` in a header stays as written: the client or, failing that, the proxy reads it
from the environment. Every other field (``env``, ``type``, ``cwd``, unknown ones) and the key
order stay as they were. Whether an entry is wrapped is read from the entry itself
(``gcfkit proxy ... -- ...`` or ``gcfkit proxy ... --upstream URL``), so installing twice
never double-wraps.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .jsondoc import JsonObject

__all__ = [
    "WrappedParts",
    "check_wrappable",
    "default_launcher",
    "is_http_entry",
    "own_script",
    "same_installation",
    "split_wrapped",
    "unwrap_entry",
    "wrap_entry",
]


def default_launcher(*, search_path: str | None = None) -> list[str]:
    """The command a client should run for ``gcfkit``, as an absolute path (desktop clients
    start servers with a minimal ``PATH``):

    1. the ``gcfkit`` found on ``PATH`` (``search_path``, default ``$PATH``) when it is this
       installation (``uv tool install`` and ``pipx`` put a link to it there): that path
       outlives upgrades and reinstalls, and does not point into a virtual environment;
    2. else this installation's own script, next to the interpreter;
    3. else ``[python, "-m", "gcfkit.cli"]``.

    >>> default_launcher()[0] != ""
    True
    """
    own = own_script()
    found = shutil.which("gcfkit", path=search_path)
    if found and (own is None or same_installation(Path(found), own)):
        return [os.path.abspath(found)]
    if own is not None:
        return [str(own)]
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-m", "gcfkit.cli"]


def own_script() -> Path | None:
    """This installation's ``gcfkit`` script (beside the running interpreter), if any."""
    # The script sits next to this interpreter (a venv's bin/ or Scripts/); do not resolve
    # symlinks, or a venv's python would lead to the base interpreter's directory.
    here = Path(sys.executable).parent
    for candidate in (here / "gcfkit", here / "gcfkit.exe", here / "Scripts" / "gcfkit.exe"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def same_installation(script: Path, own: Path) -> bool:
    """Whether ``script`` starts the same installation as ``own``: a link to it, or a script
    whose ``#!`` line names the interpreter directory ``own`` is in."""
    try:
        if os.path.realpath(script) == os.path.realpath(own):
            return True
        with open(script, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return False
    interpreter = first[2:].strip().split(b" ")[0].decode("utf-8", "replace")
    # Unresolved: every venv's python links to the same base interpreter.
    return bool(interpreter) and Path(interpreter).parent == own.parent


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
    """A wrapper entry taken apart: how gcfkit is launched, proxy options, the real server
    (``command`` and ``args``, or for a remote one ``url`` and ``headers`` with ``command``
    empty)."""

    launcher: tuple[str, ...]
    proxy_args: tuple[str, ...]
    command: str
    args: tuple[str, ...]
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


def _is_streamable_http(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("type", entry.get("transport", "http"))
    url = entry.get("url", entry.get("serverUrl"))
    return (
        isinstance(kind, str)
        and kind.lower() in ("http", "streamable-http", "streamablehttp")
        and isinstance(url, str)
        and url.startswith(("http://", "https://"))
    )


def _split_upstream(rest: list[str]) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """``--upstream URL [--header "K: V"]...`` (what :func:`wrap_entry` writes) taken apart."""
    if len(rest) < 2 or rest[0] != "--upstream" or len(rest) % 2:
        return None
    headers: list[tuple[str, str]] = []
    for flag, spec in zip(rest[2::2], rest[3::2], strict=True):
        name, sep, value = spec.partition(":")
        if flag != "--header" or not sep:
            return None
        headers.append((name.strip(), value.strip()))
    return rest[1], tuple(headers)


def _is_gcfkit_command(command: str) -> bool:
    base = command.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return base in ("gcfkit", "gcfkit.exe")


def split_wrapped(
    entry: Mapping[str, Any], launchers: Sequence[Sequence[str]] = ()
) -> WrappedParts | None:
    """Take a ``gcfkit proxy [OPTS] -- CMD [ARGS]`` (or ``... --upstream URL [--header H]...``)
    entry apart; None if it is not one.

    ``launchers`` are extra launch prefixes to recognise (e.g. a custom ``--gcfkit`` path).

    >>> split_wrapped({"command": "/bin/gcfkit", "args": ["proxy", "--delta", "--", "uvx", "x"]})
    WrappedParts(launcher=('/bin/gcfkit',), proxy_args=('--delta',), command='uvx', args=('x',), \
url=None, headers=())
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
        at = len(full) - 1 - full[::-1].index("--upstream") if "--upstream" in full else -1
        remote = _split_upstream(full[at:]) if at >= start else None
        if remote is None:
            return None
        return WrappedParts(
            launcher=tuple(full[: start - 1]),
            proxy_args=tuple(full[start:at]),
            command="",
            args=(),
            url=remote[0],
            headers=remote[1],
        )
    inner = full[sep + 1 :]
    if not inner:
        return None
    return WrappedParts(
        launcher=tuple(full[: start - 1]),
        proxy_args=tuple(full[start:sep]),
        command=inner[0],
        args=tuple(inner[1:]),
    )


def check_wrappable(entry: Any, name: str, where: str) -> JsonObject:
    """``entry`` if the proxy can wrap it (a stdio server, or a Streamable HTTP one: ``url``
    with ``type`` ``http`` or none); else a :class:`~gcfkit.errors.ConfigError` naming
    ``name`` and ``where`` it is."""
    if not isinstance(entry, dict):
        raise ConfigError("malformed_config", f"server {name!r} in {where} is not a JSON object")
    if is_http_entry(entry):
        if not _is_streamable_http(entry):
            raise ConfigError(
                "unsupported_server",
                f"server {name!r} in {where} is an HTTP server the proxy does not speak (it "
                "relays Streamable HTTP: type http with an http(s) url), so it was left as it was",
            )
        headers = entry.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and ":" not in k for k, v in headers.items()
        ):
            raise ConfigError(
                "malformed_config",
                f"server {name!r} in {where}: headers is not an object of strings",
            )
        return entry
    command = entry.get("command")
    args = entry.get("args", [])
    if not isinstance(command, str) or not command:
        raise ConfigError("malformed_config", f"server {name!r} in {where} has no command")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(
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
    >>> wrap_entry({"type": "http", "url": "https://x/mcp", "headers": {"K": "v"}}, ["gcfkit"])
    {'type': 'stdio', 'command': 'gcfkit', 'args': ['proxy', '--upstream', 'https://x/mcp', \
'--header', 'K: v']}
    """
    if is_http_entry(entry):
        return _wrap_remote(entry, launcher, proxy_args)
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


def _wrap_remote(
    entry: Mapping[str, Any], launcher: Sequence[str], proxy_args: Sequence[str]
) -> JsonObject:
    url_key = "url" if "url" in entry else "serverUrl"
    headers = entry.get("headers", {})
    wrapper_args = [*launcher[1:], "proxy", *proxy_args, "--upstream", entry[url_key]]
    for key, value in headers.items():
        wrapper_args += ["--header", f"{key}: {value}"]
    result: JsonObject = {}
    for key, value in entry.items():
        if key == url_key:
            result["command"] = launcher[0]
            result["args"] = wrapper_args
        elif key in ("type", "transport"):
            result[key] = "stdio"
        elif key != "headers":
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
    if parts.url is not None:
        for key, value in entry.items():
            if key == "command":
                result["url"] = parts.url
                if parts.headers:
                    result["headers"] = dict(parts.headers)
            elif key in ("type", "transport"):
                result[key] = "http"
            elif key != "args":
                result[key] = copy.deepcopy(value)
        return result
    for key, value in entry.items():
        if key == "command":
            result[key] = parts.command
        elif key == "args":
            if parts.args or keep_empty_args:
                result[key] = list(parts.args)
        else:
            result[key] = copy.deepcopy(value)
    return result
