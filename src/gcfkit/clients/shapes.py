"""How a client's server entry differs from the common one, and the way across.

:mod:`.entries` wraps and unwraps the common shape (Claude Code, Cursor, Claude Desktop,
VS Code): ``command`` and ``args`` for a local server, ``url`` and ``headers`` (``type``
``http``) for a remote one. The other clients spell the same things differently:

========  ======================================================================
Codex     remote headers are ``http_headers``; no ``type``
Gemini    a Streamable HTTP server is ``httpUrl`` (a bare ``url`` is SSE)
OpenCode  ``command`` is one array (program and arguments), the environment is
          ``environment``, ``type`` is ``local`` or ``remote``
========  ======================================================================

An :class:`EntryShape` renames an entry into the common shape (:meth:`~EntryShape.to_common`)
and back (:meth:`~EntryShape.from_common`), keeping every other key and the key order, so
that one rule wraps every client's entries. :meth:`~EntryShape.refusal` names what a
client's entry has that a wrapper could not carry.

>>> OPENCODE.to_common({"type": "local", "command": ["npx", "srv"], "enabled": True})
{'type': 'stdio', 'command': 'npx', 'args': ['srv'], 'enabled': True}
>>> OPENCODE.from_common({"type": "stdio", "command": "gcfkit", "args": ["proxy"]})
{'type': 'local', 'command': ['gcfkit', 'proxy']}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .jsondoc import JsonObject

__all__ = ["CODEX", "GEMINI", "OPENCODE", "STANDARD", "EntryShape"]


def _renamed(entry: Mapping[str, Any], names: Mapping[str, str]) -> JsonObject:
    """``entry`` with keys renamed in place (same position)."""
    return {names.get(key, key): value for key, value in entry.items()}


class EntryShape:
    """The common shape itself: nothing to rename, nothing refused."""

    def to_common(self, entry: Mapping[str, Any]) -> JsonObject:
        """The entry in the common shape."""
        return dict(entry)

    def from_common(self, entry: Mapping[str, Any]) -> JsonObject:
        """A common-shape entry as this client writes it."""
        return dict(entry)

    def refusal(self, entry: Mapping[str, Any]) -> str | None:
        """Why this entry cannot be wrapped, or None."""
        return None


class _Codex(EntryShape):
    """Codex: ``[mcp_servers.NAME]`` tables; a remote one has ``url`` and ``http_headers``."""

    # Credentials Codex looks up itself (an environment variable it reads, OAuth): a stdio
    # wrapper would start without them, and Codex refuses those keys on a stdio entry.
    _OWN_AUTH: Final = ("bearer_token_env_var", "env_http_headers", "bearer_token", "oauth")

    def to_common(self, entry: Mapping[str, Any]) -> JsonObject:
        if "url" in entry and "command" not in entry:
            return _renamed(entry, {"http_headers": "headers"})
        return dict(entry)

    def from_common(self, entry: Mapping[str, Any]) -> JsonObject:
        if "url" in entry and "command" not in entry:
            return _renamed(entry, {"headers": "http_headers"})
        return dict(entry)

    def refusal(self, entry: Mapping[str, Any]) -> str | None:
        if "command" in entry:
            return None
        own = [key for key in self._OWN_AUTH if key in entry]
        if own:
            return (
                f"it authenticates with {', '.join(own)}, which Codex resolves itself and a "
                "stdio wrapper could not pass on"
            )
        return None


class _Gemini(EntryShape):
    """Gemini CLI: ``httpUrl`` is Streamable HTTP; ``url`` without a ``type`` is SSE."""

    def to_common(self, entry: Mapping[str, Any]) -> JsonObject:
        if "command" in entry:
            return dict(entry)
        if "httpUrl" in entry:
            return _renamed(entry, {"httpUrl": "url"})
        if "url" in entry and "type" not in entry:
            return {"type": "sse", **entry}
        return dict(entry)

    def from_common(self, entry: Mapping[str, Any]) -> JsonObject:
        if "url" in entry and "command" not in entry and "type" not in entry:
            return _renamed(entry, {"url": "httpUrl"})
        return dict(entry)


class _OpenCode(EntryShape):
    """OpenCode: ``{"type": "local", "command": [program, *args], "environment": {...}}``
    or ``{"type": "remote", "url": ..., "headers": {...}}``."""

    _TYPES: Final = {"local": "stdio", "remote": "http"}

    def to_common(self, entry: Mapping[str, Any]) -> JsonObject:
        out: JsonObject = {}
        for key, value in entry.items():
            if key == "type" and isinstance(value, str):
                out[key] = self._TYPES.get(value, value)
            elif key == "command" and isinstance(value, list) and value:
                out["command"], out["args"] = value[0], list(value[1:])
            elif key == "environment":
                out["env"] = value
            else:
                out[key] = value
        return out

    def from_common(self, entry: Mapping[str, Any]) -> JsonObject:
        back = {common: own for own, common in self._TYPES.items()}
        out: JsonObject = {}
        for key, value in entry.items():
            if key == "type" and isinstance(value, str):
                out[key] = back.get(value, value)
            elif key == "command":
                out[key] = [value, *entry.get("args", [])]
            elif key == "args":
                continue
            elif key == "env":
                out["environment"] = value
            else:
                out[key] = value
        return out


STANDARD = EntryShape()
CODEX: EntryShape = _Codex()
GEMINI: EntryShape = _Gemini()
OPENCODE: EntryShape = _OpenCode()
