"""Strict decoder for the generic profile (spec §3, §4, §7, §8, §11-§13, §16.4-16.5).

The decoder makes one pass over the lines with an explicit stack of open containers
(frames), so nesting depth never turns into Python recursion: a line first closes every
frame deeper than its indentation, then the innermost frame either consumes it or declines
it (and is closed, handing the line to its parent). Counts are checked when a frame closes.

Limits (§12), each rejected with ``limit_exceeded``: :data:`MAX_DEPTH` open containers,
:data:`MAX_LINE` characters per line, :data:`MAX_COUNT` items per declared count.

Where the spec leaves the category open, the decoder answers:

- a row with ``^`` cells but no ``@N`` prefix: ``invalid_item_id``;
- a ``.field`` that names no ``^`` cell of its row (or a ``^{...}`` cell, which takes a
  positional body): ``orphan_attachment``;
- lines past a completed ``[N]`` table or expanded array that cannot be the enclosing
  object's next member: ``count_mismatch`` (``orphan_inline_attachment`` when the last row
  declared an inline schema);
- duplicate identity values in a delta-participating ``@`` column: ``duplicate_key``;
- a ``##! summary`` whose ``counts`` are malformed or labeled: ``invalid_summary``; its
  arity or values disagreeing with the ``[?]`` sections: ``count_mismatch`` (a trailer in a
  payload without ``[?]`` sections is informational, §8.5);
- a graph payload, or a generic ``delta=true`` / ``unchanged=true`` answer, given to
  :func:`loads`: ``unsupported_profile`` (see ``gcfkit.keyed.loads_delta``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import repeat
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import Any, Final

from ..errors import GCFError
from ..grammar import (
    BARE_FIRST,
    COUNT_10_RE,
    ITEM_ID,
    KV_LINE,
    MEMBER_LINE,
    NUMBER_CELL,
    NUMBER_FIRST,
    NUMBER_LIST_TEXT,
    NUMBER_PREFIX,
    NUMBER_RE,
    PLAIN_BRACKET,
    QUICK_ATTACHMENT,
    QUOTED_STRING,
    ROW_NOT_FIRST,
    ROW_NOT_LAST,
)
from ..header import parse_header as _parse_header_line
from ..header import to_text
from ..scalar import (
    INT64_MAX,
    INT64_MIN,
    MISSING,
    Attach,
    check_scalar_text,
    parse_field_decl_at,
    parse_key_at,
    parse_scalar,
    split_cells,
)

__all__ = [
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_LINE",
    "Document",
    "TableInfo",
    "decode_document",
    "loads",
    "parse_header",
]

#: Open containers (objects, arrays, keyed maps, attachments) at any one time.
MAX_DEPTH: Final = 256
#: Characters in one line (the spec's minimum is 65,536 bytes).
MAX_LINE: Final = 8 * 1024 * 1024
#: Largest declared ``[N]`` count accepted.
MAX_COUNT: Final = 1_000_000_000

_INT_FIELDS: Final = ("tokens", "count")
_COUNT_DIGITS: Final = COUNT_10_RE.match
_ITEM_ID: Final = ITEM_ID.match
_BARE_FIRST: Final = BARE_FIRST
_NUM_FIRST: Final = NUMBER_FIRST
_MEMO_MAX: Final = 65536
# Plain rows are decoded column by column in batches of at most _BATCH_ROWS (bounding the
# memo's growth between size checks) once there are _BATCH_MIN of them.
_BATCH_ROWS: Final = 1024
_BATCH_MIN: Final = 8
_NUM_TOKEN: Final = NUMBER_CELL.match
_NUM_TEXT: Final = NUMBER_LIST_TEXT.fullmatch
_JSON_SCAN: Final = json.JSONDecoder().raw_decode
_NUMBER_PREFIX: Final = NUMBER_PREFIX.match


def _scan_number_ascii(tok: str, pos: int) -> tuple[Any, int]:
    """The C scanner's contract (value, end; StopIteration when no number starts here)."""
    m = _NUMBER_PREFIX(tok, pos)
    if m is None:
        raise StopIteration(pos)
    text = m.group()
    return (float(text) if m.lastindex else int(text)), m.end()


# The C scanner reads ASCII digits only, as §2.3 requires. json's pure-Python fallback
# matches a Unicode \d (it would read "1٥" as 15), so without the C accelerator numbers
# are scanned by the ASCII pattern above.
_SCAN_NUMBER: Final[Callable[[str, int], tuple[Any, int]]] = (
    c_make_scanner(json.JSONDecoder()) if c_make_scanner is not None else _scan_number_ascii
)
_NOT_ROW_FIRST: Final = ROW_NOT_FIRST
_NOT_ROW_LAST: Final = ROW_NOT_LAST
_NUMBER: Final = NUMBER_RE.match
_QUICK_ATTACH: Final = QUICK_ATTACHMENT.match
_MEMBER_LINE: Final = MEMBER_LINE.match
_INLINE_MEMBER: Final = 3
_SECTION_MEMBER: Final = 4
_PLAIN_BRACKET: Final = PLAIN_BRACKET.match
_KV_LINE: Final = KV_LINE.match
_QSTR: Final = QUOTED_STRING.match


class _Pending:
    """Placeholder for a ^ cell whose attachment body has not been read yet."""

    __slots__ = ()


_PENDING: Final = _Pending()
_ABSENT: Final = object()


# ---------------------------------------------------------------------------------------
# Header
# ---------------------------------------------------------------------------------------


def parse_header(line: str) -> dict[str, str]:
    """Validate a header line (§3) and return its fields in wire order, profile first.

    Works for both profiles; the caller decides which profiles it accepts.

    >>> parse_header("GCF profile=generic tool=search")
    {'profile': 'generic', 'tool': 'search'}
    """
    header = _parse_header_line(line, 1)
    return {"profile": header.profile, **header.fields}


# ---------------------------------------------------------------------------------------
# Scalars on the hot path
# ---------------------------------------------------------------------------------------


def _bare(tok: str, line: int) -> str:
    if not tok.isascii():
        check_scalar_text(tok, line)
    return tok


_TRAILING: Final = object()
_UNDECIDED: Final = object()


def _scan_whole_number(tok: str) -> Any:
    """``tok`` (first character a digit or ``-``) as a whole, finite, surely-int64 number.

    The C JSON scanner reads a number exactly as §2.3 spells it (JSON's grammar) and
    converts it in one call. :data:`_TRAILING` means a number followed by more text;
    :data:`_UNDECIDED` covers the scanner's extras (-Infinity, unbounded integers) and
    overflows, which the regex path decides.
    """
    try:
        v, end = _SCAN_NUMBER(tok, 0)
    except (StopIteration, ValueError):
        return _UNDECIDED
    n = len(tok)
    if end < n:
        return _TRAILING
    if v - v == 0 and (n < 19 or type(v) is float):
        return v
    return _UNDECIDED


