"""The dense profile measured: tokens per construct, and encode/decode speed in one process.

Run ``python bench/dense.py`` (with the ``bench`` extra, or at least ``tokens``). Prints
Markdown and writes ``bench/dense.md``; ``--speed`` runs the speed measurement alone.
Inputs, from ``../shared/corpus`` (override with ``GCFKIT_CORPUS``):

* the 41 JSON text results of non-file, non-error tools of the MCP corpus, each taken at the
  smallest of its forms as the proxy would send it (raw text, compact JSON, GCF, and dense in
  the dense rows);
* TOON's 8 datasets, each at the smallest of compact JSON, GCF (and dense).

Every dense payload is decoded back and compared type-strictly, key order included, with the
v3.5.3 codec's own round trip of the value; a mismatch aborts the run. Definitions are chosen
with the exact counts of the encoding being measured (as the proxy does), and in the
"estimate" rows with the dependency-free D9.3 estimate. Speeds are medians of repeated runs
and ratios against ``gcfkit.dumps`` / ``gcfkit.loads`` in the same process.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gcfkit
from gcfkit import dense, speedups, tokens
from gcfkit.eval.datasets import TOON_DATASETS
from gcfkit.jsonio import dumps_compact, same_value
from gcfkit.traffic.corpus import read_sessions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CORPUS = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
ENCODINGS = ("o200k_base", "cl100k_base")
FILE_TOOLS = {"read_text_file", "read_file", "read_multiple_files", "read_media_file"}
MEMORY_GRAPH = CORPUS / "mcp" / "memory" / "015_read_graph.json"
ALL_OFF = {"defs": False, "lists": False, "constants": False, "short_rows": False}
# (label, dense options or None for gcfkit v3.5.3 alone, use the estimate?)
CONFIGS: list[tuple[str, dict[str, bool] | None, bool]] = [
    ("gcfkit v3.5.3", None, False),
    ("dense, all constructs", {}, False),
    ("dense, all constructs, D9.3 estimate", {}, True),
    ("dense without defs", {"defs": False}, False),
    ("dense without lists", {"lists": False}, False),
    ("dense without constants", {"constants": False}, False),
    ("dense without short rows", {"short_rows": False}, False),
    ("dense, defs only", {**ALL_OFF, "defs": True}, False),
    ("dense, lists only", {**ALL_OFF, "lists": True}, False),
    ("dense, constants only", {**ALL_OFF, "constants": True}, False),
    ("dense, short rows only", {**ALL_OFF, "short_rows": True}, False),
    ("dense, row ids only (all four off)", ALL_OFF, False),
]


def mcp_results() -> list[tuple[str, str, Any]]:
    """(name, raw text, value) of every JSON text result of a non-file, non-error call."""
    out = []
    for session in read_sessions(CORPUS / "mcp"):
        for call in session.calls:
            if call.tool in FILE_TOOLS or call.result is None or call.result.get("isError"):
                continue
            for block in call.result.get("content", []):
                if block.get("type") != "text":
                    continue
                try:
                    value = json.loads(block["text"])
                except ValueError:
                    continue
                if isinstance(value, (dict, list)):
                    name = f"{session.name}/{Path(call.file).stem}"
                    out.append((name, block["text"], value))
    return out


def toon_datasets() -> list[tuple[str, Any]]:
    folder = CORPUS / "toon"
    return [
        (n, json.loads((folder / f"{n}.json").read_text(encoding="utf-8"))) for n in TOON_DATASETS
    ]


def dense_text(value: Any, options: dict[str, bool], count: Callable[[str], int] | None) -> str:
    on = {name: options.get(name, True) for name in dense.CONSTRUCTS}
    text = dense.dumps(
        value,
        count=count,
        defs=on["defs"],
        lists=on["lists"],
        constants=on["constants"],
        short_rows=on["short_rows"],
    )
    back = dense.loads(text)
    if not same_value(back, gcfkit.loads(gcfkit.dumps(value)), number_types=True):
        raise SystemExit(f"dense round trip changed a value (options {options})")
    return text


def totals(
    mcp: list[tuple[str, str, Any]], toon: list[tuple[str, Any]], encoding: str
) -> dict[str, tuple[int, int, dict[str, int]]]:
    counter = tokens.counter(encoding)
    n = counter.count
    base_mcp = [min(n(raw), n(dumps_compact(v)), n(gcfkit.dumps(v))) for _, raw, v in mcp]
    base_toon = [min(n(dumps_compact(v)), n(gcfkit.dumps(v))) for _, v in toon]
    out = {}
    for label, options, use_estimate in CONFIGS:
        if options is None:
            m, t = base_mcp, base_toon
        else:
            count = None if use_estimate else n
            m = [
                min(b, n(dense_text(v, options, count)))
                for b, (_, _, v) in zip(base_mcp, mcp, strict=True)
            ]
            t = [
                min(b, n(dense_text(v, options, count)))
                for b, (_, v) in zip(base_toon, toon, strict=True)
            ]
        out[label] = (sum(m), sum(t), dict(zip(TOON_DATASETS, t, strict=True)))
    return out


def terse_one_shot(mcp: list[tuple[str, str, Any]]) -> list[str] | None:
    """terse's lossless tiers (``transforms.compress``) per result, or None without terse."""
    sys.path.insert(0, str(HERE))
    try:
        from tokens import offline_tiktoken  # bench/tokens.py: tiktoken on bundled ranks

        offline_tiktoken()
        from terse import transforms
    except ImportError:
        return None
    out = []
    for _, raw, value in mcp:
        try:
            packed = transforms.compress(value)
        except Exception:  # a peer may refuse a value; the proxy would send it raw
            out.append(raw)
            continue
        out.append(packed if isinstance(packed, str) else dumps_compact(packed))
    return out


