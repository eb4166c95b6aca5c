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
import inspect
import json
import logging
import threading
import time
import typing
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal, TypeVar, cast, overload

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp_types import CallToolResult, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from .. import tokens
from ..answers.choose import (
    AnswerPolicy,
    Candidates,
    Choice,
    DeltaState,
    Form,
    advance,
    choose,
    held_after,
    is_unchanged,
    keyed_set,
    settle,
)
from ..answers.forms import FullForms, full_candidates
from ..answers.since import SINCE_ARGUMENT, Names, handle_of
from ..generic.encoder import dumps as generic_dumps
from ..graph import Graph, graph_to_json
from ..graph import Session as GraphSession
from ..graph import dumps as graph_dumps
from ..jsonio import dumps_compact
from ..keyed import DeltaSession, FixedN, KeyedSet, SizeGuard
from ..proxy.config import DENSE_CONSTRUCTS, Codec
from ..proxy.policy import CAPABILITY as _CAPABILITY
from ..proxy.policy import OUTPUT_FORMATS, output_format_capability
from ..proxy.policy import OutputFormat as OutputFormat
from ..relative import ResultMemory
from .client import with_output_format

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

#: The key under the client's ``capabilities.experimental`` that names its output format.
CAPABILITY: Final = _CAPABILITY
FORMATS: Final[tuple[OutputFormat, ...]] = OUTPUT_FORMATS

ToolContext = Context[Any, Any] | ServerRequestContext[Any, Any] | None