class _Memo(dict[str, Any]):
    """Token -> decoded cell, per document: repeated cells (enums, flags, small numbers,
    ``-``, ``~``) cost one C-level dict lookup instead of a parse."""

    __slots__ = ("line",)
    line: int

    def __missing__(self, key: str) -> Any:
        # Keys may be untrimmed row pieces; the trimmed token is what gets parsed. The
        # size bound is enforced per row by the callers, not here on every miss.
        tok = key.strip(" \t")
        c = tok[:1]
        v: Any
        if c in _NUM_FIRST:
            v = _scan_whole_number(tok)
            if v is _TRAILING:
                if c == "-":
                    v = parse_scalar(tok, self.line, in_row=True)
                else:
                    if not tok.isascii():
                        check_scalar_text(tok, self.line)
                    v = tok
            elif v is _UNDECIDED:
                v = self._number_slow(tok, c)
        elif c in _BARE_FIRST:
            if not tok.isascii():
                check_scalar_text(tok, self.line)
            v = tok
        else:
            v = parse_scalar(tok, self.line, in_row=True)
        self[key] = v
        return v

    def _number_slow(self, tok: str, c: str) -> Any:
        m = _NUMBER(tok)
        if m is None:
            if c == "-":
                return parse_scalar(tok, self.line, in_row=True)
            if not tok.isascii():
                check_scalar_text(tok, self.line)
            return tok
        if m.lastindex is None:
            return int(tok) if len(tok) < 19 else parse_scalar(tok, self.line)
        v = float(tok)
        if v - v != 0.0:
            parse_scalar(tok, self.line)  # raises out_of_range
        return v


def _column(col: tuple[str, ...], getitem: Callable[[str], Any]) -> list[Any]:
    """Decode one column of a batch of rows.

    A column of plain numbers is handed to the C JSON scanner in one call: JSON's number
    grammar is the spec's (§2.3), and with only number characters, ``,`` and blanks in the
    text, the scan succeeds exactly when every cell is one such number. Anything else, and
    out-of-range values, take the per-cell path, which also raises the errors.
    """
    if _NUM_TOKEN(col[0]) is not None:
        text = ",".join(col)
        if _NUM_TEXT(text) is not None:
            try:
                vals, end = _JSON_SCAN("[" + text + "]")
            except ValueError:
                pass
            else:
                if (
                    end == len(text) + 2
                    and len(vals) == len(col)
                    and min(vals) >= INT64_MIN
                    and max(vals) <= INT64_MAX
                ):
                    return vals  # type: ignore[no-any-return]
    return list(map(getitem, col))


def _split_row(s: str, line: int) -> list[str]:
    """Split a row on ``|`` outside quotes; trimmed tokens (§4.2)."""
    parts = s.split("|")
    if '"' not in s:
        return [p.strip(" \t") for p in parts]
    out: list[str] = []
    for p in parts:
        tok = p.strip(" \t")
        if tok[:1] == '"':
            m = _QSTR(tok)
            if m is None or m.end() != len(tok):
                # A '|' inside a quoted cell, or an error: the general (linear) splitter.
                return split_cells(s, "|", line)
        elif tok[:2] == "^{" and '"' in tok:
            # A '|' inside a quoted inline-schema field name (§7.4.5.1).
            return split_cells(s, "|", line)
        out.append(tok)
    return out


def _value(tok: str, line: int) -> Any:
    """A scalar outside tabular cells (key=value, inline arrays, items, root)."""
    c = tok[:1]
    if c in _BARE_FIRST:
        if not tok.isascii():
            check_scalar_text(tok, line)
        return tok
    if c in _NUM_FIRST:
        v = _scan_whole_number(tok)
        if v is _TRAILING:
            # A number followed by more text is a bare string (§2.1), as parse_scalar says.
            if not tok.isascii():
                check_scalar_text(tok, line)
            return tok
        if v is not _UNDECIDED:
            return v
    return parse_scalar(tok, line)


def _scalar_list(text: str, line: int, memo: _Memo) -> list[Any]:
    if not text.strip(" \t"):
        return []
    if '"' in text:
        toks = split_cells(text, ",", line)
    elif "~" in text or "^" in text:
        toks = [t.strip(" \t") for t in text.split(",")]
    else:
        # Without ~ and ^ a row cell and an inline-array value read alike, so the
        # document's memo serves here too (it trims the pieces itself).
        if len(memo) > _MEMO_MAX:
            memo.clear()
        memo.line = line
        return list(map(memo.__getitem__, text.split(",")))
    return [_value(t, line) for t in toks]


# ---------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------

_OBJ: Final = 0
_TAB: Final = 1
_EXP: Final = 2


class _Frame:
    __slots__ = ("count", "deferred", "indent", "kind", "line", "n")

    def __init__(self, kind: int, indent: int, line: int, count: int | None) -> None:
        self.kind = kind
        self.indent = indent
        self.line = line
        self.count = count
        self.n = 0
        self.deferred = -1


class _ObjFrame(_Frame):
    __slots__ = ("obj",)

    def __init__(self, indent: int, line: int, obj: dict[str, Any]) -> None:
        # count, n and deferred stay unset: only arrays are counted.
        self.kind = _OBJ
        self.indent = indent
        self.line = line
        self.obj = obj


class _ExpFrame(_Frame):
    __slots__ = ("items",)

    def __init__(self, indent: int, line: int, count: int | None, items: list[Any]) -> None:
        super().__init__(_EXP, indent, line, count)
        self.items = items


class _Marker:
    """One ^ / ^{...} cell of the current row, waiting for its attachment body."""

    __slots__ = ("explicit", "filled", "name", "schema")

    def __init__(self, name: str, schema: tuple[str, ...] | None, explicit: bool) -> None:
        self.name = name
        self.schema = schema
        self.explicit = explicit
        self.filled = False


class _Schema:
    """A parsed tabular/keyed field declaration, shared by every table that repeats it."""

    __slots__ = ("fields", "id_index", "keyed", "plan", "simple", "value_fields")

    def __init__(self, fields: list[str], id_index: int, keyed: bool, line: int) -> None:
        self.keyed = keyed
        self.id_index = id_index
        self.fields = fields
        value_fields = fields[1:] if keyed else fields
        self.value_fields = value_fields
        self.plan = _plan(value_fields, 1 if keyed else 0, line)
        self.simple = all(slot[0] == 0 for slot in self.plan)


class _TabFrame(_Frame):
    __slots__ = (
        "array_schemas",
        "cur_line",
        "cur_row",
        "fields",
        "had_inline",
        "id_index",
        "id_seen",
        "inline_schemas",
        "keyed",
        "markers",
        "member_ctx",
        "out",
        "plan",
        "simple",
        "value_fields",
        "width",
    )

    def __init__(
        self,
        indent: int,
        line: int,
        count: int | None,
        schema: _Schema,
        out: list[Any] | dict[str, Any],
        member_ctx: bool,
    ) -> None:
        # Written out rather than through super().__init__: nested payloads open one of
        # these per attachment.
        self.kind = _TAB
        self.indent = indent
        self.line = line
        self.count = count
        self.n = 0
        self.deferred = -1
        self.keyed = schema.keyed
        self.out = out
        self.member_ctx = member_ctx
        self.id_index = schema.id_index
        self.id_seen: set[tuple[type, Any]] | None = set() if schema.id_index >= 0 else None
        self.fields = schema.fields
        self.width = len(schema.fields)
        self.value_fields = schema.value_fields
        self.plan = schema.plan
        self.simple = schema.simple
        # Created by the first row with ^ cells that needs them.
        self.inline_schemas: dict[str, tuple[str, ...]] | None = None
        self.array_schemas: dict[str, _Schema] | None = None
        self.cur_row: dict[str, Any] | None = None
        self.cur_line = 0
        self.markers: dict[str, _Marker] | None = None
        self.had_inline = False


# Parsed declarations, shared across documents: tool results repeat their shapes. Keyed by
# (declaration text, keyed?, the key= field when @ markers are live); schemas are immutable.
_SCHEMAS: dict[tuple[str, bool, str | None], _Schema] = {}
_SCHEMAS_MAX: Final = 4096


