"""The generic decoder's fast paths: optimistic shortcuts for its commonest lines.

:func:`run` drives the general state machine (:mod:`gcfkit.generic.decoder`) over a
document like its own ``run`` does, except that it reads the commonest lines itself:
bare-key ``key=value`` members and ``key[N]: values`` inline arrays, ``## key`` sections
and array heads, ``@N`` rows and ``.field`` attachments (:func:`quick_attachment`), runs of
plain table rows in batches, decoded column by column (:func:`fast_rows`,
:func:`emit_rows`), and the plain tables of a shared array schema without opening a frame
for them (:func:`attached_rows`). Turning :data:`ENABLED` off makes every decode take the
general path alone.

**The contract.** A fast path takes a line only when the general path would read that line
to the same value; on any doubt it leaves the line, and the lines after it, to the general
path, which then accepts it or reports it. So:

- it raises nothing of its own: an error it meets in its own reading (a cell that does not
  decode in a batch) makes it stop and hand over, and the general path, reading the same
  line, raises the error with its line number. (Errors swallowed this way may carry a
  stale line: the memo's ``line`` is not set per batch row, since the batch is abandoned.)
  The only errors that leave a fast path are those of the general path's own functions
  (``Memo.value``, ``Parser.array_head``...) called on the line at hand, exactly as the
  general path calls them;
- a batch is taken whole or not at all (a keyed map's batch stops before a row the general
  path must judge), so no state depends on how far a failing batch got;
- what it may change is listed on the :class:`Parser` protocol and the frames it is given:
  the memo (a cache of token decodes, so whatever it adds is true), the current
  :class:`~gcfkit.generic.frames.TableFrame`'s ``out``, ``n``, ``cur_row``, ``cur_line`` and
  ``had_inline``, and the current row's attachment markers (``filled``).

tests/test_fast_paths.py decodes every conformance fixture, the fuzz corpus and the
property examples both ways and requires the same value, or the same error code and line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any, Final, Protocol

from ..errors import GCFError
from ..grammar import (
    ATTACHMENT_INDENT,
    INDENT_WIDTH,
    MEMBER_LINE,
    NUMBER_FIRST,
    QUICK_ATTACHMENT,
    ROW_NOT_FIRST,
    ROW_NOT_LAST,
)
from ..scalar import MISSING
from .frames import (
    MAX_DEPTH,
    MAX_LINE,
    ObjectFrame,
    OpenFrame,
    Schema,
    TableFrame,
    build_row,
    full_row,
)
from .scan import MEMO_MAX, Memo, column, split_row

__all__ = [
    "ENABLED",
    "Parser",
    "attached_rows",
    "emit_rows",
    "fast_rows",
    "quick_attachment",
    "rows_from_tokens",
    "run",
]

#: The switch: False decodes every line through the general path alone (for tests).
ENABLED: bool = True

# Plain rows are decoded column by column in batches of at most _BATCH_ROWS (bounding the
# memo's growth between size checks) once there are _BATCH_MIN of them.
_BATCH_ROWS: Final = 1024
_BATCH_MIN: Final = 8
_MEMBER_LINE: Final = MEMBER_LINE.match
_QUICK_ATTACHMENT: Final = QUICK_ATTACHMENT.match
# MEMBER_LINE's last group tells the member: an inline array, a section, an array head.
_INLINE_MEMBER: Final = 3
_SECTION_MEMBER: Final = 4


class Parser(Protocol):
    """What the fast paths may use of the general parser (``decoder._Parser``)."""

    stack: list[OpenFrame]
    memo: Memo
    long_lines: bool
    id_fields: bool
    summary: list[int] | None

    def prepare(self, raw: str, ln: int) -> tuple[int, str] | None: ...
    def dispatch(self, ln: int, indent: int, s: str) -> None: ...
    def finish(self) -> Any: ...
    def push(self, frame: OpenFrame) -> None: ...
    def close(self, f: OpenFrame) -> None: ...
    def row(self, f: TableFrame, ln: int, s: str) -> None: ...
    def attachment(self, f: TableFrame, ln: int, indent: int, s: str) -> None: ...
    def check_count(self, count: int | None, got: int, ln: int) -> None: ...
    def table(
        self, schema: Schema, count: int | None, ln: int, indent: int, member_ctx: bool
    ) -> list[Any]: ...
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
    ) -> Any: ...


def rows_from_tokens(
    fields: Iterable[str], decode: Callable[[str], Any], batch: Iterable[list[str]]
) -> Iterator[dict[str, Any]]:
    """One row dict per token list of ``batch``: ``fields`` zipped with the decoded tokens,
    in one C-level pass (``map``/``zip``), for rows of simple columns without ``~``."""
    return map(dict, map(zip, repeat(fields), map(map, repeat(decode), batch)))


def run(p: Parser, lines: list[str]) -> Any:
    """Decode ``lines`` (``lines[0]`` is the header, already checked) with the fast paths."""
    stack = p.stack
    memo = p.memo
    value = memo.value
    scan_number = memo.scan
    member_line = _MEMBER_LINE
    num_first = NUMBER_FIRST
    bare_first = memo.BARE  # a dense memo's leaves out the reference sigil $
    long_lines = p.long_lines
    not_last = ROW_NOT_LAST
    trailer_read = False
    i, n_lines = 1, len(lines)
    while i < n_lines:
        raw = lines[i]
        i += 1
        if not raw:
            continue  # a blank line, as prepare says
        ln = i
        # Parser.prepare, inline for the ordinary line: not blank, no trailing blank, an
        # even indentation, no comment or trailer line (a '## ' section is ordinary), no
        # tab, no limit near, no trailer read yet. Any other line gets prepare itself.
        if raw[0] == " ":
            s = raw.lstrip(" ")
            indent = len(raw) - len(s)
        else:
            s = raw
            indent = 0
        if (
            not s
            or s[-1] in not_last
            or indent & 1
            or trailer_read
            or ((c := s[0]) == "#" and s[1:3] != "# ")
            or c == "\t"
            or (long_lines and len(raw) > MAX_LINE)
        ):
            shaped = p.prepare(raw, ln)
            trailer_read = p.summary is not None  # only prepare reads the trailer
            if shaped is None:
                continue
            indent, s = shaped
            c = s[0]
        else:
            while stack and indent < stack[-1].indent:
                p.close(stack.pop())
            if c == "#":
                # A '## ' section line: it also ends the tables and expanded arrays at
                # its own indentation, as prepare does.
                while stack and type(stack[-1]) is not ObjectFrame and stack[-1].indent == indent:
                    p.close(stack.pop())
        if stack:
            top = stack[-1]
            if type(top) is ObjectFrame and indent == top.indent:
                obj = top.obj
                # An ASCII identifier is exactly a bare key (grammar.BARE_KEY).
                key, eq, rest = s.partition("=") if c != "#" else (s, "", "")
                if eq and key.isidentifier() and key.isascii() and key not in obj:
                    c = rest[:1]
                    if c in bare_first:
                        if rest.isascii():
                            obj[key] = rest
                            continue
                    elif c in num_first:
                        # As Memo.value, inline, with plain integers first.
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
                            t = type(v)
                            if (t is int and size < 19) or (t is float and v - v == 0):
                                obj[key] = v
                                continue
                        elif end >= 0 and rest.isascii():
                            obj[key] = rest  # a number and more: a bare string
                            continue
                    obj[key] = value(rest.strip(" \t"), ln)
                    continue
                m = member_line(s)
                if m is not None:
                    which = m.lastindex or 0
                    key = m.group(which if which != _INLINE_MEMBER else 1)
                    if key not in obj:  # a duplicate is the general path's to report
                        if which == _INLINE_MEMBER:
                            values = memo.scalar_list(m.group(3), ln)
                            if len(values) == int(m.group(2)):
                                obj[key] = values
                                continue
                        elif which == _SECTION_MEMBER:
                            child: dict[str, Any] = {}
                            obj[key] = child
                            p.push(ObjectFrame(indent + INDENT_WIDTH, ln, child))
                            continue
                        else:
                            obj[key] = p.array_head(
                                s, len(key) + 4, ln, indent, member_ctx=True, inline_ok=False
                            )
                            if type(stack[-1]) is TableFrame:
                                i = fast_rows(p, stack[-1], lines, i)
                            continue
            elif (
                type(top) is TableFrame
                and indent == top.indent
                and (c == "." or (c == "@" and (top.count is None or top.n < top.count)))
            ):
                # What _tab_line does with an attachment or an @N row, without its
                # other checks (none applies to these two).
                if c == ".":
                    j = attached_rows(p, top, s, lines, i)
                    if j >= 0:
                        i = j
                        continue
                    if not quick_attachment(p, top, s, ln):
                        p.attachment(top, ln, indent, s)
                else:
                    p.row(top, ln, s)
                top = stack[-1]
                if type(top) is TableFrame and top.markers is None:
                    i = fast_rows(p, top, lines, i)
                continue
        p.dispatch(ln, indent, s)
        if stack:
            top = stack[-1]
            if type(top) is TableFrame and top.markers is None:
                i = fast_rows(p, top, lines, i)
    return p.finish()


def quick_attachment(p: Parser, f: TableFrame, s: str, ln: int) -> bool:
    """Read the common attachments, ``.field {}``, ``.field [N]: values``, ``.field [N]{...}``
    and the repeat ``.field [N]`` of a shared array schema (§7.4.5.3), as
    ``Parser.attachment`` would, when their ``^`` cell is waiting for them; False leaves
    the line to it."""
    markers = f.markers
    row = f.cur_row
    if markers is None or row is None:
        return False
    hit = _QUICK_ATTACHMENT(s)
    if hit is None:
        return False
    name, count, text, decl = hit.groups()
    m = markers.get(name)
    if m is None or m.filled or m.explicit:
        return False
    body = f.indent + len(ATTACHMENT_INDENT)
    if text is not None:
        values = p.memo.scalar_list(text, ln)
        if len(values) != int(count):
            return False
        row[name] = values
    elif decl is not None:
        # As the general path, from the '[' on.
        row[name] = p.array_head(s, len(name) + 2, ln, body, field=name, tab=f)
    elif count is None:
        child: dict[str, Any] = {}
        p.push(ObjectFrame(body, ln, child))
        row[name] = child
    else:
        shared = f.array_schemas
        schema = shared.get(name) if shared is not None else None
        if schema is None:
            return False
        row[name] = p.table(schema, int(count), ln, body, False)
    m.filled = True
    return True


def fast_rows(p: Parser, f: TableFrame, lines: list[str], i: int) -> int:
    """Consume plain rows (no attachments, no id column) in a tight loop; return the index
    of the first line left for the general path."""
    if f.id_index >= 0:
        return i
    k = f.indent
    limit = len(lines)
    if i >= limit or lines[i][k : k + 1] in ROW_NOT_FIRST:
        return i  # the next line is no plain row (often an @N row of an attachment table)
    pad = " " * k
    width = f.width
    dense = f.dense
    padded = dense or f.constants is not None
    row_width = f.row_width
    count = f.count
    if count is not None and i + count - f.n < limit:
        limit = i + count - f.n
    not_first = ROW_NOT_FIRST
    not_last = ROW_NOT_LAST
    long_lines = p.long_lines
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
                toks = split_row(s, i + len(batch) + 1, dense) if '"' in s else s.split("|")
                if padded:
                    # Short rows and constants (D6, D7, v3.6.0 §7.4.7); a bad width is
                    # the general path's.
                    if len(toks) < row_width:
                        tilde = True
                    toks = full_row(f, toks, i + len(batch) + 1)
                elif len(toks) != width:
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
            # pass; on an error the rows it appended are taken back.
            memo = p.memo
            if len(memo) > MEMO_MAX:
                memo.clear()
            before = len(out)
            try:
                out.extend(rows_from_tokens(f.fields, memo.__getitem__, batch))
            except GCFError:
                del out[before:]
                break
            done = len(batch)
            f.n += done
            f.cur_row = out[-1]
            f.cur_line = i + done
            f.had_inline = False
        else:
            done = emit_rows(p, f, batch, tilde, i + 1)
        i += done
        if i < stop:
            break  # a row was left over, or a line was no row
    return i


def attached_rows(p: Parser, f: TableFrame, s: str, lines: list[str], i: int) -> int:
    """Read a waiting '.field [N]' attachment of a shared array schema whose N rows are
    plain and whose table ends with them, without opening a frame for it; return the
    index past the rows, or -1 to leave everything (errors included) to the general path,
    which would read these lines to the same value."""
    markers = f.markers
    shared = f.array_schemas
    if markers is None or shared is None or p.id_fields or len(p.stack) >= MAX_DEPTH:
        return -1
    hit = _QUICK_ATTACHMENT(s)
    if hit is None or hit.group(2) is None or hit.lastindex != 2:
        return -1
    name = hit.group(1)
    m = markers.get(name)
    schema = shared.get(name)
    if m is None or schema is None or m.filled or m.explicit or not schema.simple:
        return -1
    if schema.constants is not None:
        return -1  # dense rows narrower than the declaration: the general path's
    count = int(hit.group(2))
    end = i + count
    if end > len(lines):
        return -1
    body = f.indent + len(ATTACHMENT_INDENT)
    if end < len(lines):
        # The table must end here by indentation: a blank or comment line could hide
        # an extra row, so it is left to the general path.
        nxt = lines[end]
        rest = nxt.lstrip(" ")
        if len(nxt) - len(rest) >= body or not rest.strip(" \t\r") or rest[0] == "#":
            return -1
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
            or row[0] in ROW_NOT_FIRST
            or row[-1] in ROW_NOT_LAST
            or "^" in row
            or "~" in row
            or '"' in row
            or (p.long_lines and len(line) > MAX_LINE)
        ):
            return -1
        toks = row.split("|")
        if len(toks) != width:
            return -1
        batch.append(toks)
    memo = p.memo
    if len(memo) > MEMO_MAX:
        memo.clear()
    try:
        rows = list(rows_from_tokens(schema.fields, memo.__getitem__, batch))
    except GCFError:
        return -1
    row_of = f.cur_row
    assert row_of is not None  # markers are only set with the row they belong to
    row_of[name] = rows
    m.filled = True
    return end


def emit_rows(p: Parser, f: TableFrame, batch: list[list[str]], tilde: bool, ln: int) -> int:
    """Decode ``batch`` (split rows of the right width, the first on line ``ln``) into
    ``f``; return how many rows were taken: all of them, none when a cell does not decode,
    or (in a keyed map) those before a row whose key the general path must judge."""
    memo = p.memo
    if len(memo) > MEMO_MAX:
        memo.clear()
    getitem = memo.__getitem__
    out = f.out
    try:
        if len(batch) < _BATCH_MIN:
            table: list[Any] = [tuple(map(getitem, toks)) for toks in batch]
        else:
            # Every row of a batch has the table's width, so no zip here needs strict.
            cols = [column(col, memo) for col in zip(*batch, strict=False)]
            table = list(zip(*cols, strict=False))
    except GCFError:
        return 0
    row: dict[str, Any]
    if isinstance(out, list):
        if not f.simple:
            plan = f.plan
            # A path group's error (a ^ in a path column) is the general path's too.
            try:
                rows = [build_row(plan, vals, line) for line, vals in enumerate(table, ln)]
            except GCFError:
                return 0
            out.extend(rows)
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
        _taken(f, out[-1], len(table), ln)
        return len(table)
    fields = f.value_fields
    plan = f.plan
    taken = 0
    for vals in table:
        key = vals[0]
        if type(key) is not str or key in out:
            break
        if not f.simple:
            try:
                row = build_row(plan, vals, ln + taken)
            except GCFError:
                break
        elif tilde:
            row = {n: v for n, v in zip(fields, vals[1:], strict=False) if v is not MISSING}
        else:
            row = dict(zip(fields, vals[1:], strict=False))
        out[key] = row
        taken += 1
    if taken:
        _taken(f, row, taken, ln)
    return taken


def _taken(f: TableFrame, last: dict[str, Any], taken: int, ln: int) -> None:
    """Account for ``taken`` rows read from line ``ln`` on, ``last`` being the last one."""
    f.n += taken
    f.cur_row = last
    f.cur_line = ln + taken - 1
    f.had_inline = False
