"""GCX1: the tab-separated wire format for tabular MCP tool results (gcx1-wire-format.txt).

A payload is one or more sections; each section is a header line and tab-separated rows::

    GCX1 tool=search_symbols rows=2 total=2 truncated=false fields=id,kind,line
    pkg::New\tfunction\t62
    pkg::Start\tmethod\t118

Grammar (from the format's write-up; ``fields=`` comes last in what we emit, either
order is decoded)::

    payload   = section { section } ;
    section   = header row-line { row-line | comment } ;
    header    = "GCX1" SP "tool=" token { SP key-value } SP "fields=" field-list LF ;
    row-line  = value { TAB value } LF | LF ;
    value     = { "\\\\" | "\\t" | "\\n" | any-byte-except-TAB-LF-BACKSLASH } ;

The write-up leaves some things open; gcfkit defines them as follows.

* **Comments** are lines starting with ``#``. A line starting ``GCX`` + digits is a
  header; any version other than 1 is refused (``unsupported_profile``) so the caller can
  re-issue the call without GCX.
* **Metadata**: ``rows=`` (checked against the section's row count), ``total=`` (int),
  ``truncated=`` (``true``/``false``) and ``section=NAME`` (names the sections of a
  multi-section payload, the write-up's ``.nodes``/``.edges``); any other key=value is
  kept as a string.
* **Cell types.** Without a declaration a cell is read as the format's JSON-equivalent
  literal: empty = the field is absent from that row, ``null``, ``true``/``false``, a JSON
  number (``int`` without fraction/exponent, else ``float``), anything else a string.
  A row shorter than ``fields=`` leaves its trailing fields absent (as the write-up's
  example does with ``sig``). When that reading would change a value, the encoder
  declares column types with ``types=`` (one code per field): ``a`` the literal reading
  above, ``s`` verbatim string, ``j`` a JSON scalar (empty = absent).

What GCX1 preserves, compared with GCF: every value of a *flat* table (a list of objects
whose values are JSON scalars), types included (bool, int, float incl. ``-0.0``, null,
strings with any characters), which fields each row has, and named multi-section
payloads (a dict of such tables). It does not carry nested objects or arrays, lists that
are not lists of objects, top-level scalars, empty field names or names containing a
space, comma, tab or line break, or per-row key order (rows come back in the header's
field order). Those are refused with ``GCFError("unsupported_shape", ...)``: callers fall
back to JSON. GCF carries the whole JSON data model, key order included.

>>> text = dumps([{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}], tool="users")
>>> text.splitlines()
['GCX1 tool=users rows=2 fields=id,name', '1\\tAda', '2\\tBob']
>>> loads(text)
[{'id': 1, 'name': 'Ada'}, {'id': 2, 'name': 'Bob'}]
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import GCFDecodeError, GCFEncodeError, at_path, placed
from .grammar import NUMBER_RE, SURROGATE
from .header import to_text

__all__ = ["Section", "dumps", "dumps_sections", "loads", "parse"]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_HEADER: Final = re.compile(r"GCX([0-9]+)(?: |\Z)")
_ESCAPE_TABLE: Final = {0x5C: "\\\\", 0x09: "\\t", 0x0A: "\\n"}
_ESCAPE_SEQ: Final = re.compile(r"\\(.?)", re.DOTALL)
_UNESCAPE: Final = {"\\": "\\", "t": "\t", "n": "\n"}
_BAD_NAME: Final = re.compile(r"[ ,\t\n\r]")
_BAD_TOKEN: Final = re.compile(r"[ \t\n\r]")
_TYPE_CODES: Final = ("a", "s", "j")
_RESERVED_META: Final = ("tool", "fields", "section", "rows", "types")

Scalar = str | int | float | bool | None


@dataclass
class Section:
    """One GCX1 section: its header fields and its rows (dicts in field order).

    ``meta`` holds every header key=value other than ``tool`` and ``fields`` with its
    decoded type (``rows``/``total`` int, ``truncated`` bool, others str).

    >>> s = parse("GCX1 tool=t fields=a,b rows=1\\n1\\tx\\n")[0]
    >>> s.tool, s.fields, s.meta, s.rows
    ('t', ['a', 'b'], {'rows': 1}, [{'a': 1, 'b': 'x'}])
    """

    tool: str
    fields: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str | None:
        """The ``section=`` name, or None."""
        v = self.meta.get("section")
        return v if isinstance(v, str) else None


# ---------------------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------------------


def _escape(s: str) -> str:
    return s.translate(_ESCAPE_TABLE) if ("\\" in s or "\t" in s or "\n" in s) else s


def _unescape(s: str, line: int) -> str:
    if "\\" not in s:
        return s

    def repl(m: re.Match[str]) -> str:
        try:
            return _UNESCAPE[m.group(1)]
        except KeyError:
            raise GCFDecodeError(
                "invalid_escape",
                f"\\{m.group(1)} is not a GCX1 escape; only \\\\, \\t and \\n exist",
                line,
            ) from None

    return _ESCAPE_SEQ.sub(repl, s)


def _number(text: str, m: re.Match[str], line: int | None) -> int | float:
    if m.group(1) is None and m.group(2) is None:
        if len(text) > 20:
            raise GCFDecodeError("out_of_range", f"integer {text[:24]}... is outside int64", line)
        i = int(text)
        if not _INT64_MIN <= i <= _INT64_MAX:
            raise GCFDecodeError("out_of_range", f"integer {text} is outside int64", line)
        return i
    f = float(text)
    if math.isinf(f):
        raise GCFDecodeError("out_of_range", f"number {text[:40]} overflows a double", line)
    return f


_ABSENT: Final = object()


def _read_auto(text: str, line: int) -> Any:
    if not text:
        return _ABSENT
    if text == "null":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    c = text[0]
    if c == "-" or "0" <= c <= "9":
        m = NUMBER_RE.match(text)
        if m is not None:
            return _number(text, m, line)
    return text


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _read_json(text: str, line: int) -> Any:
    if not text:
        return _ABSENT
    if text != text.strip():
        raise GCFDecodeError("trailing_characters", f"whitespace around JSON cell {text!r}", line)
    try:
        v = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        raise GCFDecodeError(
            "invalid_line", f"cell {text[:40]!r} of a types=j column is not JSON", line
        ) from None
    if isinstance(v, (dict, list)):
        raise GCFDecodeError("invalid_line", "a types=j cell must hold a JSON scalar", line)
    if isinstance(v, int) and not isinstance(v, bool) and not _INT64_MIN <= v <= _INT64_MAX:
        raise GCFDecodeError("out_of_range", f"integer {text[:24]} is outside int64", line)
    if isinstance(v, float) and math.isinf(v):
        raise GCFDecodeError("out_of_range", f"number {text[:40]} overflows a double", line)
    return v


def _check_scalar(v: Any) -> None:
    if v is None or isinstance(v, (bool, str)):
        if isinstance(v, str) and SURROGATE.search(v):
            raise GCFEncodeError("invalid_surrogate", f"string {v[:40]!r} holds a lone surrogate")
        return
    if isinstance(v, int):
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise GCFEncodeError("out_of_range", f"integer {v} is outside int64")
        return
    if isinstance(v, float):
        if not math.isfinite(v):
            raise GCFEncodeError("out_of_range", f"{v!r} is not a JSON number")
        return
    if isinstance(v, (dict, list, tuple)):
        raise GCFEncodeError(
            "unsupported_shape",
            "GCX1 rows are flat: a nested object or array cannot be carried; send JSON (or GCF)",
        )
    raise GCFEncodeError("unsupported_type", f"{type(v).__name__} is not a JSON value")


def _auto_text(v: Any) -> str | None:
    """The auto-typed cell for ``v``, or None when the literal reading would change it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        # repr keeps a fraction or exponent, so an integral float stays a float.
        return repr(v)
    if not v or v in ("null", "true", "false"):
        return None
    c = v[0]
    if (c == "-" or "0" <= c <= "9") and NUMBER_RE.match(v):
        return None
    return _escape(v)


