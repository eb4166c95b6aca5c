#!/usr/bin/env python3
"""Benchmark: what the model reads through each MCP proxy, on the 92 recorded corpus calls.

Every recorded server session in ``../shared/corpus/mcp`` is re-run live over stdio with the
official MCP SDK client, through each proxy in turn. The servers themselves are replayed: a
small stdio server (this file with ``--replay SERVER``) answers ``initialize``,
``tools/list`` and each ``tools/call`` with exactly what the real server sent when the
corpus was captured (the real servers' results depend on repository and clock state that
cannot be rebuilt here; replaying makes every proxy see byte-identical input).

Configurations: no proxy; gcfkit with its default flags, with an agent that passes ``_since``
on every call of a tool it holds a result of (naming the ref it was shown for the same call,
else the newest of that tool) and with one that never does; gcfkit
variants (:data:`GCFKIT_CONFIGS`); terse-mcp ``proxy`` and ``proxy --diff``; gcf-proxy (all
PyPI, bench-only; a proxy that is not installed is reported as such). Counted, in o200k_base
and cl100k_base (exact, bpe-openai): the text blocks of every tools/call result as the client
received them, plus once per session the ``instructions`` and the tool list. Every gcfkit
result is rebuilt by a reader (:class:`Checker`) and must give exactly the server's value;
none may be larger than what the server sent. Latency: per call round trip minus the
no-proxy round trip of the same call (median, p99), and the gcfkit core's own time per
result, in process (median, p99, and on the 45 KB one).

    python bench/proxy.py [--reps N] [--out bench/proxy.md] [--only CONFIG ...]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # measure this tree, as the proxies it runs do
CORPUS = ROOT.parent / "shared" / "corpus" / "mcp"
SERVERS = ["git", "time", "filesystem", "memory", "everything", "filesystem-npm", "serena"]
ENCODINGS = ("cl100k_base", "o200k_base")
CALL_TIMEOUT = 20.0
FILE_TOOLS = {"read_text_file", "read_file", "read_multiple_files", "read_media_file"}


# --------------------------------------------------------------------------------------
# The replay server (runs as a subprocess: python bench/proxy.py --replay SERVER)
# --------------------------------------------------------------------------------------


def corpus_calls(server: str) -> list[dict[str, Any]]:
    """The recorded calls of a server, in session order (gcfkit.traffic.corpus reads them)."""
    sys.path.insert(0, str(ROOT / "src"))
    from gcfkit.traffic.corpus import read_session

    return [
        {"tool": c.tool, "arguments": c.arguments, "result": c.result, "repeat_of": c.repeat_of}
        for c in read_session(CORPUS / server).calls
    ]


def replay_server(server: str) -> int:
    meta = CORPUS / server / "meta"
    init = json.loads((meta / "initialize.json").read_text(encoding="utf-8"))
    tools = json.loads((meta / "tools_list.json").read_text(encoding="utf-8"))
    pending = corpus_calls(server)
    out = sys.stdout

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg, ensure_ascii=False) + "\n")
        out.flush()

    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue
        method, msg_id, params = msg["method"], msg["id"], msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": msg_id, "result": init})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": msg_id, "result": tools})
        elif method == "tools/call":
            name, args = params.get("name"), params.get("arguments") or {}
            match = next((c for c in pending if c["tool"] == name and c["arguments"] == args), None)
            if match is None:
                err = {"code": -32602, "message": f"no recorded call {name}"}
                send({"jsonrpc": "2.0", "id": msg_id, "error": err})
                continue
            pending.remove(match)
            send({"jsonrpc": "2.0", "id": msg_id, "result": match["result"]})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        else:
            err = {"code": -32601, "message": method}
            send({"jsonrpc": "2.0", "id": msg_id, "error": err})
    return 0


# --------------------------------------------------------------------------------------
# Proxies
# --------------------------------------------------------------------------------------


@dataclass
class Config:
    name: str
    prefix: list[str] | None  # None: not runnable here
    env: dict[str, str] = field(default_factory=dict)
    why_not: str = ""
    gcfkit: bool = False  # gcfkit's output: every result is verified
    since: bool = False  # the agent passes _since on every call of a tool it holds a ref of


def tiktoken_cache() -> str | None:
    """terse counts with tiktoken, which would download its BPE files: give it bpe-openai's
    bundled (sha256-identical) files under the cache keys tiktoken computes."""
    try:
        from importlib.resources import files

        import tiktoken_ext.openai_public as public
    except ImportError:
        return None
    source = Path(public.__file__).read_text(encoding="utf-8")
    cache = Path(tempfile.mkdtemp(prefix="gcfkit-bench-tiktoken-"))
    for name in ENCODINGS:
        m = re.search(r'"([^"]+/' + name + r'\.tiktoken)"', source)
        if m is None:
            return None
        blob = gzip.decompress((files("bpe_openai.data") / f"{name}.tiktoken.gz").read_bytes())
        (cache / hashlib.sha1(m.group(1).encode()).hexdigest()).write_bytes(blob)
    return str(cache)


#: gcfkit's configurations: (label, flags, agent passes _since). The first is the default.
GCFKIT_CONFIGS: list[tuple[str, list[str], bool]] = [
    ("gcfkit", [], True),
    ("gcfkit, agent without _since", [], False),
    ("gcfkit --refs all", ["--refs", "all"], True),
    ("gcfkit --refs all, agent without _since", ["--refs", "all"], False),
    ("gcfkit --primer instructions", ["--primer", "instructions"], True),
    ("gcfkit --dense off", ["--dense", "off"], True),
    ("gcfkit --dense lists,constants,short_rows", ["--dense", "lists,constants,short_rows"], True),
    ("gcfkit --refs off (no relative answers)", ["--refs", "off"], False),
    ("gcfkit --delta session (agent without _since)", ["--delta", "session"], False),
]


def configs(state: Path, only: set[str] | None = None) -> list[Config]:
    py = sys.executable
    gcfkit = [py, "-m", "gcfkit.cli", "proxy", "--no-stats", "--time-budget", "5"]
    out = [Config("no proxy", [])]
    for label, flags, since in GCFKIT_CONFIGS:
        out.append(Config(label, [*gcfkit, *flags, "--"], gcfkit=True, since=since))
    bindir = Path(sys.executable).parent
    terse = shutil.which("terse", path=str(bindir)) or shutil.which("terse")
    if terse is None:
        out.append(Config("terse", None, why_not="terse-mcp is not installed"))
        out.append(Config("terse --diff", None, why_not="terse-mcp is not installed"))
    else:
        cache = tiktoken_cache()
        env = {"XDG_STATE_HOME": str(state / "xdg"), "HOME": str(state)}
        if cache:
            env["TIKTOKEN_CACHE_DIR"] = cache
        stats = ["--stats-log", str(state / "terse-stats.jsonl")]
        out.append(Config("terse", [terse, "proxy", *stats, "--"], env))
        out.append(Config("terse --diff", [terse, "proxy", "--diff", *stats, "--"], env))
    gcf = shutil.which("gcf-proxy", path=str(bindir)) or shutil.which("gcf-proxy")
    if gcf is None:
        out.append(Config("gcf-proxy", None, why_not="gcf-proxy is not installed"))
    else:
        out.append(Config("gcf-proxy", [gcf]))
    if only:
        out = [c for c in out if c.name in only or c.name == "no proxy"]
    return out


# --------------------------------------------------------------------------------------
# Running a session
# --------------------------------------------------------------------------------------


#: The clients the bench declares itself as: a client whose model reads the text blocks (the
#: SDK's own name, unknown to every proxy) and Claude Code, whose model reads
#: JSON.stringify(structuredContent) of a result that carries it (gcfkit.readers).
VIEWS: dict[str, str] = {"content": "mcp", "claude-code": "claude-code"}
#: What each view's model reads (gcfkit.proxy.structured.model_view).
VIEW_READS = {"content": "content", "claude-code": "structured"}
#: The configurations run in the Claude Code view (the content view runs them all).
CLAUDE_CONFIGS = {
    "no proxy",
    "gcfkit",
    "gcfkit, agent without _since",
    "terse",
    "terse --diff",
    "gcf-proxy",
}
#: Claude Code writes a result over this many tokens to a file and shows the model a path
#: and a preview (MAX_MCP_OUTPUT_TOKENS, its default).
CLAUDE_OFFLOAD_TOKENS = 25_000
#: ... and, by its reports, a result of about this many characters (50 KB).
CLAUDE_OFFLOAD_CHARS = 50_000


@dataclass
class CallResult:
    texts: list[str] | None  # None: the call failed or timed out
    seconds: float
    error: str = ""
    since: str | None = None  # the handle the agent passed
    #: The result's content and structuredContent as the client received them.
    result: dict[str, Any] | None = None
    #: What the SDK client's check against the tool's outputSchema said (empty: valid).
    invalid: str = ""

    def view(self, reads: str) -> list[str] | None:
        """What a ``reads`` client's model reads of this result."""
        from gcfkit.proxy.structured import model_view

        if self.result is None:
            return None
        return model_view(self.result, reads)  # type: ignore[arg-type]


