"""Strict JSON in, JSON models out: the JSON side of every gcfkit command.

``read_json_bytes`` parses JSON the way the GCF data model needs it (§1.2): duplicate keys
rejected, NaN and Infinity rejected, numbers that overflow a double rejected, key order kept.
``to_json_model`` turns the deltas :func:`gcfkit.decode` returns into plain JSON values.
:func:`dumps_compact` is the one compact JSON text and :func:`same_value` the one type-strict
equality of JSON values that the proxy, the server helpers and the measurements use.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Final

from . import speedups
from .errors import GCFDecodeError, GCFError

__all__ = [
    "compact_of",
    "decodes_to",
    "dumps_compact",
    "loads_compact",
    "loads_json",
    "read_json_bytes",
    "same_value",
    "to_json_model",
]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise GCFError("duplicate_key", f"JSON object has the key {k!r} twice")
        out[k] = v
    return out


def _float(text: str) -> float:
    f = float(text)
    if math.isinf(f):
        raise GCFError("out_of_range", f"number {text[:40]} overflows a double")
    return f


def _constant(name: str) -> Any:
    raise GCFError("invalid_json", f"{name} is not JSON; use null or a string")


# The same hooks in C (no Python frame per object or number), when the accelerator is there.
_HOOKS: Final = speedups.json_hooks() or (_pairs, _float)

# Made once: json.loads with hooks builds a decoder (and its scanner) on every call.
_STRICT: Final = json.JSONDecoder(
    object_pairs_hook=_HOOKS[0], parse_float=_HOOKS[1], parse_constant=_constant
)
_STRICT_PURE: Final = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_float=_float, parse_constant=_constant
)


def loads_json(text: str) -> Any:
    """Parse JSON text strictly; every rejection is a :class:`GCFError`, a
    :class:`GCFDecodeError` with json's position where the text is no JSON (a duplicate key,
    an overflow or a NaN has no position: json's hooks are not told where they are).

    >>> loads_json('{"a": 1, "b": [true, null]}')
    {'a': 1, 'b': [True, None]}
    """
    decoder = _STRICT if speedups.accelerator is not None else _STRICT_PURE
    try:
        if type(text) is str and not text.startswith("\ufeff"):
            return decoder.decode(text)
        # (bytes, a BOM, not text at all: as json.loads takes or refuses them)
        return json.loads(
            text,
            object_pairs_hook=decoder.object_pairs_hook,
            parse_float=decoder.parse_float,
            parse_constant=_constant,
        )
    except GCFError:
        raise
    except speedups.Refused as e:  # the accelerator's hooks: the same refusals as _pairs, _float
        raise GCFError(*e.args) from None
    except json.JSONDecodeError as e:
        raise GCFDecodeError(
            "invalid_json",
            f"invalid JSON: {e.msg} (column {e.colno})",
            doc=text,
            lineno=e.lineno,
            colno=e.colno,
        ) from None
    except RecursionError:
        raise GCFError("limit_exceeded", "JSON nested too deeply") from None
    except ValueError as e:  # int() digit-limit on absurdly long integer literals
        raise GCFError("out_of_range", f"invalid JSON number: {e}") from None


def read_json_bytes(data: bytes) -> Any:
    """Parse UTF-8 JSON bytes (a UTF-8 BOM is tolerated) strictly."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        start = data.rfind(b"\n", 0, e.start) + 1
        raise GCFDecodeError(
            "invalid_utf8",
            f"input is not UTF-8 (byte {e.start})",
            doc=data.decode("utf-8", "replace"),
            lineno=line,
            colno=len(data[start : e.start].decode("utf-8", "replace")) + 1,
        ) from None
    return loads_json(text)


_RENAMES = {"budget": "tokenBudget", "tokens": "tokensUsed"}


