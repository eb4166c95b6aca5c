"""The buffered generic-profile encoder (spec §7): any JSON-model value to canonical GCF.

Form selection follows §7.3 and §7.2a; where the spec leaves a choice, the defaults are the
forms the official conformance fixtures expect:

* a uniform nested object inside a tabular array is flattened into ``>`` path columns
  (§7.4.6) whenever that is lossless;
* a uniform flat object of three or more fields that cannot be flattened losslessly takes
  a positional inline schema (§7.4.5.1) when the first row declares it -- the smallest
  valid form (§7.11), and what the reference implementation writes;
* array attachments of one field reuse the first row's field declaration (shared array
  schemas, §7.4.5.3) when every row holding the field has a table of simple cells with
  that same declaration.

Where the reference implementation (gcf-python) writes something the spec rules out --
flattening objects whose keys come in different orders or whose leaves are all null,
an inline schema over a present null, a header-less array attachment that a decoder
would read with the wrong schema -- this encoder keeps to the spec instead.

Output is built as a list of lines and joined once. Nesting is bounded by
:data:`MAX_DEPTH` levels of containers (far beyond the 32 of §12), beyond which the
encoder raises ``GCFError("limit_exceeded")`` instead of exhausting the interpreter stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import Any, Final

from .. import speedups
from ..errors import GCFEncodeError, GCFError, as_encode_error, at_path
from ..grammar import ATTACHMENT_INDENT, DENSE_SAFE_BARE, INDENT, REFERENCE_SIGIL
from ..header import Spec, check_spec, dense_header_line, format_header
from . import dense_rows, v360
from .cells import (
    ABSENT,
    MAX_DEPTH,
    Nested,
    bad_key_error,
    failing_index,
    failing_key,
    format_cell,
    key_text,
    too_deep_error,
    with_default,
)
from .definitions import spelling

__all__ = ["MAX_DEPTH", "Dense", "dumps", "encode_dense", "render_tabular"]


_DENSE_SAFE_BARE: Final = DENSE_SAFE_BARE.match


class _Conflict(Exception):
    """A field of a table holds a tabular array and, in a later row, an expanded one.

    The first ``.f [N]{fields}`` attachment establishes a schema for ``f`` (§7.4.5.3) and
    a later ``.f [N]`` is then read as tabular, so that expanded array has no spelling
    here: the records are not losslessly tabular (§7.3) and the table is withdrawn.
    """


# ---------------------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------------------


def _dense_writer(dense: Dense, used: set[str]) -> Callable[[Any], str]:
    """The cell and scalar writer of a dense encode (docs/extensions/dense.md D9): a
    defined string is its reference (D4.2), a literal beginning with ``$`` is quoted
    (D4.3), and with ``lists`` an array of primitives is a list cell (D5.2). Records in
    ``used`` that a list cell was written. Containers raise :class:`Nested`, as in
    :func:`format_cell`."""
    refs = {s: REFERENCE_SIGIL + name for s, name in dense.defs.items()}
    get = refs.get
    bare = _DENSE_SAFE_BARE
    lists = dense.lists

    def cell(v: Any) -> str:
        if type(v) is str:
            if refs:
                ref = get(v)
                if ref is not None:
                    return ref
            if bare(v):
                return v
            return spelling(v)
        if isinstance(v, str):
            return cell(str.__str__(v))
        if lists and isinstance(v, (list, tuple)) and _array_form(v) in ("empty", "inline"):
            used.add("lists")
            if not v:
                return "[0]:"
            try:
                return f"[{len(v)}]: " + ",".join(map(cell, v))
            except GCFEncodeError:
                for i, x in enumerate(v):  # only on failure: which element it was
                    try:
                        cell(x)
                    except GCFEncodeError as e:
                        raise at_path(e, i) from None
                raise
        return format_cell(v)

    return cell


def _dense_key(k: str) -> str:
    """Cell 0 of a dense keyed map: a key, so never a reference, but quoted like one."""
    k = str.__str__(k)
    return k if _DENSE_SAFE_BARE(k) else spelling(k)


# ---------------------------------------------------------------------------------------
# Tabular planning (§7.4.3, §7.4.6)
# ---------------------------------------------------------------------------------------


def _union(objs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Ordered field union (§7.4.3): first object's keys, then new keys as first seen."""
    seen: dict[str, None] = {}
    prev: Any = None
    for o in objs:
        keys = o.keys()
        if prev is not None and keys == prev:
            continue
        prev = keys
        for k in keys:
            if k not in seen:
                seen[k] = None
    return list(seen)


