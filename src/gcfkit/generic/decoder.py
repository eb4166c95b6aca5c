"""Strict decoder for the generic profile (spec §3, §4, §7, §8, §11-§13, §16.4-16.5).

The decoder makes one pass over the lines with an explicit stack of open containers
(frames, :mod:`gcfkit.generic.frames`), so nesting depth never turns into Python recursion:
a line first closes every frame deeper than its indentation (:meth:`_Parser.prepare`), then
the innermost frame either consumes it or declines it (and is closed, handing the line to
its parent, :meth:`_Parser.dispatch`). Counts are checked when a frame closes. This module
is that general state machine; :mod:`gcfkit.generic.fast` drives it with optimistic
shortcuts for the commonest lines, behind a switch (``fast.ENABLED``), and
:mod:`gcfkit.generic.scan` reads the tokens for both.

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

from collections.abc import Callable
from typing import Any, Final

from .. import speedups
from ..errors import GCFDecodeError, GCFError, decode_error_at, located
from ..grammar import (
    ATTACHMENT_INDENT,
    COUNT_10_RE,
    INDENT_WIDTH,
    ITEM_ID,
    KV_LINE,
    PLAIN_BRACKET,
    ROW_NOT_LAST,
    SUMMARY,
    TRAILER,
    is_comment,
)
from ..header import Spec, check_generic_header, check_spec, dense_header_line, to_text
from ..header import parse_header as _parse_header_line
from ..scalar import (
    MISSING,
    Attach,
    parse_field_decl_at,
    parse_id_field_decl_at,
    parse_key_at,
    split_cells,
)
from . import fast, scan, v360
from .frames import (
    ABSENT,
    MAX_DEPTH,
    MAX_LINE,
    PENDING,
    Document,
    Frame,
    GroupFrame,
    ItemsFrame,
    Marker,
    ObjectFrame,
    OpenFrame,
    Schema,
    TableFrame,
    TableInfo,
    check_deferred,
    full_row,
    group,
)
from .scan import (
    MAX_COUNT,
    MEMO_MAX,
    Numbers,
    looks_like_member,
    new_memo,
    numbers_for,
    read_bracket,
    read_definitions,
    split_row,
    summary_counts,
)

__all__ = [
    "MAX_COUNT",
    "MAX_DEPTH",
    "MAX_LINE",
    "Document",
    "TableInfo",
    "decode_document",
    "loads",
    "loads_dense",
    "parse_header",
]

_COUNT_DIGITS: Final = COUNT_10_RE.match
_ITEM_ID: Final = ITEM_ID.match
_PLAIN_BRACKET: Final = PLAIN_BRACKET.match
_KV_LINE: Final = KV_LINE.match

# Parsed declarations, shared across documents: tool results repeat their shapes. Keyed by
# (declaration text, keyed?, the key= field when @ markers are live, what constant columns
# mean: 0 none, 1 v3.6.0, 2 dense); schemas are immutable.
_SCHEMAS: dict[tuple[str, bool, str | None, int], Schema] = {}
_SCHEMAS_MAX: Final = 4096


def parse_header(line: str) -> dict[str, str]:
    """Validate a header line (§3) and return its fields in wire order, profile first.

    Works for both profiles; the caller decides which profiles it accepts.

    >>> parse_header("GCF profile=generic tool=search")
    {'profile': 'generic', 'tool': 'search'}
    """
    header = _parse_header_line(line, 1)
    return {"profile": header.profile, **header.fields}


class _Parser:
    """The general state machine over one document's lines.

    :meth:`run` reads every line through :meth:`prepare` and :meth:`dispatch`. The public
    methods are also what :mod:`gcfkit.generic.fast` may call (its ``Parser`` protocol).
    """

    def __init__(
        self,
        header: dict[str, str],
        id_fields: bool,
        numbers: Numbers,
        long_lines: bool,
        defs: dict[str, str] | None = None,
        v360_forms: bool = False,
    ) -> None:
        self.header = header
        # A dense payload (docs/extensions/dense.md): its definitions live in the memo.
        self.dense = defs is not None
        # The reference's v3.6.0 constant columns and grouped tables (generic/v360.py):
        # 2 in a dense payload (its own constant columns), 1 read, 0 rejected.
        self.consts = 2 if self.dense else 1 if v360_forms and not id_fields else 0
        self.id_fields = id_fields
        self.key_field = header.get("key")
        self.stack: list[OpenFrame] = []
        self.deferred: list[list[int]] = []  # [header line, actual count]
        self.summary: list[int] | None = None
        self.summary_line = 0
        self.root: Any = ABSENT
        self.root_kind = ""  # "", "scalar", "array", "object"
        self.tables: dict[int, TableInfo] = {}
        # False promises that no line exceeds MAX_LINE (the whole text is shorter).
        self.long_lines = long_lines
        self.memo = new_memo(numbers, defs)

    # -- driver ----------------------------------------------------------------------

    def run(self, lines: list[str]) -> Any:
        """Decode ``lines`` (``lines[0]`` is the header, already checked) line by line."""
        prepare = self.prepare
        dispatch = self.dispatch
        for i in range(1, len(lines)):
            shaped = prepare(lines[i], i + 1)
            if shaped is not None:
                dispatch(i + 1, shaped[0], shaped[1])
        return self.finish()

    def prepare(self, raw: str, ln: int) -> tuple[int, str] | None:
        """Everything a line gets before its frame sees it: its indentation measured and
        checked (§4.1), trailing blanks and CR dropped (§4), blank and comment lines
        skipped (§11), the ``##! summary`` trailer read (§8.4), deeper frames closed.

        Returns ``(indent, text)``, or None when the line was consumed here.
        """
        if not raw:
            return None
        if raw[0] == " ":
            s = raw.lstrip(" ")
            if not s:
                return None
            indent = len(raw) - len(s)
        else:
            s = raw
            indent = 0
        if self.long_lines and len(raw) > MAX_LINE:
            raise GCFDecodeError("limit_exceeded", f"line is longer than {MAX_LINE} characters", ln)
        if s[-1] in ROW_NOT_LAST:
            s = s.rstrip(" \t\r")
            if not s:
                return None
        c = s[0]
        if c == "#":
            if is_comment(s):
                return None
            if s.startswith(TRAILER):
                if indent & 1 or self.summary is not None:
                    raise GCFDecodeError("invalid_summary", "misplaced ##! summary trailer", ln)
                self._summary(ln, indent, s)
                return None
        elif c == "\t":
            raise GCFDecodeError(
                "tab_indentation", "indentation must be spaces; found a tab", ln, colno=indent + 1
            )
        if indent % INDENT_WIDTH:
            raise GCFDecodeError(
                "invalid_indent",
                f"indentation of {indent} spaces is not a multiple of {INDENT_WIDTH}",
                ln,
            )
        if self.summary is not None:
            raise GCFDecodeError(
                "invalid_summary", "the ##! summary trailer must be the last line", ln
            )
        stack = self.stack
        while stack and indent < stack[-1].indent:
            self.close(stack.pop())
        if c == "#":
            # A '##' line ends a table or expanded array at its own indentation (both
            # decline it), so the member that follows is read by its object directly.
            while stack and type(stack[-1]) is not ObjectFrame and stack[-1].indent == indent:
                self.close(stack.pop())
        return indent, s

    def dispatch(self, ln: int, indent: int, s: str) -> None:
        """Hand a prepared line to the innermost frame; a frame that declines it is closed
        and the line goes to its parent (or to the top level)."""
        stack = self.stack
        while True:
            if not stack:
                self._top_level(ln, indent, s)
                return
            top = stack[-1]
            if isinstance(top, TableFrame):
                done = self._tab_line(top, ln, indent, s)
            elif isinstance(top, ObjectFrame):
                done = self._obj_line(top, ln, indent, s)
            elif isinstance(top, GroupFrame):
                done = v360.group_line(self, top, ln, indent, s)
            else:
                done = self._exp_line(top, ln, indent, s)
            if done:
                return
            self.close(stack.pop())

    def finish(self) -> Any:
        """Close every open frame, check the ``[?]`` counts against the trailer, and return
        the root value (an empty object for an empty body)."""
        stack = self.stack
        while stack:
            self.close(stack.pop())
        if self.summary is not None:
            check_deferred(self.summary, self.summary_line, self.deferred)
        if self.root is ABSENT:
            return {}
        return self.root

    def push(self, frame: OpenFrame) -> None:
        """Open ``frame`` on the stack, within :data:`MAX_DEPTH`."""
        if len(self.stack) >= MAX_DEPTH:
            raise GCFDecodeError(
                "limit_exceeded", f"nesting deeper than {MAX_DEPTH} containers", frame.line
            )
        self.stack.append(frame)

    def close(self, f: Frame) -> None:
        """Close frame ``f`` (already off the stack): its row's attachments must be there,
        and its count must hold (a ``[?]`` count is recorded for the trailer)."""
        if type(f) is ObjectFrame:
            return
        if type(f) is TableFrame and f.markers is not None:
            self._end_row(f)
        elif type(f) is GroupFrame:
            v360.end_group(f)
        if f.count is None:
            self.deferred[f.deferred][1] = f.n
        elif f.n != f.count:
            raise GCFDecodeError(
                "count_mismatch",
                f"declared [{f.count}] but found {f.n} item(s)",
                f.line,
            )

    # -- root and trailer ------------------------------------------------------------

    def _top_level(self, ln: int, indent: int, s: str) -> None:
        if self.root_kind:
            if self.root_kind == "array" and not s.startswith("##"):
                raise GCFDecodeError(
                    "count_mismatch", "more items than the root array declares", ln
                )
            raise GCFDecodeError(
                "invalid_line", f"content after the root {self.root_kind} value", ln
            )
        if indent:
            raise GCFDecodeError("invalid_indent", "the body must start at indentation 0", ln)
        if s[0] == "=":
            self.root_kind = "scalar"
            self.root = self.memo.value(s[1:].strip(" \t"), ln)
            return
        if s.startswith("## ["):
            self.root_kind = "array"
            self.root = self.array_head(s, 3, ln, 0)
            return
        self.root_kind = "object"
        root: dict[str, Any] = {}
        self.root = root
        frame = ObjectFrame(0, ln, root)
        self.push(frame)
        self._obj_line(frame, ln, 0, s)

    def _summary(self, ln: int, indent: int, s: str) -> None:
        if indent or not (s == SUMMARY or s.startswith(SUMMARY + " ")):
            raise GCFDecodeError("invalid_summary", f"expected '{SUMMARY}' at indentation 0", ln)
        while self.stack:
            self.close(self.stack.pop())
        counts = summary_counts(s, ln)
        self.summary = counts
        self.summary_line = ln

    # -- array heads -----------------------------------------------------------------

    def _defer(self, f: Frame | None, ln: int, n: int = 0) -> None:
        if f is not None:
            f.deferred = len(self.deferred)
        self.deferred.append([ln, n])

    def array_head(
        self,
        s: str,
        pos: int,
        ln: int,
        body_indent: int,
        *,
        member_ctx: bool = False,
        inline_ok: bool = True,
        field: str = "",
        tab: TableFrame | None = None,
    ) -> Any:
        """Parse ``[N]...`` at ``s[pos]`` and return the (possibly still filling) value.

        ``field`` names the attachment field when this is a ``.field [N]`` attachment of
        the tabular frame ``tab`` (for shared array schemas, §7.4.5.3).
        """
        count, keyed, p = read_bracket(s, pos, ln)
        n = len(s)
        if p < n and s[p] == "{":
            cache_key = (s[p:], keyed, self.key_field if self.id_fields else None, self.consts)
            schema = _SCHEMAS.get(cache_key)
            if schema is None:
                if self.consts == 1 and not keyed:
                    grouped = v360.grouped_head(self, s, p, ln, count, body_indent, member_ctx)
                    if grouped is not None:
                        return grouped
                consts: list[tuple[int, str]] | None = (
                    [] if self.consts > 1 or (self.consts and not keyed) else None
                )
                fields, id_index = self._decl(s, p, ln, consts)
                schema = Schema(fields, id_index, keyed, ln, consts)
                if len(_SCHEMAS) >= _SCHEMAS_MAX:
                    _SCHEMAS.clear()
                _SCHEMAS[cache_key] = schema
            if schema.constants is not None:
                self._read_constants(schema.constants, ln)
            if keyed:
                return self._keyed(schema, count, ln, body_indent, member_ctx)
            if tab is not None:
                shared = tab.array_schemas
                if shared is None:
                    tab.array_schemas = {field: schema}
                elif field not in shared:
                    shared[field] = schema
            return self.table(schema, count, ln, body_indent, member_ctx)
        if keyed:
            raise GCFDecodeError(
                "invalid_keyed_map", "a keyed map [N:] needs a {key,...} field declaration", ln
            )
        if p < n:
            if s[p] != ":":
                raise GCFDecodeError(
                    "invalid_line", f"unexpected {s[p : p + 20]!r} after [count]", ln
                )
            if not inline_ok:
                raise GCFDecodeError(
                    "invalid_line", "a named inline array is written key[N]: values", ln
                )
            values = self.memo.scalar_list(s[p + 1 :], ln)
            self.check_count(count, len(values), ln)
            return values
        if tab is not None and tab.array_schemas is not None:
            shared_schema = tab.array_schemas.get(field)
            if shared_schema is not None:
                return self.table(shared_schema, count, ln, body_indent, False)
        items: list[Any] = []
        if count == 0:
            return items
        f = ItemsFrame(body_indent, ln, count, items)
        if count is None:
            self._defer(f, ln)
        self.push(f)
        return items

    def _read_constants(self, constants: list[tuple[int, str]], ln: int) -> None:
        """Read a dense header's constant values (D6) where they are written: a bad one (a
        reference to no definition, say) is its header's error, rows or no rows. The memo
        keeps each value for the rows, which put the same tokens back (``full_row``)."""
        memo = self.memo
        memo.line = ln
        for _, tok in constants:
            memo[tok]

    def check_count(self, count: int | None, got: int, ln: int) -> None:
        if count is None:
            self._defer(None, ln, got)
        elif count != got:
            raise GCFDecodeError(
                "count_mismatch", f"declared [{count}] but found {got} value(s)", ln
            )

    def _decl(
        self, s: str, pos: int, ln: int, consts: list[tuple[int, str]] | None = None
    ) -> tuple[list[str], int]:
        """Parse the field declaration ``{...}`` that ends the line at ``s[pos]``.

        Returns the names and the index of the ``@`` id field (-1 without one); the id
        field must be the header's ``key=`` field. ``consts`` collects a dense declaration's
        constant columns (D6).
        """
        if self.id_fields:
            fields, id_index, q = parse_id_field_decl_at(s, pos, ln)
        else:
            decl = parse_field_decl_at(s, pos, ln, constants=consts, dense=self.dense)
            (fields, q), id_index = decl, -1
        if q != len(s):
            raise decode_error_at(
                "invalid_line",
                f"unexpected {s[q : q + 20]!r} after the field declaration",
                ln,
                s,
                q,
            )
        if id_index >= 0 and fields[id_index] != self.key_field:
            raise decode_error_at(
                "invalid_key",
                f"the @ id field {fields[id_index]!r} must be the header's key= field "
                f"({self.key_field!r})",
                ln,
                s,
                pos,
            )
        return fields, id_index

    def table(
        self,
        schema: Schema,
        count: int | None,
        ln: int,
        indent: int,
        member_ctx: bool,
    ) -> list[Any]:
        rows: list[Any] = []
        frame = TableFrame(indent, ln, count, schema, rows, member_ctx, self.dense)
        self._open_table(frame, rows, ln)
        return rows

    def _keyed(
        self,
        schema: Schema,
        count: int | None,
        ln: int,
        indent: int,
        member_ctx: bool,
    ) -> dict[str, Any]:
        if len(schema.fields) < 2:
            raise GCFDecodeError(
                "invalid_keyed_map",
                "a keyed map header must declare at least two fields (key column + values)",
                ln,
            )
        if count == 0:
            raise GCFDecodeError(
                "invalid_keyed_map",
                "a keyed map cannot have a zero count [0:]; an empty object has no body",
                ln,
            )
        out: dict[str, Any] = {}
        frame = TableFrame(indent, ln, count, schema, out, member_ctx, self.dense)
        self._open_table(frame, out, ln)
        return out

    def _open_table(self, f: TableFrame, container: Any, ln: int) -> None:
        """Register a tabular array or keyed map, defer a ``[?]`` count, push its frame."""
        if self.id_fields:
            self._register(f, container, ln)
        if f.count is None:
            self._defer(f, ln)
        self.push(f)

    def _register(self, f: TableFrame, container: Any, ln: int) -> None:
        id_field = f.fields[f.id_index] if f.id_index >= 0 else None
        self.tables[id(container)] = TableInfo(list(f.fields), id_field, f.keyed, ln)

    # -- objects ---------------------------------------------------------------------

    def _obj_line(self, f: ObjectFrame, ln: int, indent: int, s: str) -> bool:
        if indent != f.indent:
            raise GCFDecodeError(
                "invalid_indent",
                f"unexpected indentation {indent} (expected {f.indent}) inside an object",
                ln,
            )
        obj = f.obj
        m = _KV_LINE(s)
        if m is not None:
            key, rest = m.groups()
            if key in obj:
                raise GCFDecodeError("duplicate_key", f"duplicate key {key!r} in one object", ln)
            obj[key] = self.memo.value(rest.strip(" \t"), ln)
            return True
        c = s[0]
        if c == "#":
            if not s.startswith("## "):
                raise GCFDecodeError("invalid_line", f"unrecognised line {s[:40]!r}", ln)
            if s[3:4] == "[":
                raise GCFDecodeError(
                    "invalid_line",
                    "an anonymous ## [N] array is only valid as the whole root value",
                    ln,
                )
            key, p = parse_key_at(s, 3, ln)
            if key in obj:
                raise GCFDecodeError("duplicate_key", f"duplicate key {key!r} in one object", ln)
            if p == len(s):
                child: dict[str, Any] = {}
                obj[key] = child
                self.push(ObjectFrame(indent + INDENT_WIDTH, ln, child))
                return True
            if s[p] != " " or s[p + 1 : p + 2] != "[":
                raise GCFDecodeError(
                    "invalid_line", f"unexpected {s[p : p + 20]!r} after the section name", ln
                )
            obj[key] = self.array_head(s, p + 1, ln, indent, member_ctx=True, inline_ok=False)
            return True
        if c == "." or c == "@" or c == "=":
            what = {
                ".": "a .field attachment outside a tabular row",
                "@": "an @N item outside an expanded array",
                "=": "a root scalar (=value) must be the whole body",
            }[c]
            raise GCFDecodeError("orphan_attachment" if c == "." else "invalid_line", what, ln)
        key, p = parse_key_at(s, 0, ln)
        n = len(s)
        while p < n and s[p] in " \t":
            p += 1
        if p >= n:
            raise GCFDecodeError("invalid_line", f"expected key=value, found {s[:40]!r}", ln)
        if key in obj:
            raise GCFDecodeError("duplicate_key", f"duplicate key {key!r} in one object", ln)
        if s[p] == "=":
            obj[key] = self.memo.value(s[p + 1 :].strip(" \t"), ln)
            return True
        if s[p] == "[":
            count, keyed, q = read_bracket(s, p, ln)
            if keyed or q >= n or s[q] != ":":
                raise GCFDecodeError(
                    "invalid_line", "an inline array is written key[N]: v1,v2,...", ln
                )
            values = self.memo.scalar_list(s[q + 1 :], ln)
            self.check_count(count, len(values), ln)
            obj[key] = values
            return True
        raise GCFDecodeError("invalid_line", f"expected key=value, found {s[:40]!r}", ln)

    # -- expanded arrays -------------------------------------------------------------

    def _exp_line(self, f: ItemsFrame, ln: int, indent: int, s: str) -> bool:
        if indent != f.indent:
            raise GCFDecodeError(
                "invalid_indent",
                f"unexpected indentation {indent} (expected {f.indent}) in an expanded array",
                ln,
            )
        if s[0] != "@":
            return False
        m = _ITEM_ID(s)
        if m is None:
            raise GCFDecodeError("invalid_item_id", f"expected '@N ' item prefix in {s[:40]!r}", ln)
        if int(m.group(1)) != f.n:
            raise GCFDecodeError(
                "invalid_item_id", f"item id @{m.group(1)} should be @{f.n} (its index)", ln
            )
        if f.count is not None and f.n >= f.count:
            raise GCFDecodeError("count_mismatch", f"more than the declared [{f.count}] items", ln)
        f.n += 1
        p = m.end()
        c = s[p : p + 1]
        if c == "=":
            f.items.append(self.memo.value(s[p + 1 :].strip(" \t"), ln))
        elif c == "{":
            if s[p:] != "{}":
                raise GCFDecodeError("invalid_line", "an object item is written '@N {}'", ln)
            child: dict[str, Any] = {}
            f.items.append(child)
            self.push(ObjectFrame(indent + INDENT_WIDTH, ln, child))
        elif c == "[":
            f.items.append(self.array_head(s, p, ln, indent + INDENT_WIDTH))
        else:
            raise GCFDecodeError(
                "invalid_line", "an item is '@N =scalar', '@N {}' or '@N [count]...'", ln
            )
        return True

    # -- tabular arrays and keyed maps -----------------------------------------------

    def _tab_line(self, f: TableFrame, ln: int, indent: int, s: str) -> bool:
        c = s[0]
        if indent == f.indent:
            if c == ".":
                self.attachment(f, ln, indent, s)
                return True
            if c == "#":
                return False
            if f.markers is not None and c != "@" and self._wants_inline(f):
                self._inline_body(f, ln, s)
                return True
            if f.count is not None and f.n >= f.count:
                return self._after_last_row(f, ln, s)
            if f.member_ctx and f.row_width > 1 and "|" not in s and looks_like_member(s):
                # A one-cell line cannot be a row of a wider table: it is the next member
                # of the enclosing object (this ends a [?] table, or reports a short one).
                return False
            self.row(f, ln, s)
            return True
        if indent == f.indent + INDENT_WIDTH and f.cur_row is not None:
            if c == ".":
                self.attachment(f, ln, indent, s)
                return True
            if f.markers is not None and self._wants_inline(f):
                self._inline_body(f, ln, s)
                return True
            if f.had_inline:
                raise GCFDecodeError(
                    "orphan_inline_attachment",
                    "positional inline body without an eligible ^ cell in its row",
                    ln,
                )
        raise GCFDecodeError(
            "invalid_indent",
            f"unexpected indentation {indent} (expected {f.indent}) in a tabular section",
            ln,
        )

    def _after_last_row(self, f: TableFrame, ln: int, s: str) -> bool:
        if f.member_ctx and looks_like_member(s):
            return False
        if f.had_inline:
            raise GCFDecodeError(
                "orphan_inline_attachment",
                "positional inline body without an eligible ^ cell in its row",
                ln,
            )
        raise GCFDecodeError("count_mismatch", f"more rows than the declared [{f.count}]", ln)

    @staticmethod
    def _wants_inline(f: TableFrame) -> bool:
        assert f.markers is not None
        return any(not m.filled and m.schema is not None for m in f.markers.values())

    def _end_row(self, f: TableFrame) -> None:
        if f.markers is not None:
            for m in f.markers.values():
                if not m.filled:
                    raise GCFDecodeError(
                        "missing_attachment",
                        f"^ cell for field {m.name!r} has no attachment body",
                        f.cur_line,
                    )
            f.markers = None

    def row(self, f: TableFrame, ln: int, s: str) -> None:
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
                    raise GCFDecodeError(
                        "invalid_item_id", f"expected '@N ' row prefix in {s[:40]!r}", ln
                    )
                raise GCFDecodeError(
                    "invalid_item_id", f"row id @{m.group(1)} should be @{f.n} (its index)", ln
                )
        toks = split_row(s, ln, f.dense) if '"' in s else s.split("|")
        short = False
        if f.constants is not None or f.dense:
            short = f.dense and len(toks) < f.row_width
            toks = full_row(f, toks, ln)
        elif len(toks) != f.width:
            raise GCFDecodeError(
                "row_width_mismatch",
                f"row has {len(toks)} cell(s); the header declares {f.width}",
                ln,
            )
        memo = self.memo
        if len(memo) > MEMO_MAX:
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
                raise GCFDecodeError(
                    "duplicate_key", f"duplicate identity value {ident!r} in the key column", ln
                )
            f.id_seen.add(marker)
        if f.simple and not short and "~" not in s and "^" not in s:
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
                raise GCFDecodeError(
                    "invalid_keyed_map",
                    "a keyed map row's cell 0 must be a string member key (quote it)",
                    ln,
                )
            if key in out:
                raise GCFDecodeError(
                    "duplicate_key", f"duplicate member key {key!r} in the keyed map", ln
                )
            out[key] = row
        f.cur_row = row
        f.cur_line = ln

    def _slow_row(self, f: TableFrame, vals: list[Any], ln: int, has_id: bool) -> dict[str, Any]:
        row: dict[str, Any] = {}
        markers: dict[str, Marker] | None = None
        for kind, name, ref in f.plan:
            if kind == 0:
                v = vals[ref]
                if v is MISSING:
                    continue
                if isinstance(v, Attach):
                    # A dense row needs its @N only for a positional body (D8).
                    positional = v.schema is not None or name in (f.inline_schemas or ())
                    if not has_id and (positional or not f.dense):
                        raise GCFDecodeError(
                            "invalid_item_id",
                            "a row with ^ cells must carry its @N prefix",
                            ln,
                        )
                    if markers is None:
                        markers = {}
                    if v.schema is not None:
                        markers[name] = Marker(name, v.schema, True)
                        if f.inline_schemas is None:
                            f.inline_schemas = {}
                        f.inline_schemas[name] = v.schema
                        f.had_inline = True
                    else:
                        schema = f.inline_schemas.get(name) if f.inline_schemas else None
                        markers[name] = Marker(name, schema, False)
                        if schema is not None:
                            f.had_inline = True
                    v = PENDING
                row[name] = v
            else:
                v = group(ref, vals, ln)
                if v is not ABSENT:
                    row[name] = v
        f.markers = markers
        return row

    def _inline_body(self, f: TableFrame, ln: int, s: str) -> None:
        assert f.markers is not None and f.cur_row is not None
        target = next(m for m in f.markers.values() if not m.filled and m.schema is not None)
        assert target.schema is not None
        if '"' in s:
            toks = split_cells(s, "|", ln)
        else:
            toks = [t.strip(" \t") for t in s.split("|")]
        if len(toks) != len(target.schema):
            raise GCFDecodeError(
                "inline_width_mismatch",
                f"positional body has {len(toks)} value(s); the inline schema of "
                f"{target.name!r} declares {len(target.schema)}",
                ln,
            )
        target.filled = True
        f.cur_row[target.name] = dict(
            zip(target.schema, [self.memo.value(t, ln) for t in toks], strict=True)
        )

    def attachment(self, f: TableFrame, ln: int, indent: int, s: str) -> None:
        row = f.cur_row
        if row is None:
            raise GCFDecodeError("orphan_attachment", "a .field attachment before any row", ln)
        name, p = parse_key_at(s, 1, ln)
        m = f.markers.get(name) if f.markers is not None else None
        if m is None:
            if ">" not in name:
                raise GCFDecodeError(
                    "orphan_attachment",
                    f"attachment .{name} has no ^ cell in its row",
                    ln,
                )
            if name in row:
                raise GCFDecodeError(
                    "duplicate_attachment", f"field {name!r} is attached twice in one row", ln
                )
        elif m.filled:
            raise GCFDecodeError(
                "duplicate_attachment", f"field {name!r} is attached twice in one row", ln
            )
        elif m.explicit:
            raise GCFDecodeError(
                "orphan_attachment",
                f".{name} cannot fill a ^{{...}} cell; that cell takes a positional body",
                ln,
            )
        n = len(s)
        if p >= n or s[p] != " ":
            raise GCFDecodeError(
                "invalid_line", "an attachment is '.field {}', '.field [N]...' or '.field =v'", ln
            )
        p += 1
        body = f.indent + len(ATTACHMENT_INDENT)
        c = s[p : p + 1]
        value: Any
        if c == "{":
            if s[p:] != "{}":
                raise GCFDecodeError(
                    "invalid_line", "an object attachment is written '.field {}'", ln
                )
            value = {}
            self.push(ObjectFrame(body, ln, value))
        elif c == "[":
            value = self.array_head(s, p, ln, body, field=name, tab=f)
        elif c == "=" and m is None:
            # Only a '>'-named field (never a column, §7.4.6.1 rule 4) travels as a bare
            # scalar attachment; a ^ cell stands for an object or array.
            value = self.memo.value(s[p + 1 :].strip(" \t"), ln)
        else:
            raise GCFDecodeError(
                "invalid_line", "an attachment is '.field {}', '.field [N]...' or '.field =v'", ln
            )
        if m is not None:
            m.filled = True
        row[name] = value


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


def _decode(
    doc: str,
    id_fields: bool,
    *,
    accept_answers: bool,
    numbers: Numbers | None = None,
    dense: bool = False,
    v360_forms: bool = True,
) -> Document:
    """Decode a generic payload, or with ``dense`` a dense one (docs/extensions/dense.md);
    ``v360_forms`` reads the reference's v3.6.0 tables (:mod:`gcfkit.generic.v360`)."""
    src = doc
    try:
        if "\r" in src:
            src = src.replace("\r\n", "\n")
        lines = src.split("\n")
        first = lines[0]
        if len(first) > MAX_LINE:
            raise GCFDecodeError("limit_exceeded", f"line is longer than {MAX_LINE} characters", 1)
        # The bare header is by far the commonest; it needs no field checks.
        if first == "GCF profile=generic" and not dense:
            header: dict[str, str] = {"profile": "generic"}
        else:
            parsed = _parse_header_line(first, 1)
            check_generic_header(parsed, dense, accept_answers)
            header = {"profile": parsed.profile, **parsed.fields}
        # A dense payload defines no §10a identity column: its key= is an unknown field.
        id_fields = not dense and (id_fields or "key" in header)
        defs: dict[str, str] = {}
        parser = _Parser(
            header,
            id_fields,
            numbers or scan.DEFAULT_NUMBERS,
            len(src) > MAX_LINE,
            defs if dense else None,
            v360_forms,
        )
        if dense:
            read_definitions(lines, defs, parser.memo, MAX_LINE)
        value = fast.run(parser, lines) if fast.ENABLED else parser.run(lines)
        return Document(header, value, parser.tables)
    except GCFError as e:
        # The document and the error's place in it, on the way out: free when no error.
        raise located(e, doc) from None


