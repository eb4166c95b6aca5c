"""Streamable HTTP in and out, end to end against real servers: the official SDK's own HTTP
server (stateful, stateless, JSON responses, with a bearer token, with an event store) and
``@modelcontextprotocol/server-everything``, with the SDK's client in legacy and 2026-07-28
modes, through the three shapes:

* ``upstream``: the client on stdio, ``gcfkit proxy --upstream URL`` (a process per client);
* ``gateway``: the client on HTTP, the gateway app (``build_gateway``) on real loopback HTTP,
  in a thread of this process; ``gcfkit proxy --http ... --upstream URL`` as a process where
  the command line itself is under test;
* ``command``: the client on HTTP, ``gcfkit proxy --http 127.0.0.1:0 -- COMMAND``.

The servers are started once per module, all at once (:func:`servers`), and shared by the
tests; a test that kills its server starts its own. Loopback only; every wait is bounded and
every process and thread is stopped by the fixture that started it, so a broken proxy fails
a test instead of hanging or leaking one. Nothing synchronizes by sleeping: the fixture
server waits for its own events to reach the wire (tests/http_fixture_server.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402
from mcp.client.auth import OAuthClientProvider  # noqa: E402
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.auth import (  # noqa: E402
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.auth_utils import check_resource_allowed  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from pydantic import AnyUrl  # noqa: E402

from gcfkit.transports.http import KEEPALIVE_COMMENT  # noqa: E402
from gcfkit.transports.http_server import listen_socket  # noqa: E402
from tests.conformance import GCF_HEADS  # noqa: E402
from tests.http_support import (  # noqa: E402
    ACCEPT,
    CONFORMANCE,
    DEMO,
    FIXTURE,
    INIT,
    NODE,
    Background,
    Progress,
    Servers,
    connect,
    env,
    everything_url,
    exercise,
    free_port,
    gcfkit_http,
    inproc,
    mcp_error,
    run,
    sdk_server,
    servers,
    target_for,
    text,
    upstream_params,
    value,
)

#: The module-scoped fixtures, shared with tests/test_http_offload.py.
__all__ = ["inproc", "servers"]

_DIRECT: dict[tuple[str, str], dict[str, Any]] = {}


# A 2026-07-28 request is one self-contained exchange whatever the server's session setting,
# so stateful and stateless differ only for the handshake; JSON against SSE matters for both.
MATRIX = [
    (kind, mode)
    for kind in ("stateful", "stateless", "json")
    for mode in ("legacy", "2026-07-28")
    if (kind, mode) != ("stateless", "2026-07-28")
]


@pytest.mark.parametrize(("kind", "mode"), MATRIX)
@pytest.mark.parametrize("shape", ["upstream", "gateway"])
def test_sdk_server_through_the_proxy(
    servers: Servers, inproc: Background, shape: str, kind: str, mode: str
) -> None:
    url = servers.url(kind)

    async def through(target: Any) -> dict[str, Any]:
        async with connect(target, mode) as c:
            return await exercise(c)

    if (kind, mode) not in _DIRECT:  # the same for both shapes: asked once
        _DIRECT[kind, mode] = run(lambda: through(url))
    want = _DIRECT[kind, mode]
    got = run(lambda: through(target_for(shape, url, inproc)))
    assert got["orders_text"].startswith(GCF_HEADS)
    assert len(got["orders_text"]) < len(want["orders_text"])
    assert got["orders"] == want["orders"] == json.loads(want["orders_text"])
    assert got["steps"] == want["steps"]
    assert got["echo"] == want["echo"] == "  keep   me  "
    # JSON responses carry no notifications; SSE ones carry them in order.
    expected = [] if kind == "json" else [1.0, 2.0, 3.0, 4.0]
    assert got["progress"] == want["progress"] == expected


@pytest.fixture(scope="module")
def command_url() -> Iterator[str]:
    """``gcfkit proxy --http 127.0.0.1:0 -- python examples/demo_server.py``."""
    with gcfkit_http("--keepalive", "0.2", "--", sys.executable, DEMO) as url:
        yield url


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_stdio_server_served_over_http(command_url: str, mode: str) -> None:
    server = [sys.executable, DEMO]

    async def calls(client: Client) -> dict[str, Any]:
        progress = Progress()
        orders = await client.call_tool("list_orders", {"limit": 10})
        search = await client.call_tool("search", {"query": "q"}, progress_callback=progress)
        hello = await client.call_tool("hello", {"name": "Ada"})
        return {
            "orders": text(orders),
            "search": value(text(search)),
            "progress": progress.seen,
            "hello": text(hello),
            "tools": sorted(t.name for t in (await client.list_tools()).tools),
        }

    async def direct() -> dict[str, Any]:
        params = StdioServerParameters(command=server[0], args=server[1:])
        async with connect(params, "legacy") as c:
            return await calls(c)

    async def proxied() -> dict[str, Any]:
        async with connect(command_url, mode) as c:
            return await calls(c)

    async def two_sessions() -> list[dict[str, Any]]:
        # Two sessions at once: two server processes, each answering only its own client.
        return list(await asyncio.gather(proxied(), proxied()))

    want = run(direct)
    for result in run(two_sessions):
        assert result["orders"].startswith(GCF_HEADS)
        assert value(result["orders"]) == json.loads(want["orders"])
        assert result["search"] == want["search"]
        assert result["progress"] == want["progress"] == [1.0, 2.0]
        assert result["hello"] == want["hello"]
        assert result["tools"] == want["tools"]


@pytest.fixture(scope="module")
def sdk_command_url() -> Iterator[str]:
    """``gcfkit proxy --http 127.0.0.1:0 -- python tests/http_fixture_server.py --stdio``:
    the SDK's own server on stdio, which speaks both protocol generations."""
    with gcfkit_http("--", sys.executable, FIXTURE, "--stdio") as url:
        yield url


