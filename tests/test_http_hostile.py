"""The HTTP shells against hostile pages, careless exposure and heavy use (issue 21).

* Origin and Host are checked on every bind, loopback or not: a foreign ``Host`` gets 421, a
  foreign ``Origin`` 403, a cross-site ``text/plain`` POST never reaches a server, and the
  gateway forwards the client's ``Origin`` for the upstream to judge.
* The gateway relays only its MCP endpoint (and OAuth discovery), lends its ``--header``
  credential only there, behind its client token when it has one, and refuses to start
  reachable from other machines with a credential to lend and no client token.
* Bounds: sessions and server processes, bytes remembered, idle expiry, unknown session ids
  (404, nothing kept), slow headers, large bodies, many parallel large results.
* Smaller ones: the upstream URL's query string never reaches a client; a server line that
  is not UTF-8, a batch in a session and an id already in flight each end their streams;
  ``gcfkit ui`` bound to every address serves its own address; captures share their
  writer threads.

Every server listens on 127.0.0.1 at a port the OS picks (a server "bound to 0.0.0.0" is
one whose guard is told so: the rules are the guard's); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("uvicorn")
import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from gcfkit.errors import ConfigError
from gcfkit.proxy.config import ProxyConfig
from gcfkit.traffic.capture import WRITER_THREADS, Capture
from gcfkit.transports.http_command import build_command_app
from gcfkit.transports.http_guard import Guard
from gcfkit.transports.http_limits import DEFAULT_LIMITS, HttpLimits, Refusals
from gcfkit.transports.http_listen import listen_socket, uvicorn_config
from gcfkit.transports.http_server import build_gateway
from gcfkit.ui.app import create_app

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ProxyConfig(stats=False, primer=False, time_budget=30.0)
TIMEOUT = 90.0
JSON = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
T = TypeVar("T")

INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"},
    },
}

# A stdio MCP server small enough to read whole: echo, a large result, an answer that is not
# UTF-8, and a call held until another releases it.
TINY_SERVER = r"""
import json, sys
out = sys.stdout.buffer
held = []
def send(obj):
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()
def result(mid, text):
    send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": "2025-11-25",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "tiny", "version": "1"}}})
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments", {})
        if name == "latin1":
            out.write(b'{"jsonrpc":"2.0","id":' + json.dumps(mid).encode()
                      + b',"result":{"content":[{"type":"text","text":"caf\xe9"}]}}\n')
            out.flush()
        elif name == "hold":
            held.append(mid)
        elif name == "release":
            for h in held:
                result(h, "released")
            held.clear()
            result(mid, "ok")
        elif name == "rows":
            result(mid, json.dumps([{"i": i, "name": "row %d" % i, "ok": i % 2 == 0}
                                    for i in range(args["n"])]))
        else:
            result(mid, json.dumps(args))
    else:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