# A plan slot: (0, name, cell index) for a plain column, (1, name, subtree) for the root of
# a flattened path group (§7.4.6.2). A subtree is a list of such slots.
_Slot = tuple[int, str, Any]


def _plan(fields: list[str], offset: int, line: int) -> list[_Slot]:
    plan: list[_Slot] = []
    groups: dict[tuple[str, ...], list[_Slot]] = {}
    top: set[str] = set()
    leaves: set[tuple[str, ...]] = set()
    for i, name in enumerate(fields, offset):
        segs = name.split(">") if ">" in name else None
        if segs is None or not all(segs):
            if name in top:
                raise GCFError(
                    "duplicate_key", f"column {name!r} collides with a > path column", line
                )
            top.add(name)
            plan.append((0, name, i))
            continue
        if len(segs) > MAX_DEPTH:
            raise GCFError(
                "limit_exceeded", f"path column nests deeper than {MAX_DEPTH} levels", line
            )
        level = plan
        for d in range(len(segs) - 1):
            path = tuple(segs[: d + 1])
            if path in leaves:
                raise GCFError(
                    "duplicate_key", f"path column {name!r} collides with a leaf column", line
                )
            sub = groups.get(path)
            if sub is None:
                if d == 0:
                    if segs[0] in top:
                        raise GCFError(
                            "duplicate_key",
                            f"path column {name!r} collides with column {segs[0]!r}",
                            line,
                        )
                    top.add(segs[0])
                sub = groups[path] = []
                level.append((1, segs[d], sub))
            level = sub
        path = tuple(segs)
        if path in leaves or path in groups:
            raise GCFError("duplicate_key", f"path column {name!r} is ambiguous", line)
        leaves.add(path)
        level.append((0, segs[-1], i))
    return plan


def _build_row(plan: list[_Slot], vals: list[Any], line: int) -> dict[str, Any]:
    """A row without ^ cells: plain columns, ~ dropped, path groups rebuilt."""
    row: dict[str, Any] = {}
    for kind, name, ref in plan:
        if kind == 0:
            v = vals[ref]
            if v is not MISSING:
                row[name] = v
        else:
            v = _group(ref, vals, line)
            if v is not _ABSENT:
                row[name] = v
    return row


def _group(slots: list[_Slot], vals: list[Any], line: int) -> Any:
    """Rebuild one flattened object: all-~ is absent, all-- is null (§7.4.6.2 rules 4-5)."""
    out: dict[str, Any] = {}
    all_missing = all_null = True
    for kind, name, ref in slots:
        if kind == 0:
            v = vals[ref]
            if v is MISSING:
                all_null = False
                continue
            if isinstance(v, Attach):
                raise GCFError(
                    "invalid_attachment_marker",
                    f"path column {name!r} holds a scalar; ^ is not allowed there",
                    line,
                )
            all_missing = False
            if v is not None:
                all_null = False
            out[name] = v
        else:
            v = _group(ref, vals, line)
            if v is _ABSENT:
                all_null = False
                continue
            all_missing = False
            if v is not None:
                all_null = False
            out[name] = v
    if all_missing:
        return _ABSENT
    if all_null:
        return None
    return out


# ---------------------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------------------


class TableInfo:
    """Where a tabular or keyed section came from: its declaration and id field (§10a.1)."""

    __slots__ = ("fields", "id_field", "keyed", "line")

    def __init__(self, fields: list[str], id_field: str | None, keyed: bool, line: int) -> None:
        self.fields = fields
        self.id_field = id_field
        self.keyed = keyed
        self.line = line


class Document:
    """A decoded generic payload: header fields, the value and, for delta-participating
    payloads (decoded with ``id_fields``), each table's declaration keyed by ``id()`` of
    the decoded list or dict."""

    __slots__ = ("header", "tables", "value")

    def __init__(self, header: dict[str, str], value: Any, tables: dict[int, TableInfo]) -> None:
        self.header = header
        self.value = value
        self.tables = tables


