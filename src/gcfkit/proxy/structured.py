"""Results that carry ``structuredContent``, for the client that reads it (pure functions).

A structured reader's model (:mod:`gcfkit.readers`: Claude Code, Codex) reads
``JSON.stringify(structuredContent)`` of a successful result and never its text blocks, so
compressing the text saves it nothing. For such a client the proxy delivers the result
*flattened* (:func:`flatten`): the value of ``structuredContent`` becomes the one text block
of the content (compact JSON, which the rewriter then answers as any result: GCF, dense,
compact JSON, a relative answer, whichever is fewest tokens), and ``structuredContent`` is
dropped. ``tools/list`` loses each flattened tool's ``outputSchema`` (:func:`strip_output_schemas`)
so that no client (the official SDKs validate ``structuredContent`` against it) expects
typed output it will not get; the list stays deterministic (the same list in, the same out:
prompt caches keep working).

A file read stays byte for byte: the filesystem server's ``{"content": text}`` becomes the
file's text itself (fewer tokens than the JSON-escaped string, and what an edit must quote).

Untouched, whatever the client: errors (a structured reader reads an error's text), results
with blocks other than text (what the model makes of an image beside ``structuredContent``
is not known), and the tools whose results feed a UI (:func:`feeds_ui`: MCP Apps ``_meta.ui``,
or the policy's ``ui``).

:func:`model_view` is what the model reads of a result, for each kind of reader: the one
baseline of the ledger, ``gcfkit verify`` and the bench.

>>> r = {"content": [{"type": "text", "text": "3 items"}], "structuredContent": {"n": [1, 2, 3]}}
>>> model_view(r, "content"), model_view(r, "structured")
(['3 items'], ['{"n":[1,2,3]}'])
>>> flat = flatten(r, "structured")
>>> flat.result, flat.baseline
({'content': [{'type': 'text', 'text': '{"n":[1,2,3]}'}]}, None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..jsonio import dumps_compact
from ..readers import Reads

__all__ = [
    "Flat",
    "carries_structured",
    "feeds_ui",
    "file_text",
    "flatten",
    "model_view",
    "strip_output_schemas",
]

#: Where a tool (or a result) says its results feed a UI: MCP Apps (``_meta.ui``, and the
#: earlier flat key), and the Apps SDK's widget template.
_UI_META_KEYS: Final = ("ui", "ui/resourceUri", "openai/outputTemplate")


def carries_structured(result: Mapping[str, Any]) -> bool:
    """Whether a successful result carries ``structuredContent`` that a structured reader's
    model reads (an error's text is read instead; a ``null`` is no structured content).

    >>> carries_structured({"content": [], "structuredContent": {}})
    True
    >>> carries_structured({"structuredContent": {"e": 1}, "isError": True})
    False
    """
    return result.get("structuredContent") is not None and result.get("isError") is not True


def _texts(result: Mapping[str, Any]) -> list[str]:
    content = result.get("content")
    if not isinstance(content, list):
        return []
    return [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def model_view(
    result: Mapping[str, Any], reads: Reads, *, structured: str | None = None
) -> list[str]:
    """The texts a ``reads`` client's model reads of ``result`` (as the server sent it, or as
    the proxy delivered it): compact JSON of ``structuredContent`` for a structured reader
    (when the result carries it), the text blocks for a content reader (``structuredContent``
    when there is no content at all), both for a reader of both.

    >>> both = {"content": [{"type": "text", "text": "ok"}], "structuredContent": {"a": 1}}
    >>> model_view(both, "both"), model_view({"content": [], "structuredContent": 1}, "content")
    (['ok', '{"a":1}'], ['1'])

    ``structured``: the compact JSON of ``structuredContent``, when the caller made it.
    """
    texts = _texts(result)
    if not carries_structured(result):
        return texts
    value = dumps_compact(result["structuredContent"]) if structured is None else structured
    if reads == "structured" or (reads == "content" and not result.get("content")):
        return [value]
    if reads == "both":
        return [*texts, value]
    return texts


def file_text(value: Any) -> str | None:
    """The file's text when a file read's structured value is the filesystem server's
    ``{"content": text}`` (nothing else in it), else None.

    >>> file_text({"content": "a\\n"}), file_text({"content": "a", "size": 1})
    ('a\\n', None)
    """
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get("content"), str):
        text: str = value["content"]
        return text
    return None


@dataclass(frozen=True, slots=True)
class Flat:
    """A result flattened for its reader: the ``result`` to answer (``structuredContent``'s
    value as its one text block) and, when that text is not what the model would have read
    of the original, the ``baseline`` it would have read (the ledger's "before"); ``value``:
    the value whose compact JSON that text block is (None: the text is a file's), so that
    it is not parsed back."""

    result: dict[str, Any]
    baseline: list[str] | None
    value: Any = None


def flatten(result: Mapping[str, Any], reads: Reads, *, file: bool = False) -> Flat | None:
    """``result`` with the value of its ``structuredContent`` as its content, or None when it
    stays as it is (no structured content, an error, a block that is not text). ``file``: the
    tool reads files (a ``{"content": text}`` value becomes the text itself).

    >>> flat = flatten({"content": [], "structuredContent": {"content": "x = 1"}}, "structured",
    ...                file=True)
    >>> flat.result, flat.baseline
    ({'content': [{'type': 'text', 'text': 'x = 1'}]}, ['{"content":"x = 1"}'])
    >>> flatten({"content": [{"type": "image", "data": ""}], "structuredContent": {}}, "structured")
    """
    if not carries_structured(result):
        return None
    content = result.get("content", [])
    if not isinstance(content, list) or not all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in content
    ):
        return None
    value = result["structuredContent"]
    text = file_text(value) if file else None
    dumped = text is None
    if text is None:
        text = dumps_compact(value)
    out: dict[str, Any] = {}
    for key, item in result.items():
        if key == "content":
            out[key] = [{"type": "text", "text": text}]
        elif key != "structuredContent":
            out[key] = item
    out.setdefault("content", [{"type": "text", "text": text}])
    baseline = model_view(result, reads, structured=text if dumped else None)
    return Flat(out, None if baseline == [text] else baseline, value if dumped else None)


def feeds_ui(entry: Mapping[str, Any] | None) -> bool:
    """Whether a tool's ``tools/list`` entry (or a result) says its results feed a UI: its
    ``_meta`` names a UI resource (MCP Apps).

    >>> feeds_ui({"name": "chart", "_meta": {"ui": {"resourceUri": "ui://chart"}}})
    True
    >>> feeds_ui({"name": "list"}), feeds_ui(None)
    (False, False)
    """
    meta = entry.get("_meta") if entry is not None else None
    return isinstance(meta, dict) and any(meta.get(k) is not None for k in _UI_META_KEYS)


def strip_output_schemas(
    result: Mapping[str, Any], keeps: Callable[[Mapping[str, Any]], bool]
) -> dict[str, Any] | None:
    """A ``tools/list`` result without the ``outputSchema`` of every tool whose results are
    flattened (``keeps(entry)`` False), in the same order, nothing else changed; None when
    no tool loses one.

    >>> listed = {"tools": [{"name": "a", "outputSchema": {}}, {"name": "b"}]}
    >>> strip_output_schemas(listed, lambda tool: False)
    {'tools': [{'name': 'a'}, {'name': 'b'}]}
    >>> strip_output_schemas(listed, lambda tool: True) is None
    True
    """
    tools = result.get("tools")
    if not isinstance(tools, list):
        return None
    changed = False
    new_tools: list[Any] = []
    for tool in tools:
        if isinstance(tool, dict) and "outputSchema" in tool and not keeps(tool):
            tool = {k: v for k, v in tool.items() if k != "outputSchema"}
            changed = True
        new_tools.append(tool)
    if not changed:
        return None
    return {**result, "tools": new_tools}