def _camel(name: str) -> str:
    if name in _RENAMES:
        return _RENAMES[name]
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def to_json_model(obj: Any) -> Any:
    """A decoded payload as plain JSON: generic values unchanged; the dataclasses of graph
    deltas and generic deltas as a camelCase model, field by field. (A whole
    :class:`gcfkit.graph.Graph` has its own model in the fixtures' field order,
    :func:`gcfkit.graph.graph_to_model`; this leaf module does not know the graph package.)

    >>> to_json_model({"a": [1, 2]})
    {'a': [1, 2]}
    """
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, dict):
        return {k: to_json_model(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json_model(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            _camel(f.name): to_json_model(getattr(obj, f.name)) for f in dataclasses.fields(obj)
        }
    raise GCFError("unsupported_type", f"cannot render {type(obj).__name__} as JSON")


def dumps_compact(value: Any) -> str:
    """The one compact JSON text of a JSON-model value: no spaces, UTF-8 characters kept, NaN
    and Infinity refused (``ValueError``). What the proxy compares GCF against, what the
    server helpers send to JSON clients, what the ledger writes.

    A lone surrogate (a string that came from a ``\\ud800`` escape) stays an escape
    (:func:`escape_lone_surrogates`): as a character it cannot travel as UTF-8.

    >>> dumps_compact({"a": [1, "é"]}), dumps_compact(["\\ud800"])
    ('{"a":[1,"é"]}', '["\\\\ud800"]')
    """
    return escape_lone_surrogates(_COMPACT.encode(value))


# Made once: json.dumps with options builds an encoder on every call.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def compact_of(text: str, value: Any) -> str:
    """:func:`dumps_compact` of ``value``, the value :func:`loads_json` read from ``text``,
    written from ``text`` in one pass in C (whitespace dropped, strings and numbers
    re-spelled as the dump spells them) when the accelerator is there: no walk of the value,
    several times faster than the dump. Else, or for a text it leaves to the dump (NaN, an
    integer of thousands of digits), the dump itself. ``value`` must be what ``text`` parses
    to; the text is not checked again.

    >>> text = '{"n": -0, "f": 1E2, "s": "\\u00e9\\/"}'
    >>> compact_of(text, loads_json(text))
    '{"n":0,"f":100.0,"s":"é/"}'
    """
    fast = speedups.minify_json(text)
    return fast if fast is not None else dumps_compact(value)


def loads_compact(text: str) -> tuple[Any, str]:
    """:func:`loads_json` of ``text`` and its :func:`dumps_compact`, the compact text written
    from ``text`` (:func:`compact_of`) rather than dumped from the value.

    >>> loads_compact('[1, 2.50, "a"]')
    ([1, 2.5, 'a'], '[1,2.5,"a"]')
    """
    value = loads_json(text)
    return value, compact_of(text, value)


def escape_lone_surrogates(text: str) -> str:
    """``text`` (JSON written with ``ensure_ascii=False``) with every lone surrogate written
    back as its ``\\uXXXX`` escape: same JSON value, and valid UTF-8. In such JSON a
    surrogate can only stand inside a string, where the escape means the same code point.

    >>> escape_lone_surrogates('["\\udc80é"]') == '["\\\\udc80é"]'
    True
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


_NUMBER: Final = (int, float)
_ARRAY: Final = (list, tuple)


def same_value(a: Any, b: Any, *, key_order: bool = True, number_types: bool = False) -> bool:
    """Equality in the JSON data model (spec §1.1), which ``==`` gets wrong.

    A boolean is never a number, ``"1"`` is never ``1`` and ``None`` only equals ``None``.
    Numbers compare by value (JSON has one number type: ``1 == 1.0``, ``-0.0 == 0``) unless
    ``number_types`` asks for int and float to match too. Objects must list the same keys in
    the same order unless ``key_order`` is False. Arrays are lists or tuples. Iterative, so
    any nesting depth compares.

    >>> same_value({"a": [1, 2.0]}, {"a": [1.0, 2]}), same_value([True], [1])
    (True, False)
    >>> same_value({"a": 1, "b": 2}, {"b": 2, "a": 1}, key_order=False)
    True
    >>> same_value({"a": 1, "b": 2}, {"b": 2, "a": 1}), same_value([1], [1.0], number_types=True)
    (False, False)
    """
    if key_order and not number_types:
        fast = speedups.same_value(a, b)  # one pass in C, when the values are plain
        if fast is not None:
            return fast
    return _walk(a, b, key_order, number_types)


def decodes_to(decoded: Any, value: Any, compact: str) -> bool:
    """Whether ``decoded``, what a codec read back, is ``value`` (whose compact JSON is
    ``compact``): the check behind every lossless rewrite, :func:`same_value` in one pass.

    Without the C accelerator the compact JSON texts are compared first (json.dumps keeps
    types, key order and float bits); only a mismatch (``25.0`` read back as ``25``, which
    is the same JSON number) takes the walk.

    >>> decodes_to({"p": 25}, {"p": 25.0}, '{"p":25.0}'), decodes_to([1], [True], "[true]")
    (True, False)
    """
    fast = speedups.same_value(decoded, value)
    if fast is not None:
        return fast
    return dumps_compact(decoded) == compact or _walk(decoded, value, True, False)


def _walk(a: Any, b: Any, key_order: bool, number_types: bool) -> bool:
    stack: list[tuple[Any, Any]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        tx, ty = type(x), type(y)
        if tx is not ty:
            if tx in _ARRAY and ty in _ARRAY:
                tx = list
            elif tx in _NUMBER and ty in _NUMBER and not number_types and x == y:
                continue
            else:
                return False
        if tx is dict:
            if (list(x) != list(y)) if key_order else (x.keys() != y.keys()):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif tx in _ARRAY:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True
