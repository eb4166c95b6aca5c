"""The generic decoder's state (spec §4, §7.4, §12): open containers, parsed declarations,
and what a decode returns (:class:`Document`, :class:`TableInfo`).

A *frame* is one open container on the decoder's stack: an object (:class:`ObjectFrame`),
a tabular array or keyed map (:class:`TableFrame`) or an expanded array
(:class:`ItemsFrame`). A :class:`Schema` is a parsed field declaration, shared by every
table that repeats it; its plan says how a row's cells rebuild the row (:func:`build_row`).
The general decoder (:mod:`gcfkit.generic.decoder`) and its fast paths
(:mod:`gcfkit.generic.fast`) both work on these.
"""

from __future__ import annotations

from typing import Any, Final

from ..errors import GCFDecodeError
from ..scalar import MISSING, Attach

__all__ = [
    "ABSENT",
    "MAX_DEPTH",
    "MAX_LINE",
    "PENDING",
    "Document",
    "Frame",
    "GroupFrame",
    "ItemsFrame",
    "Marker",
    "ObjectFrame",
    "OpenFrame",
    "Schema",
    "Slot",
    "TableFrame",
    "TableInfo",
    "build_row",
    "check_deferred",
    "full_row",
    "group",
    "path_plan",
]

#: Open containers (objects, arrays, keyed maps, attachments) at any one time.
MAX_DEPTH: Final = 256
#: Characters in one line (the spec's minimum is 65,536 bytes).
MAX_LINE: Final = 8 * 1024 * 1024


class _Pending:
    """Placeholder for a ^ cell whose attachment body has not been read yet."""

    __slots__ = ()


#: The value of a ``^`` cell until its attachment fills it.
PENDING: Final = _Pending()
#: A flattened object whose every leaf is ``~``: the field is absent (§7.4.6.2 rule 4).
ABSENT: Final = object()


class Frame:
    """An open container: its indentation, header line and (for arrays) its counts."""

    __slots__ = ("count", "deferred", "indent", "line", "n")

    count: int | None  # declared items, None for [?]
    n: int  # items so far
    deferred: int  # index into the parser's [?] sections, -1 when counted

    def __init__(self, indent: int, line: int, count: int | None) -> None:
        self.indent = indent
        self.line = line
        self.count = count
        self.n = 0
        self.deferred = -1


class ObjectFrame(Frame):
    """An object's members at ``indent`` (count, n and deferred stay unset: only arrays
    are counted)."""

    __slots__ = ("obj",)

    def __init__(self, indent: int, line: int, obj: dict[str, Any]) -> None:
        self.indent = indent
        self.line = line
        self.obj = obj


class ItemsFrame(Frame):
    """An expanded array's ``@N`` items (§7.6)."""

    __slots__ = ("items",)

    def __init__(self, indent: int, line: int, count: int | None, items: list[Any]) -> None:
        super().__init__(indent, line, count)
        self.items = items


class GroupFrame(Frame):
    """A value-grouped table (the reference's v3.6.0 §7.4.8, :mod:`gcfkit.generic.v360`):
    ``col=value [k]`` group lines, each followed by its ``k`` rows.

    ``fields`` in declaration order; ``key`` the ``@`` key column's index, ``column`` the
    grouping column's; ``constants`` each constant column's value by index; ``cells`` the
    indexes a row's cells fill, in order. ``value`` is the open group's value, ``left`` its
    rows still to come, ``group_line`` its line.
    """

    __slots__ = (
        "cells",
        "column",
        "constants",
        "fields",
        "group_line",
        "groups",
        "key",
        "keys",
        "left",
        "member_ctx",
        "out",
        "value",
    )

    def __init__(
        self,
        indent: int,
        line: int,
        count: int | None,
        fields: list[str],
        key: int,
        column: int,
        constants: dict[int, Any],
        member_ctx: bool,
    ) -> None:
        super().__init__(indent, line, count)
        self.fields = fields
        self.key = key
        self.column = column
        self.constants = constants
        self.cells = [i for i in range(len(fields)) if i != column and i not in constants]
        self.member_ctx = member_ctx
        self.out: list[Any] = []
        self.groups: set[tuple[type, Any]] = set()
        self.keys: set[tuple[type, Any]] = set()
        self.value: Any = None
        self.left = 0
        self.group_line = line


