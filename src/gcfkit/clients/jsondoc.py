"""A JSON document edited in its own style: untouched bytes stay untouched.

:class:`JsonDocument` reads a JSON file strictly (duplicate keys, comments, NaN and a non-object
top level are refused with :class:`~gcfkit.errors.ConfigError` ``malformed_config``) and
remembers its :class:`JsonStyle` (indent, separators, ASCII escapes, CRLF, final newline, BOM).
:meth:`JsonDocument.dump` writes edited data back so that every part that did not change stays
byte for byte: through the style when it reproduces the file, else (a file laid out by hand,
short arrays on one line, blank lines, ``1e3``) by rewriting only the values that changed in
the file's own text.

>>> text = '{\\r\\n    "a": 1,\\r\\n    "b": [\\r\\n        true\\r\\n    ]\\r\\n}\\r\\n'
>>> style = detect_style(text, {"a": 1, "b": [True]})
>>> style.dump({"a": 1, "b": [True]}) == text
True
>>> style.dump({"a": 2, "b": [True]}).replace("\\r\\n", "|")
'{|    "a": 2,|    "b": [|        true|    ]|}|'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..jsonio import same_value

__all__ = ["JsonDocument", "JsonObject", "JsonStyle", "blank_jsonc", "detect_style", "malformed"]

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class JsonStyle:
    """How a JSON file is laid out; :meth:`dump` writes data back in that layout."""

    indent: str | None
    compact: bool
    ensure_ascii: bool
    newline: str
    final_newline: bool
    bom: bool

    def dump(self, data: Any) -> str:
        """``data`` as this file's text."""
        if self.indent is None:
            separators = (",", ":") if self.compact else (", ", ": ")
            text = json.dumps(data, ensure_ascii=self.ensure_ascii, separators=separators)
        else:
            text = json.dumps(data, ensure_ascii=self.ensure_ascii, indent=self.indent)
        if self.newline != "\n":
            # json.dumps escapes newlines inside strings, so every raw LF is layout.
            text = text.replace("\n", self.newline)
        if self.final_newline:
            text += self.newline
        return ("\ufeff" + text) if self.bom else text


def detect_style(text: str, data: Any) -> JsonStyle:
    """The style of ``text`` (whose parsed value is ``data``); the exact one when a candidate
    reproduces the text, else the closest guess."""
    bom = text.startswith("\ufeff")
    body = text[1:] if bom else text
    newline = "\r\n" if "\r\n" in body else "\n"
    final_newline = body.endswith("\n")
    stripped = body.rstrip("\r\n")
    guess_indent: str | None = None
    for line in stripped.splitlines()[1:]:
        lead = line[: len(line) - len(line.lstrip(" \t"))]
        if lead:
            guess_indent = lead
            break
    if guess_indent is None and "\n" in stripped:
        guess_indent = "  "
    escapes_non_ascii = stripped.isascii() and "\\u" in stripped
    indents: list[str | None] = [guess_indent, "  ", "    ", "\t", None]
    # Prefer a style that reproduces the file exactly: then untouched bytes stay untouched.
    for indent in indents:
        for compact in (False, True) if indent is None else (False,):
            for ensure_ascii in (escapes_non_ascii, not escapes_non_ascii):
                style = JsonStyle(indent, compact, ensure_ascii, newline, final_newline, bom)
                if style.dump(data) == text:
                    return style
    compact = guess_indent is None and ": " not in stripped
    return JsonStyle(guess_indent, compact, escapes_non_ascii, newline, final_newline, bom)


_WHITESPACE = " \t\n\r"
_SCANNER = json.JSONDecoder()


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _member_spans(text: str, start: int) -> list[tuple[str, int, int]]:
    """Each member of the object whose ``{`` is at ``start``: key, value start, value end."""
    spans: list[tuple[str, int, int]] = []
    i = _skip(text, start + 1)
    if text[i] == "}":
        return spans
    while True:
        key, i = _SCANNER.raw_decode(text, i)
        i = _skip(text, _skip(text, i) + 1)  # past the colon
        value_end = _SCANNER.raw_decode(text, i)[1]
        spans.append((key, i, value_end))
        i = _skip(text, value_end)
        if text[i] != ",":
            return spans
        i = _skip(text, i + 1)


