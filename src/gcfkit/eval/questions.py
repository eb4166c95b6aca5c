"""Questions with deterministic ground truth, generated from a dataset by a seed.

A question is a :class:`Query` (what to compute, in structured form) rendered into English
by one template per operation. The ground truth is :func:`evaluate` of the query on the
dataset's value; the same function answers the query on any decoded payload, which is what
the scripted reference server does (:mod:`gcfkit.eval.oracle`) after reading the question
back with :func:`parse_question`. Names and values in a question are JSON literals
(``"status"``, ``1003``), so the text is exact and reads back exactly.

Kinds (``gcfkit eval --kinds``): ``count``, ``count_where``, ``lookup``, ``absent_null``,
``aggregate``, ``nested``, ``reference`` (a repeated value, the kind a definition would
carry), ``delta`` (the state after a second call of the same tool) and ``generate`` (write
the given data in the format; scored by decoding it strictly).

>>> from gcfkit.eval.datasets import load_dataset
>>> ds = load_dataset("synthetic:records:8", seed=3)
>>> qs = generate_questions(ds, kinds=["count"], per_kind=1, seed=3)
>>> qs[0].text
'How many records are in the list "tickets"?'
>>> qs[0].expected
8
>>> parse_question(qs[0].text) == qs[0].query
True
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Final, Literal

from ..errors import ConfigError
from ..jsonio import dumps_compact, same_value
from .datasets import Collection, Dataset, at_path, find_collections

__all__ = [
    "KINDS",
    "AnswerType",
    "Query",
    "Question",
    "Update",
    "apply_update",
    "evaluate",
    "generate_questions",
    "parse_question",
    "register_kind",
]

Op = Literal["count", "count_where", "lookup", "presence", "sum", "max", "generate"]
AnswerType = Literal["int", "number", "string", "bool", "null", "presence", "payload"]

ABSENT: Final = "absent"
NULL: Final = "null"
VALUE: Final = "value"


@dataclass(frozen=True)
class Query:
    """What a question asks, in structured form.

    ``path`` leads from the root to a collection (``map`` when its records are an object's
    members, identified by key); ``id_field``/``record`` name one record; ``field`` is a
    key path inside a record; ``value`` and ``cmp`` filter ``count_where``; ``after``
    says the question is about the state after the second call (delta questions).
    ``format`` is the target format's label for ``generate``.
    """

    op: Op
    path: tuple[str, ...] = ()
    map: bool = False
    id_field: str | None = None
    record: Any = None
    field: tuple[str, ...] = ()
    value: Any = None
    cmp: Literal["==", ">"] = "=="
    after: bool = False
    format: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "path": list(self.path),
            "map": self.map,
            "id_field": self.id_field,
            "record": self.record,
            "field": list(self.field),
            "value": self.value,
            "cmp": self.cmp,
            "after": self.after,
            "format": self.format,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Query:
        return cls(
            op=d["op"],
            path=tuple(d["path"]),
            map=d["map"],
            id_field=d["id_field"],
            record=d["record"],
            field=tuple(d["field"]),
            value=d["value"],
            cmp=d["cmp"],
            after=d["after"],
            format=d.get("format", ""),
        )


@dataclass(frozen=True)
class Update:
    """How the second call's result differs from the first (delta questions): fields set
    on records by id, records removed, records appended. Empty: an identical repeat."""

    set: tuple[tuple[Any, str, Any], ...] = ()
    remove: tuple[Any, ...] = ()
    add: tuple[dict[str, Any], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.set or self.remove or self.add)

    def to_json(self) -> dict[str, Any]:
        return {
            "set": [list(s) for s in self.set],
            "remove": list(self.remove),
            "add": list(self.add),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Update:
        return cls(tuple((a, b, c) for a, b, c in d["set"]), tuple(d["remove"]), tuple(d["add"]))


@dataclass(frozen=True)
class Question:
    """One question about one dataset; the same question is asked in every format.

    ``data`` is the value shown (the dataset's, or for delta questions the collection);
    ``update`` the second call's change; ``expected`` the ground truth.
    """

    id: str
    kind: str
    dataset: str
    query: Query
    text: str
    expected: Any
    answer_type: AnswerType
    update: Update | None = None
    data_path: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "dataset": self.dataset,
            "query": self.query.to_json(),
            "text": self.text,
            "expected": self.expected,
            "answer_type": self.answer_type,
            "update": self.update.to_json() if self.update is not None else None,
            "data_path": list(self.data_path) if self.data_path is not None else None,
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Question:
        return cls(
            id=d["id"],
            kind=d["kind"],
            dataset=d["dataset"],
            query=Query.from_json(d["query"]),
            text=d["text"],
            expected=d["expected"],
            answer_type=d["answer_type"],
            update=Update.from_json(d["update"]) if d.get("update") else None,
            data_path=tuple(d["data_path"]) if d.get("data_path") is not None else None,
            meta=d.get("meta") or {},
        )


# ---------------------------------------------------------------------------------------
# Ground truth
# ---------------------------------------------------------------------------------------


def _records(value: Any, q: Query) -> list[dict[str, Any]]:
    coll = at_path(value, q.path)
    if q.map:
        if not isinstance(coll, dict):
            raise KeyError("not an object of records")
        return list(coll.values())
    if not isinstance(coll, list):
        raise KeyError("not a list of records")
    return coll


def _record(value: Any, q: Query) -> dict[str, Any]:
    coll = at_path(value, q.path)
    if q.map:
        rec = coll[q.record]
        if not isinstance(rec, dict):
            raise KeyError(q.record)
        return rec
    for row in coll:
        if (
            isinstance(row, dict)
            and q.id_field in row
            and same_value(row[q.id_field], q.record, key_order=False)
        ):
            return row
    raise KeyError(q.record)


_MISSING: Final = object()


def _get(row: Any, path: Sequence[str]) -> Any:
    for step in path:
        if not isinstance(row, dict) or step not in row:
            return _MISSING
        row = row[step]
    return row


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _exact_sum(values: Iterable[int | float]) -> int | float:
    # Decimal over each value's shortest repr: 0.1 + 0.2 is 0.3, as a reader adding the
    # printed numbers would say.
    total = sum((Decimal(repr(v)) for v in values), Decimal(0))
    return int(total) if total == total.to_integral_value() else float(total)


def evaluate(query: Query, value: Any) -> Any:
    """The answer to ``query`` on ``value`` (KeyError when the value does not hold it).

    >>> v = {"t": [{"id": 1, "n": 2.5}, {"id": 2, "n": 0.5, "x": None}]}
    >>> evaluate(Query("sum", ("t",), field=("n",)), v)
    3
    >>> evaluate(Query("presence", ("t",), id_field="id", record=1, field=("x",)), v)
    'absent'
    """
    op = query.op
    if op == "generate":
        return value
    if op == "count":
        return len(_records(value, query))
    if op == "count_where":
        n = 0
        for row in _records(value, query):
            got = _get(row, query.field)
            if got is _MISSING:
                continue
            if query.cmp == "==":
                n += same_value(got, query.value, key_order=False)
            elif _is_number(got) and _is_number(query.value):
                n += got > query.value
        return n
    if op in ("sum", "max"):
        nums = [_get(r, query.field) for r in _records(value, query)]
        if not nums or not all(_is_number(x) for x in nums):
            raise KeyError("not a numeric column")
        return _exact_sum(nums) if op == "sum" else max(nums)
    got = _get(_record(value, query), query.field)
    if op == "presence":
        return ABSENT if got is _MISSING else NULL if got is None else VALUE
    if got is _MISSING:
        raise KeyError(query.field)
    return got


# ---------------------------------------------------------------------------------------
# Text: one template per operation, read back by the same table
# ---------------------------------------------------------------------------------------

_JSTR: Final = r'"(?:[^"\\]|\\.)*"'
_JLIT: Final = _JSTR + r"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null"
_PIECES: Final = {
    "coll": rf"the top-level (?P<ctop>list|object)|the (?P<ckind>list|object) "
    rf"(?P<cpath>{_JSTR}(?: > {_JSTR})*)",
    "record": rf"the record whose (?P<idf>{_JSTR}) is (?P<rid>{_JLIT})|"
    rf"the member (?P<mkey>{_JSTR})",
    "field": rf"(?P<field>{_JSTR}(?: > {_JSTR})*)",
    "value": rf"(?P<value>{_JLIT})",
    "format": r"(?P<format>[A-Za-z][A-Za-z0-9 ().-]*?)",
}
_TEMPLATES: Final[dict[str, str]] = {
    "count": "How many records are in {coll}?",
    "count_where==": "How many records in {coll} have {field} equal to {value}?",
    "count_where>": "How many records in {coll} have {field} greater than {value}?",
    "lookup": "In {coll}, what is {field} of {record}?",
    "presence": "In {coll}, is {field} absent, null, or set to a value in {record}?",
    "sum": "What is the sum of {field} over all records in {coll}?",
    "max": "What is the largest {field} among the records in {coll}?",
    "generate": "Write the data in <data> as {format}.",
}
_AFTER: Final = "After the second call, "
_HINTS: Final[dict[str, str]] = {
    "int": "Answer with the number only.",
    "number": "Answer with the number only.",
    "string": "Answer with the value only, without quotes.",
    "bool": "Answer with true or false only.",
    "null": "Answer with the value only (null if it is null).",
    "presence": "Answer with one word: absent, null or value.",
    "payload": "Reply with the payload only.",
}


def _compile(template: str, after: bool) -> re.Pattern[str]:
    # After the prefix the question goes on in lower case ("After the second call, how ...").
    if after:
        template = template[0].lower() + template[1:]
    out = [re.escape(_AFTER)] if after else []
    for part in re.split(r"(\{[a-z]+\})", template):
        if part.startswith("{") and part.endswith("}"):
            out.append(f"(?:{_PIECES[part[1:-1]]})")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out) + r"\Z")


_PATTERNS: Final = [
    (name, after, _compile(t, after)) for name, t in _TEMPLATES.items() for after in (False, True)
]


def _jpath(path: Sequence[str]) -> str:
    return " > ".join(json.dumps(p, ensure_ascii=False) for p in path)


def _unpath(text: str) -> tuple[str, ...]:
    return tuple(json.loads(m.group()) for m in re.finditer(_JSTR, text))


def render_question(q: Query) -> str:
    """The English text of a query (its answer-format hint is :func:`answer_hint`)."""
    if q.path:
        coll = f"the {'object' if q.map else 'list'} {_jpath(q.path)}"
    else:
        coll = f"the top-level {'object' if q.map else 'list'}"
    if q.map:
        record = f"the member {json.dumps(q.record, ensure_ascii=False)}"
    else:
        record = (
            f"the record whose {json.dumps(q.id_field, ensure_ascii=False)} is "
            f"{json.dumps(q.record, ensure_ascii=False)}"
        )
    name = q.op + q.cmp if q.op == "count_where" else q.op
    text = _TEMPLATES[name].format(
        coll=coll,
        record=record,
        field=_jpath(q.field),
        value=json.dumps(q.value, ensure_ascii=False),
        format=q.format,
    )
    return f"{_AFTER}{text[0].lower()}{text[1:]}" if q.after else text


def answer_hint(answer_type: str) -> str:
    """The one-line instruction on how to answer a question of ``answer_type``."""
    return _HINTS[answer_type]


def parse_question(text: str) -> Query:
    """The query a question's text was rendered from (ValueError if it is none of ours).

    >>> q = Query("lookup", ("a", "b"), id_field="id", record=7, field=("x", "y"))
    >>> parse_question(render_question(q)) == q
    True
    """
    text = text.strip()
    for name, after, pattern in _PATTERNS:
        m = pattern.match(text)
        if m is None:
            continue
        g = m.groupdict()
        op = name.rstrip("=>")
        is_map = (g.get("ctop") or g.get("ckind")) == "object"
        path = _unpath(g["cpath"]) if g.get("cpath") else ()
        id_field = record = None
        if g.get("mkey") is not None:
            record = json.loads(g["mkey"])
        elif g.get("idf") is not None:
            id_field, record = json.loads(g["idf"]), json.loads(g["rid"])
        return Query(
            op=op,  # type: ignore[arg-type]
            path=path,
            map=is_map,
            id_field=id_field,
            record=record,
            field=_unpath(g["field"]) if g.get("field") else (),
            value=json.loads(g["value"]) if g.get("value") else None,
            cmp=">" if name.endswith(">") else "==",
            after=after,
            format=g.get("format") or "",
        )
    raise ValueError(f"not a question of gcfkit eval: {text[:80]!r}")


# ---------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------

Generator = Callable[[Dataset, random.Random, int], list["Draft"]]


@dataclass(frozen=True)
class Draft:
    """A query a generator chose, before it is numbered and answered."""

    query: Query
    update: Update | None = None
    data_path: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


KINDS: dict[str, Generator] = {}


def register_kind(name: str) -> Callable[[Generator], Generator]:
    """Register a question generator under ``name`` (a new kind is a function and a line).

    A generator takes the dataset, its own seeded ``random.Random`` and the number of
    questions wanted, and returns up to that many :class:`Draft` queries.
    """

    def deco(fn: Generator) -> Generator:
        KINDS[name] = fn
        return fn

    return deco


def _base(c: Collection, op: Op) -> Query:
    # Only record questions name the identity column (their text says it).
    names_record = op in ("lookup", "presence") and c.kind == "list"
    return Query(op, c.path, c.kind == "map", c.id_field if names_record else None)


def _identified(ds: Dataset) -> list[Collection]:
    return [c for c in find_collections(ds.value) if c.ids is not None]


def _scalar_fields(records: Sequence[dict[str, Any]], c: Collection) -> list[str]:
    names: dict[str, None] = {}
    for r in records:
        for k, v in r.items():
            if k != c.id_field and not isinstance(v, (dict, list)):
                names.setdefault(k, None)
    return list(names)


def _pick_records(c: Collection, rng: random.Random, n: int) -> list[int]:
    idx = list(range(len(c.records)))
    rng.shuffle(idx)
    return idx[:n]


def _lookup_drafts(
    ds: Dataset, rng: random.Random, n: int, want: Callable[[tuple[str, ...], Any], bool]
) -> list[Draft]:
    """Lookups of (record, field path) pairs whose value passes ``want``."""
    cands: list[tuple[Collection, int, tuple[str, ...]]] = []
    for c in _identified(ds):
        for i, rec in enumerate(c.records):
            for path, v in _leaf_paths(rec):
                if path[0] != c.id_field and want(path, v):
                    cands.append((c, i, path))
    rng.shuffle(cands)
    out: list[Draft] = []
    seen: set[tuple[Any, ...]] = set()
    for c, i, path in cands:
        if len(out) >= n:
            break
        if (c.path, i, path) in seen:
            continue
        seen.add((c.path, i, path))
        assert c.ids is not None
        q = replace(_base(c, "lookup"), record=c.ids[i], field=path)
        out.append(Draft(q))
    return out


def _leaf_paths(rec: dict[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), rec)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            stack.extend(((*path, k), x) for k, x in reversed(v.items()))
        elif not isinstance(v, list):
            out.append((path, v))
    return out


def _readable(v: Any) -> bool:
    """A lookup target a reader can state unambiguously: not null, not an empty string, no
    line breaks, not absurdly long."""
    if v is None or isinstance(v, (dict, list)):
        return False
    if isinstance(v, str):
        return 0 < len(v) <= 200 and "\n" not in v and v.strip() == v
    return True


@register_kind("count")
def _count(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    colls = find_collections(ds.value)
    rng.shuffle(colls)
    return [Draft(_base(c, "count")) for c in colls[:n]]


@register_kind("count_where")
def _count_where(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    cands: list[Query] = []
    for c in find_collections(ds.value):
        for name in _scalar_fields(c.records, c):
            values = [r[name] for r in c.records if name in r]
            distinct = {json.dumps(v) for v in values}
            categorical = not any(isinstance(v, float) for v in values)
            if categorical and 1 < len(distinct) <= min(12, max(2, len(c.records) // 3)):
                # Categorical: filter on one of its values.
                v = rng.choice(sorted(distinct))
                cands.append(replace(_base(c, "count_where"), field=(name,), value=json.loads(v)))
            elif all(_is_number(v) for v in values) and len(distinct) > 3:
                ordered = sorted(values)
                cut = ordered[len(ordered) // 2]
                q = replace(_base(c, "count_where"), field=(name,), value=cut, cmp=">")
                cands.append(q)
    rng.shuffle(cands)
    return [Draft(q) for q in cands[:n]]


@register_kind("lookup")
def _lookup(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    return _lookup_drafts(ds, rng, n, lambda path, v: len(path) == 1 and _readable(v))


@register_kind("nested")
def _nested(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    return _lookup_drafts(ds, rng, n, lambda path, v: len(path) >= 2 and _readable(v))


def _repeated_strings(ds: Dataset) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c in find_collections(ds.value):
        for rec in c.records:
            for _, v in _leaf_paths(rec):
                if isinstance(v, str):
                    counts[v] = counts.get(v, 0) + 1
    return counts


@register_kind("reference")
def _reference(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    # The values a value definition would carry: long strings that recur. In a format
    # without definitions this is an ordinary lookup, which is what makes the pair fair.
    counts = _repeated_strings(ds)

    def want(path: tuple[str, ...], v: Any) -> bool:
        return isinstance(v, str) and len(v) >= 12 and counts.get(v, 0) >= 3 and _readable(v)

    return [
        replace(d, meta={"repeats": counts[_lookup_value(ds, d.query)]})
        for d in _lookup_drafts(ds, rng, n, want)
    ]


def _lookup_value(ds: Dataset, q: Query) -> Any:
    return evaluate(q, ds.value)


@register_kind("absent_null")
def _absent_null(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    by_state: dict[str, list[Query]] = {ABSENT: [], NULL: [], VALUE: []}
    for c in _identified(ds):
        assert c.ids is not None
        names: dict[str, None] = {}
        for r in c.records:
            names.update(dict.fromkeys(r))
        for name in names:
            states = [
                ABSENT if name not in r else NULL if r[name] is None else VALUE for r in c.records
            ]
            if len(set(states)) < 2:
                continue  # a field that is always set (or never) asks nothing interesting
            for i, st in enumerate(states):
                q = replace(_base(c, "presence"), record=c.ids[i], field=(name,))
                by_state[st].append(q)
    for qs in by_state.values():
        rng.shuffle(qs)
    out: list[Draft] = []
    while len(out) < n and any(by_state.values()):
        for st in (ABSENT, NULL, VALUE):
            if by_state[st] and len(out) < n:
                out.append(Draft(by_state[st].pop()))
    return out


@register_kind("aggregate")
def _aggregate(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    cands = []
    for c in find_collections(ds.value):
        for name in _scalar_fields(c.records, c):
            values = [r.get(name) for r in c.records]
            if all(_is_number(v) for v in values) and len({repr(v) for v in values}) > 1:
                cands.append(replace(_base(c, "sum"), field=(name,)))
                cands.append(replace(_base(c, "max"), field=(name,)))
    rng.shuffle(cands)
    return [Draft(q) for q in cands[:n]]


def _flat(rec: dict[str, Any]) -> bool:
    return all(not isinstance(v, (dict, list)) for v in rec.values())


@register_kind("delta")
def _delta(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    # The shown result is one record list (what a listing tool returns; the shape deltas
    # are defined for), called twice with the same arguments.
    colls = [c for c in _identified(ds) if c.kind == "list" and len(c.records) >= 4]
    colls.sort(key=lambda c: (not all(_flat(r) for r in c.records), len(c.path)))
    if not colls:
        return []
    c = colls[0]
    assert c.ids is not None and c.id_field is not None
    ids = list(c.ids)
    fields = _scalar_fields(c.records, c)

    def readable(i: int) -> list[str]:
        rec = c.records[i]
        return [f for f in fields if f in rec and _readable(rec[f])]

    def lookup(i: int, name: str) -> Query:
        return Query("lookup", (), False, c.id_field, ids[i], (name,), after=True)

    usable = [i for i in range(len(ids)) if readable(i)]
    out: list[Draft] = []
    for k in range(n):
        shape = ("unchanged", "changed", "kept", "count")[k % 4]
        if len(usable) < 2:
            shape = "count"
        if shape == "unchanged":
            i = rng.choice(usable)
            out.append(
                Draft(lookup(i, rng.choice(readable(i))), Update(), c.path, {"shape": shape})
            )
            continue
        order = list(usable)
        rng.shuffle(order)
        changed, other = order[0], order[1] if len(order) > 1 else order[0]
        if shape == "count" and not usable:
            out.append(Draft(Query("count", (), after=True), Update(), c.path, {"shape": shape}))
            continue
        name = rng.choice(readable(changed))
        new_value = _mutate(c.records[changed][name], rng, k)
        upd = Update(
            set=((ids[changed], name, new_value),),
            remove=(ids[other],) if shape == "count" and other != changed else (),
            add=(_new_record(c, rng),) if shape == "count" else (),
        )
        if shape == "changed":
            q = lookup(changed, name)
        elif shape == "kept":
            q = lookup(other, rng.choice(readable(other)))
        else:
            q = Query("count", (), after=True)
        out.append(Draft(q, upd, c.path, {"shape": shape}))
    return out


def _mutate(v: Any, rng: random.Random, k: int) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + rng.randint(1, 9) * (1 if k % 2 else -1)
    if isinstance(v, float):
        return round(v + rng.uniform(1, 10), 2)
    if isinstance(v, str):
        return f"{v} (updated {k + 1})" if v else "updated"
    return f"updated {k + 1}"


def _new_record(c: Collection, rng: random.Random) -> dict[str, Any]:
    assert c.ids is not None and c.id_field is not None
    rec = copy.deepcopy(rng.choice(c.records))
    old = rec[c.id_field]
    if isinstance(old, int):
        rec[c.id_field] = max(i for i in c.ids if isinstance(i, int)) + 1
    else:
        rec[c.id_field] = f"{old}-new"
    return rec


def apply_update(rows: list[dict[str, Any]], id_field: str, update: Update) -> list[Any]:
    """The second call's records: ``rows`` with ``update`` applied (a new list).

    >>> apply_update([{"id": 1, "v": 0}], "id", Update(set=((1, "v", 5),)))
    [{'id': 1, 'v': 5}]
    """
    removed = {json.dumps(r) for r in update.remove}
    out = []
    for row in rows:
        if json.dumps(row.get(id_field)) in removed:
            continue
        new = dict(row)
        for rid, name, value in update.set:
            if same_value(row.get(id_field), rid, key_order=False):
                new[name] = value
        out.append(new)
    out.extend(copy.deepcopy(list(update.add)))
    return out


@register_kind("generate")
def _generate(ds: Dataset, rng: random.Random, n: int) -> list[Draft]:
    colls = find_collections(ds.value, min_records=3)
    out = []
    for k in range(n):
        if not colls:
            break
        c = colls[k % len(colls)]
        idx = sorted(_pick_records(c, rng, rng.randint(3, 5)))
        out.append(Draft(Query("generate"), data_path=c.path, meta={"records": idx}))
    return out


def generation_data(ds: Dataset, q: Question) -> Any:
    """The small value a ``generate`` question asks the model to write."""
    assert q.data_path is not None
    coll = at_path(ds.value, q.data_path)
    idx = q.meta["records"]
    name = q.data_path[-1] if q.data_path else "records"
    if isinstance(coll, dict):
        keys = list(coll)
        return {name: {keys[i]: coll[keys[i]] for i in idx}}
    return {name: [coll[i] for i in idx]}


# ---------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------


def _answer_type(op: str, expected: Any) -> AnswerType:
    if op in ("count", "count_where"):
        return "int"
    if op in ("sum", "max"):
        return "number"
    if op == "presence":
        return "presence"
    if op == "generate":
        return "payload"
    if isinstance(expected, bool):
        return "bool"
    if expected is None:
        return "null"
    if isinstance(expected, (int, float)):
        return "number"
    return "string"


def shown_value(ds: Dataset, q: Question) -> tuple[Any, Any | None]:
    """(first result, second result or None): what the model is shown for ``q``."""
    if q.update is None or q.data_path is None:
        if q.query.op == "generate":
            return generation_data(ds, q), None
        return ds.value, None
    rows = at_path(ds.value, q.data_path)
    coll = next(c for c in find_collections(ds.value) if c.path == q.data_path)
    if coll.id_field is None:
        raise KeyError(f"{q.data_path} has no identity column")
    return rows, apply_update(rows, coll.id_field, q.update)


def generate_questions(
    ds: Dataset, *, kinds: Sequence[str] | None = None, per_kind: int = 3, seed: int = 0
) -> list[Question]:
    """Up to ``per_kind`` questions of each kind about ``ds``, the same for the same seed.

    A kind the dataset cannot ask (no numeric column for ``aggregate``, no repeated
    value for ``reference``) yields fewer, or none.
    """
    out: list[Question] = []
    for kind in kinds if kinds is not None else list(KINDS):
        gen = KINDS.get(kind)
        if gen is None:
            raise ConfigError(
                "invalid_option", f"unknown question kind {kind!r}; one of {', '.join(KINDS)}"
            )
        # One stream per (seed, dataset, kind): adding a kind never changes another's draw.
        rng = random.Random(f"{seed}:{ds.name}:{kind}")
        for i, d in enumerate(gen(ds, rng, per_kind)):
            q = Question(
                id=f"{ds.name}#{kind}#{i}",
                kind=kind,
                dataset=ds.name,
                query=d.query,
                text="",
                expected=None,
                answer_type="int",
                update=d.update,
                data_path=d.data_path,
                meta=d.meta,
            )
            first, second = shown_value(ds, q)
            truth_on = second if d.query.after and second is not None else first
            expected = evaluate(d.query, truth_on)
            q = replace(
                q,
                # A generate question names its target format, filled in per format.
                text=_TEMPLATES["generate"]
                if d.query.op == "generate"
                else render_question(d.query),
                expected=expected,
                answer_type=_answer_type(d.query.op, expected),
            )
            out.append(q)
    return out


def describe(q: Question) -> str:
    """A one-line summary of a question for reports (kind, text, expected answer)."""
    exp = q.expected if q.answer_type != "payload" else "(the data, decoded)"
    return f"[{q.kind}] {q.text} -> {dumps_compact(exp)[:80]}"
