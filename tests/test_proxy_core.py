"""Unit tests of the sans-I/O proxy core: every rule, no pipes, no processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gcfkit
from gcfkit import tokens
from gcfkit.answers.primer import NOTES, PRIMER, append_primer
from gcfkit.errors import ConfigError, GCFError
from gcfkit.jsonio import same_value
from gcfkit.proxy.core import CONNECTION_CLOSED, Codec, Output, ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy, ToolPolicy, cap_format, load_policy
from gcfkit.proxy.record import LedgerRecord
from tests.proxy_support import (
    call,
    delivered_result,
    line,
    only,
    pretty,
    request,
    response,
    text_result,
)

ORDERS = [
    {"id": i, "customer": f"user{i}", "status": "open" if i % 2 else "shipped", "total": i * 1.5}
    for i in range(1, 13)
]


def cfg(**options: Any) -> ProxyConfig:
    """A config whose time budget no loaded test machine can run out. Results are not named
    (``refs``) unless a test asks: tests/test_proxy_relative.py covers naming; and v3.5.3
    only (``dense``) unless a test asks: tests/test_proxy_forms.py covers the dense form."""
    options.setdefault("primer", False)
    options.setdefault("refs", "off")
    options.setdefault("dense", ())
    options.setdefault("time_budget", 60.0)
    return ProxyConfig(**options)


def count(text: str) -> int:
    return tokens.count(text, "o200k_base")


# --------------------------------------------------------------------------------------
# Transparent relay
# --------------------------------------------------------------------------------------

RELAYED_FROM_CLIENT = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
    b'{ "jsonrpc" : "2.0", "id" : "a", "method" : "resources/list" }\n',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n',
    b'{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[{"uri":"file:///x"}]}}\n',
    b'{"jsonrpc":"2.0","id":"srv-2","error":{"code":-1,"message":"no"}}\n',
    b'[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","method":"x/y"}]\n',
    b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}\n',
    b"not json at all\n",
    b"\n",
    b"   \r\n",
    b'{"truncated": \n',
    b"\xff\xfe invalid utf-8\n",
    b'{"jsonrpc":"2.0","id":3,"method":"ping"}',  # a final line without LF
    b'{"jsonrpc":"2.0","id":4,"method":"ping","x":1,"x":2}\n',
    b"[]\n",
    b"42\n",
]


@pytest.mark.parametrize("data", RELAYED_FROM_CLIENT)
def test_client_lines_pass_byte_for_byte(data: bytes) -> None:
    core = ProxyCore(cfg())
    assert core.from_client(data) == [Output("server", data)]


RELAYED_FROM_SERVER = [
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"{}"}}\n',
    b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n',
    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n',
    b'{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[]}}\n',
    b'{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{"message":"?"}}\n',
    b'{"jsonrpc":"2.0","id":"s3","method":"roots/list"}\n',
    b'{"jsonrpc":"2.0","id":"s4","method":"ping"}\n',
    b'{"jsonrpc":"2.0","id":77,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}\n',
    b"garbage\n",
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}\n',
]


@pytest.mark.parametrize("data", RELAYED_FROM_SERVER)
def test_server_lines_pass_byte_for_byte(data: bytes) -> None:
    core = ProxyCore(cfg())
    assert core.from_server(data) == [Output("client", data)]


def test_only_tools_call_results_are_rewritten() -> None:
    core = ProxyCore(cfg())
    json_text = pretty(ORDERS)
    # The same content shape answering a different method is not a tool result.
    core.from_client(request(1, "prompts/get", {"name": "p"}))
    data = response(1, text_result(json_text))
    assert core.from_server(data) == [Output("client", data)]
    # An id that the client used for tools/call, but as a string, is a different request.
    core.from_client(request(2, "tools/call", {"name": "orders", "arguments": {}}))
    data = response("2", text_result(json_text))
    assert core.from_server(data) == [Output("client", data)]
    # The real answer to id 2 is rewritten.
    out = core.from_server(response(2, text_result(json_text)))
    assert delivered_result(out)["content"][0]["text"].startswith("GCF profile=generic")
    assert core.pending_count == 0


def test_unsolicited_response_to_unknown_id_passes() -> None:
    core = ProxyCore(cfg(primer=True))
    data = response(41, text_result(pretty(ORDERS)))
    assert core.from_server(data) == [Output("client", data)]


# --------------------------------------------------------------------------------------
# Rewriting tool results
# --------------------------------------------------------------------------------------


def test_records_become_gcf_and_decode_to_the_same_value() -> None:
    core = ProxyCore(cfg())
    original = pretty(ORDERS)
    _, down = call(core, "list_orders", text_result(original))
    text = delivered_result(down)["content"][0]["text"]
    assert text.startswith("GCF profile=generic\n")
    assert same_value(gcfkit.loads(text), ORDERS)
    compact = json.dumps(ORDERS, separators=(",", ":"))
    assert count(text) < count(compact) < count(original)
    (record,) = core.pop_records()
    assert record.decision == "gcf"
    assert record.tool == "list_orders"
    assert record.tokens_before == count(original)
    assert record.tokens_after == count(text)
    assert record.bytes_before == len(original.encode())
    assert record.bytes_after == len(text.encode())


def test_compact_json_when_gcf_is_not_smaller() -> None:
    core = ProxyCore(cfg())
    value = {"ok": True}
    original = json.dumps(value, indent=4)
    _, down = call(core, "status", text_result(original))
    text = delivered_result(down)["content"][0]["text"]
    assert text == '{"ok":true}'
    assert core.pop_records()[0].decision == "json-minified"


def test_already_minimal_json_is_left_alone() -> None:
    core = ProxyCore(cfg())
    result = text_result('{"ok":true}')
    data = response(1, result)
    core.from_client(request(1, "tools/call", {"name": "status", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]
    assert core.pop_records()[0].decision == "unchanged"


def test_other_parts_of_the_result_are_kept() -> None:
    core = ProxyCore(cfg())
    structured = {"orders": ORDERS}
    result: dict[str, Any] = {
        "content": [
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "text", "text": pretty(ORDERS), "annotations": {"audience": ["user"]}},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x://1", "text": pretty(ORDERS)}},
            {"type": "text", "text": "plain words, not JSON"},
        ],
        "structuredContent": structured,
        "_meta": {"k": "v"},
    }
    _, down = call(core, "mixed", result)
    got = delivered_result(down)
    assert got["structuredContent"] == structured
    assert got["_meta"] == {"k": "v"}
    assert got["content"][0] == result["content"][0]
    assert got["content"][2] == result["content"][2]
    assert got["content"][3] == result["content"][3]
    assert got["content"][4] == result["content"][4]
    assert got["content"][1]["annotations"] == {"audience": ["user"]}
    assert same_value(gcfkit.loads(got["content"][1]["text"]), ORDERS)


@pytest.mark.parametrize(
    "result",
    [
        text_result(pretty(ORDERS), isError=True),
        text_result("Hello, world. [not json"),
        text_result("[1, 2, oops]"),
        text_result('"a json string"'),
        text_result("12345"),
        {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]},
        {"content": []},
        {"content": "not a list"},
        {"structuredContent": {"a": 1}},
        {"content": [{"type": "text", "text": 5}]},
        {"content": [{"type": "text"}]},
        text_result('{"a": 1, "a": 2}'),  # duplicate keys: no JSON form keeps them
        text_result('{"x": NaN}'),
        text_result('{"x": 1e999}'),
    ],
)
def test_results_that_stay_byte_for_byte(result: Any) -> None:
    core = ProxyCore(cfg())
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    data = response(1, result)
    assert core.from_server(data) == [Output("client", data)]


def test_json_rpc_error_for_tools_call_passes_and_is_not_recorded() -> None:
    core = ProxyCore(cfg(primer=True))
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    data = line({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}})
    assert core.from_server(data) == [Output("client", data)]
    assert core.pop_records() == []
    assert core.pending_count == 0


def test_unsafe_envelope_is_never_reserialized() -> None:
    core = ProxyCore(cfg(primer=True))
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    # A duplicate key in the envelope would be lost by re-serializing: relay as is.
    payload = json.dumps(pretty(ORDERS))
    data = (
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":'
        + payload.encode()
        + b'}],"_meta":{"a":1,"a":2}}}\n'
    )
    assert core.from_server(data) == [Output("client", data)]
    assert core.pop_records()[0].decision == "fallback:unsafe-envelope"


def test_non_ascii_text_becomes_gcf() -> None:
    core = ProxyCore(cfg())
    rows = [{"id": i, "name": f"Zoë {i}", "city": "Łódź", "note": "日本"} for i in range(8)]
    _, down = call(core, "people", text_result(json.dumps(rows, indent=2)))
    raw = only(down, "client")
    text = json.loads(raw)["result"]["content"][0]["text"]
    assert "Łódź" in raw.decode("utf-8")  # UTF-8 on the wire, not \u escapes
    assert same_value(gcfkit.loads(text), rows)


def test_lone_surrogates_fall_back_to_json_and_stay_valid_utf8() -> None:
    core = ProxyCore(cfg())
    rows = [{"id": i, "name": f"bad \ud800 {i}"} for i in range(8)]
    _, down = call(core, "people", text_result(json.dumps(rows, indent=2)))
    raw = only(down, "client")
    raw.decode("utf-8")  # a lone surrogate goes out as a \u escape, not invalid UTF-8
    text = json.loads(raw)["result"]["content"][0]["text"]
    assert same_value(json.loads(text), rows)
    assert core.pop_records()[0].decision == "fallback:encode-invalid_surrogate"


@settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**63 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=12),
        lambda children: (
            st.lists(children, max_size=5)
            | st.dictionaries(st.text(max_size=6), children, max_size=5)
        ),
        max_leaves=30,
    ).filter(lambda v: isinstance(v, (dict, list))),
    st.booleans(),
)
def test_never_larger_and_always_lossless(value: Any, indent: bool) -> None:
    core = ProxyCore(cfg())
    original = json.dumps(value, indent=2 if indent else None, ensure_ascii=indent)
    _, down = call(core, "t", text_result(original))
    msg = json.loads(only(down, "client"))
    text = msg["result"]["content"][0]["text"]
    decoded = gcfkit.loads(text) if text.startswith("GCF") else json.loads(text)
    assert same_value(decoded, json.loads(original))
    assert count(text) <= count(original)
    (record,) = core.pop_records()
    assert record.tokens_after <= record.tokens_before


# --------------------------------------------------------------------------------------
# File contents stay byte-faithful
# --------------------------------------------------------------------------------------

PACKAGE_JSON = """{
  "name": "demo",
  "version": "1.0.0",
  "scripts": {
    "test": "node --test"
  },
  "dependencies": {
    "left-pad": "^1.3.0"
  }
}
"""


class FakeFileServer:
    """The part of a filesystem server an edit depends on: edit_file needs an exact match."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        params = msg["params"]
        args = params["arguments"]
        if params["name"] in ("read_text_file", "read_file"):
            return text_result(self.files[args["path"]])
        old, new = args["oldText"], args["newText"]
        if old not in self.files[args["path"]]:
            return text_result("Could not find exact match for edit", isError=True)
        self.files[args["path"]] = self.files[args["path"]].replace(old, new, 1)
        return text_result("OK")


