"""What a tool result may cost the proxy (issue 11, item 1), in process: the size estimate
that refuses an exploding GCF before it is built, counting the likely winner first (with
the same choice exact counts give), the delta state after a fallback, the order in which
the relay lets lines go, and the envelope of a huge line read from its two ends."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gcfkit
from gcfkit import tokens
from gcfkit.answers.choose import AnswerPolicy, Candidates, Cost, Form, choose, utf8_len
from gcfkit.jsonio import dumps_compact, same_value
from gcfkit.proxy.config import Codec, ProxyConfig
from gcfkit.proxy.core import Output, ProxyCore, ToolJob
from gcfkit.proxy.jsonrpc import sniff_envelope
from gcfkit.proxy.policy import Policy, ToolPolicy
from gcfkit.proxy.rewrite import Budget, Call, Rewriter, gcf_cells
from gcfkit.proxy.sequencer import Sequencer
from gcfkit.relative import ResultMemory
from tests.proxy_support import Client, by_id

# These rules are about the v3.5.3 form against the plain ones (dense=() throughout);
# tests/test_proxy_forms.py races the dense form, where gcfkit.dense is installed.


def line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def tool_call(core: ProxyCore, msg_id: int, text: str, args: Any = None) -> list[Output]:
    params = {"name": "t", "arguments": args or {}}
    call = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}
    core.from_client(line(call))
    result = {"content": [{"type": "text", "text": text}]}
    return core.from_server(line({"jsonrpc": "2.0", "id": msg_id, "result": result}))


def delivered(outputs: list[Output]) -> str:
    (out,) = outputs
    text: str = json.loads(out.data)["result"]["content"][0]["text"]
    return text


def union_rows(n: int) -> list[dict[str, int]]:
    return [{f"k{i}": i} for i in range(n)]


# --------------------------------------------------------------------------------------
# Estimate before building
# --------------------------------------------------------------------------------------


def test_an_exploding_union_is_refused_before_gcf_is_built() -> None:
    """4,000 records with one distinct key each: 57 KB of JSON, 32 MB of GCF (rows x the
    field union). Before, the proxy built and counted it (17 s for 8,000 through the
    proxy); now it is never built, and compact JSON goes out."""
    built: list[int] = []

    def dumps(value: Any) -> str:
        if isinstance(value, list) and len(value) > 100:  # not the warm-up's
            built.append(len(value))
        return gcfkit.dumps(value)

    core = ProxyCore(ProxyConfig(dense=(), primer=False, time_budget=600), Codec(dumps=dumps))
    rows = union_rows(4000)
    started = time.monotonic()
    text = delivered(tool_call(core, 1, json.dumps(rows)))
    assert built == []
    assert text == dumps_compact(rows)
    assert core.pop_records()[0].decision == "json-minified"
    assert time.monotonic() - started < 30  # it took minutes before; any machine does this


def test_a_dense_table_still_becomes_gcf() -> None:
    rows = [{"id": i, "name": f"n{i}", "price": i * 1.25} for i in range(500)]
    core = ProxyCore(ProxyConfig(dense=(), primer=False, time_budget=600))
    text = delivered(tool_call(core, 1, json.dumps(rows, indent=2)))
    assert text.startswith("GCF profile=generic") and same_value(gcfkit.loads(text), rows)


def test_gcf_cells_is_rows_times_union_for_every_table() -> None:
    assert gcf_cells(union_rows(100)) == 100 * 100
    assert gcf_cells([{"a": 1, "b": 2}] * 10) == 20
    nested = {"t": [{"x": [{"p": 1}, {"q": 2}]}, {"y": 1}]}  # [2]{x,y} and [2]{p,q}
    assert gcf_cells(nested) == 4 + 4
    keyed_map = {"a": {"k1": 1}, "b": {"k2": 2}, "c": {"k3": 3}}  # §7.2a: 3 rows x 3
    assert gcf_cells(keyed_map) == 9
    assert gcf_cells([1, "x", None]) == 0
    assert gcf_cells(union_rows(1000), stop=10) > 10  # stops early


JSON_SCALARS = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=6)
KEYS = st.sampled_from(["a", "b", "c", "d", "id", "name", "k1", "k2", "k3", "x y"])
ROWS = st.lists(st.dictionaries(KEYS, JSON_SCALARS, max_size=5), min_size=1, max_size=30)
VALUES = st.recursive(
    JSON_SCALARS | ROWS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(VALUES)
def test_each_cell_costs_at_least_a_quarter_token(value: Any) -> None:
    """The refusal is sound: GCF has at least cells / 4 tokens, in both encodings, so past
    4 x the JSON's tokens it cannot win and nothing is lost by not building it."""
    text = gcfkit.dumps(value)
    cells = gcf_cells(value)
    for encoding in tokens.ENCODINGS:
        assert tokens.count(text, encoding) >= cells / 4