def loads(
    text: str | bytes,
    *,
    parse_float: Callable[[str], Any] | None = None,
    spec: Spec = "3.6.0",
) -> Any:
    """Decode a generic-profile GCF payload into plain JSON-model values (strict).

    Objects come back as ``dict`` in wire order, arrays as ``list``, integers as ``int`` and
    other numbers as ``float``, or, as with :func:`json.loads`, as what ``parse_float``
    makes of their text (``decimal.Decimal`` keeps every digit); a double out of range is
    rejected before it is called. Every rejection is a
    :class:`~gcfkit.errors.GCFDecodeError`: ``code`` names the spec's category, ``lineno``
    (also ``line``) and ``colno`` are 1-based, ``pos`` indexes ``doc``, the decoded text.
    Bytes must be UTF-8.

    It also reads the two table forms the reference implementation (gcf-python 2.8.0)
    writes as GCF v3.6.0, constant columns and value grouping (:mod:`gcfkit.generic.v360`);
    ``spec="3.5.3"`` rejects them, as v3.5.3 does (``invalid_line``).

    >>> loads("GCF profile=generic\\nname=Ada\\n## langs [2]{id,name}\\n1|Ada\\n2|C\\n")
    {'name': 'Ada', 'langs': [{'id': 1, 'name': 'Ada'}, {'id': 2, 'name': 'C'}]}
    >>> from decimal import Decimal
    >>> loads("GCF profile=generic\\nprice=19.990\\n", parse_float=Decimal)
    {'price': Decimal('19.990')}
    """
    v360_forms = check_spec(spec)
    if parse_float is None:
        # The C accelerator reads what it can (v3.5.3) exactly as the reference does, and
        # hands the rest, every error included, to the reference below.
        return speedups.decode(to_text(text), _READERS[v360_forms])
    numbers = numbers_for(parse_float)
    text = to_text(text)
    return _decode(text, False, accept_answers=False, numbers=numbers, v360_forms=v360_forms).value


def _loads_reference(text: str) -> Any:
    return _decode(text, False, accept_answers=False).value


def _loads_v353(text: str) -> Any:
    return _decode(text, False, accept_answers=False, v360_forms=False).value


_READERS: Final = {True: _loads_reference, False: _loads_v353}


def loads_dense(text: str | bytes, *, parse_float: Callable[[str], Any] | None = None) -> Any:
    """Decode a dense-profile payload (docs/extensions/dense.md); see gcfkit.dense.loads.

    >>> loads_dense("GCF-dense\\n$a=two words\\n## [2]{k,v}\\n1|$a\\n2|[1]: $a\\n")
    [{'k': 1, 'v': 'two words'}, {'k': 2, 'v': ['two words']}]
    """
    if parse_float is None:  # as in loads: the C accelerator, else the reference
        return speedups.decode_dense(to_text(text), dense_header_line(), _read_dense)
    return _read_dense(to_text(text), numbers_for(parse_float))


def _read_dense(text: str, numbers: Numbers | None = None) -> Any:
    return _decode(text, False, accept_answers=False, numbers=numbers, dense=True).value
