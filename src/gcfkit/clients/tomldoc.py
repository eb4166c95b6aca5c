"""A TOML config (Codex's ``config.toml``) edited in place: comments, layout and every
untouched value keep their bytes.

:class:`TomlDocument` has the interface of :class:`~.jsondoc.JsonDocument` (``path``, ``raw``,
``data``, ``text``, :meth:`~TomlDocument.dump`, :meth:`~TomlDocument.load`): ``data`` is the
file as plain Python values, and :meth:`~TomlDocument.dump` writes edited data back through
`tomlkit`, which keeps the file's own text, setting only
the values that changed. tomlkit comes with the ``mcp`` and ``clients`` extras; without it a
TOML config is refused with :class:`~gcfkit.errors.ConfigError` ``invalid_option``, naming
the extra, before anything is written.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "config.toml"
>>> _ = path.write_text('# mine\\n[mcp_servers.time]\\ncommand = "uvx"  # why\\n')
>>> doc = TomlDocument.load(path)
>>> doc.data
{'mcp_servers': {'time': {'command': 'uvx'}}}
>>> print(doc.dump({"mcp_servers": {"time": {"command": "gcfkit", "args": ["proxy"]}}}), end="")
# mine
[mcp_servers.time]
command = "gcfkit"  # why
args = ["proxy"]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..jsonio import same_value
from .jsondoc import JsonObject, malformed

__all__ = ["TomlDocument"]


def _tomlkit() -> Any:
    try:
        import tomlkit
    except ImportError:
        raise ConfigError(
            "invalid_option",
            "editing a TOML config (Codex's config.toml) needs the tomlkit package: "
            "pip install 'gcfkit[clients]'",
        ) from None
    return tomlkit


def _item(tomlkit: Any, value: Any, source: str | None) -> Any:
    """A value as TOML writes it inside a server table: as ``source`` spelled it when that
    is the same value (a restored entry gets its own bytes back), a table on one line."""
    if source is not None:
        # A value on its key's line, or a table of its own ([servers.NAME.http_headers]).
        for text in (f"v = {source.strip()}\n", f"[v]\n{source}"):
            try:
                item = tomlkit.parse(text)["v"]
            except tomlkit.exceptions.TOMLKitError:
                continue
            if same_value(item.unwrap(), value, number_types=True):
                return item
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        table.update(value)
        return table
    return value


#: Original spellings of values: key path of a table -> {key: TOML text of its value}.
Sources = Mapping[tuple[str, ...], Mapping[str, str]]


def _sync(
    tomlkit: Any,
    node: Any,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    sources: Sources,
    path: tuple[str, ...] = (),
) -> None:
    """Make the tomlkit container ``node`` (which holds ``old``) hold ``new``, touching only
    the keys whose values differ; keys end up in ``new``'s order."""
    spelled = sources.get(path, {})
    for key in [k for k in old if k not in new]:
        del node[key]
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if before is not _MISSING and same_value(before, value, number_types=True):
            continue
        if isinstance(before, Mapping) and isinstance(value, Mapping):
            _sync(tomlkit, node[key], before, value, sources, (*path, key))
        else:
            node[key] = _item(tomlkit, value, spelled.get(key))
    if list(node) != list(new) and set(old) != set(new):
        # Added keys land at the end of the table; put them back in the entry's order (a
        # restored entry), moving each item with its own comment.
        for key in new:
            item = node.item(key)
            del node[key]
            node[key] = item


_MISSING: Any = object()


@dataclass
class TomlDocument:
    """A TOML file: its raw bytes (None when missing) and its data as plain Python values."""

    path: Path
    raw: bytes | None
    data: JsonObject

    @property
    def text(self) -> str:
        """The file's text ("" when missing)."""
        return "" if self.raw is None else self.raw.decode("utf-8")

    def dump(self, data: JsonObject, sources: Sources | None = None) -> str:
        """``data`` as this file's new text: only the values that changed are rewritten, as
        ``sources`` spells them where it has them (see :meth:`sources`)."""
        tomlkit = _tomlkit()
        doc = tomlkit.parse(self.text)
        _sync(tomlkit, doc, self.data, data, sources or {})
        return str(tomlkit.dumps(doc))

    def sources(self, keys: tuple[str, ...]) -> dict[str, str]:
        """How the file spells each value of the table at ``keys``: key -> TOML text.

        >>> import pathlib, tempfile
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "c.toml"
        >>> _ = path.write_text('[s.t]\\nargs = [\\n  "a",\\n]\\n')
        >>> TomlDocument.load(path).sources(("s", "t"))
        {'args': '[\\n  "a",\\n]'}
        """
        node: Any = _tomlkit().parse(self.text)
        for key in keys:
            node = node[key]
        return {key: node.item(key).as_string() for key in node}

    @classmethod
    def load(cls, path: Path) -> TomlDocument:
        """Read ``path``; a missing file is an empty document."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, None, {})
        except OSError as e:
            raise ConfigError("io_error", f"cannot read {path}: {e.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise malformed(path, "it is not UTF-8") from None
        tomlkit = _tomlkit()
        try:
            data = tomlkit.parse(text).unwrap()
        except tomlkit.exceptions.TOMLKitError as e:
            raise malformed(path, f"it is not valid TOML: {e}") from None
        return cls(path, raw, data)
