"""The margin of the proxy's estimate mode (gcfkit.answers.estimates), measured.

For every value of the MCP corpus (each text block that is a JSON object or array) and each
of TOON's datasets (its original taken as ``json.dumps(indent=2)``), every form the proxy
weighs is built as it builds it: the original text, compact JSON, GCF and the dense profile
(both with their ``payload`` explanation). For each form, the error ratio ``r = estimate /
exact`` (``gcfkit.tokens.estimate`` against the exact count), and its median per form (the
bias estimate mode divides out, ``gcfkit.answers.estimates.BIAS``). For each pair of forms
of one value, ``r(A) / r(B)``, raw; and, with the biases divided out, the smallest relative
margin (at the absolute slack in use) under which no pair is ordered differently from its
exact counts: a choice between estimates separated by more than that is the exact choice.

``--speed``: the time ``Rewriter.rewrite_line`` takes per result in one warm process, exact
counts against estimate mode (a close call costs its estimate attempt plus the exact
rewrite), over the corpus replayed result by result and over bench/gen.py's nested orders
at 1 KB, 10 KB, 45 KB and 1 MB (pretty JSON, ``indent=2``); medians of ``--reps`` runs.

    python bench/estimate_margin.py [--corpus ../shared/corpus] [--speed [--reps N]]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from gcfkit import tokens
from gcfkit.answers import estimates
from gcfkit.answers.codec import DENSE_CONSTRUCTS, Codec
from gcfkit.answers.forms import FullForms
from gcfkit.jsonio import dumps_compact
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.rewrite import Budget, Call, NeedsExactCounts, Rewriter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen import nested

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
ENCODINGS = ("o200k_base", "cl100k_base")


def values(corpus: Path) -> list[tuple[str, str, Any]]:
    """(name, original text, value) for every JSON container in the two corpora."""
    out: list[tuple[str, str, Any]] = []
    for path in sorted((corpus / "mcp").glob("*/[0-9][0-9][0-9]_*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        for i, block in enumerate(entry["result"].get("content", [])):
            text = block.get("text") if block.get("type") == "text" else None
            if not isinstance(text, str):
                continue
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, (dict, list)):
                out.append((f"mcp/{path.parent.name}/{path.stem}#{i}", text, value))
    for path in sorted((corpus / "toon").glob("*.json")):
        value = json.loads(path.read_text(encoding="utf-8"))
        out.append((f"toon/{path.stem}", json.dumps(value, indent=2), value))
    return out


def ratios(
    original: str, value: Any, encoding: str, counts: dict[str, tuple[int, int]]
) -> dict[str, float]:
    """The estimate's error ratio for each form of ``value`` (``counts``: filled with each
    form's estimate and exact count)."""

    def exact(text: str) -> int:
        return tokens.count(text, encoding)

    def estimate(text: str) -> int:
        return tokens.estimate(text, encoding)

    codec = Codec()
    texts = {"original": original, "json": dumps_compact(value)}
    exact_forms = FullForms(codec, count=exact, dense=DENSE_CONSTRUCTS, primer="payload")
    for form in exact_forms.texts(value, []):
        texts[form.kind] = form.text
    if "gcf" not in texts:
        generic = exact_forms.generic(value, [])
        if generic is not None:
            texts["gcf"] = generic.text
    out = {kind: estimate(text) / max(1, exact(text)) for kind, text in texts.items()}
    counts.update({kind: (estimate(text), exact(text)) for kind, text in texts.items()})
    return out


def corpus_lines(corpus: Path) -> list[tuple[str, bytes, Call]]:
    out = []
    for path in sorted((corpus / "mcp").glob("*/[0-9][0-9][0-9]_*.json")):
        entry = json.loads(path.read_text(encoding="utf-8"))
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": entry["result"]}).encode()
        out.append((f"{path.parent.name}/{path.stem}", line, Call(entry["tool"], entry["tool"])))
    return out


def nested_line(size: int) -> bytes:
    # (gen.py's target is compact JSON; indented, the text is about 1.9x that.)
    text = json.dumps(nested(target=size * 10 // 19), indent=2)
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [
        {"type": "text", "text": text}]}}).encode()  # fmt: skip


def timed(rewriter: Rewriter, line: bytes, call: Call) -> tuple[float, bool, float]:
    """Seconds one rewrite takes, whether it was a close call (then both attempts), and
    the seconds until the close call was known."""
    start = time.perf_counter()
    close = False
    attempt = 0.0
    try:
        rewriter.rewrite_line(line, call, Budget.unlimited())
    except NeedsExactCounts:
        close = True
        attempt = time.perf_counter() - start
        rewriter.rewrite_line(line, call, Budget.unlimited(), exact=True)
    return time.perf_counter() - start, close, attempt


def speed(corpus: Path, reps: int) -> None:
    for config in (ProxyConfig(), ProxyConfig(dense=())):
        print(f"\ndense constructs: {', '.join(config.dense) or 'none'}\n")
        sizes(config, reps)
    corpus_speed(corpus, reps)