@pytest.mark.parametrize("mode", ["2026-07-28", "auto", "legacy"])
def test_an_sdk_stdio_server_served_over_http(sdk_command_url: str, mode: str) -> None:
    async def direct() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=[FIXTURE, "--stdio"])
        async with connect(params, mode) as c:
            return await exercise(c)

    async def proxied() -> dict[str, Any]:
        async with connect(sdk_command_url, mode) as c:
            return await exercise(c)

    async def clients() -> list[dict[str, Any]]:
        # At once: in 2026-07-28 they share one server process, and they number their
        # requests and progress tokens alike; each must get its own answers. (With the
        # handshake each session is a process of its own: one client shows it.)
        return list(await asyncio.gather(*(proxied() for _ in range(1 if legacy else 3))))

    legacy = mode == "legacy"
    if ("stdio", "") not in _DIRECT:  # the same in every mode: asked once
        _DIRECT["stdio", ""] = run(direct)
    want = _DIRECT["stdio", ""]
    for got in run(clients):
        assert got["orders_text"].startswith(GCF_HEADS)
        assert got["orders"] == want["orders"] == json.loads(want["orders_text"])
        assert got["steps"] == want["steps"]
        assert got["echo"] == want["echo"] == "  keep   me  "
        assert got["progress"] == want["progress"] == [1.0, 2.0, 3.0, 4.0]


def test_a_2026_request_the_client_cancels_is_cancelled_on_the_shared_server(
    sdk_command_url: str,
) -> None:
    async def body() -> str:
        async with connect(sdk_command_url, "2026-07-28") as c:
            started = asyncio.Event()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                started.set()

            call = asyncio.create_task(
                c.call_tool("hold", {"key": "k1"}, progress_callback=on_progress)
            )
            await started.wait()  # the tool runs: cancelling it now reaches it
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            return text(await c.call_tool("was_cancelled", {"key": "k1"}))

    assert run(body) == "cancelled"


