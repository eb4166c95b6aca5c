"""The dense profile measured: tokens per construct, and encode/decode speed in one process.

Run ``python bench/dense.py`` (with the ``bench`` extra, or at least ``tokens``). Prints
Markdown and writes ``bench/dense.md``; ``--speed`` runs the speed measurement alone.
``--before DIR`` adds a "before" column to the dense.dumps timings: the gcfkit of an earlier
commit in ``DIR/src`` (``git archive COMMIT src | tar -x -C DIR``, with the accelerator
copied in or built there), imported as ``gcfkit_before`` and timed in the same rounds.
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
from gcfkit.generic import definitions
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


def interleaved_ms(
    fns: list[Callable[[], object]],
    rounds: int = 61,
    clock: Callable[[], float] = time.perf_counter,
) -> list[tuple[float, float]]:
    """(minimum, median) milliseconds of each function, timed in interleaved rounds (one
    call of each per round), so that the load of a shared machine hits them alike. On a
    loaded machine the median of a call of a few milliseconds is mostly other processes'
    time slices; the minimum is the call's own cost. ``clock=time.process_time`` counts the
    process's CPU time only."""
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, samples, strict=True):
            t0 = clock()
            fn()
            out.append(clock() - t0)
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
        "codec below it; the dense encodes keep their definition counts from round to "
        "round, see first sight below); ratios against the accelerated v3.5.3 codec:",
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


def _dumps_cases() -> list[tuple[str, Any, int]]:
    """(label, value, rounds) of the dense.dumps timings: the memory graph and 1 MB of
    nested orders (bench/gen.py)."""
    sys.path.insert(0, str(HERE))
    import gen

    call = json.loads(MEMORY_GRAPH.read_text(encoding="utf-8"))
    graph = json.loads(call["result"]["content"][0]["text"])
    return [
        ("memory read_graph, 45 KB", graph, 61),
        ("nested orders, 1 MB (bench/gen.py)", gen.nested(target=1_000_000), 31),
    ]


def _package_before(before: Path) -> Any:
    """The gcfkit of ``before/src`` imported as ``gcfkit_before`` (its imports within the
    package are relative), so that both are timed in the same rounds."""
    import importlib
    import tempfile

    link = Path(tempfile.mkdtemp()) / "gcfkit_before"
    link.symlink_to(before / "src" / "gcfkit")
    sys.path.insert(0, str(link.parent))
    return importlib.import_module("gcfkit_before.dense")