@dataclass
class Session:
    instructions: str
    tools: str  # the tool list as the client received it (compact JSON)
    calls: list[CallResult]


def session_or_failure(config: Config, server: str, state: Path, view: str) -> Session:
    """One session; a proxy that cannot even start counts every call as failed."""
    log = state / f"{config.name.replace(' ', '_').replace('/', '_')}.{server}.{view}.stderr"
    try:
        return asyncio.run(run_session(config, server, log, VIEWS[view]))
    except Exception as e:
        print(
            f"  {config.name} / {server}: session failed ({e!r}); stderr in {log}", file=sys.stderr
        )
        failed = [CallResult(None, 0.0, "session failed") for _ in corpus_calls(server)]
        return Session("", "", failed)


def slot_of(call: dict[str, Any]) -> str:
    return str(call["tool"]) + "\x00" + json.dumps(call["arguments"], sort_keys=True)


def handle_in(texts: list[str]) -> str | None:
    """The handle a delivered result names (a GCF header's ref=, an answer's, a ref= block)."""
    from gcfkit import relative

    if not texts:
        return None
    found: str | None = relative.ref_of(texts[0]) or relative.ref_of(texts[-1])
    return found


async def run_session(config: Config, server: str, log: Path, client: str) -> Session:
    from mcp import ClientSession, types
    from mcp.client.stdio import StdioServerParameters, stdio_client

    class Checked(ClientSession):
        """The SDK client, its outputSchema check recorded instead of raised: what the model
        would read is counted, and the check's verdict reported beside it."""

        invalid: dict[int, str]
        calls: int

        async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
            try:
                await super().validate_tool_result(name, result)
            except RuntimeError as e:
                self.invalid[self.calls] = str(e)

    assert config.prefix is not None
    command = [*config.prefix, sys.executable, str(Path(__file__).resolve()), "--replay", server]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.update(config.env)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(ROOT))
    results: list[CallResult] = []
    latest: dict[str, str] = {}  # the newest handle of each call (tool and arguments)
    newest: dict[str, str] = {}  # ... and of each tool
    with open(log, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            Checked(
                read, write, client_info=types.Implementation(name=client, version="1.0")
            ) as session,
        ):
            session.invalid, session.calls = {}, 0
            init = await asyncio.wait_for(session.initialize(), 60)
            listed = await asyncio.wait_for(session.list_tools(), 60)
            tools = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
            ]
            for call in corpus_calls(server):
                args = dict(call["arguments"])
                since = None
                if config.since:
                    since = latest.get(slot_of(call)) or newest.get(call["tool"])
                if since is not None:
                    args["_since"] = since
                started = time.perf_counter()
                session.calls = len(results)
                try:
                    result = await asyncio.wait_for(
                        session.call_tool(call["tool"], args), CALL_TIMEOUT
                    )
                    texts = [b.text for b in result.content if b.type == "text"]
                    got = received(result)
                    elapsed = time.perf_counter() - started
                    invalid = session.invalid.get(len(results), "")
                    results.append(CallResult(texts, elapsed, "", since, got, invalid))
                    handle = handle_in(texts)
                    if handle is not None:
                        latest[slot_of(call)] = newest[call["tool"]] = handle
                except Exception as e:  # a proxy that fails a call is reported, not fatal
                    kind = "timeout" if isinstance(e, TimeoutError) else type(e).__name__
                    results.append(CallResult(None, time.perf_counter() - started, kind))
    instructions = init.instructions or ""
    return Session(
        instructions, json.dumps(tools, ensure_ascii=False, separators=(",", ":")), results
    )


