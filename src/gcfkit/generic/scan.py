"""The generic decoder's lexical layer: numbers, scalar tokens, rows and columns (§2, §4.2).

Everything here turns text into values and never looks at structure: :class:`Numbers` reads
numbers (json's C scanner where it exists, its grammar being §2.3's), :class:`Memo` is one
document's cache of decoded cells and its reader of other scalars, :func:`split_row` cuts a
row into its cells and :func:`column` decodes a batch of cells of one column at once. Both
the general decoder and its fast paths read through these, so a token means the same on
either path.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
from typing import Any, ClassVar, Final

from ..errors import GCFDecodeError, GCFError, decode_error_at
from ..grammar import (
    BARE_FIRST,
    COUNT_10_RE,
    DENSE_BARE_FIRST,
    LIST_HEAD,
    NUMBER_CELL,
    NUMBER_FIRST,
    NUMBER_LIST_TEXT,
    NUMBER_PREFIX,
    NUMBER_RE,
    PLAIN_BRACKET,
    QUOTED_STRING,
    REFERENCE,
    REFERENCE_SIGIL,
    SUMMARY,
    is_comment,
)
from ..scalar import (
    INT64_MAX,
    INT64_MIN,
    check_scalar_text,
    parse_field_decl_at,
    parse_key_at,
    parse_scalar,
    split_cells,
)

__all__ = [
    "DEFAULT_NUMBERS",
    "MAX_COUNT",
    "MEMO_MAX",
    "TRAILING",
    "UNDECIDED",
    "DenseMemo",
    "Memo",
    "Numbers",
    "column",
    "looks_like_member",
    "new_memo",
    "numbers_for",
    "read_bracket",
    "read_definitions",
    "scan_whole_number",
    "split_row",
    "summary_counts",
]

#: Largest declared ``[N]`` count accepted (§12).
MAX_COUNT: Final = 1_000_000_000
_PLAIN_BRACKET: Final = PLAIN_BRACKET.match
_COUNT_DIGITS: Final = COUNT_10_RE.match
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


@functools.lru_cache(maxsize=16)
def numbers_for(parse_float: Callable[[str], Any]) -> Numbers:
    """The :class:`Numbers` of ``loads(..., parse_float=...)``, built once per hook."""
    return Numbers(parse_float)


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
    #: First characters after which a token is surely a bare string (the fast paths' test).
    BARE: ClassVar[frozenset[str]] = BARE_FIRST
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


class DenseMemo(Memo):
    """The memo of a dense document (docs/extensions/dense.md): a bare ``$name`` token is
    the string its definition gives (D4.2), and a row cell ``[N]: a,b`` is a list (D5).

    Outside row cells (:meth:`value`, :meth:`scalar_list`) only references are new; a
    list head there reads as v3.5.3 reads it. A list is never cached: each cell gets its
    own.
    """

    __slots__ = ("defs",)
    BARE = DENSE_BARE_FIRST
    defs: dict[str, str]  # "$name" -> its string

    def __missing__(self, key: str) -> Any:
        tok = key.strip(" \t")
        c = tok[:1]
        if c == REFERENCE_SIGIL:
            v = self[key] = self.resolve(tok, self.line)
            return v
        if c == "[" and LIST_HEAD.match(tok):
            return self.list_cell(tok, self.line)
        if c == "^" and "=" in tok:
            try:
                return Memo.__missing__(self, key)
            except GCFError as e:
                if e.code != "invalid_attachment_marker" or not _is_constant_decl(tok[1:]):
                    raise
                raise decode_error_at(
                    "invalid_constant",
                    "an inline-object schema ^{...} has no constant columns",
                    self.line,
                    tok,
                    0,
                ) from None
        return Memo.__missing__(self, key)

    def resolve(self, tok: str, line: int) -> str:
        """The string of reference ``tok`` (``undefined_reference`` when it names none)."""
        try:
            return self.defs[tok]
        except KeyError:
            pass
        raise decode_error_at(
            "undefined_reference",
            f"{tok[:40]!r} names no definition (a literal beginning with $ is quoted)",
            line,
            tok,
            0,
        )

    def list_cell(self, tok: str, line: int) -> list[Any]:
        """The list of a cell ``[count]: e1,e2,...`` (D5.1)."""
        head = LIST_HEAD.match(tok)
        assert head is not None
        if not COUNT_10_RE.match(head.group(1)):
            raise decode_error_at(
                "invalid_count",
                f"list cell count [{head.group(1)[:20]}] must be 0 or a decimal without "
                "leading zeros",
                line,
                tok,
                1,
            )
        rest = tok[head.end() :]
        value = self.value
        items = [value(t, line) for t in split_cells(rest, ",", line)] if rest.strip() else []
        if len(items) != int(head.group(1)):
            raise GCFDecodeError(
                "count_mismatch",
                f"list cell declares [{head.group(1)}] but holds {len(items)} value(s)",
                line,
            )
        return items

    def value(self, tok: str, line: int) -> Any:
        if tok[:1] == REFERENCE_SIGIL:
            return self.resolve(tok, line)
        return Memo.value(self, tok, line)

    def scalar_list(self, text: str, line: int) -> list[Any]:
        if "[" not in text:
            return Memo.scalar_list(self, text, line)
        # The memo would read a list head as a list cell; in an inline array it is not.
        if not text.strip(" \t"):
            return []
        value = self.value
        return [value(t, line) for t in split_cells(text, ",", line)]


def _is_constant_decl(text: str) -> bool:
    """True when ``text`` is a field declaration with constant columns (dense D6.1)."""
    consts: list[tuple[int, str]] = []
    try:
        parse_field_decl_at(text, 0, constants=consts)
    except GCFError:
        return False
    return bool(consts)


def new_memo(numbers: Numbers, defs: dict[str, str] | None = None) -> Memo:
    """An empty memo reading numbers with ``numbers``; with ``defs`` (a dense document's
    definitions, ``"$name" -> string``) a :class:`DenseMemo`."""
    # Memo has no __init__ of its own (dict's is cheaper); its slots are set here.
    memo = Memo() if defs is None else DenseMemo()
    if defs is not None:
        memo.defs = defs  # type: ignore[attr-defined]
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


def split_row(s: str, line: int, lists: bool = False) -> list[str]:
    """Split a row on ``|`` outside quotes; trimmed tokens (§4.2). With ``lists`` (a dense
    row, D5.1) a list cell's quoted elements may hold ``|``."""
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
                return split_cells(s, "|", line, lists=lists)
        elif tok[:2] == "^{" and '"' in tok:
            # A '|' inside a quoted inline-schema field name (§7.4.5.1).
            return split_cells(s, "|", line, lists=lists)
        elif lists and tok[:1] == "[" and '"' in tok:
            return split_cells(s, "|", line, lists=True)
        out.append(tok)
    return out


