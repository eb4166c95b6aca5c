"""Tool filters (gcfkit.proxy.toolfilter): the rule, the core's two uses of it (tools/list
and tools/call), the policy key and ``--tools``, and end to end with the official SDK client
through the stdio proxy, ``--http -- COMMAND`` (legacy and 2026-07-28) and the gateway."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gcfkit.cli.proxy import proxy_config
from gcfkit.errors import ConfigError
from gcfkit.proxy.core import ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy, load_policy
from gcfkit.proxy.toolfilter import TOOL_HIDDEN, ToolFilter, ToolFilters, refusal, visible_tools

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "examples" / "demo_server.py")


def filtered(spec: str, source: str = "--tools") -> ProxyConfig:
    policy = Policy().with_filter(ToolFilter.parse(spec, source))
    return ProxyConfig(primer=False, stats=False, policy=policy)


def line(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def parsed(data: bytes) -> Any:
    return json.loads(data)


# ---------------------------------------------------------------------------------------
# The rule
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ("git_*,!git_push", ["git_log", "git_push_tags", "git_status"]),
        ("!git_push", ["git_log", "git_push_tags", "git_status", "read_file"]),
        ("!git_push*", ["git_log", "git_status", "read_file"]),
        ("read_file, git_log", ["git_log", "read_file"]),
        ("*,!read_*,!git_status", ["git_log", "git_push", "git_push_tags"]),
        ("!git_log,git_*", ["git_push", "git_push_tags", "git_status"]),  # order is no matter
        ("GIT_*", []),  # case-sensitive, as tool names are
    ],
)
def test_which_tools_a_filter_shows(spec: str, shown: list[str]) -> None:
    names = ["git_log", "git_push", "git_push_tags", "git_status", "read_file"]
    f = ToolFilter.parse(spec)
    assert [n for n in names if not f.hides(n)] == shown


@pytest.mark.parametrize("spec", ["", " , ", "!", "a,!", ["a", 3]])
def test_a_filter_that_names_no_pattern_is_refused(spec: Any) -> None:
    with pytest.raises(ConfigError) as e:
        ToolFilter.parse(spec)
    assert e.value.code == "invalid_option"


def test_every_filter_given_must_show_a_tool() -> None:
    both = ToolFilters((ToolFilter.parse("git_*"), ToolFilter.parse("!git_push", "policy")))
    assert not both.hides("git_log")
    assert both.hidden_by("read_file") == (both.filters[0], "no pattern of 'git_*' shows it")
    assert both.hidden_by("git_push") == (both.filters[1], "'!git_push' hides it")


def test_a_refusal_names_the_filter_and_why() -> None:
    error = refusal("git_push", ToolFilters((ToolFilter.parse("git_*,!git_push"),)))
    assert error is not None
    assert error["code"] == TOOL_HIDDEN == -32602
    assert "--tools 'git_*,!git_push'" in error["message"]
    assert "'!git_push' hides it" in error["message"]
    assert error["data"] == {"tool": "git_push", "filter": "git_*,!git_push", "source": "--tools"}
    # Only names can be shown: a call naming none is refused while a filter is on.
    assert refusal(7, ToolFilters((ToolFilter.parse("*"),))) is not None
    assert refusal(7, ToolFilters()) is None


def test_a_list_that_hides_nothing_passes_as_it_came() -> None:
    tools = [{"name": "a"}, {"description": "no name"}, {"name": "b"}]
    assert visible_tools(tools, ToolFilters()) is None
    assert visible_tools(tools, ToolFilters((ToolFilter.parse("!c"),))) is None
    kept = visible_tools(tools, ToolFilters((ToolFilter.parse("!b"),)))
    assert kept == [{"name": "a"}, {"description": "no name"}]


# ---------------------------------------------------------------------------------------
# Where it is given: --tools and the policy's tool_filter
# ---------------------------------------------------------------------------------------


def test_the_policy_key_and_the_option_both_apply(tmp_path: Path) -> None:
    import argparse

    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"tool_filter": ["git_*", "!git_push"]}))
    assert load_policy(path).tool_filter.hides("git_push")
    args = argparse.Namespace(policy=str(path), tools="!git_log")
    config = proxy_config(args)
    hides = config.policy.tool_filter.hides
    assert [hides(n) for n in ("git_status", "git_log", "git_push", "x")] == [
        False,
        True,
        True,
        True,
    ]
    found = config.policy.tool_filter.hidden_by("git_log")
    assert found is not None and found[0].source == "--tools"
    assert config.policy.tool_filter.filters[0].source == "policy tool_filter"


def test_a_policy_tool_filter_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ConfigError, match="tool_filter"):
        Policy.from_mapping({"tool_filter": {"git_*": True}})


def test_no_filter_means_every_tool() -> None:
    import argparse

    assert not proxy_config(argparse.Namespace()).policy.tool_filter


# ---------------------------------------------------------------------------------------
# The core: tools/list and tools/call
# ---------------------------------------------------------------------------------------

TOOLS = [
    {
        "name": "git_log",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    },
    {"name": "git_push", "inputSchema": {"type": "object"}},
    {"name": "read_file", "inputSchema": {"type": "object"}},
]


def listed(core: ProxyCore, tools: list[Any], request_id: int = 1) -> list[str]:
    core.from_client(line({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}))
    answer = {"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}}
    (out,) = core.from_server(line(answer))
    return [t["name"] for t in parsed(out.data)["result"]["tools"]]


def test_a_hidden_tool_is_not_listed() -> None:
    core = ProxyCore(filtered("git_*,!git_push"))
    assert listed(core, TOOLS) == ["git_log"]
    # Nothing hidden: the list passes byte for byte.
    core = ProxyCore(filtered("!nothing_*"))
    core.from_client(line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","x":1E2}]}}\n'
    assert core.from_server(raw)[0].data == raw


def test_the_filter_and_advertise_format_together() -> None:
    config = filtered("!git_push")
    from dataclasses import replace

    core = ProxyCore(replace(config, advertise_format=True))
    core.from_client(line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    (out,) = core.from_server(line({"jsonrpc": "2.0", "id": 1, "result": {"tools": TOOLS}}))
    tools = parsed(out.data)["result"]["tools"]
    assert [t["name"] for t in tools] == ["git_log", "read_file"]
    assert "_format" in tools[0]["inputSchema"]["properties"]


def test_a_call_to_a_hidden_tool_never_reaches_the_server() -> None:
    core = ProxyCore(filtered("git_*,!git_push"))
    call = {
        "jsonrpc": "2.0",
        "id": "c1",
        "method": "tools/call",
        "params": {"name": "git_push", "arguments": {"force": True}, "_meta": {"v": 1}},
    }
    (sent,) = core.from_client(line(call))
    assert sent.to == "server"
    # A ping holds the request's place (and its _meta); the tool and arguments stay here.
    assert parsed(sent.data) == {
        "jsonrpc": "2.0",
        "id": "c1",
        "method": "ping",
        "params": {"_meta": {"v": 1}},
    }
    (answer,) = core.from_server(b'{"jsonrpc":"2.0","id":"c1","result":{}}\n')
    error = parsed(answer.data)
    assert error["id"] == "c1" and error["error"]["code"] == TOOL_HIDDEN
    assert (
        "git_push" in error["error"]["message"] and "git_*,!git_push" in error["error"]["message"]
    )
    assert answer.response and core.pending_count == 0
    assert core.pop_records() == []


def test_a_visible_tool_is_called_as_before() -> None:
    core = ProxyCore(filtered("git_*,!git_push"))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "git_log"}}
    raw = line(call)
    assert core.from_client(raw)[0].data == raw


def test_the_stand_in_is_answered_with_the_refusal_whatever_the_server_says() -> None:
    core = ProxyCore(filtered("!git_push"))
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "git_push"}}
    core.from_client(line(call))
    (answer,) = core.from_server(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"x"}}')
    assert parsed(answer.data)["error"]["code"] == TOOL_HIDDEN


def test_an_ambiguous_call_is_refused_while_a_filter_is_on() -> None:
    # Duplicate keys: this proxy reads the last name, a server may read the first.
    raw = (
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call",'
        b'"params":{"name":"git_push","name":"git_log"}}\n'
    )
    core = ProxyCore(filtered("!git_push"))
    (sent,) = core.from_client(raw)
    assert parsed(sent.data)["method"] == "ping"
    (answer,) = core.from_server(b'{"jsonrpc":"2.0","id":4,"result":{}}\n')
    assert "ambiguous" in parsed(answer.data)["error"]["message"]
    # Without a filter the proxy relays it as it always did.
    assert ProxyCore(ProxyConfig(primer=False)).from_client(raw)[0].data == raw


def test_a_hidden_call_in_a_batch() -> None:
    core = ProxyCore(filtered("!git_push"))
    batch = [
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "git_push"}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "git_log"}},
    ]
    (sent,) = core.from_client(line(batch))  # type: ignore[arg-type]
    assert [m["method"] for m in parsed(sent.data)] == ["ping", "tools/call"]


def test_a_large_call_to_a_hidden_tool_is_read_in_full() -> None:
    big = "x" * (2 * 1024 * 1024)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "git_push", "arguments": {"blob": big}},
    }
    core = ProxyCore(filtered("!git_push"))
    (sent,) = core.from_client(line(call))
    assert len(sent.data) < 200 and parsed(sent.data)["method"] == "ping"


def test_a_tools_list_that_cannot_be_filtered_faithfully_is_an_error() -> None:
    core = ProxyCore(filtered("!git_push"))
    core.from_client(line({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}))
    raw = b'{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"git_push","name":"ok"}]}}\n'
    (answer,) = core.from_server(raw)
    assert "cannot be applied" in parsed(answer.data)["error"]["message"]


# ---------------------------------------------------------------------------------------
# End to end, with the SDK's client
# ---------------------------------------------------------------------------------------

mcp = pytest.importorskip("mcp")
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from . import http_support as http_tests  # noqa: E402


async def hidden_and_refused(client: Client) -> tuple[list[str], str]:
    tools = sorted(t.name for t in (await client.list_tools()).tools)
    hello = await client.call_tool("hello", {"name": "Ada"})
    assert hello.content[0].text  # type: ignore[union-attr]
    try:
        await client.call_tool("search", {"query": "q"})
    except Exception as e:
        return tools, _mcp_message(e)
    raise AssertionError("a hidden tool was called")


def _mcp_message(error: BaseException) -> str:
    from mcp.shared.exceptions import MCPError

    found: list[BaseException] = [error]
    while found:
        e = found.pop()
        if isinstance(e, MCPError):
            return str(e)
        found.extend(getattr(e, "exceptions", ()))
    raise error


SPEC = "*,!search,!report"


def check(tools: list[str], message: str) -> None:
    assert "search" not in tools and "report" not in tools
    assert {"hello", "list_orders", "inventory"} <= set(tools)
    assert "'search'" in message and repr(SPEC) in message


def test_stdio_a_filtered_tool_is_neither_listed_nor_callable() -> None:
    args = ["-m", "gcfkit.cli", "proxy", "--no-stats", "--tools", SPEC, "--", sys.executable, DEMO]
    params = StdioServerParameters(command=sys.executable, args=args, env=http_tests.env())

    async def body() -> tuple[list[str], str]:
        async with Client(params, mode="legacy") as c:
            return await hidden_and_refused(c)

    check(*http_tests.run(body))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_http_command_a_filtered_tool_is_neither_listed_nor_callable(mode: str) -> None:
    fixture = http_tests.FIXTURE
    with http_tests.gcfkit_http(
        "--tools", "*,!echo", "--", sys.executable, fixture, "--stdio"
    ) as url:

        async def body() -> tuple[list[str], str]:
            async with Client(url, mode=mode) as c:
                tools = sorted(t.name for t in (await c.list_tools()).tools)
                assert "orders" in tools
                try:
                    await c.call_tool("echo", {"text": "hi"})
                except Exception as e:
                    return tools, _mcp_message(e)
            raise AssertionError("a hidden tool was called")

        tools, message = http_tests.run(body)
    assert "echo" not in tools and "orders" in tools
    assert "'echo'" in message and "'*,!echo'" in message


def test_the_gateway_a_filtered_tool_is_neither_listed_nor_callable(
    inproc: http_tests.Background,
) -> None:
    from gcfkit.transports.http_server import build_gateway

    with http_tests.sdk_server() as base:
        upstream = f"{base}/stateful/mcp"
        policy = Policy().with_filter(ToolFilter.parse("orders,echo,!echo"))
        config = ProxyConfig(stats=False, time_budget=30.0, policy=policy)
        url = inproc.serve(build_gateway(upstream, config)) + "/stateful/mcp"

        async def body() -> tuple[list[str], str]:
            async with Client(url, mode="legacy") as c:
                tools = sorted(t.name for t in (await c.list_tools()).tools)
                orders = await c.call_tool("orders", {"limit": 2})
                assert orders.content
                try:
                    await c.call_tool("echo", {"text": "hi"})
                except Exception as e:
                    return tools, _mcp_message(e)
            raise AssertionError("a hidden tool was called")

        tools, message = http_tests.run(body)
    assert tools == ["orders"]
    assert "'echo'" in message and "orders,echo,!echo" in message


@pytest.fixture(scope="module")
def inproc() -> Any:
    background = http_tests.Background()
    try:
        yield background
    finally:
        background.close()


def test_upstream_a_filtered_tool_is_neither_listed_nor_callable() -> None:
    """``gcfkit proxy --upstream URL --tools ...``: the stdio client of a remote server."""
    with http_tests.sdk_server() as base:
        params = http_tests.upstream_params(f"{base}/stateful/mcp", "--tools", "orders,echo,!echo")

        async def body() -> tuple[list[str], str]:
            async with Client(params, mode="legacy") as c:
                tools = sorted(t.name for t in (await c.list_tools()).tools)
                try:
                    await c.call_tool("echo", {"text": "hi"})
                except Exception as e:
                    return tools, _mcp_message(e)
            raise AssertionError("a hidden tool was called")

        tools, message = http_tests.run(body)
    assert tools == ["orders"]
    assert "'echo'" in message and "orders,echo,!echo" in message