# A flattening tree: for each key of the nested object, None for a scalar leaf or the
# subtree of a nested object that is itself flattened.
_Tree = list[tuple[str, "_Tree | None"]]


def _flat_tree(values: list[Any], allow_null: bool, depth: int) -> _Tree | None:
    """The flattening of one field's present values, or None when it is not lossless."""
    if depth > MAX_DEPTH:
        return None
    keys: tuple[str, ...] | None = None
    objs: list[dict[str, Any]] = []
    for v in values:
        if v is None and allow_null:
            continue
        if not isinstance(v, dict):
            return None
        if keys is None:
            keys = tuple(v)
            if not keys:
                return None
            for k in keys:
                if not isinstance(k, str) or not k or ">" in k:
                    return None
        elif len(v) != len(keys) or tuple(v) != keys:
            return None
        objs.append(v)
    if keys is None:
        return None
    tree: _Tree = []
    for k in keys:
        sub = [o[k] for o in objs]
        if any(isinstance(x, (dict, list, tuple)) for x in sub):
            # An intermediate object must be an object in every row: a null (or a scalar)
            # there has no path-column spelling (fixtures flatten/017-019).
            if not all(isinstance(x, dict) for x in sub):
                return None
            child = _flat_tree(sub, False, depth + 1)
            if child is None:
                return None
            tree.append((k, child))
        else:
            tree.append((k, None))
    return tree


def _all_null(obj: Mapping[str, Any], tree: _Tree) -> bool:
    """True when some object of this flattened value has only null leaves.

    Such an object would come back as null (§7.4.6.2 rule 5), so it blocks flattening.
    """
    every = True
    for k, sub in tree:
        v = obj[k]
        if sub is None:
            if v is not None:
                every = False
        else:
            if _all_null(v, sub):
                return True
            every = False
    return every


def _tree_paths(prefix: str, tree: _Tree, out: list[str]) -> None:
    for k, sub in tree:
        path = f"{prefix}>{k}"
        if sub is None:
            out.append(path)
        else:
            _tree_paths(path, sub, out)


def _tree_width(tree: _Tree) -> int:
    return sum(1 if sub is None else _tree_width(sub) for _, sub in tree)


def _tree_cells(
    obj: Mapping[str, Any], tree: _Tree, cells: list[str], cell: Callable[[Any], str]
) -> None:
    k = ""
    try:
        for k, sub in tree:
            if sub is None:
                cells.append(cell(obj[k]))
            else:
                _tree_cells(obj[k], sub, cells, cell)
    except GCFEncodeError as e:
        raise at_path(e, k) from None


def _inline_schema(values: list[Any]) -> tuple[str, ...] | None:
    """The §7.4.5.1 inline schema for one field's present values, if eligible."""
    keys: tuple[str, ...] | None = None
    for v in values:
        if not isinstance(v, dict):
            return None
        if keys is None:
            keys = tuple(v)
            # A `|` in a name inside a ^{...} cell is left to the row splitter's reading
            # of quotes within the cell; keep such schemas traditional to be safe.
            if len(keys) < 3 or any(not isinstance(k, str) or "|" in k for k in keys):
                return None
        elif len(v) != len(keys) or tuple(v) != keys:
            return None
        for x in v.values():
            if isinstance(x, (dict, list, tuple)):
                return None
    return keys


# Slot kinds of a tabular plan, in field-union order.
_SCALAR: Final = 0  # one cell; a container value becomes ^ plus an attachment
_FLAT: Final = 1  # flattened path columns
_GT: Final = 2  # a `>`-named field: no cell, always an attachment (§7.4.6.1 rule 4)
_INLINE: Final = 3  # one cell with an inline object schema (§7.4.5.1)


class _Plan:
    """Columns of one tabular block: header declaration plus how to render each field."""

    __slots__ = ("columns", "decl", "slots")

    def __init__(self, slots: list[tuple[int, str, Any]], columns: list[str]) -> None:
        self.slots = slots
        self.columns = columns
        self.decl = "{" + ",".join(map(key_text, columns)) + "}"