@pytest.mark.parametrize("reader", ["read_text_file", "read_file"])
def test_file_read_then_exact_edit_still_matches(reader: str) -> None:
    server = FakeFileServer({"package.json": PACKAGE_JSON})
    core = ProxyCore(cfg())

    def roundtrip(msg_id: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
        (up,) = core.from_client(request(msg_id, "tools/call", {"name": name, "arguments": args}))
        result = server.handle(json.loads(up.data))
        return delivered_result(core.from_server(response(msg_id, result)))

    seen = roundtrip(1, reader, {"path": "package.json"})["content"][0]["text"]
    assert seen == PACKAGE_JSON
    # The agent quotes a line exactly as it was shown.
    shown_line = next(x for x in seen.splitlines() if "left-pad" in x)
    edit = {"path": "package.json", "oldText": shown_line, "newText": shown_line.replace("3", "4")}
    reply = roundtrip(2, "edit_file", edit)
    assert reply.get("isError") is not True
    assert '"left-pad": "^1.4.0"' in server.files["package.json"]
    assert core.pop_records()[0].decision == "passthrough-file"


def test_file_tools_are_configurable() -> None:
    policy = Policy.from_mapping({"file_tools": ["fetch_*"], "not_file_tools": ["read_text*"]})
    core = ProxyCore(cfg(policy=policy))
    data = response(1, text_result(pretty(ORDERS)))
    core.from_client(request(1, "tools/call", {"name": "fetch_doc", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]
    # read_text_file is not a file tool under this policy (it says so explicitly).
    _, down = call(core, "read_text_file", text_result(pretty(ORDERS)), msg_id=2)
    assert delivered_result(down)["content"][0]["text"].startswith("GCF")
    # file_tools adds to the built-in ones; it does not replace them.
    data = response(3, text_result(pretty(ORDERS)))
    core.from_client(request(3, "tools/call", {"name": "read_file", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]


def test_explicit_policy_entry_overrides_the_file_rule() -> None:
    policy = Policy.from_mapping({"tools": {"read_file": {"format": "json"}}})
    assert policy.for_tool("read_file").format == "json"
    assert (
        Policy.from_mapping({"tools": {"read_*": {"format": "gcf"}}}).for_tool("read_file").format
        == "off"
    )


# --------------------------------------------------------------------------------------
# Cross-block join
# --------------------------------------------------------------------------------------

BLOCKS = [json.dumps({"sku": f"S{i}", "warehouse": "AMS", "on_hand": i * 3}) for i in range(6)]


def test_object_blocks_are_joined_into_one_array() -> None:
    core = ProxyCore(cfg())
    _, down = call(core, "inventory", text_result(*BLOCKS))
    content = delivered_result(down)["content"]
    assert len(content) == 1
    assert same_value(gcfkit.loads(content[0]["text"]), [json.loads(b) for b in BLOCKS])
    record = core.pop_records()[0]
    assert record.tokens_before == sum(count(b) for b in BLOCKS)
    assert record.tokens_after == count(content[0]["text"]) < record.tokens_before


def test_no_join_keeps_the_blocks() -> None:
    policy = Policy(defaults=ToolPolicy(join=False))
    core = ProxyCore(cfg(policy=policy))
    _, down = call(core, "inventory", text_result(*BLOCKS))
    assert len(delivered_result(down)["content"]) == len(BLOCKS)


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": BLOCKS[0]}, {"type": "text", "text": "[1, 2]"}],
        [{"type": "text", "text": BLOCKS[0]}, {"type": "text", "text": "words"}],
        [
            {"type": "text", "text": BLOCKS[0]},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": BLOCKS[1]},
        ],
        [
            {"type": "text", "text": BLOCKS[0], "annotations": {"priority": 1}},
            {"type": "text", "text": BLOCKS[1]},
        ],
    ],
)
def test_not_joined_unless_every_block_is_a_plain_json_object(content: list[Any]) -> None:
    core = ProxyCore(cfg())
    _, down = call(core, "t", {"content": content})
    assert len(delivered_result(down)["content"]) == len(content)


# --------------------------------------------------------------------------------------
# Policy and negotiation
# --------------------------------------------------------------------------------------


def test_format_json_is_a_pure_minifier() -> None:
    core = ProxyCore(cfg(primer=True, format="json"))
    out = core.from_client(request(0, "initialize", {"capabilities": {}}))
    init = response(0, {"protocolVersion": "2025-11-25", "instructions": "x"})
    assert core.from_server(init) == [Output("client", init)]  # no primer: no GCF coming
    _, down = call(core, "list_orders", text_result(pretty(ORDERS)))
    text = delivered_result(down)["content"][0]["text"]
    assert text == json.dumps(ORDERS, separators=(",", ":"))
    assert out[0].data == request(0, "initialize", {"capabilities": {}})


def test_policy_per_tool_exact_and_glob(tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps(
            {
                "defaults": {"format": "gcf"},
                "tools": {
                    "list_orders": {"format": "json"},
                    "list_*": {"format": "off"},
                    "big_*": {"min_bytes": 10_000},
                },
            }
        )
    )
    core = ProxyCore(cfg(policy=load_policy(path)))
    _, down = call(core, "list_orders", text_result(pretty(ORDERS)), msg_id=1)
    assert delivered_result(down)["content"][0]["text"].startswith("[{")
    data = response(2, text_result(pretty(ORDERS)))
    core.from_client(request(2, "tools/call", {"name": "list_users", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]
    data = response(3, text_result(pretty(ORDERS)))
    core.from_client(request(3, "tools/call", {"name": "big_orders", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]
    _, down = call(core, "search", text_result(pretty(ORDERS)), msg_id=4)
    assert delivered_result(down)["content"][0]["text"].startswith("GCF")


def test_policy_toml(tmp_path: Path) -> None:
    # TOML policies need tomllib (3.11+) or the tomli backport the mcp extra installs on 3.10.
    if sys.version_info < (3, 11):
        pytest.importorskip("tomli")
    path = tmp_path / "policy.toml"
    path.write_text('[defaults]\njoin = false\n\n[tools."git_*"]\nformat = "json"\ndelta = true\n')
    policy = load_policy(path)
    assert policy.for_tool("git_log") == ToolPolicy(format="json", join=False, delta=True)
    assert policy.for_tool("other") == ToolPolicy(join=False)


@pytest.mark.parametrize(
    "data",
    [
        {"tools": {"x": {"format": "yaml"}}},
        {"tools": {"x": {"colour": "red"}}},
        {"tools": {"x": {"join": "yes"}}},
        {"tools": {"x": {"min_bytes": -1}}},
        {"tools": ["x"]},
        {"file_tools": "read_file"},
        {"extra": 1},
    ],
)
def test_bad_policies_are_rejected(data: Any) -> None:
    with pytest.raises(ConfigError) as e:
        Policy.from_mapping(data)
    assert e.value.code == "invalid_option"


def test_bad_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{nope")
    with pytest.raises(ConfigError):
        load_policy(path)
    with pytest.raises(ConfigError):
        load_policy(tmp_path / "missing.json")


def test_cap_format() -> None:
    assert cap_format("gcf", "json") == "json"
    assert cap_format("off", "gcf") == "off"
    assert cap_format("gcf", "gcf") == "gcf"


@pytest.mark.parametrize("declared", ["json", {"format": "json"}])
def test_client_session_opt_out(declared: Any) -> None:
    core = ProxyCore(cfg(primer=True))
    init_req = request(
        0, "initialize", {"capabilities": {"experimental": {"output_format": declared}}}
    )
    assert core.from_client(init_req) == [Output("server", init_req)]
    init = response(0, {"protocolVersion": "2025-11-25", "instructions": "hi"})
    assert core.from_server(init) == [Output("client", init)]
    assert core.session_format == "json"
    _, down = call(core, "list_orders", text_result(pretty(ORDERS)))
    assert delivered_result(down)["content"][0]["text"].startswith("[{")


def test_client_opt_out_in_the_2026_discover_envelope() -> None:
    core = ProxyCore(cfg(primer=True))
    caps = {
        "io.modelcontextprotocol/clientCapabilities": {"experimental": {"output_format": "json"}}
    }
    core.from_client(request(0, "server/discover", {"_meta": caps}))
    data = response(0, {"supportedVersions": ["2026-07-28"], "capabilities": {}})
    assert core.from_server(data) == [Output("client", data)]
    assert core.session_format == "json"
    # ... and per request, for one call.
    core = ProxyCore(cfg())
    params = {"name": "list_orders", "arguments": {}, "_meta": caps}
    core.from_client(request(1, "tools/call", params))
    got = delivered_result(core.from_server(response(1, text_result(pretty(ORDERS)))))
    assert got["content"][0]["text"] == json.dumps(ORDERS, separators=(",", ":"))


def listed(core: ProxyCore, *names: str, msg_id: Any = "tools") -> None:
    """The session's tools/list: tools ``names``, none with an argument of the proxy's."""
    tools = [{"name": n, "inputSchema": {"type": "object", "properties": {}}} for n in names]
    core.from_client(request(msg_id, "tools/list"))
    core.from_server(response(msg_id, {"tools": tools}))


def test_a_tool_listed_again_is_judged_again_by_its_new_entry() -> None:
    """Whether a listed tool reads files is decided from its entry once per listing: a new
    tools/list with another description decides anew."""
    core = ProxyCore(cfg())
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}

    def list_with(description: str, msg_id: str) -> None:
        tool = {"name": "fetch_doc", "description": description, "inputSchema": schema}
        core.from_client(request(msg_id, "tools/list"))
        core.from_server(response(msg_id, {"tools": [tool]}))

    def text_sent(msg_id: int) -> str:
        _, down = call(core, "fetch_doc", text_result(pretty(ORDERS)), {"path": "x"}, msg_id)
        text: str = delivered_result(down)["content"][0]["text"]
        return text

    list_with("Returns the contents of a file.", "l1")
    assert text_sent(1) == text_sent(2) == pretty(ORDERS)  # a file read: byte for byte
    list_with("Returns the orders of a customer.", "l2")
    assert text_sent(3) != pretty(ORDERS)


def test_per_call_format_argument_is_stripped_and_honoured() -> None:
    core = ProxyCore(cfg())
    listed(core, "list_orders")
    up, down = call(
        core, "list_orders", text_result(pretty(ORDERS)), {"limit": 5, "_format": "json"}
    )
    forwarded = json.loads(only(up, "server"))
    assert forwarded["params"]["arguments"] == {"limit": 5}
    assert delivered_result(down)["content"][0]["text"].startswith("[{")
    # _format "off": untouched.
    original = pretty(ORDERS)
    up, down = call(core, "list_orders", text_result(original), {"_format": "off"}, msg_id=2)
    assert delivered_result(down)["content"][0]["text"] == original
    # An unknown value is still stripped, and GCF stays allowed.
    up, down = call(core, "list_orders", text_result(original), {"_format": "xml"}, msg_id=3)
    assert json.loads(only(up, "server"))["params"]["arguments"] == {}
    assert delivered_result(down)["content"][0]["text"].startswith("GCF")


def test_native_format_argument_is_not_stripped() -> None:
    core = ProxyCore(cfg())
    tools = {
        "tools": [
            {
                "name": "export",
                "inputSchema": {"type": "object", "properties": {"_format": {"type": "string"}}},
            }
        ]
    }
    core.from_client(request(1, "tools/list"))
    core.from_server(response(1, tools))
    data = request(2, "tools/call", {"name": "export", "arguments": {"_format": "json"}})
    assert core.from_client(data) == [Output("server", data)]


TOOLS = {
    "tools": [
        {
            "name": "create_orders",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "orders": {"type": "array"},
                    "filter": {"type": ["object", "null"]},
                    "memo": {"type": "string"},
                },
            },
        },
        {"name": "read_file", "inputSchema": {"type": "object", "properties": {}}},
    ]
}


def test_tools_list_untouched_without_advertise() -> None:
    core = ProxyCore(cfg())
    core.from_client(request(1, "tools/list"))
    data = response(1, TOOLS)
    assert core.from_server(data) == [Output("client", data)]


def test_advertise_format_adds_an_optional_argument() -> None:
    core = ProxyCore(cfg(advertise_format=True))
    core.from_client(request(1, "tools/list"))
    tools = delivered_result(core.from_server(response(1, TOOLS)))["tools"]
    props = tools[0]["inputSchema"]["properties"]
    assert props["_format"]["enum"] == ["gcf", "json", "off"]
    assert "_format" not in tools[0]["inputSchema"].get("required", [])
    assert "orders" in props
    # A file tool is never rewritten, so it is not offered the argument.
    assert "_format" not in tools[1]["inputSchema"]["properties"]


GCF_ORDERS = gcfkit.dumps(ORDERS)


def test_decode_args_only_where_the_schema_wants_structure() -> None:
    core = ProxyCore(cfg(decode_args=True))
    core.from_client(request(1, "tools/list"))
    core.from_server(response(1, TOOLS))
    gcf_object = gcfkit.dumps({"status": "open"})
    args = {"orders": GCF_ORDERS, "filter": gcf_object, "memo": GCF_ORDERS}
    (up,) = core.from_client(request(2, "tools/call", {"name": "create_orders", "arguments": args}))
    forwarded = json.loads(up.data)["params"]["arguments"]
    assert forwarded["orders"] == ORDERS
    assert forwarded["filter"] == {"status": "open"}
    assert forwarded["memo"] == GCF_ORDERS  # a string argument stays a string


@pytest.mark.parametrize(
    "args",
    [
        {"orders": "GCF profile=generic\n## [2]{a}\n1\n"},  # count mismatch: invalid GCF
        {"orders": gcfkit.dumps({"not": "an array"})},  # wrong type for the schema
        {"orders": "plain text"},
        {"orders": ORDERS},
    ],
)
def test_decode_args_leaves_anything_else(args: dict[str, Any]) -> None:
    core = ProxyCore(cfg(decode_args=True))
    core.from_client(request(1, "tools/list"))
    core.from_server(response(1, TOOLS))
    data = request(2, "tools/call", {"name": "create_orders", "arguments": args})
    assert core.from_client(data) == [Output("server", data)]


def test_without_decode_args_requests_are_never_modified() -> None:
    core = ProxyCore(cfg())
    core.from_client(request(1, "tools/list"))
    core.from_server(response(1, TOOLS))
    data = request(2, "tools/call", {"name": "create_orders", "arguments": {"orders": GCF_ORDERS}})
    assert core.from_client(data) == [Output("server", data)]


# --------------------------------------------------------------------------------------
# Primer
# --------------------------------------------------------------------------------------


def test_primer_is_short() -> None:
    assert count(PRIMER) <= 60
    assert tokens.count(PRIMER, "cl100k_base") <= 60


def test_primer_is_appended_to_instructions() -> None:
    core = ProxyCore(cfg(primer=True, primer_carrier="instructions"))
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    result = {"protocolVersion": "2025-11-25", "serverInfo": {"name": "s"}, "instructions": "Hi."}
    got = delivered_result(core.from_server(response(0, result)))
    assert got["instructions"] == append_primer("Hi.")
    assert got["instructions"].startswith("Hi.\n\n") and got["instructions"].endswith(PRIMER)
    assert got["serverInfo"] == {"name": "s"}


def test_primer_without_server_instructions_and_on_discover() -> None:
    core = ProxyCore(cfg(primer=True, primer_carrier="instructions"))
    core.from_client(request(0, "server/discover", {}))
    got = delivered_result(core.from_server(response(0, {"supportedVersions": ["2026-07-28"]})))
    assert got["instructions"] == PRIMER


def test_no_primer_when_the_policy_never_sends_gcf() -> None:
    policy = Policy.from_mapping({"defaults": {"format": "json"}})
    core = ProxyCore(cfg(primer=True, policy=policy, primer_carrier="instructions"))
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    data = response(0, {"protocolVersion": "2025-11-25", "instructions": "Hi."})
    assert core.from_server(data) == [Output("client", data)]
    with_rule = Policy.from_mapping(
        {"defaults": {"format": "json"}, "tools": {"x": {"format": "gcf"}}}
    )
    core = ProxyCore(cfg(primer=True, policy=with_rule, primer_carrier="instructions"))
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    assert delivered_result(core.from_server(data))["instructions"].endswith(PRIMER)


def test_the_payload_carrier_leaves_instructions_alone_and_explains_each_payload() -> None:
    # Default carrier: a session that never receives GCF pays nothing for it.
    core = ProxyCore(cfg(primer=True))
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    data = response(0, {"protocolVersion": "2025-11-25", "instructions": "Hi."})
    assert core.from_server(data) == [Output("client", data)]
    # Every GCF payload carries its explanation, counted: it is sent only where it pays.
    _, down = call(core, "list_orders", text_result(pretty(ORDERS)))
    (text,) = [b["text"] for b in delivered_result(down)["content"]]
    assert text.splitlines()[1] == "# " + NOTES["gcf"]
    assert gcfkit.loads(text) == ORDERS
    _, down = call(core, "one", text_result(pretty({"id": 1, "status": "open"})), msg_id=2)
    (small,) = [b["text"] for b in delivered_result(down)["content"]]
    assert small == '{"id":1,"status":"open"}'  # GCF plus its explanation would cost more


def test_no_primer() -> None:
    core = ProxyCore(cfg())
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    data = response(0, {"protocolVersion": "2025-11-25", "instructions": "Hi."})
    assert core.from_server(data) == [Output("client", data)]


# --------------------------------------------------------------------------------------
# Never break the agent
# --------------------------------------------------------------------------------------


def test_server_exit_answers_every_pending_request() -> None:
    core = ProxyCore(cfg(primer=True))
    core.from_client(request(1, "tools/call", {"name": "slow", "arguments": {}}))
    core.from_client(request("b", "resources/read", {"uri": "x"}))
    core.from_client(request(3, "tools/call", {"name": "slow", "arguments": {}}))
    core.from_client(request(4, "ping"))
    core.from_server(line({"jsonrpc": "2.0", "id": 4, "result": {}}))
    # Cancelled: the server owes no answer, so neither does the proxy.
    core.from_client(
        line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
    )
    out = core.server_exited(1)
    assert [o.to for o in out] == ["client", "client"]
    errors = [json.loads(o.data) for o in out]
    assert [e["id"] for e in errors] == [1, "b"]
    assert all(e["error"]["code"] == CONNECTION_CLOSED for e in errors)
    assert "status 1" in errors[0]["error"]["message"]
    assert core.server_exited(1) == []


def _failing_dumps(value: Any) -> str:
    raise GCFError("limit_exceeded", "too deep")


def _lossy_dumps(value: Any) -> str:
    return "GCF profile=generic\n=1\n"


def test_encoder_failure_falls_back_and_says_why() -> None:
    core = ProxyCore(cfg(), Codec(dumps=_failing_dumps))
    _, down = call(core, "t", text_result(pretty(ORDERS)))
    text = delivered_result(down)["content"][0]["text"]
    assert same_value(json.loads(text), ORDERS)
    assert core.pop_records()[0].decision == "fallback:encode-limit_exceeded"


def test_self_check_catches_a_lossy_encoding() -> None:
    core = ProxyCore(cfg(), Codec(dumps=_lossy_dumps))
    _, down = call(core, "t", text_result(pretty(ORDERS)))
    text = delivered_result(down)["content"][0]["text"]
    assert not text.startswith("GCF")
    assert same_value(json.loads(text), ORDERS)
    assert core.pop_records()[0].decision == "fallback:selfcheck"


def test_unexpected_exception_sends_the_original() -> None:
    def broken_count(text: str, encoding: str) -> int:
        raise RuntimeError("tokenizer exploded")

    core = ProxyCore(cfg(stats=False), Codec(count=broken_count))
    data = response(1, text_result(pretty(ORDERS)))
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]


def test_time_budget_sends_the_original() -> None:
    ticks = iter(range(0, 10_000, 10))
    # Each look at the clock: 10 s later.
    core = ProxyCore(cfg(time_budget=15), clock=lambda: float(next(ticks)))
    data = response(1, text_result(pretty(ORDERS)))
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]
    assert core.pop_records()[0].decision == "fallback:time-budget"


def test_a_large_result_gets_more_time_by_its_size() -> None:
    # 2-3 MB of records: time_budget_per_mb more seconds for each of those MB.
    rows = [{"id": i, "name": f"user {i}", "tags": ["a", "b"]} for i in range(25_000)]
    text = pretty(rows)
    assert 2_000_000 < len(text) < 3_000_000
    decisions = []
    for per_mb in (0.0, 600.0):
        core = ProxyCore(cfg(time_budget=0.001, time_budget_per_mb=per_mb))
        core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
        core.from_server(response(1, text_result(text)))
        decisions.append(core.pop_records()[0].decision)
    assert decisions[0] == "fallback:time-budget"
    assert not decisions[1].startswith("fallback"), decisions  # rewritten in its time
    config = cfg(time_budget=0.5, time_budget_per_mb=0.75)
    assert config.budget_for(0) == 0.5 and config.budget_for(2_000_000) == 2.0


def test_oversized_text_is_not_attempted() -> None:
    core = ProxyCore(cfg(max_text_bytes=100))
    data = response(1, text_result(pretty(ORDERS)))
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    assert core.from_server(data) == [Output("client", data)]


# --------------------------------------------------------------------------------------
# Ledger records
# --------------------------------------------------------------------------------------


def test_one_payload_free_record_per_tool_result() -> None:
    core = ProxyCore(cfg(server_name="demo"))
    secret = "s3cr3t-value"
    rows = [{"id": i, "token": secret} for i in range(10)]
    call(core, "a", text_result(pretty(rows)), msg_id=1)
    call(core, "b", text_result(secret), msg_id=2)
    core.from_client(request(3, "ping"))
    core.from_server(response(3, {}))
    records = core.pop_records()
    assert [r.tool for r in records] == ["a", "b"]
    assert all(isinstance(r, LedgerRecord) for r in records)
    assert all(r.server == "demo" for r in records)
    assert all(secret not in json.dumps(r.to_dict()) for r in records)
    assert records[1].decision == "unchanged"
    assert records[1].tokens_before == records[1].tokens_after == count(secret)
    assert core.pop_records() == []


def test_server_name_comes_from_server_info() -> None:
    core = ProxyCore(cfg())
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    core.from_server(response(0, {"serverInfo": {"name": "mcp-git", "version": "1"}}))
    call(core, "git_log", text_result("log"))
    assert core.pop_records()[0].server == "mcp-git"


def test_no_stats_no_records() -> None:
    core = ProxyCore(cfg(stats=False))
    call(core, "a", text_result(pretty(ORDERS)))
    assert core.pop_records() == []


# --------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------


def test_batches_are_tracked_and_rewritten_in_place() -> None:
    core = ProxyCore(cfg())
    listed(core, "t")
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "t", "arguments": {"_format": "json"}},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t"}},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
    ]
    (up,) = core.from_client(line(batch))
    forwarded = json.loads(up.data)
    assert forwarded[0]["params"]["arguments"] == {}
    assert forwarded[1:] == batch[1:]
    replies = [
        {"jsonrpc": "2.0", "id": 2, "result": text_result(pretty(ORDERS))},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x"}},
        {"jsonrpc": "2.0", "id": 1, "result": text_result(pretty(ORDERS))},
    ]
    (down,) = core.from_server(line(replies))
    got = json.loads(down.data)
    assert got[0]["result"]["content"][0]["text"].startswith("GCF")
    assert got[1] == replies[1]
    assert got[2]["result"]["content"][0]["text"].startswith("[{")
    assert core.pending_count == 0


def test_same_value_is_type_strict() -> None:
    assert same_value({"a": 1, "b": [None, "x"]}, {"a": 1, "b": [None, "x"]})
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same_value([True], [1])
    assert not same_value([False], [0.0])
    assert not same_value([None], [0])
    assert same_value([1, 0.0], [1.0, -0.0])  # one JSON number type (spec §1.1, §2.3.1)
    assert not same_value([1], [1.5])
    assert not same_value([1, 2], [1])
    assert not same_value({"a": "1"}, {"a": 1})


# --------------------------------------------------------------------------------------
# Repeated calls: generic deltas (§10a)
# --------------------------------------------------------------------------------------

keyed = pytest.importorskip("gcfkit.keyed")


def stock(turn: int, rows: int = 30) -> list[dict[str, Any]]:
    return [
        {"id": f"S-{i}", "site": ("AMS", "BER")[i % 2], "on_hand": 50 + i + (turn if i == 3 else 0)}
        for i in range(rows)
    ]


def delta_core(**options: Any) -> ProxyCore:
    policy = options.pop("policy", Policy(defaults=ToolPolicy(delta=True)))
    return ProxyCore(cfg(policy=policy, **options))


def deliver(core: ProxyCore, msg_id: int, value: Any, args: Any = None) -> tuple[str, str]:
    _, down = call(core, "stock", text_result(pretty(value)), args, msg_id=msg_id)
    text = delivered_result(down)["content"][0]["text"]
    (record,) = core.pop_records()
    assert record.tokens_after < record.tokens_before
    return text, record.decision


class Consumer:
    """What an agent holding the conversation can reconstruct from what it was sent."""

    def __init__(self) -> None:
        self.current: Any = None

    def read(self, text: str) -> list[dict[str, Any]]:
        head = text.split("\n", 1)[0].split(" ")
        if "delta=true" in head:
            self.current = keyed.apply_delta(self.current, keyed.loads_delta(text))
        elif "unchanged=true" in head:
            assert f"pack_root={keyed.pack_root(self.current)}" in head
        else:  # a full result, in plain GCF: the base for the next delta
            rows = gcfkit.loads(text)
            self.current = keyed.KeyedSet("id", list(rows[0]), rows)
        return sorted(self.current.rows, key=lambda r: str(r["id"]))


def as_set(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: str(r["id"]))


def test_repeated_calls_become_deltas_that_reconstruct_exactly() -> None:
    core = delta_core()
    consumer = Consumer()
    decisions: list[str] = []
    for turn in (1, 2, 2, 3):
        text, decision = deliver(core, turn * 10 + len(decisions), stock(turn))
        decisions.append(decision)
        assert consumer.read(text) == as_set(stock(turn))
    assert decisions == ["gcf", "delta", "unchanged-delta", "delta"]
    # The delta names its base by content: the pack root of what was sent in full.
    first = keyed.KeyedSet("id", ["id", "site", "on_hand"], stock(1))
    core = delta_core()
    deliver(core, 1, stock(1))
    text, _ = deliver(core, 2, stock(2))
    assert f"base_root={keyed.pack_root(first)}" in text.split("\n", 1)[0]


def test_delta_is_off_by_default() -> None:
    core = ProxyCore(cfg())
    for turn in (1, 2):
        text, decision = deliver(core, turn, stock(turn))
        assert decision == "gcf"
        assert "pack_root" not in text and same_value(gcfkit.loads(text), stock(turn))


def test_bases_are_per_tool_and_arguments() -> None:
    core = delta_core()
    assert deliver(core, 1, stock(1), {"site": "AMS"})[1] == "gcf"
    assert deliver(core, 2, stock(2), {"site": "BER"})[1] == "gcf"
    assert deliver(core, 3, stock(3), {"site": "AMS"})[1] == "delta"


def test_reanchor_every_n_turns() -> None:
    core = delta_core(reanchor=3)
    decisions = [deliver(core, t, stock(t))[1] for t in range(1, 7)]
    assert decisions == ["gcf", "delta", "delta", "gcf", "delta", "delta"]


def test_large_changes_are_sent_in_full() -> None:
    core = delta_core()
    consumer = Consumer()
    first = stock(1)
    consumer.read(deliver(core, 1, first)[0])
    rewritten = [{**r, "on_hand": r["on_hand"] + 1} for r in first]  # every row changed
    text, decision = deliver(core, 2, rewritten)
    assert decision == "gcf" and "delta=true" not in text
    assert consumer.read(text) == as_set(rewritten)


@pytest.mark.parametrize(
    "rows",
    [
        [{"id": 1, "v": 1}, {"id": 1, "v": 2}] * 10,  # duplicate identities
        [{"v": i, "w": "x"} for i in range(20)],  # no identity column
        [{"id": i, "nested": {"a": i}} for i in range(20)],  # not flat
        [{"id": float(i), "v": "x"} for i in range(20)],  # a float is not an identity
    ],
)
def test_non_keyed_results_are_never_deltas(rows: list[dict[str, Any]]) -> None:
    core = delta_core()
    for turn in (1, 2):
        text, _ = deliver(core, turn, rows)
        assert "delta=true" not in text and "pack_root" not in text
        assert same_value(gcfkit.loads(text), rows)


def test_policy_names_the_identity_column() -> None:
    rows = [
        {"sku": f"K{i}", "qty": i, "title": f"part number {i}", "bin": "A-7"} for i in range(40)
    ]
    policy = Policy.from_mapping({"tools": {"stock": {"delta": True, "key": "sku"}}})
    core = delta_core(policy=policy)
    deliver(core, 1, rows)
    changed = [*rows[:-1], {**rows[-1], "qty": 0}]
    text, decision = deliver(core, 2, changed)
    assert decision == "delta" and "K39|0|" in text
    assert "key=sku" in text.split("\n", 1)[0]


def test_a_non_keyed_result_forgets_the_base() -> None:
    core = delta_core()
    deliver(core, 1, stock(1))
    deliver(core, 2, [{"v": 1, "w": "x"}] * 12)
    text, decision = deliver(core, 3, stock(2))
    assert decision == "gcf" and same_value(gcfkit.loads(text), stock(2))


# --------------------------------------------------------------------------------------
# Malformed and adversarial messages
# --------------------------------------------------------------------------------------

DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    "data",
    [
        DEEP + b"\n",
        b'{"jsonrpc":"2.0","id":{"x":1},"method":"tools/call","params":{"name":"t"}}\n',
        b'{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"t"}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":7}\n',
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"nope"}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5,"arguments":[]}}\n',
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":"x"}}\n',
        b'{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"capabilities":[]}}\n',
        b'{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"capabilities":'
        b'{"experimental":{"output_format":"yaml"}}}}\n',
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}\n',
        b"[1, 2, {}]\n",
    ],
)
def test_adversarial_client_lines_pass_and_do_not_break_the_core(data: bytes) -> None:
    core = ProxyCore(cfg(primer=True))
    assert core.from_client(data) == [Output("server", data)]
    # The session still works afterwards.
    _, down = call(core, "t", text_result(pretty(ORDERS)), msg_id=99)
    assert delivered_result(down)["content"][0]["text"].startswith("GCF")


