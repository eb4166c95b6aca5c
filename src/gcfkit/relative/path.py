"""Paths of patch operations: members by key, array elements by identity, never by position.

A path names one place in a JSON value the reader holds, in words the reader can find in
it: ``entities[name=commit 486c5a6].observations`` is the ``observations`` member of the
element of ``entities`` whose ``name`` is ``commit 486c5a6``. There are three kinds of
step (docs/extensions/relative-answers.md §4):

* :class:`Member` ``.key``: an object member; keys use the GCF key grammar (§2a), bare or
  quoted, so a path spells a key the way the GCF the reader holds spells it;
* :class:`Select` ``[f=v]`` or ``[f=v,g=w]``: the one array element that is an object whose
  fields equal those values;
* :class:`Element` ``[=v]``: the one array element equal to the scalar ``v``.

Values in selectors are GCF scalars (§2): ``[id=7]`` is the number, ``[id="7"]`` the string.

>>> p = parse_path('entities[name=commit 486c5a6].observations[="diff reviewed"]')
>>> p[1], p[3]
(Select(conds=(('name', 'commit 486c5a6'),)), Element(value='diff reviewed'))
>>> format_path(p)
'entities[name=commit 486c5a6].observations[=diff reviewed]'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ..errors import GCFError
from ..scalar import (
    format_key,
    format_scalar,
    parse_key_at,
    parse_quoted_at,
    parse_scalar,
    quote_string,
)

__all__ = [
    "Element",
    "Member",
    "Path",
    "Select",
    "Step",
    "format_path",
    "format_selector_value",
    "parse_path",
]


@dataclass(frozen=True, slots=True)
class Member:
    """An object member, by key."""

    key: str


@dataclass(frozen=True, slots=True)
class Select:
    """The one array element that is an object with every ``(field, value)`` of ``conds``."""

    conds: tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Element:
    """The one array element equal to the scalar ``value``."""

    value: Any


Step = Member | Select | Element
Path = tuple[Step, ...]

_SEL_STOP: Final = ",]"


def format_selector_value(value: Any) -> str:
    """A selector value: the canonical GCF scalar, quoted also when it holds ``]``.

    >>> format_selector_value("a b"), format_selector_value("7"), format_selector_value(7)
    ('a b', '"7"', '7')
    >>> format_selector_value("x]y")
    '"x]y"'
    """
    text = format_scalar(value, ",")
    if isinstance(value, str) and "]" in text and not text.startswith('"'):
        return quote_string(value)
    return text


def format_path(path: Path) -> str:
    """The canonical text of ``path`` (``""`` for the root).

    >>> format_path((Member("a b"), Select((("id", 1), ("k", "x"))), Member("v")))
    '"a b"[id=1,k=x].v'
    """
    out: list[str] = []
    for step in path:
        if isinstance(step, Member):
            if out:
                out.append(".")
            out.append(format_key(step.key))
        elif isinstance(step, Select):
            conds = ",".join(f"{format_key(f)}={format_selector_value(v)}" for f, v in step.conds)
            out.append(f"[{conds}]")
        else:
            out.append(f"[={format_selector_value(step.value)}]")
    return "".join(out)


def _bad(text: str, pos: int, why: str, line: int | None) -> GCFError:
    return GCFError("invalid_patch", f"path {text[:80]!r}, column {pos + 1}: {why}", line)


def _selector_value(text: str, pos: int, line: int | None) -> tuple[Any, int]:
    n = len(text)
    if pos < n and text[pos] == '"':
        try:
            return parse_quoted_at(text, pos, line)
        except GCFError as e:
            raise _bad(text, pos, e.detail, line) from None
    end = pos
    while end < n and text[end] not in _SEL_STOP:
        end += 1
    tok = text[pos:end]
    if not tok or tok != tok.strip(" \t"):
        raise _bad(text, pos, "a selector value is a scalar without surrounding spaces", line)
    try:
        value = parse_scalar(tok, line)
    except GCFError as e:
        raise _bad(text, pos, e.detail, line) from None
    return value, end


def _key(text: str, pos: int, line: int | None) -> tuple[str, int]:
    try:
        return parse_key_at(text, pos, line)
    except GCFError as e:
        raise _bad(text, pos, e.detail, line) from None


def _selector(text: str, pos: int, line: int | None) -> tuple[Step, int]:
    # text[pos] == "["
    n = len(text)
    pos += 1
    if pos < n and text[pos] == "=":
        value, pos = _selector_value(text, pos + 1, line)
        if isinstance(value, (dict, list)):  # pragma: no cover - parse_scalar gives scalars
            raise _bad(text, pos, "an element selector names a scalar", line)
        if pos >= n or text[pos] != "]":
            raise _bad(text, pos, "expected ] after the element value", line)
        return Element(value), pos + 1
    conds: list[tuple[str, Any]] = []
    seen: set[str] = set()
    while True:
        field, pos = _key(text, pos, line)
        if field in seen:
            raise _bad(text, pos, f"field {field!r} appears twice in one selector", line)
        seen.add(field)
        if pos >= n or text[pos] != "=":
            raise _bad(text, pos, "expected = after the selector field", line)
        value, pos = _selector_value(text, pos + 1, line)
        conds.append((field, value))
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "]":
            return Select(tuple(conds)), pos + 1
        raise _bad(text, pos, "expected , or ] in the selector", line)


def parse_path(text: str, line: int | None = None) -> Path:
    """Parse a path; ``""`` is the root. Every malformation is ``invalid_patch``.

    >>> parse_path("[id=7].tags")
    (Select(conds=(('id', 7),)), Member(key='tags'))
    >>> parse_path("a..b")
    Traceback (most recent call last):
    gcfkit.errors.GCFError: error[invalid_patch]: path 'a..b', column 3: ...
    """
    steps: list[Step] = []
    pos, n = 0, len(text)
    while pos < n:
        c = text[pos]
        if c == "[":
            step, pos = _selector(text, pos, line)
            steps.append(step)
            continue
        if steps:
            if c != ".":
                raise _bad(text, pos, "expected . or [ between steps", line)
            pos += 1
        key, pos = _key(text, pos, line)
        steps.append(Member(key))
    return tuple(steps)
