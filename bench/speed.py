"""Encode/decode speed of gcfkit against its peers, as ratios to the stdlib json module.

Run ``python bench/speed.py`` (the ``bench`` extra installs the peers). In one process it
times, for TOON's datasets (``../shared/corpus/toon``, override with ``GCFKIT_CORPUS``;
``github-repos`` is ``github`` again and is left out) and two generated 10 MB files
(``bench/gen.py``, fixed seed), encode (value to text) and decode (the codec's own text back
to the value) with every codec:

* ``gcfkit``: with the C accelerator (``gcfkit.speedups.active()``);
* ``gcfkit-pure``: the same package with the accelerator switched off;
* ``json`` (stdlib, C), ``orjson`` (Rust JSON), ``toons`` (Rust TOON), ``gcf-python`` and
  ``toon-format`` (pure Python GCF and TOON).

Each round runs every codec and operation once (enough calls to last 20 ms) in an order that
rotates between rounds. A cell is the median over rounds of (time / json's time in the same
round): ratios hold on a busy machine while absolute speeds do not. MB/s are of the
compact-JSON text. Every codec's output is decoded and compared with the input before
timing (as JSON values: 1.0 may come back as 1); a codec that fails a dataset gets "n/a".

Targets (issue 13), over the TOON datasets' geomean: gcfkit encode <= 1.0x json's time,
decode <= 1.5x; gcfkit-pure >= 3x faster than gcf-python both ways. Memory is bench/mem.py.

Options: ``--rounds N`` (TOON datasets, default 21), ``--big-rounds N`` (10 MB files,
default 5; 0 skips them), ``--out FILE`` (also write the report there).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import gen  # noqa: E402

import gcfkit  # noqa: E402
from gcfkit import speedups  # noqa: E402
from gcfkit.jsonio import same_value  # noqa: E402

CORPUS = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
MIN_RUN_SECONDS = 0.02
SKIP = {"github-repos"}  # the same array as github.json, under another name


@dataclass
class Codec:
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]
    mode: Callable[[], AbstractContextManager[None]] = nullcontext
    version: str = ""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def codecs() -> list[Codec]:
    out = [
        Codec("gcfkit", gcfkit.dumps, gcfkit.loads, version=gcfkit.__version__),
        Codec(
            "gcfkit-pure",
            gcfkit.dumps,
            gcfkit.loads,
            speedups.pure_python,
            version=gcfkit.__version__,
        ),
        Codec(
            "json",
            lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")),
            json.loads,
            version=platform.python_version(),
        ),
    ]
    try:
        import orjson

        out.append(Codec("orjson", orjson.dumps, orjson.loads, version=_version("orjson")))
    except ImportError:
        pass
    try:
        import toons

        out.append(Codec("toons", toons.dumps, toons.loads, version=_version("toons")))
    except ImportError:
        pass
    try:
        import gcf

        out.append(
            Codec(
                "gcf-python", gcf.encode_generic, gcf.decode_generic, version=_version("gcf-python")
            )
        )
    except ImportError:
        pass
    try:
        import toon_format

        out.append(
            Codec(
                "toon-format",
                toon_format.encode,
                toon_format.decode,
                version=_version("toon-format"),
            )
        )
    except ImportError:
        pass
    return out


def datasets(big: bool) -> Iterator[tuple[str, Any, bool]]:
    """(name, value, is a TOON dataset)."""
    for path in sorted((CORPUS / "toon").glob("*.json")):
        if path.stem not in SKIP:
            yield path.stem, json.loads(path.read_text(encoding="utf-8")), True
    if big:
        yield "flat10", gen.flat(), False
        yield "nested10", gen.nested(), False


def _loops(fn: Callable[[], Any]) -> int:
    """Calls that take at least MIN_RUN_SECONDS (the first call warms caches up)."""
    fn()
    loops = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        if time.perf_counter() - t0 >= MIN_RUN_SECONDS or loops >= 4096:
            return loops
        loops *= 2


def _time(fn: Callable[[], Any], loops: int) -> float:
    t0 = time.perf_counter()
    for _ in range(loops):
        fn()
    return (time.perf_counter() - t0) / loops


def _bind(fn: Callable[[Any], Any], arg: Any) -> Callable[[], Any]:
    return lambda: fn(arg)


@dataclass
class Result:
    seconds: dict[str, list[float]]  # "codec/op" -> per-round seconds
    size: int  # compact JSON bytes
    failed: set[str]


def measure(name: str, value: Any, cs: list[Codec], rounds: int) -> Result:
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    texts: dict[str, Any] = {}
    failed: set[str] = set()
    for c in cs:
        with c.mode():
            try:
                text = c.encode(value)
                ok = same_value(c.decode(text), value, key_order=False)
            except Exception:
                ok = False
        if ok:
            texts[c.name] = text
        else:
            failed.add(c.name)
    jobs: list[tuple[str, Codec, Callable[[], Any], int]] = []
    for c in cs:
        if c.name in failed:
            continue
        text = texts[c.name]
        for op, fn in (("enc", _bind(c.encode, value)), ("dec", _bind(c.decode, text))):
            with c.mode():
                jobs.append((f"{c.name}/{op}", c, fn, _loops(fn)))
    seconds: dict[str, list[float]] = {key: [] for key, *_ in jobs}
    for r in range(rounds):
        shift = r % len(jobs)
        for key, c, fn, loops in jobs[shift:] + jobs[:shift]:
            with c.mode():
                seconds[key].append(_time(fn, loops))
        print(f"  {name}: round {r + 1}/{rounds}", end="\r", file=sys.stderr, flush=True)
    print(" " * 60, end="\r", file=sys.stderr)
    return Result(seconds, size, failed)


def ratio(res: Result, codec: str, op: str) -> float | None:
    """Median over rounds of codec's time / json's time in the same round."""
    mine = res.seconds.get(f"{codec}/{op}")
    ref = res.seconds.get(f"json/{op}")
    if not mine or not ref:
        return None
    return statistics.median(m / j for m, j in zip(mine, ref, strict=True))


def mbps(res: Result, codec: str, op: str) -> float | None:
    mine = res.seconds.get(f"{codec}/{op}")
    return res.size / statistics.median(mine) / 1e6 if mine else None


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def report(results: dict[str, Result], toon: list[str], cs: list[Codec], args: Any) -> str:
    names = [c.name for c in cs]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    lines = [
        f"Measured {datetime.date.today().isoformat()} on {platform.machine()}, {_cpu()}, "
        f"{os.cpu_count()} cores (load average {load[0]:.1f} at the end); Python "
        f"{platform.python_version()}; gcfkit {gcfkit.__version__} ("
        + ("C accelerator built" if speedups.accelerator is not None else "no C accelerator")
        + "); "
        + ", ".join(
            f"{c.name} {c.version}" for c in cs if c.name not in ("gcfkit", "gcfkit-pure", "json")
        )
        + ".",
        f"{args.rounds} rounds for the TOON datasets, {args.big_rounds} for the 10 MB files; "
        "cells are MB/s of compact JSON and, in brackets, the median per-round ratio of the "
        "time to json's (below 1 is faster than json).",
        "",
    ]
    summary: dict[tuple[str, str], float] = {}
    for op, title in (("enc", "Encode"), ("dec", "Decode")):
        lines.append(f"**{title}**")
        lines.append("")
        lines.append("| dataset | KB | " + " | ".join(names) + " |")
        lines.append("|---|---:|" + "---:|" * len(names))
        for ds, res in results.items():
            cells = []
            for n in names:
                r, s = ratio(res, n, op), mbps(res, n, op)
                cells.append("n/a" if r is None or s is None else f"{s:,.0f} ({r:.2f})")
            lines.append(f"| {ds} | {res.size / 1000:,.0f} | " + " | ".join(cells) + " |")
        for label, group in (("TOON datasets", toon), ("all", list(results))):
            cells = []
            for n in names:
                rs = [r for ds in group if (r := ratio(results[ds], n, op)) is not None]
                g = geomean(rs)
                summary[(n, f"{op}/{label}")] = g
                note = "" if len(rs) == len(group) else f" ({len(group) - len(rs)} n/a)"
                cells.append(f"**{g:.2f}**{note}")
            if label == "all" and group == toon:
                continue
            lines.append(f"| **geomean, {label}** | | " + " | ".join(cells) + " |")
        lines.append("")

    def target(label: str, value: float, limit: float, better: str) -> str:
        met = value <= limit if better == "at most" else value >= limit
        return f"- {label}: {value:.2f} ({better} {limit}): {'met' if met else 'NOT met'}"

    lines.append("Targets (issue 13), geomean over the TOON datasets:")
    lines.append("")
    lines.append(
        target(
            "gcfkit encode, time / json's", summary[("gcfkit", "enc/TOON datasets")], 1.0, "at most"
        )
    )
    lines.append(
        target(
            "gcfkit decode, time / json's", summary[("gcfkit", "dec/TOON datasets")], 1.5, "at most"
        )
    )
    if "gcf-python" in names:
        for op, word in (("enc", "encode"), ("dec", "decode")):
            speedup = (
                summary[("gcf-python", f"{op}/TOON datasets")]
                / summary[("gcfkit-pure", f"{op}/TOON datasets")]
            )
            lines.append(
                target(
                    f"gcfkit-pure {word}, times faster than gcf-python", speedup, 3.0, "at least"
                )
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--big-rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if speedups.accelerator is None:
        print("note: the C accelerator is not active; gcfkit and gcfkit-pure are the same")
    cs = codecs()
    results: dict[str, Result] = {}
    toon: list[str] = []
    # The cyclic GC stays on (the default), as in an application; collect between datasets
    # so one dataset's garbage does not bill the next.
    for name, value, is_toon in datasets(args.big_rounds > 0):
        gc.collect()
        results[name] = measure(name, value, cs, args.rounds if is_toon else args.big_rounds)
        if is_toon:
            toon.append(name)
    text = report(results, toon, cs, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