# --------------------------------------------------------------------------------------
# Count the likely winner first: the same choice as exact counts, exact ledger numbers
# --------------------------------------------------------------------------------------


def exact_choice(value: Any, original: str) -> tuple[str | None, int, int]:
    """What the one answer policy picks with every form counted in full, and the exact
    tokens before and after (the reference the bounded counting must match)."""
    compact = dumps_compact(value)
    count = tokens.count
    json_form = Form(compact, count(compact), utf8_len(compact))
    before = Cost(count(original), utf8_len(original))
    gcf = gcfkit.dumps(value)
    gcf_form = Form(gcf, count(gcf), utf8_len(gcf))
    candidates = Candidates(json=json_form, original=before, gcf=gcf_form)
    policy = AnswerPolicy(delta_ratio=0.6, tracks_delivery=True)
    choice = choose(candidates, policy)
    if choice.decision == "gcf" and not same_value(gcfkit.loads(gcf), value):
        # The self-check refuses a GCF that does not give the value back (key order).
        choice = choose(Candidates(json=json_form, original=before), policy)
    return choice.text, before.tokens, choice.tokens


def unbounded(text: str, limit: int, encoding: str) -> int | None:
    """A "limited" count that counts everything: the reference, exact counting."""
    return tokens.count(text, encoding)


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    ROWS | st.lists(VALUES, min_size=1, max_size=5),
    st.sampled_from([None, 0, 2]),
    st.sampled_from(["off", "auto", "all"]),
)
def test_bounded_counting_makes_the_choice_exact_counting_makes(
    value: Any, indent: Any, refs: Any
) -> None:
    """Counting only up to the count to beat changes nothing that is delivered or recorded:
    the same bytes (names included) and the same ledger numbers as counting every form in
    full, and for unnamed results the choice of the one answer policy with full counts."""
    original = json.dumps(value, indent=indent)
    outputs = []
    records = []
    for limited in (None, unbounded):
        config = ProxyConfig(dense=(), primer=False, time_budget=600, refs=refs)
        codec = Codec(count_till_limit=limited)
        core = ProxyCore(config, codec, memory=lambda: ResultMemory(seed=7))
        outputs.append(tool_call(core, 1, original))
        records.append([replace(r, encode_ms=0.0) for r in core.pop_records()])
    assert outputs[0] == outputs[1]
    assert records[0] == records[1]
    if refs == "off":
        text = json.loads(outputs[0][0].data)["result"]["content"][0]["text"]
        want_text, want_before, want_after = exact_choice(value, original)
        assert text == (original if want_text is None else want_text)
        assert (records[0][0].tokens_before, records[0][0].tokens_after) == (
            want_before,
            want_after,
        )


