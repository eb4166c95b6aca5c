#!/usr/bin/env python3
"""Benchmark: relative answers (docs/extensions/relative-answers.md) on the corpus repeats.

For each of the 18 repeated calls of ``../shared/corpus/mcp`` (``repeat_of``), the agent is
assumed to pass ``"_since"`` naming the latest earlier result of the same tool and
arguments. Counted, exactly (bpe-openai), in o200k_base and cl100k_base:

* **full**: the result as gcfkit's proxy delivers it today (its own ProxyCore, in process,
  default flags: GCF, compact JSON or the original text);
* **answer**: the answer gcfkit.relative builds against the held result (``@@ unchanged``,
  ``@@ patch`` or ``@@ edit``; file reads: ``@@ unchanged`` only for an identical re-read),
  verified by a :class:`gcfkit.relative.Reader` that holds every earlier result;
* what is sent under each size rule: a relative answer only when it is under 60%, 80% or
  90% of the full result, or whenever it is smaller;
* the cost of naming every result: ``ref=<handle>`` in each GCF header, and one
  ``ref=<handle>`` text block beside each other single-text result (all 92 calls);
* through gcfkit's proxy core, all 92 calls session by session (instructions and tool list
  counted once per session, as the model reads them): each ``--refs`` mode, with an agent
  that passes ``_since`` (the latest ref it was shown for the same call) on every repeated
  call and with one that never does, ``--delta session``, and the size rule's
  alternatives; every answer is resolved by a reader against what it holds and must give
  exactly the server's result.

    python bench/relative.py [--out bench/relative.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gcfkit import relative, tokens  # noqa: E402
from gcfkit.jsonio import loads_json, same_value  # noqa: E402
from gcfkit.proxy.core import ProxyConfig  # noqa: E402
from gcfkit.proxy.policy import Policy  # noqa: E402
from gcfkit.traffic.corpus import Call, read_session  # noqa: E402
from gcfkit.traffic.replay import Replay  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "mcp"
SERVERS = ["git", "time", "filesystem", "memory", "everything", "filesystem-npm", "serena"]
ENCODINGS = ("o200k_base", "cl100k_base")
RULES = (("60%", 0.6), ("80%", 0.8), ("90%", 0.9), ("smaller", 1.0))

# The review's per-repeat o200k figures (tokens-2026-12-01 §5.2): gcfkit as sent, and its
# "GCF-X + delta" column (one-shot GCF-X underneath, so not the same full form as here).
REVIEW = {
    "git/013_git_status": (122, 11),
    "git/014_git_log": (1507, 11),
    "git/015_git_diff_unstaged": (135, 14),
    "time/006_get_current_time": (35, 12),
    "time/007_convert_time": (84, 12),
    "filesystem/016_list_directory": (70, 11),
    "filesystem/017_get_file_info": (99, 12),
    "filesystem/018_directory_tree": (478, 12),
    "memory/008_read_graph": (684, 12),
    "memory/010_read_graph": (687, 34),
    "memory/011_search_nodes": (283, 12),
    "memory/015_read_graph": (8876, 6627),
    "memory/018_read_graph": (8882, 43),
    "everything/013_echo": (7, 7),
    "everything/014_get-structured-content": (16, 16),
    "filesystem-npm/003_read_text_file": (321, 12),
    "serena/008_get_symbols_overview": (13, 13),
    "serena/009_find_symbol": (159, 11),
}


def delivered(server: str) -> list[tuple[dict[str, Any], list[str]]]:
    """Every call of a server session with the text blocks gcfkit's proxy delivers."""
    session = read_session(CORPUS / server)
    config = ProxyConfig(primer=False, stats=False, time_budget=30.0, refs="off")
    replay = Replay(session, config)
    out = []
    for call in session.calls:
        result = replay.call(call).result or {}
        texts = [b["text"] for b in result.get("content", []) if b.get("type") == "text"]
        out.append((_raw(call), texts))
    return out


def _raw(call: Call) -> dict[str, Any]:
    """A recorded call as the corpus file holds it."""
    return {
        "server": call.server,
        "tool": call.tool,
        "arguments": call.arguments,
        "result": call.result,
        "repeat_of": call.repeat_of,
    }


