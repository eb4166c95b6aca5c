"""Graph pack roots and deltas (spec §10, §10.2 gcf-pack-root-v1, §10.4 atomic application).

A delta turns one immutable snapshot (symbols + edges) into another. :func:`apply_delta`
validates everything on copies and returns a new snapshot only after the recomputed root
equals ``new_root``; on any failure the caller's snapshot is untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ..errors import GCFDecodeError, GCFEncodeError, GCFError, at_path, placed
from ..grammar import GRAPH_FIELD_SEP, RECORD_UNSAFE, SURROGATE, TRAILER
from ..header import Header, format_header, to_text
from ..scalar import format_number
from .encoder import edge_tail, node_line
from .lines import (
    DELTA_SECTIONS,
    check_field,
    not_a_snapshot,
    parse_group_header,
    parse_id,
    parse_score,
    payload_lines,
)
from .model import (
    Edge,
    Graph,
    Symbol,
    abbreviate_kind,
    check_token,
    expand_kind,
    group_name,
)

__all__ = [
    "GraphDelta",
    "apply_delta",
    "dumps_delta",
    "dumps_unchanged",
    "loads_delta",
    "make_delta",
    "pack_root",
    "refuse_delta",
]

SymbolKey = tuple[str, str]
EdgeKey = tuple[str, str, str]


@dataclass(frozen=True, init=False)
class GraphDelta:
    """A graph delta (§10): what turns the snapshot ``base_root`` into ``new_root``.

    The symbol and edge lists may be any iterables; they are stored as tuples. ``removed``
    symbols matter by (kind, qualified name) only; ``added`` symbols are full
    declarations with their distance. ``delta_tokens``/``full_tokens`` give the header's
    ``tokens=`` and ``savings=``; a decoded delta carries the received ``savings`` text
    instead of ``full_tokens``.

    >>> d = GraphDelta("sha256:aa", "sha256:bb", removed=[Symbol("pkg.Old", "function")])
    >>> d.removed[0].qualified_name, d.added
    ('pkg.Old', ())
    """

    base_root: str
    new_root: str
    removed: tuple[Symbol, ...]
    added: tuple[Symbol, ...]
    removed_edges: tuple[Edge, ...]
    added_edges: tuple[Edge, ...]
    tool: str
    delta_tokens: int
    full_tokens: int
    savings: str

    def __init__(
        self,
        base_root: str,
        new_root: str,
        removed: Iterable[Symbol] = (),
        added: Iterable[Symbol] = (),
        removed_edges: Iterable[Edge] = (),
        added_edges: Iterable[Edge] = (),
        tool: str = "",
        delta_tokens: int = 0,
        full_tokens: int = 0,
        savings: str = "",
    ) -> None:
        set_ = object.__setattr__
        set_(self, "base_root", base_root)
        set_(self, "new_root", new_root)
        set_(self, "removed", tuple(removed))
        set_(self, "added", tuple(added))
        set_(self, "removed_edges", tuple(removed_edges))
        set_(self, "added_edges", tuple(added_edges))
        set_(self, "tool", tool)
        set_(self, "delta_tokens", delta_tokens)
        set_(self, "full_tokens", full_tokens)
        set_(self, "savings", savings)


# ---------------------------------------------------------------------------------------
# gcf-pack-root-v1
# ---------------------------------------------------------------------------------------


def _record_field(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or RECORD_UNSAFE.search(value):
        raise GCFError(
            "invalid_graph", f"{what} {value!r:.60} is empty or holds whitespace/control characters"
        )
    if not value.isascii() and SURROGATE.search(value):
        raise GCFError("invalid_surrogate", f"{what} {value!r:.60} holds a lone surrogate")
    return value


def _symbol_record(s: Symbol) -> bytes:
    if isinstance(s.score, bool) or not isinstance(s.score, (int, float)):
        raise GCFError("invalid_graph", f"score {s.score!r:.40} is not a number")
    group_name(s.distance)
    fields = (
        "S",
        abbreviate_kind(s.kind),
        _record_field(s.qualified_name, "qualified name"),
        format_number(s.score),
        _record_field(s.provenance, "provenance"),
        str(s.distance),
    )
    return ("\t".join(fields) + "\n").encode()


def _kinds_by_name(symbols: Sequence[Symbol]) -> dict[str, str | None]:
    kinds: dict[str, str | None] = {}
    for s in symbols:
        kind = abbreviate_kind(s.kind)
        if s.qualified_name in kinds and kinds[s.qualified_name] != kind:
            kinds[s.qualified_name] = None
        else:
            kinds[s.qualified_name] = kind
    return kinds


def _edge_kind(kinds: dict[str, str | None], name: str, role: str) -> str:
    if name not in kinds:
        raise GCFError(
            "unknown_edge_reference", f"edge {role} {name!r:.60} is not a symbol of the snapshot"
        )
    kind = kinds[name]
    if kind is None:
        raise GCFError(
            "invalid_graph", f"edge {role} {name!r:.60} names symbols of two different kinds"
        )
    return kind


def pack_root(symbols: Iterable[Symbol], edges: Iterable[Edge]) -> str:
    """gcf-pack-root-v1 of a snapshot (§10.2): ``sha256:`` + 64 lowercase hex digits.

    Order-independent: records are sorted by their UTF-8 bytes. Scores use the canonical
    number form (``1.0`` hashes as ``1``), so hash what the consumer holds: scores that
    crossed the wire are two-decimal values.

    >>> pack_root([], [])
    'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    syms = list(symbols)
    kinds = _kinds_by_name(syms)
    srecs = sorted(_symbol_record(s) for s in syms)
    erecs = []
    for e in edges:
        fields = (
            "E",
            _edge_kind(kinds, e.source, "source"),
            e.source,
            _edge_kind(kinds, e.target, "target"),
            e.target,
            _record_field(e.edge_type, "edge type"),
        )
        erecs.append(("\t".join(fields) + "\n").encode())
    erecs.sort()
    h = hashlib.sha256()
    for rec in srecs:
        h.update(rec)
    for rec in erecs:
        h.update(rec)
    return "sha256:" + h.hexdigest()


