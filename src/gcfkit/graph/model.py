"""The graph data model (spec §3.2, 5, 6, 6a) and the small grammars every graph codec shares.

Symbols and edges are frozen dataclasses; :class:`Graph` is one payload. Helpers here format
and check the positional fields: kind abbreviations, two-decimal scores, distance groups and
the printable-ASCII constraint of §20.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..errors import GCFEncodeError
from ..grammar import BARE_KEY, BARE_KEY_RE, DISTANCE_GROUP, GROUP_NAMES, HEADER_VALUE_RE

__all__ = [
    "KIND_ABBREVIATIONS",
    "KIND_FULL_FORMS",
    "Edge",
    "Graph",
    "Symbol",
    "abbreviate_kind",
    "check_token",
    "expand_kind",
    "format_score",
    "group_distance",
    "group_name",
    "is_printable_token",
    "resolve",
    "symbol_index",
]

#: Full kind -> wire abbreviation (§5). Kinds not listed travel verbatim.
KIND_ABBREVIATIONS: Final[dict[str, str]] = {
    "function": "fn",
    "type": "type",
    "method": "method",
    "interface": "iface",
    "var": "var",
    "const": "const",
    "resource": "resource",
    "table": "table",
    "class": "class",
    "selector": "selector",
    "field": "field",
    "route_handler": "route",
    "external": "ext",
    "file": "file",
    "package": "pkg",
    "service": "svc",
}
#: Wire abbreviation -> full kind, the inverse of :data:`KIND_ABBREVIATIONS`.
KIND_FULL_FORMS: Final[dict[str, str]] = {v: k for k, v in KIND_ABBREVIATIONS.items()}


@dataclass(frozen=True)
class Symbol:
    """One graph node (§5). ``kind`` is the full form; unknown kinds are kept verbatim.

    >>> Symbol("pkg.Auth", "function", 0.78, "lsp")
    Symbol(qualified_name='pkg.Auth', kind='function', score=0.78, provenance='lsp', distance=0)
    """

    qualified_name: str
    kind: str
    score: float = 0.0
    provenance: str = ""
    distance: int = 0


@dataclass(frozen=True)
class Edge:
    """A relationship (§6): ``source`` ``edge_type`` ``target``, by qualified name.

    ``status`` is ``""``, or ``"added"`` / ``"removed"`` in diff payloads.

    >>> Edge("pkg.Server", "pkg.Auth", "calls")
    Edge(source='pkg.Server', target='pkg.Auth', edge_type='calls', status='')
    """

    source: str
    target: str
    edge_type: str
    status: str = ""


@dataclass(frozen=True, init=False)
class Graph:
    """A graph payload: symbols, edges and the header fields of §3.2.

    ``budget`` and ``tokens`` are the consumer's token budget and the tokens used; zero
    means "not stated". ``symbols`` and ``edges`` may be any iterables (a list, a
    generator); they are stored as tuples, so a Graph is immutable, hashable and compares
    alike whatever it was built from.

    >>> g = Graph([Symbol("pkg.A", "function", 0.9)], tool="search")
    >>> g.symbols[0].qualified_name, g.edges
    ('pkg.A', ())
    """

    symbols: tuple[Symbol, ...]
    edges: tuple[Edge, ...]
    tool: str
    budget: int
    tokens: int
    pack_root: str

    def __init__(
        self,
        symbols: Iterable[Symbol] = (),
        edges: Iterable[Edge] = (),
        tool: str = "",
        budget: int = 0,
        tokens: int = 0,
        pack_root: str = "",
    ) -> None:
        # h11's events pattern: a typed __init__ that takes what callers have and stores
        # the one immutable form (frozen, so through object.__setattr__).
        set_ = object.__setattr__
        set_(self, "symbols", tuple(symbols))
        set_(self, "edges", tuple(edges))
        set_(self, "tool", tool)
        set_(self, "budget", budget)
        set_(self, "tokens", tokens)
        set_(self, "pack_root", pack_root)


def abbreviate_kind(kind: str) -> str:
    """Wire form of a full kind: the §5 abbreviation, or the kind itself.

    >>> abbreviate_kind("interface"), abbreviate_kind("widget")
    ('iface', 'widget')
    """
    abbr = KIND_ABBREVIATIONS.get(kind)
    if abbr is not None:
        return abbr
    if not isinstance(kind, str) or not BARE_KEY_RE.match(kind):
        raise GCFEncodeError(
            "invalid_graph",
            f"kind {kind!r:.40} must be a bare key ({BARE_KEY}) to travel on a node line",
        )
    return kind


def expand_kind(abbr: str) -> str:
    """Full form of a wire kind; unknown abbreviations pass through verbatim.

    >>> expand_kind("fn"), expand_kind("widget")
    ('function', 'widget')
    """
    return KIND_FULL_FORMS.get(abbr, abbr)


def format_score(score: float) -> str:
    """Exactly two decimals, round-half-to-even on the exact double (§5).

    Python's ``format`` rounds the exact binary value, which is what the spec pins.

    >>> format_score(0.125), format_score(0.625), format_score(1)
    ('0.12', '0.62', '1.00')
    """
    if type(score) is float and score - score == 0.0:  # fast path: finite float
        return f"{score:.2f}"
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise GCFEncodeError("invalid_graph", f"score {score!r:.40} is not a number")
    if isinstance(score, float) and not math.isfinite(score):
        raise GCFEncodeError("out_of_range", f"score {score!r} is not finite; use a real number")
    return f"{score:.2f}"


def check_token(what: str, value: str) -> str:
    """Return ``value`` if it is printable non-whitespace ASCII (§20), else raise.

    >>> check_token("qualified name", "pkg.Auth")
    'pkg.Auth'
    """
    # Allocation-free fast path (str methods, no match object): this runs twice per row.
    if (
        type(value) is str
        and value
        and value.isascii()
        and value.isprintable()
        and " " not in value
    ):
        return value
    if not isinstance(value, str) or not HEADER_VALUE_RE.match(value):
        raise GCFEncodeError(
            "invalid_graph",
            f"{what} {value!r:.60} must be non-empty printable ASCII without whitespace "
            "(graph profile, spec §20); encode it with the generic profile instead",
        )
    return value


def is_printable_token(value: str) -> bool:
    """True when ``value`` satisfies the §20 field constraint."""
    return HEADER_VALUE_RE.match(value) is not None


def group_name(distance: int) -> str:
    """The group header name of a distance (§6a).

    >>> [group_name(d) for d in (0, 1, 2, 5)]
    ['targets', 'related', 'extended', 'distance_5']
    """
    if isinstance(distance, bool) or not isinstance(distance, int) or distance < 0:
        raise GCFEncodeError(
            "invalid_graph", f"distance {distance!r:.40} must be a non-negative integer"
        )
    return GROUP_NAMES[distance] if distance < 3 else f"distance_{distance}"


def group_distance(name: str) -> int | None:
    """The distance a group header names, or None for a name that is not a distance group.

    >>> group_distance("related"), group_distance("distance_7"), group_distance("edges")
    (1, 7, None)
    """
    if name in GROUP_NAMES:
        return GROUP_NAMES.index(name)
    m = DISTANCE_GROUP.match(name)
    if m is None or len(m.group(1)) > 18:
        return None
    return int(m.group(1))


def symbol_index(symbols: Iterable[Symbol]) -> dict[str, int]:
    """Map each qualified name to its position; -1 marks a name two kinds share.

    Edges name symbols by qualified name only, so a shared name cannot be an edge endpoint.
    A repeated (kind, qualified name) pair is rejected.
    """
    index: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for i, s in enumerate(symbols):
        prev = index.get(s.qualified_name)
        if prev is None:
            index[s.qualified_name] = i
            kinds[s.qualified_name] = s.kind
            continue
        if kinds[s.qualified_name] == s.kind:
            raise GCFEncodeError(
                "invalid_graph",
                f"symbol {s.kind} {s.qualified_name} appears twice; (kind, qualified name) "
                "identifies a symbol",
            )
        index[s.qualified_name] = -1
    return index


def resolve(index: dict[str, int], name: str, role: str) -> int:
    """Position of the symbol an edge endpoint names (see :func:`symbol_index`)."""
    i = index.get(name)
    if i is None:
        raise GCFEncodeError(
            "unknown_edge_reference",
            f"edge {role} {name!r:.60} is not among the graph's symbols",
        )
    if i < 0:
        raise GCFEncodeError(
            "invalid_graph",
            f"edge {role} {name!r:.60} is ambiguous: two symbols of different kinds share "
            "that qualified name",
        )
    return i
