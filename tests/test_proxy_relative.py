"""The proxy core's relative answers (docs/extensions/relative-answers.md), rule by rule, sans
I/O: naming results, ``_since``, the three answers, and every case that must get the full
result instead (unknown, expired or foreign handles, other arguments, a second reader, a
client that compacted its context), plus ``--delta session`` and the keyed §10a deltas."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import gcfkit
from gcfkit import relative
from gcfkit.answers.primer import PRIMER, RELATIVE_PRIMER
from gcfkit.answers.since import FREE_NAMING_BYTES
from gcfkit.jsonio import same_value
from gcfkit.proxy.core import SINCE_ARGUMENT, ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy, ToolPolicy
from gcfkit.relative import ResultMemory
from tests.proxy_support import call, delivered_result, pretty, request, response, text_result

GRAPH: dict[str, Any] = {
    "entities": [
        {
            "name": f"commit {i:07x}",
            "entityType": "commit",
            "status": "open" if i % 3 else "merged",
            "message": f"message of commit number {i}",
        }
        for i in range(30)
    ],
    "log": [f"event {i}" for i in range(10)],
}
ROOT = Path(__file__).resolve().parent.parent
STATUS = (
    "Repository status:\nOn branch main\nChanges not staged for commit:\n"
    '  (use "git add <file>..." to update what will be committed)\n'
    "\tmodified:   README.md\n\tmodified:   src/gcfkit/proxy/since.py\n"
)
LOG = "".join(
    f"Commit: {i:040x}\nAuthor: Dayna Blackwell\nMessage: change number {i}\n\n" for i in range(20)
)


def core_of(**options: Any) -> ProxyCore:
    # v3.5.3 payloads unless a test asks: tests/test_proxy_dense.py covers dense results.
    options.setdefault("primer", False)
    options.setdefault("dense", ())
    options.setdefault("time_budget", 60.0)
    memory = options.pop("memory", None)
    return ProxyCore(
        ProxyConfig(**options),
        memory=memory if memory is not None else (lambda: ResultMemory(seed=1)),
    )


def texts_of(down: Any) -> list[str]:
    return [b["text"] for b in delivered_result(down)["content"] if b["type"] == "text"]


def ref_of(texts: list[str]) -> str | None:
    for text in texts:
        ref = relative.ref_of(text)
        if ref is not None:
            return ref
    return None


def forwarded(up: Any) -> dict[str, Any]:
    (out,) = up
    assert out.to == "server"
    params: dict[str, Any] = json.loads(out.data)["params"]
    return params


class Agent:
    """A client that reads what the proxy delivers as a model would: it holds every named
    result (unless told to forget it) and resolves answers against what it holds."""

    def __init__(self, core: ProxyCore) -> None:
        self.core = core
        self.reader = relative.Reader()
        self.last: dict[str, str] = {}
        self.n = 0

    def call(
        self, tool: str, text: str, args: dict[str, Any] | None = None, since: Any = "latest"
    ) -> tuple[Any, list[str], dict[str, Any]]:
        args = dict(args or {})
        slot = tool + json.dumps(args, sort_keys=True)
        if since == "latest":
            since = self.last.get(slot)
        if since is not None:
            args[SINCE_ARGUMENT] = since
        self.n += 1
        up, down = call(self.core, tool, text_result(text), args=args, msg_id=self.n)
        texts = texts_of(down)
        main = texts[0]
        if relative.is_answer(main) or main.startswith("GCF profile=generic"):
            value = self.reader.read(main)
        else:
            value = main
            ref = ref_of(texts[1:])
            if ref is not None:
                is_json = main.lstrip()[:1] in ("[", "{")
                self.reader.hold(ref, json.loads(main) if is_json else main, text=not is_json)
        ref = ref_of(texts)
        if ref is not None:
            self.last[slot] = ref
        return value, texts, forwarded(up)


def test_a_gcf_result_is_named_in_its_header() -> None:
    core = core_of()
    _, down = call(core, "read_graph", text_result(pretty(GRAPH)))
    (text,) = texts_of(down)
    assert re.match(r"GCF profile=generic ref=[1-9][0-9]{5}\n", text)
    assert same_value(gcfkit.loads(text), GRAPH)
    (record,) = core.pop_records()
    assert record.decision == "gcf"
    assert record.tokens_after < record.tokens_before


def test_since_is_stripped_and_an_identical_repeat_is_unchanged() -> None:
    core = core_of()
    agent = Agent(core)
    _, first, _ = agent.call("read_graph", pretty(GRAPH))
    handle = ref_of(first)
    value, texts, params = agent.call("read_graph", pretty(GRAPH))
    assert SINCE_ARGUMENT not in params["arguments"]
    assert texts == [f"@@ unchanged tool=read_graph since={handle}\n"]
    assert same_value(value, GRAPH)
    records = core.pop_records()
    assert records[-1].decision == "since-unchanged"
    assert records[-1].tokens_after < 15 < records[-1].tokens_before


def test_a_changed_repeat_is_a_verified_patch_and_chains() -> None:
    core = core_of()
    agent = Agent(core)
    agent.call("read_graph", pretty(GRAPH))
    new = json.loads(json.dumps(GRAPH))
    new["entities"][4]["status"] = "merged"
    new["log"].append("tagged as release candidate")
    value, texts, _ = agent.call("read_graph", pretty(new))
    assert texts[0].startswith("@@ patch tool=read_graph since=")
    assert "set|entities[name=commit 0000004].status|merged" in texts[0]
    assert "append|log|tagged as release candidate" in texts[0]
    assert same_value(value, new)
    newer = json.loads(json.dumps(new))
    del newer["entities"][7]
    value, texts, _ = agent.call("read_graph", pretty(newer))  # since = the patched result
    assert "del|entities[name=commit 0000007]" in texts[0]
    assert same_value(value, newer)
    assert [r.decision for r in core.pop_records()] == ["gcf", "since-patch", "since-patch"]


def test_a_since_given_as_a_number_names_the_handle() -> None:
    core = core_of()
    agent = Agent(core)
    _, first, _ = agent.call("read_graph", pretty(GRAPH))
    handle = ref_of(first)
    assert handle is not None
    _, texts, _ = agent.call("read_graph", pretty(GRAPH), since=int(handle))
    assert texts[0].startswith("@@ unchanged ")


@pytest.mark.parametrize("since", ["999999", "abc def", None, True, 3.5, ["x"]])
def test_an_unknown_or_malformed_handle_gets_the_full_result(since: Any) -> None:
    core = core_of()
    agent = Agent(core)
    agent.call("read_graph", pretty(GRAPH))
    _, texts, params = agent.call("read_graph", pretty(GRAPH), since=since)
    assert texts[0].startswith("GCF profile=generic ref=")
    assert SINCE_ARGUMENT not in params["arguments"]


def test_an_expired_handle_gets_the_full_result() -> None:
    core = core_of(memory=lambda: ResultMemory(max_results=1, seed=2))
    agent = Agent(core)
    _, first, _ = agent.call("read_graph", pretty(GRAPH))
    agent.call("search_nodes", pretty(GRAPH), args={"query": "x"})  # evicts the first
    _, texts, _ = agent.call("read_graph", pretty(GRAPH), since=ref_of(first))
    assert texts[0].startswith("GCF profile=generic ref=")


def test_other_arguments_or_another_tool_get_the_full_result() -> None:
    core = core_of()
    agent = Agent(core)
    _, first, _ = agent.call("search_nodes", pretty(GRAPH), args={"query": "gcf"})
    handle = ref_of(first)
    _, texts, _ = agent.call("search_nodes", pretty(GRAPH), args={"query": "go"}, since=handle)
    assert texts[0].startswith("GCF profile=generic ref=")
    _, texts, _ = agent.call("open_nodes", pretty(GRAPH), args={"query": "gcf"}, since=handle)
    assert texts[0].startswith("GCF profile=generic ref=")
    _, texts, _ = agent.call("search_nodes", pretty(GRAPH), args={"query": "gcf"}, since=handle)
    assert texts[0].startswith("@@ unchanged ")


def test_a_second_reader_that_never_saw_the_handle_gets_full_results() -> None:
    # A sub-agent on the same connection calls without _since: it is never handed an
    # answer relative to what the main agent holds, however often the call repeats.
    core = core_of()
    main, sub = Agent(core), Agent(core)
    main.call("read_graph", pretty(GRAPH))
    for _ in range(3):
        value, texts, _ = sub.call("read_graph", pretty(GRAPH), since=None)
        assert texts[0].startswith("GCF profile=generic ref=")
        assert same_value(value, GRAPH)
    _, texts, _ = main.call("read_graph", pretty(GRAPH))
    assert texts[0].startswith("@@ unchanged ")


def test_a_client_that_compacted_its_context_gets_full_results() -> None:
    core = core_of()
    agent = Agent(core)
    _, first, _ = agent.call("read_graph", pretty(GRAPH))
    agent.reader.forget(ref_of(first) or "")
    agent.last.clear()  # after compaction the handle is gone with the result
    value, texts, _ = agent.call("read_graph", pretty(GRAPH))
    assert texts[0].startswith("GCF profile=generic ref=")
    assert same_value(value, GRAPH)


def test_session_mode_answers_unasked_and_reanchors() -> None:
    core = core_of(session_deltas=True, reanchor=3)
    agent = Agent(core)
    agent.call("read_graph", pretty(GRAPH), since=None)
    kinds = []
    for _ in range(8):
        _, texts, _ = agent.call("read_graph", pretty(GRAPH), since=None)
        kinds.append(texts[0].split(" ", 2)[1] if texts[0].startswith("@@") else "full")
    assert kinds == ["unchanged"] * 3 + ["full"] + ["unchanged"] * 3 + ["full"]


def test_without_session_mode_a_repeat_without_since_is_full() -> None:
    core = core_of()
    agent = Agent(core)
    for _ in range(3):
        _, texts, _ = agent.call("read_graph", pretty(GRAPH), since=None)
        assert texts[0].startswith("GCF profile=generic ref=")


def test_patch_chains_reanchor() -> None:
    core = core_of(reanchor=2)
    agent = Agent(core)
    agent.call("read_graph", pretty(GRAPH))
    kinds = []
    value = GRAPH
    for i in range(5):
        value = json.loads(json.dumps(value))
        value["log"].append(f"note {i}")
        got, texts, _ = agent.call("read_graph", pretty(value))
        assert same_value(got, value)
        kinds.append("patch" if texts[0].startswith("@@ patch") else "full")
    assert kinds == ["patch", "patch", "full", "patch", "patch"]


def test_a_patch_that_is_not_clearly_smaller_is_not_sent() -> None:
    core = core_of()
    agent = Agent(core)
    agent.call("read_graph", pretty(GRAPH))
    other = {"entities": [{**e, "entityType": "tag"} for e in GRAPH["entities"]]}
    value, texts, _ = agent.call("read_graph", pretty(other))
    assert texts[0].startswith("GCF profile=generic ref=")
    assert same_value(value, other)


def test_a_patch_gcf_cannot_carry_falls_back_to_the_full_result() -> None:
    core = core_of(refs="all")
    agent = Agent(core)
    # A GCF table gives its rows the field-union key order (spec §7.4.3): this patch's
    # value cannot travel as GCF, so the patch is refused and the full result goes out.
    held = {"note": "x" * 400}
    agent.call("t", pretty(held))
    new = {**held, "rows": [{"a": 1, "b": 2}, {"b": 3, "a": 4}]}
    value, texts, _ = agent.call("t", pretty(new))
    assert not texts[0].startswith("@@")
    assert same_value(json.loads(value), new)
    # The GCF form fails its check first (the rows' key order), then the patch does.
    assert core.pop_records()[-1].decision in ("fallback:selfcheck", "fallback:since-selfcheck")


def test_a_tool_that_declares_since_keeps_it() -> None:
    core = core_of()
    tools = {"tools": [{"name": "feed", "inputSchema": {"type": "object", "properties": {
        SINCE_ARGUMENT: {"type": "string"}}}}]}  # fmt: skip
    core.from_client(request(0, "tools/list", {}))
    core.from_server(response(0, tools))
    agent = Agent(core)
    _, first, _ = agent.call("feed", pretty(GRAPH))
    _, texts, params = agent.call("feed", pretty(GRAPH), since=ref_of(first))
    assert params["arguments"][SINCE_ARGUMENT] == ref_of(first)
    assert texts[0].startswith("GCF profile=generic ref=")


def test_small_text_results_are_named_once_the_client_uses_since() -> None:
    core = core_of()
    agent = Agent(core)
    assert 128 <= len(STATUS) < FREE_NAMING_BYTES
    _, texts, _ = agent.call("git_status", STATUS)
    assert texts == [STATUS]  # auto: a ref= block would make it larger than the server's
    agent.call("read_graph", pretty(GRAPH))
    agent.call("read_graph", pretty(GRAPH))  # the client passes _since: it reads names
    _, texts, _ = agent.call("git_status", STATUS)
    assert texts[0] == STATUS and re.fullmatch(r"ref=[1-9][0-9]{5}", texts[1])
    value, texts, _ = agent.call("git_status", STATUS)
    assert texts == [f"@@ unchanged tool=git_status since={agent.last['git_status{}']}\n"]
    assert value == STATUS


def test_large_text_results_are_named_from_the_start() -> None:
    # A git session never returns GCF, so the client never gets to pass _since first: a
    # result large enough that its ref= block is ~1% of it is named anyway (auto mode).
    core = core_of()
    agent = Agent(core)
    assert len(LOG) >= FREE_NAMING_BYTES
    _, texts, _ = agent.call("git_log", LOG)
    assert texts[0] == LOG and re.fullmatch(r"ref=[1-9][0-9]{5}", texts[1])
    block = gcfkit.tokens.count(texts[1])
    assert block <= 0.02 * gcfkit.tokens.count(LOG)
    value, texts, _ = agent.call("git_log", LOG)
    assert texts == [f"@@ unchanged tool=git_log since={agent.last['git_log{}']}\n"]
    assert value == LOG
    grown = "Commit: " + "f" * 40 + "\nAuthor: Dayna Blackwell\nMessage: new\n\n" + LOG
    value, texts, _ = agent.call("git_log", grown)
    assert texts[0].startswith("@@ edit tool=git_log since=")
    assert value == grown
    # Other arguments are another call: the full result, whatever the client names.
    _, texts, _ = agent.call("git_log", grown, args={"max_count": 5}, since=agent.last["git_log{}"])
    assert texts[0] == grown


def test_a_large_file_read_is_named_from_the_start_and_never_edited() -> None:
    core = core_of()
    agent = Agent(core)
    source = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(60))
    assert len(source) >= FREE_NAMING_BYTES
    args = {"path": "src/f.py"}
    _, texts, _ = agent.call("read_text_file", source, args=args)
    assert texts[0] == source and relative.ref_of(texts[1]) is not None
    value, texts, _ = agent.call("read_text_file", source, args=args)
    assert texts[0].startswith("@@ unchanged tool=read_text_file ") and value == source
    edited = source.replace("return x + 7\n", "return x + 70\n")
    _, texts, _ = agent.call("read_text_file", edited, args=args)
    assert texts[0] == edited  # byte for byte, never an @@ edit


def test_free_naming_is_auto_only() -> None:
    for refs, named in (("auto", True), ("all", True), ("off", False)):
        agent = Agent(core_of(refs=refs))
        _, texts, _ = agent.call("git_log", LOG)
        assert (len(texts) == 2) is named, refs
    agent = Agent(core_of(ref_free_bytes=len(LOG) + 1))
    _, texts, _ = agent.call("git_log", LOG)
    assert texts == [LOG]


def test_refs_all_names_text_results_from_the_start() -> None:
    core = core_of(refs="all")
    agent = Agent(core)
    _, texts, _ = agent.call("git_log", LOG)
    assert texts[0] == LOG and relative.ref_of(texts[1]) is not None
    _, texts, _ = agent.call("git_log", LOG)
    assert texts[0].startswith("@@ unchanged ")


def test_refs_off_names_nothing_and_answers_nothing() -> None:
    core = core_of(refs="off")
    agent = Agent(core)
    _, texts, _ = agent.call("read_graph", pretty(GRAPH))
    assert texts[0].startswith("GCF profile=generic\n")
    _, texts, params = agent.call("read_graph", pretty(GRAPH), since="123456")
    assert texts[0].startswith("GCF profile=generic\n")
    assert SINCE_ARGUMENT not in params["arguments"]


def test_file_reads_stay_byte_for_byte_and_only_a_reread_is_unchanged() -> None:
    core = core_of(refs="all")
    agent = Agent(core)
    package = pretty(
        {"name": "demo", "version": "1.0.0", "dependencies": {f"pkg-{i}": "1" for i in range(9)}}
    )
    _, texts, _ = agent.call("read_text_file", package, args={"path": "package.json"})
    assert texts[0] == package and relative.ref_of(texts[1]) is not None
    _, texts, _ = agent.call("read_text_file", package, args={"path": "package.json"})
    assert texts[0].startswith("@@ unchanged tool=read_text_file ")
    edited = package.replace('"1"', '"2"', 1)
    _, texts, _ = agent.call("read_text_file", edited, args={"path": "package.json"})
    assert texts[0] == edited  # a changed file is never an edit: its bytes, in full


def test_initialize_starts_a_new_session() -> None:
    core = core_of()
    agent = Agent(core)
    _, first, _ = agent.call("read_graph", pretty(GRAPH))
    core.from_client(request(50, "initialize", {"capabilities": {}}))
    core.from_server(response(50, {"protocolVersion": "2025-11-25", "capabilities": {}}))
    _, texts, _ = agent.call("read_graph", pretty(GRAPH), since=ref_of(first))
    assert texts[0].startswith("GCF profile=generic ref=")
    assert ref_of(texts) != ref_of(first)  # handles are never issued twice


def test_keyed_deltas_keep_working_with_refs() -> None:
    rows = [{"id": i, "sku": f"S{i}", "qty": i} for i in range(40)]
    core = core_of(policy=Policy(defaults=ToolPolicy(delta=True)))
    consumer_rows = rows
    _, down = call(core, "list_stock", text_result(pretty(rows)), msg_id=1)
    (text,) = texts_of(down)
    assert text.startswith("GCF profile=generic ref=")
    changed = [dict(r) for r in rows]
    changed[5]["qty"] = 99
    _, down = call(core, "list_stock", text_result(pretty(changed)), msg_id=2)
    (text,) = texts_of(down)
    assert "delta=true" in text.split("\n", 1)[0] and " ref=" in text.split("\n", 1)[0]
    applied = gcfkit.keyed.apply_delta(
        gcfkit.keyed.KeyedSet("id", ["id", "sku", "qty"], consumer_rows),
        gcfkit.keyed.loads_delta(text),
    )
    assert sorted(applied.rows, key=lambda r: r["id"]) == changed


def test_the_primer_says_how_to_ask_and_tools_may_advertise_since() -> None:
    core = core_of(primer=True, advertise_format=True)
    core.from_client(request(0, "initialize", {"capabilities": {}}))
    init = delivered_result(
        core.from_server(response(0, {"protocolVersion": "2025-11-25", "instructions": "Hi."}))
    )
    # How to ask travels up front; how to read GCF travels with each payload (the default).
    assert init["instructions"] == f"Hi.\n\n{RELATIVE_PRIMER}"
    up_front = core_of(primer=True, primer_carrier="instructions", dense=())
    up_front.from_client(request(0, "initialize", {"capabilities": {}}))
    init = delivered_result(
        up_front.from_server(response(0, {"protocolVersion": "2025-11-25", "instructions": "Hi."}))
    )
    assert init["instructions"] == f"Hi.\n\n{PRIMER}\n\n{RELATIVE_PRIMER}"
    core.from_client(request(1, "tools/list", {}))
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {}}}
    listed = delivered_result(core.from_server(response(1, {"tools": [tool]})))
    assert SINCE_ARGUMENT in listed["tools"][0]["inputSchema"]["properties"]
    off = core_of(primer=True, refs="off")
    off.from_client(request(0, "initialize", {"capabilities": {}}))
    init = delivered_result(
        off.from_server(response(0, {"protocolVersion": "2025-11-25", "instructions": "Hi."}))
    )
    assert RELATIVE_PRIMER not in init["instructions"]


def test_the_relative_primer_is_complete_short_and_the_one_the_document_quotes() -> None:
    # How to ask (the argument, the handle it names) and how to read each answer kind; the
    # literal "_since" is also how gcfkit doctor recognises the proxy in instructions.
    for part in ('"_since":"N"', "ref=N", "@@ unchanged", "@@ patch", "@@ edit", "=A-B", "+x"):
        assert part in RELATIVE_PRIMER, part
    # Sent once per session whether or not a result is ever named: it is kept short.
    assert gcfkit.tokens.count(RELATIVE_PRIMER) <= 56
    assert gcfkit.tokens.count(RELATIVE_PRIMER, "cl100k_base") <= 56
    doc = (ROOT / "docs" / "extensions" / "relative-answers.md").read_text(encoding="utf-8")
    quoted = " ".join(
        line.strip()[1:].strip() for line in doc.splitlines() if line.strip().startswith(">")
    )
    assert RELATIVE_PRIMER in quoted


def test_auto_naming_never_makes_a_result_larger_than_compact_json() -> None:
    core = core_of()
    small = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    for i in range(3):
        _, down = call(core, "t", text_result(pretty(small)), msg_id=i)
        (text,) = [t for t in texts_of(down) if not t.startswith("ref=")]
        compact = json.dumps(small, separators=(",", ":"))
        named = sum(gcfkit.tokens.count(t) for t in texts_of(down))
        assert named <= gcfkit.tokens.count(compact), text