def test_a_losing_text_is_counted_only_up_to_the_winner() -> None:
    rows = [{"id": i, "name": f"item {i}", "ok": i % 2 == 0} for i in range(2000)]
    original = json.dumps(rows, indent=2)
    seen: list[tuple[int, int]] = []

    def count_till_limit(text: str, limit: int, encoding: str) -> int | None:
        seen.append((len(text), limit))
        return tokens.count_till_limit(text, limit, encoding)

    codec = Codec(count_till_limit=count_till_limit, settle=False)  # the exact path
    # Unnamed (refs off): a named result's limits leave room for what the name costs.
    core = ProxyCore(ProxyConfig(dense=(), primer=False, time_budget=600, refs="off"), codec)
    text = delivered(tool_call(core, 1, original))
    gcf_tokens = tokens.count(text)
    assert text.startswith("GCF")
    # Compact JSON and the original were each counted only up to the GCF's count.
    assert sorted(limit for _, limit in seen) == [gcf_tokens, gcf_tokens]
    record = core.pop_records()[0]
    assert record.tokens_before == tokens.count(original)  # exact, counted after the answer


# --------------------------------------------------------------------------------------
# After a fallback the client holds the original: no delta against an older set
# --------------------------------------------------------------------------------------


def stock(turn: int) -> list[dict[str, Any]]:
    return [{"id": f"S-{i}", "qty": 50 + i + (turn if i == 3 else 0)} for i in range(30)]


@pytest.mark.parametrize("how", ["time-budget", "format-json"])
def test_after_the_original_goes_out_the_next_delta_is_against_it(how: str) -> None:
    ticks = {"slow": False, "now": 0.0}

    def clock() -> float:
        ticks["now"] += 100.0 if ticks["slow"] else 0.001
        return ticks["now"]

    policy = Policy(defaults=ToolPolicy(delta=True))
    core = ProxyCore(
        ProxyConfig(dense=(), primer=False, time_budget=50, policy=policy), clock=clock
    )
    client = Client()
    assert client.read(delivered(tool_call(core, 1, json.dumps(stock(1))))) == by_id(stock(1))
    if how == "time-budget":
        ticks["slow"] = True  # every look at the clock: 100 s later
        text = delivered(tool_call(core, 2, json.dumps(stock(2))))
        ticks["slow"] = False
        assert core.pop_records()[-1].decision == "fallback:time-budget"
    else:
        text = delivered(tool_call(core, 2, json.dumps(stock(2)), {"_format": "json"}))
    assert client.read(text) == by_id(stock(2))
    # Before, the third answer was a delta against turn 1's set: applied to what the
    # client holds (turn 2's), it gave wrong rows.
    assert client.read(delivered(tool_call(core, 3, json.dumps(stock(3))))) == by_id(stock(3))


# --------------------------------------------------------------------------------------
# The relay's order (gcfkit.proxy.sequencer) and the deferred path of the core
# --------------------------------------------------------------------------------------


def test_only_responses_overtake_and_only_results_being_rewritten() -> None:
    seq: Sequencer[bytes] = Sequencer()
    r1 = seq.hold()
    seq.add(b"progress-of-r2", response=False)
    seq.add(b"r2", response=True)
    r3 = seq.hold()
    seq.add(b"ping", response=True)
    # Nothing passes the notification; r2 may not overtake its own progress.
    assert seq.ready() == []
    seq.fill(r1, b"r1")
    assert seq.ready() == [b"r1", b"progress-of-r2", b"r2", b"ping"]
    seq.fill(r3, b"r3")
    assert seq.ready() == [b"r3"]
    r4 = seq.hold()
    seq.add(b"ping2", response=True)
    seq.add(b"log", response=False)
    assert seq.ready() == [b"ping2"]
    seq.fill(r4, b"r4")
    assert seq.ready() == [b"r4", b"log"]
    assert len(seq) == 0 and seq.held == 0


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["job", "response", "other"]), max_size=30), st.randoms())
def test_the_sequencer_keeps_every_order_that_matters(kinds: list[str], rnd: Any) -> None:
    seq: Sequencer[bytes] = Sequencer()
    tickets: list[tuple[int, int]] = []
    for i, kind in enumerate(kinds):
        if kind == "job":
            tickets.append((seq.hold(), i))
        else:
            seq.add(str(i).encode(), response=kind == "response")
    out = [int(x) for x in seq.ready()]
    rnd.shuffle(tickets)
    for ticket, i in tickets:
        seq.fill(ticket, str(i).encode())
        out += [int(x) for x in seq.ready()]
    assert sorted(out) == list(range(len(kinds)))  # nothing lost or doubled
    position = {i: at for at, i in enumerate(out)}
    for i, kind in enumerate(kinds):
        for j in range(i):
            if kind == "other" or kinds[j] != "job":
                # Only a response may overtake, and only a result being rewritten.
                assert position[j] < position[i], (kinds, out)


