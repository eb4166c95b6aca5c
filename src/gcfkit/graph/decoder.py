"""Strict graph decoder (spec §3.2, 5, 6, 6a, 8, 9, 13, 16.3, 16.5).

One pass over the lines: group headers switch the current distance, node lines declare
symbols, the edges section resolves ``@target<@source`` against symbols declared earlier,
and every count (header, ``[N]``, ``##! summary``) is checked at the end.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import GCFDecodeError, placed
from ..grammar import GRAPH_FIELD_SEP, SUMMARY, TRAILER
from ..header import Header, to_text
from .lines import (
    DELTA_SECTIONS,
    MAX_ID_DIGITS,
    check_field,
    not_a_snapshot,
    parse_group_header,
    parse_id,
    parse_score,
    payload_lines,
)
from .model import Edge, Graph, Symbol, expand_kind, group_distance

__all__ = ["decode_graph", "loads"]


class _State:
    """Running state of one decode; ``known`` resolves session references."""

    def __init__(self, header: Header, known: Mapping[int, Symbol] | None) -> None:
        self.session = header.flag("session")
        self.known = known
        self.symbols: list[Symbol] = []
        self.ids: dict[int, int] = {}
        self.declared: dict[int, Symbol] = {}
        self.edges: list[Edge] = []
        self.distance: int | None = None
        self.in_edges = False
        self.seen_edges = False
        self.section_count: int | None = None
        self.section_items = 0
        self.section_line = 0
        self.summary: dict[str, str] | None = None
        self.summary_line = 0

    def close_section(self) -> None:
        if self.section_count is not None and self.section_items != self.section_count:
            raise GCFDecodeError(
                "count_mismatch",
                f"section declares [{self.section_count}] but holds {self.section_items} items",
                self.section_line,
            )

    def open_section(self, line: str, n: int) -> None:
        self.close_section()
        name, count, _ = parse_group_header(line, n)
        self.section_count, self.section_items, self.section_line = count, 0, n
        if name == "edges":
            if self.seen_edges:
                raise GCFDecodeError("invalid_line", "a second ## edges section", n)
            self.in_edges = self.seen_edges = True
            self.distance = None
            return
        distance = group_distance(name)
        if distance is None:
            if name in DELTA_SECTIONS:
                raise GCFDecodeError(
                    "malformed_delta",
                    f"## {name} is a delta section; the header lacks delta=true",
                    n,
                )
            raise GCFDecodeError(
                "invalid_line",
                f"unknown group ## {name}; expected targets, related, extended, distance_N "
                "or edges",
                n,
            )
        self.in_edges = False
        self.distance = distance

    def node(self, line: str, n: int) -> None:
        if self.distance is None:
            raise GCFDecodeError("invalid_node_line", "node line outside a distance group", n)
        toks = GRAPH_FIELD_SEP.split(line)
        ident = parse_id(toks[0], n, "invalid_node_line")
        if len(toks) > 1 and toks[1].startswith("#"):
            sym = self._reference(ident, n)
        else:
            if len(toks) != 5:
                raise GCFDecodeError(
                    "invalid_node_line",
                    f"a node line has 5 fields (@id kind qname score provenance), "
                    f"found {len(toks)}",
                    n,
                )
            kind = check_field(toks[1], n, "invalid_node_line")
            qname = check_field(toks[2], n, "invalid_node_line")
            score = parse_score(toks[3], n)
            prov = check_field(toks[4], n, "invalid_node_line")
            sym = Symbol(qname, expand_kind(kind), score, prov, self.distance)
            self.declared[ident] = sym
        self._add(ident, sym, n)

    def _reference(self, ident: int, n: int) -> Symbol:
        if not self.session:
            raise GCFDecodeError(
                "invalid_node_line",
                "a session reference (@N  # previously transmitted) needs session=true",
                n,
            )
        prior = None if self.known is None else self.known.get(ident)
        if prior is None:
            raise GCFDecodeError(
                "unresolved_reference",
                f"@{ident} refers to a symbol from an earlier response that this decoder has "
                "not seen; request a full payload (spec §9.4)",
                n,
            )
        assert self.distance is not None
        return Symbol(
            prior.qualified_name, prior.kind, prior.score, prior.provenance, self.distance
        )

    def _add(self, ident: int, sym: Symbol, n: int) -> None:
        if ident in self.ids:
            raise GCFDecodeError("invalid_symbol_id", f"@{ident} is declared twice", n)
        if not self.session and ident != len(self.symbols):
            raise GCFDecodeError(
                "invalid_symbol_id",
                f"@{ident} out of sequence: IDs run from @0, expected @{len(self.symbols)}",
                n,
            )
        self.ids[ident] = len(self.symbols)
        self.symbols.append(sym)
        self.section_items += 1

    def edge(self, line: str, n: int) -> None:
        toks = GRAPH_FIELD_SEP.split(line)
        target_tok, lt, source_tok = toks[0].partition("<")
        if not lt or len(toks) not in (2, 3):
            raise GCFDecodeError(
                "invalid_edge_syntax",
                f"an edge line is @target<@source type [status], found {line[:60]!r}",
                n,
            )
        target = self._endpoint(target_tok, n)
        source = self._endpoint(source_tok, n)
        edge_type = check_field(toks[1], n, "invalid_edge_syntax")
        status = check_field(toks[2], n, "invalid_edge_syntax") if len(toks) == 3 else ""
        self.edges.append(Edge(source, target, edge_type, status))
        self.section_items += 1

    def _endpoint(self, tok: str, n: int) -> str:
        ident = parse_id(tok, n, "invalid_edge_syntax")
        pos = self.ids.get(ident)
        if pos is None:
            raise GCFDecodeError(
                "unknown_edge_reference", f"edge references @{ident}, not declared before", n
            )
        return self.symbols[pos].qualified_name

    def trailer(self, line: str, n: int) -> None:
        toks = GRAPH_FIELD_SEP.split(line)
        if toks[0] != TRAILER or len(toks) < 2 or toks[1] != "summary":
            raise GCFDecodeError(
                "invalid_summary", "metadata lines are '##! summary key=value...'", n
            )
        fields: dict[str, str] = {}
        for tok in toks[2:]:
            key, eq, value = tok.partition("=")
            if not eq or not key or key in fields:
                raise GCFDecodeError(
                    "invalid_summary", f"bad or repeated summary field {tok!r:.40}", n
                )
            fields[key] = value
        self.summary = fields
        self.summary_line = n

    def check_totals(self, header: Header, unchanged: bool) -> None:
        declared = [("header", header.count("symbols"), header.count("edges"), 1)]
        if self.summary is not None:
            declared.append(
                (
                    SUMMARY,
                    _summary_count(self.summary, "symbols", self.summary_line),
                    _summary_count(self.summary, "edges", self.summary_line),
                    self.summary_line,
                )
            )
        for where, n_symbols, n_edges, line in declared:
            if n_symbols is not None and not unchanged and n_symbols != len(self.symbols):
                raise GCFDecodeError(
                    "count_mismatch",
                    f"{where} says symbols={n_symbols} but the payload holds {len(self.symbols)}",
                    line,
                )
            if n_edges is not None and n_edges != len(self.edges):
                raise GCFDecodeError(
                    "count_mismatch",
                    f"{where} says edges={n_edges} but the payload holds {len(self.edges)}",
                    line,
                )


def _summary_count(fields: dict[str, str], key: str, line: int) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > MAX_ID_DIGITS:
        raise GCFDecodeError("invalid_summary", f"summary {key}={value!r:.40} is not a count", line)
    return int(value)


def decode_graph(
    text: str | bytes, known: Mapping[int, Symbol] | None = None
) -> tuple[Graph, dict[int, Symbol]]:
    """Decode a graph payload; also return the symbols it declared in full, by ID.

    ``known`` resolves session references (``@N  # previously transmitted``) to symbols
    from earlier payloads of the same session. Rejections are
    :class:`~gcfkit.errors.GCFDecodeError`, placed in the decoded text.
    """
    return placed(lambda doc: _decode(doc, known), to_text(text))


def _decode(text: str, known: Mapping[int, Symbol] | None) -> tuple[Graph, dict[int, Symbol]]:
    header, lines = payload_lines(text)
    if header.profile != "graph":
        raise GCFDecodeError(
            "unsupported_profile",
            f"profile={header.profile} payload; use gcfkit.loads for the generic profile",
            1,
        )
    if header.flag("delta"):
        # gcfkit.graph.loads and SessionReader validate a delta before they refuse it (see
        # gcfkit.graph.delta.refuse_delta); this module only reads snapshots.
        raise not_a_snapshot()
    unchanged = header.flag("unchanged")
    state = _State(header, known)
    for n, line in lines:
        if state.summary is not None:
            raise GCFDecodeError("invalid_summary", "content after the ##! summary trailer", n)
        if line.startswith("##"):
            if line.startswith(TRAILER):
                state.close_section()
                state.trailer(line, n)
            else:
                state.open_section(line, n)
        elif unchanged:
            raise GCFDecodeError("invalid_line", "an unchanged=true payload has no body", n)
        elif state.in_edges:
            state.edge(line, n)
        elif state.distance is None:
            raise GCFDecodeError("invalid_line", f"{line[:40]!r} before any ## group header", n)
        else:
            state.node(line, n)
    if state.summary is None:
        state.close_section()
    state.check_totals(header, unchanged)
    graph = Graph(
        tuple(state.symbols),
        tuple(state.edges),
        header.get("tool"),
        header.count("budget") or 0,
        header.count("tokens") or 0,
        header.get("pack_root"),
    )
    return graph, state.declared


def loads(text: str | bytes) -> Graph:
    """Strictly decode a graph snapshot payload, buffered or streaming (bytes must be UTF-8).

    Kinds come back in full form; unknown kinds verbatim. A payload with session
    references needs :class:`gcfkit.graph.SessionReader`; a delta payload
    :func:`gcfkit.graph.loads_delta` (here it is refused with ``unsupported_profile``;
    :func:`gcfkit.graph.loads` reports a malformed one's own error first).

    >>> g = loads("GCF profile=graph symbols=1\\n## targets\\n@0 iface pkg.H 0.90 lsp\\n")
    >>> g.symbols[0]
    Symbol(qualified_name='pkg.H', kind='interface', score=0.9, provenance='lsp', distance=0)
    """
    return decode_graph(text)[0]
