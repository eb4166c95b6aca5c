"""The sans-I/O core of the MCP proxy: JSON-RPC lines in, JSON-RPC lines out.

:class:`ProxyCore` sees every newline-delimited message between an MCP client and one MCP
server, and answers with the lines to write to each side. It does no I/O, so every rule is
testable without pipes or processes; :mod:`gcfkit.transports.stdio` is the thin asyncio shell.

What it rewrites, and nothing else (every other line passes byte for byte, in order):

* ``tools/call`` results (responses to ids of ``tools/call`` requests the client sent, and
  ``tasks/result`` payloads of task-augmented calls):
  each text block whose text is JSON becomes GCF generic when that has fewer tokens than
  compact JSON, else compact JSON when that is smaller than the original, else it stays.
  Error results, structured content, non-text blocks, non-JSON text and the results of
  file-reading tools are never touched. With ``join``, a result whose text blocks are all
  JSON objects is delivered as one array. With ``delta``, a repeated call whose results are
  keyed sets is delivered as a GCF generic delta (spec §10a).
* relative answers (docs/extensions/relative-answers.md, :mod:`gcfkit.answers.since`): results
  are named (``ref=``), and a call that passes ``"_since"`` naming one this session holds
  for the same tool and arguments is answered ``@@ unchanged``, ``@@ patch`` or ``@@ edit``
  when that is verified and clearly smaller; else in full.
* the ``initialize`` (and ``server/discover``) result: how to ask for relative answers
  (and, with ``primer_carrier="instructions"``, how to read GCF) is appended to
  ``instructions`` when GCF may be sent in this session.
* ``tools/list`` results, only with ``advertise_format``: an optional ``_format`` argument.
* tool filters (:mod:`gcfkit.proxy.toolfilter`, the policy's ``tool_filter``): a hidden tool
  is left out of ``tools/list`` results, and a ``tools/call`` of one never reaches the
  server: it goes as a ``ping`` with the call's id, whose answer becomes the JSON-RPC error
  naming the filter. So the request keeps its place on whatever carries it (a stdio pipe,
  a session's SSE stream, the shared process's renamed ids) and every shell answers it as
  it answers any request.
* ``tools/call`` requests: ``_format`` and ``_since`` arguments are stripped, and with
  ``decode_args`` GCF arguments are decoded where the tool's schema wants an object or array.

Which form a result takes is the one answer policy of :mod:`gcfkit.answers.choose`, shared with
the server helpers. Before sending GCF the core decodes it and compares it with the original
value (same types, key order and contents; :func:`gcfkit.jsonio.same_value`), and applies a
delta to its base before sending it; any failure, or running past the time budget, falls back
(compact JSON or the original) and says why in the :class:`~gcfkit.proxy.record.LedgerRecord`
it builds for each tool result (payload-free, durations only: the shell stamps the time;
token counts of untouched text are taken after the result is relayed).

The core owns no ambient state: its clock (for the time budget) is a constructor argument, it
holds no lock (a shell that warms it up in a thread awaits that before relaying a tool result:
:attr:`ProxyCore.expects_tool_result`), and its codec is resolved once, when it is built.

>>> core = ProxyCore(ProxyConfig(primer=False))
>>> out = core.from_client(b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
...                        b'"params":{"name":"t","arguments":{}}}\\n')
>>> out[0].to, out[0].data.endswith(b"\\n")
('server', True)
>>> core.from_server(b'{"jsonrpc":"2.0","id":1,"result":{"content":'
...                  b'[{"type":"text","text":"hi"}]}}\\n')[0].to
'client'
>>> core.pop_records()[0].decision
'unchanged'
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..answers.choose import FailureReason, fallback_word, utf8_len
from ..answers.primer import append_primer, append_relative_primer
from ..answers.since import SINCE_ARGUMENT, SINCE_SCHEMA, RefMode
from ..errors import GCFError
from ..readers import Reads, declared_client, declared_name, flattens, reader_of, reads_of
from ..relative import ResultMemory
from .config import Codec, ProxyConfig
from .content import text_blocks_of
from .jsonrpc import (
    CONNECTION_CLOSED,
    RequestKey,
    dump_edited,
    error_response,
    leading_members,
    parse_envelope,
    request_key,
    sniff_envelope,
)
from .policy import (
    FORMATS,
    Format,
    cap_format,
    output_format_capability,
)
from .record import LedgerRecord
from .rewrite import Budget, Call, Forget, Outcome, Reset, Rewriter, SessionEvent
from .structured import feeds_ui, strip_output_schemas
from .toolfilter import refusal, visible_tools

__all__ = [
    "CONNECTION_CLOSED",
    "FORMAT_ARGUMENT",
    "SINCE_ARGUMENT",
    "Codec",
    "Output",
    "ProxyConfig",
    "ProxyCore",
    "RefMode",
    "ToolJob",
]

#: The per-call opt-out argument (``"json"``, ``"off"`` or ``"gcf"``), stripped before forwarding.
FORMAT_ARGUMENT: Final = "_format"

_MAX_TASKS: Final = 1024
#: Lines longer than this are read from their envelope only (see ``receive_server``).
_SNIFF_BYTES: Final = 1024 * 1024
_MODERN_CAPS_KEY: Final = "io.modelcontextprotocol/clientCapabilities"


@dataclass(frozen=True, slots=True)
class ToolJob:
    """A ``tools/call`` response whose rewriting is left to the shell (see
    :meth:`ProxyCore.receive_server`): the ``line`` as the server wrote it and what the core
    knows of its call. ``started`` is on the core's clock; ``text_bytes`` is the size of its
    text (for the ledger, when no answer comes)."""

    line: bytes
    call: Call
    server: str
    started: float
    text_bytes: int
    #: ``line`` as the core parsed it (safe to re-serialize), for a rewrite in this process
    #: to start from (:meth:`~gcfkit.proxy.rewrite.Rewriter.rewrite_line`'s ``message``).
    message: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def tool(self) -> str:
        """The tool whose result it is."""
        return self.call.tool


@dataclass(frozen=True, slots=True)
class Output:
    """One line to write: ``to`` is ``"client"`` or ``"server"``; ``data`` ends with LF
    (unless it is a passed-through final line that had none)."""

    to: Literal["client", "server"]
    data: bytes
    #: A JSON-RPC response (result or error): what the relay may let overtake a result that
    #: is still being rewritten (:mod:`gcfkit.proxy.sequencer`).
    response: bool = field(default=False, compare=False)


# ---------------------------------------------------------------------------------------
# JSON helpers
# ---------------------------------------------------------------------------------------


def _args_key(tool: str, args: Any) -> str:
    try:
        return tool + "\x00" + _ARGS_KEY.encode(args)
    except (TypeError, ValueError):
        return tool + "\x00" + repr(args)


# Made once: json.dumps with options builds an encoder on every call.
_ARGS_KEY: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _output_format_cap(capabilities: Any) -> Format | None:
    if not isinstance(capabilities, dict):
        return None
    return output_format_capability(capabilities.get("experimental"))


# ---------------------------------------------------------------------------------------
# Per-session state
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    method: str
    tool: str = ""
    args_key: str = ""
    fmt: Format = "gcf"
    since: str | None = None  # the held result a tools/call named with _since
    opted: bool = False  # the call carries the proxy's _format opt-out
    refused: dict[str, Any] | None = None  # a call to a hidden tool: the error it gets


@dataclass(slots=True)
class _Session:
    ceiling: Format
    server_name: str
    schemas: dict[str, Any] = field(default_factory=dict)
    # Each listed tool's entry (description, annotations...): what file reads are told by.
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Whether each listed tool reads files, as its entry tells (asked on every result).
    file_tools: dict[str, bool] = field(default_factory=dict)
    native_format_arg: set[str] = field(default_factory=set)
    # Task-augmented tools/call (2025-11-25): taskId -> the call, for its tasks/result.
    tasks: dict[str, _Pending] = field(default_factory=dict)
    # The name the client declared in initialize (what its model reads: gcfkit.readers).
    client: str = ""


# ---------------------------------------------------------------------------------------
# The core
# ---------------------------------------------------------------------------------------


class ProxyCore:
    """The proxy's protocol logic for one client-server session; see the module docstring.

    Feed it every line read from the client (:meth:`from_client`) and from the server
    (:meth:`from_server`) and write the returned :class:`Output` lines in order. When the
    server is gone, :meth:`server_exited` answers every request still pending.
    :meth:`pop_records` hands over the ledger records built so far.

    Invariant the shell relies on: :meth:`from_client` only writes to the server and
    :meth:`from_server` / :meth:`server_exited` only to the client.

    >>> core = ProxyCore()
    >>> core.from_client(b"not json\\n")[0].data
    b'not json\\n'
    """

    def __init__(
        self,
        config: ProxyConfig | None = None,
        codec: Codec | None = None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        memory: Callable[[], ResultMemory] | None = None,
    ) -> None:
        self.config = config or ProxyConfig()
        codec = codec or Codec()
        self._loads = codec.loads
        self._clock = clock
        self._rewriter = Rewriter(self.config, codec, memory=memory)
        # The client's side of relative answers (_since taken from calls, tools that have
        # their own): the rewriter's names, wherever the results themselves are answered.
        self._names = self._rewriter.names
        self._session = _Session(ceiling=self.config.format, server_name=self.config.server_name)
        self._pending: dict[RequestKey, _Pending] = {}
        self._unfinished: list[tuple[str, str, Outcome, float]] = []
        self._events: list[SessionEvent] = []
        self._warm = False

    # -- public API --------------------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """How many client requests await a server response."""
        return len(self._pending)

    @property
    def expects_tool_result(self) -> bool:
        """Whether a tool result may come next from the server (a ``tools/call`` is pending):
        a shell warming the core up in a thread awaits that before relaying such a line."""
        return any(p.method == "tools/call" for p in self._pending.values())

    @property
    def session_format(self) -> Format:
        """The most the session may deliver (``--format`` capped by the client's opt-out)."""
        return self._session.ceiling

    def pop_records(self) -> list[LedgerRecord]:
        """The ledger records produced since the last call (empty with ``stats=False``)."""
        unfinished, self._unfinished = self._unfinished, []
        return [
            outcome.ledger_record(
                self._rewriter.count,
                server=server,
                tool=tool,
                encoding=self.config.encoding,
                encode_ms=elapsed_ms,
            )
            for server, tool, outcome, elapsed_ms in unfinished
        ]

    def from_client(self, line: bytes) -> list[Output]:
        """Handle one line the client wrote; returns what to write to the server.

        A line over 1 MB (a large file written through a tool) is read from its envelope
        when that is enough (see :meth:`receive_server`), and relayed as it came.
        """
        if len(line) > _SNIFF_BYTES:
            quick = self._client_large(line)
            if quick is not None:
                return quick
        msg, safe = parse_envelope(line) if line.strip() else (None, False)
        if isinstance(msg, dict):
            new = self._client_message(msg, safe)
            if new is not None and (safe or self._refused(new)):
                return [Output("server", dump_edited(new, msg, line))]
        elif isinstance(msg, list):
            changed = refused = False
            items: list[Any] = []
            for item in msg:
                new = self._client_message(item, safe) if isinstance(item, dict) else None
                changed = changed or new is not None
                refused = refused or (new is not None and self._refused(new))
                items.append(item if new is None else new)
            if changed and (safe or refused):
                return [Output("server", dump_edited(items, msg, line))]
        return [Output("server", line)]

    def from_server(self, line: bytes) -> list[Output]:
        """Handle one line the server wrote; returns what to write to the client.

        The road of :meth:`receive_server`, :meth:`~gcfkit.proxy.rewrite.Rewriter.rewrite_line`
        and :meth:`finish`, run here, in the caller's thread: a tool result is rewritten by
        the same code a worker process runs (:mod:`gcfkit.transports.worker`). A shell that
        must stay responsive meanwhile runs that middle step elsewhere.
        """
        got = self.receive_server(line)
        if not isinstance(got, ToolJob):
            return got
        self.warm_up()
        started = self._clock()
        budget = Budget(self._clock, started + self.config.budget_for(got.text_bytes))
        outcome, new = self._rewriter.rewrite_line(got.line, got.call, budget, message=got.message)
        self._record(got.tool, outcome, (self._clock() - started) * 1000.0)
        return self.finish(got, new)

    def receive_server(self, line: bytes) -> list[Output] | ToolJob:
        """Handle one line the server wrote, but for the expensive part: a tool result to
        rewrite comes back as a :class:`ToolJob`, for the shell to run through
        :meth:`~gcfkit.proxy.rewrite.Rewriter.rewrite_line` (in the worker process,
        :mod:`gcfkit.transports.offload`, or in process, :meth:`from_server`) and hand to
        :meth:`finish`. Everything else is answered at once.

        A line over 1 MB is not parsed here at all: its envelope is read from its two ends
        (:func:`~gcfkit.proxy.jsonrpc.sniff_envelope`) for the bookkeeping, so a 64 MB
        message that is not rewritten costs what a small one does, and one that is gets
        parsed where it is rewritten.
        """
        if len(line) > _SNIFF_BYTES:
            quick = self._receive_large(line)
            if quick is not None:
                return quick
        msg, safe = parse_envelope(line) if line.strip() else (None, False)
        if isinstance(msg, dict):
            new = self._server_message(msg, safe, line)
            if isinstance(new, ToolJob):
                return new
            response = _is_response(msg)
            if new is not None:
                return [Output("client", dump_edited(new, msg, line), response=response)]
            return [Output("client", line, response=response)]
        if isinstance(msg, list):
            # Batches (gone from MCP since 2025-06-18) are answered in one piece, here.
            changed = False
            items: list[Any] = []
            for item in msg:
                new = self._server_message(item, safe, None) if isinstance(item, dict) else None
                assert not isinstance(new, ToolJob)
                changed = changed or new is not None
                items.append(item if new is None else new)
            if changed:
                return [Output("client", dump_edited(items, msg, line))]
        return [Output("client", line)]

    def finish(
        self,
        job: ToolJob,
        line: bytes | None,
        *,
        failed: FailureReason | None = None,
        detail: str = "",
    ) -> list[Output]:
        """What to write for ``job`` once it is done: ``line`` (None: the original). With
        ``failed`` (no answer in time, no worker; ``detail``: an exception's type) the
        original goes out and the ledger says why; otherwise whoever rewrote the result
        recorded it."""
        if failed is not None:
            size = job.text_bytes
            word = fallback_word(failed, detail)
            self._record(
                job.tool,
                Outcome(None, word, size, size, size // 4, size // 4),
                (self._clock() - job.started) * 1000.0,
            )
        return [Output("client", job.line if line is None else line, response=True)]

    def pop_events(self) -> list[SessionEvent]:
        """What happened to the session here that the rewriter must know and, with a worker
        process (:mod:`gcfkit.transports.offload`), does not see: a
        :class:`~gcfkit.proxy.rewrite.Forget` (the client got an original for that call) or
        a :class:`~gcfkit.proxy.rewrite.Reset` (a new session)."""
        events, self._events = self._events, []
        return events

    def _receive_large(self, line: bytes) -> list[Output] | ToolJob | None:
        """A large line handled from its envelope alone, or None to parse it in full."""
        envelope = sniff_envelope(line)
        if envelope is None:
            return None
        relay = [Output("client", line, response=envelope.is_response)]
        if not envelope.is_response:
            if "method" in envelope.members:
                return relay  # a notification or a server request: relayed as is
            return None
        key = envelope.key
        pending = self._pending.get(key) if key is not None else None
        if pending is None:
            return relay
        if pending.method != "tools/call" or pending.refused is not None:
            return None  # initialize, tools/list...: read in full (they are never this big)
        del self._pending[key]  # type: ignore[arg-type]
        if envelope.container != "result":
            return relay  # a JSON-RPC error
        size = len(line)
        call = self._call(pending)
        decision = self._rewriter.unread(call, size)
        if decision is not None:
            self._forget(pending.args_key)
            self._record(call.tool, Outcome(None, decision, size, size, size // 4, size // 4), 0.0)
            return relay
        return ToolJob(line, call, self._session.server_name, self._clock(), size)

    def is_pending(self, request_id: Any) -> bool:
        """Whether the client's request with this JSON-RPC id still awaits its response (an
        HTTP shell reads a request's SSE stream until this turns False).

        >>> core = ProxyCore(ProxyConfig(primer=False))
        >>> _ = core.from_client(b'{"jsonrpc":"2.0","id":"a","method":"ping"}')
        >>> core.is_pending("a"), core.is_pending(1)
        (True, False)
        """
        key = request_key(request_id)
        return key is not None and key in self._pending

    def fail_request(
        self, request_id: Any, message: str, code: int = CONNECTION_CLOSED
    ) -> list[Output]:
        """The JSON-RPC error for one pending request whose response can no longer arrive
        (an HTTP stream that ended without it); nothing when no such request is pending.

        >>> core = ProxyCore(ProxyConfig(primer=False))
        >>> _ = core.from_client(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}')
        >>> core.fail_request(7, "stream ended")[0].data
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"stream ended"}}\\n'
        >>> core.fail_request(7, "again"), core.pending_count
        ([], 0)
        """
        key = request_key(request_id)
        if key is None or self._pending.pop(key, None) is None:
            return []
        return [Output("client", error_response(key, code, message))]

    def server_exited(self, status: int | None = None) -> list[Output]:
        """The server is gone: one JSON-RPC error per request still pending, oldest first."""
        how = "exited" if status is None else f"exited with status {status}"
        out: list[Output] = []
        for key, pending in self._pending.items():
            message = f"MCP server {how} before answering {pending.method}"
            error = error_response(key, CONNECTION_CLOSED, message)
            out.append(Output("client", error, response=True))
        self._pending.clear()
        return out

    # -- client side -------------------------------------------------------------------

    def _client_large(self, line: bytes) -> list[Output] | None:
        """A large client line handled from its envelope alone, or None to parse it in full
        (whenever the proxy might change it: ``_format``, ``_meta`` capabilities, GCF
        arguments to decode, a handshake)."""
        envelope = sniff_envelope(line)
        if envelope is None:
            return None
        relay = [Output("server", line)]
        method = envelope.members.get("method")
        if not isinstance(method, str):
            return relay if envelope.is_response else None  # the answer to a server request
        if "id" not in envelope.members:
            return None if method == "notifications/cancelled" else relay
        key = envelope.key
        if key is None or method in ("initialize", "server/discover", "tasks/result"):
            return None
        if method != "tools/call":
            self._pending[key] = _Pending(method=method, fmt=self._session.ceiling)
            return relay
        if self.config.policy.tool_filter:
            return None  # which tool it calls is read in full, never guessed
        if (
            envelope.container != "params"
            or b'"_format"' in line
            or b'"_since"' in line
            or b'"_meta"' in line
            or (self.config.decode_args and b"GCF profile=generic" in line)
        ):
            return None
        params = leading_members(line, envelope.container_at)
        name = params.get("name") if params is not None else None
        if not isinstance(name, str):
            return None
        # A slot of its own (by request id): a call this large is not one to keep a delta
        # base for, and hashing its arguments would cost what parsing them does.
        slot = f"{name}\x00request:{key[0]}:{key[1]!r}"
        self._pending[key] = _Pending("tools/call", name, slot, self._session.ceiling)
        return relay

    def _client_message(self, msg: dict[str, Any], safe: bool = True) -> dict[str, Any] | None:
        method = msg.get("method")
        if not isinstance(method, str):
            return None  # a response to a server request, or garbage: not ours
        params = msg.get("params")
        if "id" not in msg:
            if method == "notifications/cancelled" and isinstance(params, dict):
                key = request_key(params.get("requestId"))
                if key is not None:
                    # The server need not answer a cancelled request; no error owed for it.
                    self._pending.pop(key, None)
            return None
        key = request_key(msg.get("id"))
        if key is None:
            return None
        pending = _Pending(method=method, fmt=self._session.ceiling)
        self._pending[key] = pending
        if method == "initialize":
            self._rewriter.reset()
            self._events.append(Reset())
        if isinstance(params, dict) and (
            method in ("initialize", "server/discover") or not self._session.client
        ):
            # 2026 era: no initialize; a client names itself in each request's _meta.
            self._session.client = declared_client(params) or self._session.client
        if method in ("initialize", "server/discover") and isinstance(params, dict):
            # Handshake era: capabilities in params; 2026 era: in the request's _meta.
            meta = params.get("_meta")
            caps = params.get("capabilities")
            if caps is None and isinstance(meta, dict):
                caps = meta.get(_MODERN_CAPS_KEY)
            cap = _output_format_cap(caps)
            if cap is not None:
                self._session.ceiling = cap_format(self.config.format, cap)
                pending.fmt = self._session.ceiling
            return None
        if method == "tasks/result" and isinstance(params, dict):
            task = self._session.tasks.get(str(params.get("taskId")))
            if task is not None:
                # The payload of a task-augmented call is that call's result: same rules.
                pending.method, pending.tool, pending.args_key = (
                    "tools/call",
                    task.tool,
                    task.args_key,
                )
                pending.fmt = cap_format(pending.fmt, task.fmt)
            return None
        if method == "tools/call" and self.config.policy.tool_filter:
            refused = self._refuse(params, safe)
            if refused is not None:
                pending.refused = refused
                return _stand_in(msg, params)
        if method != "tools/call" or not isinstance(params, dict):
            return None
        meta = params.get("_meta")
        if isinstance(meta, dict):
            cap = _output_format_cap(meta.get(_MODERN_CAPS_KEY))
            if cap is not None:
                pending.fmt = cap_format(pending.fmt, cap)
        name = params.get("name")
        if not isinstance(name, str):
            return None
        pending.tool = name
        args = params.get("arguments")
        new_args = self._client_arguments(name, args, pending)
        sent = args if new_args is None else new_args
        if isinstance(sent, dict) and FORMAT_ARGUMENT in sent and pending.opted:
            # The opt-out is the proxy's even where it is left in: not part of the call.
            sent = {k: v for k, v in sent.items() if k != FORMAT_ARGUMENT}
        pending.args_key = _args_key(name, sent)
        if new_args is None:
            return None
        return {**msg, "params": {**params, "arguments": new_args}}

    def _refuse(self, params: Any, safe: bool) -> dict[str, Any] | None:
        """The error for a ``tools/call`` the tool filter stops (None: it may go)."""
        name = params.get("name") if isinstance(params, dict) else None
        error = refusal(name, self.config.policy.tool_filter)
        if error is None and not safe:
            # Duplicate keys: the server may read another name than the one checked here.
            error = refusal(None, self.config.policy.tool_filter)
            if error is not None:
                error["message"] = (
                    "gcfkit proxy: a tools/call that is not plain JSON (duplicate keys or "
                    "non-finite numbers) is refused while a tool filter is on: "
                    "which tool it names is ambiguous"
                )
        return error

    def _refused(self, msg: dict[str, Any]) -> bool:
        """Whether ``msg`` is the stand-in for a refused call (sent even from an unsafe line)."""
        key = request_key(msg.get("id"))
        pending = self._pending.get(key) if key is not None else None
        return pending is not None and pending.refused is not None

    def _client_arguments(self, tool: str, args: Any, pending: _Pending) -> dict[str, Any] | None:
        if not isinstance(args, dict):
            return None
        new: dict[str, Any] | None = None
        if FORMAT_ARGUMENT in args and tool not in self._session.native_format_arg:
            fmt = args[FORMAT_ARGUMENT]
            pending.opted = True
            if fmt in FORMATS:
                pending.fmt = cap_format(pending.fmt, fmt)
            if self._lacks_argument(tool, FORMAT_ARGUMENT):
                new = {k: v for k, v in args.items() if k != FORMAT_ARGUMENT}
        rest, since = self._names.take_since(tool, new if new is not None else args)
        if rest is not None:
            new, pending.since = rest, since
        if self.config.decode_args:
            decoded = self._decode_arguments(tool, new if new is not None else args)
            if decoded is not None:
                new = decoded
        return new

    def _lacks_argument(self, tool: str, name: str) -> bool:
        """Whether ``tool``'s input schema is known (from this session's ``tools/list``) and
        does not declare ``name``: only then is the argument the proxy's own to remove. A
        client with a cached tool list may call a tool that declares it itself, and a
        removed argument changes the call without a word; one left in at worst gets a
        loud "unknown argument" from a strict server. Its value still caps the result."""
        schema = self._session.schemas.get(tool)
        if not isinstance(schema, dict):
            return False
        props = schema.get("properties")
        return not (isinstance(props, dict) and name in props)

    def _decode_arguments(self, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        schema = self._session.schemas.get(tool)
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict):
            return None
        out: dict[str, Any] | None = None
        for name, value in args.items():
            if not isinstance(value, str) or not value.startswith("GCF profile=generic"):
                continue
            wanted = _schema_types(props.get(name))
            # Only where the schema admits no string: write_file(content="GCF profile=...")
            # under anyOf string/object means the text itself.
            if not wanted & {"object", "array"} or "string" in wanted:
                continue
            try:
                decoded = self._loads(value)
            except (GCFError, RecursionError, ValueError):
                continue
            if (isinstance(decoded, dict) and "object" in wanted) or (
                isinstance(decoded, list) and "array" in wanted
            ):
                if out is None:
                    out = dict(args)
                out[name] = decoded
        return out

    # -- server side -------------------------------------------------------------------

    def _server_message(
        self, msg: dict[str, Any], safe: bool, line: bytes | None
    ) -> dict[str, Any] | ToolJob | None:
        if "method" in msg or ("result" not in msg and "error" not in msg):
            return None  # a server request or notification: relayed as is
        key = request_key(msg.get("id"))
        pending = self._pending.pop(key, None) if key is not None else None
        if pending is None:
            return None
        if pending.refused is not None:
            # The stand-in's answer, whatever it is: the client asked for the hidden tool.
            return {"jsonrpc": "2.0", "id": msg.get("id"), "error": pending.refused}
        result = msg.get("result")
        if not isinstance(result, dict):
            return None  # a JSON-RPC error: relayed as is, and not a tool result to record
        if not self._session.server_name:
            self._session.server_name = _server_name(result)
        if pending.method == "tools/call":
            return self._tool_result(msg, result, pending, safe, line)
        if pending.method == "tools/list" and not safe and self.config.policy.tool_filter:
            # Not re-serializable as it is: filtered, it could still name a hidden tool.
            error = {"code": -32603, "message": _UNFILTERABLE}
            return {"jsonrpc": "2.0", "id": msg.get("id"), "error": error}
        if not safe:
            return None
        if pending.method in ("initialize", "server/discover"):
            return self._with_primer(msg, result, pending)
        if pending.method == "tools/list":
            return self._without_output_schemas(self._tools_list(msg, result), msg)
        return None

    # -- what the client's model reads (gcfkit.readers, gcfkit.proxy.structured) ----

    @property
    def client_name(self) -> str:
        """The name the client declared (``initialize``, or a request's ``_meta``); empty
        when it declared none.

        >>> ProxyCore().client_name
        ''
        """
        return self._session.client

    def assume_client(self, name: str) -> None:
        """Take the client's declared name from elsewhere (the gateway replica that saw its
        ``initialize``) when this core has none of its own.

        >>> core = ProxyCore(); core.assume_client("claude-code"); core.client_name
        'claude-code'
        """
        if not self._session.client:
            self._session.client = name

    @property
    def client_reads(self) -> Reads:
        """What this session's client hands its model of a result carrying
        ``structuredContent`` (``--client``, else the name it declared; unknown: content)."""
        return reads_of(self.config.client or self._session.client)

    def _flattens(self, tool: str) -> bool:
        """Whether ``tool``'s results carrying ``structuredContent`` are delivered as their
        value (never for a tool whose results feed a UI)."""
        if not flattens(self.config.structured, self.config.client or self._session.client):
            return False
        entry = self._session.tools.get(tool)
        return not (feeds_ui(entry) or self.config.policy.for_tool(tool).ui)

    def _without_output_schemas(
        self, edited: dict[str, Any] | None, msg: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The tools/list response (as already ``edited``, else ``msg``) without the
        ``outputSchema`` of every tool whose results are flattened."""
        base = edited if edited is not None else msg
        result = base.get("result")
        if not isinstance(result, dict):
            return edited
        new = strip_output_schemas(
            result, lambda tool: not self._flattens(str(tool.get("name", "")))
        )
        return edited if new is None else {**base, "result": new}

    def _with_primer(
        self, msg: dict[str, Any], result: dict[str, Any], pending: _Pending
    ) -> dict[str, Any] | None:
        if not self.config.primer or pending.fmt != "gcf":
            return None
        if self._session.ceiling != "gcf" or not self.config.policy.may_send_gcf:
            return None
        instructions: object = result.get("instructions")
        if self.config.primer_carrier == "instructions":
            instructions = append_primer(instructions, ("gcf", *self._rewriter.dense_constructs))
        # How to ask (_since) must be known before the call: only instructions carry it.
        # (GCF itself is explained in each payload that uses it, by default.)
        if self.config.refs != "off":
            instructions = append_relative_primer(instructions)
        if instructions == result.get("instructions"):
            return None
        return {**msg, "result": {**result, "instructions": instructions}}

    def _tools_list(self, msg: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
        tools = result.get("tools")
        if not isinstance(tools, list):
            return None
        shown = visible_tools(tools, self.config.policy.tool_filter)
        if shown is not None:
            tools = shown
            result = {**result, "tools": tools}
            msg = {**msg, "result": result}
        filtered = msg if shown is not None else None
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            schema = tool.get("inputSchema")
            self._session.schemas[tool["name"]] = schema
            self._session.tools[tool["name"]] = tool
            self._session.file_tools.pop(tool["name"], None)
            props = schema.get("properties") if isinstance(schema, dict) else None
            if isinstance(props, dict) and FORMAT_ARGUMENT in props:
                self._session.native_format_arg.add(tool["name"])
            if isinstance(props, dict) and SINCE_ARGUMENT in props:
                self._names.native.add(tool["name"])
        if not self.config.advertise_format or self.config.format == "off":
            return filtered
        new_tools: list[Any] = []
        changed = False
        for tool in tools:
            new_tools.append(tool)
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            name = tool["name"]
            schema = tool.get("inputSchema")
            if name in self._session.native_format_arg or not isinstance(schema, dict):
                continue
            if self.config.policy.for_tool(name, file=self._is_file_tool(name)).format == "off":
                continue
            props = schema.get("properties", {})
            if not isinstance(props, dict):
                continue
            # Advertised only here, and only when asked: otherwise the proxy adds no fields.
            new_props = {**props, FORMAT_ARGUMENT: _FORMAT_SCHEMA}
            if self.config.refs != "off" and name not in self._names.native:
                new_props[SINCE_ARGUMENT] = SINCE_SCHEMA
            new_tools[-1] = {**tool, "inputSchema": {**schema, "properties": new_props}}
            changed = True
        if not changed:
            return filtered
        return {**msg, "result": {**result, "tools": new_tools}}

    def _tool_result(
        self,
        msg: dict[str, Any],
        result: dict[str, Any],
        pending: _Pending,
        safe: bool,
        line: bytes | None,
    ) -> dict[str, Any] | ToolJob | None:
        """The :class:`ToolJob` that rewrites the response ``line`` (:meth:`from_server`,
        or a worker), None to relay it as is, or, for an item of a batch (no ``line`` of
        its own), the rewritten item, by the same :class:`~gcfkit.proxy.rewrite.Rewriter`."""
        task = result.get("task")
        if (
            "content" not in result
            and isinstance(task, dict)
            and isinstance(task.get("taskId"), str)
        ):
            # Not the result yet: it comes from tasks/result, which is then treated the same.
            tasks = self._session.tasks
            tasks[task["taskId"]] = pending
            while len(tasks) > _MAX_TASKS:
                del tasks[next(iter(tasks))]
            return None
        started = self._clock()
        tool = pending.tool
        texts = text_blocks_of(result)
        if not safe:
            outcome = Outcome(None, fallback_word("unsafe-envelope"), lazy=texts)
            self._forget(pending.args_key)
        elif line is not None:
            size = sum(utf8_len(t) for t in texts)
            call = self._call(pending)
            return ToolJob(line, call, self._session.server_name, started, size, msg)
        else:
            self.warm_up()
            started = self._clock()
            size = sum(utf8_len(t) for t in texts)
            budget = Budget(self._clock, started + self.config.budget_for(size))
            outcome = self._rewriter.rewrite(result, self._call(pending), budget)
        self._record(tool, outcome, (self._clock() - started) * 1000.0)
        if outcome.result is None:
            return None
        return {**msg, "result": outcome.result}

    # -- rewriting (gcfkit.proxy.rewrite) ------------------------------------------------

    def warm_up(self) -> None:
        """Load the tokenizer and codec now (about a second, once per process), so the first
        tool result is not charged for it. The stdio shell runs this in a thread at start-up
        and awaits it before relaying the first tool result; call it from one thread only."""
        if self._warm:
            return
        try:
            self._rewriter.warm_up()
        finally:
            self._warm = True

    def _call(self, pending: _Pending) -> Call:
        tool = pending.tool
        return Call(
            tool,
            pending.args_key,
            pending.fmt,
            pending.since,
            self._names.uses_since,
            self._is_file_tool(tool),
            self.client_reads,
            self._flattens(tool),
            _preview_of(self.config.client or self._session.client),
        )

    def _is_file_tool(self, tool: str) -> bool:
        """Whether ``tool`` reads files: the policy's word, else its name and (when this
        session listed it) its description and input schema."""
        definition = self._session.tools.get(tool)
        if definition is None:
            return self.config.policy.is_file_tool(tool)  # (the policy's cache, by name)
        known = self._session.file_tools.get(tool)
        if known is None:
            known = self.config.policy.is_file_tool(tool, definition)
            self._session.file_tools[tool] = known
        return known

    def _forget(self, slot: str) -> None:
        self._rewriter.forget(slot)
        self._events.append(Forget(slot))

    def _record(self, tool: str, outcome: Outcome, elapsed_ms: float) -> None:
        if self.config.stats:
            self._unfinished.append((self._session.server_name, tool, outcome, elapsed_ms))


_FORMAT_SCHEMA: Final = {
    "type": "string",
    "enum": ["gcf", "json", "off"],
    "description": (
        "Optional, read by the gcfkit proxy and removed before the call: 'json' to get this "
        "result as plain JSON instead of GCF, 'off' to get it exactly as the tool wrote it."
    ),
}


_UNFILTERABLE: Final = (
    "gcfkit proxy: the server's tools/list result is not plain JSON (duplicate keys or "
    "non-finite numbers), so the tool filter cannot be applied to it"
)


def _stand_in(msg: dict[str, Any], params: Any) -> dict[str, Any]:
    """The ``ping`` sent in place of a refused ``tools/call`` (its id; its ``_meta``, which a
    2026-07-28 server reads the protocol version from)."""
    ping: dict[str, Any] = {"jsonrpc": msg.get("jsonrpc", "2.0"), "id": msg["id"], "method": "ping"}
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        ping["params"] = {"_meta": meta}
    return ping


#: Where a 2026-07-28 server names itself: in every result's ``_meta`` (there is no
#: ``initialize`` result, whose ``serverInfo`` older servers use).
_SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"


def _server_name(result: dict[str, Any]) -> str:
    """The name a server gives itself in a result ("" when it gives none).

    >>> _server_name({"serverInfo": {"name": "git"}})
    'git'
    >>> _server_name({"_meta": {"io.modelcontextprotocol/serverInfo": {"name": "time"}}})
    'time'
    """
    return declared_name(result, "serverInfo", _SERVER_INFO_META)


def _preview_of(client: str) -> int | None:
    """The bytes past which ``client`` shows its model a preview of a result (None: none)."""
    reader = reader_of(client)
    return reader.preview if reader is not None else None


def _is_response(msg: dict[str, Any]) -> bool:
    return "method" not in msg and "id" in msg and ("result" in msg or "error" in msg)


def _schema_types(schema: Any) -> set[str]:
    """The JSON types a JSON Schema admits, as far as ``type``, ``anyOf`` and ``oneOf`` say;
    a schema (or branch) that says nothing about types admits a string, among the rest.

    >>> sorted(_schema_types({"anyOf": [{"type": "object"}, {"type": "string"}]}))
    ['object', 'string']
    >>> sorted(_schema_types({"anyOf": [{"type": "array"}, {"description": "anything"}]}))
    ['array', 'string']
    """
    if not isinstance(schema, dict):
        return {"string"}
    t = schema.get("type")
    out: set[str] = set()
    if isinstance(t, str):
        out.add(t)
    elif isinstance(t, list):
        out.update(x for x in t if isinstance(x, str))
    combos = [schema.get(c) for c in ("anyOf", "oneOf")]
    for options in combos:
        if isinstance(options, list):
            for option in options:
                out |= _schema_types(option)
    if t is None and not any(isinstance(o, list) for o in combos):
        out.add("string")  # unconstrained (or constrained in ways not read here)
    return out
