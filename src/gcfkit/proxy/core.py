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
* the ``initialize`` (and ``server/discover``) result: the GCF primer is appended to
  ``instructions`` when GCF may be sent in this session.
* ``tools/list`` results, only with ``advertise_format``: an optional ``_format`` argument.
* ``tools/call`` requests: a ``_format`` argument is stripped, and with ``decode_args`` GCF
  arguments are decoded where the tool's schema wants an object or array.

Before sending GCF the core decodes it and compares it with the original value (same types,
key order and contents; :func:`same_value`), and applies a delta to its base before sending
it; any failure, or running past the time budget, falls back (compact JSON or the original)
and says why in the :class:`~gcfkit.proxy.record.LedgerRecord` it builds for each tool result
(payload-free; token counts of untouched text are taken after the result is relayed).

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

import importlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..errors import GCFError
from ..jsonio import loads_json
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
from .primer import append_primer
from .record import LedgerRecord

__all__ = [
    "CONNECTION_CLOSED",
    "FORMAT_ARGUMENT",
    "Codec",
    "Output",
    "ProxyConfig",
    "ProxyCore",
    "same_value",
]

#: The per-call opt-out argument (``"json"``, ``"off"`` or ``"gcf"``), stripped before forwarding.
FORMAT_ARGUMENT: Final = "_format"

_FILE_DECISION: Final = "passthrough-file"
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
    """The functions the core encodes, decodes and counts with (injectable for tests).

    ``None`` means the gcfkit defaults: :func:`gcfkit.dumps`, :func:`gcfkit.loads`,
    :func:`gcfkit.tokens.count`.
    """

    dumps: Callable[[Any], str] | None = None
    loads: Callable[[str], Any] | None = None
    count: Callable[[str, str], int] | None = None


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Proxy options (the ``gcfkit proxy`` flags).

    ``format`` caps every tool's policy (``json`` makes the proxy a pure minifier);
    ``time_budget`` is seconds per result before the original is sent instead;
    ``max_text_bytes`` skips larger text blocks without trying.

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


