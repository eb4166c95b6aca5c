#!/usr/bin/env python3
"""Benchmark: the latency each MCP proxy adds to a tool result, over stdio, 1 KB to 10 MB.

    python bench/proxy_latency.py [--rounds N] [--big-rounds N] [--out bench/proxy_latency.md]

A small stdio MCP server (this file with ``--serve``) answers one tool, ``fetch(size, shape)``,
with a fixed JSON text in one text block: records pretty-printed with ``indent=2``, either
nested orders (a customer object, an items array, tags, an optional coupon) or flat
10-field records (``bench/gen.py``), of about 1 KB, 10 KB, 45 KB, 1 MB and 10 MB. A raw
JSON-RPC client drives, each as its own process with its own copy of the server:

* ``direct``: the server itself;
* ``gcfkit``: ``gcfkit proxy`` with its default flags (the ledger on, the default 0.5 s
  time budget);
* ``terse`` and ``terse --diff``: terse-mcp's proxy;
* ``gcf-proxy``: the Go proxy.

Each path first gets one untimed call of each size (its server makes the text then).
Rounds are interleaved: each round calls every path once, in an order that rotates from
round to round, so that the load of a shared machine falls on all of them alike. Printed
per size and shape: the median of the per-round differences against ``direct`` and their
p99 (the largest difference when there are fewer than 100 rounds), and what the client got
(dense or v3.5.3 GCF, JSON, or the server's text unchanged). A path that gives no answer
within the timeout is marked and left out of the larger sizes.

Per path, too: throughput with 8 calls in flight on the 1 KB nested result (calls per
second over ``--flight-calls`` calls, best of two passes, before the large results), the
resident memory of the proxy's processes (the server's excluded) 1 s after its first answer,
``--idle`` seconds after it (gcfkit's worker, if the first answer started one, exits after
30 s idle) and right after the 10 MB results, and the cold start: from spawning the process
to the first answer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gen  # noqa: E402

SIZES: dict[str, int] = {
    "1 KB": 1_000,
    "10 KB": 10_000,
    "45 KB": 45_000,
    "1 MB": 1_000_000,
    "10 MB": 10_000_000,
}
SHAPES = ("nested", "flat")
BIG = 1_000_000  # from this size on, --big-rounds rounds
LINE_LIMIT = 64 * 1024 * 1024
SELF = str(Path(__file__).resolve())

# --------------------------------------------------------------------------------------
# The server (a subprocess: python bench/proxy_latency.py --serve)
# --------------------------------------------------------------------------------------


def result_text(size: str, shape: str) -> str:
    """Records of ``shape``, pretty-printed, their text about ``SIZES[size]`` bytes long."""
    make = gen.nested if shape == "nested" else gen.flat
    want = SIZES[size]
    sample = make(target=20_000)
    pretty = len(json.dumps(sample, indent=2, ensure_ascii=False))
    compact = len(json.dumps(sample, separators=(",", ":"), ensure_ascii=False))
    return json.dumps(make(target=max(200, want * compact // pretty)), indent=2, ensure_ascii=False)


def serve() -> int:
    texts: dict[tuple[str, str], str] = {}
    out = sys.stdout

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg, ensure_ascii=False) + "\n")
        out.flush()

    tool = {
        "name": "fetch",
        "description": "Records of a given size and shape.",
        "inputSchema": {
            "type": "object",
            "properties": {"size": {"type": "string"}, "shape": {"type": "string"}},
            "required": ["size", "shape"],
        },
    }
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "latency-bench", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [tool]}
        elif method == "tools/call":
            args = msg["params"]["arguments"]
            key = (args["size"], args["shape"])
            if key not in texts:
                texts[key] = result_text(*key)
            result = {"content": [{"type": "text", "text": texts[key]}]}
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": method}})
            continue
        send({"jsonrpc": "2.0", "id": msg_id, "result": result})
    return 0


# --------------------------------------------------------------------------------------
# The paths and a raw JSON-RPC client
# --------------------------------------------------------------------------------------


@dataclass
class Proxy:
    name: str
    prefix: list[str] | None  # None: not installed here
    env: dict[str, str] = field(default_factory=dict)


def paths(state: Path) -> list[Proxy]:
    bindir = Path(sys.executable).parent
    out = [
        Proxy("direct", []),
        Proxy("gcfkit", [sys.executable, "-m", "gcfkit.cli", "proxy", "--"]),
    ]
    terse = shutil.which("terse", path=str(bindir)) or shutil.which("terse")
    if terse is None:
        out += [Proxy("terse", None), Proxy("terse --diff", None)]
    else:
        from proxy import tiktoken_cache  # bench/proxy.py: terse's tokenizer files, offline

        env = {"XDG_STATE_HOME": str(state / "xdg"), "HOME": str(state)}
        if cache := tiktoken_cache():
            env["TIKTOKEN_CACHE_DIR"] = cache
        out.append(Proxy("terse", [terse, "proxy", "--"], env))
        out.append(Proxy("terse --diff", [terse, "proxy", "--diff", "--"], env))
    gcf = shutil.which("gcf-proxy", path=str(bindir)) or shutil.which("gcf-proxy")
    out.append(Proxy("gcf-proxy", None if gcf is None else [gcf]))
    return out


class Client:
    """One path's process: JSON-RPC requests over its stdin, answers matched by id."""

    def __init__(self, path: Proxy, state: Path) -> None:
        self.path = path
        self.state = state
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None
        self.dead = ""

    async def start(self) -> float:
        """Spawn, initialize and make the first call; seconds to that first answer."""
        assert self.path.prefix is not None
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
        env.update(HOME=str(self.state), XDG_STATE_HOME=str(self.state / "xdg"))
        env["PYTHONPATH"] = str(ROOT / "src")
        env.update(self.path.env)
        command = [*self.path.prefix, sys.executable, SELF, "--serve"]
        started = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=str(self.state),
            limit=LINE_LIMIT,
        )
        self.reader = asyncio.create_task(self._read())
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "latency-bench", "version": "1"},
        }
        await self.request("initialize", params, 60)
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await self.call("1 KB", "nested", 60)
        return time.perf_counter() - started

    def _write(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            waiter = self.waiting.pop(msg.get("id"), None) if "id" in msg else None
            if waiter is not None and not waiter.done():
                waiter.set_result(msg)

    async def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.next_id += 1
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = waiter
        self._write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(waiter, timeout)

    async def call(self, size: str, shape: str, timeout: float) -> tuple[float, str]:
        """One tools/call: (seconds, what came back)."""
        started = time.perf_counter()
        msg = await self.request(
            "tools/call", {"name": "fetch", "arguments": {"size": size, "shape": shape}}, timeout
        )
        seconds = time.perf_counter() - started
        texts = [b.get("text", "") for b in msg.get("result", {}).get("content", [])]
        return seconds, kind_of(texts[0] if texts else "")

    def rss_mb(self) -> float:
        """Resident memory of the path's processes, the server's (and its children's) excluded."""
        assert self.proc is not None
        tree = _children()
        total, todo = 0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            if self.path.prefix and _cmdline(pid).split("\0")[1:] == [SELF, "--serve"]:
                continue
            total += _rss_kb(pid)
            todo.extend(tree.get(pid, []))
        return total / 1024

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                _kill_tree(self.proc.pid)
                await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()


def kind_of(text: str) -> str:
    if text.startswith(("GCF-dense", "GCF profile=dense")):  # the header, then and now
        return "dense"
    if text.startswith("GCF"):
        return "GCF"
    if text.startswith(("{", "[")) and "\n" not in text[:200]:
        return "JSON"
    return "text"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").rstrip("\0")
    except OSError:
        return ""


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _kill_tree(pid: int) -> None:
    tree = _children()
    todo = [pid]
    while todo:
        p = todo.pop()
        todo.extend(tree.get(p, []))
        with contextlib.suppress(OSError):
            os.kill(p, 9)


# --------------------------------------------------------------------------------------
# The measurements
# --------------------------------------------------------------------------------------


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def latency(
    clients: list[Client], size: str, shape: str, rounds: int, timeout: float
) -> dict[str, tuple[list[float], set[str]]]:
    """Per path: the per-round differences against direct (ms; for direct itself, its own
    times) and the kinds of answer it gave."""
    got: dict[str, tuple[list[float], set[str]]] = {c.path.name: ([], set()) for c in clients}
    for c in clients:
        # One call first, not timed: each server makes the text of a size once.
        if not c.dead:
            try:
                await c.call(size, shape, timeout)
            except TimeoutError:
                c.dead = f"no answer in {timeout:.0f} s ({size} {shape})"
                await c.stop()
    for r in range(rounds):
        order = clients[r % len(clients) :] + clients[: r % len(clients)]
        seconds: dict[str, float] = {}
        for c in order:
            if c.dead:
                continue
            try:
                seconds[c.path.name], kind = await c.call(size, shape, timeout)
                got[c.path.name][1].add(kind)
            except TimeoutError:
                c.dead = f"no answer in {timeout:.0f} s ({size} {shape})"
                await c.stop()
        base = seconds.get("direct")
        for name, s in seconds.items():
            if base is not None:
                got[name][0].append((s - base if name != "direct" else s) * 1e3)
    return got


async def throughput(client: Client, calls: int) -> float:
    """Calls per second with 8 calls in flight (1 KB nested)."""
    started = time.perf_counter()
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await client.call("1 KB", "nested", 60)

    await asyncio.gather(*(worker() for _ in range(8)))
    return calls / (time.perf_counter() - started)


async def run(args: argparse.Namespace) -> list[str]:
    state = Path(tempfile.mkdtemp(prefix="gcfkit-latency-"))
    all_paths = paths(state)
    clients = [Client(p, state) for p in all_paths if p.prefix is not None]
    missing = [p.name for p in all_paths if p.prefix is None]
    cold: dict[str, float] = {}
    idle: dict[str, float] = {}
    for c in clients:
        cold[c.path.name] = await c.start() * 1e3
        await asyncio.sleep(1.0)
        idle[c.path.name] = c.rss_mb()
    await asyncio.sleep(args.idle)
    rested = {c.path.name: c.rss_mb() for c in clients}
    # Throughput before the large results, which some paths do not survive.
    flight: dict[str, float] = {}
    for _ in range(2):
        for c in clients:
            rate = await throughput(c, args.flight_calls)
            flight[c.path.name] = max(flight.get(c.path.name, 0.0), rate)
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')}: {args.rounds} interleaved rounds per size "
        f"({args.big_rounds} from 1 MB on), timeout {args.timeout:.0f} s per call; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start. "
        + (f"Not installed here: {', '.join(missing)}." if missing else ""),
        "",
        "Added latency per result, median of the paired differences against direct "
        "(p99 in brackets), and what the client got when it is not the server's text: GCF "
        "(v3.5.3), dense (the dense profile) or JSON (compact or re-encoded).",
        "",
    ]
    names = [c.path.name for c in clients if c.path.name != "direct"]
    lines.append("| result | direct | " + " | ".join(names) + " |")
    lines.append("|---|---:|" + "---:|" * len(names))
    for size in args.sizes:
        for shape in args.shapes:
            rounds = args.big_rounds if SIZES[size] >= BIG else args.rounds
            got = await latency(clients, size, shape, rounds, args.timeout)
            direct_ms = statistics.median(got["direct"][0])
            cells = []
            for name in names:
                diffs, kinds = got[name]
                dead = next((c.dead for c in clients if c.path.name == name), "")
                if not diffs:
                    cells.append(dead or "–")
                    continue
                kind = "/".join(sorted(k for k in kinds if k != "text"))
                text = f"+{statistics.median(diffs):,.1f} ({p99(diffs):,.1f})"
                cells.append(text + (f" {kind}" if kind else ""))
            lines.append(f"| {size} {shape} | {direct_ms:,.1f} | " + " | ".join(cells) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
    loaded = {c.path.name: c.rss_mb() for c in clients if not c.dead}
    lines += [
        "",
        "| path | calls/s, 8 in flight (1 KB) | RSS MB 1 s after the first answer "
        f"| RSS MB {args.idle:.0f} s after it | RSS MB after the big results "
        "| cold start to the first answer, ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in clients:
        name = c.path.name
        calls = f"{flight[name]:,.0f}" if name in flight else c.dead
        after = f"{loaded[name]:,.0f}" if name in loaded else "–"
        rest = f"{rested[name]:,.0f}"
        lines.append(
            f"| {name} | {calls} | {idle[name]:,.0f} | {rest} | {after} | {cold[name]:,.0f} |"
        )
    for c in clients:
        await c.stop()
    shutil.rmtree(state, ignore_errors=True)
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--big-rounds", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--flight-calls", type=int, default=1500)
    parser.add_argument("--idle", type=float, default=40.0, help="seconds before the last RSS")
    parser.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--out", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    lines = asyncio.run(run(args))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(
            "# MCP proxy latency over stdio (bench/proxy_latency.py)\n\n" + text, encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
