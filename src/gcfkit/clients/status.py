"""``gcfkit mcp-status``: every server in every selected config, and whether it is wrapped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .entries import check_wrappable, is_http_entry, split_wrapped
from .jsondoc import JsonObject
from .locations import ConfigDocument, ConfigLocation, load_config, select_locations, servers_of

__all__ = ["ServerStatus", "mcp_status"]


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
    #: Whether ``install-mcp`` can wrap it (an SSE server, or a Codex one that signs in
    #: itself, cannot); False for a wrapped entry.
    wrappable: bool = True
    #: The entry in the common shape (:mod:`.shapes`: ``command``, ``args``, ``env``, ``cwd``
    #: whatever the client calls them), for ``gcfkit doctor`` to start it as the client
    #: would. Not in :meth:`to_dict`: its env often holds secrets.
    entry: JsonObject | None = None

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
            "wrappable": self.wrappable,
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
    docs: dict[Path, ConfigDocument | ConfigError] = {}
    for loc in locations:
        doc = docs.get(loc.path)
        if doc is None:
            try:
                doc = load_config(loc.path, jsonc=loc.kind.jsonc)
            except ConfigError as e:
                doc = e
                result.append(ServerStatus(loc, None, "", False, "", error=str(e)))
            docs[loc.path] = doc
        if isinstance(doc, ConfigError) or doc.raw is None:
            continue
        try:
            servers = servers_of(doc, loc)
        except ConfigError as e:
            result.append(ServerStatus(loc, None, "", False, "", error=str(e)))
            continue
        for name, own in servers.items():
            if not isinstance(own, dict):
                result.append(ServerStatus(loc, name, "?", False, "", error="not an object"))
                continue
            entry = loc.kind.shape.to_common(own)
            if is_http_entry(entry):
                url = entry.get("url", entry.get("serverUrl", ""))
                try:
                    check_wrappable(entry, name, loc.describe())
                    wrappable = loc.kind.shape.refusal(own) is None
                except ConfigError:
                    wrappable = False
                result.append(
                    ServerStatus(
                        loc, name, "http", False, str(url), wrappable=wrappable, entry=entry
                    )
                )
                continue
            parts = split_wrapped(entry)
            if parts is not None:
                shown = parts.url if parts.url is not None else parts.command
                kind = "http" if parts.url is not None else "stdio"
                result.append(
                    ServerStatus(loc, name, kind, True, shown, parts.proxy_args, entry=entry)
                )
            else:
                command = entry.get("command")
                result.append(
                    ServerStatus(
                        loc,
                        name,
                        "stdio",
                        False,
                        command if isinstance(command, str) else "",
                        entry=entry,
                    )
                )
    return result
