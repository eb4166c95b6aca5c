"""Streaming graph encoder (spec §8): rows are written the moment they are added.

The header has no count fields, the edges section is ``## edges [?]``, and ``close()``
writes the ``##! summary`` trailer with the symbol and edge totals and the per-group counts
(positional by default, labeled on request, §8.4.1).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from ..errors import GCFEncodeError, at_path
from ..grammar import SUMMARY
from ..header import format_header
from .encoder import edge_tail, header_pairs, node_fields
from .model import Edge, Graph, Symbol, group_name

__all__ = ["GraphStreamEncoder"]


class GraphStreamEncoder:
    """Write a graph payload incrementally through ``write`` (any callable taking ``str``).

    Symbols must arrive group by group (non-decreasing distance) and before any edge; the
    encoder cannot reorder what it has already written, so feed each group by descending
    score to keep the canonical order of §16.1. IDs are assigned from ``@0`` in arrival
    order; :meth:`add_symbol` returns the ID.

    Memory: with ``index=True`` (default) the encoder remembers each qualified name so
    :meth:`add_edge` can resolve edges by name. With ``index=False`` it keeps no per-symbol
    state at all, constant memory however long the stream, and edges are given by ID
    (``add_edge(e, source_id=..., target_id=...)``).

    >>> out = []
    >>> enc = GraphStreamEncoder(out.append, tool="ctx")
    >>> enc.add_symbol(Symbol("pkg.A", "function", 0.9, "lsp"))
    0
    >>> enc.add_symbol(Symbol("pkg.B", "type", 0.5, "ast", 1))
    1
    >>> enc.add_edge(Edge("pkg.B", "pkg.A", "calls"))
    >>> enc.close()
    >>> print("".join(out), end="")
    GCF profile=graph tool=ctx
    ## targets
    @0 fn pkg.A 0.90 lsp
    ## related
    @1 type pkg.B 0.50 ast
    ## edges [?]
    @0<@1 calls
    ##! summary symbols=2 edges=1 counts=1,1,1
    """

    def __init__(
        self,
        write: Callable[[str], object],
        *,
        tool: str = "",
        budget: int = 0,
        tokens: int = 0,
        pack_root: str = "",
        labeled_counts: bool = False,
        index: bool = True,
    ) -> None:
        shell = Graph(tool=tool, budget=budget, tokens=tokens, pack_root=pack_root)
        header = format_header("graph", header_pairs(shell, 0, None))
        self._write = write
        self._labeled = labeled_counts
        self._index: dict[str, tuple[int, str]] | None = {} if index else None
        self._symbols = 0
        self._edges = 0
        self._distance = -1
        self._group = ""
        self._group_count = 0
        self._groups: list[tuple[str, int]] = []
        self._in_edges = False
        self._closed = False
        write(header + "\n")

    @property
    def symbols(self) -> int:
        """Symbols written so far."""
        return self._symbols

    @property
    def edges(self) -> int:
        """Edges written so far."""
        return self._edges

    def _check_open(self) -> None:
        if self._closed:
            raise GCFEncodeError("invalid_graph", "the stream is closed")

    def _end_group(self) -> None:
        if self._group_count:
            self._groups.append((self._group, self._group_count))
            self._group_count = 0

    def add_symbol(self, symbol: Symbol) -> int:
        """Write one node line (and its group header when the distance changes)."""
        self._check_open()
        if self._in_edges:
            raise GCFEncodeError(
                "invalid_graph", "symbols come before edges: the edges section is already open"
            )
        ident = self._symbols
        try:
            if not isinstance(symbol, Symbol):
                raise GCFEncodeError("invalid_graph", f"{symbol!r:.60} is not a Symbol")
            fields = node_fields(symbol)
            distance = symbol.distance
            if distance < self._distance:
                raise GCFEncodeError(
                    "invalid_graph",
                    f"distance {distance} after distance {self._distance}: stream symbols "
                    "group by group in ascending distance",
                )
            if self._index is not None:
                self._remember(symbol, ident)
        except GCFEncodeError as e:
            # Named as graph.dumps names it: the graph streamed so far is the value.
            raise at_path(at_path(e, ident), "symbols") from None
        if distance != self._distance:
            self._end_group()
            self._distance = distance
            self._group = group_name(distance)
            self._write(f"## {self._group}\n")
        self._write(f"@{ident} {fields}\n")
        self._symbols = ident + 1
        self._group_count += 1
        return ident

    def _remember(self, symbol: Symbol, ident: int) -> None:
        assert self._index is not None
        prior = self._index.get(symbol.qualified_name)
        if prior is None:
            self._index[symbol.qualified_name] = (ident, symbol.kind)
            return
        if prior[1] == symbol.kind:
            raise GCFEncodeError(
                "invalid_graph",
                f"symbol {symbol.kind} {symbol.qualified_name} was already streamed",
            )
        # Two kinds share the name: an edge can no longer name either one.
        self._index[symbol.qualified_name] = (-1, "")

    def _resolve(self, name: str, given: int | None, role: str) -> int:
        if given is not None:
            if isinstance(given, bool) or not isinstance(given, int):
                raise GCFEncodeError("invalid_graph", f"{role}_id {given!r:.40} is not an int")
            if not 0 <= given < self._symbols:
                raise GCFEncodeError(
                    "unknown_edge_reference", f"{role}_id @{given} has not been streamed"
                )
            return given
        if self._index is None:
            raise GCFEncodeError(
                "invalid_graph", f"index=False: add_edge needs {role}_id (the add_symbol result)"
            )
        found = self._index.get(name)
        if found is None:
            raise GCFEncodeError(
                "unknown_edge_reference", f"edge {role} {name!r:.60} has not been streamed"
            )
        if found[0] < 0:
            raise GCFEncodeError(
                "invalid_graph", f"edge {role} {name!r:.60} names two symbols of different kinds"
            )
        return found[0]

    def add_edge(
        self, edge: Edge, *, source_id: int | None = None, target_id: int | None = None
    ) -> None:
        """Write one edge line; endpoints by name, or by the IDs ``add_symbol`` returned."""
        self._check_open()
        try:
            if not isinstance(edge, Edge):
                raise GCFEncodeError("invalid_graph", f"{edge!r:.60} is not an Edge")
            tail = edge_tail(edge)
            source = self._resolve(edge.source, source_id, "source")
            target = self._resolve(edge.target, target_id, "target")
        except GCFEncodeError as e:
            raise at_path(at_path(e, self._edges), "edges") from None
        if not self._in_edges:
            self._end_group()
            self._in_edges = True
            self._write("## edges [?]\n")
        self._write(f"@{target}<@{source}{tail}\n")
        self._edges += 1

    def close(self) -> None:
        """Write the ``##! summary`` trailer. Further calls do nothing."""
        if self._closed:
            return
        self._end_group()
        self._closed = True
        if self._labeled:
            entries = [f"{name}:{n}" for name, n in self._groups] + [f"edges:{self._edges}"]
        else:
            entries = [str(n) for _, n in self._groups] + [str(self._edges)]
        self._write(
            f"{SUMMARY} symbols={self._symbols} edges={self._edges} counts={','.join(entries)}\n"
        )

    def __enter__(self) -> GraphStreamEncoder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # A failed stream gets no trailer: the decoder then reports what arrived.
        if exc_type is None:
            self.close()
