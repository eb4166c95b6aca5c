"""The payload header line (spec §3), shared by every decoder and encoder.

``GCF profile=<profile> key=value ...``: the profile comes first, field names are bare keys
and unique, values are printable non-whitespace ASCII (§4 ``header-value``). gcfkit's dense
profile writes :data:`DENSE_MAGIC` in place of ``GCF profile=dense`` (dense.md D2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from .errors import ErrorCode, GCFDecodeError, GCFEncodeError, GCFError, decode_error_at
from .grammar import BARE_KEY_RE, HEADER_FIELD_SEP, HEADER_VALUE_RE, VERSIONED_HEADER

__all__ = [
    "DENSE_MAGIC",
    "PROFILES",
    "Header",
    "Spec",
    "check_generic_header",
    "check_header_value",
    "check_spec",
    "dense_header",
    "dense_header_line",
    "first_line",
    "format_header",
    "parse_header",
    "to_text",
]

#: The profiles of §3.1 (``profile=``).
PROFILES: Final = ("generic", "graph")

#: The first word of a dense payload (docs/extensions/dense.md D2), where a GCF payload
#: has ``GCF profile=``: every v3.5.3 decoder stops at line 1, as the header grammar
#: (``"GCF" SP "profile="``) and the plainest check (``startswith("GCF ")``, which is all a
#: graph decoder that skips unknown fields needs) both fail there. Its fields follow as
#: ``key=value`` pairs; :class:`Header` names its profile ``dense``.
DENSE_MAGIC: Final = "GCF-dense"


def dense_header(line: str) -> bool:
    """True when header ``line`` (no terminator) opens a dense payload.

    >>> dense_header("GCF-dense tool=x"), dense_header("GCF profile=generic")
    (True, False)
    """
    return line == DENSE_MAGIC or line.startswith(DENSE_MAGIC + " ")


#: Which GCF a generic codec call speaks: v3.5.3 (the normative spec), or v3.5.3 with the
#: table forms the reference implementation writes as v3.6.0 (gcfkit.generic.v360).
Spec = Literal["3.5.3", "3.6.0"]


def check_spec(spec: str) -> bool:
    """True for ``"3.6.0"``, False for ``"3.5.3"``; any other value is a ``ValueError``.

    >>> check_spec("3.6.0"), check_spec("3.5.3")
    (True, False)
    """
    if spec not in get_args(Spec):
        raise ValueError(f"spec must be '3.5.3' or '3.6.0', not {spec!r}")
    return spec == "3.6.0"


@dataclass(frozen=True)
class Header:
    """A parsed header line: the profile and the other fields in wire order.

    >>> h = parse_header("GCF profile=graph tool=t symbols=2")
    >>> h.profile, h.fields
    ('graph', {'tool': 't', 'symbols': '2'})
    """

    profile: str
    fields: dict[str, str] = field(default_factory=dict)

    def get(self, key: str, default: str = "") -> str:
        """The value of ``key``, or ``default`` when the header does not carry it."""
        return self.fields.get(key, default)

    def flag(self, key: str, line: int | None = 1) -> bool:
        """A boolean field (``session``, ``delta``, ``unchanged``); absent means false.

        >>> parse_header("GCF profile=graph delta=true").flag("delta")
        True
        """
        value = self.fields.get(key)
        if value is None or value == "false":
            return False
        if value == "true":
            return True
        raise GCFDecodeError(
            "malformed_header_field", f"{key}={value}: a boolean field is true or false", line
        )

    def count(self, key: str, line: int | None = 1) -> int | None:
        """A non-negative integer field (``symbols``, ``budget``...), None when absent.

        >>> parse_header("GCF profile=graph budget=5000").count("budget")
        5000
        """
        value = self.fields.get(key)
        if value is None:
            return None
        if not value.isascii() or not value.isdigit() or (len(value) > 1 and value[0] == "0"):
            raise GCFDecodeError(
                "malformed_header_field",
                f"{key}={value}: expected a non-negative integer without leading zeros",
                line,
            )
        if len(value) > 19:
            raise GCFDecodeError("out_of_range", f"{key}={value[:24]}... is outside int64", line)
        return int(value)


def first_line(text: str) -> str:
    """The header line of a payload: its text up to the first LF (the CR of CRLF kept).

    >>> first_line("GCF profile=generic\\nx=1\\n")
    'GCF profile=generic'
    """
    end = text.find("\n")
    return text if end < 0 else text[:end]


def parse_header(text: str, line: int | None = 1) -> Header:
    """Parse the header line (without its line terminator; a trailing CR is tolerated).

    >>> parse_header("GCF profile=generic tool=search").get("tool")
    'search'
    >>> parse_header("GCF tool=x")
    Traceback (most recent call last):
    gcfkit.errors.GCFDecodeError: error[missing_profile] line 1: ...
    """
    tokens = HEADER_FIELD_SEP.split(text.rstrip("\r").rstrip(" "))
    if tokens[0] == DENSE_MAGIC:
        return Header("dense", _fields(tokens[1:], line))
    if tokens[0] != "GCF":
        if VERSIONED_HEADER.match(tokens[0]):
            # §19.1: a future incompatible version; no best-effort parsing.
            raise GCFDecodeError(
                "missing_header", f"unsupported GCF version prefix {tokens[0][:8]!r}", line
            )
        raise GCFDecodeError(
            "missing_header",
            f"a payload starts with 'GCF profile=...', not {text[:40]!r}",
            line,
        )
    if len(tokens) < 2 or not tokens[1].startswith("profile="):
        raise GCFDecodeError(
            "missing_profile",
            "the header needs profile=generic or profile=graph right after GCF",
            line,
        )
    profile = tokens[1][len("profile=") :]
    if profile not in PROFILES:
        raise GCFDecodeError(
            "unknown_profile",
            f"profile={profile}: expected generic or graph"
            + (f" (a dense payload starts {DENSE_MAGIC})" if profile == "dense" else ""),
            line,
        )
    return Header(profile, _fields(tokens[2:], line))


def _fields(tokens: list[str], line: int | None) -> dict[str, str]:
    fields: dict[str, str] = {}
    for tok in tokens:
        key, eq, value = tok.partition("=")
        if not eq or not BARE_KEY_RE.match(key) or not HEADER_VALUE_RE.match(value):
            raise decode_error_at(
                "malformed_header_field",
                f"header field {tok[:40]!r} is not key=value (printable ASCII, no spaces)",
                line,
                f" {tok}",
                1,
            )
        if key in fields or key == "profile":
            raise decode_error_at(
                "duplicate_header_field",
                f"header field {key} appears twice",
                line,
                f" {tok}",
                1,
            )
        fields[key] = value
    return fields


# Where a payload of another profile is read, by (dense wanted?, its profile).
_ELSEWHERE: Final = {
    (False, "graph"): "this is a graph-profile payload; decode it with gcfkit.graph.loads",
    (False, "dense"): "this is a dense-profile payload (a gcfkit extension of GCF, "
    "docs/extensions/dense.md); read it with gcfkit.dense.loads or gcfkit.decode",
    (True, "generic"): "a generic-profile payload is not dense; read it with gcfkit.decode",
    (True, "graph"): "a graph-profile payload is not dense; read it with gcfkit.decode",
}


def check_generic_header(header: Header, dense: bool, accept_answers: bool) -> None:
    """What the generic decoder accepts of a parsed header: its profile (generic, or with
    ``dense`` dense), integer ``tokens``/``count``, and a delta or unchanged answer only
    when ``accept_answers`` (never in a dense payload); ``unsupported_profile`` otherwise.

    >>> check_generic_header(parse_header("GCF profile=graph"), False, False)
    Traceback (most recent call last):
    gcfkit.errors.GCFDecodeError: error[unsupported_profile] line 1: ...
    """
    if header.profile != ("dense" if dense else "generic"):
        raise GCFDecodeError("unsupported_profile", _ELSEWHERE[dense, header.profile], 1)
    for name in ("tokens", "count"):
        header.count(name)
    if header.flag("delta") | header.flag("unchanged"):
        if dense:
            raise GCFDecodeError(
                "unsupported_profile", "a dense payload is never a delta answer", 1
            )
        if not accept_answers:
            raise GCFDecodeError(
                "unsupported_profile",
                "this is a generic delta/unchanged payload; decode it with "
                "gcfkit.keyed.loads_delta",
                1,
            )


def check_header_value(key: str, value: str, code: ErrorCode = "invalid_graph") -> str:
    """Return ``value`` if it can be written as header field ``key``, else raise ``code``.

    >>> check_header_value("tool", "search")
    'search'
    """
    if not isinstance(value, str) or not HEADER_VALUE_RE.match(value):
        raise GCFEncodeError(
            code,
            f"header field {key}={value!r:.40}: values are non-empty printable ASCII "
            "without spaces",
        )
    return value


def format_header(
    profile: str, pairs: Sequence[tuple[str, str]] = (), *, code: ErrorCode | None = None
) -> str:
    """The header line (no terminator) for ``profile`` and the ``(key, value)`` pairs.

    Every header gcfkit writes is built here. Each value is checked against §4's
    ``header-value``; a bad one raises ``code`` (by default ``invalid_graph`` for the graph
    profile, whose values come from a :class:`~gcfkit.graph.Graph`, and
    ``malformed_header_field`` for the generic profile).

    >>> format_header("graph", [("tool", "t"), ("symbols", "0")])
    'GCF profile=graph tool=t symbols=0'
    >>> format_header("generic")
    'GCF profile=generic'
    """
    head = DENSE_MAGIC if profile == "dense" else "GCF profile=" + profile
    if not pairs:
        return head
    if code is None:
        code = "invalid_graph" if profile == "graph" else "malformed_header_field"
    parts = [head]
    parts.extend(f"{k}={check_header_value(k, v, code)}" for k, v in pairs)
    return " ".join(parts)


def dense_header_line(tool: str | None = None) -> str:
    """The dense profile's header line, with ``tool=`` when given: what the encoders write
    and the accelerated decoder reads (its only other form is one ``tool=`` field).

    >>> dense_header_line(), dense_header_line("git")
    ('GCF-dense', 'GCF-dense tool=git')
    """
    return format_header("dense", [] if tool is None else [("tool", tool)])


def to_text(data: str | bytes) -> str:
    """A payload as ``str``: bytes must be UTF-8 (else ``invalid_utf8`` with its line).

    >>> to_text(b"GCF profile=generic\\n")
    'GCF profile=generic\\n'
    """
    if isinstance(data, str):
        return data
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise GCFError("unsupported_type", f"a payload is str or bytes, not {type(data).__name__}")
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        # The column counts the characters before the bad byte in its line, as ``doc`` (the
        # payload with U+FFFD for what is not UTF-8) shows them.
        start = raw.rfind(b"\n", 0, e.start) + 1
        col = len(raw[start : e.start].decode("utf-8", "replace")) + 1
        raise GCFDecodeError(
            "invalid_utf8",
            f"malformed UTF-8 at byte {e.start}; the payload must be UTF-8",
            line,
            doc=raw.decode("utf-8", "replace"),
            colno=col,
        ) from None