@pytest.mark.parametrize(
    "result",
    [
        text_result("[" * 100_000 + "]" * 100_000),
        text_result('{"a": ' * 5_000 + "1" + "}" * 5_000),
        {"content": [{"type": "text", "text": pretty(ORDERS)}], "isError": "yes"},
        {"content": [None, 5, "x", {"type": "text", "text": "[1,2]"}]},
    ],
)
def test_adversarial_results_never_break_the_relay(result: Any) -> None:
    core = ProxyCore(cfg())
    core.from_client(request(1, "tools/call", {"name": "t", "arguments": {}}))
    (out,) = core.from_server(response(1, result))
    assert out.to == "client"
    got = json.loads(out.data)["result"]
    for before, after in zip(result["content"], got["content"], strict=True):
        if isinstance(before, dict) and isinstance(before.get("text"), str):
            text = after["text"]
            if text == before["text"]:
                continue
            decoded = gcfkit.loads(text) if text.startswith("GCF") else json.loads(text)
            assert same_value(decoded, json.loads(before["text"]))
        else:
            assert after == before
    assert len(core.pop_records()) == 1


@pytest.mark.parametrize(
    "result",
    [
        {"tools": "nope"},
        {"tools": [None, {"name": 5}, {"name": "x", "inputSchema": "bad"}]},
    ],
)
def test_malformed_tools_list_passes(result: Any) -> None:
    core = ProxyCore(cfg(advertise_format=True, decode_args=True))
    core.from_client(request(1, "tools/list"))
    data = response(1, result)
    assert core.from_server(data) == [Output("client", data)]