def test_the_shared_2026_process_dies_and_the_next_request_starts_another(
    sdk_command_url: str,
) -> None:
    async def body() -> tuple[str, str]:
        async with connect(sdk_command_url, "2026-07-28") as c:
            try:
                await c.call_tool("die", {"after": 0})
            except MCPError as e:
                died = str(e)
            else:
                raise AssertionError("the call succeeded")
            return died, text(await c.call_tool("echo", {"text": "back"}))

    died, again = run(body)
    assert "exited with status 3" in died
    assert again == "back"


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_stopping_the_http_proxy_stops_its_servers_process_groups(tmp_path: Path) -> None:
    # A server with a child of its own (as npx and uvx launchers have): the proxy's stop
    # must take the child too, not only the server it started.
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; exec {sys.executable} {DEMO}"
    with gcfkit_http("--", "sh", "-c", script) as url, httpx2.Client(timeout=30) as http:
        assert http.post(url, json=INIT, headers=ACCEPT).status_code == 200
        child = int(pidfile.read_text())  # written before the server answered initialize
        assert _running(child)
    # gcfkit_http has stopped the proxy (SIGTERM) and waited for it to exit.
    assert not _running(child)


@pytest.fixture(scope="module")
def cli_gateway(servers: Servers) -> Iterator[str]:
    """``gcfkit proxy --http 127.0.0.1:0 --upstream URL --header ...`` as a process, in front
    of the server that wants a token, the token from the environment."""
    with gcfkit_http(
        "--upstream",
        servers.url("token"),
        "--header",
        "Authorization: Bearer ${TOKEN}",
        extra_env={"TOKEN": "s3cret"},
    ) as url:
        yield url


def test_a_bearer_token_given_with_header_and_refused_without(
    servers: Servers, inproc: Background, cli_gateway: str
) -> None:
    url = servers.url("token")

    async def call(target: Any, headers: dict[str, str] | None = None) -> str:
        async with connect(target, "legacy", headers) as c:
            return text(await c.call_tool("echo", {"text": "in"}))

    ok = upstream_params(url, "--header", "Authorization: Bearer ${TOKEN}", TOKEN="s3cret")
    assert run(lambda: call(ok)) == "in"
    refused = mcp_error(lambda: call(upstream_params(url)))
    assert re.search(r"HTTP 401.*WWW-Authenticate: Bearer", str(refused))
    # The client's own token passes through the gateway.
    assert run(lambda: call(inproc.gateway(url), {"Authorization": "Bearer s3cret"})) == "in"
    # The command line: --header with ${VAR}, the token from the environment.
    assert run(lambda: call(cli_gateway)) == "in"


def test_oauth_discovery_through_the_gateway_names_the_gateway(
    servers: Servers, inproc: Background
) -> None:
    url = servers.url("token")
    gateway = inproc.gateway(url)
    gateway_origin = str(httpx2.URL(gateway).copy_with(path="/")).rstrip("/")
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with httpx2.Client(timeout=30) as http:
        direct = http.post(url, json=body, headers=ACCEPT)
        through = http.post(gateway, json=body, headers=ACCEPT)
        assert through.status_code == direct.status_code == 401
        # The challenge is the server's own, but its link to the resource metadata is the
        # gateway's: a client fetches the metadata of the resource it talks to.
        link = re.compile(r'resource_metadata="([^"]+)"')
        direct_link = link.search(direct.headers["www-authenticate"])
        through_link = link.search(through.headers["www-authenticate"])
        assert direct_link is not None and through_link is not None
        path = "/.well-known/oauth-protected-resource/token/mcp"
        assert direct_link.group(1) == servers.base + path
        assert through_link.group(1) == gateway_origin + path
        assert link.sub("", through.headers["www-authenticate"]) == link.sub(
            "", direct.headers["www-authenticate"]
        )
        prm_direct = http.get(direct_link.group(1))
        prm_through = http.get(through_link.group(1))
        assert prm_through.status_code == prm_direct.status_code == 200
        want = prm_direct.json()
        got = prm_through.json()
        # RFC 9728 §3.3 / RFC 8707: the metadata names the resource the client talks to.
        assert want["resource"] == url and got["resource"] == gateway
        assert check_resource_allowed(requested_resource=gateway, configured_resource=gateway)
        assert not check_resource_allowed(requested_resource=gateway, configured_resource=url)
        assert list(got) == list(want)  # the members and their order kept
        assert {**got, "resource": url} == want  # the authorization servers untouched


