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
* relative answers (docs/extensions/relative-answers.md, :mod:`gcfkit.proxy.since`): results
  are named (``ref=``), and a call that passes ``"_since"`` naming one this session holds
  for the same tool and arguments is answered ``@@ unchanged``, ``@@ patch`` or ``@@ edit``
  when that is verified and clearly smaller; else in full.
* the ``initialize`` (and ``server/discover``) result: the GCF primer is appended to
  ``instructions`` when GCF may be sent in this session.
* ``tools/list`` results, only with ``advertise_format``: an optional ``_format`` argument.
* ``tools/call`` requests: ``_format`` and ``_since`` arguments are stripped, and with
  ``decode_args`` GCF arguments are decoded where the tool's schema wants an object or array.

Which form a result takes is the one answer policy of :mod:`gcfkit.proxy.answer`, shared with
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
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from .. import dumps as gcf_dumps
from .. import loads as gcf_loads
from .. import tokens
from ..errors import GCFError
from ..jsonio import dumps_compact, loads_json, same_value
from ..keyed import DeltaSession, FixedN, KeyedSet
from ..relative import DEFAULT_MAX_BYTES, DEFAULT_MAX_RESULTS, Held, ResultMemory
from ..relative.memory import Kind
from .answer import (
    AnswerPolicy,
    Candidates,
    Choice,
    Cost,
    DeltaState,
    DeltaStep,
    Fallback,
    Form,
    advance,
    delta_rebuilds,
    held_after,
    is_unchanged,
    keyed_set,
    settle,
    utf8_len,
)
from .jsonrpc import (
    CONNECTION_CLOSED,
    RequestKey,
    dump_message,
    error_response,
    parse_envelope,
    request_key,
)
from .policy import (
    FORMATS,
    IDENTITY_KEYS,
    Format,
    Policy,
    ToolPolicy,
    cap_format,
    output_format_capability,
)
from .primer import append_primer, append_relative_primer
from .record import LedgerRecord, ledger_decision
from .since import SINCE_ARGUMENT, SINCE_SCHEMA, Names, RefMode

__all__ = [
    "CONNECTION_CLOSED",
    "FORMAT_ARGUMENT",
    "SINCE_ARGUMENT",
    "Codec",
    "Output",
    "ProxyConfig",
    "ProxyCore",
    "RefMode",
]

#: The per-call opt-out argument (``"json"``, ``"off"`` or ``"gcf"``), stripped before forwarding.
FORMAT_ARGUMENT: Final = "_format"


_LEDGER_EXACT_CHARS: Final = 4 * 1024 * 1024
_MAX_TASKS: Final = 1024
_MODERN_CAPS_KEY: Final = "io.modelcontextprotocol/clientCapabilities"


@dataclass(frozen=True, slots=True)
class Output:
    """One line to write: ``to`` is ``"client"`` or ``"server"``; ``data`` ends with LF
    (unless it is a passed-through final line that had none)."""

    to: Literal["client", "server"]
    data: bytes