def read_definitions(
    lines: list[str], defs: dict[str, str], memo: Memo, max_line: int
) -> dict[str, str]:
    """Read a dense payload's definition lines (D4.1) into ``defs`` (``"$name" ->
    string``) and blank them in ``lines`` (line numbers stay), so the body's reader starts
    at the first other line. Blank and comment lines may sit among them; ``lines[0]`` is
    the header. ``memo`` reads the values (as v3.5.3 scalars: a definition is a literal)."""
    for i in range(1, len(lines)):
        raw = lines[i]
        if raw[:1] != REFERENCE_SIGIL:
            s = raw.strip(" ")  # a tab is left to the body's reader (tab_indentation)
            if not s or is_comment(s):
                continue
            break
        ln = i + 1
        if len(raw) > max_line:
            raise GCFDecodeError("limit_exceeded", f"line is longer than {max_line} characters", ln)
        name, eq, rest = raw.partition("=")
        tok = rest.strip(" \t")
        if not eq or not REFERENCE.match(name) or name in defs:
            what = "is defined twice" if name in defs else "is not $name=value"
            raise GCFDecodeError("invalid_definition", f"definition {raw[:40]!r} {what}", ln)
        if tok[:1] == REFERENCE_SIGIL:
            raise decode_error_at(
                "invalid_definition",
                "a definition's value is a literal (quote a leading $)",
                ln,
                raw,
                len(name) + 1 + rest.find(tok),
            )
        v = Memo.value(memo, tok, ln)
        if type(v) is not str:
            raise decode_error_at(
                "invalid_definition",
                f"definition {name} must hold a string",
                ln,
                raw,
                len(name) + 1 + rest.find(tok),
            )
        defs[name] = v
        lines[i] = ""
    return defs


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


def read_bracket(s: str, pos: int, ln: int) -> tuple[int | None, bool, int]:
    """A ``[N]``, ``[N:]``, ``[?]`` or ``[?:]`` count bracket (§4 ``count-bracket``,
    ``keyed-bracket``) at ``s[pos]``: (count or None, keyed?, end)."""
    m = _PLAIN_BRACKET(s, pos)
    if m is not None:
        # '[N]' or '[N:]' with N below MAX_COUNT: nothing left to check.
        return int(m.group(1)), m.group(2) == ":", m.end()
    end = s.find("]", pos)
    if end < 0:
        raise decode_error_at("invalid_line", "unterminated count bracket", ln, s, pos)
    inner = s[pos + 1 : end]
    keyed = inner[-1:] == ":"
    if keyed:
        inner = inner[:-1]
    if inner == "?":
        return None, keyed, end + 1
    if _COUNT_DIGITS(inner):
        n = int(inner)
        if n <= MAX_COUNT:
            return n, keyed, end + 1
    elif not (inner.isascii() and inner.isdigit() and inner[0] != "0"):
        raise decode_error_at(
            "invalid_count",
            f"count [{inner[:20]}] must be 0, a decimal without leading zeros, or ?",
            ln,
            s,
            pos + 1,
        )
    raise decode_error_at(
        "limit_exceeded", f"declared count exceeds the limit of {MAX_COUNT}", ln, s, pos + 1
    )


def summary_counts(s: str, ln: int) -> list[int]:
    """The positional ``counts=`` of a ``##! summary`` trailer (§8.4), [] without them."""
    seen: set[str] = set()
    counts: list[int] | None = None
    for pair in s[len(SUMMARY) :].split():
        key, eq, value = pair.partition("=")
        if not eq or not key or key in seen:
            raise GCFDecodeError("invalid_summary", f"bad summary field {pair[:40]!r}", ln)
        seen.add(key)
        if key == "counts":
            if ":" in value:
                raise GCFDecodeError(
                    "invalid_summary",
                    "generic counts are positional; labeled counts are graph-only",
                    ln,
                )
            counts = []
            for entry in value.split(","):
                if not _COUNT_DIGITS(entry):
                    raise GCFDecodeError(
                        "invalid_summary", f"summary count {entry[:20]!r} is invalid", ln
                    )
                counts.append(int(entry))
    return counts if counts is not None else []
