"""The common scalar and key grammars (spec §2, §2a), written once for every codec.

Encoders use :func:`format_scalar`, :func:`format_key` and :func:`format_number`; decoders
use :func:`split_cells`, :func:`parse_scalar`, :func:`parse_key_at` and
:func:`parse_field_decl_at`. Everything here is a pure function on strings.
"""

from __future__ import annotations

import contextlib
import math
import re
from decimal import Decimal
from json.decoder import c_scanstring  # type: ignore[attr-defined]
from json.encoder import c_encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final

from .errors import GCFDecodeError, GCFEncodeError, GCFError, decode_error_at
from .grammar import (
    BARE_KEY,
    BARE_KEY_AT,
    BARE_KEY_RE,
    C0_CONTROL,
    ESCAPE,
    INLINE_ARRAY_LOOKALIKE,
    LIST_HEAD,
    MUST_QUOTE_CHAR,
    NON_ASCII,
    NUMBER_RE,
    NUMERIC_LIKE,
    QUOTED_STRING,
    SURROGATE,
)

__all__ = [
    "ATTACH",
    "INT64_MAX",
    "INT64_MIN",
    "MISSING",
    "Attach",
    "check_constant_token",
    "check_scalar_text",
    "format_key",
    "format_number",
    "format_scalar",
    "is_bare_key",
    "needs_quote",
    "parse_field_decl_at",
    "parse_id_field_decl_at",
    "parse_key_at",
    "parse_quoted_at",
    "parse_scalar",
    "quote_string",
    "split_cells",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
_TWO_53: Final = float(2**53)


class _Missing:
    """The ``~`` cell: the field is absent from this row (§7.4.2)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


class Attach:
    """A ``^`` or ``^{fields}`` cell: the value is in an attachment body (§7.4.4)."""

    __slots__ = ("schema",)

    def __init__(self, schema: tuple[str, ...] | None) -> None:
        self.schema = schema

    def __repr__(self) -> str:
        return f"Attach({self.schema!r})"


MISSING: Final = _Missing()
ATTACH: Final = Attach(None)

_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_QUOTE_TABLE: Final = {
    **{i: f"\\u{i:04x}" for i in range(0x20)},
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}

# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def quote_string(s: str) -> str:
    """Quote ``s`` with the canonical JSON escapes of §2.2 (non-ASCII stays literal).

    >>> quote_string('say "hi"\\n')
    '"say \\\\"hi\\\\"\\\\n"'
    """
    if not s.isascii() and SURROGATE.search(s):
        raise GCFEncodeError(
            "invalid_surrogate",
            f"string {s[:40]!r} holds a lone surrogate, which is not a Unicode scalar value; "
            "fix the producer's string",
        )
    if _C_QUOTE is not None:
        return _C_QUOTE(s)  # type: ignore[no-any-return]
    return '"' + s.translate(_QUOTE_TABLE) + '"'


# The stdlib json module's C helpers where it has them (like its own c_make_scanner, they
# may be absent): json's escapes are exactly §2.2's canonical ones with non-ASCII left
# literal, which tests/test_speedups.py checks on every code point but the surrogates
# (refused before either runs).
_C_QUOTE: Final = c_encode_basestring


def _has_unicode_space(s: str) -> bool:
    return any(c.isspace() for c in NON_ASCII.findall(s))


def _is_field_decl(s: str) -> bool:
    try:
        _, end = parse_field_decl_at(s, 0)
    except GCFError:
        return False
    return end == len(s)


def needs_quote(s: str, delim: str = "") -> bool:
    """True when ``s`` must be quoted to decode as this same string (§2.4).

    ``delim`` is the active context delimiter: ``"|"`` in tabular rows, ``","`` in inline
    arrays, ``""`` in key=value and item contexts.

    >>> needs_quote("true"), needs_quote("1.5x"), needs_quote("a|b", "|"), needs_quote("ok")
    (True, False, True, False)
    """
    if not s:
        return True
    first = s[0]
    if s in ("-", "~", "^", "true", "false"):
        return True
    if first in "#@." or first.isspace() or s[-1].isspace():
        return True
    # Quote every ^{...} token, not only valid declarations: a decoder rejects a bare
    # ^{...} cell whose declaration is malformed (§2.1 rule 4), so it cannot stay bare.
    if first == "^" and s.startswith("^{") and (s.endswith("}") or _is_field_decl(s[1:])):
        return True
    if NUMBER_RE.match(s) or NUMERIC_LIKE.match(s):
        return True
    if MUST_QUOTE_CHAR.search(s):
        return True
    if delim and delim in s:
        return True
    if "[" in s and INLINE_ARRAY_LOOKALIKE.search(s):
        return True
    return not s.isascii() and _has_unicode_space(s)


def format_number(value: int | float) -> str:
    """Canonical number text (§2.3.1) within the numeric domain (§2.3.2).

    >>> [format_number(v) for v in (-0.0, 3.0, 0.1, 1e-7, 2.0**53, -(2**63))]
    ['0', '3', '0.1', '1e-7', '9.007199254740992e+15', '-9223372036854775808']
    """
    if isinstance(value, int):
        if value < INT64_MIN or value > INT64_MAX:
            raise GCFEncodeError(
                "out_of_range",
                f"integer {value} is outside int64 [-2^63, 2^63-1]; "
                "model it as a string at the producer",
            )
        return str(value)
    if not math.isfinite(value):
        raise GCFEncodeError(
            "out_of_range",
            f"{value!r} is not a JSON number; convert NaN/Infinity to null or a string first",
        )
    mag = abs(value)
    if 1e-4 <= mag < _TWO_53:
        # The common case: repr() is the shortest round-trip spelling, already plain here.
        r = repr(value)
        return r[:-2] if r.endswith(".0") else r
    if value == 0:
        return "0"
    sign, digits_t, exp = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    assert isinstance(exp, int)
    # value = 0.<digits> * 10**point, with `point` the position of the decimal point.
    point = len(digits_t) + exp
    prefix = "-" if sign else ""
    if 1e-6 <= mag < _TWO_53:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return prefix + digits + "0" * (point - len(digits))
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    e = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{prefix}{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def format_scalar(value: Any, delim: str = "") -> str:
    """Canonical wire text of a JSON scalar in a context whose delimiter is ``delim``.

    Strings holding ``|`` or ``,`` are quoted in every context, as canonical output does.

    >>> [format_scalar(v, "|") for v in (None, True, 2.5, "a|b", "plain")]
    ['-', 'true', '2.5', '"a|b"', 'plain']
    """
    if isinstance(value, str):
        # Canonical output quotes both delimiters in every context (the conformance
        # fixtures do), which is a superset of the §2.4 active-delimiter obligation.
        if needs_quote(value, delim) or "|" in value or "," in value:
            return quote_string(value)
        return _checked(value)
    if value is None:
        return "-"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return format_number(value)
    raise GCFEncodeError(
        "unsupported_type",
        f"{type(value).__name__} is not a JSON scalar (str, int, float, bool, None)",
    )


_STRING_TEXT: dict[str, str] = {}
_STRING_TEXT_LEN: Final = 24
_STRING_TEXT_MAX: Final = 4096


def string_text(s: str) -> str:
    """``format_scalar(s)`` of a ``str``, remembered for short strings.

    The full §2.4 check is slow, and the values that need it in a table (non-ASCII names,
    quoted statuses) repeat; long strings are mostly unique, so they are not kept.

    >>> string_text("Zoë"), string_text("a,b")
    ('Zoë', '"a,b"')
    """
    text = _STRING_TEXT.get(s)
    if text is None:
        text = format_scalar(s)
        if len(s) <= _STRING_TEXT_LEN and len(_STRING_TEXT) < _STRING_TEXT_MAX:
            _STRING_TEXT[s] = text
    return text


def _checked(s: str) -> str:
    if not s.isascii() and SURROGATE.search(s):
        quote_string(s)  # raises invalid_surrogate
    return s


def is_bare_key(key: str) -> bool:
    """True when ``key`` may be written without quotes (§2a.1)."""
    return BARE_KEY_RE.match(key) is not None


def format_key(key: str) -> str:
    """A key or field name: bare when the grammar allows, else quoted (§2a).

    >>> format_key("name"), format_key("content-type"), format_key("")
    ('name', '"content-type"', '""')
    """
    if not isinstance(key, str):
        raise GCFEncodeError(
            "unsupported_type",
            f"object key {key!r} is a {type(key).__name__}; JSON keys are strings",
        )
    return key if BARE_KEY_RE.match(key) else quote_string(key)


# ---------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------


def _unescape(body: str, line: int | None, text: str, pos: int) -> str:
    """The escapes of ``body`` decoded; ``body`` starts at ``text[pos]`` (for the column)."""

    def repl(m: re.Match[str]) -> str:
        hexd, ch = m.group(1), m.group(2)
        if hexd is None:
            try:
                return _SIMPLE_ESCAPES[ch]
            except KeyError:
                raise decode_error_at(
                    "invalid_escape",
                    f"\\{ch} is not a JSON escape; use one of "
                    '\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX',
                    line,
                    text,
                    pos + m.start(),
                ) from None
        return chr(int(hexd, 16))

    out = ESCAPE.sub(repl, body)
    if ESCAPE.sub("", body).count("\\"):
        raise decode_error_at(
            "invalid_escape",
            "incomplete escape sequence at end of string",
            line,
            text,
            pos + body.rfind("\\"),
        )
    if SURROGATE.search(out):
        out = _join_surrogates(out, line, text, pos - 1)
    return out


def _join_surrogates(s: str, line: int | None, text: str, pos: int) -> str:
    """Surrogate pairs of unescaped ``s`` joined; the string starts at ``text[pos]``."""
    chars: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        o = ord(c)
        if 0xD800 <= o <= 0xDBFF:
            if i + 1 < n and 0xDC00 <= ord(s[i + 1]) <= 0xDFFF:
                chars.append(chr(0x10000 + ((o - 0xD800) << 10) + (ord(s[i + 1]) - 0xDC00)))
                i += 2
                continue
            raise decode_error_at(
                "invalid_surrogate",
                "high surrogate not followed by a low surrogate",
                line,
                text,
                pos,
            )
        if 0xDC00 <= o <= 0xDFFF:
            raise decode_error_at("invalid_surrogate", "isolated low surrogate", line, text, pos)
        chars.append(c)
        i += 1
    return "".join(chars)


def parse_quoted_at(text: str, pos: int, line: int | None = None) -> tuple[str, int]:
    """Parse the quoted string starting at ``text[pos] == '"'``; return (value, end).

    >>> parse_quoted_at('"a\\\\tb"|x', 0)
    ('a\\tb', 6)
    """
    if _C_SCAN is not None:
        # json's C scanner reads the same strings (JSON's escapes, no raw control
        # characters) 9x faster; a refusal, or a surrogate in the result (lone, or a pair
        # it left unjoined), goes to the reference path below, which reports the error.
        try:
            body, end = _C_SCAN(text, pos + 1, True)
        except ValueError:
            pass
        else:
            if body.isascii() or not SURROGATE.search(body):
                return body, end
    m = QUOTED_STRING.match(text, pos)
    if m is None:
        rest = text[pos + 1 :]
        bad = C0_CONTROL.search(rest.split('"', 1)[0]) if '"' in rest else None
        if bad is not None:
            raise decode_error_at(
                "invalid_escape",
                f"control character U+{ord(bad.group()):04X} inside a quoted string must be "
                "escaped",
                line,
                text,
                pos + 1 + bad.start(),
            )
        raise decode_error_at(
            "unterminated_quote",
            'quoted string has no closing quote; close it or escape the inner quote as \\"',
            line,
            text,
            pos,
        )
    body = m.group(1)
    if "\\" in body:
        body = _unescape(body, line, text, pos + 1)
    elif not body.isascii() and (sur := SURROGATE.search(body)) is not None:
        raise decode_error_at(
            "invalid_surrogate",
            "literal surrogate code point in string",
            line,
            text,
            pos + 1 + sur.start(),
        )
    return body, m.end()


_C_SCAN: Final = c_scanstring


def check_scalar_text(text: str, line: int | None) -> None:
    """Reject literal surrogates in bare text (only possible when decoding ``str`` input)."""
    if not text.isascii() and (sur := SURROGATE.search(text)) is not None:
        raise decode_error_at(
            "invalid_surrogate", "literal surrogate code point", line, text, sur.start()
        )


def split_cells(
    text: str, delim: str, line: int | None = None, *, lists: bool = False
) -> list[str]:
    """Split ``text`` on ``delim`` outside quoted strings; tokens come back trimmed.

    With ``lists`` (dense rows, dense.md D5.1) a list cell's quoted elements may hold the
    delimiter too.

    >>> split_cells('a | "b|c" |d', "|")
    ['a', '"b|c"', 'd']
    >>> split_cells('[2]: "x|y",z|1', "|", lists=True)
    ['[2]: "x|y",z', '1']
    """
    if '"' not in text:
        return [t.strip(" \t") for t in text.split(delim)]
    out: list[str] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos < n and text[pos] == '"':
            _, end = parse_quoted_at(text, pos, line)
            nxt = text.find(delim, end)
            stop = n if nxt < 0 else nxt
            if text[end:stop].strip(" \t"):
                raise decode_error_at(
                    "trailing_characters",
                    f"characters {text[end:stop].strip()!r} after a closing quote",
                    line,
                    text,
                    end,
                )
            out.append(text[pos:end])
        else:
            start = pos
            if text.startswith("^{", pos):
                # An inline-schema cell's quoted field names may hold the delimiter.
                # A malformed one is reported by parse_scalar on the whole token.
                with contextlib.suppress(GCFError):
                    _, pos = parse_field_decl_at(text, pos + 1, line)
            elif lists and text.startswith("[", pos) and LIST_HEAD.match(text, pos):
                while True:
                    quote = text.find('"', pos)
                    bar = text.find(delim, pos)
                    if quote < 0 or 0 <= bar < quote:
                        break
                    _, pos = parse_quoted_at(text, quote, line)
            nxt = text.find(delim, pos)
            stop = n if nxt < 0 else nxt
            out.append(text[start:stop].rstrip(" \t"))
        if nxt < 0:
            return out
        pos = nxt + 1


def _parse_number(tok: str, m: re.Match[str], line: int | None) -> int | float:
    if m.group(1) is None and m.group(2) is None:
        # Bound the digit count before int(): huge literals are out of range anyway, and
        # int() of a 100 MB literal would be slow (or refused by the str-digits limit).
        if len(tok) > 20:
            raise GCFDecodeError(
                "out_of_range",
                f"integer literal {tok[:24]}... is outside int64; model it as a string",
                line,
            )
        v = int(tok)
        if v < INT64_MIN or v > INT64_MAX:
            raise GCFDecodeError(
                "out_of_range",
                f"integer {tok} is outside int64 [-2^63, 2^63-1]; model it as a string",
                line,
            )
        return v
    f = float(tok)
    if math.isinf(f):
        raise GCFDecodeError(
            "out_of_range",
            f"number {tok[:40]} overflows a double; model it as a string",
            line,
        )
    return f


def parse_scalar(tok: str, line: int | None = None, *, in_row: bool = False) -> Any:
    """Decode one trimmed scalar token by the precedence of §2.1.

    In a tabular row cell (``in_row=True``) it may also return :data:`MISSING` for ``~``
    or an :class:`Attach` for ``^`` / ``^{fields}``; elsewhere those are errors.

    >>> [parse_scalar(t) for t in ('"01"', '-', 'true', '12', '1.5e3', '01', 'x y')]
    ['01', None, True, 12, 1500.0, '01', 'x y']
    """
    if not tok:
        return tok
    c = tok[0]
    if c == '"':
        value, end = parse_quoted_at(tok, 0, line)
        if end != len(tok):
            raise decode_error_at(
                "trailing_characters",
                f"characters {tok[end:]!r} after the closing quote; quote the whole value",
                line,
                tok,
                end,
            )
        return value
    if c == "-" and len(tok) == 1:
        return None
    if c == "~" and len(tok) == 1:
        if in_row:
            return MISSING
        raise GCFDecodeError(
            "invalid_missing", "~ (absent) is only valid in a tabular row cell", line
        )
    if c == "^":
        if tok == "^":
            if in_row:
                return ATTACH
            raise GCFDecodeError(
                "invalid_attachment_marker", "^ is only valid in a tabular row cell", line
            )
        if tok.startswith("^{") and tok.endswith("}"):
            if not in_row:
                raise GCFDecodeError(
                    "invalid_attachment_marker",
                    "^{...} is only valid in a tabular row cell",
                    line,
                )
            try:
                fields, end = parse_field_decl_at(tok, 1, line)
            except GCFError as e:
                raise GCFDecodeError(
                    "invalid_attachment_marker", f"bad inline schema: {e.detail}", line
                ) from None
            if end != len(tok):
                raise GCFDecodeError("invalid_attachment_marker", "bad inline schema", line)
            return Attach(tuple(fields))
    if c == "t" and tok == "true":
        return True
    if c == "f" and tok == "false":
        return False
    if c == "-" or "0" <= c <= "9":
        m = NUMBER_RE.match(tok)
        if m is not None:
            return _parse_number(tok, m, line)
    if not tok.isascii():
        check_scalar_text(tok, line)
    return tok


def parse_key_at(text: str, pos: int, line: int | None = None) -> tuple[str, int]:
    """Parse a bare or quoted key at ``pos``; return (key, end).

    >>> parse_key_at('"a=b"=1', 0), parse_key_at("name[2]: x", 0)
    (('a=b', 5), ('name', 4))
    """
    if pos < len(text) and text[pos] == '"':
        return parse_quoted_at(text, pos, line)
    m = BARE_KEY_AT.match(text, pos)
    if m is None:
        raise decode_error_at(
            "invalid_key",
            f"expected a key at column {pos + 1} of {text[:60]!r}; "
            f"quote keys that are not {BARE_KEY}",
            line,
            text,
            pos,
        )
    return m.group(), m.end()


def parse_field_decl_at(
    text: str,
    pos: int,
    line: int | None = None,
    *,
    constants: list[tuple[int, str]] | None = None,
    dense: bool = True,
) -> tuple[list[str], int]:
    """Parse ``{f1,f2,...}`` at ``pos`` (§2a.3); return (names, end). Duplicates are rejected.

    With ``constants`` (a list to fill, dense profile D6.1, or with ``dense=False`` the
    reference's v3.6.0 constant columns) a name may be followed by ``=value``: each
    constant column's index and value token are appended to it.

    >>> parse_field_decl_at('{id,"a,b",c}', 0)
    (['id', 'a,b', 'c'], 12)
    >>> consts: list[tuple[int, str]] = []
    >>> parse_field_decl_at('{id,t=commit,u="x,y"}', 0, constants=consts), consts
    ((['id', 't', 'u'], 21), [(1, 'commit'), (2, '"x,y"')])
    """
    names, _, end = _field_decl(text, pos, line, marks=False, constants=constants, dense=dense)
    return names, end


def parse_id_field_decl_at(
    text: str,
    pos: int,
    line: int | None = None,
    *,
    constants: list[tuple[int, str]] | None = None,
) -> tuple[list[str], int, int]:
    """Parse a declaration in which one name may carry the ``@`` of a delta identity column
    (§10a.1) or of a value-grouped table's key column (the reference's v3.6.0 §7.4.8);
    return (names, index of the marked name or -1, end). The mark is syntax only outside
    quotes: a quoted ``"@x"`` is an ordinary name. ``constants`` as in
    :func:`parse_field_decl_at` (v3.6.0 constant columns).

    >>> parse_id_field_decl_at('{@id,"@v"}', 0)
    (['id', '@v'], 0, 10)
    """
    return _field_decl(text, pos, line, marks=True, constants=constants, dense=False)


def _field_decl(
    text: str,
    pos: int,
    line: int | None,
    *,
    marks: bool,
    constants: list[tuple[int, str]] | None = None,
    dense: bool = True,
) -> tuple[list[str], int, int]:
    n = len(text)
    if pos >= n or text[pos] != "{":
        raise decode_error_at("invalid_line", "expected a field declaration {...}", line, text, pos)
    pos += 1
    names: list[str] = []
    seen: set[str] = set()
    marked = -1
    while True:
        if marks and text[pos : pos + 1] == "@":
            if marked >= 0:
                raise decode_error_at(
                    "invalid_key",
                    "a field declaration may mark only one @ id field",
                    line,
                    text,
                    pos,
                )
            marked = len(names)
            pos += 1
        start = pos
        key, pos = parse_key_at(text, pos, line)
        if key in seen:
            raise decode_error_at(
                "duplicate_field_name", f"field {key!r} is declared twice", line, text, start
            )
        seen.add(key)
        names.append(key)
        if constants is not None and text.startswith("=", pos):
            pos = _constant_at(text, pos + 1, len(names) - 1, constants, line, dense)
        if pos >= n:
            raise decode_error_at("invalid_line", "unterminated field declaration", line, text, n)
        c = text[pos]
        pos += 1
        if c == "}":
            return names, marked, pos
        if c != ",":
            raise decode_error_at(
                "invalid_line",
                f"unexpected {c!r} in a field declaration; separate names with ','",
                line,
                text,
                pos - 1,
            )


def check_constant_token(tok: str, line: int | None, text: str, pos: int, *, dense: bool) -> None:
    """Reject a constant's value token (at ``text[pos]``) that is no single scalar:
    empty, ``~``, an attachment marker, or in a dense payload a list cell (D6.1). The
    reference's v3.6.0 forms (``dense=False``) read ``^{x`` without its ``}`` as the
    string it is in a row cell; dense rejects any ``^{`` (``invalid_constant``).

    >>> check_constant_token("~", 2, "{a=~}", 3, dense=False)
    Traceback (most recent call last):
    gcfkit.errors.GCFDecodeError: error[invalid_constant] line 2: ...
    """
    if (
        not tok
        or tok in ("~", "^")
        or (tok.startswith("^{") and (dense or tok.endswith("}")))
        or (dense and LIST_HEAD.match(tok))
    ):
        raise decode_error_at(
            "invalid_constant",
            f"constant value {tok[:30]!r} must be one scalar "
            "(not empty, ~, ^ or ^{...}" + (" or a list cell)" if dense else ")"),
            line,
            text,
            pos,
        )


def _constant_at(
    text: str,
    pos: int,
    index: int,
    constants: list[tuple[int, str]],
    line: int | None,
    dense: bool,
) -> int:
    """Read the value token of a constant column (dense D6.1, or the reference's v3.6.0
    §7.4.7) at ``pos``; return its end."""
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    if text.startswith('"', pos):
        _, end = parse_quoted_at(text, pos, line)
    else:
        end = pos
        while end < n and text[end] not in ",}":
            end += 1
    tok = text[pos:end].strip(" \t")
    check_constant_token(tok, line, text, pos, dense=dense)
    constants.append((index, tok))
    while end < n and text[end] in " \t":
        end += 1
    return end
