"""How a dense table is written once its cells are known (docs/extensions/dense.md D6, D7).

The encoder renders every row of a table to its cell tokens first (as v3.5.3 does); these
functions then pick the constant columns (D6.2), write the declaration with them, and join
each row without its constant cells and without its trailing absent cells (D7).

>>> rows = [["a", "follows", "~"], ["b", "follows", "~"], ["c", "follows", "1"]]
>>> consts = constant_columns(rows, 0)
>>> consts
{1: 'follows'}
>>> declaration(["from", "type", "n"], consts), [join(r, consts, True)[0] for r in rows]
('{from,type=follows,n}', ['a|~', 'b|~', 'c|1'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..grammar import LIST_HEAD
from ..scalar import quote_string

__all__ = ["constant_columns", "declaration", "join"]

_LIST_HEAD: Final = LIST_HEAD.match


def constant_columns(rows: Sequence[list[str]], start: int) -> dict[int, str] | None:
    """The constant columns of a table of two or more rows (D6.2): cell index -> token.

    A column qualifies when every row holds the same token there and it is neither ``~``,
    an attachment marker nor a list cell. Cells before ``start`` (a keyed map's key) never
    do. When every value column qualifies, the first one (``start``) stays a row column.
    """
    if len(rows) < 2:
        return None
    first = rows[0]
    rest = rows[1:]
    found: dict[int, str] = {}
    for j in range(start, len(first)):
        tok = first[j]
        if tok == "~" or tok[:1] == "^" or (tok[:1] == "[" and _LIST_HEAD(tok)):
            continue
        for r in rest:
            if r[j] != tok:
                break
        else:
            found[j] = tok
    if len(found) == len(first) - start:
        del found[start]
    return found or None


def declaration(names: Sequence[str], consts: dict[int, str] | None) -> str:
    """The field declaration ``{...}`` of already formatted ``names`` (cell order), each
    constant column written ``name=token`` (a bare token holding ``}`` is quoted)."""
    if not consts:
        return "{" + ",".join(names) + "}"
    parts = []
    for j, name in enumerate(names):
        tok = consts.get(j)
        if tok is None:
            parts.append(name)
        else:
            if "}" in tok and tok[0] != '"':
                tok = quote_string(tok)  # a bare token is its string's exact text
            parts.append(f"{name}={tok}")
    return "{" + ",".join(parts) + "}"


def join(cells: list[str], consts: dict[int, str] | None, short: bool) -> tuple[str, bool]:
    """One row's text: ``cells`` without the constant columns, and with ``short`` without
    its trailing ``~`` cells down to ``min(2, width)`` cells (D7); and whether it was
    shortened."""
    if consts:
        cells = [c for j, c in enumerate(cells) if j not in consts]
    k = len(cells)
    if short and cells[-1] == "~" and k > 2:
        while k > 2 and cells[k - 1] == "~":
            k -= 1
        return "|".join(cells[:k]), True
    return "|".join(cells), False