def json_value(text: str) -> Any:
    s = text.lstrip()
    if not s or s[0] not in "[{":
        return None
    try:
        return loads_json(text)
    except Exception:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, help="also write the report (markdown) here")
    args = ap.parse_args()
    if not all(tokens.is_exact(e) for e in ENCODINGS):
        print("needs exact token counts: pip install 'gcfkit[tokens]'", file=sys.stderr)
        return 2
    files = Policy().file_tools
    rows: list[dict[str, Any]] = []
    ref_cost = {e: {"gcf": 0, "block": 0, "gcf_long": 0, "block_long": 0} for e in ENCODINGS}
    named = {"gcf": 0, "block": 0}
    handle = "482913"
    # What a request of no session over HTTP is named with (32 digits; their cost is the same
    # for every such handle: three digits a token).
    long_handle = relative.ResultMemory(seed=7, unguessable=True).mint() or ""
    for server in SERVERS:
        calls = delivered(server)
        latest: dict[str, int] = {}
        reader = relative.Reader()
        for n, (call, texts) in enumerate(calls):
            raw = [b["text"] for b in call["result"]["content"] if b.get("type") == "text"]
            single = len(texts) == 1 and len(call["result"]["content"]) == 1
            if single and not call["result"].get("isError"):
                if texts[0].startswith(("GCF profile=generic", "GCF-dense")):
                    named["gcf"] += 1
                    for e in ENCODINGS:
                        plain = tokens.count(texts[0], e)
                        for k, h in (("gcf", handle), ("gcf_long", long_handle)):
                            stamped = relative.stamp_ref(texts[0], h)
                            ref_cost[e][k] += tokens.count(stamped, e) - plain
                else:
                    named["block"] += 1
                    for e in ENCODINGS:
                        ref_cost[e]["block"] += tokens.count(relative.ref_block(handle), e)
                        long_block = relative.ref_block(long_handle)
                        ref_cost[e]["block_long"] += tokens.count(long_block, e)
            slot = call["tool"] + "\0" + json.dumps(call["arguments"], sort_keys=True)
            since = latest.get(slot)
            latest[slot] = n
            h = f"{100000 + n}"
            if since is None or not single:
                if single:
                    value = None if call["tool"] in files else json_value(raw[0])
                    reader.hold(h, value if value is not None else raw[0], text=value is None)
                continue
            if call["repeat_of"] is None:
                continue
            base_call, _ = calls[since]
            base_raw = base_call["result"]["content"][0]["text"]
            new_raw = raw[0]
            since_h = f"{100000 + since}"
            tool = call["tool"]
            is_file = tool in files
            held_value, new_value = json_value(base_raw), json_value(new_raw)
            if is_file:
                answer = relative.dumps_unchanged(tool, since_h) if base_raw == new_raw else None
                kind = "file"
            elif held_value is not None and new_value is not None:
                answer = relative.json_answer(
                    held_value, new_value, tool=tool, since=since_h, ref=h
                )
                kind = "json"
            else:
                answer = relative.text_answer(base_raw, new_raw, tool=tool, since=since_h, ref=h)
                kind = "text"
            if answer is not None:
                got = reader.read(answer)
                want = new_value if kind == "json" else new_raw
                ok = same_value(got, want) if kind == "json" else got == want
                assert ok, f"{server}/{call['tool']}: the reader did not rebuild the result"
            reader.hold(h, new_value if kind == "json" else new_raw, text=kind != "json")
            name = f"{server}/{n:03d}_{tool}"
            row: dict[str, Any] = {"call": name, "of": f"{since:03d}", "kind": kind}
            row["answer_kind"] = "-" if answer is None else answer.split(" ", 2)[1]
            for e in ENCODINGS:
                full = sum(tokens.count(t, e) for t in texts)
                row[f"full_{e}"] = full
                row[f"answer_{e}"] = tokens.count(answer, e) if answer is not None else None
            row["answer_text"] = answer
            rows.append(row)
    report = render(rows, ref_cost, named) + render_sessions()
    print(report)
    if args.out:
        args.out.write_text(report, encoding="utf-8")
    return 0


def sent(row: dict[str, Any], e: str, ratio: float) -> int:
    full, ans = row[f"full_{e}"], row[f"answer_{e}"]
    if ans is None:
        return int(full)
    if ratio >= 1.0:
        return int(ans) if ans < full else int(full)
    return int(ans) if ans < ratio * full else int(full)