def received(result: Any) -> dict[str, Any]:
    """A CallToolResult's text blocks, structuredContent and isError, as JSON (what the bench
    counts and checks; other blocks are neither)."""
    texts = [b.text for b in result.content if b.type == "text"]
    got: dict[str, Any] = {"content": [{"type": "text", "text": t} for t in texts]}
    if result.structured_content is not None:
        got["structuredContent"] = result.structured_content
    if result.is_error:
        got["isError"] = True
    return got


# --------------------------------------------------------------------------------------
# Verifying what gcfkit delivered
# --------------------------------------------------------------------------------------


def raw_texts(call: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in call["result"].get("content", []) if b.get("type") == "text"]


def sent_result(call: dict[str, Any]) -> dict[str, Any]:
    """The recorded result as the bench compares it: its text blocks, structuredContent and
    isError (what :func:`received` keeps of what a client got)."""
    result = call["result"]
    sent: dict[str, Any] = {"content": [{"type": "text", "text": t} for t in raw_texts(call)]}
    if result.get("structuredContent") is not None:
        sent["structuredContent"] = result["structuredContent"]
    if result.get("isError"):
        sent["isError"] = True
    return sent


def model_view(result: dict[str, Any], view: str) -> list[str]:
    from gcfkit.proxy.structured import model_view as view_of

    return view_of(result, VIEW_READS[view])  # type: ignore[arg-type]