def test_response_to_a_request_id_reused_after_its_answer() -> None:
    core = ProxyCore(cfg())
    _, first = call(core, "t", text_result(pretty(ORDERS)), msg_id=1)
    assert delivered_result(first)["content"][0]["text"].startswith("GCF")
    # A second, unsolicited answer to id 1 is not a tool result any more.
    data = response(1, text_result(pretty(ORDERS)))
    assert core.from_server(data) == [Output("client", data)]


def test_task_augmented_calls_are_rewritten_at_tasks_result() -> None:
    core = ProxyCore(cfg())
    params = {"name": "list_orders", "arguments": {}, "task": {"ttl": 60000}}
    core.from_client(request(1, "tools/call", params))
    task = {"taskId": "t-1", "status": "working", "createdAt": "x", "lastUpdatedAt": "x"}
    created = response(1, {"task": task})
    assert core.from_server(created) == [Output("client", created)]
    assert core.pop_records() == []
    # tasks/get is relayed as is; tasks/result carries the tool result.
    core.from_client(request(2, "tasks/get", {"taskId": "t-1"}))
    status = response(2, {**task, "status": "completed"})
    assert core.from_server(status) == [Output("client", status)]
    core.from_client(request(3, "tasks/result", {"taskId": "t-1"}))
    got = delivered_result(core.from_server(response(3, text_result(pretty(ORDERS)))))
    assert same_value(gcfkit.loads(got["content"][0]["text"]), ORDERS)
    (record,) = core.pop_records()
    assert record.tool == "list_orders" and record.decision == "gcf"
    # An unknown task id is not a tool result.
    core.from_client(request(4, "tasks/result", {"taskId": "nope"}))
    data = response(4, text_result(pretty(ORDERS)))
    assert core.from_server(data) == [Output("client", data)]


