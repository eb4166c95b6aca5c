"""gcfkit's errors and the error categories of spec §16.5.

Every rejection anywhere in gcfkit is a :class:`GCFError` (a ``ValueError``) whose ``code`` is
one of the snake_case categories below (the names used by the conformance fixtures'
``expectedError``). Three kinds derive from it, as the stdlib ``json`` and msgspec shape theirs:

* :class:`GCFDecodeError`: a payload was rejected; ``msg``, ``doc``, ``pos``, ``lineno`` and
  ``colno`` as on :class:`json.JSONDecodeError`;
* :class:`GCFEncodeError`: a value cannot be encoded; ``path`` names it (``$[1].groups[1]``);
* :class:`ConfigError`: a command-line option, policy file, MCP client config or file that
  gcfkit cannot use.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final, Literal, TypeVar, get_args

__all__ = [
    "CODES",
    "CONFIG_CODES",
    "ConfigError",
    "ErrorCode",
    "GCFDecodeError",
    "GCFEncodeError",
    "GCFError",
    "as_encode_error",
    "at_path",
    "decode_error_at",
    "located",
    "placed",
]

_T = TypeVar("_T")

#: Every category, as a type: mypy checks each raise site's code against it.
ErrorCode = Literal[
    "missing_header",
    "missing_profile",
    "unknown_profile",
    "malformed_header_field",
    "duplicate_header_field",
    "unterminated_quote",
    "invalid_escape",
    "trailing_characters",
    "invalid_missing",
    "invalid_attachment_marker",
    "invalid_surrogate",
    "invalid_utf8",
    "out_of_range",
    "duplicate_key",
    "duplicate_field_name",
    "row_width_mismatch",
    "count_mismatch",
    "invalid_count",
    "tab_indentation",
    "invalid_indent",
    "invalid_item_id",
    "orphan_attachment",
    "orphan_inline_attachment",
    "missing_attachment",
    "duplicate_attachment",
    "inline_width_mismatch",
    "invalid_key",
    "invalid_line",
    "invalid_keyed_map",
    "invalid_summary",
    "limit_exceeded",
    "invalid_node_line",
    "invalid_symbol_id",
    "invalid_score",
    "invalid_edge_syntax",
    "unknown_edge_reference",
    "malformed_delta",
    "unresolved_reference",
    "invalid_graph",
    "root_mismatch",
    "invalid_delta",
    "invalid_keyed_set",
    "invalid_answer",
    "invalid_patch",
    "invalid_edit",
    "base_mismatch",
    "unsupported_type",
    "unsupported_profile",
    "unsupported_shape",
    "undeclared_field",
    "invalid_stream_call",
    "invalid_option",
    "malformed_config",
    "server_not_found",
    "ambiguous_server",
    "unsupported_server",
    "invalid_json",
    "io_error",
    "invalid_definition",
    "undefined_reference",
    "invalid_constant",
    "invalid_group",
]


#: Every category gcfkit raises, with a one-line meaning. The strict-mode checklist of
#: spec §16.5, plus the numeric domain (§2.3.2), deltas (§10, §10a) and implementation
#: limits (§12).
CODES: dict[ErrorCode, str] = {
    # header
    "missing_header": "the first line does not begin with GCF",
    "missing_profile": "the header has no profile= field",
    "unknown_profile": "the profile is neither generic nor graph",
    "malformed_header_field": "a header field is not key=value",
    "duplicate_header_field": "a header field appears twice",
    # scalar
    "unterminated_quote": "a quoted string has no closing quote",
    "invalid_escape": "an escape sequence outside the JSON set",
    "trailing_characters": "characters after the closing quote of a scalar",
    "invalid_missing": "~ outside a tabular row cell",
    "invalid_attachment_marker": "^ or ^{...} outside a tabular row cell, or malformed",
    "invalid_surrogate": "a literal, isolated or malformed surrogate",
    "invalid_utf8": "malformed UTF-8",
    "out_of_range": "a number outside the numeric domain (int64, finite double)",
    # structural
    "duplicate_key": "the same key twice in one object",
    "duplicate_field_name": "the same field twice in a field declaration",
    "row_width_mismatch": "a row's cell count differs from its field count",
    "count_mismatch": "the number of items differs from the declared count",
    "invalid_count": "a count that is not 0, a decimal without leading zeros, or ?",
    "tab_indentation": "a tab in leading indentation",
    "invalid_indent": "indentation that is not a valid step",
    "invalid_item_id": "an @N id that is not the item's zero-based index",
    "orphan_attachment": "a .field attachment with no ^ cell to fill",
    "orphan_inline_attachment": "a positional inline body with no eligible ^ cell",
    "missing_attachment": "a ^ cell with no attachment body",
    "duplicate_attachment": "two attachments for the same field of one row",
    "inline_width_mismatch": "a positional body's width differs from its schema",
    "invalid_key": "a key that is neither a bare nor a quoted key",
    "invalid_line": "a line that matches no production in its context",
    "invalid_keyed_map": "a keyed map header or row that breaks §7.2a",
    "invalid_summary": "a ##! summary trailer that breaks §8.4",
    "limit_exceeded": "an implementation limit of §12 was exceeded",
    # graph
    "invalid_node_line": "a symbol line without exactly 5 fields",
    "invalid_symbol_id": "an @ prefix followed by a non-integer",
    "invalid_score": "a score that is not [-]DIGITS.2DIGIT",
    "invalid_edge_syntax": "an edge line without the < separator",
    "unknown_edge_reference": "an edge that references an undeclared symbol",
    "malformed_delta": "a delta section or line form invalid for its section",
    "unresolved_reference": "a session reference (@N  # previously transmitted) to no known symbol",
    "invalid_graph": "a graph value that cannot be encoded (§20)",
    # deltas
    "root_mismatch": "a pack root that does not match",
    "invalid_delta": "a delta whose operations contradict its base",
    "invalid_keyed_set": "a keyed set whose identity column or rows break §10a.1",
    # relative answers (docs/extensions/relative-answers.md)
    "invalid_answer": "a relative answer whose header or @@ line is malformed",
    "invalid_patch": "a patch whose operation list or paths are malformed",
    "invalid_edit": "a text edit whose lines are malformed",
    "base_mismatch": "a relative answer that does not fit the held result it names",
    # values outside the JSON model
    "unsupported_type": "a value outside the JSON data model",
    "unsupported_profile": "a payload this operation does not accept",
    "unsupported_shape": "a value the target format cannot carry (GCX1: fall back to JSON)",
    # streaming encoders (§8.3)
    "undeclared_field": "a streamed row has a field its section header did not declare",
    "invalid_stream_call": "a streaming encoder call that does not fit the open section",
    # files, options and MCP client configs (ledger, install-mcp)
    "invalid_option": "a command-line option value that cannot be interpreted",
    "malformed_config": "an MCP client config file that is not valid JSON of the expected shape",
    "server_not_found": "no MCP client config defines the named server",
    "ambiguous_server": "the named server is in several configs; choose with --client/--scope",
    "unsupported_server": "a server the proxy cannot wrap (e.g. an HTTP server)",
    # command line
    "invalid_json": "input that is not valid JSON",
    "io_error": "a file that cannot be read or written",
    # the dense profile (docs/extensions/dense.md D10.1)
    "invalid_definition": "a dense definition line that is not $name=string, or a name twice",
    "undefined_reference": "a bare $token that names no definition of the dense payload",
    "invalid_constant": "a constant column (f=v) whose value or place is wrong (dense D6, v3.6.0)",
    # the reference's v3.6.0 forms (docs/extensions/v3.6.0-forms.md)
    "invalid_group": "a value-grouped table (group=) whose header, group line or row is wrong",
}


assert set(get_args(ErrorCode)) == set(CODES), "every code has a meaning, and only those"


class GCFError(ValueError):
    """A GCF payload, a value or a setting was rejected.

    ``code`` is the spec's category (see :data:`CODES`), ``line`` the 1-based line of the
    payload where the problem is (``None`` for encode-side errors).

    >>> import gcfkit
    >>> try:
    ...     gcfkit.loads("GCF profile=generic\\nx=~\\n")
    ... except gcfkit.GCFError as e:
    ...     (e.code, e.line)
    ('invalid_missing', 2)
    """

    code: ErrorCode
    line: int | None
    detail: str

    def __init__(self, code: ErrorCode, detail: str, line: int | None = None) -> None:
        self.code = code
        self.line = line
        self.detail = detail
        where = f" line {line}" if line is not None else ""
        super().__init__(f"error[{code}]{where}: {detail}")

    def __reduce__(self) -> tuple[type[GCFError], tuple[str, str, int | None]]:
        return (type(self), (self.code, self.detail, self.line))


class GCFDecodeError(GCFError):
    """A payload was rejected, with its position as :class:`json.JSONDecodeError` gives it.

    ``msg`` is the unformatted message, ``doc`` the text being decoded, ``pos`` the 0-based
    character index into ``doc``, ``lineno`` and ``colno`` the 1-based line and column
    (``line`` is ``lineno``). Built from a line and column, ``pos`` is computed from ``doc``.

    >>> e = GCFDecodeError("invalid_missing", "~ is only valid in a row cell",
    ...                    doc="GCF profile=generic\\nx=~\\n", lineno=2, colno=3)
    >>> (e.pos, e.lineno, e.colno, e.doc[e.pos])
    (22, 2, 3, '~')
    """

    msg: str
    doc: str
    pos: int
    lineno: int
    colno: int

    def __init__(
        self,
        code: ErrorCode,
        msg: str,
        line: int | None = None,
        *,
        doc: str = "",
        lineno: int | None = None,
        colno: int = 1,
    ) -> None:
        lineno = lineno if lineno is not None else (line if line is not None else 1)
        super().__init__(code, msg, lineno)
        self.msg = msg
        self.doc = doc
        self.lineno = lineno
        self.colno = colno
        self.pos = _position(doc, lineno, colno)

    def __reduce__(self) -> tuple[type[GCFError], tuple[str, str, int | None]]:
        return (_rebuild_decode_error, (self.code, self.msg, self.doc, self.lineno, self.colno))  # type: ignore[return-value]

    # The piece of line ``lineno`` that ``colno`` counts in, until located() finds it there.
    _within: str = ""


def _rebuild_decode_error(
    code: ErrorCode, msg: str, doc: str, lineno: int, colno: int
) -> GCFDecodeError:
    return GCFDecodeError(code, msg, doc=doc, lineno=lineno, colno=colno)


def _position(doc: str, lineno: int, colno: int) -> int:
    """0-based index of (lineno, colno) in ``doc``; clamped to the text's length."""
    pos = 0
    for _ in range(lineno - 1):
        nl = doc.find("\n", pos)
        if nl < 0:
            return len(doc)
        pos = nl + 1
    return min(pos + max(colno, 1) - 1, len(doc))