class MemoryTokens:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def whoami_with_oauth(server_url: str) -> tuple[str, list[str]]:
    """The SDK client's whole OAuth flow against ``server_url`` (discovery, registration,
    authorization with PKCE, token), then ``whoami``: the resource its token names, and the
    URLs the flow fetched."""
    redirected: list[AuthorizationCodeResult] = []
    fetched: list[str] = []

    async def follow(url: str) -> None:
        # The user's browser: the fixture's authorization server approves at once.
        async with httpx2.AsyncClient(timeout=30) as browser:
            answer = await browser.get(url)
        assert answer.status_code in (302, 303, 307), answer.text
        query = dict(httpx2.URL(answer.headers["location"]).params)
        redirected.append(AuthorizationCodeResult(**query))

    async def callback() -> AuthorizationCodeResult:
        return redirected.pop()

    async def log(request: httpx2.Request) -> None:
        fetched.append(str(request.url))

    auth = OAuthClientProvider(
        server_url=server_url,
        client_metadata=OAuthClientMetadata(
            client_name="gcfkit tests",
            redirect_uris=[AnyUrl("http://127.0.0.1:9/callback")],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope="mcp",
        ),
        storage=MemoryTokens(),
        redirect_handler=follow,
        callback_handler=callback,
    )
    http = httpx2.AsyncClient(
        auth=auth, timeout=httpx2.Timeout(30, read=120), event_hooks={"request": [log]}
    )
    async with http, Client(streamable_http_client(server_url, http_client=http)) as c:
        resource = json.loads(text(await c.call_tool("whoami", {})))["resource"]
    return resource, fetched


def test_the_whole_oauth_flow_through_the_gateway(servers: Servers, inproc: Background) -> None:
    url = servers.url("oauth")
    gateway = inproc.gateway(url)
    direct, _ = run(lambda: whoami_with_oauth(url))
    assert direct == url
    # Through the gateway the SDK client accepts the metadata (it names the gateway, which
    # the client checks), gets a token from the server's own authorization server for the
    # gateway's URL (RFC 8707), and the server takes it through the gateway.
    through, fetched = run(lambda: whoami_with_oauth(gateway))
    assert through == gateway
    origin = str(httpx2.URL(gateway).copy_with(path="/")).rstrip("/")
    assert origin + "/.well-known/oauth-protected-resource/oauth/mcp" in fetched
    assert servers.base + "/token" in fetched  # the authorization server, reached directly


@pytest.mark.parametrize("shape", ["upstream", "gateway"])
def test_a_server_that_drops_the_connection_mid_stream(inproc: Background, shape: str) -> None:
    with sdk_server() as base:  # its own: the server dies
        url = f"{base}/stateful/mcp"
        target = target_for(shape, url, inproc)
        progress = Progress()

        async def call() -> None:
            async with connect(target, "legacy") as c:
                await c.call_tool("die", {"after": 2}, progress_callback=progress)

        assert "before answering" in str(mcp_error(call, timeout=60))
        assert progress.seen == [1.0, 2.0]


@pytest.mark.parametrize("shape", ["direct", "upstream", "gateway"])
def test_a_stream_the_server_closes_is_resumed_with_last_event_id(
    servers: Servers, inproc: Background, shape: str
) -> None:
    target = target_for(shape, servers.url("events"), inproc)
    progress = Progress()

    async def call() -> Any:
        async with connect(target, "legacy") as c:
            result = await c.call_tool("poll", {"n": 3}, progress_callback=progress)
            return value(text(result))

    assert run(call, timeout=60) == [{"round": i, "done": True} for i in range(3)]
    assert progress.seen == [1.0, 2.0, 3.0, 4.0]