_F = TypeVar("_F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------
# Negotiation
# ---------------------------------------------------------------------------------------


def _request_context(ctx: ToolContext) -> ServerRequestContext[Any, Any] | None:
    if ctx is None:
        return None
    if isinstance(ctx, ServerRequestContext):
        return ctx
    try:
        return ctx.request_context
    except ValueError:  # a Context built outside a request
        return None


def _format_value(raw: object) -> OutputFormat | None:
    return output_format_capability({CAPABILITY: raw})


def client_output_format(ctx: ToolContext) -> OutputFormat | None:
    """The output format the client declared for its session, or None if it declared none.

    Read from ``capabilities.experimental.output_format`` of the ``initialize`` request (or,
    on the stateless 2026-07-28 protocol, of the request's capability envelope). Both
    ``{"format": "gcf"}`` and a bare ``"gcf"`` are understood.

    >>> client_output_format(None) is None
    True
    """
    rc = _request_context(ctx)
    if rc is None:
        return None
    caps = rc.session.client_capabilities
    experimental = caps.experimental if caps is not None else None
    return output_format_capability(experimental)


def negotiated_format(
    ctx: ToolContext, requested: str | None = None, *, default: OutputFormat = "json"
) -> OutputFormat:
    """The format one call is answered in: the per-call ``requested`` format, else the
    session's declared format, else ``default``.

    >>> negotiated_format(None), negotiated_format(None, "gcf")
    ('json', 'gcf')
    >>> negotiated_format(None, default="gcf")
    'gcf'
    """
    if requested is not None:
        fmt = _format_value(requested)
        if fmt is None:
            raise ValueError(f"unknown output format {requested!r}; use 'gcf' or 'json'")
        return fmt
    return client_output_format(ctx) or default


# ---------------------------------------------------------------------------------------
# Per-session state
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionLimits:
    """Bounds on the state a :class:`GCFResponder` keeps (spec §9.5).

    ``max_sessions`` connections are tracked at once (the least recently used is expired
    first); a session idle for ``idle_seconds`` or older than ``max_lifetime_seconds`` is
    expired; a graph session stops at ``max_symbols`` retained symbol IDs and a session keeps
    at most ``max_delta_bases`` delta bases (one per tool and arguments). Whatever is expired
    answers with a full non-session payload and starts over.

    >>> SessionLimits().max_symbols
    10000
    """

    max_sessions: int = 1024
    max_symbols: int = 10_000
    idle_seconds: float = 30 * 60.0
    max_lifetime_seconds: float = 24 * 3600.0
    max_delta_bases: int = 64


@dataclass
class _SessionState:
    created: float
    last_used: float
    graph: GraphSession | None = None  # created on first use
    # What the client holds per tool + arguments (least recently used first).
    deltas: OrderedDict[str, DeltaState] = field(default_factory=OrderedDict)
    # The results this connection was sent and named, for relative answers (created on use).
    names: Names | None = None


def _connection(ctx: ToolContext) -> Connection | None:
    """The MCP connection this request belongs to, when it outlives the request."""
    rc = _request_context(ctx)
    if rc is None:
        return None
    # MCPServer's Context does not expose the Connection; the ServerSession proxy holds it.
    # It is the SDK's own per-client state owner (Connection.state, Connection.exit_stack).
    conn = getattr(rc.session, "_connection", None)
    if not isinstance(conn, Connection):
        return None
    if conn.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # A 2026-07-28 connection lives for one request: nothing is "already sent" on it.
        return None
    return conn


class _Sessions:
    """Session states keyed by connection; bounded, expiring, dropped on close."""

    def __init__(self, limits: SessionLimits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self._clock = clock
        self._states: weakref.WeakKeyDictionary[Connection, _SessionState] = (
            weakref.WeakKeyDictionary()
        )
        self._expired: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, conn: Connection | None) -> _SessionState | None:
        """This connection's state, or None when the call must be answered session-less."""
        if conn is None:
            return None
        now = self._clock()
        with self._lock:
            self._sweep(now)
            state = self._states.get(conn)
            if state is not None:
                state.last_used = now
                return state
            fresh = _SessionState(created=now, last_used=now)
            self._states[conn] = fresh
            self._evict()
            if conn in self._expired:
                # §9.4: an expired session answers with a full non-session payload; the
                # fresh state starts the new session from the next call on.
                self._expired.discard(conn)
                return None
            conn.exit_stack.callback(self._forget, weakref.ref(conn))
            return fresh

    def expire(self, conn: Connection) -> None:
        with self._lock:
            if self._states.pop(conn, None) is not None:
                self._expired.add(conn)

    def _forget(self, ref: weakref.ref[Connection]) -> None:
        conn = ref()
        if conn is not None:
            with self._lock:
                self._states.pop(conn, None)
                self._expired.discard(conn)

    def _sweep(self, now: float) -> None:
        lim = self.limits
        stale = [
            c
            for c, s in self._states.items()
            if now - s.last_used > lim.idle_seconds or now - s.created > lim.max_lifetime_seconds
        ]
        for c in stale:
            del self._states[c]
            self._expired.add(c)

    def _evict(self) -> None:
        while len(self._states) > self.limits.max_sessions:
            oldest = min(self._states.items(), key=lambda kv: kv[1].last_used)[0]
            del self._states[oldest]
            self._expired.add(oldest)


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    return pydantic_core.to_jsonable_python(value)


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
        self._sessions = _Sessions(self.limits, clock)
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
        name = tool or _tool_name(ctx) or ""
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
        value = graph_to_json(data) if is_graph else _jsonable(data)
        if fmt == "json":
            return [dumps_compact(value)]
        conn = _connection(ctx)
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
            state.names = Names("all", 15, 0, count, ResultMemory())
        names = state.names
        held = names.held(tool, call_key, handle_of(since), False, "json")
        handle = names.memory.mint()
        if held is not None:
            candidates = names.json_candidate(candidates, held, value, tool, handle, None)
        choice = settle(candidates, _ANSWERS)
        if handle is None:
            return [_text(choice, candidates.json)]
        plain = candidates.json.tokens  # no original text: compact JSON is the plain form
        named, _, block = names.name_value(
            choice, handle, plain, tool, call_key, None, False, value, held, candidates.json.size
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

        >>> from mcp.server.mcpserver import MCPServer
        >>> mcp = MCPServer("demo")
        >>> @mcp.tool()
        ... @gcf_tool(delta_key="id")
        ... def orders(status: str) -> list[dict[str, Any]]:
        ...     return [{"id": 1, "status": status}]
        >>> sorted(inspect.signature(orders).parameters)
        ['format', 'gcf_context', 'pack_root', 'status']
        """

        def decorate(func: _F) -> _F:
            wrapped = self._wrap(func, delta_key, format_arg, pack_root_arg, dense, relative)
            return cast(_F, wrapped)

        return decorate(fn) if fn is not None else decorate

    def _wrap(
        self,
        fn: Callable[..., Any],
        delta_key: str | None,
        format_arg: str,
        pack_root_arg: str,
        dense: bool | tuple[str, ...] = False,
        relative: bool = False,
    ) -> Callable[..., Awaitable[CallToolResult]]:
        sig = inspect.signature(fn, eval_str=True)
        hints = typing.get_type_hints(fn, include_extras=True)
        ctx_name = _context_parameter(sig, hints)
        params = list(sig.parameters.values())
        taken = {p.name for p in params}
        added: list[inspect.Parameter] = []
        for arg, wanted in ((format_arg, True), (pack_root_arg, delta_key is not None)):
            if wanted and arg in taken:
                raise TypeError(
                    f"{fn.__name__} already has a parameter {arg!r}; pass "
                    f"{'format_arg' if arg == format_arg else 'pack_root_arg'}=... to gcf_tool "
                    "to name the added argument differently"
                )
        added.append(
            inspect.Parameter(
                format_arg,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=_FORMAT_ANNOTATION,
            )
        )
        if delta_key is not None:
            added.append(
                inspect.Parameter(
                    pack_root_arg,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=_PACK_ROOT_ANNOTATION,
                )
            )
        since_name = "gcf_since"
        if relative:
            if SINCE_ARGUMENT in taken:
                raise TypeError(f"{fn.__name__} already has a parameter {SINCE_ARGUMENT!r}")
            while since_name in taken:
                since_name += "_"
            added.append(
                inspect.Parameter(
                    since_name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=_SINCE_ANNOTATION,
                )
            )
        added_ctx = ctx_name is None
        if ctx_name is None:
            ctx_name = "gcf_context"
            while ctx_name in taken:
                ctx_name += "_"
            added.append(
                inspect.Parameter(
                    ctx_name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Context | None,
                )
            )
        # Keyword-only parameters must precede **kwargs.
        tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
        head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
        new_sig = sig.replace(parameters=[*head, *added, *tail])
        annotations = {p.name: p.annotation for p in new_sig.parameters.values()}
        annotations["return"] = sig.return_annotation
        if sig.return_annotation is inspect.Signature.empty:
            del annotations["return"]

        # The same output schema MCPServer derives for the undecorated function.
        meta: FuncMetadata = func_metadata(fn, skip_names=[ctx_name] if not added_ctx else [])
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004
        )
        responder = self
        context_name = ctx_name

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
            ctx = kwargs.pop(context_name, None) if added_ctx else kwargs.get(context_name)
            fmt = kwargs.pop(format_arg, None)
            echoed = kwargs.pop(pack_root_arg, None) if delta_key is not None else None
            # The SDK passes the argument by its alias (_since); a direct call by name.
            since = kwargs.pop(SINCE_ARGUMENT, None) if relative else None
            since = kwargs.pop(since_name, since) if relative else None
            if is_async:
                result = await fn(*args, **kwargs)
            else:
                result = await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
            if isinstance(result, CallToolResult):
                return result
            structured = None
            value = result
            if meta.output_schema is not None:
                converted = meta.convert_result(result)
                if (
                    isinstance(converted, CallToolResult)
                    and converted.structured_content is not None
                ):
                    structured = converted.structured_content
                    if not isinstance(result, Graph):
                        value = structured["result"] if meta.wrap_output else structured
            call_key = ""
            if delta_key is not None or relative:
                plain = {k: v for k, v in kwargs.items() if k != context_name}
                call_key = json.dumps(_jsonable(plain), sort_keys=True, default=str)
            return responder.respond(
                value,
                ctx,
                format=fmt,
                structured=structured,
                delta_key=delta_key,
                pack_root=echoed,
                call_key=call_key,
                dense=dense,
                relative=relative,
                since=since,
            )

        wrapper.__signature__ = new_sig  # type: ignore[attr-defined]
        wrapper.__annotations__ = annotations
        return wrapper


_FORMAT_ANNOTATION: Final = Annotated[
    Literal["gcf", "json"] | None,
    Field(
        description="Output format of this call's result: 'gcf' (GCF, fewer tokens) or "
        "'json'. Default: the session's negotiated format."
    ),
]
_SINCE_ANNOTATION: Final = Annotated[
    str | None,
    Field(
        alias=SINCE_ARGUMENT,
        description="The ref= of this call's earlier result that you still hold, to get only "
        "what changed (@@ unchanged, or an @@ patch of op|path|value rows to apply to it).",
    ),
]
_PACK_ROOT_ANNOTATION: Final = Annotated[
    str | None,
    Field(
        description="The pack_root of your previous result for these same arguments; if "
        "given, only what changed since then is sent (GCF delta, spec §10a)."
    ),
]


def _context_parameter(sig: inspect.Signature, hints: Mapping[str, Any]) -> str | None:
    for name in sig.parameters:
        ann = hints.get(name)
        candidates = (ann, *typing.get_args(ann)) if ann is not None else ()
        for c in candidates:
            if inspect.isclass(c) and issubclass(c, Context):
                return name
    return None


def _text(choice: Choice, js: Form) -> str:
    # The helpers have no original text, so every choice carries one; JSON otherwise.
    return js.text if choice.text is None else choice.text


def _tool_name(ctx: ToolContext) -> str | None:
    rc = _request_context(ctx)
    params = rc.params if rc is not None else None
    name = params.get("name") if params is not None else None
    return name if isinstance(name, str) else None


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

    >>> from mcp.server.mcpserver import MCPServer
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

    >>> from mcp.server.mcpserver import MCPServer
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