def decode_error_at(
    code: ErrorCode, msg: str, line: int | None, text: str, pos: int
) -> GCFDecodeError:
    """A decode error at ``text[pos]``, ``text`` being a piece of line ``line`` (a token, or
    the line without its indentation): :func:`located` finds the piece in its line for the
    column once the document is known (a parser deep in a line need not know where the
    piece started).

    >>> e = located(decode_error_at("invalid_key", "bad key", 2, "a-b=1", 1), "GCF\\n  a-b=1\\n")
    >>> (e.lineno, e.colno, e.doc[e.pos])
    (2, 4, '-')
    """
    e = GCFDecodeError(code, msg, line, colno=pos + 1)
    e._within = text
    return e


def located(e: GCFError, doc: str) -> GCFDecodeError:
    """``e``, raised while decoding ``doc``, as a :class:`GCFDecodeError` that knows its
    document: ``doc`` set, the column placed in its line, ``pos`` computed.

    Any other :class:`GCFError` becomes a decode error at its line (line 1 when it has
    none). Decoders call this on the way out, so it costs nothing unless decoding fails.
    """
    if not isinstance(e, GCFDecodeError):
        return GCFDecodeError(e.code, e.detail, e.line, doc=doc).with_traceback(e.__traceback__)
    if e.doc is doc:
        return e  # an inner decoder placed it already
    if e._within:
        k = _line_text(doc, e.lineno).find(e._within)
        e.colno = k + e.colno if k >= 0 else 1
        e._within = ""
    e.doc = doc
    e.pos = _position(doc, e.lineno, e.colno)
    return e