def _plan(objs: Sequence[Mapping[str, Any]], opts: Options, depth: int) -> _Plan | None:
    """Plan the tabular form of ``objs`` (all dicts), or None when it is not tabular."""
    fields = _union(objs)
    slots: list[tuple[int, str, Any]] = []
    columns: list[str] = []
    for f in fields:
        if not isinstance(f, str):
            raise bad_key_error(f)
        if ">" in f:
            slots.append((_GT, f, None))
            continue
        present: list[Any] | None = None
        if opts.flatten or opts.inline:
            present = [o[f] for o in objs if f in o]
        if opts.flatten and f and present is not None:
            tree = _flat_tree(present, True, depth + 1)
            if tree is not None and not any(v is not None and _all_null(v, tree) for v in present):
                slots.append((_FLAT, f, (tree, _tree_width(tree))))
                _tree_paths(f, tree, columns)
                continue
        # Second choice after flattening. Like the reference implementation, only when
        # the first row declares the schema (fixture inline-schema/008 names this rule).
        if opts.inline and present is not None and isinstance(objs[0].get(f), dict):
            schema = _inline_schema(present)
            if schema is not None:
                slots.append((_INLINE, f, schema))
                columns.append(f)
                continue
        slots.append((_SCALAR, f, None))
        columns.append(f)
    if not columns:
        return None
    return _Plan(slots, columns)


# ---------------------------------------------------------------------------------------
# The encoder
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Dense:
    """A dense-profile encode (docs/extensions/dense.md D9): ``defs`` maps each string to
    define to its name (without ``$``, D9.2); the flags switch the constructs on (D9.4)."""

    defs: Mapping[str, str] = dataclass_field(default_factory=dict)
    lists: bool = True
    constants: bool = True
    short_rows: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    """The encoder's optional forms (``dumps``' keyword arguments of the same names);
    ``dense`` makes it a dense-profile encoder, ``v360`` factors a section's constant
    columns as the reference's v3.6.0 does (:mod:`gcfkit.generic.v360`)."""

    flatten: bool = True
    shared: bool = True
    inline: bool = True
    dense: Dense | None = None
    v360: bool = False


def _array_form(arr: Sequence[Any]) -> str:
    """``empty``, ``inline``, ``objects`` (maybe tabular) or ``expanded`` (§7.3)."""
    if not arr:
        return "empty"
    prim = True
    objs = True
    for x in arr:
        if isinstance(x, dict):
            prim = False
        elif isinstance(x, (list, tuple)):
            return "expanded"
        else:
            objs = False
        if not prim and not objs:
            return "expanded"
    return "inline" if prim else "objects"


def _has_column(objs: Iterable[Mapping[str, Any]]) -> bool:
    """True when some field of ``objs`` can be a tabular column (has no ``>``)."""
    return any(not isinstance(k, str) or ">" not in k for k in _union(objs))


def _keyed_ok(obj: Mapping[str, Any]) -> bool:
    """§7.2a.1: two or more members, all objects, some value field without ``>``."""
    if len(obj) < 2:
        return False
    for v in obj.values():
        if not isinstance(v, dict):
            return False
    return _has_column(obj.values())


def key_label(columns: Sequence[str]) -> str:
    """The key column's label in a keyed map header (§7.2a.2): ``key``, or ``_key``,
    ``__key``... when a value field already has that name."""
    label = "key"
    names = set(columns)
    while label in names:
        label = "_" + label
    return label