class Checker:
    """Reads every gcfkit result back as a client does (:func:`gcfkit.traffic.verify.read_back`,
    the one reader ``gcfkit verify`` uses: full GCF decoded with its extensions, relative
    answers applied to the result they name, Python literals rendered back, file reads and
    texts byte for byte, a result delivered as its structuredContent's value read back to that
    value), and checks that the model reads no more than it would have without the proxy.
    Any mismatch is an AssertionError."""

    def __init__(self, view: str) -> None:
        from gcfkit import relative

        self.view = view
        self.reader = relative.Reader()
        self.checked = 0
        self.named_growth = 0  # results larger than the server's only by their ref= block

    def check(self, label: str, call: dict[str, Any], got: dict[str, Any]) -> None:
        from gcfkit import relative, tokens
        from gcfkit.proxy.policy import Policy
        from gcfkit.traffic.verify import GateError, read_back

        sent = sent_result(call)
        raw = model_view(sent, self.view)
        texts = model_view(got, self.view)
        block = None
        if len(texts) >= 2 and relative.ref_of(texts[-1]) == texts[-1][4:]:
            block = texts[-1]  # the ref= block naming a result that is not GCF
            texts = texts[:-1]
        before = sum(tokens.count(t) for t in raw)
        after = sum(tokens.count(t) for t in texts)
        assert after <= before, f"{label}: {after} tokens read for the server's {before}"
        if block is not None and after + tokens.count(block) > before:
            self.named_growth += 1
        try:
            read_back(sent, got, self.reader, file_tool=Policy().is_file_tool(call["tool"]))
        except GateError as e:
            raise AssertionError(f"{label}: {e}") from e
        self.checked += 1


# --------------------------------------------------------------------------------------
# The in-process core timing
# --------------------------------------------------------------------------------------


def core_timings(reps: int) -> tuple[list[float], dict[str, float]]:
    from gcfkit.proxy.core import ProxyConfig, ProxyCore

    per_call: list[float] = []
    named: dict[str, float] = {}
    core = ProxyCore(ProxyConfig(primer=False, stats=False, time_budget=5.0))
    core.warm_up()
    n = 0
    for server in SERVERS:
        for call in corpus_calls(server):
            params = {"name": call["tool"], "arguments": call["arguments"]}
            samples = []
            for _ in range(reps):
                n += 1
                req = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}
                core.from_client(json.dumps(req).encode() + b"\n")
                line = json.dumps({"jsonrpc": "2.0", "id": n, "result": call["result"]}).encode()
                started = time.perf_counter()
                core.from_server(line + b"\n")
                samples.append((time.perf_counter() - started) * 1000)
            per_call.append(statistics.median(samples))
            size = sum(len(b.get("text", "")) for b in call["result"].get("content", []))
            named[f"{server}/{call['tool']} ({size // 1000} KB)"] = statistics.median(samples)
    return per_call, named


def gap_split(
    per_call: dict[str, dict[str, dict[str, list[int]]]], servers: list[str], enc: str
) -> tuple[int, int, int, int]:
    """The part of gcfkit's difference to terse --diff (default flags, agent passing
    ``_since``) that is not format: the file reads where gcfkit is larger because it keeps
    them byte-faithful and terse sent fewer tokens than the server (it re-encodes their
    JSON), and the calls that are no repeat of the same arguments where terse --diff sent
    less than terse (its diff against a call with other arguments). Returns (file tokens,
    file calls, other-argument tokens, calls)."""
    files = n_files = others = n_others = 0
    for server in servers:
        g, t = per_call["gcfkit"][server][enc], per_call["terse --diff"][server][enc]
        plain = per_call["terse"][server][enc] if "terse" in per_call else t
        sent = per_call["no proxy"][server][enc]
        for i, call in enumerate(corpus_calls(server)):
            gap = g[i] - t[i]
            if gap <= 0:
                continue
            if call["tool"] in FILE_TOOLS and t[i] < sent[i]:
                files, n_files = files + gap, n_files + 1
            elif not call["repeat_of"] and t[i] < plain[i]:
                others, n_others = others + gap, n_others + 1
    return files, n_files, others, n_others


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