def placed(parse: Callable[[str], _T], doc: str) -> _T:
    """``parse(doc)``, with any :class:`GCFError` it raises :func:`located` in ``doc``: the one
    way out of every decoder's entry point.

    >>> placed(int, "7")
    7
    """
    try:
        return parse(doc)
    except GCFError as e:
        raise located(e, doc) from None


def _line_text(doc: str, lineno: int) -> str:
    start = _position(doc, lineno, 1)
    end = doc.find("\n", start)
    return doc[start:] if end < 0 else doc[start:end]


class GCFEncodeError(GCFError):
    """A value cannot be encoded; ``path`` names it from the root, msgspec-style (``$`` is the
    value itself, and is left out of the message).

    >>> e = GCFEncodeError("out_of_range", "integer 2**70 is outside int64", path="$[1].groups[1]")
    >>> str(e)
    'error[out_of_range] at $[1].groups[1]: integer 2**70 is outside int64'
    """

    path: str

    def __init__(self, code: ErrorCode, detail: str, line: int | None = None, *, path: str = "$"):
        super().__init__(code, detail, line)
        self._set_path(path)

    def _set_path(self, path: str) -> None:
        self.path = path
        where = f" at {path}" if path != "$" else ""
        self.args = (f"error[{self.code}]{where}: {self.detail}",)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[type[GCFError], tuple[str, str, int | None]]:
        return (_rebuild_encode_error, (self.code, self.detail, self.path))  # type: ignore[return-value]