def test_receive_server_defers_tool_results_and_answers_the_rest_at_once() -> None:
    core = ProxyCore(ProxyConfig(dense=(), primer=False))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    core.from_client(line(call))
    core.from_client(line({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    content = {"content": [{"type": "text", "text": "[1]"}]}
    result = line({"jsonrpc": "2.0", "id": 1, "result": content})
    job = core.receive_server(result)
    assert isinstance(job, ToolJob) and job.line == result and job.tool == "t"
    ping = line({"jsonrpc": "2.0", "id": 2, "result": {}})
    answered = core.receive_server(ping)
    assert answered == [Output("client", ping)]
    assert isinstance(answered, list) and answered[0].response
    note = line({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    relayed = core.receive_server(note)
    assert isinstance(relayed, list) and not relayed[0].response
    assert core.finish(job, None, failed="time-budget") == [Output("client", result)]
    assert core.pop_records()[0].decision == "fallback:time-budget"
    assert core.pending_count == 0


def test_a_huge_line_is_read_from_its_envelope_only() -> None:
    core = ProxyCore(ProxyConfig(dense=(), primer=False, max_text_bytes=1 << 20))
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "t"}}
    core.from_client(line(call))
    text = json.dumps(["x" * 100] * 30000)  # 3 MB: over max_text_bytes, relayed as is
    huge = (
        b'{"result":{"content":[{"type":"text","text":'
        + json.dumps(text).encode()
        + b'}]},"jsonrpc":"2.0","id":9}\n'
    )
    started = time.perf_counter()
    assert core.receive_server(huge) == [Output("client", huge)]
    elapsed = time.perf_counter() - started
    assert core.pending_count == 0 and core.pop_records()[0].decision == "unchanged"
    assert elapsed < 5  # a full strict parse took seconds on a 64 MB line; this reads ends


MEMBERS = st.dictionaries(
    st.sampled_from(["jsonrpc", "id", "method", "x", "é", 'q"uote']),
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    max_size=4,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(MEMBERS, MEMBERS, st.sampled_from(["result", "error", "params"]), st.booleans())
def test_the_sniffed_envelope_agrees_with_the_parser(
    head: dict[str, Any], tail: dict[str, Any], container: str, spaced: bool
) -> None:
    tail = {k: v for k, v in tail.items() if k not in head and k != container}
    head = {k: v for k, v in head.items() if k != container}
    msg = {**head, container: {"content": [{"text": 'a"b}]\\' * 50}]}, **tail}
    separators = (", ", ": ") if spaced else (",", ":")
    raw = json.dumps(msg, separators=separators, ensure_ascii=False).encode()
    envelope = sniff_envelope(raw + b"\r\n")
    assert envelope is not None
    assert envelope.container == container
    parsed = json.loads(raw)
    assert envelope.members == {k: v for k, v in parsed.items() if k != container}


def test_a_rewrite_past_its_deadline_sends_the_original() -> None:
    rewriter = Rewriter(ProxyConfig(dense=(), primer=False))
    result = {"content": [{"type": "text", "text": json.dumps(stock(1), indent=2)}]}
    out = rewriter.rewrite(result, Call("t", "t"), Budget(time.monotonic, time.monotonic() - 1))
    assert out.result is None and out.decision == "fallback:time-budget"
