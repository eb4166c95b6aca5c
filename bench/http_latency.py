"""Latency the HTTP shells add per tool call, on loopback, against the SDK's own HTTP server.

    python bench/http_latency.py [--calls N] [--kind stateful|json|stateless]

The official SDK client calls ``echo`` (a small text result the proxy leaves alone) and
``orders`` (a 12-record JSON result it rewrites to GCF) ``N`` times each through four
paths, in turn (one call on each path, then the next round), so that the load of a shared
machine falls on all of them alike:

* ``direct``: the client to the server;
* ``bare relay``: a minimal starlette + httpx2 pass-through (no proxy logic): what any
  Python HTTP hop costs here, the floor for the gateway;
* ``--upstream``: the client on stdio, ``gcfkit proxy --upstream URL``;
* ``gateway``: ``gcfkit proxy --http 127.0.0.1:0 --upstream URL``.

Printed: the median per call and the median of the per-round differences against
``direct``. Only the differences mean anything; quote medians of several runs.

A second table does the same for a client that keeps its connection alive (plain
JSON-RPC POSTs over one httpx2 connection, each response read to its end), for the HTTP
paths. The SDK client opens a connection per call, which hides what a server socket without
TCP_NODELAY costs a keep-alive client (Nagle and delayed ACK: some 40 ms a call).

    python bench/http_latency.py --during-encode N [--rounds R]

measures what a large result costs everyone else: one client calls ``orders(N)`` (N=10000:
5.3 MB of JSON, rewritten to GCF) while the same session pings every 20 ms and a second
session calls ``orders(12)``, directly and through the gateway (default time budget,
0.5 s). Printed per path: the median and largest ping latency while the large call was in
flight, the second session's call, the large call itself and what it came back as.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.http_support import (  # noqa: E402
    connect,
    env,
    gcfkit_http,
    read_line,
    sdk_server,
    stop_process,
    upstream_params,
)

_HOP_BY_HOP = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


def bare_relay(upstream: str) -> None:
    """Serve a pass-through to ``upstream`` (the reference hop); prints ``serving URL``."""
    import httpx2
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    from gcfkit.transports.http_server import listen_socket

    clients: list[httpx2.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx2.AsyncClient(timeout=30) as http:
            clients.append(http)
            yield

    async def relay(request: Request) -> Response:
        http = clients[0]
        headers = [(k, v) for k, v in request.headers.items() if k not in _HOP_BY_HOP]
        sent = http.build_request(
            request.method, upstream, content=await request.body(), headers=headers
        )
        answer = await http.send(sent, stream=True)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.aiter_raw():
                    yield chunk
            finally:
                await answer.aclose()

        response = StreamingResponse(body(), status_code=answer.status_code)
        skip = _HOP_BY_HOP | {"content-encoding"}
        response.raw_headers.extend(
            (k.encode(), v.encode()) for k, v in answer.headers.multi_items() if k not in skip
        )
        return response

    path = httpx2.URL(upstream).path
    app = Starlette(
        routes=[Route(path, relay, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )
    sock = listen_socket("127.0.0.1", 0)
    print(f"serving http://127.0.0.1:{sock.getsockname()[1]}{path}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


@contextlib.contextmanager
def bare_relay_process(upstream: str) -> Any:
    process = subprocess.Popen(
        [sys.executable, __file__, "--bare-relay", upstream],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env(),
    )
    try:
        assert process.stderr is not None
        yield read_line(process.stderr, r"serving (http://\S+)", 60).group(1)
    finally:
        stop_process(process)


async def rounds(targets: dict[str, Any], calls: int) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(connect(target, "legacy"))
            for name, target in targets.items()
        }
        for tool, args in (("echo", {"text": "hi"}), ("orders", {"limit": 12})):
            out[tool] = {name: [] for name in clients}
            for client in clients.values():
                await client.call_tool(tool, args)  # warm: the first call loads the tokenizer
            for _ in range(calls):
                for name, client in clients.items():
                    start = time.perf_counter()
                    await client.call_tool(tool, args)
                    out[tool][name].append((time.perf_counter() - start) * 1000)
    return out


_ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def keepalive_rounds(urls: dict[str, str], calls: int) -> dict[str, dict[str, list[float]]]:
    """Per tool and path, the ms of each call by a client on one kept-alive connection."""
    import httpx2

    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    out: dict[str, dict[str, list[float]]] = {}
    with httpx2.Client(timeout=30) as http:
        headers: dict[str, dict[str, str]] = {}
        for name, url in urls.items():
            answer = http.post(url, json=init, headers=_ACCEPT)
            session = answer.headers.get("mcp-session-id")
            headers[name] = {**_ACCEPT, **({"mcp-session-id": session} if session else {})}
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            http.post(url, json=done, headers=headers[name])
        for tool, args in (("echo", {"text": "hi"}), ("orders", {"limit": 12})):
            out[tool] = {name: [] for name in urls}
            for n in range(calls + 1):
                for name, url in urls.items():
                    call = {
                        "jsonrpc": "2.0",
                        "id": n + 1,
                        "method": "tools/call",
                        "params": {"name": tool, "arguments": args},
                    }
                    start = time.perf_counter()
                    http.post(url, json=call, headers=headers[name]).read()
                    if n:  # the first round warms up (the tokenizer loads)
                        out[tool][name].append((time.perf_counter() - start) * 1000)
    return out


def table(result: dict[str, dict[str, list[float]]]) -> None:
    print("| path | call | median ms | added median ms |")
    print("|---|---|---:|---:|")
    for tool, paths in result.items():
        base_samples = paths["direct"]
        for path, samples in paths.items():
            added = [s - b for s, b in zip(samples, base_samples, strict=True)]
            shown = "" if path == "direct" else f"{statistics.median(added):+.2f}"
            print(f"| {path} | {tool} | {statistics.median(samples):.2f} | {shown} |")


async def _session(http: Any, url: str) -> dict[str, str]:
    """Headers of a new initialized session at ``url`` (none for a stateless server)."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    answer = await http.post(url, json=init, headers=_ACCEPT)
    await answer.aread()
    session = answer.headers.get("mcp-session-id")
    headers = {**_ACCEPT, **({"mcp-session-id": session} if session else {})}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await (await http.post(url, json=done, headers=headers)).aread()
    return headers