def _rebuild_encode_error(code: ErrorCode, detail: str, path: str) -> GCFEncodeError:
    return GCFEncodeError(code, detail, path=path)


def at_path(e: GCFEncodeError, segment: str | int) -> GCFEncodeError:
    """``e`` one level down: raised under key or index ``segment`` of the container being
    encoded. Encoders call this on the way up, so a path costs nothing unless encoding fails.

    >>> str(at_path(at_path(GCFEncodeError("out_of_range", "too big"), "id"), 3))
    'error[out_of_range] at $[3].id: too big'
    >>> at_path(GCFEncodeError("unsupported_type", "a set"), "content-type").path
    '$["content-type"]'
    """
    if isinstance(segment, int):
        step = f"[{segment}]"
    elif segment.isidentifier() and segment.isascii():
        step = f".{segment}"
    else:
        step = f"[{json.dumps(segment, ensure_ascii=False)}]"
    e._set_path("$" + step + e.path[1:])
    return e


def as_encode_error(e: GCFError) -> GCFEncodeError:
    """``e``, raised while encoding, as a :class:`GCFEncodeError` (of the root, ``$``, when it
    was not one)."""
    if isinstance(e, GCFEncodeError):
        return e
    return GCFEncodeError(e.code, e.detail, e.line).with_traceback(e.__traceback__)


class ConfigError(GCFError):
    """A command-line option, policy file, MCP client config or file gcfkit cannot use.

    >>> isinstance(ConfigError("invalid_option", "--time-budget must be positive"), GCFError)
    True
    """


#: The codes that belong to :class:`ConfigError` rather than to a payload or a value.
CONFIG_CODES: Final[frozenset[ErrorCode]] = frozenset(
    {
        "invalid_option",
        "malformed_config",
        "server_not_found",
        "ambiguous_server",
        "unsupported_server",
        "io_error",
    }
)