@dataclass(frozen=True, slots=True)
class Codec:
    """The functions the core encodes, decodes and counts with (injectable for tests):
    by default :func:`gcfkit.dumps`, :func:`gcfkit.loads` and :func:`gcfkit.tokens.count`.

    >>> Codec().count("{}", "o200k_base")
    1
    """

    dumps: Callable[[Any], str] = gcf_dumps
    loads: Callable[[str], Any] = gcf_loads
    count: Callable[[str, str], int] = tokens.count


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Proxy options (the ``gcfkit proxy`` flags).

    ``format`` caps every tool's policy (``json`` makes the proxy a pure minifier);
    ``time_budget`` is seconds per result before the original is sent instead;
    ``max_text_bytes`` skips larger text blocks without trying.

    Relative answers (:mod:`gcfkit.proxy.since`): ``refs`` (auto, all, off), ``ref_results`` and
    ``ref_bytes`` (the LRU), ``ref_min_bytes``, ``relative_ratio``, ``session_deltas``.

    >>> ProxyConfig().format, ProxyConfig().encoding
    ('gcf', 'o200k_base')
    """

    policy: Policy = field(default_factory=Policy)
    format: Format = "gcf"
    primer: bool = True
    decode_args: bool = False
    advertise_format: bool = False
    stats: bool = True
    encoding: str = "o200k_base"
    selfcheck: bool = True
    time_budget: float = 0.5
    max_text_bytes: int = 16 * 1024 * 1024
    reanchor: int = 15
    delta_ratio: float = 0.6
    server_name: str = ""
    refs: RefMode = "auto"
    session_deltas: bool = False
    relative_ratio: float = 0.6
    ref_results: int = DEFAULT_MAX_RESULTS
    ref_bytes: int = DEFAULT_MAX_BYTES
    ref_min_bytes: int = 128


# ---------------------------------------------------------------------------------------
# JSON helpers
# ---------------------------------------------------------------------------------------


def _json_value_of(text: str) -> Any:
    """The JSON value of ``text`` if it is a JSON object or array, else ``None``."""
    i = 0
    n = len(text)
    while i < n and text[i] in " \t\r\n":
        i += 1
    if i == n or text[i] not in "{[":
        return None
    try:
        value = loads_json(text)
    except (GCFError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _args_key(tool: str, args: Any) -> str:
    try:
        return tool + "\x00" + json.dumps(args, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return tool + "\x00" + repr(args)


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
    implicit: bool = False  # since is the call's latest result (--delta session), not asked


@dataclass(slots=True)
class _Session:
    ceiling: Format
    server_name: str
    schemas: dict[str, Any] = field(default_factory=dict)
    native_format_arg: set[str] = field(default_factory=set)
    # What the client holds, per tool + arguments, for §10a deltas.
    deltas: dict[str, DeltaState] = field(default_factory=dict)

    # Task-augmented tools/call (2025-11-25): taskId -> the call, for its tasks/result.
    tasks: dict[str, _Pending] = field(default_factory=dict)


@dataclass(slots=True)
class _Outcome:
    result: dict[str, Any] | None
    decision: str
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    # Texts delivered unchanged whose tokens are counted only when the record is popped,
    # after the shell has written the result: counting is not on the relay's critical path.
    lazy: list[str] = field(default_factory=list)


class _BudgetExceeded(Exception):
    pass


@dataclass(frozen=True, slots=True)
class _Budget:
    """The time one result may take, on the core's clock."""

    clock: Callable[[], float]
    started: float
    seconds: float

    def check(self) -> None:
        if self.clock() - self.started > self.seconds:
            raise _BudgetExceeded


