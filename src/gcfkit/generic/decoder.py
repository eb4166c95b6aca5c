"""Strict decoder for the generic profile (spec §7).

First version: header checks, UTF-8 validation, root scalars and flat key=value objects.
The full body grammar follows.
"""

from __future__ import annotations

from typing import Any

from ..errors import GCFError
from ..scalar import parse_key_at, parse_scalar

__all__ = ["loads"]


def _to_text(data: str | bytes) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise GCFError("invalid_utf8", f"malformed UTF-8 at byte {e.start}", line) from None


def loads(text: str | bytes) -> Any:
    """Decode a generic-profile GCF payload into plain JSON-model values.

    >>> loads("GCF profile=generic\\nname=Ada\\nage=36\\n")
    {'name': 'Ada', 'age': 36}
    """
    lines = _to_text(text).split("\n")
    if not lines[0].startswith("GCF"):
        raise GCFError("missing_header", "payload must start with 'GCF profile=generic'", 1)
    obj: dict[str, Any] = {}
    for i, raw in enumerate(lines[1:], start=2):
        s = raw.rstrip("\r")
        if not s.strip() or s.startswith("# "):
            continue
        if s.startswith("="):
            return parse_scalar(s[1:].strip(), i)
        key, end = parse_key_at(s, 0, i)
        if end >= len(s) or s[end] != "=":
            raise GCFError("invalid_line", "expected key=value", i)
        if key in obj:
            raise GCFError("duplicate_key", f"duplicate member key {key!r}", i)
        obj[key] = parse_scalar(s[end + 1 :].strip(), i)
    return obj