@dataclass
class Measured:
    """One view's runs: the sessions, every count and what was checked."""

    view: str
    servers: list[str]
    raw: dict[str, dict[str, Session]] = field(default_factory=dict)
    # totals[config][server][enc] = (results, instructions + tools)
    totals: dict[str, dict[str, dict[str, tuple[int, int]]]] = field(default_factory=dict)
    per_call: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # per_call_enc[config][server][enc]: each call's result tokens
    per_call_enc: dict[str, dict[str, dict[str, list[int]]]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)
    checked: int = 0
    growth: dict[str, int] = field(default_factory=dict)

    def total(self, name: str, enc: str, servers: list[str] | None = None) -> int:
        return sum(sum(self.totals[name][s][enc]) for s in servers or self.servers)

    def files(self, name: str, enc: str) -> int:
        """The tokens of the file reads' results (FILE_TOOLS)."""
        return sum(
            self.per_call_enc[name][s][enc][i]
            for s in self.servers
            for i, call in enumerate(corpus_calls(s))
            if call["tool"] in FILE_TOOLS
        )

    def invalid(self, name: str) -> list[str]:
        """The calls whose result the SDK client's outputSchema check refused."""
        return [
            f"{s}/{i:03d} {call['tool']}"
            for s in self.servers
            for i, call in enumerate(corpus_calls(s))
            if self.raw[name][s].calls[i].invalid
        ]

    def over(self, name: str, limit: int, chars: int = CLAUDE_OFFLOAD_CHARS) -> list[str]:
        """The calls whose result the model reads as more than ``limit`` o200k tokens or
        ``chars`` characters."""
        out = []
        for s in self.servers:
            for i, call in enumerate(corpus_calls(s)):
                res = self.raw[name][s].calls[i]
                size = sum(len(t) for t in res.view(VIEW_READS[self.view]) or [])
                if self.per_call[name][s][i] > limit or size > chars:
                    out.append(f"{s}/{i:03d} {call['tool']} ({self.per_call[name][s][i]:,})")
        return out


def measure(view: str, ran: list[Config], servers: list[str], reps: int, state: Path) -> Measured:
    """Every configuration of ``ran`` (those of the view) run as the view's client, every gcfkit
    result read back, and what the view's model reads counted."""
    from gcfkit import tokens

    m = Measured(view, servers)
    ran = [c for c in ran if view == "content" or c.name in CLAUDE_CONFIGS]
    for cfg in ran:
        m.raw[cfg.name] = {}
        for server in servers:
            runs = [session_or_failure(cfg, server, state, view) for _ in range(reps)]
            first = runs[0]
            for i, res in enumerate(first.calls):
                res.seconds = statistics.median(r.calls[i].seconds for r in runs)
            m.raw[cfg.name][server] = first
            print(f"  ran {cfg.name:<48} {server} ({view})", file=sys.stderr)

    # Every gcfkit result rebuilt by a reader; failures are assertion errors, not footnotes.
    for cfg in ran:
        if not cfg.gcfkit:
            continue
        m.growth[cfg.name] = 0
        for server in servers:
            checker = Checker(view)
            for i, call in enumerate(corpus_calls(server)):
                res = m.raw[cfg.name][server].calls[i]
                label = f"{cfg.name} ({view}): {server}/{i:03d} {call['tool']}"
                assert res.result is not None, f"{label} failed ({res.error})"
                assert not res.invalid, f"{label}: the SDK client refused it: {res.invalid}"
                checker.check(label, call, res.result)
            m.checked += checker.checked
            m.growth[cfg.name] += checker.named_growth

    base = m.raw["no proxy"]
    for cfg in ran:
        m.totals[cfg.name], m.per_call[cfg.name], m.failures[cfg.name] = {}, {}, []
        m.per_call_enc[cfg.name] = {}
        for server in servers:
            sess = m.raw[cfg.name][server]
            calls_enc: dict[str, list[int]] = {}
            per_enc: dict[str, tuple[int, int]] = {}
            for enc in ENCODINGS:
                results = 0
                calls_enc[enc] = []
                for i, res in enumerate(sess.calls):
                    texts = res.view(VIEW_READS[view])
                    if texts is None:  # a failed call counts as what the server sent
                        texts = base[server].calls[i].view(VIEW_READS[view])
                    n = sum(tokens.count(x, enc) for x in texts or [])
                    results += n
                    calls_enc[enc].append(n)
                fixed = tokens.count(sess.instructions, enc) + tokens.count(sess.tools, enc)
                per_enc[enc] = (results, fixed)
            m.totals[cfg.name][server] = per_enc
            m.per_call[cfg.name][server] = calls_enc["o200k_base"]
            m.per_call_enc[cfg.name][server] = calls_enc
            m.failures[cfg.name] += [
                f"{server}/{i:03d} {r.error}" for i, r in enumerate(sess.calls) if r.result is None
            ]
    return m


