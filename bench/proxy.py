#!/usr/bin/env python3
"""Benchmark: what the model reads through each MCP proxy, on the 92 recorded corpus calls.

Every recorded server session in ``../shared/corpus/mcp`` is re-run live over stdio with the
official MCP SDK client, through each proxy in turn. The servers themselves are replayed: a
small stdio server (this file with ``--replay SERVER``) answers ``initialize``,
``tools/list`` and each ``tools/call`` with exactly what the real server sent when the
corpus was captured (the real servers' results depend on repository and clock state that
cannot be rebuilt here; replaying makes every proxy see byte-identical input).

Configurations: no proxy; gcfkit; gcfkit ``--delta``; terse-mcp ``proxy`` and ``proxy
--diff``; gcf-proxy, plain and ``--session --delta --cache`` (all PyPI, bench-only; a proxy
that is not installed is reported as such). Counted: the text blocks of every tools/call
result as the client received them, in cl100k_base and o200k_base (exact, bpe-openai).
Latency: per call round trip minus the no-proxy round trip of the same call (median, p99),
and the gcfkit core's own time per result, in process (median, p99, and on the 45 KB one).

    python bench/proxy.py [--reps N] [--out bench/proxy.md]
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
        {"tool": c.tool, "arguments": c.arguments, "result": c.result}
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


def configs(state: Path) -> list[Config]:
    py = sys.executable
    gcfkit = [py, "-m", "gcfkit.cli", "proxy", "--no-stats", "--time-budget", "5"]
    out = [
        Config("no proxy", []),
        Config("gcfkit", [*gcfkit, "--"]),
        Config("gcfkit --delta", [*gcfkit, "--delta", "--"]),
    ]
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
        out.append(
            Config("gcf-proxy --session --delta --cache", [gcf, "--session", "--delta", "--cache"])
        )
    return out


# --------------------------------------------------------------------------------------
# Running a session
# --------------------------------------------------------------------------------------


@dataclass
class CallResult:
    texts: list[str] | None  # None: the call failed or timed out
    seconds: float
    error: str = ""


def session_or_failure(config: Config, server: str, state: Path) -> list[CallResult]:
    """One session; a proxy that cannot even start counts every call as failed."""
    log = state / f"{config.name.replace(' ', '_')}.{server}.stderr"
    try:
        return asyncio.run(run_session(config, server, log))
    except Exception as e:
        print(
            f"  {config.name} / {server}: session failed ({e!r}); stderr in {log}", file=sys.stderr
        )
        return [CallResult(None, 0.0, "session failed") for _ in corpus_calls(server)]


async def run_session(config: Config, server: str, log: Path) -> list[CallResult]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    assert config.prefix is not None
    command = [*config.prefix, sys.executable, str(Path(__file__).resolve()), "--replay", server]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["PYTHONPATH"] = str(ROOT / "src")
    env.update(config.env)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(ROOT))
    results: list[CallResult] = []
    with open(log, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await asyncio.wait_for(session.initialize(), 60)
            await asyncio.wait_for(session.list_tools(), 60)
            for call in corpus_calls(server):
                started = time.perf_counter()
                try:
                    result = await asyncio.wait_for(
                        session.call_tool(call["tool"], call["arguments"]), CALL_TIMEOUT
                    )
                    texts = [b.text for b in result.content if b.type == "text"]
                    results.append(CallResult(texts, time.perf_counter() - started))
                except Exception as e:  # a proxy that fails a call is reported, not fatal
                    kind = "timeout" if isinstance(e, TimeoutError) else type(e).__name__
                    results.append(CallResult(None, time.perf_counter() - started, kind))
    return results


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
    args = ap.parse_args(argv)
    if args.replay:
        return replay_server(args.replay)

    from gcfkit import tokens

    state = Path(tempfile.mkdtemp(prefix="gcfkit-bench-"))
    cfgs = configs(state)
    raw: dict[str, dict[str, list[CallResult]]] = {}
    for cfg in cfgs:
        if cfg.prefix is None:
            continue
        raw[cfg.name] = {}
        for server in args.servers:
            runs = [session_or_failure(cfg, server, state) for _ in range(args.reps)]
            merged = []
            for i, first in enumerate(runs[0]):
                seconds = statistics.median(r[i].seconds for r in runs)
                merged.append(CallResult(first.texts, seconds, first.error))
            raw[cfg.name][server] = merged
            print(f"  ran {cfg.name:<36} {server}", file=sys.stderr)

    calls = [(s, c) for s in args.servers for c in corpus_calls(s)]
    structured = []
    for _server, call in calls:
        blocks = [
            b.get("text", "") for b in call["result"].get("content", []) if b.get("type") == "text"
        ]
        is_json = bool(blocks) and all(b.lstrip()[:1] in ("{", "[") for b in blocks)
        structured.append(
            is_json and call["tool"] not in FILE_TOOLS and not call["result"].get("isError")
        )

    lines: list[str] = []
    emit = lines.append
    emit(f"# MCP proxy benchmark: {len(calls)} recorded calls, {len(args.servers)} servers\n")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    emit(
        f"Machine: {os.cpu_count()} CPUs, load average {load}; {args.reps} session(s) per proxy.\n"
    )
    emit(
        "Each proxy runs live (SDK client over stdio); the servers are replayed from the corpus "
        "(their repository and clock state cannot be rebuilt here), so every proxy sees the "
        "same bytes."
    )
    emit("Tokens of the tools/call text blocks the client received (exact bpe-openai counts).")
    emit("A failed or timed-out call is counted at the no-proxy size and listed below.\n")
    emit(
        "| configuration | cl100k all | o200k all | cl100k structured | o200k structured "
        "| failed calls |"
    )
    emit("|---|---:|---:|---:|---:|---:|")
    totals: dict[str, dict[str, float]] = {}
    failures: dict[str, list[str]] = {}
    base = raw["no proxy"]
    for cfg in cfgs:
        if cfg.prefix is None:
            emit(f"| {cfg.name} | n/a | n/a | n/a | n/a | not run: {cfg.why_not} |")
            continue
        t: dict[str, float] = {}
        fails: list[str] = []
        k = 0
        for server in args.servers:
            for i, res in enumerate(raw[cfg.name][server]):
                texts = res.texts if res.texts is not None else base[server][i].texts or []
                if res.texts is None:
                    fails.append(f"{server}/{i:03d} {res.error}")
                for enc in ENCODINGS:
                    n = sum(tokens.count(x, enc) for x in texts)
                    t[f"{enc} all"] = t.get(f"{enc} all", 0) + n
                    if structured[k]:
                        t[f"{enc} st"] = t.get(f"{enc} st", 0) + n
                k += 1
        totals[cfg.name] = t
        failures[cfg.name] = fails
        emit(
            f"| {cfg.name} | {t['cl100k_base all']:,.0f} | {t['o200k_base all']:,.0f} | "
            f"{t.get('cl100k_base st', 0):,.0f} | {t.get('o200k_base st', 0):,.0f} | {len(fails)} |"
        )
    emit(
        f"\nstructured = JSON text results of non-file tools, not errors ({sum(structured)} calls)."
    )
    for name, fails in failures.items():
        if fails:
            emit(f"- {name}: failed/timed out: {', '.join(fails)}")

    emit("\n## Per call (cl100k_base)\n")
    names = [c.name for c in cfgs if c.prefix is not None]
    emit("| call | " + " | ".join(names) + " |")
    emit("|---|" + "---:|" * len(names))
    for server in args.servers:
        for i, call in enumerate(corpus_calls(server)):
            cells = []
            for name in names:
                res = raw[name][server][i]
                if res.texts is None:
                    cells.append(res.error)
                else:
                    cells.append(str(sum(tokens.count(x, "cl100k_base") for x in res.texts)))
            emit(f"| {server}/{i:03d} {call['tool']} | " + " | ".join(cells) + " |")

    emit("\n## Latency overhead per call (round trip minus no-proxy round trip, ms)\n")
    emit("| configuration | median | p99 |")
    emit("|---|---:|---:|")
    for name in names[1:]:
        deltas = []
        for server in args.servers:
            for i, res in enumerate(raw[name][server]):
                if res.texts is not None:
                    deltas.append((res.seconds - base[server][i].seconds) * 1000)
        if deltas:
            emit(f"| {name} | {statistics.median(deltas):+.2f} | {p99(deltas):+.2f} |")
    per_call, named = core_timings(5)
    emit("\ngcfkit core, in process (from_server per tools/call result, median of 5):")
    emit(
        f"median {statistics.median(per_call):.3f} ms, p99 {p99(per_call):.3f} ms; largest results:"
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