def render(
    rows: list[dict[str, Any]], ref_cost: dict[str, dict[str, int]], named: dict[str, int]
) -> str:
    out = ["# Relative answers on the corpus repeats", ""]
    out.append(
        f"{len(rows)} repeated calls; base = the latest earlier result of the same tool and "
        "arguments. Tokens exact (bpe-openai). `full` = what gcfkit's proxy sends today."
    )
    out.append("")
    out.append(
        "| call | of | kind | answer | full o200k | answer o200k | full cl100k | answer cl100k "
        "| review gcfkit / GCF-X+delta (o200k) |"
    )
    out.append("|---|---|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        rev = REVIEW.get(r["call"])
        rv = f"{rev[0]:,} / {rev[1]:,}" if rev else "-"
        a1 = "-" if r["answer_o200k_base"] is None else f"{r['answer_o200k_base']:,}"
        a2 = "-" if r["answer_cl100k_base"] is None else f"{r['answer_cl100k_base']:,}"
        out.append(
            f"| {r['call']} | {r['of']} | {r['kind']} | {r['answer_kind']} | "
            f"{r['full_o200k_base']:,} | {a1} | {r['full_cl100k_base']:,} | {a2} | {rv} |"
        )
    out.append("")
    out.append("## Sent under each size rule (the 18 repeats)")
    out.append("")
    out.append("| rule | o200k | cl100k | relative answers sent |")
    out.append("|---|---:|---:|---:|")
    full = {e: sum(int(r[f"full_{e}"]) for r in rows) for e in ENCODINGS}
    out.append(f"| full results only | {full['o200k_base']:,} | {full['cl100k_base']:,} | 0 |")
    for label, ratio in RULES:
        tot = {e: sum(sent(r, e, ratio) for r in rows) for e in ENCODINGS}
        n = sum(1 for r in rows if sent(r, "o200k_base", ratio) != r["full_o200k_base"])
        out.append(
            f"| answer when {'< ' + label + ' of full' if ratio < 1 else 'smaller'} | "
            f"{tot['o200k_base']:,} | {tot['cl100k_base']:,} | {n} |"
        )
    out.append("")
    out.append("By kind, answer when smaller (o200k / cl100k):")
    out.append("")
    out.append("| kind | calls | full | sent | saved |")
    out.append("|---|---:|---:|---:|---:|")
    for kind in ("json", "text", "file"):
        mine = [r for r in rows if r["kind"] == kind]
        cells = []
        for what in ("full", "sent", "saved"):
            vals = []
            for e in ENCODINGS:
                f = sum(int(r[f"full_{e}"]) for r in mine)
                s_ = sum(sent(r, e, 1.0) for r in mine)
                vals.append({"full": f, "sent": s_, "saved": f - s_}[what])
            cells.append(f"{vals[0]:,} / {vals[1]:,}")
        out.append(f"| {kind} | {len(mine)} | {' | '.join(cells)} |")
    out.append("")
    out.append("## The cost of naming every result (all 92 calls)")
    out.append("")
    out.append("| where | results | o200k | cl100k |")
    out.append("|---|---:|---:|---:|")
    long_ = "32-digit handles (requests of no session over HTTP)"
    for k, label in (
        ("gcf", "`ref=` in a GCF header"),
        ("block", "`ref=` text block"),
        ("gcf_long", f"`ref=` in a GCF header, {long_}"),
        ("block_long", f"`ref=` text block, {long_}"),
    ):
        out.append(
            f"| {label} | {named[k.removesuffix('_long')]} | {ref_cost['o200k_base'][k]:,} | "
            f"{ref_cost['cl100k_base'][k]:,} |"
        )
    out.append("")
    out.append("## The answers")
    out.append("")
    for r in rows:
        if r["answer_text"] is None:
            continue
        text = r["answer_text"]
        lines = text.split("\n")
        if len(lines) > 8:
            text = "\n".join([*lines[:8], f"... ({len(lines) - 9} more lines)"])
        out.append(f"{r['call']} ({r['answer_o200k_base']} o200k):")
        out.append("```")
        out.append(text.rstrip("\n"))
        out.append("```")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------
# Whole sessions through the proxy core
# --------------------------------------------------------------------------------------


def run_session(
    server: str, config: ProxyConfig, agent_since: bool, unguessable: bool = False
) -> dict[str, int]:
    """Tokens the model reads in one session (o200k and cl100k), every answer verified;
    ``unguessable``: results named with 32-digit handles (requests of no session)."""
    session = read_session(CORPUS / server)

    def memory() -> relative.ResultMemory:
        return relative.ResultMemory(seed=7, unguessable=unguessable)

    replay = Replay(session, config, memory=memory)
    totals = dict.fromkeys(ENCODINGS, 0)

    def add(text: str) -> None:
        for e in ENCODINGS:
            totals[e] += tokens.count(text, e)

    replay.handshake()
    add((replay.initialize or {}).get("instructions") or "")
    add(json.dumps((replay.tools_list or {})["tools"], ensure_ascii=False))
    reader = relative.Reader()
    latest: dict[str, str] = {}
    for recorded in session.calls:
        call = _raw(recorded)
        slot = call["tool"] + json.dumps(call["arguments"], sort_keys=True)
        args = dict(call["arguments"])
        if agent_since and call["repeat_of"] is not None and slot in latest:
            args["_since"] = latest[slot]
        exchange = replay.call(recorded, args)
        result = exchange.result or {}
        assert "_since" not in exchange.forwarded, "the proxy forwarded _since"
        texts = [b["text"] for b in result.get("content", []) if b.get("type") == "text"]
        for t in texts:
            add(t)
        raw = [b["text"] for b in call["result"].get("content", []) if b.get("type") == "text"]
        if not texts:
            continue
        main, ref = texts[0], None
        if relative.is_answer(main):
            got = reader.read(main)
            want_json = json_value(raw[0]) if call["tool"] not in Policy().file_tools else None
            ok = same_value(got, want_json) if want_json is not None else got == raw[0]
            assert ok, f"{server}/{call['tool']}: an answer did not rebuild the result"
            ref = relative.ref_of(main)
        elif main.startswith(("GCF profile=generic", "GCF-dense")):
            reader.read(main)
            ref = relative.ref_of(main)
        elif len(texts) == len(raw) + 1:
            ref = relative.ref_of(texts[-1])
            value = None if call["tool"] in Policy().file_tools else json_value(main)
            if ref is not None:
                reader.hold(ref, value if value is not None else main, text=value is None)
        if ref is not None:
            latest[slot] = ref
    return totals


_LONG = "32-digit handles"


def render_sessions() -> str:
    configs: list[tuple[str, dict[str, Any], bool]] = [
        ("gcfkit today (--refs off)", {"refs": "off"}, False),
        ("--refs auto (default), agent never passes _since", {}, False),
        ("--refs auto (default), agent passes _since", {}, True),
        (f"--refs auto (default), agent never passes _since, {_LONG}", {}, False),
        (f"--refs auto (default), agent passes _since, {_LONG}", {}, True),
        ("--refs all, agent never passes _since", {"refs": "all"}, False),
        ("--refs all, agent passes _since", {"refs": "all"}, True),
        ("--refs all, _since, patch/edit when < 80%", {"refs": "all", "relative_ratio": 0.8}, True),
        (
            "--refs all, _since, patch/edit whenever smaller",
            {"refs": "all", "relative_ratio": 1.0},
            True,
        ),
        (
            "--refs all --delta session, agent never passes _since",
            {"refs": "all", "session_deltas": True},
            False,
        ),
        (
            "--refs auto, agent passes _since, ref_min_bytes=0 (ProxyConfig)",
            {"ref_min_bytes": 0},
            True,
        ),
        (
            "--refs all, _since, ref_min_bytes=0 (ProxyConfig)",
            {"refs": "all", "ref_min_bytes": 0},
            True,
        ),
    ]
    out = ["", "## Whole sessions through the proxy core (all 92 calls)", ""]
    out.append(
        "Instructions and tool list counted once per session; results as delivered. "
        "Every relative answer was rebuilt by a reader and compared with the server's result."
    )
    out.append("")
    out.append("| configuration | o200k | cl100k |")
    out.append("|---|---:|---:|")
    for label, options, since in configs:
        tot = dict.fromkeys(ENCODINGS, 0)
        for server in SERVERS:
            config = ProxyConfig(stats=False, time_budget=30.0, **options)
            got = run_session(server, config, since, unguessable=label.endswith(_LONG))
            for e in ENCODINGS:
                tot[e] += got[e]
        out.append(f"| {label} | {tot['o200k_base']:,} | {tot['cl100k_base']:,} |")
    from gcfkit.answers.primer import RELATIVE_PRIMER
    from gcfkit.answers.since import SINCE_SCHEMA

    n_tools = sum(
        len(json.loads((CORPUS / s / "meta" / "tools_list.json").read_text())["tools"])
        for s in SERVERS
    )
    prop = '"_since":' + json.dumps(SINCE_SCHEMA, separators=(",", ":")) + ","
    out += [
        "",
        "How the agent learns of `_since` (o200k / cl100k, the corpus's 7 sessions, 86 tools):",
        "",
    ]
    out.append("| carrier | per session or tool | corpus total |")
    out.append("|---|---:|---:|")
    p1, p2 = tokens.count(RELATIVE_PRIMER), tokens.count(RELATIVE_PRIMER, "cl100k_base")
    out.append(
        f"| primer sentence in `instructions` (chosen) | {p1} / {p2} per session "
        f"| {7 * p1:,} / {7 * p2:,} |"
    )
    q1, q2 = tokens.count(prop), tokens.count(prop, "cl100k_base")
    out.append(
        f"| `_since` property in every tool's schema (`--advertise-format`) | {q1} / {q2} per tool "
        f"| {n_tools * q1:,} / {n_tools * q2:,} |"
    )
    bare = '"_since":{"type":"string"},'
    b1, b2 = tokens.count(bare), tokens.count(bare, "cl100k_base")
    out.append(
        f"| bare `_since` property, no description | {b1} / {b2} per tool "
        f"| {n_tools * b1:,} / {n_tools * b2:,} |"
    )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