class Marker:
    """One ^ / ^{...} cell of the current row, waiting for its attachment body."""

    __slots__ = ("explicit", "filled", "name", "schema")

    def __init__(self, name: str, schema: tuple[str, ...] | None, explicit: bool) -> None:
        self.name = name
        self.schema = schema
        self.explicit = explicit
        self.filled = False


class Schema:
    """A parsed tabular/keyed field declaration, shared by every table that repeats it.

    ``constants`` are the dense profile's constant columns (D6): (field index, value
    token) in declaration order, None for a v3.5.3 declaration; ``row_width`` is the number
    of cells a full row holds (the fields that are not constant).
    """

    __slots__ = (
        "constants",
        "fields",
        "id_index",
        "keyed",
        "plan",
        "row_width",
        "simple",
        "value_fields",
    )

    def __init__(
        self,
        fields: list[str],
        id_index: int,
        keyed: bool,
        line: int,
        constants: list[tuple[int, str]] | None = None,
    ) -> None:
        self.constants = constants or None
        self.row_width = len(fields) - len(constants or ())
        if constants:
            if keyed and constants[0][0] == 0:
                raise GCFDecodeError(
                    "invalid_constant", "a keyed map's key column cannot be constant", line
                )
            if self.row_width <= (1 if keyed else 0):
                raise GCFDecodeError(
                    "invalid_constant",
                    "every value field is constant; a row must keep a value cell",
                    line,
                )
        self.keyed = keyed
        self.id_index = id_index
        self.fields = fields
        value_fields = fields[1:] if keyed else fields
        self.value_fields = value_fields
        self.plan = path_plan(value_fields, 1 if keyed else 0, line)
        self.simple = all(slot[0] == 0 for slot in self.plan)


class TableFrame(Frame):
    """A tabular array (``out`` a list) or keyed map (``out`` a dict) and its current row.

    In a dense payload (``dense``), rows hold ``row_width`` cells, fewer when short (D7),
    and the schema's ``constants`` are put back before a row is read (:func:`full_row`).
    """

    __slots__ = (
        "array_schemas",
        "constants",
        "cur_line",
        "cur_row",
        "dense",
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
        "row_width",
        "simple",
        "value_fields",
        "width",
    )

    def __init__(
        self,
        indent: int,
        line: int,
        count: int | None,
        schema: Schema,
        out: list[Any] | dict[str, Any],
        member_ctx: bool,
        dense: bool = False,
    ) -> None:
        # Written out rather than through super().__init__: nested payloads open one of
        # these per attachment.
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
        self.dense = dense
        self.row_width = schema.row_width
        self.constants = schema.constants
        # Created by the first row with ^ cells that needs them.
        self.inline_schemas: dict[str, tuple[str, ...]] | None = None
        self.array_schemas: dict[str, Schema] | None = None
        self.cur_row: dict[str, Any] | None = None
        self.cur_line = 0
        self.markers: dict[str, Marker] | None = None
        self.had_inline = False


def full_row(f: TableFrame, toks: list[str], line: int) -> list[str]:
    """A row's tokens at the declaration's full width: in a dense row (D7) missing trailing
    cells become ``~``; then each constant's token goes back to its column (dense D6, the
    reference's v3.6.0 §7.4.7).

    A dense row keeps at least ``min(2, row width)`` cells, any row at most the row width;
    another row holds exactly the row width.
    """
    k = len(toks)
    width = f.row_width
    if k != width:
        if not f.dense or k > width or k < (2 if width > 1 else width):
            raise GCFDecodeError(
                "row_width_mismatch",
                f"row has {k} cell(s); the header declares {width}"
                + (" (a short row keeps at least 2)" if k < width and f.dense else ""),
                line,
            )
        toks = toks + ["~"] * (width - k)
    if f.constants is not None:
        toks = list(toks)
        for i, tok in f.constants:
            toks.insert(i, tok)
    return toks


