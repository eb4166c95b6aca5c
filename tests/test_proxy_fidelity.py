"""The proxy never changes what it relays (issue 11, items 3, 4, 5 and 9): lone surrogate
escapes, string arguments that look like GCF, file contents behind any tool name, the
proxy's own arguments on tools it has not seen listed, number spellings, long delta
headers, and the server's name on the 2026-07-28 protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest

import gcfkit
from gcfkit import keyed
from gcfkit.proxy.core import Output, ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy

ROWS = [{"id": i, "name": f"item {i}", "price": i * 1.25} for i in range(40)]


def line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def core_with(**options: Any) -> ProxyCore:
    options.setdefault("primer", False)
    options.setdefault("time_budget", 600)
    return ProxyCore(ProxyConfig(**options))


def listed(core: ProxyCore, *tools: dict[str, Any]) -> None:
    core.from_client(line({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}))
    core.from_server(line({"jsonrpc": "2.0", "id": "list", "result": {"tools": list(tools)}}))


def tool(name: str, description: str = "", **props: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": props}
    return {"name": name, "description": description, "inputSchema": schema}


def call(core: ProxyCore, name: str, text: str, args: Any = None, msg_id: int = 1) -> bytes:
    params = {"name": name, "arguments": args or {}}
    core.from_client(
        line({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params})
    )
    result = {"content": [{"type": "text", "text": text}]}
    (out,) = core.from_server(line({"jsonrpc": "2.0", "id": msg_id, "result": result}))
    return out.data


def delivered_text(data: bytes) -> str:
    text: str = json.loads(data)["result"]["content"][0]["text"]
    return text


# --------------------------------------------------------------------------------------
# Item 3: a lone surrogate escape stays an escape
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["gcf", "json"])
def test_a_lone_surrogate_escape_is_not_turned_into_a_raw_surrogate(fmt: str) -> None:
    text = '["\\ud800", "pad pad pad", {"k\\udc80": "\\udbff"}]'  # escapes, as characters
    data = call(core_with(format=fmt), "t", text)
    data.decode("utf-8")  # the message is valid UTF-8
    got = delivered_text(data)
    # Before: the minified text held U+D800 itself, which cannot travel as UTF-8 (strict
    # clients reject the message; others substitute U+FFFD).
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in got)
    assert got.encode("utf-8")  # the text itself is valid UTF-8 too
    assert gcfkit.jsonio.same_value(json.loads(got), json.loads(text))
    assert len(got) < len(text)  # and it was still minified


# --------------------------------------------------------------------------------------
# Item 4: --decode-args decodes only where the schema admits no string
# --------------------------------------------------------------------------------------

GCF_TEXT = gcfkit.dumps({"a": [1, 2]})


@pytest.mark.parametrize(
    "schema",
    [
        {"anyOf": [{"type": "string"}, {"type": "object"}]},
        {"type": ["string", "object"]},
        {"oneOf": [{"type": "object"}, {"description": "anything"}]},
        {},
    ],
    ids=["anyOf", "type-list", "unconstrained-branch", "no-type"],
)
def test_decode_args_leaves_a_string_where_a_string_is_allowed(schema: dict[str, Any]) -> None:
    core = core_with(decode_args=True)
    listed(core, tool("write_file", content=schema))
    params = {"name": "write_file", "arguments": {"content": GCF_TEXT}}
    data = line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    # Before: the file was written as {"a": [1, 2]}, not as the text the user meant.
    assert core.from_client(data) == [Output("server", data)]


def test_decode_args_still_decodes_where_only_an_object_is_allowed() -> None:
    core = core_with(decode_args=True)
    listed(core, tool("create", spec={"type": "object"}))
    params = {"name": "create", "arguments": {"spec": GCF_TEXT}}
    (out,) = core.from_client(
        line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    )
    assert json.loads(out.data)["params"]["arguments"]["spec"] == {"a": [1, 2]}


# --------------------------------------------------------------------------------------
# Item 5: file contents are told by more than an exact name
# --------------------------------------------------------------------------------------

FILE_TEXT = json.dumps(ROWS, indent=2) + "\n"  # a JSON file, as the agent must see it


@pytest.mark.parametrize(
    "name",
    ["read-file", "readFile", "get_file_text_by_path", "ReadFile", "bash", "run_command"],
)
def test_file_text_behind_any_name_reaches_the_agent_byte_for_byte(name: str) -> None:
    core = core_with()
    assert delivered_text(call(core, name, FILE_TEXT)) == FILE_TEXT
    assert core.pop_records()[0].decision == "passthrough-file"


def test_a_tool_that_says_it_reads_files_is_a_file_read_whatever_its_name() -> None:
    core = core_with()
    reader = tool("fetch_it", "Read the complete contents of a file from disk.", path={})
    about = tool("get_file_info", "Retrieve metadata (size, times) about a file.", path={})
    listed(core, reader, about)
    assert delivered_text(call(core, "fetch_it", FILE_TEXT)) == FILE_TEXT
    # Facts about a file are data, and are rewritten as usual.
    assert delivered_text(call(core, "get_file_info", FILE_TEXT, msg_id=2)).startswith("GCF")


def test_the_policy_says_so_explicitly() -> None:
    policy = Policy.from_mapping(
        {
            "tools": {"bash": {"file": False}, "export": {"file": True}},
            "not_file_tools": ["readFile"],
        }
    )
    core = core_with(policy=policy)
    assert delivered_text(call(core, "bash", FILE_TEXT)).startswith("GCF")
    assert delivered_text(call(core, "readFile", FILE_TEXT, msg_id=2)).startswith("GCF")
    assert delivered_text(call(core, "export", FILE_TEXT, msg_id=3)) == FILE_TEXT


# --------------------------------------------------------------------------------------
# Item 9: the proxy's own argument, number spellings, long delta headers, server names
# --------------------------------------------------------------------------------------


def test_format_is_left_in_for_a_tool_the_proxy_has_not_seen_listed() -> None:
    core = core_with()
    params = {"name": "export", "arguments": {"_format": "json", "x": 1}}
    data = line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    # Before: stripped, though a client with a cached tool list may call a tool that
    # declares _format itself.
    assert core.from_client(data) == [Output("server", data)]
    result = {"content": [{"type": "text", "text": json.dumps(ROWS, indent=2)}]}
    (out,) = core.from_server(line({"jsonrpc": "2.0", "id": 1, "result": result}))
    assert delivered_text(out.data).startswith("[{")  # still honoured as the opt-out
    # Listed without it: the proxy's own, and removed.
    listed(core, tool("export", x={}))
    (up,) = core.from_client(line({**json.loads(data), "id": 2}))
    assert json.loads(up.data)["params"]["arguments"] == {"x": 1}


def test_a_rewritten_request_keeps_the_numbers_as_the_client_spelled_them() -> None:
    core = core_with()
    listed(core, tool("t", a={}, b={}, c={}, d={}))
    data = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":'
        b'{"_format":"json","a":-0,"b":1E2,"c":1.50,"d":[1e-7,-0.0,12345678901234567890]}}}\n'
    )
    (out,) = core.from_client(data)
    # Before: -0 became 0 and 1E2 became 100.0.
    assert out.data == (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":'
        b'{"a":-0,"b":1E2,"c":1.50,"d":[1e-7,-0.0,12345678901234567890]}}}\n'
    )


def test_a_rewritten_result_keeps_the_numbers_beside_its_text() -> None:
    core = core_with()
    core.from_client(
        line({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t"}})
    )
    text = json.dumps(json.dumps(ROWS, indent=2))
    data = (
        b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":'
        + text.encode()
        + b'}],"structuredContent":{"v":1E2,"w":-0},"_meta":{"n":2.50}}}\n'
    )
    (out,) = core.from_server(data)
    assert delivered_text(out.data).startswith("GCF")
    assert b'"structuredContent":{"v":1E2,"w":-0},"_meta":{"n":2.50}}' in out.data


def test_decode_reads_a_delta_whose_header_is_longer_than_4096_characters() -> None:
    a = keyed.KeyedSet("id", ["id", "v"], [{"id": i, "v": 0} for i in range(3)])
    b = keyed.KeyedSet("id", ["id", "v"], [{"id": i, "v": 1} for i in range(3)])
    head, body = keyed.dumps_delta(keyed.diff(a, b)).split("\n", 1)
    # The delta marker past the 4,096th character: decode once looked only that far.
    long_head = head.replace("generic ", "generic tool=" + "t" * 5000 + " ", 1)
    assert long_head.index("delta=true") > 4096
    got = gcfkit.decode(long_head + "\n" + body)
    assert isinstance(got, keyed.GenericDelta)
    assert list(keyed.apply_delta(a, got).rows) == list(b.rows)


def test_the_ledger_names_a_server_of_the_2026_07_28_protocol() -> None:
    core = core_with()
    meta = {"io.modelcontextprotocol/serverInfo": {"name": "modern-git", "version": "1"}}
    core.from_client(line({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}))
    discover = {"supportedVersions": ["2026-07-28"], "capabilities": {}, "_meta": meta}
    core.from_server(line({"jsonrpc": "2.0", "id": 1, "result": discover}))
    call(core, "git_log", json.dumps(ROWS), msg_id=2)
    # Before: "" (the name was read from an initialize result's serverInfo only).
    assert core.pop_records()[0].server == "modern-git"
    # Every 2026 result carries it: a proxy that missed the discover learns it there too.
    later = core_with()
    later.from_client(
        line({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}})
    )
    result = {"content": [{"type": "text", "text": json.dumps(ROWS)}], "_meta": meta}
    later.from_server(line({"jsonrpc": "2.0", "id": 5, "result": result}))
    assert later.pop_records()[0].server == "modern-git"
