"""What each MCP client hands its model from a tool result: the client table, with evidence.

A ``tools/call`` result may carry ``content`` (blocks of text, images...) and
``structuredContent`` (one JSON value). Clients differ in which of the two the model reads,
and a saving counts only where the model reads it. So the proxy learns who its client is
(``clientInfo.name`` in ``initialize``, or ``--client NAME``) and what that client reads:

* ``structured``: the model reads ``JSON.stringify(structuredContent)`` whenever a successful
  result carries it, and the text blocks otherwise (an error's text is read even beside
  ``structuredContent``);
* ``content``: the model reads the content blocks (``structuredContent`` at most when there
  is no content at all);
* ``both``: the model reads the content blocks and ``structuredContent`` beside them.

``--structured`` (:data:`StructuredMode`) decides what the proxy does about it: ``auto`` (the
default) delivers a structured reader's results so that the model reads the value of
``structuredContent`` in the content, compressed as any result is, and leaves every other
client as it is; ``keep`` never touches ``structuredContent``; ``text`` does it for any client.
An unknown client is a ``content`` reader, so ``auto`` keeps today's behaviour for it.

The table (:data:`CLIENTS`) holds each client's declared names and the public evidence for
what it reads; README.md's proxy section shows the same table.

>>> reader_of("claude-code").reads, reader_of("Claude Code").reads
('structured', 'structured')
>>> reader_of("some-new-agent") is None
True
>>> flattens("auto", "claude-code"), flattens("auto", "cursor-vscode"), flattens("text", None)
(True, False, True)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "CLIENTS",
    "STRUCTURED_MODES",
    "ClientReader",
    "Reads",
    "StructuredMode",
    "declared_client",
    "flattens",
    "reader_of",
    "reads_of",
]

#: What a client's model reads from a successful result that carries ``structuredContent``.
Reads = Literal["structured", "content", "both"]

#: ``--structured``: ``auto`` (by the client's row of :data:`CLIENTS`), ``keep`` (never),
#: ``text`` (for any client): whether ``structuredContent`` is delivered as the content.
StructuredMode = Literal["auto", "keep", "text"]
STRUCTURED_MODES: Final[tuple[StructuredMode, ...]] = ("auto", "keep", "text")


@dataclass(frozen=True, slots=True)
class ClientReader:
    """One client: its ``title``, the names it declares in ``initialize`` (``clientInfo.name``,
    compared without case, spaces, dashes or underscores), what its model ``reads`` and the
    public ``evidence`` for it (issues and pull requests, newest first)."""

    title: str
    names: tuple[str, ...]
    reads: Reads
    evidence: tuple[str, ...]
    #: The size (bytes) past which the client writes a result to a file and shows its model
    #: a preview of it, when it does (None: it shows every result whole).
    preview: int | None = None


#: Every client whose reading is known. Kept to public, dated evidence; a client is added
#: here only with a source that shows what its model receives.
CLIENTS: Final[tuple[ClientReader, ...]] = (
    ClientReader(
        "Claude Code",
        ("claude-code",),
        "structured",
        (
            "anthropics/claude-code#79944 (2.1.280: the model gets JSON.stringify("
            "structuredContent), with or without outputSchema)",
            "anthropics/claude-code#86032 (errors: only the text is read)",
            "anthropics/claude-code#59480, #55677 (the text is dropped)",
            "anthropics/claude-code#9962 (since 2.0.21)",
            "anthropics/claude-code#20342, caiowilson/MCP-memento#21 (a result over "
            "MAX_MCP_OUTPUT_TOKENS, 25,000 by default, about 50 KB, goes to a file; the model "
            "gets a preview)",
        ),
        preview=50_000,
    ),
    ClientReader(
        "Codex",
        ("codex-mcp-client", "codex"),
        "structured",
        (
            "openai/codex#38287 (the model receives only structuredContent)",
            "anomalyco/opencode#32074 ('matches Codex behavior': structuredContent as compact "
            "JSON)",
        ),
    ),
    ClientReader(
        "OpenCode",
        ("opencode",),
        "content",
        (
            "anomalyco/opencode#34505 (content first; structuredContent only when content is "
            "empty; it reverted #32074)",
            "anomalyco/opencode#38923 (only content[].text reaches the model)",
        ),
    ),
    ClientReader(
        "GitHub Copilot CLI",
        ("github-copilot-cli", "copilot-cli"),
        "both",
        (
            "github/copilot-cli#4515 (both content and structuredContent are in the context; "
            "the declared name is assumed, not seen)",
        ),
    ),
    ClientReader(
        "VS Code (GitHub Copilot)",
        ("visual-studio-code", "vscode"),
        "content",
        ("microsoft/vscode#254329 (agent mode reads content; structuredContent is open)",),
    ),
    ClientReader(
        "Claude Desktop, claude.ai",
        ("claude-ai", "claude-desktop"),
        "content",
        (
            "anthropics/claude-code#55677 (the same result shape reads its text on claude.ai)",
            "seuros/action_mcp#181 (Claude Desktop shows nothing for an empty content)",
        ),
    ),
)

#: Where a 2026-era client names itself: in each request's ``_meta`` (no ``initialize``).
_CLIENT_INFO_META: Final = "io.modelcontextprotocol/clientInfo"

_SEPARATORS: Final = re.compile(r"[\s_\-]+")


def _key(name: str) -> str:
    return _SEPARATORS.sub("", name.strip().lower())


_BY_NAME: Final[dict[str, ClientReader]] = {
    _key(name): client for client in CLIENTS for name in client.names
}


# (Asked on every call of a session: its client's name is one of a few.)
@functools.lru_cache(maxsize=64)
def reader_of(name: str | None) -> ClientReader | None:
    """The row of :data:`CLIENTS` for a declared client name (None: unknown).

    >>> reader_of("codex-mcp-client").title, reader_of("Visual Studio Code").reads
    ('Codex', 'content')
    """
    if not name:
        return None
    return _BY_NAME.get(_key(name))


def reads_of(name: str | None) -> Reads:
    """What the named client's model reads (an unknown client reads the content).

    >>> reads_of("claude-code"), reads_of(None)
    ('structured', 'content')
    """
    client = reader_of(name)
    return "content" if client is None else client.reads


def flattens(mode: StructuredMode, client: str | None) -> bool:
    """Whether results carrying ``structuredContent`` are delivered as content (the value in
    the content, ``structuredContent`` and the tools' ``outputSchema`` dropped) for this
    client under ``--structured mode``.

    >>> flattens("keep", "claude-code"), flattens("auto", None)
    (False, False)
    """
    if mode == "keep":
        return False
    return mode == "text" or reads_of(client) == "structured"


def declared_name(obj: Mapping[str, Any], field: str, meta_key: str) -> str:
    """The ``name`` of the implementation an MCP message declares: in its ``field``
    (``clientInfo`` in ``initialize``, ``serverInfo`` in its result) or, in the 2026-era
    sessionless protocol, under ``meta_key`` in its ``_meta``; "" when it gives none. One rule
    for a client's name and a server's.

    >>> declared_name({"serverInfo": {"name": "git"}}, "serverInfo", "x/serverInfo")
    'git'
    """
    meta = obj.get("_meta")
    for info in (
        obj.get(field),
        meta.get(meta_key) if isinstance(meta, dict) else None,
    ):
        name = info.get("name") if isinstance(info, dict) else None
        if isinstance(name, str) and name:
            return name
    return ""


def declared_client(params: Mapping[str, Any]) -> str:
    """The name a client declares in the params of ``initialize`` (``clientInfo.name``) or
    of a 2026-era request (its ``_meta``); "" when it gives none.

    >>> declared_client({"clientInfo": {"name": "claude-code", "version": "2.1.280"}})
    'claude-code'
    >>> declared_client({"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "codex"}}})
    'codex'
    """
    return declared_name(params, "clientInfo", _CLIENT_INFO_META)
