"""Every lexical rule of GCF v3.5.3, written once, each citing its section of the spec.

Like tomli's ``_re.py`` or h11's ``_abnf.py``: a rule is a regex *source* string named after
its production; compiled patterns and the fast-path variants the codecs need (an anchored
match, a prefix match, a padded cell form, a bounded count) are derived from that one source
here, so a rule changes in exactly one place. Character classes are ASCII throughout: §2.3
forbids a Unicode-aware digit class, and §2a.1's ALPHA is ``[a-zA-Z]``.

Modules that read or write GCF (``scalar``, ``header``, ``generic``, ``graph``, ``keyed``,
and ``gcx1`` for the JSON number and surrogate class it shares) import their patterns from
here; none spells a rule of its own. (GCX1's own framing rules, a different format, stay in
``gcx1.py``.)

>>> NUMBER_RE.match("6.022E+23") is not None, NUMBER_RE.match("01") is None
(True, True)
>>> BARE_KEY_RE.match("user_id") is not None, BARE_KEY_RE.match("content-type") is None
(True, True)
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ATTACHMENT_INDENT",
    "BARE_FIRST",
    "BARE_KEY",
    "BARE_KEY_AT",
    "BARE_KEY_RE",
    "C0_CONTROL",
    "COUNT",
    "COUNT_10_RE",
    "COUNT_OR_DEFERRED",
    "DENSE_BARE_FIRST",
    "DENSE_SAFE_BARE",
    "DISTANCE_GROUP",
    "ESCAPE",
    "FIELD_CONTROL",
    "GRAPH_FIELD_SEP",
    "GROUP_HEADER",
    "GROUP_NAMES",
    "HEADER_FIELD_SEP",
    "HEADER_VALUE",
    "HEADER_VALUE_RE",
    "INDENT",
    "INDENT_WIDTH",
    "INLINE_ARRAY_LOOKALIKE",
    "ITEM_ID",
    "KV_LINE",
    "LIST_HEAD",
    "MEMBER_LINE",
    "MUST_QUOTE_CHAR",
    "NON_ASCII",
    "NUMBER",
    "NUMBER_CELL",
    "NUMBER_FIRST",
    "NUMBER_LIST_TEXT",
    "NUMBER_PREFIX",
    "NUMBER_RE",
    "NUMERIC_LIKE",
    "PLAIN_BRACKET",
    "QUICK_ATTACHMENT",
    "QUOTED_STRING",
    "RECORD_UNSAFE",
    "REFERENCE",
    "REFERENCE_SIGIL",
    "ROW_NOT_FIRST",
    "ROW_NOT_LAST",
    "SAFE_BARE",
    "SCORE_RE",
    "SUMMARY",
    "SURROGATE",
    "TRAILER",
    "VERSIONED_HEADER",
    "count",
    "is_comment",
]

# ---------------------------------------------------------------------------------------
# §2.3 JSON number grammar
# ---------------------------------------------------------------------------------------

# The pieces of §2.3's number: int's non-zero alternative, [ frac ] and [ exp ].
_INT_NONZERO: Final = "[1-9][0-9]*"
_OPT_FRAC_EXP: Final = r"(\.[0-9]+)?([eE][+-]?[0-9]+)?"
#: ``number = [ "-" ] int [ frac ] [ exp ]`` (§2.3, RFC 8259), ASCII digits only. Group 1 is
#: the fraction and group 2 the exponent: either one set means a double (§2.3.2).
NUMBER: Final = f"-?(?:0|{_INT_NONZERO}){_OPT_FRAC_EXP}"
#: A whole token that is a number.
NUMBER_RE: Final = re.compile(NUMBER + r"\Z")
#: A number at the start of the text (the ASCII stand-in for json's C scanner).
NUMBER_PREFIX: Final = re.compile(NUMBER)
#: A row cell that is one number, with the blanks §4.2 trims around it.
NUMBER_CELL: Final = re.compile(r"[ \t]*" + NUMBER + r"[ \t]*\Z")
# The characters NUMBER uses; with ',' and blanks, the only ones a comma-joined column of
# numbers can hold (a cheap pre-check before handing the column to json's scanner).
_NUMBER_CHARS: Final = r"\-+0-9.eE"
#: Text made of number characters, commas and blanks only.
NUMBER_LIST_TEXT: Final = re.compile(f"[{_NUMBER_CHARS}, \\t]*")
#: The first characters a number can have.
NUMBER_FIRST: Final = frozenset("-0123456789")

# ---------------------------------------------------------------------------------------
# §2.1 scalar precedence, §2.2 quoted strings, §2.4 the quoting obligation, §20
# ---------------------------------------------------------------------------------------

# Every non-string scalar (§2.1 rules 1-6) starts with one of these: '"' (quoted), '-'
# (null or a number), '~', '^', 't'/'f' (true/false) or an ASCII digit.
_SCALAR_FIRST: Final = '"-~^tf0123456789'
#: Printable ASCII characters after which a token can only be a bare string (§2.1 rule 7).
BARE_FIRST: Final = frozenset(chr(c) for c in range(0x21, 0x7F) if chr(c) not in _SCALAR_FIRST)

#: ``quoted-string = DQUOTE *char DQUOTE`` (§2.2); group 1 is the body, escapes undecoded.
#: Unrolled (``normal* (special normal*)*``) so long strings match in one fast loop instead
#: of one alternation per character (40x faster on an 8 MB string).
QUOTED_STRING: Final = re.compile(r'"([^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*)"', re.DOTALL)
#: ``escape`` (§2.2): group 1 the hex of ``\uXXXX``, else group 2 the escaped character.
ESCAPE: Final = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.DOTALL)
#: The control characters a quoted string must escape (§2.2 ``unescaped``).
C0_CONTROL: Final = re.compile(r"[\x00-\x1f]")
#: Surrogate code points: never Unicode scalar values, never literal text (§2.2, §20).
SURROGATE: Final = re.compile("[\ud800-\udfff]")
#: Any character outside ASCII.
NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")

#: Characters that force quoting wherever they stand (§2.4): quote, backslash, C0, C1 and the
#: non-ASCII whitespace the spec names (every other Unicode space is checked by category).
MUST_QUOTE_CHAR: Final = re.compile('["\\\\\x00-\x1f\x80-\x9f\u00a0\u2028\u2029\ufeff]')
#: Numeric-like starts (§2.4): ``+``/``-`` [``.``] digit, ``.`` digit, ``0`` digit.
NUMERIC_LIKE: Final = re.compile(r"[+-]\.?[0-9]|\.[0-9]|0[0-9]")
#: ``[ ... ]:``, which would read as an inline array header at the line level (§2.4).
INLINE_ARRAY_LOOKALIKE: Final = re.compile(r"\[[^\]]*\]:")

#: The encoder's fast path: strings certainly safe bare in every context (§2.4). Printable
#: ASCII without ``"``, ``\``, ``|``, ``,`` or ``[`` (no delimiter, no inline-array
#: lookalike) and no trailing space; a first character that is none of `` "#+-.0@^~`` (no
#: marker, no ``#@.`` prefix, no leading space, nothing numeric-like, no ``^{...}``); and
#: neither a NUMBER nor ``true``/``false`` (its first character already rules out NUMBER's
#: sign and zero, so the lookahead tests the rest of NUMBER only). It accepts a subset of
#: what ``needs_quote`` leaves bare (a property test holds it to that); everything else
#: takes the full check.
_SAFE_NOT_WORD: Final = f"(?!(?:true|false)\\Z|{_INT_NONZERO}{_OPT_FRAC_EXP}\\Z)"
_SAFE_REST: Final = r"(?:[ !#-+\--Z\]-{}~]*[!#-+\--Z\]-{}~])?\Z"
SAFE_BARE: Final = re.compile(_SAFE_NOT_WORD + r"[!$-*/1-9:-?A-Z\]_`a-{}]" + _SAFE_REST)

# ---------------------------------------------------------------------------------------
# §2a keys, §3 and §4 the header
# ---------------------------------------------------------------------------------------

#: ``bare-key = ( ALPHA / "_" ) *( ALPHA / DIGIT / "_" )`` (§2a.1); also §4's
#: ``header-key`` and the graph ``kind`` extension. ``str.isidentifier() and
#: str.isascii()`` is exactly this set, which the decoder's hot loop uses (a test holds the
#: two equal).
BARE_KEY: Final = r"[A-Za-z_][A-Za-z0-9_]*"
#: A whole bare key.
BARE_KEY_RE: Final = re.compile(BARE_KEY + r"\Z")
#: A bare key at a position.
BARE_KEY_AT: Final = re.compile(BARE_KEY)

#: ``header-value = 1*( %x21-7E )``, printable non-whitespace ASCII (§4); the same
#: production is the graph profile's qname, provenance and edge-type (§4, §20).
HEADER_VALUE: Final = r"[\x21-\x7e]+"
#: A whole header value (or graph positional field).
HEADER_VALUE_RE: Final = re.compile(HEADER_VALUE + r"\Z")
#: Header fields are separated by SP (§4 ``header``); a tab is not a separator.
HEADER_FIELD_SEP: Final = re.compile(r" +")
#: A future incompatible wire version, ``GCF2 ...`` (§19.1).
VERSIONED_HEADER: Final = re.compile(r"GCF[0-9]")

# ---------------------------------------------------------------------------------------
# §4 counts, §4.1 indentation, §8.4 trailer, §11 comments
# ---------------------------------------------------------------------------------------


def count(max_digits: int | None = None) -> str:
    """``count = "0" / ( DIGIT1-9 *DIGIT )`` (§4), optionally at most ``max_digits`` long.

    A bounded count keeps a declared size below a limit without converting it first.

    >>> count(), count(3)
    ('0|[1-9][0-9]*', '0|[1-9][0-9]{0,2}')
    """
    more = "*" if max_digits is None else f"{{0,{max_digits - 1}}}"
    return f"0|[1-9][0-9]{more}"


#: The unbounded count (§4).
COUNT: Final = count()
#: ``count-or-deferred = count / "?"`` (§4, §8.2), a whole token.
COUNT_OR_DEFERRED: Final = re.compile(f"(?:{COUNT}|\\?)\\Z")
#: A whole count of at most 10 digits (header integers, summary counts, bracket counts).
COUNT_10_RE: Final = re.compile(f"(?:{count(10)})\\Z")
#: ``[N]`` or ``[N:]`` (§4 ``count-bracket`` / ``keyed-bracket``) with N below 10**9, so
#: below the decoder's count limit with nothing left to check.
PLAIN_BRACKET: Final = re.compile(f"\\[({count(9)})(:?)\\]")
#: A row or item id prefix ``@N `` (§4 ``tabular-row``, ``expanded-item``); generic ids
#: are the item's index, so they are spelled as counts.
ITEM_ID: Final = re.compile(f"@({count(18)}) ")

#: One nesting level (§4.1).
INDENT_WIDTH: Final = 2
INDENT: Final = " " * INDENT_WIDTH
#: A traditional attachment's body sits two levels beneath its row (§7.4.4).
ATTACHMENT_INDENT: Final = INDENT * 2

#: The ``##!`` metadata line prefix and the trailer summary (§8.4).
TRAILER: Final = "##!"
SUMMARY: Final = "##! summary"


def is_comment(s: str) -> bool:
    """A comment line, without its indentation: ``#`` alone or ``# ...`` (§11).

    >>> is_comment("# note"), is_comment("#"), is_comment("## section")
    (True, True, False)
    """
    return s == "#" or s.startswith("# ")


# ---------------------------------------------------------------------------------------
# §4 generic line shapes (the decoder's quick routes; anything else takes the full parse)
# ---------------------------------------------------------------------------------------

#: ``kv-line`` with a bare key: group 1 the key, group 2 the value text.
KV_LINE: Final = re.compile(f"({BARE_KEY})=(.*)\\Z", re.DOTALL)
#: The other common object members with a bare key, told apart by the last group
#: matched: ``inline-array`` ``key[N]: values`` (key, count below 10**9, values text: the
#: last group is 3), ``object-section`` ``## key`` (4) and ``array-block`` ``## key [`` (5).
MEMBER_LINE: Final = re.compile(
    f"(?:({BARE_KEY})\\[({count(9)})\\]:(.*)|## ({BARE_KEY})|## ({BARE_KEY}) (?=\\[).*)\\Z",
    re.DOTALL,
)
#: The commonest ``.field`` attachments (§4 ``array-attachment``, ``object-attachment``)
#: with a bare name and a count below 10**9: ``.f [N]`` (name, count),
#: ``.f [N]: values`` (+ group 3), ``.f [N]{...}`` (+ group 4) and ``.f {}`` (name only).
QUICK_ATTACHMENT: Final = re.compile(
    f"\\.({BARE_KEY}) (?:\\[({count(9)})\\](?::(.*)|(\\{{.*))?|\\{{\\}})\\Z", re.DOTALL
)
#: Characters a tabular row (after its indentation) never starts with: blanks (trimmed
#: away), ``#`` (comment or section), ``.`` (attachment), ``@`` (an id prefix, which the
#: general row path reads).
ROW_NOT_FIRST: Final = frozenset(" \t#.@")
#: Characters a canonical line never ends with (trailing blanks, the CR of CRLF input).
ROW_NOT_LAST: Final = frozenset(" \t\r")

# ---------------------------------------------------------------------------------------
# §4-§6a, §10 the graph profile
# ---------------------------------------------------------------------------------------

#: Positional fields of node, edge and delta lines are whitespace-separated (§5).
GRAPH_FIELD_SEP: Final = re.compile(r"[ \t]+")
#: ``score = [ "-" ] 1*DIGIT "." 2DIGIT`` (§4, §5).
SCORE_RE: Final = re.compile(r"-?[0-9]+\.[0-9]{2}\Z")
#: ``group-header = "##" SP group-name [ SP count-bracket ... ]`` (§4, §6a): group 1 the
#: name, group 2 the bracket's content, group 3 what follows the bracket (must be blank).
GROUP_HEADER: Final = re.compile(r"##[ \t]+([^ \t\[]+)(?:[ \t]*\[([^\]]*)\](.*))?\Z")
#: The named distance groups, by distance (§6a); ``distance_N`` names the others.
GROUP_NAMES: Final = ("targets", "related", "extended")
#: ``"distance_" 1*DIGIT`` (§4 ``group-name``).
DISTANCE_GROUP: Final = re.compile(r"distance_([0-9]+)\Z")
#: Control characters (C0, DEL, C1) a positional graph field may not hold.
FIELD_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: What a gcf-pack-root-v1 record field may not hold: TAB/LF are its separators, and
#: blanks and controls would make two different records alike (§10.2).
RECORD_UNSAFE: Final = re.compile(r"[\x00-\x20\x7f]")

# ---------------------------------------------------------------------------------------
# The dense profile (gcfkit's extension, docs/extensions/dense.md "D")
# ---------------------------------------------------------------------------------------

#: A bare token beginning with this is a reference (D4.2); a literal is quoted (D4.3).
REFERENCE_SIGIL: Final = "$"
#: ``reference = "$" ref-name``, ``ref-name = 1*( ALPHA / DIGIT / "_" )`` (D4.1): a whole
#: token. Also the name part of a definition line ``$name=scalar``.
REFERENCE: Final = re.compile(r"\$[A-Za-z0-9_]+\Z")
#: The head of a list cell, ``"[" count "]:"`` (D5.1), at the start of a row cell. Group 1
#: is whatever stands between the brackets (no ``]``, and no ``|``, which ends a cell): a
#: token of this shape is a list cell, and text that is not a ``count`` there is an error
#: (``invalid_count``), never a string.
LIST_HEAD: Final = re.compile(r"\[([^\]|]*)\]:")
#: Printable ASCII after which a dense token can only be a bare string: BARE_FIRST
#: without the reference sigil.
DENSE_BARE_FIRST: Final = BARE_FIRST - {REFERENCE_SIGIL}
#: The dense encoder's fast path: SAFE_BARE without a leading ``$`` (D4.3).
DENSE_SAFE_BARE: Final = re.compile(_SAFE_NOT_WORD + r"[!%-*/1-9:-?A-Z\]_`a-{}]" + _SAFE_REST)
