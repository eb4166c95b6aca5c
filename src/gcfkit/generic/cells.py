"""How the generic encoders write a scalar, a cell and a key (spec §2, §2a, §2.4).

:func:`format_cell` is the hot path of every table and every ``key=value`` line,
:func:`key_text` of every key; the buffered encoder (:mod:`gcfkit.generic.encoder`) and the
streaming one (:mod:`gcfkit.generic.stream`) both write through them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from ..errors import GCFEncodeError, GCFError, at_path
from ..grammar import SAFE_BARE
from ..scalar import format_key, format_number, string_text

__all__ = [
    "ABSENT",
    "MAX_DEPTH",
    "Nested",
    "bad_key_error",
    "failing_index",
    "failing_key",
    "format_cell",
    "key_text",
    "too_deep_error",
    "unsupported_error",
    "with_default",
]

#: Deepest container nesting :func:`dumps` accepts (the root container is level 1).
MAX_DEPTH: Final = 256

# Strings certainly safe bare in every context (the full §2.4 check is format_scalar's).
_SAFE_BARE: Final = SAFE_BARE.match
#: A field absent from a row (distinct from a present None).
ABSENT: Final = object()


class Nested(Exception):
    """Raised by :func:`format_cell` for a container: a table writes it as an attachment."""


def _odd_scalar(v: Any) -> str:
    # Subclasses of the JSON scalar types (IntEnum, str-enums, numpy-free float
    # subclasses) are encoded as their base value; anything else is outside the model.
    if isinstance(v, str):
        return format_cell(str.__str__(v))
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return format_cell(int(v))
    if isinstance(v, float):
        return format_number(float(v))
    if isinstance(v, (dict, list, tuple)):
        raise GCFEncodeError("unsupported_type", "a container where a scalar was expected")
    raise unsupported_error(v)


def unsupported_error(v: Any) -> GCFEncodeError:
    """The error for a value outside the JSON data model."""
    return GCFEncodeError(
        "unsupported_type",
        f"{type(v).__name__} is outside the JSON data model (dict, list, str, int, float, "
        "bool, None); convert it before encoding",
    )


def format_cell(
    v: Any,
    _bare: Any = _SAFE_BARE,
    _str: type = str,
    _int: type = int,
    _flt: type = float,
    _repr: Any = repr,
) -> str:
    """A scalar's wire text, in a tabular cell or anywhere else; signals containers.

    This is the hot path of every table, so builtins are bound as defaults and the
    common float range is formatted inline.
    """
    t = type(v)
    if t is _str:
        if _bare(v):
            return v  # type: ignore[no-any-return]
        return string_text(v)
    if t is _int:
        if -9223372036854775808 <= v <= 9223372036854775807:
            return _repr(v)  # type: ignore[no-any-return]
        return format_number(v)
    if t is _flt:
        if 1e-4 <= v < 9007199254740992.0 or -9007199254740992.0 < v <= -1e-4:
            r: str = _repr(v)
            return r[:-2] if r[-2:] == ".0" else r
        return format_number(v)
    if v is None:
        return "-"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (dict, list, tuple)):
        raise Nested
    return _odd_scalar(v)


_KEY_CACHE: dict[str, str] = {}


def key_text(k: Any) -> str:
    """A key or field name as written (§2a), cached: bare when it may be, else quoted."""
    try:
        return _KEY_CACHE[k]
    except KeyError:
        pass
    except TypeError:
        raise bad_key_error(k) from None
    if type(k) is not str:
        if not isinstance(k, str):
            raise bad_key_error(k)
        k = str.__str__(k)
    text = format_key(k)
    if len(_KEY_CACHE) < 4096:
        _KEY_CACHE[k] = text
    return text


def bad_key_error(k: Any) -> GCFEncodeError:
    """The error for an object key that is no string."""
    return GCFEncodeError(
        "unsupported_type",
        f"object key {k!r} is a {type(k).__name__}; JSON object keys are strings",
    )


def too_deep_error() -> GCFEncodeError:
    """The error for a value nested deeper than :data:`MAX_DEPTH` levels."""
    return GCFEncodeError(
        "limit_exceeded",
        f"value nests deeper than {MAX_DEPTH} levels; flatten it before encoding",
    )


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def failing_index(items: Sequence[Any], encode: Callable[[Any], str]) -> int:
    """The index of the first of ``items`` that ``encode`` rejects (0 if none does). Only
    ever called on the error path, to name the value in the error's path."""
    for n, item in enumerate(items):
        try:
            encode(item)
        except (GCFError, Nested):
            return n
    return 0


def failing_key(obj: Mapping[str, Any], keys: Iterable[str], encode: Callable[[Any], str]) -> str:
    """The first of ``keys`` whose value in ``obj`` ``encode`` rejects (error path only)."""
    for k in keys:
        if k in obj:
            try:
                encode(obj[k])
            except (GCFError, Nested):
                return k
    return ""


_JSON_SCALARS: Final = (str, int, float, bool, type(None))


def with_default(v: Any, default: Callable[[Any], Any], depth: int) -> Any:
    """``v`` with every value outside the JSON model replaced by ``default`` of it (again,
    while the result is still outside), containers copied only where something changed."""
    if depth > MAX_DEPTH:
        raise too_deep_error()
    if isinstance(v, dict):
        changed = False
        out: dict[Any, Any] = {}
        for k, x in v.items():
            try:
                y = out[k] = with_default(x, default, depth + 1)
            except GCFEncodeError as e:
                raise at_path(e, k) from None
            changed = changed or y is not x
        return out if changed else v
    if isinstance(v, (list, tuple)):
        items = []
        for i, x in enumerate(v):
            try:
                items.append(with_default(x, default, depth + 1))
            except GCFEncodeError as e:
                raise at_path(e, i) from None
        return items if any(y is not x for x, y in zip(items, v, strict=True)) else v
    if isinstance(v, _JSON_SCALARS):
        return v
    made = default(v)
    if made is v:
        raise unsupported_error(v)  # a default that hands the value back cannot encode it
    return with_default(made, default, depth + 1)
