"""JSON patches between two values: records matched by identity, applied atomically.

:func:`diff` computes the operations that turn a held value into a new one; :func:`apply`
applies them to a copy (the held value is never modified) and, given the value it should
reach, verifies that it did. The operations (docs/extensions/relative-answers.md §4):

======== =========================================================================
``set``    the member or element at ``path`` now has ``value`` (``""``: the whole value)
``add``    a new member ``path`` (its last step names the key) with ``value``, placed last
``del``    the member or element at ``path`` is removed
``append`` ``value`` is appended to the array at ``path``
``insert`` ``value`` is inserted just before the element ``path`` selects
======== =========================================================================

Array elements are named by identity, never by position (a reader can find ``[name=X]``
in what it holds; it cannot see an index): objects by a unique scalar field (``id``,
``key``, ``uuid``, ``sha``, ``path``, ``name``, a caller's key, else the first field unique
in both versions), else by all their scalar fields together; scalars by value. An array
without identity gets ``append`` operations when the old array is a prefix of the new one,
else a ``set`` of the whole array.

>>> old = {"entities": [{"name": "alpha", "kind": "repo", "obs": ["first note"]},
...                     {"name": "beta", "kind": "tool", "obs": ["second note"]},
...                     {"name": "gamma", "kind": "tool", "obs": []}]}
>>> new = {"entities": [{"name": "alpha", "kind": "repo", "obs": ["first note", "reviewed"]},
...                     {"name": "gamma", "kind": "tool", "obs": []},
...                     {"name": "delta", "kind": "module", "obs": []}]}
>>> for op in diff(old, new):
...     print(op)
del entities[name=beta]
append entities[name=alpha].obs "reviewed"
append entities {"name":"delta","kind":"module","obs":[]}
>>> apply(diff(old, new), old, expect=new) == new
True
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import GCFError
from ..jsonio import escape_lone_surrogates, same_value
from .path import Element, Member, Path, Select, Step, format_path, parse_path

__all__ = [
    "IDENTITY_KEYS",
    "NO_VALUE",
    "OPS",
    "Op",
    "apply",
    "check_op",
    "diff",
    "parse_path",
    "same",
]

#: The operation names, in the order the extension document defines them.
OPS: Final = ("set", "add", "del", "append", "insert")

#: Identity fields tried first, in this order (after a caller's own key).
IDENTITY_KEYS: Final[tuple[str, ...]] = ("id", "key", "uuid", "sha", "path", "name")


class _NoValue:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_VALUE"


#: The value of a ``del`` operation, which has none.
NO_VALUE: Final = _NoValue()


@dataclass(frozen=True, slots=True)
class Op:
    """One patch operation: ``op`` (one of :data:`OPS`), its ``path`` and, except for
    ``del``, its ``value``.

    >>> print(Op("set", (Member("status"),), "done"))
    set status "done"
    """

    op: str
    path: Path
    value: Any = NO_VALUE

    def __str__(self) -> str:
        text = f"{self.op} {format_path(self.path)}"
        if self.value is not NO_VALUE:
            text += " " + _compact(self.value)
        return text


# ---------------------------------------------------------------------------------------
# Equality
# ---------------------------------------------------------------------------------------


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    return escape_lone_surrogates(text)  # a lone surrogate cannot travel as UTF-8


def same(a: Any, b: Any) -> bool:
    """Strict equality: same types (a bool is not a number, 1 is not 1.0), same key order.

    >>> same({"a": 1, "b": 2}, {"b": 2, "a": 1}), same([1], [1.0]), same([True], [True])
    (False, False, True)
    """
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    # Python's == is looser than strict equality (1 == 1.0, order-blind dicts), so unequal
    # means unequal, and only what it calls equal needs the walk.
    if a != b:
        return False
    return same_value(a, b, number_types=True)


def _ident(value: Any) -> tuple[str, Any]:
    """The key under which selectors match: JSON-model equality (1 matches 1.0, never
    True or "1")."""
    if value is None:
        return ("z", None)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    raise TypeError("not a scalar")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _json_equal(a: Any, b: Any) -> bool:
    try:
        return _ident(a) == _ident(b)
    except TypeError:
        return False


# ---------------------------------------------------------------------------------------
# Identity
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Identity:
    fields: tuple[str, ...]  # empty: scalar elements matched by value

    def selector(self, element: Any) -> Step:
        if not self.fields:
            return Element(element)
        return Select(tuple((f, element[f]) for f in self.fields))

    def key(self, element: Any) -> Any:
        if not self.fields:
            return _ident(element)
        return tuple(_ident(element[f]) for f in self.fields)


def _unique(keys: Iterable[Any]) -> bool:
    seen: set[Any] = set()
    for k in keys:
        if k in seen:
            return False
        seen.add(k)
    return True


def _field_union(rows: Iterable[dict[str, Any]]) -> list[str]:
    out: dict[str, None] = {}
    for row in rows:
        for k in row:
            out.setdefault(k, None)
    return list(out)


def _identity(a: list[Any], b: list[Any], key: str | None) -> _Identity | None:
    """How the elements of ``a`` and ``b`` are named (see the module docstring)."""
    both = a + b
    if all(type(x) is dict for x in both):
        union = _field_union(both)
        preferred = [key] if key else []
        order = [*preferred, *IDENTITY_KEYS, *union]
        tried: set[str] = set()
        for f in order:
            if f in tried or f not in union:
                continue
            tried.add(f)
            values = [x.get(f, NO_VALUE) for x in both]
            if all(type(v) in (str, int) for v in values) and (
                _unique(_ident(x[f]) for x in a) and _unique(_ident(x[f]) for x in b)
            ):
                return _Identity((f,))
        shared = tuple(f for f in union if all(f in x and _is_scalar(x[f]) for x in both))
        if len(shared) >= 2:
            ident = _Identity(shared)
            if _unique(ident.key(x) for x in a) and _unique(ident.key(x) for x in b):
                return ident
        return None
    if all(_is_scalar(x) for x in both):
        ident = _Identity(())
        if _unique(map(_ident, a)) and _unique(map(_ident, b)):
            return ident
    return None


def _stay(seq: Sequence[int]) -> set[int]:
    """The values of one longest increasing subsequence of ``seq`` (patience sorting)."""
    tails: list[int] = []  # indices into seq
    prev: list[int] = [-1] * len(seq)
    tail_values: list[int] = []
    for i, v in enumerate(seq):
        j = bisect.bisect_left(tail_values, v)
        if j > 0:
            prev[i] = tails[j - 1]
        if j == len(tails):
            tails.append(i)
            tail_values.append(v)
        else:
            tails[j] = i
            tail_values[j] = v
    out: set[int] = set()
    i = tails[-1] if tails else -1
    while i >= 0:
        out.add(seq[i])
        i = prev[i]
    return out


# ---------------------------------------------------------------------------------------
# Diff
# ---------------------------------------------------------------------------------------


def _cost(op: str, path: Path, value: Any) -> int:
    # A size estimate in characters, only to choose between alternatives deterministically.
    n = len(op) + len(format_path(path)) + 2
    if value is not NO_VALUE:
        n += len(_compact(value))
    return n


def _ops_cost(ops: Sequence[Op]) -> int:
    return sum(_cost(o.op, o.path, o.value) for o in ops)


def diff(a: Any, b: Any, *, key: str | None = None) -> list[Op]:
    """The operations that turn ``a`` into ``b`` (empty when they are strictly equal).

    ``key`` names an identity field to try first for arrays of objects. Objects are diffed
    member by member and arrays element by element, unless replacing the whole container
    is smaller; a change of key order replaces the object, a change of element order moves
    the fewest elements (``del`` + ``insert``).

    >>> old = {"a": 1, "tags": ["red wine", "green tea", "blue cheese"]}
    >>> [str(op) for op in diff(old, {"a": 1, "tags": ["green tea", "blue cheese", "cyan"],
    ...                               "c": None})]
    ['del tags[=red wine]', 'append tags "cyan"', 'add c null']
    """
    ops: list[Op] = []
    try:
        _diff(a, b, (), ops, key)
    except RecursionError:
        raise GCFError("limit_exceeded", "value nested too deeply to diff") from None
    return ops


def _diff(a: Any, b: Any, path: Path, ops: list[Op], key: str | None) -> None:
    if same(a, b):
        return
    ta, tb = type(a), type(b)
    if ta is dict and tb is dict:
        _diff_object(a, b, path, ops, key)
    elif ta is list and tb is list:
        _diff_array(a, b, path, ops, key)
    else:
        ops.append(Op("set", path, b))


def _diff_object(
    a: dict[str, Any], b: dict[str, Any], path: Path, ops: list[Op], key: str | None
) -> None:
    common = [k for k in a if k in b]
    added = [k for k in b if k not in a]
    if list(b) != common + added:
        # Members can only be appended: a new key order needs the object itself.
        ops.append(Op("set", path, b))
        return
    mine: list[Op] = [Op("del", (*path, Member(k))) for k in a if k not in b]
    for k in common:
        _diff(a[k], b[k], (*path, Member(k)), mine, key)
    mine.extend(Op("add", (*path, Member(k)), b[k]) for k in added)
    _choose(mine, b, path, ops)


def _choose(mine: list[Op], b: Any, path: Path, ops: list[Op]) -> None:
    if path and _ops_cost(mine) >= _cost("set", path, b):
        ops.append(Op("set", path, b))
    else:
        ops.extend(mine)


def _diff_array(a: list[Any], b: list[Any], path: Path, ops: list[Op], key: str | None) -> None:
    mine: list[Op] = []
    ident = _identity(a, b, key) if a and b else None
    if ident is None:
        n = len(a)
        if len(b) >= n and all(same(x, y) for x, y in zip(a, b[:n], strict=False)):
            mine = [Op("append", path, y) for y in b[n:]]
        else:
            ops.append(Op("set", path, b))
            return
    else:
        ka = [ident.key(x) for x in a]
        kb = [ident.key(y) for y in b]
        where = {k: i for i, k in enumerate(ka)}
        stay = _stay([where[k] for k in kb if k in where])
        mine = [Op("del", (*path, ident.selector(x))) for i, x in enumerate(a) if i not in stay]
        # The next staying element after each position of b: inserts go just before it.
        anchors: list[int | None] = [None] * len(b)
        nxt: int | None = None
        for j in range(len(b) - 1, -1, -1):
            anchors[j] = nxt
            i = where.get(kb[j])
            if i is not None and i in stay:
                nxt = j
        for j, y in enumerate(b):
            i = where.get(kb[j])
            if i is not None and i in stay:
                _diff(a[i], y, (*path, ident.selector(a[i])), mine, key)
                continue
            anchor = anchors[j]
            if anchor is None:
                mine.append(Op("append", path, y))
            else:
                mine.append(Op("insert", (*path, ident.selector(b[anchor])), y))
    _choose(mine, b, path, ops)


# ---------------------------------------------------------------------------------------
# Apply
# ---------------------------------------------------------------------------------------


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


class _Applier:
    """Applies operations copy-on-write: each container on a modified path is copied once,
    so the held value is never touched and unchanged parts are shared, not copied."""

    def __init__(self, base: Any) -> None:
        self.root = base
        self.mine: set[int] = set()
        self.keep: list[Any] = []  # keeps owned containers alive, so their ids stay unique

    def own(self, value: Any) -> Any:
        if id(value) in self.mine:
            return value
        copy: Any = dict(value) if type(value) is dict else list(value)
        self.mine.add(id(copy))
        self.keep.append(copy)
        return copy

    def locate(self, container: Any, step: Step, why: str) -> Any:
        if isinstance(step, Member):
            if type(container) is not dict:
                raise _Mismatch(f"{why}: .{step.key} needs an object here")
            if step.key not in container:
                raise _Mismatch(f"{why}: no member {step.key!r}")
            return step.key
        if type(container) is not list:
            raise _Mismatch(f"{why}: a selector needs an array here")
        found = [i for i, x in enumerate(container) if _matches(x, step)]
        if len(found) != 1:
            what = "no element matches" if not found else f"{len(found)} elements match"
            raise _Mismatch(f"{why}: {what} the selector")
        return found[0]

    def run(self, i: int, op: Op) -> None:
        why = f"operation {i + 1} ({op.op} {format_path(op.path)})"
        check_op(op, None)
        if not op.path:
            if op.op == "set":
                self.root = _copy(op.value)
                return
            if type(self.root) is not list:
                raise _Mismatch(f"{why}: append needs an array")
            self.root = self.own(self.root)
            self.root.append(_copy(op.value))
            return
        if type(self.root) not in (dict, list):
            raise _Mismatch(f"{why}: the value is a scalar")
        self.root = cur = self.own(self.root)
        for step in op.path[:-1]:
            at = self.locate(cur, step, why)
            child = cur[at]
            if type(child) not in (dict, list):
                raise _Mismatch(f"{why}: the path goes through a scalar")
            cur[at] = child = self.own(child)
            cur = child
        last = op.path[-1]
        if op.op == "add":
            assert isinstance(last, Member)
            if type(cur) is not dict:
                raise _Mismatch(f"{why}: add needs an object")
            if last.key in cur:
                raise _Mismatch(f"{why}: member {last.key!r} already exists")
            cur[last.key] = _copy(op.value)
            return
        at = self.locate(cur, last, why)
        if op.op == "set":
            cur[at] = _copy(op.value)
        elif op.op == "del":
            del cur[at]
        elif op.op == "append":
            target = cur[at]
            if type(target) is not list:
                raise _Mismatch(f"{why}: append needs an array")
            cur[at] = target = self.own(target)
            target.append(_copy(op.value))
        else:  # insert
            cur.insert(at, _copy(op.value))


class _Mismatch(Exception):
    pass


def _matches(element: Any, step: Step) -> bool:
    if isinstance(step, Element):
        return _is_scalar(element) and _json_equal(element, step.value)
    assert isinstance(step, Select)
    if type(element) is not dict:
        return False
    return all(f in element and _json_equal(element[f], v) for f, v in step.conds)


def check_op(op: Op, line: int | None = None) -> None:
    """The shape rules every operation must meet, whatever value it is applied to."""
    if op.op not in OPS:
        raise GCFError("invalid_patch", f"unknown operation {op.op!r}", line)
    has_value = op.value is not NO_VALUE
    if has_value == (op.op == "del"):
        want = "has no value" if op.op == "del" else "needs a value"
        raise GCFError("invalid_patch", f"{op.op} {want}", line)
    last = op.path[-1] if op.path else None
    if last is None and op.op not in ("set", "append"):
        raise GCFError("invalid_patch", f"{op.op} needs a non-empty path", line)
    if op.op == "add" and not isinstance(last, Member):
        raise GCFError("invalid_patch", "add names the new member: its path ends in .key", line)
    if op.op == "insert" and isinstance(last, Member):
        raise GCFError(
            "invalid_patch", "insert names the element to insert before: [f=v] or [=v]", line
        )


def apply(ops: Sequence[Op], base: Any, *, expect: Any = NO_VALUE) -> Any:
    """Apply ``ops`` in order to ``base``; return the new value, or raise and change nothing.

    ``base`` is never modified; the result shares the parts no operation touched. Every
    operation that does not fit ``base`` (a missing member, a selector matching no element
    or several) is ``base_mismatch``. With ``expect``, the result must also be strictly
    equal to it (:func:`same`), else ``base_mismatch``: a producer verifies a patch so.

    >>> base = {"rows": [{"id": 1, "v": "a"}]}
    >>> apply([Op("set", parse_path("rows[id=1].v"), "b")], base)
    {'rows': [{'id': 1, 'v': 'b'}]}
    >>> base
    {'rows': [{'id': 1, 'v': 'a'}]}
    >>> apply([Op("del", parse_path("rows[id=2]"))], base)
    Traceback (most recent call last):
    gcfkit.errors.GCFError: error[base_mismatch]: operation 1 (del rows[id=2]): no element ...
    """
    applier = _Applier(base)
    try:
        for i, op in enumerate(ops):
            applier.run(i, op)
    except _Mismatch as e:
        raise GCFError("base_mismatch", str(e)) from None
    except RecursionError:
        raise GCFError("limit_exceeded", "value nested too deeply to patch") from None
    if expect is not NO_VALUE and not same(applier.root, expect):
        raise GCFError("base_mismatch", "the patched value differs from the expected one")
    return applier.root