def answer_of(response: httpx2.Response) -> Any:
    """The JSON-RPC message of a JSON body or of an SSE body's one message event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line[:5] == "data:"]
        return json.loads(next(d for d in data if d))
    return response.json()


def test_the_gateway_relays_delete_and_the_404_of_an_ended_session(cli_gateway: str) -> None:
    gateway = cli_gateway
    with httpx2.Client(timeout=30) as http:
        first = http.post(gateway, json=INIT, headers=ACCEPT)
        assert first.status_code == 200
        assert answer_of(first)["result"]["instructions"].startswith("Fixture server.")
        session = {**ACCEPT, "mcp-session-id": first.headers["mcp-session-id"]}
        assert http.delete(gateway, headers=session).status_code in (200, 204)
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert http.post(gateway, json=ping, headers=session).status_code == 404
        evil = http.post(gateway, json=ping, headers={**ACCEPT, "host": "evil.example"})
        assert evil.status_code == 421


def test_an_unreachable_upstream_is_a_clean_error(inproc: Background) -> None:
    dead = f"http://127.0.0.1:{free_port()}/mcp"

    async def call(target: Any) -> None:
        async with connect(target, "legacy"):
            pass

    assert "unreachable" in str(mcp_error(lambda: call(upstream_params(dead)), timeout=60))
    with httpx2.Client(timeout=30) as http:
        body = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
        answer = http.post(inproc.gateway(dead), json=body, headers={"accept": "application/json"})
        assert answer.status_code == 502
        assert answer.json()["id"] == 5 and "unreachable" in answer.json()["error"]["message"]


def _first_sse_lines(
    http: httpx2.Client, url: str, headers: dict[str, str], count: int
) -> list[str]:
    """The first ``count`` lines of the SSE stream a GET to ``url`` opens."""
    lines: list[str] = []
    with http.stream("GET", url, headers={**headers, "accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200, stream.read()
        for line in stream.iter_lines():
            lines.append(line)
            if len(lines) == count:
                break
    return lines


def test_idle_streams_get_keepalive_comments(
    servers: Servers, inproc: Background, command_url: str
) -> None:
    comment = KEEPALIVE_COMMENT.decode().splitlines()[0]
    gateway = inproc.gateway(servers.url("stateful"), keepalive=0.2)
    with httpx2.Client(timeout=httpx2.Timeout(30, read=10)) as http:
        for url in (gateway, command_url):  # the gateway app, and --keepalive of the command
            first = http.post(url, json=INIT, headers=ACCEPT)
            assert first.status_code == 200
            session = {"mcp-session-id": first.headers["mcp-session-id"]}
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert http.post(url, json=done, headers={**ACCEPT, **session}).status_code == 202
            # The session's GET stream has nothing to say: comments keep it open, each
            # a line of its own followed by the blank line that ends an SSE block.
            lines = _first_sse_lines(http, url, session, 4)
            assert [line for line in lines if line] == [comment, comment], lines
            http.delete(url, headers={**ACCEPT, **session})


@pytest.mark.parametrize("shape", ["upstream", "gateway"])
def test_server_everything_through_the_proxy(
    servers: Servers, inproc: Background, shape: str
) -> None:
    url = everything_url(servers)

    async def calls(target: Any) -> dict[str, Any]:
        progress = Progress()
        async with connect(target, "legacy") as c:
            tools = sorted(t.name for t in (await c.list_tools()).tools)
            total = await c.call_tool("get-sum", {"a": 2, "b": 3})
            slow = await c.call_tool(
                "trigger-long-running-operation",
                {"duration": 0.6, "steps": 3},
                progress_callback=progress,
            )
            structured = await c.call_tool("get-structured-content", {"location": "New York"})
            return {
                "tools": tools,
                "sum": total.model_dump(),
                "slow": text(slow),
                "progress": progress.seen,
                "structured": structured.structured_content,
            }

    want = run(lambda: calls(url))
    got = run(lambda: calls(target_for(shape, url, inproc)))
    assert got == want
    assert got["progress"] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--upstream", "http://127.0.0.1:9/mcp", "--", "cmd"], "either --upstream"),
        (["--header", "X: 1", "--", "cmd"], "--header is for"),
        (["--upstream", "ftp://127.0.0.1/mcp"], "http(s)://"),
        (["--upstream", "http://127.0.0.1:9/mcp", "--header", "no colon"], "Name: value"),
        (["--http", ":8765", "--", "cmd"], "HOST:PORT"),
        (["--http", "127.0.0.1:0", "--keepalive", "-1", "--", "cmd"], "--keepalive"),
        (
            ["--http", "127.0.0.1:0", "--capture-dir", "x", "--capture-max-mb", "0", "--", "cmd"],
            "--capture-max-mb",
        ),
    ],
)
def test_the_http_options_refuse_what_cannot_work(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gcfkit.cli import main

    assert main(["proxy", "--no-stats", *args]) != 0
    assert says in capsys.readouterr().err


def test_connections_the_proxy_accepts_have_tcp_nodelay() -> None:
    """uvicorn serves ``listen_socket``'s socket with ``loop.create_server(sock=...)``: each
    accepted connection must have TCP_NODELAY, or every response written in pieces waits on
    Nagle's algorithm and the client's delayed ACK."""

    async def nodelay() -> int:
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future[int] = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        sock = listen_socket("127.0.0.1", 0)
        server = await loop.create_server(Probe, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
            try:
                return await asyncio.wait_for(accepted, 10)
            finally:
                writer.close()

    assert run(nodelay) != 0


_RUN_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z?$")


def conformance(url: str, out: Path) -> dict[str, str]:
    """``conformance server --url URL``: every check's status, keyed by scenario and id."""
    subprocess.run(
        [str(NODE), str(CONFORMANCE), "server", "--url", url, "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=240,
        env=env(),
        check=False,  # it exits non-zero when any check fails; the checks are compared below
    )
    statuses: dict[str, str] = {}
    for checks in sorted(out.glob("*/checks.json")):
        # A scenario's folder is its name and the run's time stamp (2026-12-01T16-40-27-203Z).
        scenario = _RUN_STAMP.sub("", checks.parent.name)
        for check in json.loads(checks.read_text()):
            statuses[f"{scenario}/{check['id']}"] = check["status"]
    return statuses


def test_run_stamps_are_cut_from_scenario_names() -> None:
    for name in (
        "server-logging-set-level-2026-12-01T16-40-28-203Z",
        "server-ping-2026-01-02T00-20-00Z",
    ):
        assert _RUN_STAMP.sub("", name) in ("server-logging-set-level", "server-ping")


@pytest.mark.slow
def test_the_conformance_suite_sees_the_same_server_through_the_gateway(
    servers: Servers, inproc: Background, tmp_path: Path
) -> None:
    if not CONFORMANCE.exists():
        pytest.skip("tests/node not installed (make node)")
    url = everything_url(servers)
    direct = conformance(url, tmp_path / "direct")
    through = conformance(inproc.gateway(url), tmp_path / "gateway")
    assert len(direct) > 20 and direct.keys() == through.keys()
    # The one difference is the gateway's own: bound to loopback, it refuses a foreign Host
    # (DNS rebinding), which server-everything itself accepts.
    rebinding = "server-dns-rebinding-protection/localhost-host-rebinding-rejected"
    assert direct[rebinding] == "FAILURE" and through[rebinding] == "SUCCESS"
    differ = {k: (direct[k], through[k]) for k in direct if direct[k] != through[k]}
    assert differ == {rebinding: ("FAILURE", "SUCCESS")}
    assert sum(s == "SUCCESS" for s in through.values()) >= 13