class _Parser:
    def __init__(self, header: dict[str, str], id_fields: bool) -> None:
        self.header = header
        self.id_fields = id_fields
        self.key_field = header.get("key")
        self.stack: list[_Frame] = []
        self.deferred: list[list[int]] = []  # [header line, actual count]
        self.summary: list[int] | None = None
        self.summary_line = 0
        self.root: Any = _ABSENT
        self.root_kind = ""  # "", "scalar", "array", "object"
        self.tables: dict[int, TableInfo] = {}
        self.long_lines = True
        # _Memo has no __init__ of its own (dict's is cheaper); its line is set here.
        self.memo = _Memo()
        self.memo.line = 0

    # -- driver ----------------------------------------------------------------------

    def run(self, lines: list[str], long_lines: bool = True) -> Any:
        """Decode ``lines`` (``lines[0]`` is the header, already checked); ``long_lines``
        False promises that no line exceeds MAX_LINE."""
        self.long_lines = long_lines
        stack = self.stack
        obj_kind = _OBJ
        not_last = _NOT_ROW_LAST
        member_line = _MEMBER_LINE
        num_first = _NUM_FIRST
        scan_number = _SCAN_NUMBER
        summary: list[int] | None = None
        bare_first = _BARE_FIRST
        i, n_lines = 1, len(lines)
        while i < n_lines:
            raw = lines[i]
            i += 1
            ln = i
            if not raw:
                continue
            if raw[0] == " ":
                s = raw.lstrip(" ")
                if not s:
                    continue
                indent = len(raw) - len(s)
            else:
                s = raw
                indent = 0
            if long_lines and len(raw) > MAX_LINE:
                raise GCFError("limit_exceeded", f"line is longer than {MAX_LINE} characters", ln)
            if s[-1] in not_last:
                s = s.rstrip(" \t\r")
                if not s:
                    continue
            c = s[0]
            if c == "#":
                if len(s) == 1 or s[1] == " ":
                    continue
                if s.startswith("##!"):
                    if indent & 1 or summary is not None:
                        raise GCFError("invalid_summary", "misplaced ##! summary trailer", ln)
                    self._summary(ln, indent, s)
                    summary = self.summary
                    continue
            elif c == "\t":
                raise GCFError("tab_indentation", "indentation must be spaces; found a tab", ln)
            if indent & 1:
                raise GCFError(
                    "invalid_indent", f"indentation of {indent} spaces is not a multiple of 2", ln
                )
            if summary is not None:
                raise GCFError(
                    "invalid_summary", "the ##! summary trailer must be the last line", ln
                )
            while stack and indent < stack[-1].indent:
                done_frame = stack.pop()
                if done_frame.kind != obj_kind:
                    self._close(done_frame)
            if c == "#":
                # A '##' line ends a table or expanded array at its own indentation (both
                # decline it), so the member that follows can take the quick path below.
                while stack and stack[-1].kind != obj_kind and stack[-1].indent == indent:
                    self._close(stack.pop())
            if stack:
                top = stack[-1]
                if top.kind == obj_kind and indent == top.indent:
                    # The commonest object members (bare keys) inline; anything unusual,
                    # errors included, goes to _obj_line.
                    obj = top.obj  # type: ignore[attr-defined]
                    # An ASCII identifier is exactly a bare key, [A-Za-z_][A-Za-z0-9_]*.
                    key, eq, rest = s.partition("=") if c != "#" else (s, "", "")
                    if eq and key.isidentifier() and key.isascii():
                        if key in obj:
                            raise GCFError(
                                "duplicate_key", f"duplicate key {key!r} in one object", ln
                            )
                        c = rest[:1]
                        if c in bare_first:
                            if rest.isascii():
                                obj[key] = rest
                                continue
                        elif c in num_first:
                            # As in _value, inline, with plain integers first.
                            size = len(rest)
                            if (
                                rest.isdigit()
                                and size < 19
                                and (c != "0" or size == 1)
                                and rest.isascii()
                            ):
                                obj[key] = int(rest)
                                continue
                            try:
                                v, end = scan_number(rest, 0)
                            except (StopIteration, ValueError):
                                end = -1
                            if end == size:
                                if v - v == 0 and (size < 19 or type(v) is float):
                                    obj[key] = v
                                    continue
                            elif end >= 0 and rest.isascii():
                                obj[key] = rest  # a number and more: a bare string
                                continue
                        obj[key] = _value(rest.strip(" \t"), ln)
                        continue
                    m = member_line(s)
                    if m is not None:
                        which = m.lastindex or 0
                        key = m.group(which if which != _INLINE_MEMBER else 1)
                        if key in obj:
                            raise GCFError(
                                "duplicate_key", f"duplicate key {key!r} in one object", ln
                            )
                        if which == _INLINE_MEMBER:
                            values = _scalar_list(m.group(3), ln, self.memo)
                            if len(values) != int(m.group(2)):
                                self._check_count(int(m.group(2)), len(values), ln)  # raises
                            obj[key] = values
                        elif which == _SECTION_MEMBER:
                            child: dict[str, Any] = {}
                            obj[key] = child
                            if len(stack) >= MAX_DEPTH:
                                self._push(_ObjFrame(indent + 2, ln, child))  # raises
                            stack.append(_ObjFrame(indent + 2, ln, child))
                        else:
                            obj[key] = self._array_head(
                                s, len(key) + 4, ln, indent, member_ctx=True, inline_ok=False
                            )
                            if stack[-1].kind == _TAB:
                                i = self._fast_rows(stack[-1], lines, i)  # type: ignore[arg-type]
                        continue
                elif (
                    top.kind == _TAB
                    and indent == top.indent
                    and (c == "." or (c == "@" and (top.count is None or top.n < top.count)))
                ):
                    # What _tab_line would do with an attachment or an @N row, without
                    # its other checks (none applies to these two).
                    if c == ".":
                        j = self._attached_rows(top, s, lines, i)  # type: ignore[arg-type]
                        if j >= 0:
                            i = j
                            continue
                        self._attachment(top, ln, indent, s)  # type: ignore[arg-type]
                    else:
                        self._row(top, ln, s)  # type: ignore[arg-type]
                    top = stack[-1]
                    if top.kind == _TAB and top.markers is None:  # type: ignore[attr-defined]
                        i = self._fast_rows(top, lines, i)  # type: ignore[arg-type]
                    continue
            while True:
                if not stack:
                    self._top_level(ln, indent, s)
                    break
                top = stack[-1]
                kind = top.kind
                if kind == _TAB:
                    done = self._tab_line(top, ln, indent, s)  # type: ignore[arg-type]
                elif kind == _OBJ:
                    done = self._obj_line(top, ln, indent, s)  # type: ignore[arg-type]
                else:
                    done = self._exp_line(top, ln, indent, s)  # type: ignore[arg-type]
                if done:
                    break
                self._close(stack.pop())
            if stack:
                top = stack[-1]
                if top.kind == _TAB and top.markers is None:  # type: ignore[attr-defined]
                    i = self._fast_rows(top, lines, i)  # type: ignore[arg-type]
        while stack:
            self._close(stack.pop())
        self._check_deferred()
        if self.root is _ABSENT:
            return {}
        return self.root

    def _fast_rows(self, f: _TabFrame, lines: list[str], i: int) -> int:
        """Consume plain rows (no attachments, no id column) in a tight loop; return the
        index of the first line left for the general path, which also reports every error
        (a line this loop doubts is simply left to it)."""
        if f.id_index >= 0:
            return i
        k = f.indent
        limit = len(lines)
        if i >= limit or lines[i][k : k + 1] in _NOT_ROW_FIRST:
            return i  # the next line is no plain row (often an @N row of an attachment table)
        pad = " " * k
        width = f.width
        count = f.count
        if count is not None and i + count - f.n < limit:
            limit = i + count - f.n
        not_first = _NOT_ROW_FIRST
        not_last = _NOT_ROW_LAST
        long_lines = self.long_lines
        while i < limit:
            batch: list[list[str]] = []
            tilde = False
            stop = i + _BATCH_ROWS if i + _BATCH_ROWS < limit else limit
            try:
                for s in lines[i:stop]:
                    if k:
                        if s[:k] != pad:
                            break
                        s = s[k:]
                    if (
                        not s
                        or s[0] in not_first
                        or s[-1] in not_last
                        or "^" in s
                        or (long_lines and len(s) > MAX_LINE)
                    ):
                        break
                    toks = _split_row(s, i + len(batch) + 1) if '"' in s else s.split("|")
                    if len(toks) != width:
                        break
                    if "~" in s:
                        tilde = True
                    batch.append(toks)
            except GCFError:
                pass  # the general path re-reads this line and reports it with its line number
            if not batch:
                break
            out = f.out
            if len(batch) < _BATCH_MIN and not tilde and f.simple and type(out) is list:
                # The commonest short run (a nested table's few rows) built in one C-level
                # pass; extend() keeps the rows before a bad one, which the general path
                # then reports.
                memo = self.memo
                if len(memo) > _MEMO_MAX:
                    memo.clear()
                before = len(out)
                # Not contextlib.suppress: a context manager per call costs more than this.
                try:  # noqa: SIM105
                    out.extend(
                        map(
                            dict,
                            map(zip, repeat(f.fields), map(map, repeat(memo.__getitem__), batch)),
                        )
                    )
                except GCFError:
                    pass
                done = len(out) - before
                if done:
                    f.n += done
                    f.cur_row = out[-1]
                    f.cur_line = i + done
                    f.had_inline = False
            else:
                done = self._emit_rows(f, batch, tilde, i + 1)
            i += done
            if i < stop:
                break  # a row was left over, or a line was no row
        return i

    def _attached_rows(self, f: _TabFrame, s: str, lines: list[str], i: int) -> int:
        """Read a waiting '.field [N]' attachment of a shared array schema whose N rows are
        plain and whose table ends with them, without opening a frame for it; return the
        index past the rows, or -1 to leave everything (errors included) to the general
        path, which would read these lines to the same value."""
        markers = f.markers
        shared = f.array_schemas
        if markers is None or shared is None or self.id_fields or len(self.stack) >= MAX_DEPTH:
            return -1
        hit = _QUICK_ATTACH(s)
        if hit is None or hit.group(2) is None or hit.lastindex != 2:
            return -1
        name = hit.group(1)
        m = markers.get(name)
        schema = shared.get(name)
        if m is None or schema is None or m.filled or m.explicit or not schema.simple:
            return -1
        count = int(hit.group(2))
        end = i + count
        if end > len(lines):
            return -1
        if end < len(lines):
            # The table must end here by indentation: a blank or comment line could hide
            # an extra row, so it is left to the general path.
            nxt = lines[end]
            rest = nxt.lstrip(" ")
            if len(nxt) - len(rest) >= f.indent + 4 or not rest.strip(" \t\r") or rest[0] == "#":
                return -1
        body = f.indent + 4
        pad = " " * body
        width = len(schema.fields)
        batch: list[list[str]] = []
        for j in range(i, end):
            line = lines[j]
            if line[:body] != pad:
                return -1
            row = line[body:]
            if (
                not row
                or row[0] in _NOT_ROW_FIRST
                or row[-1] in _NOT_ROW_LAST
                or "^" in row
                or "~" in row
                or '"' in row
                or (self.long_lines and len(line) > MAX_LINE)
            ):
                return -1
            toks = row.split("|")
            if len(toks) != width:
                return -1
            batch.append(toks)
        memo = self.memo
        if len(memo) > _MEMO_MAX:
            memo.clear()
        try:
            rows = list(
                map(
                    dict, map(zip, repeat(schema.fields), map(map, repeat(memo.__getitem__), batch))
                )
            )
        except GCFError:
            return -1
        f.cur_row[name] = rows  # type: ignore[index]
        m.filled = True
        return end

    def _emit_rows(self, f: _TabFrame, batch: list[list[str]], tilde: bool, ln: int) -> int:
        """Decode ``batch`` (split rows of the right width, the first on line ``ln``) into
        ``f``; return how many rows were taken (fewer when a row is malformed: the general
        path reports it)."""
        memo = self.memo
        if len(memo) > _MEMO_MAX:
            memo.clear()
        getitem = memo.__getitem__
        out = f.out
        small = len(batch) < _BATCH_MIN
        table: list[Any] | None = None
        try:
            if small:
                table = [tuple(map(getitem, toks)) for toks in batch]
            else:
                # Every row of a batch has the table's width, so no zip here needs strict.
                cols = [_column(col, getitem) for col in zip(*batch, strict=False)]
                table = list(zip(*cols, strict=False))
        except GCFError:
            # Row by row, to keep the rows before the first bad one.
            table = []
            try:
                for toks in batch:
                    table.append(tuple(map(getitem, toks)))
            except GCFError:
                pass
            if not table:
                return 0
        row: dict[str, Any]
        if type(out) is list:
            if not f.simple:
                plan = f.plan
                for line, vals in enumerate(table, ln):
                    out.append(_build_row(plan, vals, line))
            elif tilde:
                fields = f.fields
                out.extend(
                    [
                        {n: v for n, v in zip(fields, vals, strict=False) if v is not MISSING}
                        for vals in table
                    ]
                )
            else:
                out.extend(map(dict, map(zip, repeat(f.fields), table)))
            taken = len(table)
            row = out[-1]
        else:
            assert isinstance(out, dict)
            fields = f.value_fields
            plan = f.plan
            taken = 0
            for vals in table:
                key = vals[0]
                if type(key) is not str or key in out:
                    break
                if not f.simple:
                    row = _build_row(plan, vals, ln + taken)
                elif tilde:
                    row = {n: v for n, v in zip(fields, vals[1:], strict=False) if v is not MISSING}
                else:
                    row = dict(zip(fields, vals[1:], strict=False))
                out[key] = row
                taken += 1
            if not taken:
                return 0
        f.n += taken
        f.cur_row = row
        f.cur_line = ln + taken - 1
        f.had_inline = False
        return taken

    def _push(self, frame: _Frame) -> None:
        if len(self.stack) >= MAX_DEPTH:
            raise GCFError(
                "limit_exceeded", f"nesting deeper than {MAX_DEPTH} containers", frame.line
            )
        self.stack.append(frame)

    def _close(self, f: _Frame) -> None:
        kind = f.kind
        if kind == _OBJ:
            return
        if kind == _TAB and f.markers is not None:  # type: ignore[attr-defined]
            self._end_row(f)  # type: ignore[arg-type]
        if f.count is None:
            self.deferred[f.deferred][1] = f.n
        elif f.n != f.count:
            raise GCFError(
                "count_mismatch",
                f"declared [{f.count}] but found {f.n} item(s)",
                f.line,
            )

    # -- root and trailer ------------------------------------------------------------

    def _top_level(self, ln: int, indent: int, s: str) -> None:
        if self.root_kind:
            if self.root_kind == "array" and not s.startswith("##"):
                raise GCFError("count_mismatch", "more items than the root array declares", ln)
            raise GCFError("invalid_line", f"content after the root {self.root_kind} value", ln)
        if indent:
            raise GCFError("invalid_indent", "the body must start at indentation 0", ln)
        if s[0] == "=":
            self.root_kind = "scalar"
            self.root = _value(s[1:].strip(" \t"), ln)
            return
        if s.startswith("## ["):
            self.root_kind = "array"
            self.root = self._array_head(s, 3, ln, 0)
            return
        self.root_kind = "object"
        self.root = {}
        self._push(_ObjFrame(0, ln, self.root))
        self._obj_line(self.stack[-1], ln, 0, s)  # type: ignore[arg-type]

    def _summary(self, ln: int, indent: int, s: str) -> None:
        if indent or not (s == "##! summary" or s.startswith("##! summary ")):
            raise GCFError("invalid_summary", "expected '##! summary' at indentation 0", ln)
        while self.stack:
            self._close(self.stack.pop())
        seen: set[str] = set()
        counts: list[int] | None = None
        for pair in s[11:].split():
            key, eq, value = pair.partition("=")
            if not eq or not key or key in seen:
                raise GCFError("invalid_summary", f"bad summary field {pair[:40]!r}", ln)
            seen.add(key)
            if key == "counts":
                if ":" in value:
                    raise GCFError(
                        "invalid_summary",
                        "generic counts are positional; labeled counts are graph-only",
                        ln,
                    )
                counts = []
                for entry in value.split(","):
                    if not _COUNT_DIGITS(entry):
                        raise GCFError(
                            "invalid_summary", f"summary count {entry[:20]!r} is invalid", ln
                        )
                    counts.append(int(entry))
        self.summary = counts if counts is not None else []
        self.summary_line = ln

    def _check_deferred(self) -> None:
        if self.summary is None or not self.deferred:
            return
        ln = self.summary_line
        if len(self.summary) != len(self.deferred):
            raise GCFError(
                "count_mismatch",
                f"summary has {len(self.summary)} counts for {len(self.deferred)} [?] sections",
                ln,
            )
        for want, (line, got) in zip(self.summary, self.deferred, strict=True):
            if want != got:
                raise GCFError(
                    "count_mismatch",
                    f"[?] section at line {line} has {got} item(s); the summary says {want}",
                    ln,
                )

    # -- array heads -----------------------------------------------------------------

    def _bracket(self, s: str, pos: int, ln: int) -> tuple[int | None, bool, int]:
        m = _PLAIN_BRACKET(s, pos)
        if m is not None:
            # '[N]' or '[N:]' with N below MAX_COUNT: nothing left to check.
            return int(m.group(1)), m.group(2) == ":", m.end()
        end = s.find("]", pos)
        if end < 0:
            raise GCFError("invalid_line", "unterminated count bracket", ln)
        inner = s[pos + 1 : end]
        keyed = inner[-1:] == ":"
        if keyed:
            inner = inner[:-1]
        if inner == "?":
            return None, keyed, end + 1
        if _COUNT_DIGITS(inner):
            n = int(inner)
            if n <= MAX_COUNT:
                return n, keyed, end + 1
        elif not (inner.isascii() and inner.isdigit() and inner[0] != "0"):
            raise GCFError(
                "invalid_count",
                f"count [{inner[:20]}] must be 0, a decimal without leading zeros, or ?",
                ln,
            )
        raise GCFError("limit_exceeded", f"declared count exceeds the limit of {MAX_COUNT}", ln)

    def _defer(self, f: _Frame | None, ln: int, n: int = 0) -> None:
        if f is not None:
            f.deferred = len(self.deferred)
        self.deferred.append([ln, n])

    def _array_head(
        self,
        s: str,
        pos: int,
        ln: int,
        body_indent: int,
        *,
        member_ctx: bool = False,
        inline_ok: bool = True,
        field: str = "",
        tab: _TabFrame | None = None,
    ) -> Any:
        """Parse ``[N]...`` at ``s[pos]`` and return the (possibly still filling) value.

        ``field`` names the attachment field when this is a ``.field [N]`` attachment of
        the tabular frame ``tab`` (for shared array schemas, §7.4.5.3).
        """
        count, keyed, p = self._bracket(s, pos, ln)
        n = len(s)
        if p < n and s[p] == "{":
            cache_key = (s[p:], keyed, self.key_field if self.id_fields else None)
            schema = _SCHEMAS.get(cache_key)
            if schema is None:
                fields, id_index = self._decl(s, p, ln)
                schema = _Schema(fields, id_index, keyed, ln)
                if len(_SCHEMAS) >= _SCHEMAS_MAX:
                    _SCHEMAS.clear()
                _SCHEMAS[cache_key] = schema
            if keyed:
                return self._keyed(schema, count, ln, body_indent, member_ctx)
            if tab is not None:
                shared = tab.array_schemas
                if shared is None:
                    tab.array_schemas = {field: schema}
                elif field not in shared:
                    shared[field] = schema
            return self._table(schema, count, ln, body_indent, member_ctx)
        if keyed:
            raise GCFError(
                "invalid_keyed_map", "a keyed map [N:] needs a {key,...} field declaration", ln
            )
        if p < n:
            if s[p] != ":":
                raise GCFError("invalid_line", f"unexpected {s[p : p + 20]!r} after [count]", ln)
            if not inline_ok:
                raise GCFError("invalid_line", "a named inline array is written key[N]: values", ln)
            values = _scalar_list(s[p + 1 :], ln, self.memo)
            self._check_count(count, len(values), ln)
            return values
        if tab is not None and tab.array_schemas is not None:
            shared_schema = tab.array_schemas.get(field)
            if shared_schema is not None:
                return self._table(shared_schema, count, ln, body_indent, False)
        items: list[Any] = []
        if count == 0:
            return items
        f = _ExpFrame(body_indent, ln, count, items)
        if count is None:
            self._defer(f, ln)
        self._push(f)
        return items

    def _check_count(self, count: int | None, got: int, ln: int) -> None:
        if count is None:
            self._defer(None, ln, got)
        elif count != got:
            raise GCFError("count_mismatch", f"declared [{count}] but found {got} value(s)", ln)

    def _decl(self, s: str, pos: int, ln: int) -> tuple[list[str], int]:
        """Parse the field declaration ``{...}`` that ends the line at ``s[pos]``.

        Returns the names and the index of the ``@`` id field (-1 without one). The marker
        is only syntax outside quotes: a quoted ``"@x"`` is an ordinary name.
        """
        if not self.id_fields:
            fields, q = parse_field_decl_at(s, pos, ln)
            if q != len(s):
                raise GCFError(
                    "invalid_line", f"unexpected {s[q : q + 20]!r} after the field declaration", ln
                )
            return fields, -1
        names: list[str] = []
        seen: set[str] = set()
        id_index = -1
        p = pos + 1
        n = len(s)
        while True:
            if s[p : p + 1] == "@":
                if id_index >= 0:
                    raise GCFError(
                        "invalid_key", "a field declaration may mark only one @ id field", ln
                    )
                id_index = len(names)
                p += 1
            name, p = parse_key_at(s, p, ln)
            if name in seen:
                raise GCFError("duplicate_field_name", f"field {name!r} is declared twice", ln)
            seen.add(name)
            names.append(name)
            c = s[p : p + 1]
            p += 1
            if c == "}":
                break
            if c != ",":
                raise GCFError("invalid_line", "malformed field declaration", ln)
        if p != n:
            raise GCFError(
                "invalid_line", f"unexpected {s[p : p + 20]!r} after the field declaration", ln
            )
        if id_index >= 0 and names[id_index] != self.key_field:
            raise GCFError(
                "invalid_key",
                f"the @ id field {names[id_index]!r} must be the header's key= field "
                f"({self.key_field!r})",
                ln,
            )
        return names, id_index

    def _table(
        self,
        schema: _Schema,
        count: int | None,
        ln: int,
        indent: int,
        member_ctx: bool,
    ) -> list[Any]:
        rows: list[Any] = []
        self._open_table(_TabFrame(indent, ln, count, schema, rows, member_ctx), rows, ln)
        return rows

    def _keyed(
        self,
        schema: _Schema,
        count: int | None,
        ln: int,
        indent: int,
        member_ctx: bool,
    ) -> dict[str, Any]:
        if len(schema.fields) < 2:
            raise GCFError(
                "invalid_keyed_map",
                "a keyed map header must declare at least two fields (key column + values)",
                ln,
            )
        if count == 0:
            raise GCFError(
                "invalid_keyed_map",
                "a keyed map cannot have a zero count [0:]; an empty object has no body",
                ln,
            )
        out: dict[str, Any] = {}
        self._open_table(_TabFrame(indent, ln, count, schema, out, member_ctx), out, ln)
        return out

    def _open_table(self, f: _TabFrame, container: Any, ln: int) -> None:
        """Register a tabular array or keyed map, defer a ``[?]`` count, push its frame."""
        if self.id_fields:
            self._register(f, container, ln)
        if f.count is None:
            self._defer(f, ln)
        self._push(f)

    def _register(self, f: _TabFrame, container: Any, ln: int) -> None:
        id_field = f.fields[f.id_index] if f.id_index >= 0 else None
        self.tables[id(container)] = TableInfo(list(f.fields), id_field, f.keyed, ln)

    # -- objects ---------------------------------------------------------------------

    def _obj_line(self, f: _ObjFrame, ln: int, indent: int, s: str) -> bool:
        if indent != f.indent:
            raise GCFError(
                "invalid_indent",
                f"unexpected indentation {indent} (expected {f.indent}) inside an object",
                ln,
            )
        obj = f.obj
        m = _KV_LINE(s)
        if m is not None:
            key, rest = m.groups()
            if key in obj:
                raise GCFError("duplicate_key", f"duplicate key {key!r} in one object", ln)
            obj[key] = _value(rest.strip(" \t"), ln)
            return True
        c = s[0]
        if c == "#":
            if not s.startswith("## "):
                raise GCFError("invalid_line", f"unrecognised line {s[:40]!r}", ln)
            if s[3:4] == "[":
                raise GCFError(
                    "invalid_line",
                    "an anonymous ## [N] array is only valid as the whole root value",
                    ln,
                )
            key, p = parse_key_at(s, 3, ln)
            if key in obj:
                raise GCFError("duplicate_key", f"duplicate key {key!r} in one object", ln)
            if p == len(s):
                child: dict[str, Any] = {}
                obj[key] = child
                self._push(_ObjFrame(indent + 2, ln, child))
                return True
            if s[p] != " " or s[p + 1 : p + 2] != "[":
                raise GCFError(
                    "invalid_line", f"unexpected {s[p : p + 20]!r} after the section name", ln
                )
            obj[key] = self._array_head(s, p + 1, ln, indent, member_ctx=True, inline_ok=False)
            return True
        if c == "." or c == "@" or c == "=":
            what = {
                ".": "a .field attachment outside a tabular row",
                "@": "an @N item outside an expanded array",
                "=": "a root scalar (=value) must be the whole body",
            }[c]
            raise GCFError("orphan_attachment" if c == "." else "invalid_line", what, ln)
        key, p = parse_key_at(s, 0, ln)
        n = len(s)
        while p < n and s[p] in " \t":
            p += 1
        if p >= n:
            raise GCFError("invalid_line", f"expected key=value, found {s[:40]!r}", ln)
        if key in obj:
            raise GCFError("duplicate_key", f"duplicate key {key!r} in one object", ln)
        if s[p] == "=":
            obj[key] = _value(s[p + 1 :].strip(" \t"), ln)
            return True
        if s[p] == "[":
            count, keyed, q = self._bracket(s, p, ln)
            if keyed or q >= n or s[q] != ":":
                raise GCFError("invalid_line", "an inline array is written key[N]: v1,v2,...", ln)
            values = _scalar_list(s[q + 1 :], ln, self.memo)
            self._check_count(count, len(values), ln)
            obj[key] = values
            return True
        raise GCFError("invalid_line", f"expected key=value, found {s[:40]!r}", ln)

    # -- expanded arrays -------------------------------------------------------------

    def _exp_line(self, f: _ExpFrame, ln: int, indent: int, s: str) -> bool:
        if indent != f.indent:
            raise GCFError(
                "invalid_indent",
                f"unexpected indentation {indent} (expected {f.indent}) in an expanded array",
                ln,
            )
        if s[0] != "@":
            return False
        m = _ITEM_ID(s)
        if m is None:
            raise GCFError("invalid_item_id", f"expected '@N ' item prefix in {s[:40]!r}", ln)
        if int(m.group(1)) != f.n:
            raise GCFError(
                "invalid_item_id", f"item id @{m.group(1)} should be @{f.n} (its index)", ln
            )
        if f.count is not None and f.n >= f.count:
            raise GCFError("count_mismatch", f"more than the declared [{f.count}] items", ln)
        f.n += 1
        p = m.end()
        c = s[p : p + 1]
        if c == "=":
            f.items.append(_value(s[p + 1 :].strip(" \t"), ln))
        elif c == "{":
            if s[p:] != "{}":
                raise GCFError("invalid_line", "an object item is written '@N {}'", ln)
            child: dict[str, Any] = {}
            f.items.append(child)
            self._push(_ObjFrame(indent + 2, ln, child))
        elif c == "[":
            f.items.append(self._array_head(s, p, ln, indent + 2))
        else:
            raise GCFError(
                "invalid_line", "an item is '@N =scalar', '@N {}' or '@N [count]...'", ln
            )
        return True

    # -- tabular arrays and keyed maps -----------------------------------------------

    def _tab_line(self, f: _TabFrame, ln: int, indent: int, s: str) -> bool:
        c = s[0]
        if indent == f.indent:
            if c == ".":
                self._attachment(f, ln, indent, s)
                return True
            if c == "#":
                return False
            if f.markers is not None and c != "@" and self._wants_inline(f):
                self._inline_body(f, ln, s)
                return True
            if f.count is not None and f.n >= f.count:
                return self._after_last_row(f, ln, s)
            if f.member_ctx and f.width > 1 and "|" not in s and _looks_like_member(s):
                # A one-cell line cannot be a row of a wider table: it is the next member
                # of the enclosing object (this ends a [?] table, or reports a short one).
                return False
            self._row(f, ln, s)
            return True
        if indent == f.indent + 2 and f.cur_row is not None:
            if c == ".":
                self._attachment(f, ln, indent, s)
                return True
            if f.markers is not None and self._wants_inline(f):
                self._inline_body(f, ln, s)
                return True
            if f.had_inline:
                raise GCFError(
                    "orphan_inline_attachment",
                    "positional inline body without an eligible ^ cell in its row",
                    ln,
                )
        raise GCFError(
            "invalid_indent",
            f"unexpected indentation {indent} (expected {f.indent}) in a tabular section",
            ln,
        )

    def _after_last_row(self, f: _TabFrame, ln: int, s: str) -> bool:
        if f.member_ctx and _looks_like_member(s):
            return False
        if f.had_inline:
            raise GCFError(
                "orphan_inline_attachment",
                "positional inline body without an eligible ^ cell in its row",
                ln,
            )
        raise GCFError("count_mismatch", f"more rows than the declared [{f.count}]", ln)

    @staticmethod
    def _wants_inline(f: _TabFrame) -> bool:
        assert f.markers is not None
        return any(not m.filled and m.schema is not None for m in f.markers.values())

    def _end_row(self, f: _TabFrame) -> None:
        if f.markers is not None:
            for m in f.markers.values():
                if not m.filled:
                    raise GCFError(
                        "missing_attachment",
                        f"^ cell for field {m.name!r} has no attachment body",
                        f.cur_line,
                    )
            f.markers = None

    def _row(self, f: _TabFrame, ln: int, s: str) -> None:
        markers = f.markers
        if markers is not None:
            for pending in markers.values():
                if not pending.filled:
                    self._end_row(f)  # raises missing_attachment
            f.markers = None
        has_id = s[0] == "@"
        if has_id:
            # A valid prefix spells the row's index canonically, so one startswith() checks
            # it; the regex only runs to tell the two errors apart.
            prefix = f"@{f.n} "
            if s.startswith(prefix):
                s = s[len(prefix) :]
            else:
                m = _ITEM_ID(s)
                if m is None:
                    raise GCFError(
                        "invalid_item_id", f"expected '@N ' row prefix in {s[:40]!r}", ln
                    )
                raise GCFError(
                    "invalid_item_id", f"row id @{m.group(1)} should be @{f.n} (its index)", ln
                )
        toks = _split_row(s, ln) if '"' in s else s.split("|")
        if len(toks) != f.width:
            raise GCFError(
                "row_width_mismatch",
                f"row has {len(toks)} cell(s); the header declares {f.width}",
                ln,
            )
        memo = self.memo
        if len(memo) > _MEMO_MAX:
            memo.clear()
        memo.line = ln
        vals = list(map(memo.__getitem__, toks))
        f.n += 1
        f.had_inline = False
        if f.id_index >= 0:
            ident = vals[f.id_index]
            marker = (type(ident), ident)
            assert f.id_seen is not None
            if marker in f.id_seen:
                raise GCFError(
                    "duplicate_key", f"duplicate identity value {ident!r} in the key column", ln
                )
            f.id_seen.add(marker)
        if f.simple and "~" not in s and "^" not in s:
            if f.keyed:
                row = dict(zip(f.value_fields, vals[1:], strict=True))
            else:
                row = dict(zip(f.fields, vals, strict=True))
        else:
            row = self._slow_row(f, vals, ln, has_id)
        out = f.out
        if isinstance(out, list):
            out.append(row)
        else:
            key = vals[0]
            if type(key) is not str:
                raise GCFError(
                    "invalid_keyed_map",
                    "a keyed map row's cell 0 must be a string member key (quote it)",
                    ln,
                )
            if key in out:
                raise GCFError(
                    "duplicate_key", f"duplicate member key {key!r} in the keyed map", ln
                )
            out[key] = row
        f.cur_row = row
        f.cur_line = ln

    def _slow_row(self, f: _TabFrame, vals: list[Any], ln: int, has_id: bool) -> dict[str, Any]:
        row: dict[str, Any] = {}
        markers: dict[str, _Marker] | None = None
        for kind, name, ref in f.plan:
            if kind == 0:
                v = vals[ref]
                if v is MISSING:
                    continue
                if isinstance(v, Attach):
                    if not has_id:
                        raise GCFError(
                            "invalid_item_id",
                            "a row with ^ cells must carry its @N prefix",
                            ln,
                        )
                    if markers is None:
                        markers = {}
                    if v.schema is not None:
                        markers[name] = _Marker(name, v.schema, True)
                        if f.inline_schemas is None:
                            f.inline_schemas = {}
                        f.inline_schemas[name] = v.schema
                        f.had_inline = True
                    else:
                        schema = f.inline_schemas.get(name) if f.inline_schemas else None
                        markers[name] = _Marker(name, schema, False)
                        if schema is not None:
                            f.had_inline = True
                    v = _PENDING
                row[name] = v
            else:
                v = _group(ref, vals, ln)
                if v is not _ABSENT:
                    row[name] = v
        f.markers = markers
        return row

    def _inline_body(self, f: _TabFrame, ln: int, s: str) -> None:
        assert f.markers is not None and f.cur_row is not None
        target = next(m for m in f.markers.values() if not m.filled and m.schema is not None)
        assert target.schema is not None
        if '"' in s:
            toks = split_cells(s, "|", ln)
        else:
            toks = [t.strip(" \t") for t in s.split("|")]
        if len(toks) != len(target.schema):
            raise GCFError(
                "inline_width_mismatch",
                f"positional body has {len(toks)} value(s); the inline schema of "
                f"{target.name!r} declares {len(target.schema)}",
                ln,
            )
        target.filled = True
        f.cur_row[target.name] = dict(
            zip(target.schema, [_value(t, ln) for t in toks], strict=True)
        )

    def _attachment(self, f: _TabFrame, ln: int, indent: int, s: str) -> None:
        row = f.cur_row
        if row is None:
            raise GCFError("orphan_attachment", "a .field attachment before any row", ln)
        markers = f.markers
        if markers is not None:
            # The common attachments, '.field {}' and the repeat '.field [N]' of a shared
            # array schema (§7.4.5.3), taken without the general parse when their ^ cell
            # is waiting for them.
            hit = _QUICK_ATTACH(s)
            if hit is not None:
                name, count, text, decl = hit.groups()
                m = markers.get(name)
                if m is not None and not m.filled and not m.explicit:
                    if text is not None:
                        values = _scalar_list(text, ln, self.memo)
                        if len(values) != int(count):
                            self._check_count(int(count), len(values), ln)  # raises
                        row[name] = values
                        m.filled = True
                        return
                    if decl is not None:
                        # As the general path below, from the '[' on.
                        arr = self._array_head(
                            s, len(name) + 2, ln, f.indent + 4, field=name, tab=f
                        )
                        m.filled = True
                        row[name] = arr
                        return
                    if count is None:
                        child: dict[str, Any] = {}
                        self._push(_ObjFrame(f.indent + 4, ln, child))
                        row[name] = child
                        m.filled = True
                        return
                    shared = f.array_schemas
                    schema = shared.get(name) if shared is not None else None
                    if schema is not None:
                        row[name] = self._table(schema, int(count), ln, f.indent + 4, False)
                        m.filled = True
                        return
        name, p = parse_key_at(s, 1, ln)
        m = f.markers.get(name) if f.markers is not None else None
        if m is None:
            if ">" not in name:
                raise GCFError(
                    "orphan_attachment",
                    f"attachment .{name} has no ^ cell in its row",
                    ln,
                )
            if name in row:
                raise GCFError(
                    "duplicate_attachment", f"field {name!r} is attached twice in one row", ln
                )
        elif m.filled:
            raise GCFError(
                "duplicate_attachment", f"field {name!r} is attached twice in one row", ln
            )
        elif m.explicit:
            raise GCFError(
                "orphan_attachment",
                f".{name} cannot fill a ^{{...}} cell; that cell takes a positional body",
                ln,
            )
        n = len(s)
        if p >= n or s[p] != " ":
            raise GCFError(
                "invalid_line", "an attachment is '.field {}', '.field [N]...' or '.field =v'", ln
            )
        p += 1
        body = f.indent + 4
        c = s[p : p + 1]
        value: Any
        if c == "{":
            if s[p:] != "{}":
                raise GCFError("invalid_line", "an object attachment is written '.field {}'", ln)
            value = {}
            self._push(_ObjFrame(body, ln, value))
        elif c == "[":
            value = self._array_head(s, p, ln, body, field=name, tab=f)
        elif c == "=" and m is None:
            # Only a '>'-named field (never a column, §7.4.6.1 rule 4) travels as a bare
            # scalar attachment; a ^ cell stands for an object or array.
            value = _value(s[p + 1 :].strip(" \t"), ln)
        else:
            raise GCFError(
                "invalid_line", "an attachment is '.field {}', '.field [N]...' or '.field =v'", ln
            )
        if m is not None:
            m.filled = True
        row[name] = value


