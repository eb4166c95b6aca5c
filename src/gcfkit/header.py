"""The payload header line (spec §3), shared by every decoder and encoder.

``GCF profile=<profile> key=value ...``: the profile comes first, field names are bare keys
and unique, values are printable non-whitespace ASCII (§4 ``header-value``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from .errors import ErrorCode, GCFDecodeError, GCFEncodeError, GCFError, decode_error_at
from .grammar import BARE_KEY_RE, HEADER_FIELD_SEP, HEADER_VALUE_RE, VERSIONED_HEADER

__all__ = [
    "PROFILES",
    "Header",
    "check_header_value",
    "dense_header",
    "first_line",
    "format_header",
    "parse_header",
    "to_text",
]

#: The profiles of §3.1, and gcfkit's dense profile (docs/extensions/dense.md), which every
#: v3.5.3 decoder rejects as an unknown profile and gcfkit's decoders each refuse by name.
PROFILES: Final = ("generic", "graph", "dense")


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
            "unknown_profile", f"profile={profile}: expected generic, graph (or dense)", line
        )
    fields: dict[str, str] = {}
    for tok in tokens[2:]:
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
    return Header(profile, fields)


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
    head = "GCF profile=" + profile
    if not pairs:
        return head
    if code is None:
        code = "invalid_graph" if profile == "graph" else "malformed_header_field"
    parts = [head]
    parts.extend(f"{k}={check_header_value(k, v, code)}" for k, v in pairs)
    return " ".join(parts)


def dense_header(tool: str | None = None) -> str:
    """The dense profile's header line (docs/extensions/dense.md D2), with ``tool=`` when
    given: the one place it is spelled, for the encoders and for the accelerated decoder,
    which reads the line as this writes it.

    >>> dense_header(), dense_header("git")
    ('GCF profile=dense', 'GCF profile=dense tool=git')
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