@dataclass(frozen=True, slots=True)
class _Piece:
    """Text blocks answered as one value: their positions among the result's text blocks."""

    blocks: tuple[int, ...]
    value: Any


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
        self._dumps = codec.dumps
        self._loads = codec.loads
        self._count_fn = codec.count
        self._clock = clock
        c = self.config
        self._answers = AnswerPolicy(c.delta_ratio, True, c.relative_ratio)
        self._reanchor = FixedN(self.config.reanchor)
        held = (
            memory() if memory else ResultMemory(max_results=c.ref_results, max_bytes=c.ref_bytes)
        )
        self._names = Names(
            c.refs, c.reanchor, c.ref_min_bytes, self._count, held, c.session_deltas
        )
        self._session = _Session(ceiling=self.config.format, server_name=self.config.server_name)
        self._pending: dict[RequestKey, _Pending] = {}
        self._unfinished: list[tuple[str, str, _Outcome, float]] = []
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
        records: list[LedgerRecord] = []
        for server, tool, outcome, elapsed_ms in unfinished:
            lazy_bytes = sum(utf8_len(t) for t in outcome.lazy)
            lazy_tokens = sum(self._count_for_ledger(t) for t in outcome.lazy)
            records.append(
                LedgerRecord(
                    server=server,
                    tool=tool,
                    bytes_before=outcome.bytes_before + lazy_bytes,
                    bytes_after=outcome.bytes_after + lazy_bytes,
                    tokens_before=outcome.tokens_before + lazy_tokens,
                    tokens_after=outcome.tokens_after + lazy_tokens,
                    encoding=self.config.encoding,
                    decision=outcome.decision,
                    encode_ms=elapsed_ms,
                )
            )
        return records

    def from_client(self, line: bytes) -> list[Output]:
        """Handle one line the client wrote; returns what to write to the server."""
        msg, safe = parse_envelope(line) if line.strip() else (None, False)
        if isinstance(msg, dict):
            new = self._client_message(msg)
            if new is not None and safe:
                return [Output("server", dump_message(new))]
        elif isinstance(msg, list):
            changed = False
            items: list[Any] = []
            for item in msg:
                new = self._client_message(item) if isinstance(item, dict) else None
                changed = changed or new is not None
                items.append(item if new is None else new)
            if changed and safe:
                return [Output("server", dump_message(items))]
        return [Output("server", line)]

    def from_server(self, line: bytes) -> list[Output]:
        """Handle one line the server wrote; returns what to write to the client."""
        msg, safe = parse_envelope(line) if line.strip() else (None, False)
        if isinstance(msg, dict):
            new = self._server_message(msg, safe)
            if new is not None:
                return [Output("client", dump_message(new))]
        elif isinstance(msg, list):
            changed = False
            items: list[Any] = []
            for item in msg:
                new = self._server_message(item, safe) if isinstance(item, dict) else None
                changed = changed or new is not None
                items.append(item if new is None else new)
            if changed:
                return [Output("client", dump_message(items))]
        return [Output("client", line)]

    def server_exited(self, status: int | None = None) -> list[Output]:
        """The server is gone: one JSON-RPC error per request still pending, oldest first."""
        how = "exited" if status is None else f"exited with status {status}"
        out: list[Output] = []
        for key, pending in self._pending.items():
            message = f"MCP server {how} before answering {pending.method}"
            out.append(Output("client", error_response(key, CONNECTION_CLOSED, message)))
        self._pending.clear()
        return out

    # -- client side -------------------------------------------------------------------

    def _client_message(self, msg: dict[str, Any]) -> dict[str, Any] | None:
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
            self._names.reset()
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
        pending.args_key = _args_key(name, args if new_args is None else new_args)
        if new_args is None:
            return None
        return {**msg, "params": {**params, "arguments": new_args}}

    def _client_arguments(self, tool: str, args: Any, pending: _Pending) -> dict[str, Any] | None:
        if not isinstance(args, dict):
            return None
        new: dict[str, Any] | None = None
        if FORMAT_ARGUMENT in args and tool not in self._session.native_format_arg:
            new = {k: v for k, v in args.items() if k != FORMAT_ARGUMENT}
            fmt = args[FORMAT_ARGUMENT]
            if fmt in FORMATS:
                pending.fmt = cap_format(pending.fmt, fmt)
        rest, since = self._names.take_since(tool, new if new is not None else args)
        if rest is not None:
            new, pending.since = rest, since
        if self.config.decode_args:
            decoded = self._decode_arguments(tool, new if new is not None else args)
            if decoded is not None:
                new = decoded
        return new

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
            if not wanted & {"object", "array"}:
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

    def _server_message(self, msg: dict[str, Any], safe: bool) -> dict[str, Any] | None:
        if "method" in msg or ("result" not in msg and "error" not in msg):
            return None  # a server request or notification: relayed as is
        key = request_key(msg.get("id"))
        pending = self._pending.pop(key, None) if key is not None else None
        if pending is None:
            return None
        result = msg.get("result")
        if not isinstance(result, dict):
            return None  # a JSON-RPC error: relayed as is, and not a tool result to record
        if pending.method == "tools/call":
            return self._tool_result(msg, result, pending, safe)
        if not safe:
            return None
        if pending.method in ("initialize", "server/discover"):
            return self._with_primer(msg, result, pending)
        if pending.method == "tools/list":
            return self._tools_list(msg, result)
        return None

    def _with_primer(
        self, msg: dict[str, Any], result: dict[str, Any], pending: _Pending
    ) -> dict[str, Any] | None:
        info = result.get("serverInfo")
        if not self._session.server_name and isinstance(info, dict):
            name = info.get("name")
            if isinstance(name, str):
                self._session.server_name = name
        if not self.config.primer or pending.fmt != "gcf":
            return None
        if self._session.ceiling != "gcf" or not self.config.policy.may_send_gcf:
            return None
        instructions = append_primer(result.get("instructions"))
        if self.config.refs != "off":
            instructions = append_relative_primer(instructions)
        return {**msg, "result": {**result, "instructions": instructions}}

    def _tools_list(self, msg: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
        tools = result.get("tools")
        if not isinstance(tools, list):
            return None
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            schema = tool.get("inputSchema")
            self._session.schemas[tool["name"]] = schema
            props = schema.get("properties") if isinstance(schema, dict) else None
            if isinstance(props, dict) and FORMAT_ARGUMENT in props:
                self._session.native_format_arg.add(tool["name"])
            if isinstance(props, dict) and SINCE_ARGUMENT in props:
                self._names.native.add(tool["name"])
        if not self.config.advertise_format or self.config.format == "off":
            return None
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
            if self.config.policy.for_tool(name).format == "off":
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
            return None
        return {**msg, "result": {**result, "tools": new_tools}}

    def _tool_result(
        self, msg: dict[str, Any], result: dict[str, Any], pending: _Pending, safe: bool
    ) -> dict[str, Any] | None:
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
        self.warm_up()
        started = self._clock()
        budget = _Budget(self._clock, started, self.config.time_budget)
        tool = pending.tool
        policy = self.config.policy.for_tool(tool)
        fmt = cap_format(policy.format, pending.fmt)
        texts = [block["text"] for _, block in _text_blocks(_content_of(result))]
        if pending.since is None:
            pending.since = self._names.implicit_since(pending.args_key)
            pending.implicit = pending.since is not None
        if not safe:
            outcome = _Outcome(None, "fallback:unsafe-envelope", lazy=texts)
        else:
            try:
                if self.config.policy.is_file_tool(tool) and policy.format == "off":
                    # Byte for byte: at most an identical re-read is answered (unchanged).
                    outcome = _Outcome(None, "passthrough-file", lazy=texts)
                    if pending.fmt == "gcf":
                        outcome = self._text_answer(result, pending, "file", outcome)
                else:
                    outcome = self._rewrite(result, policy, fmt, pending, budget)
            except _BudgetExceeded:
                outcome = _Outcome(None, "fallback:time-budget", lazy=texts)
            except Exception as e:  # never break the agent: the original goes through
                outcome = _Outcome(None, f"fallback:error-{type(e).__name__}", lazy=texts)
        self._record(tool, outcome, (self._clock() - started) * 1000.0)
        if outcome.result is None:
            return None
        return {**msg, "result": outcome.result}

    # -- rewriting ---------------------------------------------------------------------

    def _count(self, text: str) -> int:
        return self._count_fn(text, self.config.encoding)

    def _count_for_ledger(self, text: str) -> int:
        # Texts nobody rewrites can be huge (a 64 MB blob): a tokenizer pass over them would
        # stall the relay for seconds, and before == after anyway, so a rough size will do.
        if len(text) > _LEDGER_EXACT_CHARS:
            return utf8_len(text) // 4
        return self._count(text)

    def warm_up(self) -> None:
        """Load the tokenizer and codec now (about a second, once per process), so the first
        tool result is not charged for it. The stdio shell runs this in a thread at start-up
        and awaits it before relaying the first tool result; call it from one thread only."""
        if self._warm:
            return
        try:
            self._count("{}")
            self._loads(self._dumps({"a": [1]}))
        except Exception:  # a broken codec shows up, and is handled, per result
            pass
        finally:
            self._warm = True

    def _rewrite(
        self,
        result: dict[str, Any],
        policy: ToolPolicy,
        fmt: Format,
        pending: _Pending,
        budget: _Budget,
    ) -> _Outcome:
        content = _content_of(result)
        blocks = _text_blocks(content)
        texts = [block["text"] for _, block in blocks]
        outcome = _Outcome(None, "unchanged", lazy=list(texts))
        if result.get("isError") is True or fmt == "off" or not blocks:
            return outcome
        sizes = [utf8_len(t) for t in texts]
        limit = self.config.max_text_bytes
        values = [
            _json_value_of(t) if policy.min_bytes <= n <= limit else None
            for t, n in zip(texts, sizes, strict=True)
        ]
        budget.check()
        if all(v is None for v in values):
            if fmt == "gcf":
                return self._text_answer(result, pending, "text", outcome, budget)
            return outcome
        pieces = _pieces(blocks, values, join=policy.join, content_length=len(content))
        answered = {i for piece in pieces for i in piece.blocks}
        outcome.lazy = [t for i, t in enumerate(texts) if i not in answered]
        # A delta replaces the whole result, so only a result answered as one value has one.
        whole = len(pieces) == 1 and len(pieces[0].blocks) == len(blocks)
        delta = whole and policy.delta and fmt == "gcf"
        # A named result is one value that is the whole content (nothing else beside it).
        names, call = self._names, (pending.tool, pending.args_key, pending.since, pending.implicit)
        named = whole and fmt == "gcf" and len(blocks) == len(content)
        handle = names.memory.mint() if named and names.may_name(sum(sizes)) else None
        held = names.held(*call, "json") if handle is not None else None
        choices: list[Choice] = []
        plain = 0
        for piece in pieces:
            original = [texts[i] for i in piece.blocks]
            choice, before, plain = self._answer(
                piece.value, original, fmt, policy, pending, delta, budget, (held, handle)
            )
            choices.append(choice)
            outcome.tokens_before += before.tokens
            outcome.bytes_before += before.size
            if choice.text is None:
                outcome.tokens_after += before.tokens
                outcome.bytes_after += before.size
            else:
                outcome.tokens_after += choice.tokens
                outcome.bytes_after += utf8_len(choice.text)
        outcome.decision = ledger_decision(choices)
        block = None
        if handle is not None:
            choices[0], extra, block = names.name_value(
                choices[0], handle, plain, *call, pieces[0].value, held
            )
            outcome.tokens_after += extra
        new_content = _reassemble(content, blocks, pieces, choices)
        if block is not None:
            # Not GCF: the handle travels in a text block of its own after the result's.
            base = new_content if new_content is not None else list(content)
            new_content = [*base, {"type": "text", "text": block}]
        if new_content is not None:
            outcome.result = {**result, "content": new_content}
        return outcome

    # -- relative answers --------------------------------------------------------------

    def _text_answer(
        self,
        result: dict[str, Any],
        pending: _Pending,
        kind: Kind,
        outcome: _Outcome,
        budget: _Budget | None = None,
    ) -> _Outcome:
        """A text result (one text block, not JSON), or a file read: named with a ``ref=``
        block, or answered relative to the held text when the call named one."""
        content = _content_of(result)
        if result.get("isError") is True or len(_text_blocks(content)) != 1 or len(content) != 1:
            return outcome
        check = budget.check if budget is not None else (lambda: None)
        call = (pending.tool, pending.args_key, pending.since, pending.implicit)
        answer = self._names.text_result(content[0], *call, kind, self._answers, check)
        if answer is None:
            return outcome
        if answer.original is not None:  # counted now: no lazy count of the text
            outcome.lazy = []
            outcome.tokens_before = outcome.tokens_after = answer.original.tokens
            outcome.bytes_before = outcome.bytes_after = answer.original.size
        outcome.result = {**result, "content": answer.content}
        if answer.answer is not None:
            outcome.tokens_after, outcome.bytes_after = answer.tokens, answer.size
            outcome.decision = ledger_decision([answer.answer])
        else:
            # The text itself may be counted lazily (before and after alike); the block is new.
            outcome.tokens_after += answer.tokens
            outcome.bytes_after += answer.size
            if answer.fallback is not None:
                outcome.decision = answer.fallback.word
        return outcome

    def _answer(
        self,
        value: Any,
        original: list[str],
        fmt: Format,
        policy: ToolPolicy,
        pending: _Pending,
        delta: bool,
        budget: _Budget,
        since: tuple[Held | None, str | None] = (None, None),
    ) -> tuple[Choice, Cost, int]:
        """The answer for one value, what the original texts cost and the tokens of the cheaper
        plain form (compact JSON or the original): candidates, then the one answer policy; the
        delta state it leaves is stored here, and only here. ``since``: the held result the
        call named (if usable) and the handle the result will get."""
        compact = dumps_compact(value)
        json_form = Form.of(compact, self._count)
        if len(original) == 1 and compact == original[0]:
            before = Cost(json_form.tokens, json_form.size)  # already compact: counted once
        else:
            before = Cost(sum(self._count(t) for t in original), sum(utf8_len(t) for t in original))
        budget.check()
        candidates = Candidates(json=json_form, original=before)
        if fmt == "gcf":
            candidates = self._with_gcf(candidates, value, budget)
        step = self._delta_step(value, policy, pending.args_key) if delta else None
        if step is not None and step.wire is not None and not step.is_full:
            budget.check()
            candidates = replace(
                candidates,
                delta=Form.of(step.wire, self._count),
                unchanged=is_unchanged(step.wire),
            )

        since_held, handle = since
        if since_held is not None:
            candidates = self._names.json_candidate(
                candidates, since_held, value, pending.tool, handle, policy.key
            )
            budget.check()

        base = step.before.base if step is not None and step.before is not None else None
        update = step.after.base if step is not None else None

        def verify(choice: Choice) -> bool:
            if choice.text is None:
                return True
            if choice.decision == "gcf":
                ok = self._lossless(choice.text, value, compact)
            elif base is not None and update is not None:
                ok = delta_rebuilds(base, choice.text, update)
            else:
                ok = False
            budget.check()
            return ok

        choice = settle(candidates, self._answers, verify if self.config.selfcheck else None)
        if delta:
            held = held_after(choice, step, self._answers) if step is not None else None
            if held is None:
                self._session.deltas.pop(pending.args_key, None)
            else:
                self._session.deltas[pending.args_key] = held
        return choice, before, min(json_form.tokens, before.tokens)

    def _with_gcf(self, candidates: Candidates, value: Any, budget: _Budget) -> Candidates:
        try:
            gcf = self._dumps(value)
        except (GCFError, RecursionError, ValueError, TypeError) as e:
            refused = Fallback("encode", getattr(e, "code", type(e).__name__))
            return Candidates(
                json=candidates.json,
                original=candidates.original,
                fallbacks=(*candidates.fallbacks, refused),
            )
        budget.check()
        form = Form.of(gcf, self._count)
        budget.check()
        return Candidates(json=candidates.json, original=candidates.original, gcf=form)

    def _delta_step(self, value: Any, policy: ToolPolicy, slot: str) -> DeltaStep | None:
        """``value`` diffed against what the client holds for this call; None when it is not
        a keyed set (§10a.1), which also forgets what the client held."""
        key = _identity_column(value, policy.key)
        if key is None:
            return None
        update = keyed_set(value, key)
        if update is None:
            return None
        try:
            return advance(self._session.deltas.get(slot), update, self._start_session)
        except (GCFError, ValueError, TypeError, KeyError):
            return None

    def _start_session(self, base: KeyedSet) -> DeltaSession:
        # The base is the logical set last delivered in any form: its pack root (§10a.3) is a
        # content hash, so a full result needs no pack_root header of its own. That keeps
        # first calls and re-anchors (every ``reanchor`` turns) at plain GCF size.
        return DeltaSession(base, reanchor=self._reanchor)

    def _lossless(self, gcf: str, value: Any, compact: str) -> bool:
        try:
            decoded = self._loads(gcf)
            # Same compact JSON means the same value (json.dumps keeps types, key order and
            # float bits); only a mismatch (e.g. 3.0 decoded as 3) needs the slow walk.
            return dumps_compact(decoded) == compact or same_value(decoded, value)
        except (GCFError, RecursionError, ValueError, TypeError):
            return False

    def _record(self, tool: str, outcome: _Outcome, elapsed_ms: float) -> None:
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


def _scalar_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def _identity_column(value: Any, preferred: str | None) -> str | None:
    """The identity column that makes ``value`` a keyed set (§10a.1), or None: a non-empty
    array of objects where every row has that column, with unique string/integer values."""
    if not isinstance(value, list) or not value or not all(isinstance(r, dict) for r in value):
        return None
    for key in (preferred,) if preferred else IDENTITY_KEYS:
        seen: set[tuple[str, Any]] = set()
        for row in value:
            v = row.get(key)
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                break
            k = _scalar_key(v)
            if k in seen:
                break
            seen.add(k)
        else:
            return key
    return None


def _content_of(result: dict[str, Any]) -> list[Any]:
    """A result's ``content`` list ([] when it is not a list)."""
    content = result.get("content")
    return content if isinstance(content, list) else []


def _text_blocks(content: Any) -> list[tuple[int, dict[str, Any]]]:
    """The text blocks of ``content`` with their positions in it."""
    if not isinstance(content, list):
        return []
    return [
        (i, b)
        for i, b in enumerate(content)
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def _pieces(
    blocks: list[tuple[int, dict[str, Any]]], values: list[Any], *, join: bool, content_length: int
) -> list[_Piece]:
    """Which text blocks are answered as one value: all of them as one array when ``join``
    applies (every block of the content is a plain text block holding a JSON object), else
    each JSON block alone."""
    joinable = (
        join
        and len(blocks) >= 2
        and len(blocks) == content_length
        and all(isinstance(v, dict) for v in values)
        and all(set(block) == {"type", "text"} for _, block in blocks)
    )
    if joinable:
        return [_Piece(tuple(range(len(blocks))), list(values))]
    return [_Piece((i,), v) for i, v in enumerate(values) if v is not None]


def _reassemble(
    content: list[Any],
    blocks: list[tuple[int, dict[str, Any]]],
    pieces: list[_Piece],
    choices: list[Choice],
) -> list[Any] | None:
    """The new content: each answered piece's text in its first block, its other blocks
    gone, everything else in place; None when every piece keeps its original."""
    texts: dict[int, str] = {}
    merged: set[int] = set()
    for piece, choice in zip(pieces, choices, strict=True):
        if choice.text is None:
            continue
        first, *rest = (blocks[i][0] for i in piece.blocks)
        texts[first] = choice.text
        merged.update(rest)
    if not texts:
        return None
    return [
        {**item, "text": texts[i]} if i in texts else item
        for i, item in enumerate(content)
        if i not in merged
    ]


def _schema_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    t = schema.get("type")
    out: set[str] = set()
    if isinstance(t, str):
        out.add(t)
    elif isinstance(t, list):
        out.update(x for x in t if isinstance(x, str))
    for combo in ("anyOf", "oneOf"):
        options = schema.get(combo)
        if isinstance(options, list):
            for option in options:
                out |= _schema_types(option)
    return out