def emit_claude(emit: Any, content: Measured, claude: Measured, cfgs: list[Config]) -> None:
    """The Claude Code view, and both views side by side (README's proxy table)."""
    emit("\n## What Claude Code's model reads (the client declares itself `claude-code`)\n")
    emit(
        "The same sessions, the SDK client declaring `clientInfo.name` `claude-code`. Counted: "
        "what Claude Code hands its model, `JSON.stringify(structuredContent)` of a successful "
        "result that carries it, else its text blocks (gcfkit.proxy.structured.model_view), "
        "plus the instructions and the tool list once per session. gcfkit (`--structured "
        "auto`) delivers such a result as its value, compressed, and drops the tools' "
        f"outputSchema. Verified: {claude.checked:,} gcfkit results read back to the value "
        "(or the file's text) the model would have read, none read as more tokens; the SDK "
        "client validated every structuredContent it received against its tool's "
        "outputSchema.\n"
    )
    emit(
        "| configuration | o200k | cl100k | saved (o200k) | results o200k | instructions + "
        "tools o200k | failed calls | refused by the SDK client (outputSchema) | results over "
        f"{CLAUDE_OFFLOAD_TOKENS:,} tokens or {CLAUDE_OFFLOAD_CHARS:,} characters |"
    )
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    none_o = claude.total("no proxy", "o200k_base")
    for cfg in cfgs:
        if cfg.name not in CLAUDE_CONFIGS:
            continue
        if cfg.name not in claude.totals:
            emit(f"| {cfg.name} | n/a | n/a | | | | not run: {cfg.why_not} | | |")
            continue
        o, c = claude.total(cfg.name, "o200k_base"), claude.total(cfg.name, "cl100k_base")
        res_o = sum(claude.totals[cfg.name][s]["o200k_base"][0] for s in claude.servers)
        fix_o = sum(claude.totals[cfg.name][s]["o200k_base"][1] for s in claude.servers)
        label = cfg.name + (", agent passes _since" if cfg.since else "")
        saved = f"{(none_o - o) / none_o:.1%}" if cfg.name != "no proxy" else ""
        over = ", ".join(claude.over(cfg.name, CLAUDE_OFFLOAD_TOKENS)) or "none"
        refused = len(claude.invalid(cfg.name))
        emit(
            f"| {label} | {o:,} | {c:,} | {saved} | {res_o:,} | {fix_o:,} | "
            f"{len(claude.failures[cfg.name])} | {refused} | {over} |"
        )
    for name, f in claude.failures.items():
        if f:
            emit(f"- {name}: failed/timed out: {', '.join(f)}")
    for name in claude.raw:
        calls = claude.invalid(name)
        if calls:
            emit(
                f"- {name}: the SDK client refused {len(calls)} results (structuredContent "
                f"against the tool's outputSchema; counted as the model would read them): "
                + ", ".join(calls)
            )
    largest = max(
        (n, f"{s}/{i:03d} {call['tool']}")
        for s in claude.servers
        for i, call in enumerate(corpus_calls(s))
        for n in [claude.per_call["no proxy"][s][i]]
    )
    emit(
        f"- Claude Code writes a result over MAX_MCP_OUTPUT_TOKENS ({CLAUDE_OFFLOAD_TOKENS:,} by "
        "default) to a file and shows the model a preview: no corpus result crosses it, with "
        f"or without a proxy (the largest: {largest[1]}, {largest[0]:,} tokens without one)."
        if not any(claude.over(n, CLAUDE_OFFLOAD_TOKENS) for n in claude.raw)
        else "- Results over Claude Code's MAX_MCP_OUTPUT_TOKENS: see the last column."
    )
    target = "terse --diff"
    if "gcfkit" in claude.totals and target in claude.totals:
        for enc in ENCODINGS:
            g, t = claude.total("gcfkit", enc), claude.total(target, enc)
            word = "MET" if g < t else "NOT MET"
            emit(
                f"\nTarget, Claude Code's view ({enc}): gcfkit with default flags, agent passing "
                f"_since, {g:,} against terse --diff {t:,}: {word} ({g - t:+,})."
            )
        for enc in ENCODINGS:
            g = content.total("gcfkit", enc) - content.files("gcfkit", enc)
            t = content.total(target, enc) - content.files(target, enc)
            word = "MET" if g < t else "NOT MET"
            emit(
                f"Content reader's view without the file reads ({enc}; their results left out "
                f"on both sides): gcfkit {g:,} against terse --diff {t:,}: {word} ({g - t:+,})."
            )

    emit("\n## Both views (o200k / cl100k, instructions and tool lists included)\n")
    emit("| configuration | content reader | Claude Code |")
    emit("|---|---:|---:|")
    for cfg in cfgs:
        if cfg.name not in CLAUDE_CONFIGS or cfg.name not in claude.totals:
            continue
        cells = [
            f"{v.total(cfg.name, 'o200k_base'):,} / {v.total(cfg.name, 'cl100k_base'):,}"
            for v in (content, claude)
        ]
        label = cfg.name + (", agent passes _since" if cfg.since else "")
        emit(f"| {label} | " + " | ".join(cells) + " |")

    emit("\n## Per call, Claude Code's view (o200k, what the model reads of each result)\n")
    names = list(claude.raw)
    emit("| call | " + " | ".join(names) + " |")
    emit("|---|" + "---:|" * len(names))
    for server in claude.servers:
        for i, call in enumerate(corpus_calls(server)):
            cells = []
            for name in names:
                res = claude.raw[name][server].calls[i]
                cells.append(
                    res.error if res.result is None else str(claude.per_call[name][server][i])
                )
            rep = f" (repeat of {call['repeat_of']})" if call["repeat_of"] else ""
            emit(f"| {server}/{i:03d} {call['tool']}{rep} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replay", metavar="SERVER", help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=1, help="sessions per proxy (latency)")
    ap.add_argument("--out", help="also write the markdown report here")
    ap.add_argument("--servers", nargs="*", default=SERVERS)
    ap.add_argument("--only", nargs="*", help="run only these configurations (and no proxy)")
    ap.add_argument(
        "--views",
        nargs="*",
        choices=["claude-code"],
        default=["claude-code"],
        help="besides a content reader's, whose model is counted (Claude Code's: none to skip)",
    )
    args = ap.parse_args(argv)
    if args.replay:
        return replay_server(args.replay)

    state = Path(tempfile.mkdtemp(prefix="gcfkit-bench-"))
    cfgs = configs(state, set(args.only) if args.only else None)
    ran = [c for c in cfgs if c.prefix is not None]
    views = {v: measure(v, ran, args.servers, args.reps, state) for v in ["content", *args.views]}
    m = views["content"]
    raw, totals, per_call, per_call_enc = m.raw, m.totals, m.per_call, m.per_call_enc
    failures, checked, growth = m.failures, m.checked, m.growth
    base = raw["no proxy"]

    def total(name: str, enc: str, servers: list[str] | None = None) -> int:
        return m.total(name, enc, servers)

    lines: list[str] = []
    emit = lines.append
    ncalls = sum(len(corpus_calls(s)) for s in args.servers)
    emit(f"# MCP proxy benchmark: {ncalls} recorded calls, {len(args.servers)} servers\n")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    emit(
        f"Machine: {os.cpu_count()} CPUs, load average {load}; {args.reps} session(s) per proxy.\n"
    )
    emit(
        "Each proxy runs live through its own CLI (the official SDK client over stdio); the "
        "servers are replayed from the corpus, so every proxy sees the same bytes. Counted, "
        "exactly (bpe-openai): what the model reads, i.e. the text blocks of every tools/call "
        "result as the client received them, plus once per session the server's "
        "`instructions` and its tool list (compact JSON, as the client received it). *with "
        '_since*: the agent adds `"_since"` to every call of a tool it holds a result of, '
        "naming the ref it was shown for the same call, else the newest of that tool (other "
        "arguments); the others never do (no other proxy shows a ref)."
    )
    emit(
        f"\nVerified on every gcfkit configuration ({checked:,} results): no result has more "
        "o200k tokens than the server's text (a `ref=` block aside, counted above); every GCF "
        "payload and compact-JSON text decodes to exactly the server's value (types, key order), "
        "every Python literal renders back to its text, every relative answer applied to the "
        "result it names rebuilds the server's result, and every file read is byte-identical "
        "(or an `@@ unchanged` of the identical text).\n"
    )
    emit(
        "| configuration | o200k | cl100k | saved (o200k) | results o200k | instructions + "
        "tools o200k | failed calls |"
    )
    emit("|---|---:|---:|---:|---:|---:|---:|")
    none_o = total("no proxy", "o200k_base")
    for cfg in cfgs:
        if cfg.prefix is None:
            emit(f"| {cfg.name} | n/a | n/a | | | | not run: {cfg.why_not} |")
            continue
        o, c = total(cfg.name, "o200k_base"), total(cfg.name, "cl100k_base")
        res_o = sum(totals[cfg.name][s]["o200k_base"][0] for s in args.servers)
        fix_o = sum(totals[cfg.name][s]["o200k_base"][1] for s in args.servers)
        label = cfg.name + (", agent passes _since" if cfg.since else "")
        saved = f"{(none_o - o) / none_o:.1%}" if cfg.name != "no proxy" else ""
        emit(
            f"| {label} | {o:,} | {c:,} | {saved} | {res_o:,} | {fix_o:,} | "
            f"{len(failures[cfg.name])} |"
        )
    fails = {k: v for k, v in failures.items() if v}
    for name, f in fails.items():
        emit(f"- {name}: failed/timed out: {', '.join(f)}")
    grown = {k: v for k, v in growth.items() if v}
    if grown:
        from gcfkit.answers.since import FREE_NAMING_BYTES

        emit(
            "- results larger than the server's only by their `ref=` block (4 tokens; auto "
            f"names a result of {FREE_NAMING_BYTES:,} bytes or more from the start, and every "
            "result once the client has passed `_since`): "
            + ", ".join(f"{k} {v}" for k, v in grown.items())
        )

    target = "terse --diff"
    if target in totals and "gcfkit" in totals:
        for enc in ENCODINGS:
            g, t = total("gcfkit", enc), total(target, enc)
            word = "MET" if g < t else "NOT MET"
            emit(
                f"\nTarget ({enc}): gcfkit with default flags, agent passing _since, {g:,} "
                f"against terse --diff {t:,}: {word} ({g - t:+,})."
            )
        g, t = total("gcfkit, agent without _since", "o200k_base"), total(target, "o200k_base")
        emit(f"Without _since (o200k): {g:,} against {t:,} ({g - t:+,}).")
        for enc in ENCODINGS:
            files, n_files, others, n_others = gap_split(per_call_enc, args.servers, enc)
            g, t = total("gcfkit", enc), total(target, enc)
            rest = g - t - files - others
            emit(
                f"Where the difference comes from ({enc}, call by call): {files:+,} on "
                f"{n_files} file reads, whose contents gcfkit keeps byte-faithful by design "
                f"where terse re-encodes them; {others:+,} on {n_others} calls terse --diff "
                "answers as a diff against a call with other arguments, where gcfkit's was "
                f"not smaller; without those two, gcfkit {g - files - others:,} "
                f"against terse --diff {t:,} ({rest:+,})."
            )

    if "claude-code" in views:
        emit_claude(emit, views["content"], views["claude-code"], cfgs)

    compare = [n for n in ("no proxy", "gcfkit", "gcfkit, agent without _since", "terse",
                           "terse --diff") if n in totals]  # fmt: skip
    emit("\n## Per server (o200k, instructions and tool list included)\n")
    emit("| server | " + " | ".join(compare) + " | gcfkit − terse --diff |")
    emit("|---|" + "---:|" * (len(compare) + 1))
    for server in args.servers:
        cells = [f"{total(n, 'o200k_base', [server]):,}" for n in compare]
        diff = ""
        if "gcfkit" in totals and target in totals:
            d = total("gcfkit", "o200k_base", [server]) - total(target, "o200k_base", [server])
            diff = f"{d:+,} ({'wins' if d < 0 else 'loses' if d > 0 else 'ties'})"
        emit(f"| {server} | " + " | ".join(cells) + f" | {diff} |")

    emit("\n## Per call (o200k, result text blocks only)\n")
    names = [c.name for c in ran]
    short = [n if len(n) < 28 else n[:26] + "…" for n in names]
    emit("| call | " + " | ".join(short) + " |")
    emit("|---|" + "---:|" * len(names))
    for server in args.servers:
        for i, call in enumerate(corpus_calls(server)):
            cells = []
            for name in names:
                res = raw[name][server].calls[i]
                cells.append(res.error if res.texts is None else str(per_call[name][server][i]))
            rep = f" (repeat of {call['repeat_of']})" if call["repeat_of"] else ""
            emit(f"| {server}/{i:03d} {call['tool']}{rep} | " + " | ".join(cells) + " |")

    emit("\n## Latency overhead per call (round trip minus no-proxy round trip, ms)\n")
    emit("| configuration | median | p99 |")
    emit("|---|---:|---:|")
    for name in names[1:]:
        deltas = []
        for server in args.servers:
            for i, res in enumerate(raw[name][server].calls):
                if res.texts is not None:
                    deltas.append((res.seconds - base[server].calls[i].seconds) * 1000)
        if deltas:
            emit(f"| {name} | {statistics.median(deltas):+.2f} | {p99(deltas):+.2f} |")
    per_call_ms, named = core_timings(5)
    emit("\ngcfkit core, in process (from_server per tools/call result, median of 5):")
    emit(
        f"median {statistics.median(per_call_ms):.3f} ms, p99 {p99(per_call_ms):.3f} ms; "
        "largest results:"
    )
    for label, ms in sorted(named.items(), key=lambda kv: -kv[1])[:5]:
        emit(f"- {label}: {ms:.2f} ms")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