def interleaved_ms(fns: list[Callable[[], object]], rounds: int = 61) -> list[tuple[float, float]]:
    """(minimum, median) milliseconds of each function, timed in interleaved rounds (one
    call of each per round), so that the load of a shared machine hits them alike. On a
    loaded machine the median of a call of a few milliseconds is mostly other processes'
    time slices; the minimum is the call's own cost."""
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, samples, strict=True):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return [(min(x) * 1000, statistics.median(x) * 1000) for x in samples]


def _pure(fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run on the pure-Python codec (the C accelerator switched off around it)."""

    def run() -> object:
        with speedups.pure_python():
            return fn()

    return run


def speed() -> list[str]:
    call = json.loads(MEMORY_GRAPH.read_text(encoding="utf-8"))
    text = call["result"]["content"][0]["text"]
    value = json.loads(text)
    count = tokens.counter("o200k_base").count
    plain = gcfkit.dumps(value)
    wire = dense.dumps(value, count=count)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("gcfkit.dumps (v3.5.3)", lambda: gcfkit.dumps(value)),
        ("dense.dumps, exact o200k counts", lambda: dense.dumps(value, count=count)),
        ("dense.dumps, D9.3 estimate", lambda: dense.dumps(value)),
        ("gcfkit.loads (v3.5.3)", lambda: gcfkit.loads(plain)),
        ("dense.loads", lambda: dense.loads(wire)),
    ]
    rows += [(f"{label}, pure Python", _pure(fn)) for label, fn in rows if "dense" in label]
    ms = interleaved_ms([fn for _, fn in rows])
    lines = [
        f"Speed on memory/015_read_graph ({len(text.encode()):,} bytes of JSON text), 61 "
        f"interleaved rounds in one process ({speedups.status()}, and the pure-Python "
        "codec below it); ratios against the accelerated v3.5.3 codec:",
        "",
        "| operation | min ms | ratio | median ms | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for (label, _), (low, mid) in zip(rows, ms, strict=True):
        ref_low, ref_mid = ms[3] if "loads" in label else ms[0]
        lines.append(
            f"| {label} | {low:.2f} | {low / ref_low:.2f}x | {mid:.2f} | {mid / ref_mid:.2f}x |"
        )
    lines += [
        "",
        "TOON's datasets, dense with exact o200k counts, the accelerator against pure Python "
        "(fastest of 11 interleaved rounds, ms):",
        "",
        "| dataset | KB | encode C | encode pure | speed-up | decode C | decode pure | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in TOON_DATASETS:
        data = json.loads((CORPUS / "toon" / f"{name}.json").read_text(encoding="utf-8"))
        payload = dense.dumps(data, count=count)

        def enc(data: Any = data) -> object:
            return dense.dumps(data, count=count)

        def dec(payload: str = payload) -> object:
            return dense.loads(payload)

        (ec, _), (ep, _), (dc, _), (dp, _) = interleaved_ms(
            [enc, _pure(enc), dec, _pure(dec)], rounds=11
        )
        kb = len(dumps_compact(data).encode()) / 1000
        lines.append(
            f"| {name} | {kb:,.0f} | {ec:.2f} | {ep:.2f} | {ep / ec:.1f}x "
            f"| {dc:.2f} | {dp:.2f} | {dp / dc:.1f}x |"
        )
    return lines


def primer_lines() -> list[str]:
    lines = ["| primer sentence | o200k | cl100k |", "|---|---:|---:|"]
    for key, sentence in dense.PRIMER.items():
        o, c = (tokens.count(sentence, e) for e in ENCODINGS)
        lines.append(f"| {key}: {sentence} | {o} | {c} |")
    full = dense.primer(dense.CONSTRUCTS)
    lines.append(f"| all | {tokens.count(full)} | {tokens.count(full, 'cl100k_base')} |")
    return lines


def main() -> int:
    if "--speed" in sys.argv:
        print("\n".join(speed()))
        return 0
    if not tokens.is_exact():
        print("exact counts need bpe-openai (pip install -e '.[tokens]')", file=sys.stderr)
        return 1
    mcp, toon = mcp_results(), toon_datasets()
    report = [
        "# The dense profile, measured",
        "",
        f"Generated by `python bench/dense.py`. {len(mcp)} MCP JSON results (each at the "
        "smallest of raw, compact JSON, GCF and, in dense rows, dense) and TOON's 8 datasets "
        "(smallest of compact JSON, GCF and dense). Every dense payload was decoded and "
        "compared with the value, types and key order included.",
        "",
    ]
    terse = terse_one_shot(mcp)
    for enc in ENCODINGS:
        res = totals(mcp, toon, enc)
        if terse is not None:
            n = tokens.counter(enc).count
            one_shot = sum(min(n(t), n(raw)) for t, (_, raw, _) in zip(terse, mcp, strict=True))
            report += [f"terse one-shot on the MCP JSON results ({enc}): {one_shot:,}", ""]
        report += [
            f"## {enc}",
            "",
            "| configuration | MCP JSON | TOON total | " + " | ".join(TOON_DATASETS) + " |",
            "|---" + "|---:" * (2 + len(TOON_DATASETS)) + "|",
        ]
        for label, (m, t, per) in res.items():
            cells = " | ".join(f"{per[d]:,}" for d in TOON_DATASETS)
            report.append(f"| {label} | {m:,} | {t:,} | {cells} |")
        report.append("")
    report += [*speed(), "", "## Primer", "", *primer_lines(), ""]
    text = "\n".join(report)
    print(text)
    (HERE / "dense.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