def _splice(
    text: str, scan: str, start: int, end: int, old: Any, new: Any, style: JsonStyle
) -> str:
    """The text for ``new`` where ``text[start:end]`` spells ``old``: the same bytes where the
    value did not change, an object with the same keys member by member, else ``new`` written
    as the value it replaces was (on one line, or indented from the line it starts on).
    ``scan`` is ``text`` with any comments blanked out (:func:`blank_jsonc`): positions are
    found in it, bytes copied from ``text``."""
    if same_value(old, new, number_types=True):
        return text[start:end]
    if isinstance(old, dict) and isinstance(new, dict) and list(old) == list(new):
        parts: list[str] = []
        pos = start
        for key, value_start, value_end in _member_spans(scan, start):
            parts.append(text[pos:value_start])
            parts.append(_splice(text, scan, value_start, value_end, old[key], new[key], style))
            pos = value_end
        parts.append(text[pos:end])
        return "".join(parts)
    if "\n" not in text[start:end]:
        separators = (",", ":") if style.compact else (", ", ": ")
        return json.dumps(new, ensure_ascii=style.ensure_ascii, separators=separators)
    line = text[text.rfind("\n", 0, start) + 1 : start]
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    written = json.dumps(new, ensure_ascii=style.ensure_ascii, indent=style.indent or "  ")
    return written.replace("\n", style.newline + lead)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> JsonObject:
    result: JsonObject = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def blank_jsonc(text: str) -> str:
    """``text`` with its comments (``//`` and ``/* */``) and trailing commas turned into
    spaces (line breaks kept), so that it parses as JSON and every position stays where it
    was: the JSON with comments that VS Code, Gemini CLI and OpenCode read.

    >>> blank_jsonc('{"a": [1, 2,], // two\\n "b": "//x", /* c */}')
    '{"a": [1, 2 ],       \\n "b": "//x"         }'
    """
    out = list(text)
    last = -1  # where the last character that is not whitespace or a comment is
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            last, i = j, j + 1
            continue
        if c == "/" and text.startswith(("//", "/*"), i):
            closing = "\n" if text[i + 1] == "/" else "*/"
            j = text.find(closing, i + 2)
            if j < 0:
                j = n if closing == "\n" else i  # an unclosed /* stays: the parse fails
            else:
                j += 0 if closing == "\n" else 2
            for k in range(i, j):
                if out[k] not in "\r\n":
                    out[k] = " "
            i = max(j, i + 1)
            continue
        if c in "}]" and last >= 0 and out[last] == ",":
            out[last] = " "
        if c not in " \t\r\n":
            last = i
        i += 1
    return "".join(out)


@dataclass
class JsonDocument:
    """A JSON object file: its raw bytes (None when missing), data and style; for a file
    with comments (``jsonc``), ``scan`` is its text with them blanked out."""

    path: Path
    raw: bytes | None
    data: JsonObject
    style: JsonStyle
    scan: str | None = None

    @property
    def text(self) -> str:
        """The file's text ("" when missing)."""
        return "" if self.raw is None else self.raw.decode("utf-8")

    def dump(self, data: JsonObject) -> str:
        """``data`` as this file's new text: every value that did not change keeps its bytes.

        >>> text = '{"a": [1, 2], "b": {"x": 1e3}}\\n'
        >>> data = json.loads(text)
        >>> doc = JsonDocument(Path("c.json"), text.encode(), data, detect_style(text, data))
        >>> doc.dump({"a": [1, 2, 3], "b": {"x": 1e3}})
        '{"a": [1, 2, 3], "b": {"x": 1e3}}\\n'
        """
        text = self.text
        body = text[1:] if text.startswith("\ufeff") else text
        if self.raw is None or not body.strip():
            return self.style.dump(data)
        if self.scan is None and self.style.dump(self.data) == text:
            return self.style.dump(data)
        scan = body if self.scan is None else self.scan
        start = _skip(scan, 0)
        end = _SCANNER.raw_decode(scan, start)[1]
        middle = _splice(body, scan, start, end, self.data, data, self.style)
        spliced = body[:start] + middle + body[end:]
        return ("\ufeff" + spliced) if self.style.bom else spliced

    @classmethod
    def load(cls, path: Path, *, jsonc: bool = False) -> JsonDocument:
        """Read ``path``; a missing or blank file is an empty object in a default style.
        ``jsonc`` accepts comments and trailing commas (they stay as they are)."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, None, {}, JsonStyle("  ", False, False, "\n", True, False))
        except OSError as e:
            raise ConfigError("io_error", f"cannot read {path}: {e.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise malformed(path, "it is not UTF-8") from None
        body = text[1:] if text.startswith("\ufeff") else text
        if not body.strip():
            return cls(path, raw, {}, JsonStyle("  ", False, False, "\n", True, False))
        scan = blank_jsonc(body) if jsonc else body
        try:
            data = json.loads(
                scan, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
            )
        except json.JSONDecodeError as e:
            hint = ""
            if "Expecting" in e.msg and not jsonc:
                hint = " (comments and trailing commas are not JSON)"
            raise malformed(path, f"{e.msg} at line {e.lineno} column {e.colno}{hint}") from None
        except (ValueError, RecursionError) as e:
            raise malformed(path, str(e)) from None
        if not isinstance(data, dict):
            raise malformed(path, "the top level is not a JSON object")
        return cls(path, raw, data, detect_style(text, data), scan if scan != body else None)


def malformed(path: Path, why: str) -> ConfigError:
    """The error for a config file gcfkit will not touch: it names the file and says why."""
    return ConfigError(
        "malformed_config", f"{path}: {why}; the file was left exactly as it was, fix it first"
    )
