"""The reference's v3.6.0 tabular forms, read and (on request) written.

gcf-python 2.8.0, the reference implementation, writes two forms that GCF v3.5.3 lacks
and calls them v3.6.0 (the v3.6.0 text is not published with v3.5.3; these rules are
what the reference writes and reads, docs/extensions/v3.6.0-forms.md):

- a *constant column* (§7.4.7): a column whose value is the same in every row of a
  section's table is declared once, ``## rows [2]{id,kind=a,s}``, and left out of the
  rows. gcf-python writes it by default;
- *value grouping* (§7.4.8), opt-in there: ``## [3]{@id,kind,s} group=kind``, then a
  group line ``kind=a [2]`` before the rows of each value of the grouping column, which
  the rows leave out; ``@`` marks the key column, unique across the table.

Reading: the general decoder reads a constant column as dense's (one rule,
:func:`gcfkit.generic.frames.full_row`, with the value read as a v3.5.3 scalar) and hands
a grouped table to :func:`grouped_head` and :func:`group_line`. Writing: the encoder's
``spec="3.6.0"`` asks :func:`constant_cells` which columns to factor, and
:func:`dumps_grouped` writes a grouped table.

>>> import gcfkit
>>> gcfkit.loads("GCF profile=generic\\n## rows [2]{id,kind=a,s}\\n1|x\\n2|y\\n")
{'rows': [{'id': 1, 'kind': 'a', 's': 'x'}, {'id': 2, 'kind': 'a', 's': 'y'}]}
>>> gcfkit.loads("GCF profile=generic\\n## [2]{@id,k} group=k\\nk=a [2]\\n1\\n2\\n")
[{'id': 1, 'k': 'a'}, {'id': 2, 'k': 'a'}]
>>> print(gcfkit.dumps({"r": [{"id": 1, "k": "a"}, {"id": 2, "k": "a"}]}, spec="3.6.0"), end="")
GCF profile=generic
## r [2]{id,k=a}
1
2
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from ..errors import GCFDecodeError, GCFEncodeError, decode_error_at
from ..grammar import COUNT_10_RE
from ..header import format_header
from ..scalar import MISSING, check_constant_token, parse_id_field_decl_at, parse_key_at
from . import dense_rows
from .cells import Nested, format_cell, key_text
from .frames import GroupFrame, OpenFrame
from .scan import MAX_COUNT, MEMO_MAX, Memo, looks_like_member, split_row

__all__ = [
    "GROUP_CLAUSE",
    "constant_cells",
    "dumps_grouped",
    "end_group",
    "factor_rows",
    "group_line",
    "grouped_head",
]

#: What follows a grouped table's field declaration, before the grouping column's name.
GROUP_CLAUSE: Final = " group="
_COUNT: Final = COUNT_10_RE.match


class _Parser(Protocol):
    memo: Memo

    def push(self, frame: OpenFrame) -> None: ...


def grouped_head(
    p: _Parser, s: str, pos: int, ln: int, count: int | None, indent: int, member_ctx: bool
) -> list[Any] | None:
    """Open the value-grouped table whose declaration is at ``s[pos]``, or return None when
    the line declares no grouping (the caller reads it as any other table).

    >>> from gcfkit.generic.scan import DEFAULT_NUMBERS, new_memo
    >>> class P:
    ...     memo = new_memo(DEFAULT_NUMBERS)
    ...     def push(self, frame): self.frame = frame
    >>> p = P()
    >>> grouped_head(p, "## [2]{@id,k,v=1} group=k", 6, 2, 2, 0, False)
    []
    >>> p.frame.fields, p.frame.key, p.frame.column, p.frame.constants, p.frame.cells
    (['id', 'k', 'v'], 0, 1, {2: 1}, [0])
    """
    if GROUP_CLAUSE not in s:
        return None
    consts: list[tuple[int, str]] = []
    fields, key, q = parse_id_field_decl_at(s, pos, ln, constants=consts)
    if not s.startswith(GROUP_CLAUSE, q):
        return None
    at = q + len(GROUP_CLAUSE)
    name, end = parse_key_at(s, at, ln)
    if end != len(s):
        raise decode_error_at(
            "invalid_line", f"unexpected {s[end : end + 20]!r} after group={name}", ln, s, end
        )
    if key < 0:
        raise decode_error_at(
            "invalid_group", "a grouped table marks its key column with @", ln, s, pos
        )
    constants = {i: p.memo.value(tok, ln) for i, tok in consts}
    column = fields.index(name) if name in fields else -1
    why = (
        "is not a declared field"
        if column < 0
        else "is the @ key column"
        if column == key
        else "is a constant column"
        if column in constants
        else ""
    )
    if why:
        raise decode_error_at("invalid_group", f"group={name}: the column {why}", ln, s, at)
    if count is None:
        raise decode_error_at(
            "invalid_group", "a grouped table declares its count, not [?]", ln, s, pos - 3
        )
    f = GroupFrame(indent, ln, count, fields, key, column, constants, member_ctx)
    p.push(f)
    return f.out


def group_line(p: _Parser, f: GroupFrame, ln: int, indent: int, s: str) -> bool:
    """Read one line of a grouped table: a group line, or a row of the open group. False
    declines the line (the table is complete, or a section starts)."""
    if indent != f.indent:
        raise GCFDecodeError(
            "invalid_indent",
            f"unexpected indentation {indent} (expected {f.indent}) in a grouped table",
            ln,
        )
    if s[0] == "#":
        return False
    if f.left:
        _row(p, f, ln, s)
        return True
    if f.count is not None and f.n >= f.count:
        if f.member_ctx and looks_like_member(s):
            return False
        raise GCFDecodeError("count_mismatch", f"more rows than the declared [{f.count}]", ln)
    _group(p, f, ln, s)
    return True


def end_group(f: GroupFrame) -> None:
    """A grouped table closes: its last group must hold the rows its line declared."""
    if f.left:
        raise GCFDecodeError(
            "count_mismatch",
            f"the group declares {f.left} more row(s) than follow it",
            f.group_line,
        )


def _group(p: _Parser, f: GroupFrame, ln: int, s: str) -> None:
    """``col=value [k]``: the grouping column's value for the next ``k`` rows."""
    name, q = parse_key_at(s, 0, ln)
    column = f.fields[f.column]
    if name != column:
        raise decode_error_at(
            "invalid_group", f"a group line names {column!r}, not {name!r}", ln, s, 0
        )
    if not s.startswith("=", q):
        raise decode_error_at("invalid_group", f"expected '=' after {name}", ln, s, q)
    b = s.rfind(" [")
    if b <= q or s[-1] != "]":
        raise decode_error_at(
            "invalid_group", "a group line ends with its row count ' [k]'", ln, s, len(s)
        )
    digits = s[b + 2 : -1]
    if not _COUNT(digits) or digits == "0" or len(digits) > len(str(MAX_COUNT)):
        raise decode_error_at(
            "invalid_count",
            f"group count [{digits[:20]}] must be a decimal of at least 1 without leading zeros",
            ln,
            s,
            b + 2,
        )
    k = int(digits)
    if f.count is not None and f.n + k > f.count:
        raise decode_error_at(
            "count_mismatch",
            f"the groups hold more rows than the declared [{f.count}]",
            ln,
            s,
            b + 2,
        )
    tok = s[q + 1 : b]
    check_constant_token(tok, ln, s, q + 1, dense=False)
    value = p.memo.value(tok, ln)
    ident = (type(value), value)
    if ident in f.groups:
        raise decode_error_at(
            "invalid_group", f"a second group for {name}={tok[:30]}", ln, s, q + 1
        )
    f.groups.add(ident)
    f.value = value
    f.left = k
    f.group_line = ln


