"""Which tools hand back a file's text: by name, title, description and input schema.

An agent edits a file by quoting what it read, so what a file read returns must reach it
byte for byte, even when the file is JSON (the proxy would otherwise minify it or turn it
into GCF, and the next exact-text edit fails). Servers do not say which tools those are, and
they name them every way: ``read_file``, ``read-file``, ``readFile``, ``get_file_text_by_path``
(an IDE's), ``cat``. So a tool counts as a file read when

* its name (or its title) reads as one: a reading verb (read, get, view, open, cat, ...) and
  a file noun (file, source, ...), or a verbatim verb (read, cat, view, ...) and a text noun
  (text, contents, resource, ...), and no word that says it returns *about* files instead
  (info, stat, tree, list, diagnostics, symbols, search, ...); or
* its description says it returns the contents of a file, and its input schema takes a
  path (``path``, ``file``, ``file_path``, ``uri``, ...); or
* it is a shell (``bash``, ``run_command``, ``execute_command``, a ``command`` argument and a
  description about running commands): what it prints is often a file (``cat x.json``).

When in doubt, it is a file read: leaving a JSON text alone costs some tokens, rewriting a
file the agent will edit costs the edit. A policy says otherwise explicitly
(:class:`~gcfkit.proxy.policy.Policy`: ``file_tools``, ``not_file_tools``, a tool's
``file``).

>>> [looks_like_file_read(n) for n in ("read-file", "readFile", "get_file_text_by_path")]
[True, True, True]
>>> [looks_like_file_read(n) for n in ("get_file_info", "list_directory", "git_log", "bash")]
[False, False, False, True]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["looks_like_file_read", "looks_like_shell", "words"]

_READ_VERBS: Final = frozenset(
    {"read", "get", "view", "open", "cat", "show", "fetch", "load", "print", "dump", "download"}
)
#: Verbs that, with any content noun, mean "give me the text as it is".
_VERBATIM_VERBS: Final = frozenset({"read", "cat", "view", "open", "dump", "print"})
#: Nouns that name a file: with any reading verb, a file read.
_FILE_NOUNS: Final = frozenset({"file", "files", "source", "sources", "blob"})
#: Nouns that name some text: a file read with a verbatim verb only (``get_page_content`` or
#: ``get-structured-content`` return data, ``read_text`` or ``view_content`` a text as is).
_TEXT_NOUNS: Final = frozenset(
    {"text", "content", "contents", "document", "doc", "raw", "resource"}
)
#: Words that say a tool returns facts about files rather than their text.
_ABOUT_FILES: Final = frozenset(
    {
        "info",
        "infos",
        "stat",
        "stats",
        "metadata",
        "meta",
        "tree",
        "list",
        "listing",
        "ls",
        "directory",
        "directories",
        "dir",
        "dirs",
        "diagnostics",
        "symbols",
        "symbol",
        "outline",
        "overview",
        "size",
        "sizes",
        "search",
        "find",
        "exists",
        "history",
        "blame",
        "diff",
        "status",
        "changes",
        "summary",
        "schema",
        "references",
        "problems",
        "errors",
    }
)
#: Names of file reads that are a single word.
_ONE_WORD_READS: Final = frozenset({"cat", "head", "tail", "view", "less", "more", "type"})

_SHELL_WORDS: Final = frozenset(
    {"bash", "sh", "zsh", "shell", "terminal", "powershell", "pwsh", "cmd", "console"}
)
_RUN_VERBS: Final = frozenset({"run", "execute", "exec", "invoke"})
_COMMAND_NOUNS: Final = frozenset({"command", "commands", "cmd", "script", "shell", "terminal"})

_PATH_ARGUMENTS: Final = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "filepath",
        "filename",
        "filepaths",
        "uri",
        "targetfile",
        "relativepath",
        "absolutepath",
        "pathinproject",
        "document",
    }
)
_COMMAND_ARGUMENTS: Final = frozenset({"command", "cmd", "script", "commandline"})

_RETURNS_FILE_TEXT: Final = re.compile(
    r"\b(?:read|reads|reading|return|returns|get|gets|show|shows|view|print|prints|output|"
    r"outputs|retrieve|retrieves|fetch|fetches)\b[^.]{0,60}?\b(?:contents?|text|source)\b"
    r"[^.]{0,40}?\bfiles?\b",
    re.IGNORECASE,
)
_RUNS_COMMANDS: Final = re.compile(
    r"\b(?:run|runs|execute|executes|exec)\b[^.]{0,40}?\b(?:shell|bash|terminal|command|"
    r"commands)\b",
    re.IGNORECASE,
)
_WORD: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z]|[0-9]|\b|_)|[A-Z]?[a-z]+|[0-9]+|[A-Z]+")


def words(name: str) -> list[str]:
    """The lower-case words of a tool name, however it is spelled.

    >>> words("get_file_text_by_path"), words("readFile"), words("read-file"), words("HTTPGet")
    (['get', 'file', 'text', 'by', 'path'], ['read', 'file'], ['read', 'file'], ['http', 'get'])
    """
    return [w.lower() for w in _WORD.findall(name)]


def _reads_as_file_read(name: str) -> bool:
    ws = words(name)
    if not ws:
        return False
    if len(ws) == 1 and ws[0] in _ONE_WORD_READS:
        return True
    if _ABOUT_FILES.intersection(ws):
        return False
    if _READ_VERBS.intersection(ws) and _FILE_NOUNS.intersection(ws):
        return True
    return bool(_VERBATIM_VERBS.intersection(ws) and _TEXT_NOUNS.intersection(ws))


def _argument_names(definition: Mapping[str, Any] | None) -> set[str]:
    schema = definition.get("inputSchema") if definition is not None else None
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return set()
    return {"".join(words(k)) for k in props if isinstance(k, str)}


def _titles(definition: Mapping[str, Any] | None) -> list[str]:
    if definition is None:
        return []
    annotations = definition.get("annotations")
    out = [definition.get("title")]
    if isinstance(annotations, Mapping):
        out.append(annotations.get("title"))
    return [t for t in out if isinstance(t, str)]


def looks_like_shell(name: str, definition: Mapping[str, Any] | None = None) -> bool:
    """Whether a tool runs shell commands (its output is whatever they print).

    >>> looks_like_shell("run_command"), looks_like_shell("execute_command")
    (True, True)
    >>> looks_like_shell("run_tests"), looks_like_shell("bash")
    (False, True)
    """
    for text in [name, *_titles(definition)]:
        ws = set(words(text))
        if ws & _SHELL_WORDS or (ws & _RUN_VERBS and ws & _COMMAND_NOUNS):
            return True
    description = definition.get("description") if definition is not None else None
    return (
        isinstance(description, str)
        and _RUNS_COMMANDS.search(description) is not None
        and bool(_argument_names(definition) & _COMMAND_ARGUMENTS)
    )


def looks_like_file_read(name: str, definition: Mapping[str, Any] | None = None) -> bool:
    """Whether a tool's results are (or may be) a file's text: see the module docstring.
    ``definition`` is the tool's entry in ``tools/list`` when the proxy has seen one.

    >>> looks_like_file_read("fetch_page", {"description": "Read the contents of a file.",
    ...                                     "inputSchema": {"properties": {"path": {}}}})
    True
    >>> looks_like_file_read("get_file_info", {"description": "Size and times of a file.",
    ...                                        "inputSchema": {"properties": {"path": {}}}})
    False
    """
    if _reads_as_file_read(name) or any(_reads_as_file_read(t) for t in _titles(definition)):
        return True
    if looks_like_shell(name, definition):
        return True
    if definition is None:
        return False
    description = definition.get("description")
    if not isinstance(description, str) or _RETURNS_FILE_TEXT.search(description) is None:
        return False
    if _ABOUT_FILES.intersection(words(name)):
        return False
    return bool(_argument_names(definition) & _PATH_ARGUMENTS)
