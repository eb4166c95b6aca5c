"""The generic decoder's lexical layer: numbers, scalar tokens, rows and columns (§2, §4.2).

Everything here turns text into values and never looks at structure: :class:`Numbers` reads
numbers (json's C scanner where it exists, its grammar being §2.3's), :class:`Memo` is one
document's cache of decoded cells and its reader of other scalars, :func:`split_row` cuts a
row into its cells and :func:`column` decodes a batch of cells of one column at once. Both
the general decoder and its fast paths read through these, so a token means the same on
either path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import Any, Final

from ..errors import GCFError
from ..grammar import (
    BARE_FIRST,
    NUMBER_CELL,
    NUMBER_FIRST,
    NUMBER_LIST_TEXT,
    NUMBER_PREFIX,
    NUMBER_RE,
    QUOTED_STRING,
)
from ..scalar import (
    INT64_MAX,
    INT64_MIN,
    check_scalar_text,
    parse_key_at,
    parse_scalar,
    split_cells,
)

__all__ = [
    "DEFAULT_NUMBERS",
    "MEMO_MAX",
    "TRAILING",
    "UNDECIDED",
    "Memo",
    "Numbers",
    "column",
    "looks_like_member",
    "new_memo",
    "scan_whole_number",
    "split_row",
]

#: Distinct tokens a document's memo holds before it starts over.
MEMO_MAX: Final = 65536
#: A number followed by more text: a bare string (§2.1 rule 7).
TRAILING: Final = object()
#: Neither surely a number nor surely not: the full scalar grammar decides.
UNDECIDED: Final = object()

_NUMBER_CELL: Final = NUMBER_CELL.match
_NUMBER_LIST_TEXT: Final = NUMBER_LIST_TEXT.fullmatch
_NUMBER_PREFIX: Final = NUMBER_PREFIX.match
_NUMBER: Final = NUMBER_RE.match
_QUOTED: Final = QUOTED_STRING.match
_BARE_FIRST: Final = BARE_FIRST
_NUM_FIRST: Final = NUMBER_FIRST


class Numbers:
    """How one decode reads numbers (§2.3): ``scan(text, pos) -> (value, end)`` for a number
    at a position, ``scan_list(text) -> (values, end)`` for a bracketed list of them, and
    ``parse_float``, the hook a double's text goes through (``None``: ``float``).

    json's C scanner reads ASCII digits only, as §2.3 requires. Its pure-Python fallback
    matches a Unicode ``\\d`` (it would read ``1٥`` as 15), so without the accelerator (or
    with ``accelerated=False``) numbers are scanned by the ASCII pattern of the grammar.
    With ``parse_float`` a double that overflows is left to the full grammar, which
    rejects it (§2.3.2) before the hook ever sees it.

    >>> Numbers().scan("12|x", 0), Numbers(accelerated=False).scan("1.5", 0)
    ((12, 2), (1.5, 3))
    """

    __slots__ = ("parse_float", "scan", "scan_list")

    def __init__(
        self, parse_float: Callable[[str], Any] | None = None, *, accelerated: bool = True
    ) -> None:
        self.parse_float = parse_float
        hook: Callable[[str], Any] | None = None
        if parse_float is not None:
            pf = parse_float

            def hook(text: str) -> Any:
                f = float(text)
                if f - f != 0:
                    raise ValueError("a double out of range")  # the full grammar reports it
                return pf(text)

        decoder = json.JSONDecoder(parse_float=hook)
        self.scan_list: Callable[[str], tuple[Any, int]] = decoder.raw_decode
        if accelerated and c_make_scanner is not None:
            self.scan: Callable[[str, int], tuple[Any, int]] = c_make_scanner(decoder)
        else:
            double = float if hook is None else hook

            def scan(text: str, pos: int) -> tuple[Any, int]:
                """The C scanner's contract: (value, end), StopIteration when no number
                starts at ``pos``."""
                m = _NUMBER_PREFIX(text, pos)
                if m is None:
                    raise StopIteration(pos)
                token = m.group()
                return (double(token) if m.lastindex else int(token)), m.end()

            self.scan = scan

    def double(self, tok: str, line: int) -> Any:
        """A token of the NUMBER grammar with a fraction or an exponent, as a value."""
        f = float(tok)
        if f - f != 0.0:
            parse_scalar(tok, line)  # raises out_of_range with the remediation
        return f if self.parse_float is None else self.parse_float(tok)


#: The numbers of a plain ``loads``: json's C scanner, doubles as ``float``. Read at each
#: decode, so a test can swap in ``Numbers(accelerated=False)``.
DEFAULT_NUMBERS: Numbers = Numbers()


def scan_whole_number(tok: str, scan: Callable[[str, int], tuple[Any, int]]) -> Any:
    """``tok`` (first character a digit or ``-``) as a whole, finite, surely-int64 number.

    The C JSON scanner reads a number exactly as §2.3 spells it (JSON's grammar) and
    converts it in one call. :data:`TRAILING` means a number followed by more text;
    :data:`UNDECIDED` covers the scanner's extras (-Infinity, unbounded integers) and
    overflows, which the regex path decides.
    """
    try:
        v, end = scan(tok, 0)
    except (StopIteration, ValueError):
        return UNDECIDED
    n = len(tok)
    if end < n:
        return TRAILING
    t = type(v)
    if t is int:
        return v if n < 19 else UNDECIDED
    if t is float:
        return v if v - v == 0 else UNDECIDED
    return v  # parse_float's value of a finite double


class Memo(dict[str, Any]):
    """Token -> decoded cell, per document: repeated cells (enums, flags, small numbers,
    ``-``, ``~``) cost one C-level dict lookup instead of a parse. ``line`` is the line
    the next miss is reported on; :meth:`value` and :meth:`scalar_list` read the scalars
    outside table cells with the same numbers.
    """

    __slots__ = ("line", "numbers", "scan")
    line: int
    numbers: Numbers
    scan: Callable[[str, int], tuple[Any, int]]  # numbers.scan, one lookup nearer

    def __missing__(self, key: str) -> Any:
        # Keys may be untrimmed row pieces; the trimmed token is what gets parsed. The
        # size bound is enforced per row by the callers, not here on every miss.
        tok = key.strip(" \t")
        c = tok[:1]
        v: Any
        if c in _NUM_FIRST:
            v = scan_whole_number(tok, self.scan)
            if v is TRAILING:
                if c == "-":
                    v = parse_scalar(tok, self.line, in_row=True)
                else:
                    if not tok.isascii():
                        check_scalar_text(tok, self.line)
                    v = tok
            elif v is UNDECIDED:
                v = self._number_slow(tok, c)
        elif c in _BARE_FIRST:
            if not tok.isascii():
                check_scalar_text(tok, self.line)
            v = tok
        else:
            v = parse_scalar(tok, self.line, in_row=True)
        self[key] = v
        return v

    def _number_slow(self, tok: str, c: str) -> Any:
        m = _NUMBER(tok)
        if m is None:
            if c == "-":
                return parse_scalar(tok, self.line, in_row=True)
            if not tok.isascii():
                check_scalar_text(tok, self.line)
            return tok
        if m.lastindex is None:
            return int(tok) if len(tok) < 19 else parse_scalar(tok, self.line)
        return self.numbers.double(tok, self.line)

    def value(self, tok: str, line: int) -> Any:
        """A trimmed scalar outside tabular cells (key=value, inline arrays, items, root)."""
        c = tok[:1]
        if c in _BARE_FIRST:
            if not tok.isascii():
                check_scalar_text(tok, line)
            return tok
        if c in _NUM_FIRST:
            v = scan_whole_number(tok, self.scan)
            if v is TRAILING:
                # A number followed by more text is a bare string (§2.1), as parse_scalar
                # says.
                if not tok.isascii():
                    check_scalar_text(tok, line)
                return tok
            if v is not UNDECIDED:
                return v
            m = _NUMBER(tok)
            if m is not None and m.lastindex is not None:
                return self.numbers.double(tok, line)
        return parse_scalar(tok, line)

    def scalar_list(self, text: str, line: int) -> list[Any]:
        """The values of an inline array (§7.5), ``text`` being what follows its ``:``."""
        if not text.strip(" \t"):
            return []
        if '"' in text:
            toks = split_cells(text, ",", line)
        elif "~" in text or "^" in text:
            toks = [t.strip(" \t") for t in text.split(",")]
        else:
            # Without ~ and ^ a row cell and an inline-array value read alike, so the
            # document's memo serves here too (it trims the pieces itself).
            if len(self) > MEMO_MAX:
                self.clear()
            self.line = line
            return list(map(self.__getitem__, text.split(",")))
        value = self.value
        return [value(t, line) for t in toks]


def new_memo(numbers: Numbers) -> Memo:
    """An empty memo reading numbers with ``numbers``."""
    # Memo has no __init__ of its own (dict's is cheaper); its slots are set here.
    memo = Memo()
    memo.line = 0
    memo.numbers = numbers
    memo.scan = numbers.scan
    return memo


def column(col: tuple[str, ...], memo: Memo) -> list[Any]:
    """Decode one column of a batch of rows.

    A column of plain numbers is handed to the C JSON scanner in one call: JSON's number
    grammar is the spec's (§2.3), and with only number characters, ``,`` and blanks in the
    text, the scan succeeds exactly when every cell is one such number. Anything else, and
    out-of-range values, take the per-cell path, which also raises the errors.
    """
    if _NUMBER_CELL(col[0]) is not None:
        text = ",".join(col)
        if _NUMBER_LIST_TEXT(text) is not None:
            try:
                vals, end = memo.numbers.scan_list("[" + text + "]")
            except ValueError:
                pass
            else:
                if (
                    end == len(text) + 2
                    and len(vals) == len(col)
                    and min(vals) >= INT64_MIN
                    and max(vals) <= INT64_MAX
                ):
                    return vals  # type: ignore[no-any-return]
    return list(map(memo.__getitem__, col))


def split_row(s: str, line: int) -> list[str]:
    """Split a row on ``|`` outside quotes; trimmed tokens (§4.2)."""
    parts = s.split("|")
    if '"' not in s:
        return [p.strip(" \t") for p in parts]
    out: list[str] = []
    for p in parts:
        tok = p.strip(" \t")
        if tok[:1] == '"':
            m = _QUOTED(tok)
            if m is None or m.end() != len(tok):
                # A '|' inside a quoted cell, or an error: the general (linear) splitter.
                return split_cells(s, "|", line)
        elif tok[:2] == "^{" and '"' in tok:
            # A '|' inside a quoted inline-schema field name (§7.4.5.1).
            return split_cells(s, "|", line)
        out.append(tok)
    return out


def looks_like_member(s: str) -> bool:
    """True when ``s`` parses as the start of a key=value or key[N]: line."""
    try:
        _, p = parse_key_at(s, 0)
    except GCFError:
        return False
    n = len(s)
    while p < n and s[p] in " \t":
        p += 1
    return p < n and s[p] in "=["
