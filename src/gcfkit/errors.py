"""GCFError and the error categories of spec §16.5.

Every rejection anywhere in gcfkit is a :class:`GCFError` whose ``code`` is one of the
snake_case categories below (the names used by the conformance fixtures' ``expectedError``).
"""

from __future__ import annotations

__all__ = ["CODES", "GCFError"]

#: Every category gcfkit raises, with a one-line meaning. The strict-mode checklist of
#: spec §16.5, plus the numeric domain (§2.3.2), deltas (§10, §10a) and implementation
#: limits (§12).
CODES: dict[str, str] = {
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
}


class GCFError(ValueError):
    """A GCF payload or value was rejected.

    ``code`` is the spec's category (see :data:`CODES`), ``line`` the 1-based line of the
    payload where the problem is (``None`` for encode-side errors).

    >>> import gcfkit
    >>> try:
    ...     gcfkit.loads("GCF profile=generic\\nx=~\\n")
    ... except gcfkit.GCFError as e:
    ...     (e.code, e.line)
    ('invalid_missing', 2)
    """

    code: str
    line: int | None
    detail: str

    def __init__(self, code: str, detail: str, line: int | None = None) -> None:
        self.code = code
        self.line = line
        self.detail = detail
        where = f" line {line}" if line is not None else ""
        super().__init__(f"error[{code}]{where}: {detail}")

    def __reduce__(self) -> tuple[type[GCFError], tuple[str, str, int | None]]:
        return (type(self), (self.code, self.detail, self.line))