def dumps_lines(before: Path | None) -> list[str]:
    """dense.dumps with exact o200k counts: on first sight of its strings (the kept counts
    dropped before each call), with the counts kept from the call before, and (``before``)
    on an earlier gcfkit, all in the same interleaved rounds."""
    count = tokens.counter("o200k_base").count
    old_dense = _package_before(before) if before is not None else None
    head = "| value | first sight, min / median ms | counts kept, min / median ms |"
    rule = "|---|---:|---:|"
    if old_dense is not None:
        head = "| value | before, min / median ms " + head[len("| value ") :]
        rule = "|---|---:|---:|---:|"
    lines = [
        "dense.dumps with exact o200k counts (the proxy's dense encode), CPU time of the "
        "process (the machine is shared), interleaved rounds in one process. *First sight*: "
        "the definition counts kept by `generic.definitions` dropped before each call (the "
        "first result of a session); "
        "*counts kept*: the strings were counted by the call before (a session whose "
        "results repeat strings)"
        + (f"; *before*: the gcfkit in `{before.name}`, in the same rounds." if before else "."),
        "",
        head,
        rule,
    ]
    for label, value, rounds in _dumps_cases():

        def first(value: Any = value) -> object:
            definitions.forget()
            return dense.dumps(value, count=count)

        def kept(value: Any = value) -> object:
            return dense.dumps(value, count=count)

        fns: list[Callable[[], object]] = [first, kept]
        if old_dense is not None:

            def old(value: Any = value, module: Any = old_dense) -> object:
                return module.dumps(value, count=count)

            fns.append(old)
        ms = interleaved_ms(fns, rounds, time.process_time)
        cells = [f"{low:.2f} / {mid:.2f}" for low, mid in ms]
        if old_dense is not None:
            cells = [cells[2], *cells[:2]]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def _forms() -> dict[str, list[str]]:
    """The texts of each form the proxy chooses among, for the MCP JSON results and TOON's
    datasets: compact JSON, the original (the MCP result's own text; TOON's data with
    indent=2), GCF and dense (exact o200k definitions)."""
    count = tokens.counter("o200k_base").count
    values = [(raw, v) for _, raw, v in mcp_results()]
    values += [(json.dumps(v, indent=2, ensure_ascii=False), v) for _, v in toon_datasets()]
    return {
        "compact JSON": [dumps_compact(v) for _, v in values],
        "original JSON": [raw for raw, _ in values],
        "GCF": [gcfkit.dumps(v) for _, v in values],
        "dense": [dense.dumps(v, count=count) for _, v in values],
    }


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def estimate_lines() -> list[str]:
    forms = _forms()
    mcp_text = [
        block["text"]
        for session in read_sessions(CORPUS / "mcp")
        for call in session.calls
        for block in (call.result or {}).get("content", [])
        if block.get("type") == "text"
    ]
    sets = {"MCP corpus, every text block": mcp_text, **forms}
    exact = tokens.counter("o200k_base").count
    lines = [
        "`gcfkit.tokens.estimate` (o200k_base) against the exact count, MB/s of UTF-8 text "
        "(fastest of 7 interleaved rounds over each set):",
        "",
        "| texts | KB | estimate, C | estimate, pure Python | exact count (bpe-openai) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, texts in sets.items():
        size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)

        def est(texts: list[str] = texts) -> object:
            return [tokens.estimate(t) for t in texts]

        def ex(texts: list[str] = texts) -> object:
            return [exact(t) for t in texts]

        (c, _), (p, _), (x, _) = interleaved_ms([est, _pure(est), ex], rounds=7)
        mbps = [size / 1000 / ms for ms in (c, p, x)]
        lines.append(
            f"| {label} | {size / 1000:,.0f} | {mbps[0]:,.0f} | {mbps[1]:,.1f} | {mbps[2]:,.0f} |"
        )
    lines += [
        "",
        "Its error against exact counts, per form, over the 41 MCP JSON results and TOON's 8 "
        "datasets (49 texts each); error = (estimate - exact) / exact, per text, then over "
        "the form's total:",
        "",
        "| encoding | form | total | median abs | p90 abs | max over | max under |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for enc in ENCODINGS:
        n = tokens.counter(enc).count
        for form, texts in forms.items():
            pairs = [(tokens.estimate(t, enc), n(t)) for t in texts]
            errs = [(e - x) / x for e, x in pairs if x]
            total = sum(e for e, _ in pairs) / sum(x for _, x in pairs) - 1
            absolute = [abs(e) for e in errs]
            lines.append(
                f"| {enc} | {form} | {total:+.1%} | {_pct(absolute, 0.5):.1%} "
                f"| {_pct(absolute, 0.9):.1%} | {max(max(errs), 0):+.1%} "
                f"| {min(min(errs), 0):+.1%} |"
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


def _before() -> Path | None:
    if "--before" not in sys.argv:
        return None
    return Path(sys.argv[sys.argv.index("--before") + 1]).resolve()


def main() -> int:
    if "--speed" in sys.argv:
        print("\n".join([*speed(), "", *dumps_lines(_before()), "", *estimate_lines()]))
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
    report += [
        *speed(),
        "",
        *dumps_lines(_before()),
        "",
        "## The token estimate",
        "",
        *estimate_lines(),
        "",
        "## Primer",
        "",
        *primer_lines(),
        "",
    ]
    text = "\n".join(report)
    print(text)
    (HERE / "dense.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
