#!/usr/bin/env python3
"""Benchmark: what the model reads through each MCP proxy, on the 92 recorded corpus calls.

Every recorded server session in ``../shared/corpus/mcp`` is re-run live over stdio with the
official MCP SDK client, through each proxy in turn. The servers themselves are replayed: a
small stdio server (this file with ``--replay SERVER``) answers ``initialize``,
``tools/list`` and each ``tools/call`` with exactly what the real server sent when the
corpus was captured (the real servers' results depend on repository and clock state that
cannot be rebuilt here; replaying makes every proxy see byte-identical input).

Configurations: no proxy; gcfkit with its default flags, with an agent that passes ``_since``
on every repeated call (naming the ref it was shown) and with one that never does; gcfkit
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
    since: bool = False  # the agent passes _since on every repeated call it holds a ref for


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


@dataclass
class CallResult:
    texts: list[str] | None  # None: the call failed or timed out
    seconds: float
    error: str = ""
    since: str | None = None  # the handle the agent passed


@dataclass
class Session:
    instructions: str
    tools: str  # the tool list as the client received it (compact JSON)
    calls: list[CallResult]


def session_or_failure(config: Config, server: str, state: Path) -> Session:
    """One session; a proxy that cannot even start counts every call as failed."""
    log = state / f"{config.name.replace(' ', '_').replace('/', '_')}.{server}.stderr"
    try:
        return asyncio.run(run_session(config, server, log))
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


async def run_session(config: Config, server: str, log: Path) -> Session:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    assert config.prefix is not None
    command = [*config.prefix, sys.executable, str(Path(__file__).resolve()), "--replay", server]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.update(config.env)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(ROOT))
    results: list[CallResult] = []
    latest: dict[str, str] = {}
    with open(log, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await asyncio.wait_for(session.initialize(), 60)
            listed = await asyncio.wait_for(session.list_tools(), 60)
            tools = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
            ]
            for call in corpus_calls(server):
                args = dict(call["arguments"])
                since = latest.get(slot_of(call)) if config.since and call["repeat_of"] else None
                if since is not None:
                    args["_since"] = since
                started = time.perf_counter()
                try:
                    result = await asyncio.wait_for(
                        session.call_tool(call["tool"], args), CALL_TIMEOUT
                    )
                    texts = [b.text for b in result.content if b.type == "text"]
                    results.append(CallResult(texts, time.perf_counter() - started, since=since))
                    handle = handle_in(texts)
                    if handle is not None:
                        latest[slot_of(call)] = handle
                except Exception as e:  # a proxy that fails a call is reported, not fatal
                    kind = "timeout" if isinstance(e, TimeoutError) else type(e).__name__
                    results.append(CallResult(None, time.perf_counter() - started, kind))
    instructions = init.instructions or ""
    return Session(
        instructions, json.dumps(tools, ensure_ascii=False, separators=(",", ":")), results
    )


# --------------------------------------------------------------------------------------
# Verifying what gcfkit delivered
# --------------------------------------------------------------------------------------


def raw_texts(call: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in call["result"].get("content", []) if b.get("type") == "text"]


class Checker:
    """Reads every gcfkit result back as a client does (:func:`gcfkit.traffic.verify.read_back`,
    the one reader ``gcfkit verify`` uses: full GCF decoded with its extensions, relative
    answers applied to the result they name, Python literals rendered back, file reads and
    texts byte for byte), and checks that none is larger than what the server sent. Any
    mismatch is an AssertionError."""

    def __init__(self) -> None:
        from gcfkit import relative

        self.reader = relative.Reader()
        self.checked = 0
        self.named_growth = 0  # results larger than the server's only by their ref= block

    def check(self, label: str, call: dict[str, Any], got: list[str]) -> None:
        from gcfkit import relative, tokens
        from gcfkit.proxy.policy import Policy
        from gcfkit.traffic.verify import GateError, read_back

        raw = raw_texts(call)
        texts = list(got)
        block = None
        if len(texts) == len(raw) + 1 and relative.ref_of(texts[-1]) == texts[-1][4:]:
            block = texts[-1]  # the ref= block naming a result that is not GCF
            texts = texts[:-1]
        before = sum(tokens.count(t) for t in raw)
        after = sum(tokens.count(t) for t in texts)
        assert after <= before, f"{label}: {after} tokens sent for the server's {before}"
        if block is not None and after + tokens.count(block) > before:
            self.named_growth += 1

        def result(blocks: list[str]) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": t} for t in blocks]}

        try:
            read_back(
                result(raw), result(got), self.reader, file_tool=Policy().is_file_tool(call["tool"])
            )
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replay", metavar="SERVER", help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=1, help="sessions per proxy (latency)")
    ap.add_argument("--out", help="also write the markdown report here")
    ap.add_argument("--servers", nargs="*", default=SERVERS)
    ap.add_argument("--only", nargs="*", help="run only these configurations (and no proxy)")
    args = ap.parse_args(argv)
    if args.replay:
        return replay_server(args.replay)

    from gcfkit import tokens

    state = Path(tempfile.mkdtemp(prefix="gcfkit-bench-"))
    cfgs = configs(state, set(args.only) if args.only else None)
    ran = [c for c in cfgs if c.prefix is not None]
    raw: dict[str, dict[str, Session]] = {}
    for cfg in ran:
        raw[cfg.name] = {}
        for server in args.servers:
            runs = [session_or_failure(cfg, server, state) for _ in range(args.reps)]
            first = runs[0]
            for i, res in enumerate(first.calls):
                res.seconds = statistics.median(r.calls[i].seconds for r in runs)
            raw[cfg.name][server] = first
            print(f"  ran {cfg.name:<48} {server}", file=sys.stderr)

    # Every gcfkit result rebuilt by a reader; failures are assertion errors, not footnotes.
    checked = 0
    growth: dict[str, int] = {}
    for cfg in ran:
        if not cfg.gcfkit:
            continue
        growth[cfg.name] = 0
        for server in args.servers:
            checker = Checker()
            for i, call in enumerate(corpus_calls(server)):
                res = raw[cfg.name][server].calls[i]
                assert res.texts is not None, f"{cfg.name}: {server}/{i:03d} failed ({res.error})"
                checker.check(f"{cfg.name}: {server}/{i:03d} {call['tool']}", call, res.texts)
            checked += checker.checked
            growth[cfg.name] += checker.named_growth

    def count(text: str, enc: str) -> int:
        return tokens.count(text, enc)

    base = raw["no proxy"]
    # tokens[config][server][enc] = (results, instructions + tools)
    totals: dict[str, dict[str, dict[str, tuple[int, int]]]] = {}
    per_call: dict[str, dict[str, list[int]]] = {}
    # per_call_enc[config][server][enc]: each call's result tokens
    per_call_enc: dict[str, dict[str, dict[str, list[int]]]] = {}
    failures: dict[str, list[str]] = {}
    for cfg in ran:
        totals[cfg.name], per_call[cfg.name], failures[cfg.name] = {}, {}, []
        per_call_enc[cfg.name] = {}
        for server in args.servers:
            sess = raw[cfg.name][server]
            calls_enc: dict[str, list[int]] = {}
            per_enc: dict[str, tuple[int, int]] = {}
            for enc in ENCODINGS:
                results = 0
                calls_enc[enc] = []
                for i, res in enumerate(sess.calls):
                    texts = res.texts if res.texts is not None else base[server].calls[i].texts
                    n = sum(count(x, enc) for x in texts or [])
                    results += n
                    calls_enc[enc].append(n)
                fixed = count(sess.instructions, enc) + count(sess.tools, enc)
                per_enc[enc] = (results, fixed)
            totals[cfg.name][server] = per_enc
            per_call[cfg.name][server] = calls_enc["o200k_base"]
            per_call_enc[cfg.name][server] = calls_enc
            failures[cfg.name] += [
                f"{server}/{i:03d} {r.error}" for i, r in enumerate(sess.calls) if r.texts is None
            ]

    def total(name: str, enc: str, servers: list[str] | None = None) -> int:
        return sum(sum(totals[name][s][enc]) for s in servers or args.servers)

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
        '_since*: the agent adds `"_since"` naming the ref it was shown to every repeated '
        "call (the corpus's `repeat_of`); the others never do (no other proxy shows a ref)."
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
                "answers as a diff against a call with other arguments, which `_since` does not "
                f"allow (the interface); without those two, gcfkit {g - files - others:,} "
                f"against terse --diff {t:,} ({rest:+,})."
            )

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