def _looks_like_member(s: str) -> bool:
    """True when ``s`` parses as the start of a key=value or key[N]: line."""
    try:
        _, p = parse_key_at(s, 0)
    except GCFError:
        return False
    n = len(s)
    while p < n and s[p] in " \t":
        p += 1
    return p < n and s[p] in "=["


def decode_document(text: str | bytes, *, id_fields: bool = False) -> Document:
    """Decode a generic payload, keeping its header and table declarations.

    ``id_fields`` admits the ``@`` id-field marker of delta-participating tables (§10a.1);
    it is enabled automatically when the header has ``key=``. This is the entry point the
    generic-delta code builds on; most callers want :func:`loads`.

    >>> doc = decode_document("GCF profile=generic key=id pack_root=sha256:00\\n"
    ...                       "## [1]{@id,v}\\n7|x\\n")
    >>> doc.header["key"], doc.value
    ('id', [{'id': 7, 'v': 'x'}])
    """
    return _decode(to_text(text), id_fields, accept_answers=True)


def _decode(src: str, id_fields: bool, *, accept_answers: bool) -> Document:
    if "\r" in src:
        src = src.replace("\r\n", "\n")
    lines = src.split("\n")
    first = lines[0]
    if len(first) > MAX_LINE:
        raise GCFError("limit_exceeded", f"line is longer than {MAX_LINE} characters", 1)
    # The bare header is by far the commonest; it needs no field checks.
    if first == "GCF profile=generic":
        header: dict[str, str] = {"profile": "generic"}
    else:
        parsed = _parse_header_line(first, 1)
        if parsed.profile != "generic":
            raise GCFError(
                "unsupported_profile",
                "this is a graph-profile payload; decode it with gcfkit.graph.loads",
                1,
            )
        for name in _INT_FIELDS:
            parsed.count(name)
        answer = parsed.flag("delta") | parsed.flag("unchanged")
        if answer and not accept_answers:
            raise GCFError(
                "unsupported_profile",
                "this is a generic delta/unchanged payload; decode it with "
                "gcfkit.keyed.loads_delta",
                1,
            )
        header = {"profile": parsed.profile, **parsed.fields}
    parser = _Parser(header, id_fields or "key" in header)
    value = parser.run(lines, len(src) > MAX_LINE)
    return Document(header, value, parser.tables)


def loads(text: str | bytes) -> Any:
    """Decode a generic-profile GCF payload into plain JSON-model values (strict).

    Objects come back as ``dict`` in wire order, arrays as ``list``, integers as ``int`` and
    other numbers as ``float``. Every rejection is a :class:`~gcfkit.errors.GCFError` whose
    ``code`` names the spec's category and whose ``line`` is 1-based. Bytes must be UTF-8.

    >>> loads("GCF profile=generic\\nname=Ada\\n## langs [2]{id,name}\\n1|Ada\\n2|C\\n")
    {'name': 'Ada', 'langs': [{'id': 1, 'name': 'Ada'}, {'id': 2, 'name': 'C'}]}
    """
    return _decode(to_text(text), False, accept_answers=False).value