def check_deferred(summary: list[int], line: int, deferred: list[list[int]]) -> None:
    """The ``##! summary`` trailer's counts (at ``line``) against what each ``[?]`` section
    held (``deferred``: [header line, items], in order), §8.4."""
    if not deferred:
        return
    if len(summary) != len(deferred):
        raise GCFDecodeError(
            "count_mismatch",
            f"summary has {len(summary)} counts for {len(deferred)} [?] sections",
            line,
        )
    for want, (header, got) in zip(summary, deferred, strict=True):
        if want != got:
            raise GCFDecodeError(
                "count_mismatch",
                f"[?] section at line {header} has {got} item(s); the summary says {want}",
                line,
            )


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


#: Any frame on the stack.
OpenFrame = ObjectFrame | TableFrame | ItemsFrame | GroupFrame


# A plan slot: (0, name, cell index) for a plain column, (1, name, subtree) for the root of
# a flattened path group (§7.4.6.2). A subtree is a list of such slots.
Slot = tuple[int, str, Any]


def path_plan(fields: list[str], offset: int, line: int) -> list[Slot]:
    """The slots of a declaration's value fields (cell indexes from ``offset``), ``>`` path
    columns grouped into the objects they rebuild (§7.4.6.2); collisions are rejected."""
    plan: list[Slot] = []
    groups: dict[tuple[str, ...], list[Slot]] = {}
    top: set[str] = set()
    leaves: set[tuple[str, ...]] = set()
    for i, name in enumerate(fields, offset):
        segs = name.split(">") if ">" in name else None
        if segs is None or not all(segs):
            if name in top:
                raise GCFDecodeError(
                    "duplicate_key", f"column {name!r} collides with a > path column", line
                )
            top.add(name)
            plan.append((0, name, i))
            continue
        if len(segs) > MAX_DEPTH:
            raise GCFDecodeError(
                "limit_exceeded", f"path column nests deeper than {MAX_DEPTH} levels", line
            )
        level = plan
        for d in range(len(segs) - 1):
            path = tuple(segs[: d + 1])
            if path in leaves:
                raise GCFDecodeError(
                    "duplicate_key", f"path column {name!r} collides with a leaf column", line
                )
            sub = groups.get(path)
            if sub is None:
                if d == 0:
                    if segs[0] in top:
                        raise GCFDecodeError(
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
            raise GCFDecodeError("duplicate_key", f"path column {name!r} is ambiguous", line)
        leaves.add(path)
        level.append((0, segs[-1], i))
    return plan


def build_row(plan: list[Slot], vals: list[Any], line: int) -> dict[str, Any]:
    """A row without ^ cells: plain columns, ~ dropped, path groups rebuilt."""
    row: dict[str, Any] = {}
    for kind, name, ref in plan:
        if kind == 0:
            v = vals[ref]
            if v is not MISSING:
                row[name] = v
        else:
            v = group(ref, vals, line)
            if v is not ABSENT:
                row[name] = v
    return row


def group(slots: list[Slot], vals: list[Any], line: int) -> Any:
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
                raise GCFDecodeError(
                    "invalid_attachment_marker",
                    f"path column {name!r} holds a scalar; ^ is not allowed there",
                    line,
                )
            all_missing = False
            if v is not None:
                all_null = False
            out[name] = v
        else:
            v = group(ref, vals, line)
            if v is ABSENT:
                all_null = False
                continue
            all_missing = False
            if v is not None:
                all_null = False
            out[name] = v
    if all_missing:
        return ABSENT
    if all_null:
        return None
    return out