def graph_pack_root(graph: Graph) -> str:
    """:func:`pack_root` of a :class:`Graph`'s symbols and edges."""
    return pack_root(graph.symbols, graph.edges)


# ---------------------------------------------------------------------------------------
# Encode / decode
# ---------------------------------------------------------------------------------------


def _savings(delta: GraphDelta) -> str:
    if delta.full_tokens:
        saved = delta.full_tokens - delta.delta_tokens
        # Integer half-up rounding of the percentage: exact and platform independent.
        pct = (200 * saved + delta.full_tokens) // (2 * delta.full_tokens)
        return f"{pct}%"
    return delta.savings


def dumps_delta(delta: GraphDelta) -> str:
    """The delta payload of §10.1 (sections removed, added, edges_removed, edges_added).

    Empty sections are left out; ``## added`` IDs run from @0 in the order given.

    >>> d = GraphDelta("aaa", "bbb", removed=[Symbol("pkg.Old", "function")],
    ...                added=[Symbol("pkg.New", "function", 0.85, "rwr")],
    ...                tool="ctx", delta_tokens=30, full_tokens=200)
    >>> print(dumps_delta(d), end="")
    GCF profile=graph tool=ctx delta=true base_root=aaa new_root=bbb tokens=30 savings=85%
    ## removed
    fn pkg.Old
    ## added
    @0 fn pkg.New 0.85 rwr 0
    """
    if not isinstance(delta, GraphDelta):
        raise GCFEncodeError(
            "unsupported_type", f"dumps_delta() takes a GraphDelta, not {delta!r:.40}"
        )
    for key, value in (("delta_tokens", delta.delta_tokens), ("full_tokens", delta.full_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GCFEncodeError("invalid_graph", f"{key}={value!r:.40} must be a non-negative int")
    pairs: list[tuple[str, str]] = []
    if delta.tool:
        pairs.append(("tool", delta.tool))
    pairs += [("delta", "true"), ("base_root", delta.base_root), ("new_root", delta.new_root)]
    if delta.delta_tokens:
        pairs.append(("tokens", str(delta.delta_tokens)))
    savings = _savings(delta)
    if savings:
        pairs.append(("savings", savings))
    out = [format_header("graph", pairs)]
    # Each section's lines; a bad item is named by the delta's field and its index.
    sections: list[tuple[str, str, Sequence[Any], Callable[[int, Any], str]]] = [
        ("removed", "removed", delta.removed, _removed_line_of),
        ("added", "added", delta.added, _added_line_of),
        ("edges_removed", "removed_edges", delta.removed_edges, _edge_line_of),
        ("edges_added", "added_edges", delta.added_edges, _edge_line_of),
    ]
    for section, field, items, line_of in sections:
        if items:
            out.append("## " + section)
            for i, item in enumerate(items):
                try:
                    out.append(line_of(i, item))
                except GCFEncodeError as e:
                    raise at_path(at_path(e, i), field) from None
    out.append("")
    return "\n".join(out)


def _removed_line_of(_: int, s: Symbol) -> str:
    return f"{abbreviate_kind(s.kind)} {check_token('qualified name', s.qualified_name)}"


def _added_line_of(i: int, s: Symbol) -> str:
    return f"{node_line(i, s)} {s.distance}"


def _edge_line_of(_: int, e: Edge) -> str:
    return _edge_line(e)


def _edge_line(e: Edge) -> str:
    source = check_token("edge source", e.source)
    target = check_token("edge target", e.target)
    return f"{source} -> {target}{edge_tail(Edge(e.source, e.target, e.edge_type))}"


def _malformed(detail: str, n: int) -> GCFDecodeError:
    return GCFDecodeError("malformed_delta", detail, n)


def loads_delta(text: str | bytes) -> GraphDelta:
    """Strictly decode a graph delta payload (``delta=true``, §10.1).

    An ``unchanged=true`` answer (§10.3) decodes as the identity delta, base_root ==
    new_root == its pack_root.

    >>> d = loads_delta("GCF profile=graph delta=true base_root=a new_root=b\\n"
    ...                 "## added\\n@0 fn pkg.New 0.85 rwr 1\\n")
    >>> d.added[0]
    Symbol(qualified_name='pkg.New', kind='function', score=0.85, provenance='rwr', distance=1)
    """
    return placed(_delta_from, to_text(text))


def _delta_from(text: str) -> GraphDelta:
    header, lines = payload_lines(text)
    if header.profile != "graph":
        raise GCFDecodeError("unsupported_profile", "not a graph payload; see gcfkit.keyed", 1)
    if header.flag("unchanged") and not header.flag("delta"):
        return _unchanged(header, lines)
    if not header.flag("delta"):
        raise _malformed("a delta payload carries delta=true in its header", 1)
    base_root, new_root = header.get("base_root"), header.get("new_root")
    if not base_root or not new_root:
        raise _malformed("a delta header carries base_root= and new_root=", 1)
    parts: dict[str, list[object]] = {name: [] for name in DELTA_SECTIONS}
    section: list[object] | None = None
    seen: set[str] = set()
    name = ""
    count: int | None = None
    start = 0
    for n, line in lines:
        if line.startswith("##"):
            _check_section_count(section, count, start)
            if line.startswith(TRAILER):
                raise _malformed("a delta payload has no ##! summary trailer", n)
            name, count, _ = parse_group_header(line, n)
            if name not in parts:
                raise _malformed(
                    f"## {name} is not a delta section "
                    "(removed, added, edges_removed, edges_added)",
                    n,
                )
            if name in seen:
                raise _malformed(f"## {name} appears twice", n)
            seen.add(name)
            section, start = parts[name], n
            continue
        if section is None:
            raise _malformed(f"{line[:40]!r} before any delta section", n)
        if name == "removed":
            section.append(_removed_line(line, n))
        elif name == "added":
            section.append(_added_line(line, n))
        else:
            section.append(_edge_delta_line(line, n))
    _check_section_count(section, count, start)
    return GraphDelta(
        base_root,
        new_root,
        tuple(_symbols(parts["removed"])),
        tuple(_symbols(parts["added"])),
        tuple(_edges(parts["edges_removed"])),
        tuple(_edges(parts["edges_added"])),
        header.get("tool"),
        header.count("tokens") or 0,
        0,
        header.get("savings"),
    )


def refuse_delta(text: str | bytes) -> NoReturn:
    """Raise for a delta payload handed to a snapshot reader (:func:`gcfkit.graph.loads`,
    :class:`~gcfkit.graph.SessionReader`).

    A malformed delta gets its own error first (``malformed_delta``, ``count_mismatch``...),
    as the conformance suite expects of any graph decoder given one (fixture errors-v2/033:
    an unknown section in a ``delta=true`` payload is ``malformed_delta``). Only a valid
    delta is refused as ``unsupported_profile``, pointing at :func:`loads_delta`.

    >>> refuse_delta("GCF profile=graph delta=true base_root=a new_root=b\\n## bogus\\n")
    Traceback (most recent call last):
    gcfkit.errors.GCFDecodeError: error[malformed_delta] line 2: ...
    """
    loads_delta(text)
    raise not_a_snapshot()


def _unchanged(header: Header, lines: Iterable[tuple[int, str]]) -> GraphDelta:
    root = header.get("pack_root")
    if not root:
        raise _malformed("an unchanged=true answer carries pack_root=", 1)
    for n, _ in lines:
        raise _malformed("an unchanged=true answer has no body", n)
    return GraphDelta(root, root, tool=header.get("tool"))


def dumps_unchanged(root: str, symbols: int, *, tool: str = "") -> str:
    """The header-only "same root" answer of §10.3 (outcome 1): nothing is retransmitted.

    :func:`loads_delta` reads it back as the identity delta (``base_root == new_root``).

    >>> print(dumps_unchanged("sha256:ab", 10, tool="ctx"), end="")
    GCF profile=graph tool=ctx unchanged=true pack_root=sha256:ab symbols=10
    >>> loads_delta(dumps_unchanged("sha256:ab", 10)).new_root
    'sha256:ab'
    """
    if isinstance(symbols, bool) or not isinstance(symbols, int) or symbols < 0:
        raise GCFEncodeError("invalid_graph", f"symbols={symbols!r:.40} must be a non-negative int")
    pairs = [("tool", tool)] if tool else []
    pairs += [("unchanged", "true"), ("pack_root", root), ("symbols", str(symbols))]
    return format_header("graph", pairs) + "\n"


def _symbols(items: list[object]) -> Iterable[Symbol]:
    return (s for s in items if isinstance(s, Symbol))


def _edges(items: list[object]) -> Iterable[Edge]:
    return (e for e in items if isinstance(e, Edge))


def _check_section_count(section: list[object] | None, count: int | None, n: int) -> None:
    if section is not None and count is not None and len(section) != count:
        raise GCFDecodeError(
            "count_mismatch", f"section declares [{count}] but holds {len(section)} lines", n
        )


def _removed_line(line: str, n: int) -> Symbol:
    toks = GRAPH_FIELD_SEP.split(line)
    if len(toks) != 2:
        raise _malformed(f"a ## removed line is 'kind qname', found {line[:60]!r}", n)
    kind = check_field(toks[0], n, "malformed_delta")
    return Symbol(check_field(toks[1], n, "malformed_delta"), expand_kind(kind))


def _added_line(line: str, n: int) -> Symbol:
    toks = GRAPH_FIELD_SEP.split(line)
    if len(toks) != 6 or not toks[0].startswith("@"):
        raise _malformed(
            f"a ## added line is '@id kind qname score provenance distance', found {line[:60]!r}",
            n,
        )
    parse_id(toks[0], n, "malformed_delta")
    distance = toks[5]
    if not distance.isascii() or not distance.isdigit() or len(distance) > 18:
        raise _malformed(f"distance {distance[:40]!r} is not a non-negative integer", n)
    return Symbol(
        check_field(toks[2], n, "malformed_delta"),
        expand_kind(check_field(toks[1], n, "malformed_delta")),
        parse_score(toks[3], n),
        check_field(toks[4], n, "malformed_delta"),
        int(distance),
    )


def _edge_delta_line(line: str, n: int) -> Edge:
    toks = GRAPH_FIELD_SEP.split(line)
    if len(toks) != 4 or toks[1] != "->":
        raise _malformed(f"an edge delta line is 'source -> target type', found {line[:60]!r}", n)
    return Edge(
        check_field(toks[0], n, "malformed_delta"),
        check_field(toks[2], n, "malformed_delta"),
        check_field(toks[3], n, "malformed_delta"),
    )


# ---------------------------------------------------------------------------------------
# Apply / diff
# ---------------------------------------------------------------------------------------


def _skey(s: Symbol) -> SymbolKey:
    return (s.kind, s.qualified_name)


def _ekey(e: Edge) -> EdgeKey:
    return (e.source, e.target, e.edge_type)


def _contradiction(detail: str) -> GCFError:
    return GCFError("invalid_delta", detail + "; request a full payload")


def _check_operations(
    removed: set[tuple[str, ...]],
    added: set[tuple[str, ...]],
    present: set[tuple[str, ...]],
    what: str,
) -> None:
    """§10.4 step 3: remove only what the base has, add only what it lacks (or removes)."""
    for key in removed:
        if key not in present:
            raise _contradiction(f"removes {what}{' '.join(key)}, which is not in the base")
    for key in added:
        if key in present and key not in removed:
            raise _contradiction(f"adds {what}{' '.join(key)}, which is already in the base")


def apply_delta(
    symbols: Sequence[Symbol], edges: Sequence[Edge], delta: GraphDelta
) -> tuple[tuple[Symbol, ...], tuple[Edge, ...]]:
    """Apply ``delta`` atomically to the snapshot ``(symbols, edges)`` (§10.4).

    The snapshot must hash to ``delta.base_root`` and the result to ``delta.new_root``
    (else ``root_mismatch``); removing what is absent or adding what exists is
    ``invalid_delta``. The inputs are never modified: the new snapshot is returned, base
    order kept with additions appended.

    >>> base = [Symbol("pkg.A", "function", 0.5, "lsp")]
    >>> new = base + [Symbol("pkg.B", "type", 0.25, "ast", 1)]
    >>> d = GraphDelta(pack_root(base, []), pack_root(new, []), added=new[1:])
    >>> apply_delta(base, [], d)[0] == tuple(new)
    True
    """
    base_syms, base_edges = tuple(symbols), tuple(edges)
    held = pack_root(base_syms, base_edges)
    if held != delta.base_root:
        raise GCFError(
            "root_mismatch",
            f"the snapshot's root {held} is not the delta's base_root {delta.base_root}",
        )
    removed = _unique_keys((_skey(s) for s in delta.removed), "## removed symbol")
    added = _unique_keys((_skey(s) for s in delta.added), "## added symbol")
    _check_operations(removed, added, {_skey(s) for s in base_syms}, "")
    new_syms = tuple(s for s in base_syms if _skey(s) not in removed) + delta.added
    e_removed = _unique_keys((_ekey(e) for e in delta.removed_edges), "## edges_removed edge")
    e_added = _unique_keys((_ekey(e) for e in delta.added_edges), "## edges_added edge")
    _check_operations(e_removed, e_added, {_ekey(e) for e in base_edges}, "edge ")
    kept = tuple(e for e in base_edges if _ekey(e) not in e_removed)
    new_edges = kept + tuple(Edge(e.source, e.target, e.edge_type) for e in delta.added_edges)
    names = {s.qualified_name for s in new_syms}
    for e in new_edges:
        for end in (e.source, e.target):
            if end not in names:
                raise _contradiction(f"edge {e.source} -> {e.target} would dangle at {end}")
    got = pack_root(new_syms, new_edges)
    if got != delta.new_root:
        raise GCFError(
            "root_mismatch",
            f"the applied snapshot hashes to {got}, not the delta's new_root {delta.new_root}",
        )
    return new_syms, new_edges


def _unique_keys(keys: Iterable[tuple[str, ...]], what: str) -> set[tuple[str, ...]]:
    seen: set[tuple[str, ...]] = set()
    for key in keys:
        if key in seen:
            raise _contradiction(f"{what} {' '.join(key)} appears twice")
        seen.add(key)
    return seen


def make_delta(base: Graph, new: Graph, *, tool: str = "") -> GraphDelta:
    """The delta from snapshot ``base`` to snapshot ``new`` (producer side of §10.3).

    A symbol whose score, provenance or distance changed is removed and re-added.
    ``delta_tokens``/``full_tokens`` are left at 0 for the caller to fill in.

    >>> a = Graph([Symbol("pkg.A", "function", 0.5, "lsp")])
    >>> b = Graph([Symbol("pkg.B", "function", 0.5, "lsp")])
    >>> d = make_delta(a, b)
    >>> [s.qualified_name for s in d.removed], [s.qualified_name for s in d.added]
    (['pkg.A'], ['pkg.B'])
    """
    old_syms = {_skey(s): s for s in base.symbols}
    new_syms = {_skey(s): s for s in new.symbols}
    removed = tuple(s for k, s in old_syms.items() if new_syms.get(k) != s)
    added = tuple(s for k, s in new_syms.items() if old_syms.get(k) != s)
    old_edges = {_ekey(e) for e in base.edges}
    new_edges = {_ekey(e) for e in new.edges}
    return GraphDelta(
        pack_root(base.symbols, base.edges),
        pack_root(new.symbols, new.edges),
        removed,
        added,
        tuple(Edge(*k) for k in sorted(old_edges - new_edges)),
        tuple(Edge(*k) for k in sorted(new_edges - old_edges)),
        tool or new.tool,
    )
