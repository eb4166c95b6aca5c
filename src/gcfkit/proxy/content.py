"""A tool result's content blocks: which are text, which are answered as one value, and
where the new texts go back, into the content (:func:`reassemble`) and into the JSON-RPC
message (:func:`edited_line`: every byte the proxy did not change as the server wrote it,
:func:`~gcfkit.proxy.jsonrpc.dump_edited`). :class:`~gcfkit.proxy.rewrite.Rewriter` decides
what each text becomes; this module only takes results apart and puts them back together.

>>> result = {"content": [{"type": "text", "text": "[1]"}, {"type": "image", "data": ""}]}
>>> text_blocks_of(result)
['[1]']
>>> blocks = text_blocks(content_of(result))
>>> reassemble(content_of(result), blocks, [Piece((0,), [1])], ["[1] !"])
[{'type': 'text', 'text': '[1] !'}, {'type': 'image', 'data': ''}]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GCFError
from ..jsonio import loads_json
from .jsonrpc import dump_edited

__all__ = [
    "Piece",
    "content_of",
    "edited_line",
    "json_value_of",
    "pieces_of",
    "reassemble",
    "text_blocks",
    "text_blocks_of",
]


@dataclass(frozen=True, slots=True)
class Piece:
    """Text blocks answered as one value: their positions among the result's text blocks."""

    blocks: tuple[int, ...]
    value: Any


def json_value_of(text: str) -> Any:
    """The JSON value of ``text`` if it is a JSON object or array, else ``None``."""
    i = 0
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    if i == n or text[i] not in "{[":
        return None
    try:
        value = loads_json(text)
    except (GCFError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def content_of(result: dict[str, Any]) -> list[Any]:
    """A result's ``content`` list ([] when it is not a list)."""
    content = result.get("content")
    return content if isinstance(content, list) else []


def text_blocks(content: Any) -> list[tuple[int, dict[str, Any]]]:
    """The text blocks of ``content`` with their positions in it."""
    if not isinstance(content, list):
        return []
    return [
        (i, b)
        for i, b in enumerate(content)
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def text_blocks_of(result: dict[str, Any]) -> list[str]:
    """The texts of a result's text blocks, in order."""
    return [block["text"] for _, block in text_blocks(content_of(result))]


def pieces_of(
    blocks: list[tuple[int, dict[str, Any]]], values: list[Any], *, join: bool, content_length: int
) -> list[Piece]:
    """Which text blocks are answered as one value: all of them as one array when ``join``
    applies (every block of the content is a plain text block holding a JSON object), else
    each JSON block alone."""
    joinable = (
        join
        and len(blocks) >= 2
        and len(blocks) == content_length
        and all(isinstance(v, dict) for v in values)
        and all(set(block) == {"type", "text"} for _, block in blocks)
    )
    if joinable:
        return [Piece(tuple(range(len(blocks))), list(values))]
    return [Piece((i,), v) for i, v in enumerate(values) if v is not None]


def reassemble(
    content: list[Any],
    blocks: list[tuple[int, dict[str, Any]]],
    answered: Sequence[Piece],
    texts: Sequence[str | None],
) -> list[Any] | None:
    """The new content: each answered piece's new text (None: it keeps its original) in
    its first block, its other blocks gone, everything else in place; None when every piece
    keeps its original."""
    new: dict[int, str] = {}
    merged: set[int] = set()
    for piece, text in zip(answered, texts, strict=True):
        if text is None:
            continue
        first, *rest = (blocks[i][0] for i in piece.blocks)
        new[first] = text
        merged.update(rest)
    if not new:
        return None
    return [
        {**item, "text": new[i]} if i in new else item
        for i, item in enumerate(content)
        if i not in merged
    ]


def edited_line(msg: dict[str, Any], result: dict[str, Any], line: bytes) -> bytes:
    """The response ``line`` (parsed: ``msg``) with ``result`` in place of its result.

    >>> edited_line({"id": 1, "result": {}}, {"a": 1.50}, b'{"id": 1, "result": {}}')
    b'{"id":1,"result":{"a":1.5}}\\n'
    """
    return dump_edited({**msg, "result": result}, msg, line)