# ---------------------------------------------------------------------------------------
# JSON helpers
# ---------------------------------------------------------------------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _utf8_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def same_value(a: Any, b: Any) -> bool:
    """Structural equality in the JSON data model (spec §1.1): same types, same key order,
    same numbers by value (``1 == 1.0`` and ``-0.0 == 0``: JSON has one number type), and a
    boolean is never a number.

    >>> same_value({"a": [1, 2.0]}, {"a": [1.0, 2]}), same_value([True], [1])
    (True, False)
    """
    stack: list[tuple[Any, Any]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        tx, ty = type(x), type(y)
        if tx is not ty:
            if tx in _NUMBER and ty in _NUMBER and x == y:
                continue
            return False
        if tx is dict:
            if list(x) != list(y):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif tx is list:
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


_NUMBER: Final = (int, float)


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


@dataclass(slots=True)
class _DeltaBase:
    """What the client last received for one tool + arguments, as a keyed set (§10a)."""

    session: Any  # gcfkit.keyed.DeltaSession
    base: Any  # gcfkit.keyed.KeyedSet
    key: str
    fields: list[str]


@dataclass(slots=True)
class _Session:
    ceiling: Format
    server_name: str
    schemas: dict[str, Any] = field(default_factory=dict)
    native_format_arg: set[str] = field(default_factory=set)
    deltas: dict[str, _DeltaBase] = field(default_factory=dict)
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

    def __init__(self, config: ProxyConfig | None = None, codec: Codec | None = None) -> None:
        self.config = config or ProxyConfig()
        codec = codec or Codec()
        self._dumps = codec.dumps
        self._loads = codec.loads
        self._count_fn = codec.count
        self._session = _Session(ceiling=self.config.format, server_name=self.config.server_name)
        self._pending: dict[RequestKey, _Pending] = {}
        self._unfinished: list[tuple[str, str, _Outcome, float]] = []
        self._clock: Callable[[], float] = time.perf_counter
        self._warm = False
        self._warm_lock = threading.Lock()

    # -- public API --------------------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """How many client requests await a server response."""
        return len(self._pending)

    @property
    def session_format(self) -> Format:
        """The most the session may deliver (``--format`` capped by the client's opt-out)."""
        return self._session.ceiling

    def pop_records(self) -> list[LedgerRecord]:
        """The ledger records produced since the last call (empty with ``stats=False``)."""
        unfinished, self._unfinished = self._unfinished, []
        records: list[LedgerRecord] = []
        for server, tool, outcome, elapsed_ms in unfinished:
            lazy_bytes = sum(_utf8_len(t) for t in outcome.lazy)
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
                decoded = self._decode(value)
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
        new_result = {**result, "instructions": append_primer(result.get("instructions"))}
        return {**msg, "result": new_result}

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
        tool = pending.tool
        policy = self.config.policy.for_tool(tool)
        fmt = cap_format(policy.format, pending.fmt)
        texts = [b["text"] for b in _text_blocks(result.get("content"))]
        if not safe:
            outcome = _Outcome(None, "fallback:unsafe-envelope", lazy=texts)
        elif self.config.policy.is_file_tool(tool) and policy.format == "off":
            outcome = _Outcome(None, _FILE_DECISION, lazy=texts)
        else:
            try:
                outcome = self._rewrite(result, tool, policy, fmt, pending, started)
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
        if self._count_fn is not None:
            return self._count_fn(text, self.config.encoding)
        from .. import tokens

        return tokens.count(text, self.config.encoding)

    def _count_for_ledger(self, text: str) -> int:
        # Texts nobody rewrites can be huge (a 64 MB blob): a tokenizer pass over them would
        # stall the relay for seconds, and before == after anyway, so a rough size will do.
        if len(text) > _LEDGER_EXACT_CHARS:
            return _utf8_len(text) // 4
        return self._count(text)

    def _encode(self, value: Any) -> str:
        if self._dumps is not None:
            return self._dumps(value)
        import gcfkit

        return gcfkit.dumps(value)

    def _decode(self, text: str) -> Any:
        if self._loads is not None:
            return self._loads(text)
        import gcfkit

        return gcfkit.loads(text)

    def warm_up(self) -> None:
        """Load the tokenizer and codec now (about a second, once per process), so the first
        tool result is not charged for it; the shell calls this at start-up."""
        with self._warm_lock:  # a result arriving mid-warm-up waits for it, outside its budget
            if self._warm:
                return
            self._warm = True
            try:
                self._count("{}")
                self._decode(self._encode({"a": [1]}))
            except Exception:  # a broken codec shows up, and is handled, per result
                pass

    def _check_budget(self, started: float) -> None:
        if self._clock() - started > self.config.time_budget:
            raise _BudgetExceeded

    def _rewrite(
        self,
        result: dict[str, Any],
        tool: str,
        policy: ToolPolicy,
        fmt: Format,
        pending: _Pending,
        started: float,
    ) -> _Outcome:
        content = result.get("content")
        blocks = _text_blocks(content)
        texts = [b["text"] for b in blocks]
        outcome = _Outcome(None, "unchanged", lazy=list(texts))
        if result.get("isError") is True or fmt == "off" or not blocks:
            return outcome
        assert isinstance(content, list)
        sizes = [_utf8_len(t) for t in texts]
        limit = self.config.max_text_bytes
        values = [
            _json_value_of(t) if policy.min_bytes <= n <= limit else None
            for t, n in zip(texts, sizes, strict=True)
        ]
        self._check_budget(started)
        if all(v is None for v in values):
            return outcome

        joinable = (
            policy.join
            and len(blocks) >= 2
            and len(blocks) == len(content)
            and all(isinstance(v, dict) for v in values)
            and all(set(b) == {"type", "text"} for b in blocks)
        )
        # Each candidate: the indices of the blocks it replaces and the value they carry.
        candidates: list[tuple[list[int], Any]]
        if joinable:
            candidates = [(list(range(len(blocks))), list(values))]
        else:
            candidates = [([i], v) for i, v in enumerate(values) if v is not None]
        whole = len(candidates) == 1 and len(candidates[0][0]) == len(blocks)
        counted = {i for indices, _ in candidates for i in indices}
        outcome.lazy = [t for i, t in enumerate(texts) if i not in counted]

        new_texts: dict[int, str | None] = {}
        decisions: list[str] = []
        for indices, value in candidates:
            byt0 = sum(sizes[i] for i in indices)
            compact = _compact(value)
            compact_tokens = self._count(compact)
            if len(indices) == 1 and compact == texts[indices[0]]:
                tok0 = compact_tokens  # already compact: no need to count it twice
            else:
                tok0 = sum(self._count(texts[i]) for i in indices)
            outcome.tokens_before += tok0
            outcome.bytes_before += byt0
            chosen = self._choose(
                value, fmt, (compact, compact_tokens), (tok0, byt0), started, decisions
            )
            if whole and policy.delta and fmt == "gcf":
                delta = self._try_delta(pending, policy, value, chosen, tok0, started)
                if delta is not None:
                    chosen, decision = delta
                    decisions.append(decision)
            if chosen is None:
                outcome.tokens_after += tok0
                outcome.bytes_after += byt0
                continue
            text, tokens_after = chosen
            for i in indices:
                new_texts[i] = None
            new_texts[indices[0]] = text
            outcome.tokens_after += tokens_after
            outcome.bytes_after += _utf8_len(text)
        outcome.decision = _summarize(decisions)
        if not new_texts:
            return outcome

        position = {id(b): i for i, b in enumerate(blocks)}
        new_content: list[Any] = []
        for block in content:
            at = position.get(id(block))
            if at is None or at not in new_texts:
                new_content.append(block)
            elif new_texts[at] is not None:
                new_content.append({**block, "text": new_texts[at]})
        outcome.result = {**result, "content": new_content}
        return outcome

    def _choose(
        self,
        value: Any,
        fmt: Format,
        compact_form: tuple[str, int],
        original: tuple[int, int],
        started: float,
        decisions: list[str],
    ) -> tuple[str, int] | None:
        """The smallest allowed form as (text, tokens), or None to keep the original.
        ``original`` is (tokens, bytes); ties on tokens go to fewer bytes."""
        compact, compact_tokens = compact_form
        tok0 = original[0]
        best: tuple[str, int] | None = None
        best_decision = "unchanged"
        if (compact_tokens, _utf8_len(compact)) < original:
            best, best_decision = compact_form, "json-minified"
        self._check_budget(started)
        if fmt == "gcf":
            try:
                gcf = self._encode(value)
            except (GCFError, RecursionError, ValueError, TypeError) as e:
                decisions.append(f"fallback:encode-{getattr(e, 'code', type(e).__name__)}")
                gcf = None
            self._check_budget(started)
            if gcf is not None:
                gcf_tokens = self._count(gcf)
                if gcf_tokens < compact_tokens and gcf_tokens < tok0:
                    if self._lossless(gcf, value, compact):
                        best, best_decision = (gcf, gcf_tokens), "gcf"
                    else:
                        decisions.append("fallback:selfcheck")
                self._check_budget(started)
        if best_decision != "unchanged" or not decisions:
            decisions.append(best_decision)
        return best

    def _lossless(self, gcf: str, value: Any, compact: str) -> bool:
        if not self.config.selfcheck:
            return True
        try:
            decoded = self._decode(gcf)
            # Same compact JSON means the same value (json.dumps keeps types, key order and
            # float bits); only a mismatch (e.g. 3.0 decoded as 3) needs the slow walk.
            return _compact(decoded) == compact or same_value(decoded, value)
        except (GCFError, RecursionError, ValueError, TypeError):
            return False

    def _try_delta(
        self,
        pending: _Pending,
        policy: ToolPolicy,
        value: Any,
        chosen: tuple[str, int] | None,
        tok0: int,
        started: float,
    ) -> tuple[tuple[str, int] | None, str] | None:
        """A delta (or ``unchanged``) against what the client last received for the same tool
        and arguments when both results are keyed sets; None to deliver ``chosen`` as usual.

        The base is the logical set last delivered in any full form: its pack root (§10a.3)
        is a content hash, so a full result needs no ``pack_root`` header of its own. That
        keeps first calls and re-anchors (every ``reanchor`` turns) at plain GCF size.
        """
        bases = self._session.deltas
        slot = pending.args_key
        key = _identity_column(value, policy.key)
        if key is None:
            bases.pop(slot, None)
            return None
        try:
            keyed = importlib.import_module("gcfkit.keyed")
        except ImportError:
            return None
        fields = _field_union(value)
        state = bases.pop(slot, None)
        try:
            update = keyed.KeyedSet(key, fields, value)
            if state is None or state.key != key or state.fields != fields:
                session = keyed.DeltaSession(update, reanchor=keyed.FixedN(self.config.reanchor))
                bases[slot] = _DeltaBase(session, update, key, fields)
                return None
            previous = state.base
            wire, is_full = state.session.next(update)
            # Whatever goes out now (delta or full), the client ends up holding ``update``.
            bases[slot] = _DeltaBase(state.session, update, key, fields)
            if is_full:
                return None
            self._check_budget(started)
            n = self._count(wire)
            full = chosen[1] if chosen is not None else tok0
            if n >= self.config.delta_ratio * full or n >= tok0:
                return None
            if not self._delta_lossless(keyed, previous, wire, update):
                return (chosen, "fallback:delta-selfcheck")
            head = wire.split("\n", 1)[0].split(" ")
            return (wire, n), "unchanged-delta" if "unchanged=true" in head else "delta"
        except (GCFError, ValueError, TypeError, KeyError):
            return None

    def _delta_lossless(self, keyed: Any, base: Any, wire: str, update: Any) -> bool:
        if not self.config.selfcheck:
            return True
        try:
            if "unchanged=true" in wire.split("\n", 1)[0].split(" "):
                root = keyed.pack_root(update)
                return bool(keyed.pack_root(base) == root and f"pack_root={root}" in wire)
            applied = keyed.apply_delta(base, keyed.loads_delta(wire))
        except (GCFError, ValueError, TypeError, KeyError):
            return False
        key = update.key
        got = {_scalar_key(r[key]): r for r in applied.rows}
        want = {_scalar_key(r[key]): r for r in update.rows}
        return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)

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


def _field_union(rows: list[dict[str, Any]]) -> list[str]:
    fields: dict[str, None] = {}
    for row in rows:
        for k in row:
            fields.setdefault(k, None)
    return list(fields)


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [
        b
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
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


def _summarize(decisions: Iterable[str]) -> str:
    """One ledger decision for a result: a fallback if any block needed one (the ledger must
    say why), else the most telling of its blocks' decisions."""
    seen = list(decisions)
    fallback = next((d for d in seen if d.startswith("fallback:")), None)
    if fallback is not None:
        return fallback
    for word in ("unchanged-delta", "delta", "gcf", "json-minified"):
        if word in seen:
            return word
    return "unchanged"