def test_the_core_says_when_a_tool_result_may_come_next() -> None:
    # The stdio shell warms the core up in a thread and awaits it only before such a line.
    core = ProxyCore(cfg())
    assert not core.expects_tool_result
    core.from_client(request(1, "initialize", {"capabilities": {}}))
    assert not core.expects_tool_result
    core.from_client(request(2, "tools/call", {"name": "t", "arguments": {}}))
    assert core.expects_tool_result
    core.from_server(response(2, text_result("[1]")))
    assert not core.expects_tool_result


def test_the_core_reads_only_the_clock_it_is_given() -> None:
    looks: list[int] = []

    def clock() -> float:
        looks.append(1)
        return 0.0

    core = ProxyCore(cfg(), clock=clock)
    call(core, "t", text_result(pretty(ORDERS)))
    assert looks  # the time budget is measured on the injected clock
    assert core.pop_records()[0].encode_ms == 0.0


def test_a_policy_answers_each_tool_as_it_did_the_first_time() -> None:
    policy = Policy.from_mapping(
        {"tools": {"read_*": {"format": "json"}, "list_x": {"file": True}}, "file_tools": ["get"]}
    )
    tools = ["read_file", "list_x", "get", "search", "readFile"]
    first = [
        (policy.for_tool(t), policy.for_tool(t, file=True), policy.is_file_tool(t)) for t in tools
    ]
    # Asked in the other order, and again: what is remembered per tool is each question's
    # own answer (a file=True policy is not an answer to "is it a file tool").
    again = [
        (policy.for_tool(t), policy.for_tool(t, file=True), policy.is_file_tool(t))
        for t in reversed(tools)
    ]
    fresh = Policy.from_mapping(
        {"tools": {"read_*": {"format": "json"}, "list_x": {"file": True}}, "file_tools": ["get"]}
    )
    assert [fresh.is_file_tool(t) for t in tools] == [f[2] for f in first]
    assert first == list(reversed(again))
    assert [f[2] for f in first] == [True, True, True, False, True]
    assert policy.is_file_tool("search", {"name": "search"}) is False
    assert policy == fresh and hash(policy.defaults) == hash(fresh.defaults)