class Encoder:
    __slots__ = ("cell", "key_cell", "opts", "out", "used")

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.out: list[str] = []
        # The dense constructs this encode used (for gcfkit.dense.encode's report).
        self.used: set[str] = set()
        # Every scalar, in cells and elsewhere, is written by self.cell.
        self.cell: Callable[[Any], str] = format_cell
        self.key_cell: Callable[[str], str] = format_cell
        if opts.dense is not None:
            self.cell = _dense_writer(opts.dense, self.used)
            self.key_cell = _dense_key

    # -- roots and objects ---------------------------------------------------------------

    def root(self, value: Any) -> None:
        if isinstance(value, dict):
            if not self.keyed(value, "## ", "", 1):
                self.members(value, "", 1)
        elif isinstance(value, (list, tuple)):
            self.array(value, "## ", "## ", "", 1)
        else:
            self.out.append("=" + self.cell(value))

    def members(self, obj: Mapping[str, Any], ind: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise too_deep_error()
        out = self.out
        for k, v in obj.items():
            key = key_text(k)  # a bad key is the error of the object, not of its value
            try:
                if isinstance(v, dict):
                    if not self.keyed(v, f"{ind}## {key} ", ind, depth + 1):
                        out.append(f"{ind}## {key}")
                        if v:
                            self.members(v, ind + INDENT, depth + 1)
                elif isinstance(v, (list, tuple)):
                    self.array(v, f"{ind}## {key} ", ind + key, ind, depth + 1)
                else:
                    out.append(f"{ind}{key}={self.cell(v)}")
            except GCFEncodeError as e:
                raise at_path(e, k) from None

    # -- arrays ---------------------------------------------------------------------------

    def array(self, arr: Sequence[Any], bpre: str, ipre: str, ind: str, depth: int) -> None:
        """Emit ``arr`` whose block header starts ``bpre``, inline header ``ipre``."""
        if depth > MAX_DEPTH:
            raise too_deep_error()
        form = _array_form(arr)
        n = len(arr)
        if form == "empty":
            self.out.append(f"{bpre}[0]")
        elif form == "inline":
            try:
                self.out.append(f"{ipre}[{n}]: " + ",".join([self.cell(x) for x in arr]))
            except GCFEncodeError as e:
                raise at_path(e, failing_index(arr, self.cell)) from None
        else:
            if form == "objects" and self.tabular(arr, f"{bpre}[{n}]", ind, depth):
                return
            self.out.append(f"{bpre}[{n}]")
            self.expanded(arr, ind, depth)

    def expanded(self, arr: Sequence[Any], ind: str, depth: int) -> None:
        """The ``@N`` items of ``arr`` (at ``depth``), at indentation ``ind`` (§7.6)."""
        i = 0
        try:
            for i, x in enumerate(arr):
                self.item(i, x, ind, depth + 1)
        except GCFEncodeError as e:
            raise at_path(e, i) from None

    def item(self, i: int, x: Any, ind: str, depth: int) -> None:
        """Expanded item ``@i`` holding ``x`` (at ``depth``), at indentation ``ind``."""
        p = f"{ind}@{i} "
        inner = ind + INDENT
        if isinstance(x, dict):
            if not self.keyed(x, p, inner, depth):
                self.out.append(p + "{}")
                if x:
                    self.members(x, inner, depth)
        elif isinstance(x, (list, tuple)):
            self.array(x, p, p, inner, depth)
        else:
            self.out.append(f"{p}={self.cell(x)}")

    # -- tabular --------------------------------------------------------------------------

    def tabular(
        self,
        objs: Sequence[Any],
        head: str,
        ind: str,
        depth: int,
        share: tuple[_Share, str] | None = None,
    ) -> bool:
        """Emit ``objs`` (all dicts) as a tabular block; False if it is not tabular.

        ``head`` is the header up to the count bracket. ``share`` is the containing
        table's schema state and this attachment's field name (§7.4.5.3).
        """
        if depth >= MAX_DEPTH:
            raise too_deep_error()  # the rows nest one level deeper
        out = self.out
        fields = _union(objs)
        # The reference factors constant columns out of a section's table only (v3.6.0).
        factor = self.opts.v360 and share is None and head.lstrip(" ")[:3] == "## "
        if fields and not any(">" in f for f in fields if isinstance(f, str)):
            if self.opts.dense is not None:
                if self.dense_flat(objs, fields, head, ind, share):
                    return True
            elif factor and (cells := _cell_rows(objs, fields, self.cell)) is not None:
                fixed = v360.constant_cells(cells, range(len(fields)))
                out.append(head + dense_rows.declaration(list(map(key_text, fields)), fixed))
                out.extend(ind + dense_rows.join(c, fixed, False)[0] for c in cells)
                return True
            else:
                lines = _flat_rows(objs, fields, ind)
                if lines is not None:
                    decl = "{" + ",".join(map(key_text, fields)) + "}"
                    if share is not None:
                        share[0].flat_table(share[1], decl, len(out))
                    out.append(head + decl)
                    out.extend(lines)
                    return True
        plan = _plan(objs, self.opts, depth + 1)
        if plan is None:
            return False
        mark = len(out)
        out.append(head + plan.decl)
        try:
            consts = self.rows(plan, objs, None, ind, depth + 1, factor=factor)
        except _Conflict:
            del out[mark:]
            return False
        if consts is not None:
            out[mark] = head + dense_rows.declaration(list(map(key_text, plan.columns)), consts)
        if share is not None:
            share[0].table(share[1], plan.decl)
        return True

    def dense_flat(
        self,
        objs: Sequence[Any],
        fields: list[str],
        head: str,
        ind: str,
        share: tuple[_Share, str] | None,
    ) -> bool:
        """A dense table whose cells are all scalars or list cells: its rows first, then
        its constant columns (D6.2; in an attachment, decided once the containing table
        knows which fields share a schema) and short rows (D7). False when a cell holds
        another container (nothing is written: the planned path takes the table)."""
        rows = _cell_rows(objs, fields, self.cell)
        if rows is None:
            return False
        names = list(map(key_text, fields))
        out = self.out
        consts = None if share is not None else self.constants(rows, 0)
        decl = dense_rows.declaration(names, consts)
        if share is not None:
            share[0].flat_table(share[1], decl, len(out))
            if self.opts.dense is not None and self.opts.dense.constants:
                share[0].pending.append((share[1], len(out), head, names, rows, ind))
        out.append(head + decl)
        out.extend(self.joined(rows, consts, ind))
        return True

    def constants(self, rows: list[list[str]], start: int) -> dict[int, str] | None:
        """The constant columns of a dense table's rows when the encode uses them (D6.2)."""
        dense = self.opts.dense
        if dense is None or not dense.constants:
            return None
        consts = dense_rows.constant_columns(rows, start)
        if consts:
            self.used.add("constants")
        return consts

    def joined(self, rows: list[list[str]], consts: dict[int, str] | None, ind: str) -> list[str]:
        """Dense rows' lines at ``ind``: constant cells left out, short rows (D7)."""
        dense = self.opts.dense
        short = dense is not None and dense.short_rows
        lines = []
        for cells in rows:
            text, trimmed = dense_rows.join(cells, consts, short)
            if trimmed:
                self.used.add("short_rows")
            lines.append(ind + text)
        return lines

    def keyed(self, obj: Mapping[str, Any], bpre: str, ind: str, depth: int) -> bool:
        """Emit ``obj`` as a keyed map (§7.2a) whose header starts with ``bpre``.

        Rows go at ``ind``. False (nothing written) when ``obj`` is not eligible.
        """
        if not _keyed_ok(obj):
            return False
        if depth > MAX_DEPTH:
            raise too_deep_error()
        values: list[Mapping[str, Any]] = list(obj.values())
        plan = _plan(values, self.opts, depth + 1)
        if plan is None:
            return False
        # The label steps aside for any value field, flattened ones included (§7.2a.2
        # "present in the value field union"; the reference implementation agrees).
        label = key_label([f for _, f, _ in plan.slots])
        keys = []
        for k in obj:
            if not isinstance(k, str):
                raise bad_key_error(k)
            keys.append(self.key_cell(k))
        mark = len(self.out)
        head = f"{bpre}[{len(obj)}:]"
        self.out.append(f"{head}{{{key_text(label)},{plan.decl[1:]}")
        try:
            consts = self.rows(plan, values, keys, ind, depth + 1, list(obj))
        except _Conflict:
            del self.out[mark:]
            return False
        if consts is not None:
            names = [key_text(label), *map(key_text, plan.columns)]
            self.out[mark] = head + dense_rows.declaration(names, consts)
        return True

    def rows(
        self,
        plan: _Plan,
        objs: Sequence[Mapping[str, Any]],
        keys: list[str] | None,
        ind: str,
        depth: int,
        names: list[str] | None = None,
        factor: bool = False,
    ) -> dict[int, str] | None:
        """Emit the rows of a planned table at ``ind``, each followed by its attachments.

        ``keys`` are the already formatted cell-0 keys of a keyed map, ``names`` its member
        keys (an error's path names the member rather than the row's index). A dense table's rows
        are rewritten once all are known (constant columns, short rows), and its constant
        columns returned for the caller's header; so are a ``factor``ed table's (v3.6.0).
        """
        if depth > MAX_DEPTH:
            raise too_deep_error()
        out = self.out
        cell = self.cell
        dense = self.opts.dense is not None
        written: list[tuple[int, str, list[str]]] = []  # a dense table's rows, to rewrite
        absent = ABSENT
        share = _Share(self.opts.shared)
        inline_seen: set[str] = set()
        body = ind + ATTACHMENT_INDENT
        i, f = 0, ""
        try:
            for i, obj in enumerate(objs):
                cells: list[str] = [] if keys is None else [keys[i]]
                atts: list[tuple[str, Any, bool]] = []  # (field, value, is-inline-body)
                late: list[tuple[str, Any, bool]] | None = None
                get = obj.get
                for kind, f, extra in plan.slots:
                    v = get(f, absent)
                    if kind == _SCALAR:
                        if v is absent:
                            cells.append("~")
                        else:
                            try:
                                cells.append(cell(v))
                            except Nested:
                                cells.append("^")
                                atts.append((f, v, False))
                    elif kind == _FLAT:
                        if v is absent:
                            cells.extend(["~"] * extra[1])
                        elif v is None:
                            cells.extend(["-"] * extra[1])
                        else:
                            _tree_cells(v, extra[0], cells, cell)
                    elif kind == _GT:
                        # After the column attachments: that is where a decoder puts these
                        # fields back, so re-encoding the decoded value gives the same wire.
                        if v is not absent:
                            if late is None:
                                late = []
                            late.append((f, v, False))
                    elif v is absent:  # _INLINE
                        cells.append("~")
                    else:
                        if f in inline_seen:
                            cells.append("^")
                        else:
                            inline_seen.add(f)
                            cells.append("^{" + ",".join(map(key_text, extra)) + "}")
                        atts.append((f, v, True))
                if late is not None:
                    atts.extend(late)
                # A dense row carries @N only before a positional body (D8).
                pre = f"{ind}@{i} " if atts and not (dense and not any(a[2] for a in atts)) else ind
                if dense or factor:
                    written.append((len(out), pre, cells))
                out.append(pre + "|".join(cells))
                if not atts:
                    continue
                for f, v, inline in atts:
                    if inline:
                        try:
                            out.append(ind + "|".join([cell(x) for x in v.values()]))
                        except GCFEncodeError as e:
                            raise at_path(e, failing_key(v, v, cell)) from None
                    else:
                        self.attachment(f, v, ind, body, share, depth + 1)
        except GCFEncodeError as e:
            # The loop variables say which row and field the error arose in.
            raise at_path(at_path(e, f), i if names is None else names[i]) from None
        shared: set[str] = set()
        if share.enabled and share.flat:
            shared = share.omit_repeats(out, objs)
        if factor:
            return v360.factor_rows(out, written, _scalar_cells(plan))
        if not dense:
            return None
        for f, index, head, names, table_rows, table_ind in share.pending:
            # An attachment table's constants, unless the field shares its schema (D6.2).
            consts = None if f in shared else self.constants(table_rows, 0)
            if consts is not None:
                out[index] = head + dense_rows.declaration(names, consts)
                out[index + 1 : index + 1 + len(table_rows)] = self.joined(
                    table_rows, consts, table_ind
                )
        rows = [cells for _, _, cells in written]
        consts = self.constants(rows, 0 if keys is None else 1)
        for (index, pre, _), line in zip(written, self.joined(rows, consts, ""), strict=True):
            out[index] = pre + line
        return consts

    def attachment(self, f: str, v: Any, ind: str, body: str, share: _Share, depth: int) -> None:
        """The traditional attachment ``.f ...`` of value ``v`` (§7.4.4)."""
        out = self.out
        pre = f"{ind}.{key_text(f)} "
        if isinstance(v, dict):
            share.spoiled.add(f)
            if not self.keyed(v, pre, body, depth):
                out.append(pre + "{}")
                if v:
                    self.members(v, body, depth)
        elif not isinstance(v, (list, tuple)):
            share.spoiled.add(f)
            out.append(f"{pre}={self.cell(v)}")
        elif depth > MAX_DEPTH:
            raise too_deep_error()
        else:
            form = _array_form(v)
            if form == "objects" and self.tabular(v, f"{pre}[{len(v)}]", body, depth, (share, f)):
                return
            share.spoiled.add(f)
            if form != "empty" and form != "inline" and f in share.schemas:
                raise _Conflict
            self.array(v, pre, pre, body, depth)


class _Share:
    """Array attachment schemas of one containing table, per field name (§7.4.5.3).

    Like the reference implementation, a field shares its schema only when the first row
    declares it (as §7.4.5.3 puts it) and every row that has the field holds a non-empty,
    all-scalar table with one same declaration; the repeats then lose their
    ``{fields}`` once the table is complete.
    """

    __slots__ = ("decls", "enabled", "flat", "pending", "schemas", "spoiled")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        # A dense encode's all-scalar attachment tables, whose constant columns wait for
        # the sharing decision: (field, header index, head, names, row cells, indent).
        self.pending: list[tuple[str, int, str, list[str], list[list[str]], str]] = []
        # The first tabular attachment of a field establishes its schema in a decoder,
        # whether or not it is then shared (see _Conflict).
        self.schemas: dict[str, str] = {}
        self.decls: dict[str, str] = {}
        self.flat: dict[str, list[int]] = {}  # output index of each all-scalar table header
        self.spoiled: set[str] = set()  # fields with any other kind of attachment

    def table(self, field: str, decl: str) -> None:
        """Record a tabular attachment of ``field`` that has nested cells."""
        self.schemas.setdefault(field, decl)
        self.spoiled.add(field)

    def flat_table(self, field: str, decl: str, index: int) -> None:
        """Record an all-scalar tabular attachment of ``field`` whose header is ``index``."""
        self.schemas.setdefault(field, decl)
        if self.decls.setdefault(field, decl) != decl:
            self.spoiled.add(field)
        self.flat.setdefault(field, []).append(index)

    def omit_repeats(self, out: list[str], objs: Sequence[Mapping[str, Any]]) -> set[str]:
        """Drop the declaration from every header after the first of a shared field;
        return the shared fields."""
        shared: set[str] = set()
        for field, indexes in self.flat.items():
            if len(indexes) < 2 or field in self.spoiled or field not in objs[0]:
                continue
            if sum(1 for o in objs if field in o) != len(indexes):
                continue  # a row holds a scalar there
            cut = len(self.decls[field])
            shared.add(field)
            for i in indexes[1:]:
                out[i] = out[i][:-cut]
        return shared


def _scalar_cells(plan: _Plan) -> list[int]:
    """The cells of a planned row that hold plain (unflattened, not inline) columns."""
    found, j = [], 0
    for kind, _, extra in plan.slots:
        if kind == _SCALAR:
            found.append(j)
        j += extra[1] if kind == _FLAT else 0 if kind == _GT else 1
    return found


def _flat_rows(objs: Sequence[Any], fields: list[str], ind: str) -> list[str] | None:
    """Rows of an all-scalar table, or None as soon as a cell holds a container."""
    cell = format_cell
    absent = ABSENT
    lines: list[str] = []
    append = lines.append
    join = "|".join
    order = tuple(fields)
    width = len(order)
    try:
        for o in objs:
            if len(o) == width and tuple(o) == order:
                # The common uniform row: its values are already in column order.
                row = join(map(cell, o.values()))
            else:
                get = o.get
                row = join(["~" if (v := get(f, absent)) is absent else cell(v) for f in fields])
            append(ind + row if ind else row)
    except Nested:
        return None
    except GCFEncodeError as e:
        row = objs[len(lines)]
        raise at_path(at_path(e, failing_key(row, fields, cell)), len(lines)) from None
    return lines


def _cell_rows(
    objs: Sequence[Any], fields: list[str], cell: Callable[[Any], str]
) -> list[list[str]] | None:
    """Every row's cell tokens, or None as soon as a cell holds a container ``cell``
    cannot write (a dense table's rows, before constants and short rows)."""
    absent = ABSENT
    order = tuple(fields)
    width = len(order)
    rows: list[list[str]] = []
    try:
        for o in objs:
            if len(o) == width and tuple(o) == order:
                rows.append(list(map(cell, o.values())))
            else:
                get = o.get
                rows.append(["~" if (v := get(f, absent)) is absent else cell(v) for f in fields])
    except Nested:
        return None
    except GCFEncodeError as e:
        row = objs[len(rows)]
        raise at_path(at_path(e, failing_key(row, fields, cell)), len(rows)) from None
    return rows


def header_line(tool: str | None) -> str:
    """The generic header line, with ``tool=`` when given (a bad value raises
    ``malformed_header_field``)."""
    return format_header("generic", [] if tool is None else [("tool", tool)])


def dumps(
    value: Any,
    *,
    tool: str | None = None,
    default: Callable[[Any], Any] | None = None,
    flatten: bool = True,
    shared_schemas: bool = True,
    inline_schemas: bool = True,
    spec: Spec = "3.5.3",
    group_by: tuple[str, str] | None = None,
) -> str:
    """Encode a JSON-model value as canonical generic-profile GCF (ends with LF).

    ``tool`` adds the optional ``tool=`` header field. ``default``, as in :func:`json.dumps`,
    is called with each value outside the JSON model (a set, a ``datetime``, a dataclass)
    and its result is encoded instead; without it such a value is an
    :class:`~gcfkit.errors.GCFEncodeError` whose ``path`` names it. The optimisations are
    deterministic, on by default, and each can be turned off: ``flatten`` uniform nested
    objects into ``>`` path columns (§7.4.6); encode uniform flat objects of three or more
    fields that are not flattened with positional inline schemas (``inline_schemas``,
    §7.4.5.1); reuse an array attachment's field declaration across rows
    (``shared_schemas``, §7.4.5.3). Turning one off never changes the decoded value.

    >>> print(dumps({"name": "Ada", "tags": ["x", "y"], "rows": [{"id": 1}, {"id": 2}]}), end="")
    GCF profile=generic
    name=Ada
    tags[2]: x,y
    ## rows [2]{id}
    1
    2
    >>> print(dumps({"tags": {"b", "a"}}, default=sorted), end="")
    GCF profile=generic
    tags[2]: a,b

    ``spec="3.6.0"`` writes what the reference implementation (gcf-python 2.8.0) writes
    as GCF v3.6.0, byte for byte: a section's constant columns in its header (a v3.5.3
    decoder rejects them; :func:`gcfkit.loads` reads them). With it, ``group_by=(key,
    column)`` writes a root array of flat objects as one value-grouped table
    (:func:`gcfkit.generic.v360.dumps_grouped`).
    """
    if default is not None:
        value = with_default(value, default, 1)  # a GCFEncodeError names what it rejects
    opts = Options(flatten=flatten, shared=shared_schemas, inline=inline_schemas)
    if check_spec(spec):  # the C accelerator writes v3.5.3 only
        if group_by is None:
            return _encode(value, tool, replace(opts, v360=True))
        return v360.dumps_grouped(value, *group_by, tool=tool)
    if group_by is not None:
        raise ValueError("group_by is a v3.6.0 form: pass spec='3.6.0' with it")
    # The C accelerator writes what it can exactly as the reference does, and hands the
    # rest, every error included, to the reference below (which names the value's path).
    if text := speedups.encode(value, header_line(tool), flatten, shared_schemas, inline_schemas):
        return text
    return _encode(value, tool, opts)


def _encode(value: Any, tool: str | None, opts: Options) -> str:
    enc = Encoder(opts)
    enc.out.append(header_line(tool))
    try:
        enc.root(value)
    except GCFError as e:
        raise as_encode_error(e) from None
    enc.out.append("")
    return "\n".join(enc.out)


def encode_dense(
    value: Any,
    defs: Mapping[str, str],
    *,
    tool: str | None = None,
    lists: bool = True,
    constants: bool = True,
    short_rows: bool = True,
) -> tuple[str, set[str]]:
    """A dense-profile payload of ``value`` (docs/extensions/dense.md D9) and the set of
    constructs it used. ``defs`` maps each string to define to its name (D9.2,
    :func:`gcfkit.generic.definitions.select`); the flags switch constructs off (D9.4).
    The public entry point is :func:`gcfkit.dense.encode`.

    >>> encode_dense({"a": ["ab cd ef", "ab cd ef"]}, {"ab cd ef": "a"})
    ('GCF-dense\\n$a=ab cd ef\\na[2]: $a,$a\\n', {'defs'})
    """
    header = dense_header_line(tool)
    if got := speedups.encode_dense(value, header, defs, lists, constants, short_rows):
        return got  # as in dumps: the accelerator's answer is the reference's, or None
    dense = Dense(defs=defs, lists=lists, constants=constants, short_rows=short_rows)
    enc = Encoder(Options(dense=dense))
    enc.out.append(header)
    enc.out.extend(f"{REFERENCE_SIGIL}{name}={spelling(s)}" for s, name in defs.items())
    if defs:
        enc.used.add("defs")
    try:
        enc.root(value)
    except GCFError as e:
        raise as_encode_error(e) from None
    enc.out.append("")
    return "\n".join(enc.out), enc.used


def render_tabular(
    header: str,
    rows: Sequence[Mapping[str, Any]],
    fields: Sequence[str],
    *,
    indent: str = "",
) -> list[str]:
    """Lines of a tabular block: ``header`` then one §7.4 row per dict of ``rows``.

    For writers of other sections with tabular bodies (e.g. generic deltas, §10a): the
    caller supplies the complete header line (``"## added [2]{@id,total}"``) and the
    column order ``fields`` (without ``@`` marks). Cells follow the full row grammar:
    ``~`` for an absent field, ``-`` for null, ``^`` plus a ``.field`` attachment (with
    shared array schemas) for a nested value. Columns are never flattened. A row with a
    key outside ``fields``, or a field containing ``>``, raises ``GCFError`` rather than
    dropping data.

    >>> render_tabular("## added [2]{@id,tags}", [{"id": 1, "tags": []}, {"id": 2}], ["id", "tags"])
    ['## added [2]{@id,tags}', '@0 1|^', '.tags [0]', '2|~']
    """
    cols = list(fields)
    known = set(cols)
    for f in cols:
        if not isinstance(f, str):
            raise bad_key_error(f)
        if ">" in f:
            raise GCFEncodeError(
                "unsupported_type",
                f"field {f!r} contains '>', which a tabular column would read as a path",
            )
    for r in rows:
        for k in r:
            if k not in known:
                raise GCFEncodeError(
                    "unsupported_type", f"row key {k!r} is not one of the declared fields"
                )
    if not cols and rows:
        raise GCFEncodeError("unsupported_type", "rows need at least one field to be written")
    enc = Encoder(Options(flatten=False, shared=True, inline=False))
    enc.out.append(header)
    plan = _Plan([(_SCALAR, f, None) for f in cols], cols)
    try:
        enc.rows(plan, rows, None, indent, 1)
    except _Conflict:
        raise GCFEncodeError(
            "unsupported_type",
            "a field holds a tabular array and later an expanded one, which tabular rows "
            "cannot carry (§7.4.5.3)",
        ) from None
    return enc.out