def _answer_text(body: bytes) -> str:
    """The first text block of the tools/call answer in a JSON or SSE body."""
    import json

    for line in body.splitlines():
        data = line[6:] if line.startswith(b"data: ") else line
        if data.startswith(b"{") and b'"result"' in data:
            text: str = json.loads(data)["result"]["content"][0]["text"]
            return text
    return ""


async def during_encode(url: str, size: int) -> dict[str, Any]:
    """One round of the ``--during-encode`` measurement against ``url``."""
    import httpx2

    limits = httpx2.Limits(max_connections=8)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as http:
        a = await _session(http, url)
        b = await _session(http, url)

        def call(n: int, tool: str, args: dict[str, Any]) -> dict[str, Any]:
            params = {"name": tool, "arguments": args}
            return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}

        warm = await http.post(url, json=call(1, "orders", {"limit": 12}), headers=b)
        await warm.aread()

        async def timed(body: dict[str, Any], headers: dict[str, str]) -> tuple[float, bytes]:
            start = time.perf_counter()
            answer = await http.post(url, json=body, headers=headers)
            content = await answer.aread()
            return (time.perf_counter() - start) * 1000, content

        big = asyncio.create_task(timed(call(2, "orders", {"limit": size}), a))

        async def meanwhile(make: Any, headers: dict[str, str]) -> list[float]:
            """Each request sent, one after another (20 ms apart), while ``big`` runs."""
            seen: list[float] = []
            n = 100
            while not big.done():
                n += 1
                seen.append((await timed(make(n), headers))[0])
                if not big.done():
                    await asyncio.sleep(0.02)
            return seen

        pings, others = await asyncio.gather(
            meanwhile(lambda n: {"jsonrpc": "2.0", "id": n, "method": "ping"}, a),
            meanwhile(lambda n: call(n, "orders", {"limit": 12}), b),
        )
        big_ms, body = await big
    text = _answer_text(body)
    form = "GCF" if text.startswith("GCF") else "JSON" if text.startswith(("[", "{")) else "?"
    return {"pings": pings, "other": others, "big": big_ms, "form": form, "size": len(text)}


def during_encode_table(results: dict[str, list[dict[str, Any]]]) -> None:
    print(
        "| path | pings: median ms | pings: max ms | other session's calls: median ms | "
        "max ms | large call ms |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for path, rounds in results.items():
        row = [path]
        for what in ("pings", "other"):
            row.append(f"{statistics.median(x for r in rounds for x in r[what]):.1f}")
            row.append(f"{statistics.median(max(r[what]) for r in rounds):.1f}")
        big = statistics.median(r["big"] for r in rounds)
        forms = "/".join(sorted({r["form"] for r in rounds}))
        print("| " + " | ".join(row) + f" | {big:.0f} ({forms}) |")
    print("\n(max: the median over the rounds of each round's slowest)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--during-encode", type=int, metavar="N", default=0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kind", default="stateful", choices=["stateful", "json", "stateless"])
    parser.add_argument("--bare-relay", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_relay:
        bare_relay(args.bare_relay)
        return
    if args.during_encode:
        with sdk_server() as base:
            url = f"{base}/{args.kind}/mcp"
            with gcfkit_http("--time-budget", "0.5", "--upstream", url) as gateway:
                found: dict[str, list[dict[str, Any]]] = {"direct": [], "gateway": []}
                for _ in range(args.rounds):
                    for name, target in (("direct", url), ("gateway", gateway)):
                        found[name].append(asyncio.run(during_encode(target, args.during_encode)))
        print(f"server: the SDK's, {args.kind}; orders({args.during_encode}), {args.rounds} rounds")
        during_encode_table(found)
        return
    with sdk_server() as base:
        url = f"{base}/{args.kind}/mcp"
        with bare_relay_process(url) as bare, gcfkit_http("--upstream", url) as gateway:
            targets = {
                "direct": url,
                "bare relay": bare,
                "--upstream (stdio client)": upstream_params(url),
                "--http --upstream (gateway)": gateway,
            }
            result = asyncio.run(rounds(targets, args.calls))
            http_paths = {"direct": url, "bare relay": bare, "gateway": gateway}
            kept = keepalive_rounds(http_paths, args.calls)
    print(f"server: the SDK's, {args.kind}; {args.calls} calls per path and tool")
    print("\nThe SDK client (a connection per call):\n")
    table(result)
    print("\nA keep-alive client (one connection, every response read to its end):\n")
    table(kept)


if __name__ == "__main__":
    main()
