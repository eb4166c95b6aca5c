"""Tool results written as Python literals: ``[{'id': 1, 'bpm': None}]``.

Many Python MCP servers answer with ``str(rows)`` instead of JSON (mcp-server-sqlite's
``read_query`` returns ``str([dict(row) for row in cursor.fetchall()])``). Such a text is the
same JSON-model value as ``[{"id":1,"bpm":null}]``, so the proxy can send it as GCF or compact
JSON when the value's Python rendering is **exactly** the text: ``repr(value) == text``. Then
the original is reproducible from what the client receives (decode, then ``repr``), and the
proxy proves that before it sends anything (:func:`renders`).

What counts as a literal (:func:`literal_value`): dicts with string keys, lists, strings,
integers, floats, booleans and None, nothing else, parsed by :mod:`ast` and walked here (no
evaluation of any kind: a call, a name, an operator other than a leading minus on a number is
refused), within size and depth bounds. Tuples, sets, bytes, ``Decimal(...)``, ``datetime(...)``
and everything else leave the text untouched. ``tuples=True`` (the policy's
``literals = "tuples"``, an opt-in) reads tuples as lists: the value is kept, the tuple type is
not, so the original is no longer reproducible and the check compares values instead.

>>> literal_value("[{'id': 1, 'bpm': None, 'ok': True}]")
[{'id': 1, 'bpm': None, 'ok': True}]
>>> literal_value("[{'id': 1}, ]") is None     # not what repr writes: left alone
True
>>> literal_value("[(1, 'a')]") is None, literal_value("[(1, 'a')]", tuples=True)
(True, [[1, 'a']])
>>> renders([{"id": 1, "bpm": None}], "[{'id': 1, 'bpm': None}]")
True
"""

from __future__ import annotations

import ast
import re
from typing import Any, Final, Literal

from ..errors import GCFError
from ..jsonio import loads_json

__all__ = [
    "LITERAL_MODES",
    "MAX_DEPTH",
    "MAX_LITERAL_BYTES",
    "LiteralMode",
    "literal_json_renders",
    "literal_value",
    "renders",
]

#: ``exact`` (default): literals whose repr is the text; ``tuples``: tuples read as lists
#: (opt-in, not reproducible); ``off``: never read Python literals.
LiteralMode = Literal["exact", "tuples", "off"]
LITERAL_MODES: Final[tuple[LiteralMode, ...]] = ("exact", "tuples", "off")

#: Larger texts are not parsed: ``ast`` builds a tree of many times the text's size.
MAX_LITERAL_BYTES: Final = 1024 * 1024
#: Deeper nesting is refused (CPython's tokenizer itself stops at 200 open brackets, so the
#: walk below never recurses further than that).
MAX_DEPTH: Final = 64

_NUMBERS: Final = (int, float)


def literal_value(
    text: str, *, tuples: bool = False, max_bytes: int = MAX_LITERAL_BYTES
) -> Any | None:
    """The value ``text`` is the Python literal of, or None.

    With ``tuples=False`` the value must render back to ``text`` exactly (``repr``); with
    ``tuples=True`` tuples are read as lists and only the literal's shape is checked (its
    text cannot be rebuilt). Only a list or a dict is a result worth reading: a bare string
    or number is left alone, as is anything JSON would have read (the caller tries JSON
    first).

    >>> literal_value('''{'n': -2.5, 's': "it's"}''')
    {'n': -2.5, 's': "it's"}
    >>> literal_value("[1, 2]"), literal_value("{1: 'a'}"), literal_value("[Decimal('1')]")
    ([1, 2], None, None)
    >>> literal_value("{'s':'x'}") is None    # repr writes {'s': 'x'}: not this text
    True
    """
    if not text or text[0] not in "[{" or text[-1] not in "]}" or len(text) > max_bytes:
        return None
    if tuples:
        return _walked(text)
    # The fast way: the text rewritten as JSON (strings requoted, None/True/False spelled
    # as JSON) and parsed at C speed. Whatever the rewrite makes of odd input, the value is
    # kept only if it renders back to the text, and repr(v) == text means the text's literal
    # is v: an exact check, not a heuristic.
    try:
        value = loads_json(_as_json(text))
    except (GCFError, RecursionError, ValueError):
        return None
    if not isinstance(value, (list, dict)):
        return None
    try:
        return value if repr(value) == text else None
    except (ValueError, RecursionError):  # an int too long to render
        return None


