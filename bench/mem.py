"""Peak memory of decoding, gcfkit against the stdlib json module (and peers).

Run ``python bench/mem.py``. Every measurement runs in a fresh process: it builds the input
(bench/gen.py's 10 MB flat and nested files, and TOON's tabular dataset), encodes it with
the codec under test, and then decodes that text with tracemalloc on. Reported per decoder:
the tracemalloc peak above the baseline (the text already in memory), the memory the result
keeps, and the rise of the peak RSS (VmHWM, reset through /proc/self/clear_refs where the
kernel allows it). Target (issue 13): gcfkit's decode peak within 1.1x of json's.
``--out FILE`` also writes the report there.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

DECODERS = ("json", "gcfkit", "gcfkit-pure", "orjson", "toons")
INPUTS = ("flat10", "nested10", "tabular")


def _value(name: str) -> Any:
    import gen

    if name == "flat10":
        return gen.flat()
    if name == "nested10":
        return gen.nested()
    corpus = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
    return json.loads((corpus / "toon" / f"{name}.json").read_text(encoding="utf-8"))


def _codec(name: str) -> tuple[Any, Any]:
    if name == "json":
        return (lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))), json.loads
    if name.startswith("gcfkit"):
        import gcfkit
        from gcfkit import speedups

        if name == "gcfkit-pure":
            speedups.accelerator = None
        return gcfkit.dumps, gcfkit.loads
    if name == "orjson":
        import orjson

        return orjson.dumps, orjson.loads
    import toons

    return toons.dumps, toons.loads


def _hwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def one(codec: str, dataset: str) -> dict[str, float]:
    encode, decode = _codec(codec)
    text = encode(_value(dataset))
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        rss0 = _hwm_kb()
    except OSError:
        rss0 = -1
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    value = decode(text)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = (_hwm_kb() - rss0) / 1024 if rss0 >= 0 else float("nan")
    del value
    return {"peak": (peak - base) / 2**20, "kept": (current - base) / 2**20, "rss": rss}


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--one":
        print(json.dumps(one(argv[2], argv[3])))
        return 0
    out_path = Path(argv[2]) if len(argv) == 3 and argv[1] == "--out" else None
    rows = []
    for dataset in INPUTS:
        got: dict[str, dict[str, float]] = {}
        for codec in DECODERS:
            proc = subprocess.run(
                [sys.executable, __file__, "--one", codec, dataset],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode == 0:
                got[codec] = json.loads(proc.stdout)
            print(f"  {dataset} {codec}", end="\r", file=sys.stderr, flush=True)
        rows.append((dataset, got))
    lines = [
        "Decode, MB: tracemalloc peak / kept by the result / peak RSS rise "
        "(ratio of the peak to json's)",
        "",
        "| input | " + " | ".join(DECODERS) + " |",
        "|---|" + "---:|" * len(DECODERS),
    ]
    for dataset, got in rows:
        ref = got.get("json", {}).get("peak")
        cells = []
        for codec in DECODERS:
            m = got.get(codec)
            if m is None:
                cells.append("n/a")
                continue
            vs = f" ({m['peak'] / ref:.2f})" if ref else ""
            cells.append(f"{m['peak']:.1f} / {m['kept']:.1f} / {m['rss']:.0f}{vs}")
        lines.append(f"| {dataset} | " + " | ".join(cells) + " |")
    lines.append("")
    for dataset, got in rows:
        if "json" in got and "gcfkit" in got:
            r = got["gcfkit"]["peak"] / got["json"]["peak"]
            verdict = "met" if r <= 1.1 else "NOT met"
            lines.append(f"- gcfkit decode peak <= 1.1x json's, {dataset}: {r:.2f} ({verdict})")
    text = "\n".join(lines) + "\n"
    print(text)
    if out_path is not None:
        out_path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
