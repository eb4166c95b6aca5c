"""The corpus format of recorded MCP sessions (``../shared/corpus/mcp``, its SOURCE.md).

One session is one directory::

    <session>/meta/initialize.json     the raw initialize result
    <session>/meta/tools_list.json     the raw tools/list result
    <session>/NNN_<tool>.json          one tools/call each, NNN its position in the session

and each call file is ``{"server", "tool", "arguments", "result", "repeat_of"}`` (plus
``"error"`` and a null ``result`` when the server answered with a JSON-RPC error), written
with one-space indentation and the keys in the order the server sent them. ``repeat_of``
names the first earlier call of the same session with the same tool and arguments.

``gcfkit capture`` writes this format (:mod:`gcfkit.traffic.capture`) and ``gcfkit verify``
reads it (:func:`read_sessions`), so captured traffic and the shared corpus replay alike.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp()) / "time"
>>> w = SessionWriter(d, "time")
>>> w.write_meta("initialize", {"serverInfo": {"name": "mcp-time", "version": "1"}})
>>> w.write_call("get_current_time", {"timezone": "UTC"}, {"content": []})
'000_get_current_time.json'
>>> w.write_call("get_current_time", {"timezone": "UTC"}, {"content": []})
'001_get_current_time.json'
>>> s = read_session(d)
>>> [(c.number, c.tool, c.repeat_of) for c in s.calls], s.initialize["serverInfo"]["name"]
([(0, 'get_current_time', None), (1, 'get_current_time', '000')], 'mcp-time')
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigError

__all__ = [
    "Call",
    "Session",
    "SessionWriter",
    "call_key",
    "is_session",
    "read_session",
    "read_sessions",
    "session_dir_name",
]

_CALL_FILE: Final = re.compile(r"^([0-9]{3,})_(.*)\.json$")
_META: Final = {"initialize": "initialize.json", "tools/list": "tools_list.json"}
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Call:
    """One recorded ``tools/call``: what was asked and what the server answered."""

    number: int
    file: str
    server: str
    tool: str
    arguments: Any
    result: dict[str, Any] | None
    error: Any = None
    repeat_of: str | None = None


@dataclass
class Session:
    """One recorded session: its handshake results and its calls, in order."""

    name: str
    path: Path
    initialize: dict[str, Any] | None = None
    tools_list: dict[str, Any] | None = None
    calls: list[Call] = field(default_factory=list)


def call_key(tool: str, arguments: Any) -> str:
    """What makes two calls the same call (``repeat_of``): the tool and its arguments.

    >>> call_key("t", {"b": 1, "a": 2}) == call_key("t", {"a": 2, "b": 1})
    True
    """
    return json.dumps([tool, arguments], sort_keys=True, ensure_ascii=False)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError("io_error", f"cannot read {path}: {e.strerror or e}") from e
    except ValueError as e:
        raise ConfigError("malformed_config", f"{path} is not valid JSON: {e}") from e


def is_session(path: Path) -> bool:
    """Whether ``path`` is a session directory (a ``meta/`` or a ``NNN_*.json`` in it)."""
    if not path.is_dir():
        return False
    if (path / "meta" / _META["initialize"]).is_file():
        return True
    return any(_CALL_FILE.match(p.name) for p in path.iterdir() if p.is_file())


def read_session(path: Path | str) -> Session:
    """Read one session directory; :class:`~gcfkit.errors.ConfigError` on a malformed file."""
    root = Path(path)
    session = Session(root.name, root)
    meta = root / "meta"
    for method, name in _META.items():
        file = meta / name
        if file.is_file():
            value = _read_json(file)
            if not isinstance(value, dict):
                raise ConfigError("malformed_config", f"{file}: expected a JSON object")
            if method == "initialize":
                session.initialize = value
            else:
                session.tools_list = value
    numbered: list[tuple[int, Path]] = []
    for file in root.iterdir():
        m = _CALL_FILE.match(file.name)
        if m and file.is_file():
            numbered.append((int(m.group(1)), file))
    for number, file in sorted(numbered):
        data = _read_json(file)
        if not isinstance(data, dict) or not isinstance(data.get("tool"), str):
            raise ConfigError("malformed_config", f"{file}: not a recorded call (no 'tool')")
        result = data.get("result")
        if result is not None and not isinstance(result, dict):
            raise ConfigError("malformed_config", f"{file}: 'result' is not an object")
        if result is None and "error" not in data:
            raise ConfigError("malformed_config", f"{file}: neither a result nor an error")
        repeat = data.get("repeat_of")
        session.calls.append(
            Call(
                number=number,
                file=file.name,
                server=str(data.get("server", root.name)),
                tool=data["tool"],
                arguments=data.get("arguments", {}),
                result=result,
                error=data.get("error"),
                repeat_of=repeat if isinstance(repeat, str) else None,
            )
        )
    return session


def read_sessions(path: Path | str) -> list[Session]:
    """The sessions under ``path``: ``path`` itself if it is one, else each directory in it
    that is one (sorted by name). Raises ConfigError when there is none."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError("io_error", f"{root} is not a directory")
    if is_session(root):
        return [read_session(root)]
    sessions = [read_session(p) for p in sorted(root.iterdir()) if is_session(p)]
    if not sessions:
        raise ConfigError(
            "invalid_option",
            f"no recorded session in {root}: expected NNN_<tool>.json files and meta/, as "
            "gcfkit capture writes them",
        )
    return sessions


class SessionWriter:
    """Writes one session in the corpus format, call by call (files 0600, directories 0700:
    recorded results are the user's data).

    ``path`` must not exist yet, or be empty; it is created.
    """

    def __init__(self, path: Path | str, server: str) -> None:
        self.path = Path(path)
        self.server = server
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._next = 0
        self._first: dict[str, str] = {}

    @property
    def calls(self) -> int:
        """How many calls were written."""
        return self._next

    def write_meta(self, method: str, result: Any) -> None:
        """Write the result of ``initialize`` or ``tools/list``."""
        self.write_meta_file(_META[method], result)

    def write_meta_file(self, name: str, value: Any) -> None:
        """Write ``meta/<name>`` (a note readers of the format may ignore)."""
        meta = self.path / "meta"
        meta.mkdir(mode=0o700, exist_ok=True)
        _write(meta / name, value)

    def write_call(
        self, tool: str, arguments: Any, result: dict[str, Any] | None, error: Any = None
    ) -> str:
        """Write one call (its result, or with ``result`` None its JSON-RPC ``error``);
        returns the file name."""
        number = f"{self._next:03d}"
        self._next += 1
        key = call_key(tool, arguments)
        record: dict[str, Any] = {
            "server": self.server,
            "tool": tool,
            "arguments": arguments,
            "result": result,
            "repeat_of": self._first.get(key),
        }
        if result is None:
            record["error"] = error
        self._first.setdefault(key, number)
        name = f"{number}_{_UNSAFE_NAME.sub('_', tool)[:80] or 'tool'}.json"
        _write(self.path / name, record)
        return name


def _write(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=1, ensure_ascii=False) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only a \u escape keeps it as JSON
        data = (json.dumps(value, indent=1) + "\n").encode("ascii")
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def session_dir_name(server: str) -> str:
    """A directory name for a server's session (unsafe characters become ``_``).

    >>> session_dir_name("mcp-servers/everything")
    'mcp-servers_everything'
    """
    return _UNSAFE_NAME.sub("_", server).strip("._") or "server"
