"""Encode/decode speed: gcfkit against gcf-python and the stdlib json module.

Run ``python bench/speed.py`` (``bench`` extra). For every dataset of
``../shared/corpus/toon`` (override with ``GCFKIT_CORPUS``) it times, in one process,
encode (value to text) and decode (text to value) with each codec, reports the median of
repeated runs and prints a markdown table. Target: gcfkit at least 2x faster than
gcf-python both ways, on every dataset. Each codec decodes its own output.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import gcfkit

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
REPEATS = 7
MIN_RUN_SECONDS = 0.02


def median_seconds(fn: Callable[[], Any]) -> float:
    """Median seconds per call over REPEATS runs of enough calls to last MIN_RUN_SECONDS."""
    fn()  # warm up caches and lazy imports
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - t0 >= MIN_RUN_SECONDS or loops >= 1024:
            break
        loops *= 2
    samples = []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            for _ in range(loops):
                fn()
            samples.append((time.perf_counter() - t0) / loops)
    finally:
        if gc_was:
            gc.enable()
    return statistics.median(samples)


def main() -> int:
    try:
        import gcf
    except ImportError:
        print("gcf-python is not installed (pip install 'gcfkit[bench]')", file=sys.stderr)
        return 1
    codecs: dict[str, tuple[Callable[[Any], str], Callable[[str], Any]]] = {
        "gcfkit": (gcfkit.dumps, gcfkit.loads),
        "gcf-python": (gcf.encode_generic, gcf.decode_generic),
        "json": (lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False), json.loads),
    }
    paths = sorted((CORPUS / "toon").glob("*.json"))
    rows = []
    totals = {(c, op): 0.0 for c in codecs for op in ("enc", "dec")}
    for path in paths:
        value = json.loads(path.read_text(encoding="utf-8"))
        times: dict[tuple[str, str], float] = {}
        for name, (enc, dec) in codecs.items():
            text = enc(value)
            times[(name, "enc")] = median_seconds(functools.partial(enc, value))
            times[(name, "dec")] = median_seconds(functools.partial(dec, text))
        for k, v in times.items():
            totals[k] += v
        rows.append((path.stem, path.stat().st_size, times))

    def ms(s: float) -> str:
        return f"{s * 1000:,.2f}"

    def ratio(t: dict[tuple[str, str], float], op: str) -> str:
        return f"{t[('gcf-python', op)] / t[('gcfkit', op)]:.2f}x"

    print(
        f"Python {platform.python_version()}, gcfkit {gcfkit.__version__}, "
        f"gcf-python {metadata.version('gcf-python')}; median of {REPEATS} runs, ms per call."
    )
    print()
    print(
        "| dataset | KB | encode gcfkit | encode gcf-python | encode json | enc speed-up "
        "| decode gcfkit | decode gcf-python | decode json | dec speed-up |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, size, t in rows:
        print(
            f"| {name} | {size / 1024:,.0f} | {ms(t[('gcfkit', 'enc')])} | "
            f"{ms(t[('gcf-python', 'enc')])} | {ms(t[('json', 'enc')])} | {ratio(t, 'enc')} | "
            f"{ms(t[('gcfkit', 'dec')])} | {ms(t[('gcf-python', 'dec')])} | "
            f"{ms(t[('json', 'dec')])} | {ratio(t, 'dec')} |"
        )
    print(
        f"| **total** | | {ms(totals[('gcfkit', 'enc')])} | {ms(totals[('gcf-python', 'enc')])} | "
        f"{ms(totals[('json', 'enc')])} | **{ratio(totals, 'enc')}** | "
        f"{ms(totals[('gcfkit', 'dec')])} | {ms(totals[('gcf-python', 'dec')])} | "
        f"{ms(totals[('json', 'dec')])} | **{ratio(totals, 'dec')}** |"
    )
    print()
    for op, label in (("enc", "encode"), ("dec", "decode")):
        worst = min(rows, key=lambda r: r[2][("gcf-python", op)] / r[2][("gcfkit", op)])
        least = worst[2][("gcf-python", op)] / worst[2][("gcfkit", op)]
        verdict = "met" if least >= 2 else "NOT met"
        print(
            f"Target gcfkit >= 2x faster than gcf-python on every dataset, {label}: {verdict} "
            f"(slowest ratio {least:.2f}x, on {worst[0]})."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