def _row(p: _Parser, f: GroupFrame, ln: int, s: str) -> None:
    toks = split_row(s, ln) if '"' in s else s.split("|")
    cells = f.cells
    if len(toks) != len(cells):
        raise GCFDecodeError(
            "row_width_mismatch",
            f"row has {len(toks)} cell(s); a row of this grouped table has {len(cells)}",
            ln,
        )
    memo = p.memo
    if len(memo) > MEMO_MAX:
        memo.clear()
    memo.line = ln
    got: dict[int, Any] = {}
    for i, tok in zip(cells, toks, strict=True):
        t = tok.strip(" \t")
        if t == "^" or (t[:2] == "^{" and t[-1] == "}"):
            raise GCFDecodeError(
                "invalid_group", "a grouped table's rows carry no attachments (^)", ln
            )
        v = memo[tok]
        if v is not MISSING:
            got[i] = v
    if f.key not in got:
        raise GCFDecodeError(
            "invalid_group", f"the row has no {f.fields[f.key]!r} (its @ key column)", ln
        )
    ident = got[f.key]
    marker = (type(ident), ident)
    if marker in f.keys:
        raise GCFDecodeError("duplicate_key", f"key {ident!r} appears twice in the table", ln)
    f.keys.add(marker)
    row: dict[str, Any] = {}
    constants = f.constants
    for i, name in enumerate(f.fields):
        if i == f.column:
            row[name] = f.value
        elif i in constants:
            row[name] = constants[i]
        elif i in got:
            row[name] = got[i]
    f.out.append(row)
    f.n += 1
    f.left -= 1


