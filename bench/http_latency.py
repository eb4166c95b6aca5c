"""Latency the HTTP shells add per tool call, on loopback, against the SDK's own HTTP server.

    python bench/http_latency.py [--calls N]

The official SDK client calls ``echo`` (a small text result the proxy leaves alone) and
``orders`` (a 12-record JSON result it rewrites to GCF) ``N`` times each: directly, through
``gcfkit proxy --upstream URL`` (stdio client) and through ``gcfkit proxy --http ... --upstream
URL`` (the gateway). Printed: the median and p90 per call, and the added median against the
direct calls of the same run. The same machine runs everything, so only the differences mean
anything.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_http import connect, gcfkit_http, sdk_server, upstream_params  # noqa: E402


async def timings(target: Any, calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"echo": [], "orders": []}
    async with connect(target, "legacy") as client:
        for name, args in (("echo", {"text": "hi"}), ("orders", {"limit": 12})):
            await client.call_tool(name, args)  # warm: the first call loads the tokenizer
            for _ in range(calls):
                start = time.perf_counter()
                await client.call_tool(name, args)
                out[name].append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with sdk_server() as url, gcfkit_http("--upstream", url) as gateway:
        runs = {
            "direct": asyncio.run(timings(url, args.calls)),
            "--upstream (stdio client)": asyncio.run(timings(upstream_params(url), args.calls)),
            "--http --upstream (gateway)": asyncio.run(timings(gateway, args.calls)),
        }
    base = {k: statistics.median(v) for k, v in runs["direct"].items()}
    print("| path | call | median ms | p90 ms | added median ms |")
    print("|---|---|---:|---:|---:|")
    for path, result in runs.items():
        for call, samples in result.items():
            median = statistics.median(samples)
            p90 = statistics.quantiles(samples, n=10)[-1]
            added = "" if path == "direct" else f"{median - base[call]:+.2f}"
            print(f"| {path} | {call} | {median:.2f} | {p90:.2f} | {added} |")


if __name__ == "__main__":
    main()
