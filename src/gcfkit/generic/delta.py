"""Keyed sets and generic deltas (spec §10a), the generic twin of :mod:`gcfkit.graph.delta`.

A :class:`KeyedSet` is a set of flat rows identified by one column. Its identity is the
generic gcf-pack-root-v1 (:func:`pack_root`, §10a.3); a :class:`GenericDelta` carries the
rows added, changed (whole-row replacement) and removed between two sets, and
:func:`apply_delta` applies one atomically, verified by pack root. The producer's session
(unchanged / delta / full answers, re-anchoring) is :mod:`gcfkit.generic.session`; both are
re-exported as :mod:`gcfkit.keyed`.

>>> base = KeyedSet("id", ["id", "v"], [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
>>> new = KeyedSet("id", ["id", "v"], [{"id": 1, "v": "A"}, {"id": 3, "v": "c"}])
>>> delta = diff(base, new)
>>> print(dumps_delta(delta), end="")  # doctest: +ELLIPSIS
GCF profile=generic delta=true base_root=sha256:... new_root=sha256:... key=id
## added [1]{@id,v}
3|c
## changed [1]{@id,v}
1|A
## removed [1]{@id}
2
>>> pack_root(apply_delta(base, loads_delta(dumps_delta(delta)))) == pack_root(new)
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import GCFDecodeError, GCFEncodeError, GCFError, at_path, placed
from ..header import format_header, to_text
from ..scalar import format_key, format_scalar, quote_string
from .decoder import decode_document
from .encoder import render_tabular

__all__ = [
    "GenericDelta",
    "KeyedSet",
    "apply_delta",
    "diff",
    "dumps_delta",
    "dumps_full",
    "dumps_unchanged",
    "loads_delta",
    "loads_keyed",
    "pack_root",
]

_SECTIONS: Final = ("added", "changed", "removed")


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------


def _canon(value: Any) -> str:
    """The §10a.3 hash form of a cell: strings always quoted, so "1" never meets 1."""
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, (dict, list)):
        raise GCFEncodeError(
            "unsupported_type",
            f"a keyed-set cell must be a JSON scalar, not {type(value).__name__}",
        )
    return format_scalar(value)


def _record(row: Mapping[str, Any]) -> bytes:
    parts = ["R"]
    for name in sorted(row, key=lambda k: k.encode("utf-8", "surrogatepass")):
        parts.append(name)
        parts.append(_canon(row[name]))
    text = "\t".join(parts) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise GCFError(
            "invalid_surrogate", "a field name holds a lone surrogate; fix the producer"
        ) from None


def _check_rows(
    key: str, fields: Sequence[str], rows: Iterable[Mapping[str, Any]], what: str, attr: str
) -> tuple[dict[str, Any], ...]:
    """The rows, copied, once each is valid; an invalid one is a :class:`GCFEncodeError`
    whose path names it as ``attr[i]`` (and its cell, ``attr[i].field``)."""
    known = set(fields)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, Mapping):
                raise GCFEncodeError(
                    "invalid_keyed_set", f"{what}: a row must be a dict, not {row!r:.40}"
                )
            if key not in row:
                raise GCFEncodeError(
                    "invalid_keyed_set", f"{what}: a row lacks its identity {key!r}"
                )
            extra = [k for k in row if k not in known]
            if extra:
                raise GCFEncodeError(
                    "invalid_keyed_set", f"{what}: row field {extra[0]!r} is not a declared field"
                )
            for k, v in row.items():
                try:
                    _canon(v)
                except GCFEncodeError as e:
                    raise at_path(e, k) from None
            ident = _canon(row[key])
            if ident in seen:
                raise at_path(
                    GCFEncodeError(
                        "duplicate_key", f"{what}: identity value {ident} appears twice (§10a.1)"
                    ),
                    key,
                )
        except GCFEncodeError as e:
            raise at_path(at_path(e, i), attr) from None
        seen.add(ident)
        out.append(dict(row))
    return tuple(out)


def _check_schema(key: str, fields: Iterable[str], what: str) -> tuple[str, ...]:
    names = tuple(fields)
    if not all(isinstance(f, str) for f in names):
        raise GCFError("invalid_keyed_set", f"{what}: field names must be strings")
    if len(set(names)) != len(names):
        raise GCFError("duplicate_field_name", f"{what}: a field is declared twice")
    if key not in names:
        raise GCFError(
            "invalid_keyed_set", f"{what}: the identity {key!r} is not one of the fields"
        )
    return names


# ---------------------------------------------------------------------------------------
# Keyed sets and pack roots
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, init=False)
class KeyedSet:
    """Flat rows of JSON scalars identified by the column ``key`` (§10a.1).

    Rows are copied; identity values must be unique (compared in their canonical form, so
    the string ``"1"`` and the number ``1`` differ while ``1`` and ``1.0`` are the same).

    >>> s = KeyedSet("sku", ["sku", "qty"], [{"sku": "A", "qty": 2}], name="stock")
    >>> len(s), s.ids()
    (1, ['"A"'])
    """

    key: str
    fields: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    name: str = "rows"
    __hash__ = None  # type: ignore[assignment]  # rows are dicts

    def __init__(
        self,
        key: str,
        fields: Iterable[str],
        rows: Iterable[Mapping[str, Any]],
        name: str = "rows",
    ) -> None:
        names = _check_schema(key, fields, "keyed set")
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "fields", names)
        object.__setattr__(self, "rows", _check_rows(key, names, rows, "keyed set", "rows"))
        object.__setattr__(self, "name", name)

    def __len__(self) -> int:
        return len(self.rows)

    def ids(self) -> list[str]:
        """Canonical identity of every row, in row order."""
        return [_canon(r[self.key]) for r in self.rows]


def pack_root(keyed_set: KeyedSet) -> str:
    """gcf-pack-root-v1 of a keyed set, generic profile (§10a.3); row order is irrelevant.

    >>> pack_root(KeyedSet("id", ["id"], [{"id": 1}, {"id": 2}])) == pack_root(
    ...     KeyedSet("id", ["id"], [{"id": 2}, {"id": 1}]))
    True
    """
    return _root(keyed_set.rows)


def _root(rows: Iterable[Mapping[str, Any]]) -> str:
    records = sorted(_record(r) for r in rows)
    return "sha256:" + hashlib.sha256(b"".join(records)).hexdigest()


# ---------------------------------------------------------------------------------------
# Deltas
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, init=False)
class GenericDelta:
    """The rows added, changed (whole-row replacement) and removed between two keyed sets.

    ``removed`` holds identity values. ``delta_tokens``/``full_tokens``, when both known,
    give the header's ``savings=`` percentage.

    >>> d = GenericDelta("id", ["id", "v"], "sha256:aa", "sha256:bb", removed=[7])
    >>> d.removed
    (7,)
    """

    key: str
    fields: tuple[str, ...]
    base_root: str
    new_root: str
    added: tuple[dict[str, Any], ...] = ()
    changed: tuple[dict[str, Any], ...] = ()
    removed: tuple[Any, ...] = ()
    tool: str = ""
    delta_tokens: int = 0
    full_tokens: int = 0
    __hash__ = None  # type: ignore[assignment]  # rows are dicts

    def __init__(
        self,
        key: str,
        fields: Iterable[str],
        base_root: str,
        new_root: str,
        added: Iterable[Mapping[str, Any]] = (),
        changed: Iterable[Mapping[str, Any]] = (),
        removed: Iterable[Any] = (),
        tool: str = "",
        delta_tokens: int = 0,
        full_tokens: int = 0,
    ) -> None:
        names = _check_schema(key, fields, "delta")
        removed_t = tuple(removed)
        for i, v in enumerate(removed_t):
            try:
                _canon(v)
            except GCFEncodeError as e:
                raise at_path(at_path(e, i), "removed") from None
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "fields", names)
        object.__setattr__(self, "base_root", base_root)
        object.__setattr__(self, "new_root", new_root)
        object.__setattr__(self, "added", _check_rows(key, names, added, "added", "added"))
        object.__setattr__(self, "changed", _check_rows(key, names, changed, "changed", "changed"))
        object.__setattr__(self, "removed", removed_t)
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "delta_tokens", delta_tokens)
        object.__setattr__(self, "full_tokens", full_tokens)

    @property
    def empty(self) -> bool:
        """True when the delta changes nothing."""
        return not (self.added or self.changed or self.removed)


def diff(base: KeyedSet, new: KeyedSet, *, tool: str = "") -> GenericDelta:
    """The delta that turns ``base`` into ``new`` (same key and fields; else a full is due).

    Added and changed rows follow ``new``'s order, removed identities ``base``'s order.

    >>> a = KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}])
    >>> diff(a, KeyedSet("id", ["id", "v"], [{"id": 1, "v": 1}])).changed
    ({'id': 1, 'v': 1},)
    """
    if base.key != new.key or base.fields != new.fields:
        raise GCFError(
            "invalid_delta",
            "the key or fields differ from the base: a schema change needs a full payload",
        )
    key = base.key
    old = {_canon(r[key]): _record(r) for r in base.rows}
    added: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    present: set[str] = set()
    for row in new.rows:
        ident = _canon(row[key])
        present.add(ident)
        record = old.get(ident)
        if record is None:
            added.append(row)
        elif record != _record(row):
            changed.append(row)
    removed = [r[key] for r in base.rows if _canon(r[key]) not in present]
    return GenericDelta(
        key,
        base.fields,
        _root(base.rows),
        _root(new.rows),
        added=added,
        changed=changed,
        removed=removed,
        tool=tool,
    )


def _decl(key: str, fields: Sequence[str]) -> str:
    return "{" + ",".join(("@" if f == key else "") + format_key(f) for f in fields) + "}"


def dumps_delta(delta: GenericDelta) -> str:
    """Wire form of a generic delta (§10a.2): sections added, changed, removed, in order.

    >>> print(dumps_delta(GenericDelta("id", ["id"], "sha256:aa", "sha256:bb", removed=[1])),
    ...       end="")
    GCF profile=generic delta=true base_root=sha256:aa new_root=sha256:bb key=id
    ## removed [1]{@id}
    1
    """
    pairs = [("tool", delta.tool)] if delta.tool else []
    pairs += [
        ("delta", "true"),
        ("base_root", delta.base_root),
        ("new_root", delta.new_root),
        ("key", delta.key),
    ]
    if delta.full_tokens > 0:
        # Rounded down: the header never overstates what the delta saved.
        pct = (delta.full_tokens - delta.delta_tokens) * 100 // delta.full_tokens
        pairs.append(("savings", f"{pct}%"))
    head = format_header("generic", pairs)
    lines = [head]
    decl = _decl(delta.key, delta.fields)
    for name, rows in (("added", delta.added), ("changed", delta.changed)):
        if rows:
            try:
                lines += render_tabular(f"## {name} [{len(rows)}]{decl}", rows, delta.fields)
            except GCFEncodeError as e:
                raise at_path(e, name) from None
    if delta.removed:
        ids = [{delta.key: v} for v in delta.removed]
        head_line = f"## removed [{len(ids)}]{_decl(delta.key, [delta.key])}"
        lines += render_tabular(head_line, ids, [delta.key])
    return "\n".join(lines) + "\n"


def loads_delta(text: str | bytes) -> GenericDelta:
    """Strict decode of a generic delta payload (§10a.2).

    An ``unchanged=true`` answer (§10a.4) decodes as an empty delta from its ``pack_root``
    to itself, so :func:`apply_delta` handles all three outcomes' non-full forms alike.

    >>> d = loads_delta("GCF profile=generic delta=true base_root=sha256:aa "
    ...                 "new_root=sha256:bb key=id\\n## removed [1]{@id}\\n1\\n")
    >>> (d.key, d.removed)
    ('id', (1,))
    """
    return placed(_delta_from, to_text(text))


def _delta_from(text: str) -> GenericDelta:
    doc = decode_document(text, id_fields=True)
    head = doc.header
    if head.get("unchanged") == "true":
        # §10a.4's header-only answer: the held set is current, a delta that changes nothing.
        if "pack_root" not in head:
            raise GCFDecodeError("malformed_delta", "an unchanged=true header needs pack_root=", 1)
        if doc.value != {}:
            raise GCFDecodeError("malformed_delta", "an unchanged=true payload has no body", 2)
        key = head.get("key", "")
        root = head["pack_root"]
        return GenericDelta(key, [key], root, root, tool=head.get("tool", ""))
    if head.get("delta") != "true":
        raise GCFDecodeError(
            "malformed_delta", "not a delta payload: the header lacks delta=true", 1
        )
    for name in ("base_root", "new_root", "key"):
        if name not in head:
            raise GCFDecodeError("malformed_delta", f"a delta header needs {name}=", 1)
    key = head["key"]
    body = doc.value
    if not isinstance(body, dict):
        raise GCFDecodeError(
            "malformed_delta", "a delta body holds only ## added/changed/removed", 2
        )
    sections: dict[str, Any] = {}
    fields: list[str] | None = None
    for name, rows in body.items():
        info = doc.tables.get(id(rows))
        if name not in _SECTIONS or info is None or info.keyed:
            raise GCFDecodeError(
                "malformed_delta",
                f"unknown delta section {name!r}: only ## added, ## changed and ## removed "
                "tables are valid when delta=true",
                info.line if info is not None else None,
            )
        if info.id_field != key:
            raise GCFDecodeError(
                "malformed_delta", f"## {name} must mark the identity field as @{key}", info.line
            )
        if name == "removed":
            if info.fields != [key]:
                raise GCFDecodeError(
                    "malformed_delta", "## removed lines hold only the identity value", info.line
                )
            sections[name] = [r[key] for r in rows]
            continue
        if fields is not None and fields != info.fields:
            raise GCFDecodeError(
                "malformed_delta", "## added and ## changed declare different fields", info.line
            )
        fields = info.fields
        sections[name] = rows
    try:
        return GenericDelta(
            key,
            fields if fields is not None else [key],
            head["base_root"],
            head["new_root"],
            added=sections.get("added", ()),
            changed=sections.get("changed", ()),
            removed=sections.get("removed", ()),
            tool=head.get("tool", ""),
        )
    except GCFError as e:
        raise GCFDecodeError("malformed_delta", e.detail) from None


def apply_delta(base: KeyedSet, delta: GenericDelta, expected_root: str | None = None) -> KeyedSet:
    """Apply ``delta`` to ``base`` atomically (§10a.5) and return the new set.

    The base is never modified. Rejected with ``root_mismatch`` when ``base`` is not the
    delta's base or the result does not hash to ``expected_root`` (default
    ``delta.new_root``), and with ``invalid_delta`` for a contradictory operation.

    >>> base = KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}])
    >>> d = GenericDelta("id", ["id", "v"], pack_root(base), pack_root(base))
    >>> apply_delta(base, d) == base
    True
    """
    key = base.key
    if delta.key != key and not delta.empty:
        raise GCFError(
            "invalid_delta", f"the delta's key {delta.key!r} is not the base's key {key!r}"
        )
    if pack_root(base) != delta.base_root:
        raise GCFError(
            "root_mismatch",
            f"the held set's root is not the delta's base_root {delta.base_root[:20]}...; "
            "request a full payload",
        )
    if (delta.added or delta.changed) and delta.fields != base.fields:
        raise GCFError(
            "invalid_delta", "the delta's fields differ from the base's: a full payload is due"
        )
    rows = {_canon(r[key]): r for r in base.rows}
    touched: set[str] = set()

    def claim(ident: str, op: str) -> None:
        if ident in touched:
            raise GCFError(
                "invalid_delta", f"{op} identity {ident} appears in two delta operations"
            )
        touched.add(ident)

    for row in delta.added:
        ident = _canon(row[key])
        claim(ident, "added")
        if ident in rows:
            raise GCFError(
                "invalid_delta", f"added identity {ident} already exists in the base (§10a.5)"
            )
    for row in delta.changed:
        ident = _canon(row[key])
        claim(ident, "changed")
        if ident not in rows:
            raise GCFError(
                "invalid_delta", f"changed identity {ident} does not exist in the base (§10a.5)"
            )
    removed = [_canon(v) for v in delta.removed]
    for ident in removed:
        claim(ident, "removed")
        if ident not in rows:
            raise GCFError(
                "invalid_delta", f"removed identity {ident} does not exist in the base (§10a.5)"
            )
    result = dict(rows)
    for row in delta.changed:
        result[_canon(row[key])] = row
    for ident in removed:
        del result[ident]
    for row in delta.added:
        result[_canon(row[key])] = row
    want = delta.new_root if expected_root is None else expected_root
    got = _root(result.values())
    if got != want:
        raise GCFError(
            "root_mismatch",
            f"the applied set hashes to {got[:20]}..., not {want[:20]}...; the base is "
            "unchanged, request a full payload",
        )
    return KeyedSet(key, base.fields, result.values(), base.name)


# ---------------------------------------------------------------------------------------
# Full and unchanged payloads
# ---------------------------------------------------------------------------------------


def dumps_full(keyed_set: KeyedSet, *, tool: str = "") -> str:
    """The delta-participating full payload of a set (§10a.1): pack_root, key, @ field.

    >>> print(dumps_full(KeyedSet("id", ["id", "v"], [{"id": 1, "v": "x"}])), end="")
    ... # doctest: +ELLIPSIS
    GCF profile=generic pack_root=sha256:... key=id
    ## rows [1]{@id,v}
    1|x
    """
    pairs = [("tool", tool)] if tool else []
    pairs += [("pack_root", pack_root(keyed_set)), ("key", keyed_set.key)]
    head = format_header("generic", pairs)
    rows = keyed_set.rows
    section = f"## {format_key(keyed_set.name)} [{len(rows)}]"
    section += _decl(keyed_set.key, keyed_set.fields)
    try:
        body = render_tabular(section, rows, keyed_set.fields)
    except GCFEncodeError as e:
        raise at_path(e, keyed_set.name) from None
    return "\n".join([head, *body]) + "\n"


def dumps_unchanged(keyed_set: KeyedSet) -> str:
    """The header-only answer when the consumer's root is current (§10a.4).

    >>> dumps_unchanged(KeyedSet("id", ["id"], [{"id": 1}])).split()[2]
    'unchanged=true'
    """
    pairs = [("unchanged", "true"), ("pack_root", pack_root(keyed_set))]
    pairs.append(("count", str(len(keyed_set))))
    return format_header("generic", pairs) + "\n"


def loads_keyed(text: str | bytes) -> KeyedSet:
    """Decode a delta-participating full payload into a :class:`KeyedSet`, verifying its
    ``pack_root`` (§10a.1).

    >>> s = KeyedSet("id", ["id", "v"], [{"id": 1, "v": "x"}], name="t")
    >>> loads_keyed(dumps_full(s)) == s
    True
    """
    return placed(_keyed_from, to_text(text))


def _keyed_from(text: str) -> KeyedSet:
    doc = decode_document(text, id_fields=True)
    head = doc.header
    if "key" not in head or "pack_root" not in head:
        raise GCFDecodeError(
            "invalid_keyed_set", "a keyed full payload needs key= and pack_root= headers", 1
        )
    body = doc.value
    if not isinstance(body, dict) or len(body) != 1:
        raise GCFDecodeError(
            "invalid_keyed_set", "a keyed full payload holds one tabular section", 2
        )
    ((name, rows),) = body.items()
    info = doc.tables.get(id(rows))
    if info is None or info.keyed or info.id_field != head["key"]:
        raise GCFDecodeError(
            "invalid_keyed_set",
            f"the section must be a table whose @ field is the key {head['key']!r}",
            2,
        )
    result = KeyedSet(head["key"], info.fields, rows, name)
    if pack_root(result) != head["pack_root"]:
        raise GCFDecodeError("root_mismatch", "the rows do not hash to the header's pack_root", 1)
    return result