def constant_cells(rows: Sequence[list[str]], candidates: Sequence[int]) -> dict[int, str]:
    """The constant columns the reference factors out of a section's table (§7.4.7):
    cell index -> token, for each of ``candidates`` (the cells of plain, unflattened
    columns) that holds one same scalar in every row. The table keeps at least one row
    cell: when every cell is constant, the last stays in the rows.

    >>> constant_cells([["1", "a", "x"], ["2", "a", "x"]], [0, 1, 2])
    {1: 'a', 2: 'x'}
    >>> constant_cells([["a", "x"], ["a", "x"]], [0, 1])
    {0: 'a'}
    """
    if len(rows) < 2:
        return {}
    first = rows[0]
    found: dict[int, str] = {}
    for j in candidates:
        tok = first[j]
        if tok == "~" or tok == "^":  # absent, or a nested value's attachment
            continue
        if all(r[j] == tok for r in rows):
            found[j] = tok
    if len(found) == len(first):
        del found[len(first) - 1]
    return found


def factor_rows(
    out: list[str], written: Sequence[tuple[int, str, list[str]]], candidates: Sequence[int]
) -> dict[int, str] | None:
    """Factor the constant columns out of a section's rows already in ``out``: ``written``
    holds each row's line index, prefix (``@N `` or the indentation) and cells. Returns the
    constant columns for the declaration (:func:`gcfkit.generic.dense_rows.declaration`
    writes them as the reference does), or None when there are none."""
    consts = constant_cells([cells for _, _, cells in written], candidates)
    if not consts:
        return None
    for index, pre, cells in written:
        out[index] = pre + dense_rows.join(cells, consts, False)[0]
    return consts


def dumps_grouped(rows: Sequence[Any], key: str, column: str, *, tool: str | None = None) -> str:
    """A value-grouped table of ``rows`` (objects of scalars) as the reference writes it
    (gcf-python 2.8.0 ``encode_generic_grouped``, byte for byte): ``key`` is the unique
    ``@`` key column, ``column`` the grouping column. The rows come back grouped: a group's
    rows follow its first row, so the order changes unless equal values are adjacent.

    Unlike the reference, a row without the grouping column is refused rather than read
    back with ``null`` there (``unsupported_shape``), as is every shape the form cannot
    carry: no rows, a non-object, a nested value, a missing, null or repeated key.

    >>> print(dumps_grouped([{"id": 1, "k": "a", "v": 0}, {"id": 2, "k": "b", "v": 0},
    ...                      {"id": 3, "k": "a", "v": 0}], "id", "k"), end="")
    GCF profile=generic
    ## [3]{@id,k,v=0} group=k
    k=a [2]
    1
    3
    k=b [1]
    2
    """

    def refuse(why: str) -> GCFEncodeError:
        return GCFEncodeError("unsupported_shape", f"a value-grouped table needs {why}")

    if not isinstance(rows, (list, tuple)) or not rows:
        raise refuse("a non-empty array")
    if key == column:
        raise refuse("a key column other than its grouping column")
    if not all(isinstance(r, dict) for r in rows):
        raise refuse("an array of objects")
    fields = list(dict.fromkeys(f for r in rows for f in r))
    cells: list[dict[str, str]] = []
    seen: set[str] = set()
    for r in rows:
        try:
            row = {f: format_cell(v) for f, v in r.items()}
        except Nested:
            raise refuse("scalar values only") from None
        k = row.get(key)
        if k is None or k == "-" or column not in row:
            raise refuse(f"{key!r} (not null) and {column!r} in every row")
        if k in seen:
            raise refuse(f"unique {key!r} values ({k} twice)")
        seen.add(k)
        cells.append(row)
    consts: dict[str, str] = {}
    if len(rows) > 1:
        for f in fields:
            tok = cells[0].get(f, "~")
            if f not in (key, column) and all(c.get(f, "~") == tok != "~" for c in cells):
                consts[f] = tok
    names = ["@" + key_text(f) if f == key else key_text(f) for f in fields]
    head = dense_rows.declaration(names, {fields.index(f): t for f, t in consts.items()})
    groups: dict[str, list[dict[str, str]]] = {}
    for c in cells:
        groups.setdefault(c[column], []).append(c)
    bare = [f for f in fields if f != column and f not in consts]
    name = key_text(column)
    out = [format_header("generic", [] if tool is None else [("tool", tool)])]
    out.append(f"## [{len(rows)}]{head} group={name}")
    for value, members in groups.items():
        out.append(f"{name}={value} [{len(members)}]")
        out.extend("|".join([c.get(f, "~") for f in bare]) for c in members)
    out.append("")
    return "\n".join(out)