def _json_text(v: Any) -> str:
    return _escape(json.dumps(v, ensure_ascii=False))


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def _check_token(what: str, s: str) -> str:
    if not isinstance(s, str) or not s or _BAD_TOKEN.search(s):
        raise GCFEncodeError(
            "unsupported_shape",
            f"{what} {s!r} must be a non-empty string without spaces, tabs or line breaks",
        )
    return s


def _table_fields(rows: Sequence[Any], fields: Sequence[str] | None) -> list[str]:
    if not isinstance(rows, (list, tuple)):
        raise GCFEncodeError(
            "unsupported_shape",
            "GCX1 carries a list of objects (or a dict of such lists); "
            f"got {type(rows).__name__}: send JSON (or GCF)",
        )
    order: dict[str, None] = dict.fromkeys(fields) if fields is not None else {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            error = GCFEncodeError(
                "unsupported_shape",
                f"item {i} is {type(row).__name__}, not an object: GCX1 carries "
                "lists of objects; send JSON (or GCF)",
            )
            raise at_path(error, i)
        for k in row:
            if k not in order:
                if fields is not None:
                    raise GCFEncodeError(
                        "unsupported_shape", f"item {i} has key {k!r} missing from fields="
                    )
                order[k] = None
    names = list(order)
    for name in names:
        if not isinstance(name, str) or not name or _BAD_NAME.search(name):
            raise GCFEncodeError(
                "unsupported_shape",
                f"field name {name!r} cannot be written in fields= (empty, or holds a space, "
                "comma, tab or line break); send JSON (or GCF)",
            )
    return names


def _column_type(rows: Sequence[dict[str, Any]], names: list[str], col: int) -> str:
    name = names[col]
    later = names[col + 1 :]
    auto_ok = True
    string_ok = True
    for i, row in enumerate(rows):
        if name not in row:
            # A verbatim-string column can only omit a value by ending the row early.
            if any(k in row for k in later):
                string_ok = False
            continue
        v = row[name]
        try:
            _check_scalar(v)
        except GCFEncodeError as e:
            raise at_path(at_path(e, name), i) from None
        if not isinstance(v, str):
            string_ok = False
        if auto_ok and _auto_text(v) is None:
            auto_ok = False
    if auto_ok:
        return "a"
    return "s" if string_ok else "j"


def _cell(v: Any, code: str) -> str:
    if code == "a":
        text = _auto_text(v)
        assert text is not None
        return text
    if code == "s":
        return _escape(v)
    return _json_text(v)


def _render_rows(rows: Sequence[dict[str, Any]], names: list[str], types: list[str]) -> list[str]:
    out: list[str] = []
    for row in rows:
        cells = [_cell(row[n], types[i]) if n in row else "" for i, n in enumerate(names)]
        while cells and cells[-1] == "" and names[len(cells) - 1] not in row:
            cells.pop()
        out.append("\t".join(cells))
    return out


def _needs_guard(line: str, row: dict[str, Any]) -> bool:
    # Lines that would read back as a comment, a header, or an all-absent row.
    if not line:
        return bool(row)
    return line[0] == "#" or (line.startswith("GCX") and _HEADER.match(line) is not None)


def _encode_section(
    rows: Sequence[Any],
    *,
    tool: str,
    name: str | None,
    fields: Sequence[str] | None,
    meta: Mapping[str, Any],
) -> str:
    try:
        names = _table_fields(rows, fields)
        types = [_column_type(rows, names, i) for i in range(len(names))]
    except GCFEncodeError as e:
        raise e if name is None else at_path(e, name) from None  # the section's value
    lines = _render_rows(rows, names, types)
    if names and types[0] != "j" and any(map(_needs_guard, lines, rows)):
        # A JSON cell always starts with '"', a digit, '-', 't', 'f' or 'n'.
        types[0] = "j"
        lines = _render_rows(rows, names, types)
    head = ["GCX1", f"tool={_check_token('tool', tool)}"]
    if name is not None:
        head.append(f"section={_check_token('section name', name)}")
    head.append(f"rows={len(rows)}")
    for k, v in meta.items():
        if v is None:
            continue
        if k in _RESERVED_META:
            raise GCFEncodeError("unsupported_shape", f"header key {k!r} is reserved")
        _check_token("header key", k)
        if "=" in k:
            raise GCFEncodeError("unsupported_shape", f"header key {k!r} holds '='")
        head.append(f"{k}={_meta_text(k, v)}")
    if any(t != "a" for t in types):
        head.append("types=" + ",".join(types))
    head.append("fields=" + ",".join(names))
    return " ".join(head) + "\n" + "".join(line + "\n" for line in lines)


def _meta_text(key: str, v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _check_token(f"value of {key}=", v)
    raise GCFEncodeError(
        "unsupported_shape", f"header value {key}={v!r} must be a str, int or bool"
    )


def dumps(
    value: Any,
    *,
    tool: str = "unknown",
    fields: Sequence[str] | None = None,
    total: int | None = None,
    truncated: bool | None = None,
    **meta: str | int | bool,
) -> str:
    """GCX1 text of a list of flat objects, or of a dict of such lists (one section each).

    ``fields`` fixes the column order (it may list fields no row has); ``total``,
    ``truncated`` and extra ``meta`` go into every section header. Shapes GCX1 cannot
    carry raise ``GCFError`` with code ``unsupported_shape``: fall back to JSON.

    >>> text = dumps({"nodes": [{"id": 1}], "edges": [{"a": 1, "b": 2}]}, tool="g")
    >>> print(text.replace("\\t", " | "), end="")
    GCX1 tool=g section=nodes rows=1 fields=id
    1
    GCX1 tool=g section=edges rows=1 fields=a,b
    1 | 2
    """
    all_meta: dict[str, Any] = {"total": total, "truncated": truncated, **meta}
    if fields is not None and len(set(fields)) != len(fields):
        raise GCFEncodeError(
            "duplicate_field_name", f"fields= lists a name twice: {list(fields)!r}"
        )
    if isinstance(value, dict):
        if not value:
            raise GCFEncodeError(
                "unsupported_shape", "an empty object has no table for GCX1; send JSON"
            )
        return "".join(
            _encode_section(rows, tool=tool, name=_section_name(k), fields=fields, meta=all_meta)
            for k, rows in value.items()
        )
    return _encode_section(value, tool=tool, name=None, fields=fields, meta=all_meta)


def _section_name(k: Any) -> str:
    if not isinstance(k, str):
        raise GCFEncodeError("unsupported_shape", f"section name {k!r} is not a string")
    return k


def dumps_sections(sections: Sequence[Section]) -> str:
    """Re-emit parsed sections (header metadata in its order, ``fields=`` last).

    >>> text = "GCX1 tool=t fields=a rows=1 total=9\\n1\\n"
    >>> dumps_sections(parse(text))
    'GCX1 tool=t rows=1 total=9 fields=a\\n1\\n'
    """
    out: list[str] = []
    for s in sections:
        meta = {k: v for k, v in s.meta.items() if k not in ("section", "rows", "types")}
        total = meta.pop("total", None)
        truncated = meta.pop("truncated", None)
        text = _encode_section(
            s.rows,
            tool=s.tool,
            name=s.name,
            fields=s.fields,
            meta={"total": total, "truncated": truncated, **meta},
        )
        out.append(text)
    return "".join(out)


# ---------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------


def _parse_header(
    text: str, lineno: int
) -> tuple[str, list[str], list[str] | None, dict[str, Any]]:
    m = _HEADER.match(text)
    if m is None:
        raise GCFDecodeError(
            "missing_header", "a GCX1 payload starts with a 'GCX1 tool=...' line", lineno
        )
    if m.group(1) != "1":
        raise GCFDecodeError(
            "unsupported_profile",
            f"GCX{m.group(1)} is not GCX1; re-issue the call without the GCX format",
            lineno,
        )
    parts = text[m.end() :].split(" ") if m.end() < len(text) else []
    seen: dict[str, str] = {}
    for p in parts:
        key, eq, val = p.partition("=")
        if not eq or not key:
            raise GCFDecodeError(
                "malformed_header_field", f"header field {p!r} is not key=value", lineno
            )
        if key in seen:
            raise GCFDecodeError("duplicate_header_field", f"{key}= appears twice", lineno)
        seen[key] = val
    if "tool" not in seen:
        raise GCFDecodeError("malformed_header_field", "the header has no tool= field", lineno)
    if "fields" not in seen:
        raise GCFDecodeError("malformed_header_field", "the header has no fields= field", lineno)
    tool = seen.pop("tool")
    raw_fields = seen.pop("fields")
    names = raw_fields.split(",") if raw_fields else []
    if len(set(names)) != len(names):
        raise GCFDecodeError("duplicate_field_name", "a field is declared twice in fields=", lineno)
    if "" in names:
        raise GCFDecodeError("malformed_header_field", "empty field name in fields=", lineno)
    types: list[str] | None = None
    meta: dict[str, Any] = {}
    for key, val in seen.items():
        if key in ("rows", "total"):
            if not val.isascii() or not val.isdigit() or (len(val) > 1 and val[0] == "0"):
                raise GCFDecodeError(
                    "malformed_header_field", f"{key}={val!r} is not a count", lineno
                )
            meta[key] = int(val)
        elif key == "truncated":
            if val not in ("true", "false"):
                raise GCFDecodeError(
                    "malformed_header_field", f"truncated={val!r} is not true/false", lineno
                )
            meta[key] = val == "true"
        elif key == "types":
            types = val.split(",")
            if len(types) != len(names) or any(t not in _TYPE_CODES for t in types):
                raise GCFDecodeError(
                    "malformed_header_field",
                    f"types={val!r} needs one of a/s/j per field ({len(names)} fields)",
                    lineno,
                )
            meta[key] = val
        else:
            meta[key] = val
    return tool, names, types, meta


def _decode_row(
    line: str, names: list[str], types: list[str] | None, lineno: int
) -> dict[str, Any]:
    if not line:
        return {}
    cells = line.split("\t")
    if len(cells) > len(names):
        raise GCFDecodeError(
            "row_width_mismatch",
            f"row has {len(cells)} values but fields= declares {len(names)}",
            lineno,
        )
    row: dict[str, Any] = {}
    for i, raw in enumerate(cells):
        text = _unescape(raw, lineno)
        code = types[i] if types is not None else "a"
        if code == "a":
            v = _read_auto(text, lineno)
        elif code == "s":
            v = text
        else:
            v = _read_json(text, lineno)
        if v is not _ABSENT:
            row[names[i]] = v
    return row


def parse(text: str | bytes) -> list[Section]:
    """Strictly decode a GCX1 payload into its sections (header metadata kept).

    >>> [s.name for s in parse("GCX1 tool=g section=nodes fields=id\\n1\\n")]
    ['nodes']
    """
    return placed(lambda doc: [section for section, _ in _sections(doc)], to_text(text))


def _sections(text: str) -> list[tuple[Section, int]]:
    """The sections of a payload, each with the line of its header."""
    if not text.isascii():
        bad = SURROGATE.search(text)
        if bad is not None:
            raise GCFDecodeError(
                "invalid_surrogate",
                "literal surrogate code point (not a Unicode scalar value)",
                text.count("\n", 0, bad.start()) + 1,
            )
    lines = text.split("\n")
    if lines and lines[-1] == "":
        # The LF that ends the last row; a missing final LF is tolerated.
        lines.pop()
    if not lines:
        raise GCFDecodeError(
            "missing_header", "empty payload; a GCX1 payload starts with 'GCX1 '", 1
        )
    sections: list[tuple[Section, int]] = []
    names: list[str] = []
    types: list[str] | None = None
    for lineno, line in enumerate(lines, 1):
        if (line.startswith("GCX") and _HEADER.match(line)) or not sections:
            tool, names, types, meta = _parse_header(line, lineno)
            if sections:
                _check_rows(sections[-1][0], lineno - 1)
            sections.append((Section(tool=tool, fields=names, meta=meta), lineno))
            continue
        if line.startswith("#"):
            continue
        sections[-1][0].rows.append(_decode_row(line, names, types, lineno))
    _check_rows(sections[-1][0], len(lines))
    return sections


def _check_rows(s: Section, lineno: int) -> None:
    want = s.meta.get("rows")
    if want is not None and want != len(s.rows):
        raise GCFDecodeError(
            "count_mismatch", f"rows={want} but the section has {len(s.rows)} rows", lineno
        )


def loads(text: str | bytes) -> Any:
    """Decode a GCX1 payload: a list of row dicts, or a dict of them for named sections.

    >>> loads("GCX1 tool=t rows=1 fields=id,ok\\n7\\ttrue\\n")
    [{'id': 7, 'ok': True}]
    """
    return placed(_loads, to_text(text))


def _loads(text: str) -> Any:
    sections = _sections(text)
    if len(sections) == 1 and sections[0][0].name is None:
        return sections[0][0].rows
    out: dict[str, list[dict[str, Any]]] = {}
    for s, lineno in sections:
        if s.name is None:
            raise GCFDecodeError(
                "malformed_header_field",
                "every section of a multi-section payload needs a section= name",
                lineno,
            )
        if s.name in out:
            raise GCFDecodeError("duplicate_key", f"section {s.name!r} appears twice", lineno)
        out[s.name] = s.rows
    return out