_STRING: Final = re.compile(r"""('[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")""")
_ESCAPE: Final = re.compile(r"\\(?:x([0-9a-fA-F]{2})|U([0-9a-fA-F]{8})|(')|(.))|(\")")


def _as_json(text: str) -> str:
    # Split at the string literals (odd parts): words are rewritten only outside them.
    parts = _STRING.split(text)
    for i in range(0, len(parts), 2):
        part = parts[i]
        if "e" in part:  # None, True, False all have one; numbers' e is left alone
            parts[i] = (
                part.replace("None", "null").replace("True", "true").replace("False", "false")
            )
    for i in range(1, len(parts), 2):
        body = parts[i][1:-1]
        if "\\" in body or '"' in body:
            body = _ESCAPE.sub(_json_escape, body)
        parts[i] = f'"{body}"'
    return "".join(parts)


def _json_escape(m: re.Match[str]) -> str:
    hex2, hex8, quote, other, dquote = m.groups()
    if hex2 is not None:
        return "\\u00" + hex2
    if hex8 is not None:
        code = int(hex8, 16)
        if code > 0x10FFFF:
            return "\\x"  # not a character: JSON rejects it, so the literal is refused
        if code < 0x10000:
            return f"\\u{code:04x}"
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    if quote is not None:
        return "'"
    if dquote is not None:
        return '\\"'
    return "\\" + other  # \\ \\n \\r \\t \\uXXXX read the same in JSON; others fail there


def _walked(text: str) -> Any | None:
    """The ``tuples`` reading: parsed by :mod:`ast` and walked (slower, opt-in only)."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return None
    try:
        value = _value(tree.body, True, 0)
    except _NotLiteral:
        return None
    return value if isinstance(value, (list, dict)) else None


def renders(value: Any, text: str) -> bool:
    """Whether ``value`` (as a client decodes it) renders to exactly ``text`` with ``repr``:
    the proof that the original Python literal is reproducible from what is sent.

    >>> renders({"a": 1.0}, "{'a': 1.0}"), renders({"a": 1}, "{'a': 1.0}")
    (True, False)
    """
    try:
        return repr(value) == text
    except (ValueError, RecursionError):
        return False


class _NotLiteral(Exception):
    pass


def _value(node: ast.expr, tuples: bool, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise _NotLiteral
    if isinstance(node, ast.Constant):
        constant = node.value
        if constant is None or isinstance(constant, (str, bool, int, float)):
            return constant
        raise _NotLiteral  # bytes, complex, Ellipsis
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, _NUMBERS)
            and not isinstance(operand.value, bool)
        ):
            return -operand.value
        raise _NotLiteral
    if isinstance(node, ast.List) or (tuples and isinstance(node, ast.Tuple)):
        return [_value(e, tuples, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise _NotLiteral  # a non-string key, or a ** unpacking (key is None)
            if key.value in out:
                raise _NotLiteral  # a key written twice is not what repr writes
            out[key.value] = _value(item, tuples, depth + 1)
        return out
    raise _NotLiteral


def literal_json_renders(compact: str, text: str) -> bool:
    """Whether compact JSON of a Python literal's value renders back to the literal's text
    (checked once, before a literal is answered at all).

    >>> literal_json_renders('[{"a":null}]', "[{'a': None}]")
    True
    """
    try:
        return renders(loads_json(compact), text)
    except (GCFError, RecursionError, ValueError):
        return False
