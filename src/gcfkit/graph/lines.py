"""The graph profile's line grammar (spec §4, §5, §6a, §8.2, §11), shared by the snapshot
decoder (:mod:`gcfkit.graph.decoder`) and the delta decoder (:mod:`gcfkit.graph.delta`).

The graph body is flat: :func:`payload_lines` yields the meaningful lines, and the helpers
below read the positional pieces those lines are made of (group headers, ``@N`` ids,
scores, fields) with the error category each context asks for.

>>> header, body = payload_lines("GCF profile=graph\\n# note\\n## targets\\n@0 fn a 0.50 lsp\\n")
>>> header.profile, list(body)
('graph', [(3, '## targets'), (4, '@0 fn a 0.50 lsp')])
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from ..errors import ErrorCode, GCFDecodeError, decode_error_at
from ..grammar import COUNT_OR_DEFERRED, FIELD_CONTROL, GROUP_HEADER, SCORE_RE, is_comment
from ..header import Header, parse_header, to_text
from ..scalar import check_scalar_text

__all__ = [
    "DELTA_SECTIONS",
    "MAX_ID_DIGITS",
    "check_field",
    "not_a_snapshot",
    "parse_count",
    "parse_group_header",
    "parse_id",
    "parse_score",
    "payload_lines",
]

#: The sections of a graph delta payload (§10.1), in wire order.
DELTA_SECTIONS: Final = ("removed", "added", "edges_removed", "edges_added")
#: Digits accepted in an ``@N`` id or a count; more would be no int64.
MAX_ID_DIGITS: Final = 18


def payload_lines(text: str | bytes) -> tuple[Header, Iterator[tuple[int, str]]]:
    """The header and the meaningful body lines as ``(line number, text)``.

    CRLF and trailing blanks are stripped; blank lines and ``# `` comments are skipped
    (§11). Indentation is an error: the graph profile is flat.
    """
    lines = to_text(text).split("\n")
    header = parse_header(lines[0], 1)
    return header, _body(lines)


def _body(lines: list[str]) -> Iterator[tuple[int, str]]:
    for n in range(1, len(lines)):
        line = lines[n].rstrip("\r").rstrip(" \t")
        if not line:
            continue
        first = line[0]
        if first in " \t":
            stripped = line.lstrip(" \t")
            if is_comment(stripped):
                continue
            if "\t" in line[: len(line) - len(stripped)]:
                raise GCFDecodeError("tab_indentation", "tab in leading whitespace", n + 1)
            raise GCFDecodeError("invalid_indent", "graph lines are not indented", n + 1)
        if first == "#" and is_comment(line):
            continue
        yield n + 1, line


def parse_count(text: str, line: int) -> int | None:
    """A ``[count]`` body: an int, or None for the deferred ``?`` (§8.2)."""
    text = text.strip(" \t")
    if not COUNT_OR_DEFERRED.match(text):
        raise GCFDecodeError(
            "invalid_count",
            f"[{text}] is not a count: use 0, a decimal without leading zeros, or ?",
            line,
        )
    if text == "?":
        return None
    if len(text) > MAX_ID_DIGITS:
        raise GCFDecodeError("limit_exceeded", f"count {text[:24]}... is too large", line)
    return int(text)


def parse_group_header(line: str, n: int) -> tuple[str, int | None, bool]:
    """``## name [count]`` -> (name, count or None, has a bracket)."""
    m = GROUP_HEADER.match(line)
    if m is None or (m.group(3) or "").strip(" \t"):
        raise GCFDecodeError(
            "invalid_line", f"malformed group header {line[:60]!r}; expected '## name [N]'", n
        )
    if m.group(2) is None:
        return m.group(1), None, False
    return m.group(1), parse_count(m.group(2), n), True


def parse_id(tok: str, n: int, code: ErrorCode) -> int:
    """The integer of an ``@N`` token; ``code`` when the token has no ``@``."""
    if not tok.startswith("@"):
        raise decode_error_at(code, f"expected @N, found {tok[:40]!r}", n, tok, 0)
    digits = tok[1:]
    if not digits.isascii() or not digits.isdigit() or len(digits) > MAX_ID_DIGITS:
        raise decode_error_at(
            "invalid_symbol_id",
            f"symbol ID {tok[:40]!r} is not @ followed by an integer",
            n,
            tok,
            0,
        )
    return int(digits)


def check_field(tok: str, n: int, code: ErrorCode) -> str:
    """A positional field: no control characters, no literal surrogates."""
    if (bad := FIELD_CONTROL.search(tok)) is not None:
        raise decode_error_at(code, f"control character in field {tok[:40]!r}", n, tok, bad.start())
    if not tok.isascii():
        check_scalar_text(tok, n)
    return tok


def parse_score(tok: str, n: int) -> float:
    """A score field, ``[-]DIGITS.DD`` (§5)."""
    if not SCORE_RE.match(tok):
        raise decode_error_at(
            "invalid_score", f"score {tok[:40]!r} is not [-]DIGITS.DD (two decimals)", n, tok, 0
        )
    return float(tok)


def not_a_snapshot() -> GCFDecodeError:
    """The error for a delta payload given to a snapshot decoder (``unsupported_profile``)."""
    return GCFDecodeError(
        "unsupported_profile",
        "a delta payload (delta=true); decode it with gcfkit.graph.loads_delta",
        1,
    )
