"""GCF for MCP server authors: negotiated tool results, per-session dedup and deltas.

A tool keeps returning plain data (a ``dict``, a ``list``, or a :class:`gcfkit.graph.Graph`);
one extra decorator line makes its result follow what the client asked for:

.. code-block:: python

    from mcp.server.mcpserver import MCPServer
    from gcfkit.mcp.server import gcf_tool

    mcp = MCPServer("orders")

    @mcp.tool()
    @gcf_tool
    def list_orders(status: str) -> list[dict[str, object]]:
        return [{"id": 1, "total": 9.5, "status": status}]

What the client gets:

* **JSON** (compact) unless it opted in: the default, configurable per :class:`GCFResponder`.
* **GCF** when it opted in, in one of the forms below, but only when that is fewer tokens
  than compact JSON of the same value (the one answer policy of :mod:`gcfkit.answers.choose`,
  which the proxy uses too: no answer ever costs more than JSON). A session opts in at
  ``initialize`` with the capability ``{"experimental": {"output_format": {"format":
  "gcf"}}}`` (a bare ``"gcf"`` string is accepted too, but the MCP schema - and so the
  official SDK - only lets objects through ``experimental``); a single call opts in or out
  with the ``format`` argument the decorator adds to the tool's input schema (``"gcf"`` or
  ``"json"``).
* **GCF generic** for plain data.
* **GCF graph profile** for a returned :class:`~gcfkit.graph.Graph`, with session
  statefulness (§9): a symbol already sent *on this MCP connection* travels as a bare
  ``@N  # previously transmitted`` reference, never across connections. A graph answered in
  JSON (an empty one, say) restarts the session (§9.4).
* **Generic deltas** (§10a) for tools decorated with ``delta_key=...``: the decorator adds a
  ``pack_root`` argument; a client echoing the ``pack_root`` of its last full or delta
  answer to the same call gets ``unchanged``, a delta, or (re-anchor, size guard, schema
  change, unknown root) a full payload. An answer sent as JSON carries no root, so the call
  after it starts over.
* **The dense profile** (docs/extensions/dense.md), opt-in per tool with ``dense=True`` (or a
  tuple of its constructs): one more candidate form, sent only when it is fewer tokens than
  GCF and JSON, decoded back before it is sent, and carrying the one-line explanation of the
  constructs it uses as a ``#`` comment (so every reader of it is told).
* **Relative answers** (docs/extensions/relative-answers.md), opt-in per tool with
  ``relative=True``: results on a stateful connection are named (``ref=`` in a GCF header,
  else a ``ref=`` text block), the decorator adds the optional ``_since`` argument, and a call
  naming a result this connection was sent for the same arguments is answered ``@@
  unchanged`` or with a verified ``@@ patch`` when that is clearly smaller.
* The tool's ``structuredContent`` is kept whenever the tool declares an output schema.

Encoding never fails a call: a value GCF cannot carry (an integer beyond int64, say) is
logged on the ``gcfkit.mcp.server`` logger and sent as JSON.

Session state (graph sessions, delta bases) lives only for stateful connections: the
handshake-era MCP connection (stdio, or streamable HTTP with a session id). The 2026-07-28
stateless protocol builds a fresh connection for every request, so there the helpers send
full non-session payloads (§9.4). State is bounded (:class:`SessionLimits`, §9.5) and dropped
when the connection closes.

>>> users = [{"id": 1, "name": "Ada", "team": "core"}, {"id": 2, "name": "Lin", "team": "web"},
...          {"id": 3, "name": "Bo", "team": "core"}, {"id": 4, "name": "Cy", "team": "web"}]
>>> print(respond({"users": users}, None, format="gcf").content[0].text, end="")
GCF profile=generic
## users [4]{id,name,team}
1|Ada|core
2|Lin|web
3|Bo|core
4|Cy|web
>>> respond({"id": 1}, None, format="gcf").content[0].text  # GCF would cost more here
'{"id":1}'
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast, overload

from mcp.server.connection import Connection
from mcp_types import CallToolResult, TextContent

from .. import tokens
from ..answers.choose import (
    AnswerPolicy,
    Candidates,
    Choice,
    Form,
    advance,
    choose,
    held_after,
    is_unchanged,
    keyed_set,
    settle,
)
from ..answers.codec import DENSE_CONSTRUCTS, Codec
from ..answers.forms import FullForms, full_candidates
from ..answers.since import Asked, Names, handle_of
from ..generic.encoder import dumps as generic_dumps
from ..graph import Graph, graph_to_json
from ..graph import Session as GraphSession
from ..graph import dumps as graph_dumps
from ..jsonio import dumps_compact
from ..keyed import DeltaSession, FixedN, KeyedSet, SizeGuard
from ..relative import ResultMemory
from .client import with_output_format
from .decorator import ToolOptions, jsonable, wrap_tool
from .negotiation import (
    CAPABILITY,
    FORMATS,
    OutputFormat,
    client_output_format,
    negotiated_format,
)
from .sdk import ToolContext, connection_of, tool_name
from .sessions import SessionLimits, SessionStore

__all__ = [
    "CAPABILITY",
    "FORMATS",
    "GCFResponder",
    "OutputFormat",
    "SessionLimits",
    "client_output_format",
    "default_responder",
    "gcf_tool",
    "graph_to_json",
    "negotiated_format",
    "respond",
    "with_output_format",
]

logger = logging.getLogger("gcfkit.mcp.server")

_F = TypeVar("_F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def _keyed_set(value: Any, key: str, tool: str) -> KeyedSet | None:
    """``value`` as a keyed set, or None when it cannot be one (§10a.7).

    A list of flat row objects, or an object whose only member is such a list (the member
    name becomes the section name, so the payload decodes back to the same value).
    """
    name = tool or "rows"
    if isinstance(value, dict) and len(value) == 1:
        ((name, value),) = value.items()
    return keyed_set(value, key, name)


#: The server helpers' use of the one answer policy: the client holds a keyed set only
#: through a GCF answer whose pack root it can echo, and re-anchoring is the
#: :class:`~gcfkit.keyed.DeltaSession`'s own (``reanchor``), so a delta only has to beat JSON.
_ANSWERS: Final = AnswerPolicy(delta_ratio=1.0, tracks_delivery=False)


class GCFResponder:
    """Negotiated tool results plus the per-session state behind them.

    One responder serves one server; its state (graph sessions, delta bases) is keyed by MCP
    connection. :data:`default_responder` backs the module-level :func:`respond` and
    :func:`gcf_tool`; make your own to change the default format or the limits.

    >>> gcf = GCFResponder(default_format="gcf")
    >>> rows = [{"id": i, "name": n, "team": "core"} for i, n in enumerate(["Ada", "Lin", "Bo"])]
    >>> print(gcf.respond(rows, None).content[0].text, end="")
    GCF profile=generic
    ## [3]{id,name,team}
    0|Ada|core
    1|Lin|core
    2|Bo|core
    """

    def __init__(
        self,
        *,
        default_format: OutputFormat = "json",
        limits: SessionLimits | None = None,
        encoding: str = tokens.DEFAULT_ENCODING,
        reanchor: FixedN | SizeGuard | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if default_format not in FORMATS:
            raise ValueError(f"default_format must be 'gcf' or 'json', not {default_format!r}")
        self.default_format: OutputFormat = default_format
        self.limits = limits or SessionLimits()
        self.encoding = encoding
        # The size guard also enforces §10a.2's "delta < 60% of full" on every turn.
        self.reanchor: FixedN | SizeGuard = SizeGuard() if reanchor is None else reanchor
        self._clock = clock
        self._sessions = SessionStore(self.limits, clock)
        self._codec = Codec()

    @property
    def session_count(self) -> int:
        """How many MCP connections currently have state here."""
        return len(self._sessions)

    # -- the one entry point -----------------------------------------------------------

    def respond(
        self,
        data: Any,
        ctx: ToolContext,
        *,
        tool: str | None = None,
        format: str | None = None,
        structured: Mapping[str, Any] | None = None,
        delta_key: str | None = None,
        pack_root: str | None = None,
        call_key: str = "",
        dense: bool | tuple[str, ...] = False,
        relative: bool = False,
        since: str | None = None,
    ) -> CallToolResult:
        """Encode one tool result as negotiated and wrap it in a ``CallToolResult``.

        ``data`` is a JSON-model value or a :class:`~gcfkit.graph.Graph`; ``ctx`` the tool's
        MCPServer ``Context`` (or a lowlevel ``ServerRequestContext``, or None outside a
        request); ``format`` the per-call override; ``structured`` becomes
        ``structuredContent``. With ``delta_key``, flat row objects identified by that field
        (a list of them, or an object whose only member is that list) take part in §10a
        deltas: ``pack_root`` is the root the client echoed and ``call_key`` tells calls with
        different arguments apart. ``dense`` adds the dense profile as a candidate (``True``:
        every construct; or a tuple of them). ``relative`` names the result and answers a
        call whose ``since`` names a result of the same ``call_key`` relative to it. Encoding
        runs on the caller's thread; one connection's state is not meant to be encoded from
        several threads at once.

        >>> respond({"a": 1}, None).content[0].text
        '{"a":1}'
        """
        fmt = negotiated_format(ctx, format, default=self.default_format)
        name = tool or tool_name(ctx) or ""
        constructs = DENSE_CONSTRUCTS if dense is True else tuple(dense or ())
        texts = self._answer(
            data, ctx, fmt, name, delta_key, pack_root, call_key, constructs, relative, since
        )
        return CallToolResult(
            content=[TextContent(type="text", text=t) for t in texts],
            structured_content=dict(structured) if structured is not None else None,
        )

    def _answer(
        self,
        data: Any,
        ctx: ToolContext,
        fmt: OutputFormat,
        tool: str,
        delta_key: str | None,
        pack_root: str | None,
        call_key: str,
        dense: tuple[str, ...] = (),
        relative: bool = False,
        since: str | None = None,
    ) -> list[str]:
        is_graph = isinstance(data, Graph)
        value = graph_to_json(data) if is_graph else jsonable(data)
        if fmt == "json":
            return [dumps_compact(value)]
        conn = connection_of(ctx)
        try:
            compact = dumps_compact(value)
            js = self._form(compact)
            if is_graph:
                return [self._graph(cast(Graph, data), js, conn, tool)]
            if delta_key is not None:
                keyed = self._keyed(value, js, conn, tool, delta_key, pack_root, call_key)
                if keyed is not None:
                    return [keyed]
            if not dense and not relative:
                gcf = self._form(generic_dumps(value, tool=tool or None))
                return [_text(choose(Candidates(json=js, gcf=gcf), _ANSWERS), js)]
            return self._full_or_relative(
                value, compact, conn, tool, call_key, dense, relative, since
            )
        except Exception as exc:
            # A value GCF cannot carry must not fail the call: JSON still can.
            logger.warning("GCF encoding of %r failed, answering in JSON: %s", tool, exc)
            logger.debug("GCF encoding failure", exc_info=True)
            return [dumps_compact(value)]

    def _full_or_relative(
        self,
        value: Any,
        compact: str,
        conn: Connection | None,
        tool: str,
        call_key: str,
        dense: tuple[str, ...],
        relative: bool,
        since: str | None,
    ) -> list[str]:
        """The proxy's path, through the same pieces: the full forms (GCF, dense, JSON) of
        :class:`~gcfkit.answers.forms.FormBuilder`, a relative answer to the result ``since``
        names, the one answer policy, and the result named."""
        # A dense payload carries the explanation of what it uses (counted); GCF itself was
        # negotiated, so the client reads it.
        count = functools.partial(tokens.count, encoding=self.encoding)
        forms = FullForms(self._codec, count=count, dense=dense, explain_gcf=False)
        candidates, _ = full_candidates(value, forms, count)
        state = self._sessions.get(conn) if relative else None
        if state is None:
            return [_text(choose(candidates, _ANSWERS), candidates.json)]
        if state.names is None:
            state.names = Names(
                mode="all", reanchor=15, min_bytes=0, count=count, memory=ResultMemory()
            )
        names = state.names
        asked = Asked(tool, call_key, handle_of(since))
        held = names.held(asked, "json")
        handle = names.memory.mint()
        if held is not None:
            candidates = names.json_candidate(candidates, held, value, tool, handle, None)
        choice = settle(candidates, _ANSWERS)
        if handle is None:
            return [_text(choice, candidates.json)]
        plain = candidates.json.tokens  # no original text: compact JSON is the plain form
        named, _, block = names.name_value(
            choice, handle, plain, asked, value, held, candidates.json.size
        )
        texts = [_text(named, candidates.json)]
        return [*texts, block] if block is not None else texts

    def _form(self, text: str) -> Form:
        return Form.of(text, lambda t: tokens.count(t, self.encoding))

    def _graph(self, graph: Graph, js: Form, conn: Connection | None, tool: str) -> str:
        if tool and not graph.tool:
            graph = dataclasses.replace(graph, tool=tool)
        state = self._sessions.get(conn)
        if state is None:
            return _text(
                choose(Candidates(json=js, gcf=self._form(graph_dumps(graph))), _ANSWERS), js
            )
        if state.graph is None:
            lim = self.limits
            state.graph = GraphSession(
                max_symbols=lim.max_symbols,
                idle_timeout=lim.idle_seconds,
                max_lifetime=lim.max_lifetime_seconds,
                clock=self._clock,
            )
        # The session itself falls back to a full non-session payload past its §9.5 limits.
        choice = choose(Candidates(json=js, gcf=self._form(state.graph.dumps(graph))), _ANSWERS)
        if choice.decision == "json":
            # §9.4: the client did not get this payload's IDs, so none of them may be referenced.
            state.graph.reset()
        return _text(choice, js)

    def _keyed(
        self,
        value: Any,
        js: Form,
        conn: Connection | None,
        tool: str,
        key: str,
        echoed: str | None,
        call_key: str,
    ) -> str | None:
        ks = _keyed_set(value, key, tool)
        if ks is None:
            return None
        state = self._sessions.get(conn)
        slot = f"{tool}\x00{call_key}"
        held = state.deltas.get(slot) if state is not None else None
        # §10a: a delta only against exactly the base this producer session last sent.
        base = held if held is not None and echoed is not None and echoed == held.root else None
        step = advance(base, ks, functools.partial(self._start_session, tool))
        if step.wire is None:
            candidates = Candidates(json=js, gcf=self._form(step.after.session.full()))
        elif step.is_full:
            candidates = Candidates(json=js, gcf=self._form(step.wire))
        else:
            delta = self._form(step.wire)
            candidates = Candidates(json=js, delta=delta, unchanged=is_unchanged(step.wire))
        choice = choose(candidates, _ANSWERS)
        if state is not None:
            after = held_after(choice, step, _ANSWERS)
            if after is None:
                state.deltas.pop(slot, None)
            else:
                state.deltas[slot] = after
                state.deltas.move_to_end(slot)
                while len(state.deltas) > self.limits.max_delta_bases:
                    state.deltas.popitem(last=False)
        return _text(choice, js)

    def _start_session(self, tool: str, base: KeyedSet) -> DeltaSession:
        return DeltaSession(base, tool=tool, reanchor=self.reanchor)

    # -- the decorator ------------------------------------------------------------------

    @overload
    def tool(self, fn: _F, /) -> _F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        delta_key: str | None = None,
        format_arg: str = "format",
        pack_root_arg: str = "pack_root",
        dense: bool | tuple[str, ...] = False,
        relative: bool = False,
    ) -> Callable[[_F], _F]: ...

    def tool(
        self,
        fn: _F | None = None,
        /,
        *,
        delta_key: str | None = None,
        format_arg: str = "format",
        pack_root_arg: str = "pack_root",
        dense: bool | tuple[str, ...] = False,
        relative: bool = False,
    ) -> _F | Callable[[_F], _F]:
        """Decorate an MCPServer tool function so its result is answered as negotiated.

        Put it *under* ``@mcp.tool()``. The tool's parameters, description and output schema
        stay as they were; the input schema gains an optional ``format`` argument (with
        ``delta_key``, an optional ``pack_root`` argument; with ``relative``, an optional
        ``_since`` argument). ``dense`` and ``relative`` opt this tool in to the dense
        profile and to relative answers (see the module docstring). A ``Context`` parameter is added
        when the function has none (FastMCP-style injection; it is not in the schema).

        >>> import inspect
        >>> from mcp.server.mcpserver import MCPServer
        >>> mcp = MCPServer("demo")
        >>> @mcp.tool()
        ... @gcf_tool(delta_key="id")
        ... def orders(status: str) -> list[dict[str, Any]]:
        ...     return [{"id": 1, "status": status}]
        >>> sorted(inspect.signature(orders).parameters)
        ['format', 'gcf_context', 'pack_root', 'status']
        """

        options = ToolOptions(delta_key, format_arg, pack_root_arg, dense, relative)

        def decorate(func: _F) -> _F:
            return cast(_F, wrap_tool(self.respond, func, options))

        return decorate(fn) if fn is not None else decorate


def _text(choice: Choice, js: Form) -> str:
    # The helpers have no original text, so every choice carries one; JSON otherwise.
    return js.text if choice.text is None else choice.text


#: The responder behind :func:`respond` and :func:`gcf_tool` (JSON by default).
default_responder: Final = GCFResponder()


def respond(
    data: Any,
    ctx: ToolContext,
    *,
    tool: str | None = None,
    format: str | None = None,
    structured: Mapping[str, Any] | None = None,
    delta_key: str | None = None,
    pack_root: str | None = None,
    call_key: str = "",
    dense: bool | tuple[str, ...] = False,
    relative: bool = False,
    since: str | None = None,
) -> CallToolResult:
    """:meth:`GCFResponder.respond` of the :data:`default_responder`.

    For a tool that builds its own result:

    >>> import inspect
    >>> from mcp.server.mcpserver import Context, MCPServer
    >>> mcp = MCPServer("demo")
    >>> @mcp.tool()
    ... def users(ctx: Context, format: str | None = None) -> CallToolResult:
    ...     return respond([{"id": 1, "name": "Ada"}], ctx, format=format)
    >>> respond([{"id": 1, "name": "Ada"}], None, format="json").content[0].text
    '[{"id":1,"name":"Ada"}]'
    """
    return default_responder.respond(
        data,
        ctx,
        tool=tool,
        format=format,
        structured=structured,
        delta_key=delta_key,
        pack_root=pack_root,
        call_key=call_key,
        dense=dense,
        relative=relative,
        since=since,
    )


@overload
def gcf_tool(fn: _F, /) -> _F: ...


@overload
def gcf_tool(
    fn: None = None,
    /,
    *,
    delta_key: str | None = None,
    format_arg: str = "format",
    pack_root_arg: str = "pack_root",
    dense: bool | tuple[str, ...] = False,
    relative: bool = False,
) -> Callable[[_F], _F]: ...


def gcf_tool(
    fn: _F | None = None,
    /,
    *,
    delta_key: str | None = None,
    format_arg: str = "format",
    pack_root_arg: str = "pack_root",
    dense: bool | tuple[str, ...] = False,
    relative: bool = False,
) -> _F | Callable[[_F], _F]:
    """:meth:`GCFResponder.tool` of the :data:`default_responder`: ``@gcf_tool`` or
    ``@gcf_tool(delta_key="id")`` under ``@mcp.tool()``.

    >>> import inspect
    >>> from mcp.server.mcpserver import Context, MCPServer
    >>> mcp = MCPServer("demo")
    >>> @mcp.tool()
    ... @gcf_tool
    ... def users() -> list[dict[str, Any]]:
    ...     return [{"id": 1, "name": "Ada"}]
    >>> "format" in inspect.signature(users).parameters
    True
    """
    if fn is not None:
        return default_responder.tool(fn)
    return default_responder.tool(
        delta_key=delta_key,
        format_arg=format_arg,
        pack_root_arg=pack_root_arg,
        dense=dense,
        relative=relative,
    )
