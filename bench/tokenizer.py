"""The exact token counters side by side: gcfkit._bpe against bpe-openai's compiled one.

Run ``python bench/tokenizer.py``. Every row of the first table is a fresh process (the
tokenizer is chosen with ``GCFKIT_TOKENIZER``): RSS after ``import gcfkit.tokens``, after
loading o200k_base, after loading both encodings, and the load time of each. The second
table counts the corpus (``../shared/corpus``, or ``GCFKIT_CORPUS``: every text block of
the MCP results and TOON's datasets as indented JSON) warm, best of 5, in MB of UTF-8 per
second, and 1 MB runs of one character (a single pre-tokenizer piece where the pattern
allows: the worst case for the merges). The third counts short tool results, what the MCP
proxy counts on every call: ``bench/proxy_latency.py``'s 1 KB and 10 KB nested and flat
records (``result_text``) as pretty JSON, compact JSON, GCF (``gcfkit.dumps``) and
dense-profile GCF, in microseconds a count (warm: the same text again, best of 7), and
200 different 1 KB results (``bench/gen.py``'s seeds 1-100, both shapes, the four forms)
each counted once a pass, as a proxy meets them. The two counters take turns in every
round. ``--out FILE`` also writes the report there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import gen  # noqa: E402
from proxy_latency import result_text  # noqa: E402

BACKENDS = {"gcfkit": "", "bpe-openai": "bpe-openai"}
RUNS = {"1 MB of '!'": "!", "1 MB of spaces": " ", "1 MB of digits": "7", "1 MB of 'a'": "a"}

_CHILD = r"""
import json, os, sys, time
def rss():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
from gcfkit import tokens
out = {"import": rss()}
for name in ("o200k_base", "cl100k_base"):
    t = time.perf_counter()
    tokens.count("warm up", name)
    out[name + " ms"] = (time.perf_counter() - t) * 1000
    out[name] = rss()
out["backend"] = tokens.backend()
print(json.dumps(out))
"""


def _memory(backend: str) -> dict[str, float | str]:
    env = dict(os.environ, GCFKIT_TOKENIZER=BACKENDS[backend])
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _CHILD], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
        for _ in range(3)
    ]
    best: dict[str, float | str] = dict(runs[0])
    for key in ("import", "o200k_base", "cl100k_base", "o200k_base ms", "cl100k_base ms"):
        best[key] = min(float(r[key]) for r in runs)
    return best


def _corpus() -> list[str]:
    from gcfkit.traffic.corpus import read_sessions

    corpus = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
    texts = [
        block["text"]
        for session in read_sessions(corpus / "mcp")
        for call in session.calls
        for block in (call.result or {}).get("content", [])
        if block.get("type") == "text"
    ]
    for path in sorted((corpus / "toon").glob("*.json")):
        texts.append(json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=2))
    return texts


def _best(fns: list[Any], texts: list[str], rounds: int = 5) -> list[float]:
    """Each function's best time over ``texts``; the functions take turns in every round, so
    that a shared machine's slow spells fall on all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            for text in texts:
                fn(text)
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def _forms(value: Any) -> dict[str, str]:
    """The texts the proxy counts for one result: the original and its candidate forms."""
    import gcfkit
    from gcfkit import dense

    return {
        "pretty JSON": json.dumps(value, indent=2, ensure_ascii=False),
        "compact JSON": json.dumps(value, separators=(",", ":"), ensure_ascii=False),
        "GCF": gcfkit.dumps(value),
        "dense GCF": dense.encode(value).text,
    }


def _short_results() -> list[str]:
    from gcfkit import tokens

    results = {
        (size, shape): _forms(json.loads(result_text(size, shape)))
        for size in ("1 KB", "10 KB")
        for shape in ("nested", "flat")
    }
    distinct = [
        text
        for seed in range(1, 101)
        for make in (gen.nested, gen.flat)
        for text in _forms(make(seed=seed, target=800)).values()
    ]
    lines = ["", "Short results: microseconds a count, warm (the same text again), best of 7.", ""]
    head = "| result | form | bytes |"
    for name in tokens.ENCODINGS:
        head += f" {name} gcfkit | bpe-openai |"
    lines += [head, "|---|---|---:|" + "---:|---:|" * len(tokens.ENCODINGS)]
    counters = []
    for name in tokens.ENCODINGS:
        mine, ref = tokens._compact_backend(name), tokens._bpe_openai_backend(name)
        assert mine is not None and ref is not None
        counters.append((mine, ref))
    for (size, shape), forms in results.items():
        for form, text in forms.items():
            row = f"| {size} {shape} | {form} | {len(text.encode()):,} |"
            reps = 200 if size == "1 KB" else 20
            for mine, ref in counters:
                assert mine.count(text) == ref(text)
                for took in _best([mine.count, ref], [text] * reps, 7):
                    row += f" {took / reps * 1e6:.1f} |"
            lines.append(row)
    average = sum(len(t.encode()) for t in distinct) // len(distinct)
    row = f"| 1 KB, 200 results | the four forms, each once | {average:,} avg |"
    for mine, ref in counters:
        assert [mine.count(t) for t in distinct] == [ref(t) for t in distinct]
        for took in _best([mine.count, ref], distinct, 7):
            row += f" {took / len(distinct) * 1e6:.1f} |"
    lines.append(row)
    return lines


def main() -> int:
    from gcfkit import tokens

    lines = ["# Exact token counters: gcfkit._bpe and bpe-openai", ""]
    lines += ["| tokenizer | RSS after import | + o200k_base | + both | load o200k | load cl100k |"]
    lines += ["|---|---:|---:|---:|---:|---:|"]
    for backend in BACKENDS:
        m = _memory(backend)
        assert m["backend"] == backend, m
        lines.append(
            f"| {backend} | {m['import']:.0f} MB | {m['o200k_base']:.0f} MB | "
            f"{m['cl100k_base']:.0f} MB | {m['o200k_base ms']:.0f} ms | "
            f"{m['cl100k_base ms']:.0f} ms |"
        )
    texts = _corpus()
    size = sum(len(t.encode()) for t in texts) / 1e6
    lines += ["", f"Corpus: {len(texts)} texts, {size:.2f} MB. Warm, best of 5.", ""]
    lines += ["| encoding | input | gcfkit | bpe-openai |", "|---|---|---:|---:|"]
    for name in tokens.ENCODINGS:
        mine = tokens._compact_backend(name)
        ref = tokens._bpe_openai_backend(name)
        assert mine is not None and ref is not None
        assert [mine.count(t) for t in texts] == [ref(t) for t in texts]
        a, b = _best([mine.count, ref], texts)
        lines.append(f"| {name} | corpus | {size / a:.1f} MB/s | {size / b:.1f} MB/s |")
        for label, unit in RUNS.items():
            run = [unit * 1_000_000]
            assert mine.count(run[0]) == ref(run[0])
            a, b = _best([mine.count, ref], run, 1)
            lines.append(f"| {name} | {label} | {a * 1000:.0f} ms | {b * 1000:.0f} ms |")
    lines += _short_results()
    report = "\n".join(lines) + "\n"
    print(report)
    if "--out" in sys.argv:
        Path(sys.argv[sys.argv.index("--out") + 1]).write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