def sizes(config: ProxyConfig, reps: int) -> None:
    exact = Rewriter(config, Codec.exact())
    estimating = Rewriter(config, Codec.estimating())
    exact.warm_up()
    estimating.warm_up()
    print("| result | exact ms | estimate mode ms | close call (ms to know it) |")
    print("|---|---:|---:|---|")
    for size in (1_000, 10_000, 45_000, 1_000_000):
        line = nested_line(size)
        call = Call("orders", "orders")
        runs: dict[str, list[float]] = {"exact": [], "estimate": [], "attempt": []}
        close = False
        for _ in range(reps if size < 1_000_000 else max(3, reps // 10)):
            runs["exact"].append(timed(exact, line, call)[0])
            t, close, attempt = timed(estimating, line, call)
            runs["estimate"].append(t)
            runs["attempt"].append(attempt)
        known = f"yes ({statistics.median(runs['attempt']) * 1e3:.2f})" if close else "no"
        print(
            f"| nested {len(line) / 1000:.0f} KB | {statistics.median(runs['exact']) * 1e3:.2f} "
            f"| {statistics.median(runs['estimate']) * 1e3:.2f} | {known} |"
        )


def corpus_speed(corpus: Path, reps: int) -> None:
    exact = Rewriter(ProxyConfig(), Codec.exact())
    estimating = Rewriter(ProxyConfig(), Codec.estimating())
    exact.warm_up()
    lines = corpus_lines(corpus)
    totals = {"exact": 0.0, "estimate": 0.0, "estimate, answered": 0.0, "exact, same": 0.0}
    per: dict[str, list[float]] = {"exact": [], "estimate": []}
    closes = 0
    for _name, line, call in lines:
        xs, es, close = [], [], False
        for _ in range(max(1, reps // 4)):
            xs.append(timed(exact, line, call)[0])
            t, close, _ = timed(estimating, line, call)
            es.append(t)
        x, e = statistics.median(xs), statistics.median(es)
        per["exact"].append(x)
        per["estimate"].append(e)
        totals["exact"] += x
        totals["estimate"] += e
        if close:
            closes += 1
        else:
            totals["estimate, answered"] += e
            totals["exact, same"] += x
    print(
        f"\ncorpus: {len(lines)} results, {closes} close calls ({closes / len(lines):.0%});"
        f" median per result: exact {statistics.median(per['exact']) * 1e3:.3f} ms,"
        f" estimate mode {statistics.median(per['estimate']) * 1e3:.3f} ms;"
        f" total: exact {totals['exact'] * 1e3:.1f} ms, estimate mode"
        f" {totals['estimate'] * 1e3:.1f} ms; the results answered from estimates:"
        f" {totals['estimate, answered'] * 1e3:.1f} ms (exact: {totals['exact, same'] * 1e3:.1f})"
    )


def _needed(a: tuple[int, int], b: tuple[int, int], kind_a: str, kind_b: str) -> float:
    """The smallest relative margin under which weighed estimates ``a`` and ``b`` are
    either ordered as their exact counts or close (0 when they are ordered right)."""
    ea, eb = estimates.weighed(a[0], kind_a), estimates.weighed(b[0], kind_b)
    if ea == eb or ((ea < eb) == (a[1] < b[1]) and a[1] != b[1]):
        return 0.0
    low, high = min(ea, eb), max(ea, eb)
    return max(0.0, (high - estimates.SLACK) / low - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if args.speed:
        speed(args.corpus, args.reps)
        return
    items = values(args.corpus)
    print(f"{len(items)} values\n")
    for encoding in ENCODINGS:
        per_pair: dict[tuple[str, str], list[float]] = {}
        per_form: dict[str, list[float]] = {}
        needed: dict[tuple[str, str], tuple[float, str]] = {}
        for name, original, value in items:
            counts: dict[str, tuple[int, int]] = {}
            r = ratios(original, value, encoding, counts)
            for a, b in itertools.combinations(sorted(counts), 2):
                m = _needed(counts[a], counts[b], a, b)
                if m > needed.get((a, b), (0.0, ""))[0]:
                    needed[(a, b)] = (m, f"{name}: {a} {counts[a]}, {b} {counts[b]}")
                needed.setdefault((a, b), (0.0, ""))
            for kind, x in r.items():
                per_form.setdefault(kind, []).append(x)
            for a, b in itertools.combinations(sorted(r), 2):
                per_pair.setdefault((a, b), []).append(abs(math.log(r[a] / r[b])))
        print(f"## {encoding}\n")
        print("| form | n | error ratio min | median | max |")
        print("|---|---:|---:|---:|---:|")
        for kind, xs in sorted(per_form.items()):
            print(
                f"| {kind} | {len(xs)} | {min(xs):.3f} | {statistics.median(xs):.3f} "
                f"| {max(xs):.3f} |"
            )
        print("\n| pair | n | ratio of ratios, median | p90 | max |")
        print("|---|---:|---:|---:|---:|")
        for (a, b), xs in sorted(per_pair.items()):
            xs.sort()
            p90 = xs[int(0.9 * (len(xs) - 1))]
            print(
                f"| {a} / {b} | {len(xs)} | {math.exp(statistics.median(xs)):.3f} "
                f"| {math.exp(p90):.3f} | {math.exp(xs[-1]):.3f} |"
            )
        print("\n| pair | margin needed, biases divided out | worst (estimate, exact) |")
        print("|---|---:|---|")
        for (a, b), (m, worst) in sorted(needed.items()):
            print(f"| {a} / {b} | {m:.3f} | {worst} |")
        print()
    print(f"margin in use: {estimates.MARGIN} relative + {estimates.SLACK} tokens")


if __name__ == "__main__":
    main()