"""


def run(coro_fn: Callable[[], Awaitable[T]], timeout: float = TIMEOUT) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(bounded())


@contextlib.asynccontextmanager
async def serving(
    app: Any, limits: HttpLimits = DEFAULT_LIMITS, refusals: Refusals | None = None
) -> AsyncIterator[str]:
    """``app`` served on loopback by uvicorn as ``--http`` serves it; yields its base URL."""
    sock = listen_socket("127.0.0.1", 0)
    sock.listen(128)
    config = uvicorn_config(app, limits, refusals)
    config.timeout_graceful_shutdown = 5
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(1200):
            if server.started or task.done():
                break
            await asyncio.sleep(0.05)
        if task.done():
            task.result()
        assert server.started, "the server did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)
        sock.close()


def command_app(tmp_path: Path, guard: Guard | None = None) -> Starlette:
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    return build_command_app([sys.executable, str(script)], CONFIG, grace=0.5, guard=guard)


def messages(body: bytes) -> list[Any]:
    """The JSON-RPC messages of a JSON body or of each SSE event."""
    found: list[Any] = []
    for line in body.splitlines():
        data = line[6:] if line.startswith(b"data: ") else line
        if data.startswith((b"{", b"[")):
            found.append(json.loads(data))
    return found


def call(msg_id: Any, name: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


async def open_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    answer = await http.post(url, json=INIT, headers=JSON)
    assert answer.status_code == 200, answer.text
    return {**JSON, "mcp-session-id": answer.headers["mcp-session-id"]}


class Upstream:
    """A Streamable HTTP MCP server stub that records every request it gets: sessions it
    issued (404 for others), ``big`` results of a given size."""

    def __init__(self, lax: bool = False) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.sessions: set[str] = set()
        self.lax = lax  # accepts any session id (it should answer 404)

    def app(self) -> Starlette:
        methods = ["GET", "POST", "DELETE", "OPTIONS", "HEAD"]
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=methods)])

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.seen]

    async def handle(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.seen.append((request.method, request.url.path, headers))
        if request.url.path != "/mcp":
            return Response("the upstream's own page", 200)
        session = headers.get("mcp-session-id")
        if request.method == "DELETE":
            self.sessions.discard(session or "")
            return Response(status_code=200)
        if request.method != "POST":
            return Response(status_code=405)
        msg = json.loads(await request.body())
        if msg.get("method") == "initialize":
            new = f"s{len(self.sessions) + 1}-{time.monotonic_ns()}"
            self.sessions.add(new)
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "stub", "version": "1"}}  # fmt: skip
            body = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
            return JSONResponse(body, headers={"mcp-session-id": new})
        if session is not None and session not in self.sessions and not self.lax:
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32001,
                                 "message": "Session not found"}}, 404)  # fmt: skip
        if "id" not in msg:
            return Response(status_code=202)
        if msg.get("method") == "tools/call":
            n = msg["params"]["arguments"].get("n", 1)
            rows = [{"i": i, "name": f"row {i}"} for i in range(n)]
            content = [{"type": "text", "text": json.dumps(rows)}]
            return JSONResponse({"jsonrpc": "2.0", "id": msg["id"], "result": {"content": content}})
        return JSONResponse({"jsonrpc": "2.0", "id": msg["id"], "result": {}})


@contextlib.asynccontextmanager
async def gateway(
    upstream: Upstream,
    guard: Guard | None = None,
    headers: dict[str, str] | None = None,
    query: str = "",
) -> AsyncIterator[tuple[str, Starlette]]:
    """A gateway in front of ``upstream`` (served too); yields its MCP URL and its app."""
    async with serving(upstream.app()) as base:
        app = build_gateway(f"{base}/mcp{query}", CONFIG, headers=headers, guard=guard)
        async with serving(app) as front:
            yield f"{front}/mcp", app


# -- Origin and Host on every bind ----------------------------------------------------------


@pytest.mark.parametrize("bound", ["127.0.0.1", "0.0.0.0"])
def test_foreign_host_and_origin_are_refused_by_the_command_server(
    tmp_path: Path, bound: str
) -> None:
    app = command_app(tmp_path, Guard(bound))
    modern = {  # a 2026-07-28 request: no handshake, so one POST would run the tool
        **call(1, "echo", x=1),
        "params": {"name": "echo", "arguments": {"x": 1},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
    }  # fmt: skip

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            port = base.rsplit(":", 1)[1]
            rebound = await http.post(
                url, json=INIT, headers={**JSON, "host": f"evil.example:{port}"}
            )
            assert rebound.status_code == 421
            foreign = await http.post(
                url, json=INIT, headers={**JSON, "origin": "http://evil.example"}
            )
            assert foreign.status_code == 403
            # What a page can send without a preflight: text/plain, with or without Origin.
            page = {"content-type": "text/plain", "origin": "http://evil.example"}
            assert (
                await http.post(url, content=json.dumps(modern), headers=page)
            ).status_code == 403
            plain = {"content-type": "text/plain"}
            assert (
                await http.post(url, content=json.dumps(INIT), headers=plain)
            ).status_code == 415
            assert app.state.sessions == {}  # no server process was started
            assert app.state.refusals.counts == {"host": 1, "origin": 2, "content_type": 1}
            # A local page (the MCP Inspector) and a plain client are served.
            local = {**JSON, "origin": "http://localhost:6274"}
            assert (await http.post(url, json=INIT, headers=local)).status_code == 200

    run(scenario)


@pytest.mark.parametrize("bound", ["127.0.0.1", "0.0.0.0"])
def test_foreign_host_and_origin_never_reach_the_upstream_through_the_gateway(bound: str) -> None:
    upstream = Upstream()

    async def scenario() -> None:
        async with (
            gateway(upstream, Guard(bound)) as (url, _),
            httpx2.AsyncClient(timeout=30) as http,
        ):
            port = url.split(":")[2].split("/")[0]
            rebound = await http.post(
                url, json=INIT, headers={**JSON, "host": f"evil.example:{port}"}
            )
            assert rebound.status_code == 421
            foreign = await http.post(
                url, json=INIT, headers={**JSON, "origin": "http://evil.example"}
            )
            assert foreign.status_code == 403
            assert upstream.seen == []
            # The client's Origin goes on: the upstream judges it as it would directly.
            local = await http.post(
                url, json=INIT, headers={**JSON, "origin": "http://localhost:5173"}
            )
            assert local.status_code == 200
            assert upstream.seen[-1][2].get("origin") == "http://localhost:5173"

    run(scenario)


def test_allow_lists_admit_a_named_host_and_origin(tmp_path: Path) -> None:
    guard = Guard(
        "0.0.0.0",
        allowed_hosts=frozenset({"mcp.example.lan"}),
        allowed_origins=frozenset({"https://app.example"}),
    )
    upstream = Upstream()

    async def scenario() -> None:
        async with gateway(upstream, guard) as (url, _), httpx2.AsyncClient(timeout=30) as http:
            named = {**JSON, "host": "mcp.example.lan:8765", "origin": "https://app.example"}
            assert (await http.post(url, json=INIT, headers=named)).status_code == 200
            other = {**JSON, "host": "mcp.example.lan", "origin": "https://other.example"}
            assert (await http.post(url, json=INIT, headers=other)).status_code == 403

    run(scenario)


# -- the gateway's credential ------------------------------------------------------------------


def test_the_gateway_lends_its_credential_only_to_its_mcp_endpoint() -> None:
    upstream = Upstream()
    lent = {"Authorization": "Bearer lent-token"}

    async def scenario() -> None:
        async with (
            gateway(upstream, headers=lent) as (url, _),
            httpx2.AsyncClient(timeout=30) as http,
        ):
            base = url.rsplit("/", 1)[0]
            assert (await http.get(f"{base}/admin/users")).status_code == 404
            assert (await http.post(f"{base}/admin", json={}, headers=JSON)).status_code == 404
            # An <img> on a page elsewhere: no Origin, a loopback Host, the browser's marks.
            img = {"accept": "image/*", "sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}
            assert (await http.get(url, headers=img)).status_code == 403
            assert upstream.seen == []
            # OAuth discovery passes, without the credential.
            await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")
            assert upstream.seen[-1][1] == "/.well-known/oauth-protected-resource/mcp"
            assert "authorization" not in upstream.seen[-1][2]
            assert (await http.post(url, json=INIT, headers=JSON)).status_code == 200
            assert upstream.seen[-1][2]["authorization"] == "Bearer lent-token"

    run(scenario)


def test_a_client_token_stands_before_the_lent_credential() -> None:
    upstream = Upstream()
    guard = Guard("0.0.0.0", client_token="client-secret")
    lent = {"Authorization": "Bearer lent-token"}

    async def scenario() -> None:
        async with (
            gateway(upstream, guard, lent) as (url, app),
            httpx2.AsyncClient(timeout=30) as http,
        ):
            bare = await http.post(url, json=INIT, headers=JSON)
            assert bare.status_code == 401 and "bearer" in bare.headers["www-authenticate"].lower()
            wrong = {**JSON, "authorization": "Bearer lent-token"}
            assert (await http.post(url, json=INIT, headers=wrong)).status_code == 401
            assert upstream.seen == []
            right = {**JSON, "authorization": "Bearer client-secret"}
            assert (await http.post(url, json=INIT, headers=right)).status_code == 200
            assert upstream.seen[-1][2]["authorization"] == "Bearer lent-token"
            assert app.state.refusals.counts["unauthorized"] == 2

    run(scenario)


def test_an_exposed_gateway_with_a_credential_to_lend_and_no_client_token_does_not_start() -> None:
    lent = {"Authorization": "Bearer t"}
    with pytest.raises(ConfigError, match="--client-token"):
        build_gateway("http://127.0.0.1:9/mcp", CONFIG, headers=lent, guard=Guard("0.0.0.0"))
    # The command line says so before it binds anything.
    done = subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--http", "0.0.0.0:0",
         "--upstream", "http://127.0.0.1:9/mcp", "--header", "Authorization: Bearer t"],
        capture_output=True, text=True, timeout=120, cwd=str(ROOT),
    )  # fmt: skip
    assert done.returncode != 0 and "--client-token" in done.stderr
    # With a client token, or without a credential to lend, it may.
    build_gateway(
        "http://127.0.0.1:9/mcp", CONFIG, headers=lent, guard=Guard("0.0.0.0", client_token="c")
    )
    build_gateway("http://127.0.0.1:9/mcp", CONFIG, guard=Guard("0.0.0.0"))


# -- sessions, memory, bodies, slow clients ---------------------------------------------------


def test_made_up_session_ids_get_404_and_keep_nothing(tmp_path: Path) -> None:
    upstream = Upstream()
    guard = Guard("127.0.0.1", limits=HttpLimits(max_sessions=3))

    async def scenario() -> None:
        async with gateway(upstream, guard) as (url, app), httpx2.AsyncClient(timeout=30) as http:
            real = await open_session(http, url)
            for n in range(20):
                fake = {**JSON, "mcp-session-id": f"made-up-{n}"}
                answer = await http.post(url, json=call(2, "t"), headers=fake)
                assert answer.status_code == 404
            assert list(app.state.sessions) == [real["mcp-session-id"]]
            assert (await http.post(url, json=call(3, "t"), headers=real)).status_code == 200
            assert app.state.refusals.counts["unknown_session"] == 20

    run(scenario)
    command = command_app(tmp_path)

    async def on_the_command_server() -> None:
        async with serving(command) as base, httpx2.AsyncClient(timeout=30) as http:
            fake = {**JSON, "mcp-session-id": "made-up"}
            assert (
                await http.post(f"{base}/mcp", json=call(2, "t"), headers=fake)
            ).status_code == 404
            assert command.state.sessions == {}

    run(on_the_command_server)


def test_made_up_ids_an_upstream_accepts_never_push_a_real_session_out() -> None:
    upstream = Upstream(lax=True)
    guard = Guard("127.0.0.1", limits=HttpLimits(max_sessions=2))

    async def scenario() -> None:
        async with gateway(upstream, guard) as (url, app), httpx2.AsyncClient(timeout=30) as http:
            real = await open_session(http, url)
            for n in range(10):
                fake = {**JSON, "mcp-session-id": f"made-up-{n}"}
                assert (await http.post(url, json=call(2, "t"), headers=fake)).status_code == 200
            assert real["mcp-session-id"] in app.state.sessions
            assert len(app.state.sessions) == 2

    run(scenario)


def test_a_session_the_upstream_knows_is_kept_after_a_gateway_restart() -> None:
    upstream = Upstream()

    async def scenario() -> None:
        async with serving(upstream.app()) as base, httpx2.AsyncClient(timeout=30) as http:
            first = build_gateway(f"{base}/mcp", CONFIG)
            async with serving(first) as front:
                session = await open_session(http, f"{front}/mcp")
            second = build_gateway(f"{base}/mcp", CONFIG)  # the gateway restarted
            async with serving(second) as front:
                answer = await http.post(f"{front}/mcp", json=call(2, "t"), headers=session)
                assert answer.status_code == 200
                assert list(second.state.sessions) == [session["mcp-session-id"]]

    run(scenario)


def test_the_gateway_bounds_the_bytes_it_remembers_and_forgets_idle_sessions() -> None:
    upstream = Upstream()
    limits = HttpLimits(remembered_bytes=60_000)
    idle = HttpLimits(idle_timeout=0.4)

    async def scenario() -> None:
        guard = Guard("127.0.0.1", limits=limits)
        async with gateway(upstream, guard) as (url, app), httpx2.AsyncClient(timeout=30) as http:
            sessions = [await open_session(http, url) for _ in range(4)]
            for n, session in enumerate(sessions):
                answer = await http.post(url, json=call(n + 5, "big", n=1000), headers=session)
                assert answer.status_code == 200 and messages(answer.content)[0]["result"]
                assert app.state.sessions.bytes <= limits.remembered_bytes
            assert len(app.state.sessions) < 4  # the least recently used went first
            assert sessions[-1]["mcp-session-id"] in app.state.sessions
        guard = Guard("127.0.0.1", limits=idle)
        async with gateway(upstream, guard) as (url, app), httpx2.AsyncClient(timeout=30) as http:
            await open_session(http, url)
            for _ in range(300):  # idle expiry: a bounded wait
                if len(app.state.sessions) == 0:
                    break
                await asyncio.sleep(0.1)
            assert len(app.state.sessions) == 0

    run(scenario)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_command_server_bounds_its_server_processes(tmp_path: Path) -> None:
    app = command_app(tmp_path, Guard("127.0.0.1", limits=HttpLimits(max_processes=2)))

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            first = await open_session(http, url)
            await open_session(http, url)
            third = await http.post(url, json=INIT, headers=JSON)
            assert third.status_code == 503 and "too many sessions" in third.text
            assert third.json()["id"] == 1
            assert len(app.state.sessions) == 2
            assert (await http.delete(url, headers=first)).status_code == 200
            await open_session(http, url)  # room again

    run(scenario)


def test_idle_sessions_of_the_command_server_stop_their_processes(tmp_path: Path) -> None:
    app = command_app(tmp_path, Guard("127.0.0.1", limits=HttpLimits(idle_timeout=0.4)))

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=30) as http:
            await open_session(http, f"{base}/mcp")
            pids = [s.process.pid for s in app.state.sessions.values()]
            for _ in range(300):  # bounded waits
                if not app.state.sessions and not any(_running(p) for p in pids):
                    break
                await asyncio.sleep(0.1)
            assert app.state.sessions == {} and not any(_running(p) for p in pids)

    run(scenario)


def test_slow_headers_are_cut_off() -> None:
    limits = HttpLimits(header_timeout=0.5)
    refusals = Refusals()
    upstream = Upstream()

    async def scenario() -> None:
        async with serving(upstream.app(), limits, refusals) as base:
            port = int(base.rsplit(":", 1)[1])
            trickles = []
            for _ in range(5):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
                await writer.drain()
                trickles.append((reader, writer))
            for reader, writer in trickles:
                assert await asyncio.wait_for(reader.read(), 30) == b""  # closed by the server
                writer.close()
            assert refusals.counts["header_timeout"] == 5
            async with httpx2.AsyncClient(timeout=30) as http:  # real clients still served
                assert (await http.post(f"{base}/mcp", json=INIT, headers=JSON)).status_code == 200

    run(scenario)


def _status(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


def test_large_bodies_are_refused_before_they_are_read(tmp_path: Path) -> None:
    limits = HttpLimits(max_body_bytes=64 * 1024)
    app = command_app(tmp_path, Guard("127.0.0.1", limits=limits))

    async def scenario() -> None:
        async with serving(app, limits) as base:
            port = int(base.rsplit(":", 1)[1])
            # Announced: answered at once, not a byte of the 1 GiB read.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1073741824\r\n\r\n"
            )
            await writer.drain()
            assert _status(await asyncio.wait_for(reader.readline(), 30)) == 413
            writer.close()
            # Chunked: refused once the bytes read pass the bound.
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"[" + b" " * 16382 + b"]"
            for _ in range(6):
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()
            assert _status(await asyncio.wait_for(reader.readline(), 30)) == 413
            writer.close()
            assert app.state.refusals.counts["body_too_large"] == 2
            assert app.state.sessions == {}

    run(scenario)


def test_many_sessions_with_large_results_in_parallel_are_all_answered(tmp_path: Path) -> None:
    app = command_app(tmp_path)

    async def one(http: httpx2.AsyncClient, url: str, n: int) -> None:
        session = await open_session(http, url)
        for k in range(3):
            answer = await http.post(url, json=call(10 + k, "rows", n=2000 + n), headers=session)
            got = messages(answer.content)
            assert got[-1]["id"] == 10 + k and "result" in got[-1]
            text = got[-1]["result"]["content"][0]["text"]
            assert f"row {1999 + n}" in text  # the whole result, in whichever format

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=120) as http:
            url = f"{base}/mcp"
            await asyncio.gather(*(one(http, url, n) for n in range(6)))

    run(scenario, timeout=240)


# -- the smaller ones -------------------------------------------------------------------------


def test_the_upstream_urls_query_string_never_reaches_a_client() -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}/mcp?api_key=s3cret"
    app = build_gateway(url, CONFIG)

    async def scenario() -> None:
        async with serving(app) as front, httpx2.AsyncClient(timeout=30) as http:
            ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
            answer = await http.post(f"{front}/mcp", json=ping, headers=JSON)
            assert answer.status_code == 502
            message = answer.json()["error"]["message"]
            assert "unreachable" in message and "s3cret" not in message and "?…" in message
            get = await http.get(f"{front}/mcp", headers={"accept": "text/event-stream"})
            assert get.status_code == 502 and "s3cret" not in get.text

    run(scenario)
    # The stdio side (--upstream URL) says the same without the key.
    request = json.dumps(INIT).encode() + b"\n"
    done = subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--upstream", url],
        input=request, capture_output=True, timeout=120, cwd=str(ROOT),
    )  # fmt: skip
    answer = json.loads(done.stdout.splitlines()[0])
    assert "unreachable" in answer["error"]["message"]
    assert b"s3cret" not in done.stdout and b"s3cret" not in done.stderr


def test_an_answer_that_is_not_utf8_ends_its_stream(tmp_path: Path) -> None:
    app = command_app(tmp_path)

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            session = await open_session(http, url)
            answer = await asyncio.wait_for(
                http.post(url, json=call(7, "latin1"), headers=session), 60
            )
            assert b"caf\xe9" in answer.content  # delivered as the server wrote it
            assert b'"id":7' in answer.content
            # The same on the shared process of the 2026-07-28 protocol (no session).
            modern = {**JSON, "mcp-protocol-version": "2026-07-28"}
            sent = http.post(url, json=call(8, "latin1"), headers=modern)
            shared = await asyncio.wait_for(sent, 60)
            assert b"caf\xe9" in shared.content and b'"id":8' in shared.content

    run(scenario)


def test_a_batch_in_a_session_gets_its_answers(tmp_path: Path) -> None:
    app = command_app(tmp_path)

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            session = await open_session(http, url)
            batch = [
                {"jsonrpc": "2.0", "id": 20, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                call(21, "echo", x=1),
            ]
            answer = await asyncio.wait_for(http.post(url, json=batch, headers=session), 60)
            assert answer.status_code == 200
            assert sorted(m["id"] for m in messages(answer.content)) == [20, 21]
            only = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
            assert (await http.post(url, json=only, headers=session)).status_code == 202

    run(scenario)


def test_an_id_already_in_flight_is_refused_and_the_first_stream_ends(tmp_path: Path) -> None:
    app = command_app(tmp_path)

    async def scenario() -> None:
        async with serving(app) as base, httpx2.AsyncClient(timeout=30) as http:
            url = f"{base}/mcp"
            session = await open_session(http, url)
            async with http.stream("POST", url, json=call(7, "hold"), headers=session) as first:
                again = await http.post(url, json=call(7, "echo"), headers=session)
                assert again.status_code == 409 and again.json()["id"] == 7
                release = await http.post(url, json=call(8, "release"), headers=session)
                assert messages(release.content)[-1]["id"] == 8
                body = await asyncio.wait_for(first.aread(), 60)
            got = messages(body)
            assert got[-1]["id"] == 7
            assert got[-1]["result"]["content"][0]["text"] == "released"

    run(scenario)


def test_the_ui_bound_to_every_address_serves_its_own_address() -> None:
    app = create_app(ledger=None, bound="0.0.0.0")
    own = TestClient(app, base_url="http://192.0.2.7:8711")  # the address the client used
    assert own.get("/api/info").status_code == 200
    assert own.get("/api/info", headers={"host": "evil.example:8711"}).status_code == 400
    named = TestClient(
        create_app(ledger=None, bound="ui.example.lan"), base_url="http://ui.example.lan"
    )
    assert named.get("/api/info").status_code == 200


def test_captures_share_a_few_writer_threads(tmp_path: Path) -> None:
    def writers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "gcfkit-capture")

    before = writers()
    captures = [Capture(tmp_path / "cap", f"s{n}") for n in range(40)]
    request = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{}}}\n'
    )
    response = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"[1]"}]}}\n'
    for capture in captures:
        capture.to_server(request)
        capture.from_server(response)
    assert writers() <= max(before, WRITER_THREADS)
    for capture in captures:
        capture.close()
    assert all(c.path is not None and (c.path / "000_t.json").exists() for c in captures)
    assert writers() <= max(before, WRITER_THREADS)


def test_the_limits_have_safe_defaults() -> None:
    limits = DEFAULT_LIMITS
    assert limits.max_processes <= 64 and limits.max_body_bytes <= 64 * 2**20
    assert limits.header_timeout <= 30 and limits.remembered_bytes <= 2**30
    with pytest.raises(ValueError):
        dataclasses.replace(limits, max_sessions=0)
