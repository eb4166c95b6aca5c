#!/usr/bin/env python3
"""Benchmark: the proxy under the loads of issue 11, end to end, median of repeated runs.

Each case runs the real ``gcfkit proxy`` (from the ``src`` tree named by ``--src``, so the
same script measures two checkouts) in front of a small stdio server, over pipes:

* ``union``: a tool result of 8,000 records ``{"k<i>": i}`` (134 KB of JSON, 64 M cells of
  GCF); a ping is sent 50 ms after the call. Reported: the ping's latency, the call's, and
  the proxy's peak RSS (and its worker's, when it has one).
* ``dense``: a result of 150,000 uniform records (8.6 MB) with the default 0.5 s budget: the
  call's latency (a real bound returns the original at the deadline) and the ping's.
* ``line64``: one 64 MB result, then a ping: the proxy's peak RSS, and the ping's latency
  against the same server without the proxy.
* ``sdk``: sessions of the official MCP SDK client against a server that lingers after stdin
  closes and has two children: how many processes are left after the client's shutdown.

    python bench/proxy_faults.py [--src DIR] [--reps N] [--cases union,dense,line64,sdk]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SERVER = r"""
import json, os, subprocess, sys, time
mode = sys.argv[1]
if mode == "linger":
    for _ in range(2):
        subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
    with open(sys.argv[2], "a") as f:
        f.write(str(os.getpid()) + "\n")
def text_for(name):
    if name == "union":
        return json.dumps([{f"k{i}": i} for i in range(8000)])
    if name == "dense":
        return json.dumps([{"id": i, "name": f"item {i}", "price": i * 1.5, "ok": i % 2 == 0}
                           for i in range(150000)])
    if name == "line64":
        return json.dumps("x" * (64 * 1024 * 1024))
    return "ok"
# Written ahead, so that what the server takes to answer is only the writing.
ready = {}
def answer(msg_id, name):
    if name not in ready:
        ready[name] = json.dumps({"jsonrpc": "2.0", "id": "@ID@", "result": {"content": [
            {"type": "text", "text": text_for(name)}]}})
    return ready[name].replace('"@ID@"', json.dumps(msg_id), 1)
for name in sys.argv[3:]:
    answer(0, name)
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities":
                  {"tools": {}}, "serverInfo": {"name": "bench", "version": "1"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    elif msg["method"] == "tools/call":
        sys.stdout.write(answer(msg["id"], msg["params"]["name"]) + "\n")
        sys.stdout.flush()
        continue
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
if mode == "linger":
    while True:
        time.sleep(1)
"""


def env(src: Path) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = str(src)
    return out


def proxy(src: Path, *server: str, proxied: bool = True) -> list[str]:
    base = [sys.executable, "-c", SERVER, *server]
    if not proxied:
        return base
    return [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--", *base]


def peak_mb(pid: int) -> float:
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmHWM"):
                return int(row.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(entry.name))
    return out


def call_and_ping(src: Path, tool: str, proxied: bool = True) -> dict[str, float]:
    p = subprocess.Popen(
        proxy(src, "plain", "-", tool, proxied=proxied),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env(src),
    )
    assert p.stdin is not None and p.stdout is not None

    def send(msg: dict[str, Any]) -> None:
        assert p.stdin is not None
        p.stdin.write(json.dumps(msg).encode() + b"\n")
        p.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "ping"})
        p.stdout.readline()  # the server has its answer ready
        time.sleep(2.0)  # the tokenizer (or the worker) is loaded
        started = time.perf_counter()
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": {}},
            }
        )
        time.sleep(0.05)
        pinged = time.perf_counter()
        send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        got: dict[int, float] = {}
        while len(got) < 2:
            line = p.stdout.readline()
            if not line:
                break
            got[json.loads(line)["id"]] = time.perf_counter()
        out = {
            "call_s": got[1] - started,
            "ping_s": got[2] - pinged,
            "proxy_mb": peak_mb(p.pid),
        }
        for pid in children(p.pid):
            if b"gcfkit.transports.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out["worker_mb"] = peak_mb(pid)
        return out
    finally:
        p.stdin.close()
        p.wait(30)


def sdk_orphans(src: Path, sessions: int) -> int:
    """Processes left after ``sessions`` SDK sessions (a lingering server with 2 children)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    left = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(sessions):
            pids = Path(tmp) / f"pids{n}"
            command = proxy(src, "linger", str(pids))
            params = StdioServerParameters(command=command[0], args=command[1:], env=env(src))

            async def session(params: StdioServerParameters = params) -> None:
                with open(os.devnull, "w") as errlog:
                    async with (
                        stdio_client(params, errlog=errlog) as (read, write),
                        ClientSession(read, write) as s,
                    ):
                        await s.initialize()
                        await s.call_tool("t", {})

            asyncio.run(asyncio.wait_for(session(), 60))
            time.sleep(0.5)
            server = int(pids.read_text().split()[0])
            group = [server]
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    try:
                        stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    except (OSError, IndexError):
                        continue
                    if int(stat[2]) == server and stat[0] != "Z" and int(entry.name) != server:
                        group.append(int(entry.name))
            alive = [pid for pid in group if Path(f"/proc/{pid}").exists()]
            left += len(alive)
            for pid in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    return left


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = runs[0].keys()
    return {k: statistics.median(r[k] for r in runs if k in r) for k in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cases", default="union,dense,line64,sdk")
    args = parser.parse_args()
    src = args.src.resolve()
    cases = args.cases.split(",")
    print(f"src: {src}; median of {args.reps} runs")
    for case in ("union", "dense", "line64"):
        if case not in cases:
            continue
        runs = [call_and_ping(src, case) for _ in range(args.reps)]
        row = median_of(runs)
        line = ", ".join(
            f"{k} {v:.3f}" if k.endswith("_s") else f"{k} {v:.0f}" for k, v in row.items()
        )
        direct = median_of([call_and_ping(src, case, proxied=False) for _ in range(args.reps)])
        print(
            f"{case}: {line} (without the proxy: call_s {direct['call_s']:.3f}, "
            f"ping_s {direct['ping_s']:.3f})"
        )
    if "sdk" in cases:
        sessions = max(args.reps, 4)
        print(
            f"sdk: {sdk_orphans(src, sessions)} processes left after {sessions} sessions "
            f"({sessions * 3} started: a lingering server and 2 children each)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
