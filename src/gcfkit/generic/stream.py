"""Streaming generic-profile encoder (spec §8): rows go out the moment they arrive.

:class:`GenericStreamEncoder` writes a generic payload line by line through any
``write(str)`` callable. Deferred sections carry ``[?]`` (``[?:]`` for keyed maps) and the
``##! summary counts=...`` trailer written by :meth:`~GenericStreamEncoder.close` gives
their sizes in header order (§8.4). A tabular row costs O(1) memory: nothing of it is
kept once it is written.

The payload is a root object: :meth:`~GenericStreamEncoder.field` writes one member
(a scalar as ``key=value``, any other JSON value in its buffered form), and the ``open_*``
methods start a section whose content streams:

* :meth:`~GenericStreamEncoder.open_section` -- a nested object (``## key``);
* :meth:`~GenericStreamEncoder.open_table` -- an array of objects with a declared field
  list, one :meth:`~GenericStreamEncoder.row` each (``## key [?]{fields}``);
* :meth:`~GenericStreamEncoder.open_keyed` -- a keyed map, one
  :meth:`~GenericStreamEncoder.member` each (``## key [?:]{key,fields}``);
* :meth:`~GenericStreamEncoder.open_items` -- an array of arbitrary values, one
  :meth:`~GenericStreamEncoder.item` each, in expanded form (``## key [?]``), for records
  whose complete field list is not known up front (§8.3).

With ``name=None`` a table, keyed map or item list is the root value itself (an anonymous
``## [?]...`` header); it must then be the only content of the payload.

:meth:`~GenericStreamEncoder.end` closes the innermost open section; opening a sibling or
writing a field to an enclosing object closes the sections in between, and
:meth:`~GenericStreamEncoder.close` closes everything. A table or keyed map that ends
without rows is written as an empty array (``[0]``) or empty object, so every header on the
wire has at least one row.

The encoder never drops data: a row with a field its header did not declare, a nested value
in a row cell (a stream has no attachments), a ``>`` in a field name (§8.3), a duplicate
key or member key, or a call in the wrong state raises :class:`~gcfkit.errors.GCFError`
before anything of it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from ..errors import GCFEncodeError, at_path
from ..grammar import INDENT, SUMMARY
from .cells import ABSENT, MAX_DEPTH, Nested, failing_key, format_cell, key_text
from .encoder import Encoder, Options, header_line, key_label

__all__ = ["GenericStreamEncoder"]

_OBJECT: Final = 0
_TABLE: Final = 1
_KEYED: Final = 2
_ITEMS: Final = 3
_NAMES: Final = {_OBJECT: "section", _TABLE: "table", _KEYED: "keyed map", _ITEMS: "item list"}


class _Ctx:
    """One open container: where its lines go and what it has seen so far."""

    __slots__ = (
        "count",
        "decl",
        "fields",
        "head",
        "ind",
        "keys",
        "kind",
        "known",
        "name",
        "raw",
    )

    def __init__(
        self,
        kind: int,
        ind: str,
        name: str | None = None,
        head: str = "",
        raw: str | None = None,
    ) -> None:
        self.kind = kind
        self.ind = ind
        self.name = name  # formatted key of the section, None for the root
        self.raw = raw  # the section's key as given (for an error's path)
        self.head = head  # header up to its count bracket, written with the first row
        self.decl = ""  # field declaration of a table or keyed map
        self.count = 0
        self.fields: tuple[str, ...] = ()
        self.known: frozenset[str] = frozenset()
        # Member keys seen: object keys, or keyed-map member keys (duplicates are errors).
        self.keys: set[str] = set()


class GenericStreamEncoder:
    """Write a generic GCF payload incrementally through ``write`` (spec §8).

    ``write`` is any callable taking a ``str`` (``sys.stdout.write``, ``file.write``,
    ``list.append``...); each call gets one or more complete lines, LF included (a row is
    always one call). The header is written
    at construction, the ``##! summary`` trailer by :meth:`close` (or on leaving a
    ``with`` block without an exception).

    >>> out = []
    >>> with GenericStreamEncoder(out.append, tool="hr") as enc:
    ...     enc.field("source", "db")
    ...     enc.open_table("employees", ["id", "name"])
    ...     enc.row({"id": 1, "name": "Ada"})
    ...     enc.row({"id": 2})
    >>> print("".join(out), end="")
    GCF profile=generic tool=hr
    source=db
    ## employees [?]{id,name}
    1|Ada
    2|~
    ##! summary counts=2
    """

    def __init__(self, write: Callable[[str], Any], *, tool: str | None = None) -> None:
        self._write = write
        self._stack: list[_Ctx] = [_Ctx(_OBJECT, "")]
        self._counts: list[int] = []
        self._root_only = False  # an anonymous root section is the whole payload
        self._closed = False
        self._enc = Encoder(Options())  # dumps' defaults
        write(header_line(tool) + "\n")

    def __enter__(self) -> GenericStreamEncoder:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()

    # -- objects ----------------------------------------------------------------------------

    def field(self, key: str, value: Any) -> None:
        """Write member ``key`` of the innermost open object (closing any table in it).

        A scalar is a ``key=value`` line, a primitive array an inline array; an object or
        any other array is written whole in its buffered form (§7).

        >>> out = []
        >>> enc = GenericStreamEncoder(out.append)
        >>> enc.field("tags", ["a", "b"]); enc.close()
        >>> out[1]
        'tags[2]: a,b\\n'
        """
        ctx = self._object_for(key)
        try:
            self._enc.members({key: value}, ctx.ind, len(self._stack))
        except BaseException as e:
            self._enc.out.clear()
            if isinstance(e, GCFEncodeError):
                raise self._located(e) from None
            raise
        ctx.keys.add(key)
        self._flush()

    def open_section(self, key: str) -> None:
        """Open nested object ``key`` (``## key``); its members follow, indented."""
        ctx = self._object_for(key)
        self._check_depth()
        self._write(f"{ctx.ind}## {key_text(key)}\n")
        ctx.keys.add(key)
        self._stack.append(_Ctx(_OBJECT, ctx.ind + INDENT, raw=key))

    # -- tables -----------------------------------------------------------------------------

    def open_table(self, name: str | None, fields: Iterable[str]) -> None:
        """Open array ``name`` of objects whose keys are among ``fields`` (``[?]{...}``).

        ``fields`` is the complete ordered column list (§8.3); ``name=None`` makes the
        table the root value.
        """
        cols = self._fields(fields)
        ctx = self._open(name, _TABLE)
        ctx.fields = cols
        ctx.known = frozenset(cols)
        ctx.decl = "{" + ",".join(map(key_text, cols)) + "}"

    def row(self, obj: Mapping[str, Any]) -> None:
        """Write one row of the open table; a declared field it lacks is written ``~``."""
        ctx = self._stack[-1]
        if ctx.kind != _TABLE or self._closed:
            ctx = self._top(_TABLE, "row()")  # raises
        try:
            cells = self._cells(ctx, obj)
        except GCFEncodeError as e:
            raise self._located(at_path(e, ctx.count)) from None
        if not ctx.count:
            self._write(f"{ctx.head}[?]{ctx.decl}\n")
        ctx.count += 1
        self._write(f"{ctx.ind}{cells}\n")

    def open_keyed(self, name: str | None, fields: Iterable[str]) -> None:
        """Open keyed map ``name`` (§7.2a) whose member objects use ``fields`` (``[?:]``).

        The key column label is ``key`` (``key_text``, ``__key``... if a field is so named).
        Member keys are remembered to refuse duplicates, so this section's memory grows
        with its member count (a table's does not).
        """
        cols = self._fields(fields)
        ctx = self._open(name, _KEYED)
        ctx.fields = cols
        ctx.known = frozenset(cols)
        ctx.decl = "{" + ",".join(map(key_text, (key_label(cols), *cols))) + "}"

    def member(self, key: str, obj: Mapping[str, Any]) -> None:
        """Write member ``key`` (an object over the declared fields) of the open keyed map."""
        ctx = self._top(_KEYED, "member()")
        if not isinstance(key, str):
            raise GCFEncodeError("unsupported_type", f"member key {key!r} is not a string")
        if key in ctx.keys:
            raise GCFEncodeError("duplicate_key", f"member key {key!r} was already written")
        try:
            cells = f"{format_cell(key)}|{self._cells(ctx, obj)}"
        except GCFEncodeError as e:
            raise self._located(at_path(e, key)) from None
        ctx.keys.add(key)
        if not ctx.count:
            self._write(f"{ctx.head}[?:]{ctx.decl}\n")
        ctx.count += 1
        self._write(f"{ctx.ind}{cells}\n")

    # -- expanded items ---------------------------------------------------------------------

    def open_items(self, name: str | None) -> None:
        """Open array ``name`` written in expanded form (``## name [?]``), one item each."""
        self._open(name, _ITEMS)

    def item(self, value: Any) -> None:
        """Append any JSON value to the open item list as ``@N ...`` (§7.6)."""
        ctx = self._top(_ITEMS, "item()")
        try:
            # An item list at stack index i is container level i + 1 (level 1 when it
            # is the anonymous root, which sits above the unused root object).
            depth = len(self._stack) + (0 if self._root_only else 1)
            self._enc.item(ctx.count, value, ctx.ind, depth)
        except BaseException as e:
            self._enc.out.clear()
            if isinstance(e, GCFEncodeError):
                raise self._located(at_path(e, ctx.count)) from None
            raise
        if ctx.count == 0:
            self._write(f"{ctx.head}[?]\n")
        ctx.count += 1
        self._flush()

    # -- closing ----------------------------------------------------------------------------

    def end(self) -> None:
        """Close the innermost open section, table, keyed map or item list."""
        if self._closed or len(self._stack) < 2:
            raise GCFEncodeError("invalid_stream_call", "end() with no open section")
        self._pop()

    def close(self) -> None:
        """Close every open section and write the ``##! summary`` trailer (§8.4).

        Calling it again does nothing.
        """
        if self._closed:
            return
        while len(self._stack) > 1:
            self._pop()
        self._closed = True
        counts = ",".join(map(str, self._counts))
        self._write(f"{SUMMARY} counts={counts}\n" if counts else f"{SUMMARY}\n")

    # -- internals --------------------------------------------------------------------------

    def _located(self, e: GCFEncodeError) -> GCFEncodeError:
        """``e``, raised in the innermost open section, with the sections' keys in its path."""
        for ctx in reversed(self._stack):
            if ctx.raw is not None:
                at_path(e, ctx.raw)
        return e

    def _flush(self) -> None:
        out = self._enc.out
        if out:
            self._write("\n".join(out) + "\n")
            out.clear()

    def _check_depth(self) -> None:
        if len(self._stack) >= MAX_DEPTH:
            raise GCFEncodeError("limit_exceeded", f"sections nest deeper than {MAX_DEPTH} levels")

    def _live(self) -> None:
        if self._closed:
            raise GCFEncodeError("invalid_stream_call", "the stream is closed")

    def _object_for(self, key: str) -> _Ctx:
        """The innermost open object, after closing the tables above it; checks ``key``."""
        self._live()
        if self._root_only:
            raise GCFEncodeError(
                "invalid_stream_call", "the payload's root is an anonymous section; no fields"
            )
        while self._stack[-1].kind != _OBJECT:
            self._pop()
        ctx = self._stack[-1]
        if not isinstance(key, str):
            raise GCFEncodeError(
                "unsupported_type", f"object key {key!r} is a {type(key).__name__}, not a str"
            )
        if key in ctx.keys:
            raise GCFEncodeError("duplicate_key", f"key {key!r} was already written to this object")
        return ctx

    def _open(self, name: str | None, kind: int) -> _Ctx:
        if name is None:
            self._live()
            root = self._stack[0]
            if self._root_only or len(self._stack) > 1 or root.keys:
                raise GCFEncodeError(
                    "invalid_stream_call",
                    "an anonymous (root) section must be the only content of the payload",
                )
            self._root_only = True
            ctx = _Ctx(kind, "", None, "## ")
        else:
            parent = self._object_for(name)
            self._check_depth()
            key = key_text(name)
            parent.keys.add(name)
            ctx = _Ctx(kind, parent.ind, key, f"{parent.ind}## {key} ", name)
        self._stack.append(ctx)
        return ctx

    def _top(self, kind: int, call: str) -> _Ctx:
        self._live()
        ctx = self._stack[-1]
        if ctx.kind != kind:
            raise GCFEncodeError("invalid_stream_call", f"{call} needs an open {_NAMES[kind]}")
        return ctx

    @staticmethod
    def _fields(fields: Iterable[str]) -> tuple[str, ...]:
        if isinstance(fields, str):
            raise GCFEncodeError("unsupported_type", "fields must be a list of names, not one str")
        cols = tuple(fields)
        if not cols:
            raise GCFEncodeError(
                "invalid_stream_call", "a tabular section needs at least one field"
            )
        seen: set[str] = set()
        for f in cols:
            if not isinstance(f, str):
                raise GCFEncodeError("unsupported_type", f"field name {f!r} is not a str")
            if ">" in f:
                raise GCFEncodeError(
                    "unsupported_type",
                    f"field {f!r} contains '>', which a streaming header would declare as a "
                    "flattened path (§8.3); rename it or use open_items()",
                )
            if f in seen:
                raise GCFEncodeError("duplicate_field_name", f"field {f!r} is declared twice")
            seen.add(f)
        return cols

    @staticmethod
    def _cells(ctx: _Ctx, obj: Mapping[str, Any]) -> str:
        """The row's cells, joined; nothing is written if any field cannot be."""
        if type(obj) is not dict and not isinstance(obj, Mapping):
            raise GCFEncodeError(
                "unsupported_type", f"a row is an object, not {type(obj).__name__}"
            )
        get = obj.get
        absent = ABSENT
        try:
            cells = ["~" if (v := get(f, absent)) is absent else format_cell(v) for f in ctx.fields]
        except Nested:
            bad = next(f for f in ctx.fields if isinstance(get(f), (dict, list, tuple)))
            raise at_path(
                GCFEncodeError(
                    "unsupported_type",
                    f"field {bad!r} holds a nested value, which a streamed row cannot attach "
                    "(§8.3); use open_items() for nested records",
                ),
                bad,
            ) from None
        except GCFEncodeError as e:
            raise at_path(e, failing_key(obj, ctx.fields, format_cell)) from None
        # A bare ~ only ever stands for an absent field (the string "~" is quoted), so
        # this counts the declared fields present; any other key was not declared. It
        # costs no allocation, which keeps the per-row cost flat.
        if len(obj) + cells.count("~") != len(cells):
            extra = [k for k in obj if k not in ctx.known]
            raise at_path(
                GCFEncodeError(
                    "undeclared_field",
                    f"row field {extra[0]!r} is not in the declared fields; declare every "
                    "field up front or stream this section with open_items()",
                ),
                str(extra[0]),
            )
        return "|".join(cells)

    def _pop(self) -> None:
        ctx = self._stack.pop()
        if ctx.kind == _OBJECT:
            return
        if ctx.count:
            self._counts.append(ctx.count)
        elif ctx.kind == _KEYED:
            # An empty map is an empty object (§7.7), never a [0:] keyed header.
            if ctx.name is not None:
                self._write(f"{ctx.head.rstrip()}\n")
        else:
            self._write(f"{ctx.head}[0]\n")
