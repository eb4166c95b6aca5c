"""The time one tool result takes on the proxy's answer path, before and after a change, in
one process, interleaved.

Each round runs the same response line through ``Rewriter.rewrite_line`` (the answer the
client waits for) and then ``Outcome.count_owed`` (the ledger's exact counts, taken after
the answer is out), for:

* ``before``: the default rewriter of another tree (``--before DIR``, a directory holding a
  ``gcfkit`` package, e.g. an older checkout's ``src``), imported as ``gcfkit_before``;
* ``exact``: this tree's exact path (``Codec.exact()``);
* ``settled``: this tree's default rewriter (settled-estimate mode).

Results: bench/gen.py's nested orders and flat records, pretty JSON (``indent=2``), at about
1 KB, 10 KB, 45 KB, 1 MB and 10 MB of response line. Medians of ``--reps`` rounds (fewer for
the large sizes). Every answer is checked against ``before``'s: the same JSON message, the
same ledger figures once what is owed is counted.

    python bench/answer_path.py --before /tmp/main-src [--reps 15] [--out bench/answer_path.md]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gcfkit.answers.codec import Codec
from gcfkit.proxy.config import ProxyConfig
from gcfkit.proxy.rewrite import Budget, Call, Rewriter
from gcfkit.relative import ResultMemory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen import flat, nested

SIZES = (1_000, 10_000, 45_000, 1_000_000, 10_000_000)


def line_of(kind: str, size: int) -> bytes:
    # (gen.py's target is compact JSON; indented, the text is about 1.9x that.)
    make = nested if kind == "nested" else flat
    text = json.dumps(make(target=size * 10 // 19), indent=2)
    result = {"content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()


def load_before(src: Path) -> Any:
    """The ``gcfkit`` package under ``src``, imported as ``gcfkit_before``."""
    home = Path(tempfile.mkdtemp(prefix="gcfkit-before-"))
    shutil.copytree(src / "gcfkit", home / "gcfkit_before")
    here = Path(importlib.import_module("gcfkit").__file__ or "").parent
    if not list((home / "gcfkit_before").glob("_speedups*.so")):
        for so in here.glob("_speedups*.so"):
            shutil.copy(so, home / "gcfkit_before")
    sys.path.insert(0, str(home))
    return importlib.import_module("gcfkit_before.proxy.rewrite")


def run(rewriter: Any, budget: Any, call: Any, line: bytes) -> tuple[float, float, Any, Any]:
    start = time.perf_counter()
    outcome, new = rewriter.rewrite_line(line, call, budget)
    answered = time.perf_counter()
    outcome.count_owed(rewriter.count)
    counted = time.perf_counter()
    return answered - start, counted - answered, outcome, new


def figures(outcome: Any) -> tuple[Any, ...]:
    return (
        outcome.decision,
        outcome.bytes_before,
        outcome.bytes_after,
        outcome.tokens_before,
        outcome.tokens_after,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    args = ap.parse_args()
    old = load_before(args.before)
    rows = []
    for kind in ("nested", "flat"):
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(measure(old, kind, size, args.reps))
    report(rows, args.reps, args.out)


def rewriters_of(old: Any) -> dict[str, tuple[Any, Any, Any]]:
    """Fresh rewriters (nothing held from the sizes before), the tokenizers loaded."""
    held = importlib.import_module("gcfkit_before.relative").ResultMemory
    # Handles seeded alike: every rewriter names its results with the same handles.
    rewriters: dict[str, tuple[Any, Any, Any]] = {
        "before": (
            old.Rewriter(old.ProxyConfig(), memory=lambda: held(seed=1)),
            old.Budget.unlimited(),
            old.Call,
        ),
        "exact": (
            Rewriter(ProxyConfig(), Codec.exact(), memory=lambda: ResultMemory(seed=1)),
            Budget.unlimited(),
            Call,
        ),
        "settled": (
            Rewriter(ProxyConfig(), memory=lambda: ResultMemory(seed=1)),
            Budget.unlimited(),
            Call,
        ),
    }
    for rewriter, _, _ in rewriters.values():
        rewriter.count("{}")  # the tokenizer loaded before the first round
    return rewriters


Row = tuple[str, int, str, dict[str, tuple[float, float]], bool, int]


def measure(old: Any, kind: str, size: int, reps: int) -> Row:
    rewriters = rewriters_of(old)
    line = line_of(kind, size)
    if size >= 1_000_000:
        reps = max(3, reps // (5 if size < 5_000_000 else 10))
    times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in rewriters}
    seen: dict[str, tuple[Any, Any]] = {}
    for i in range(reps + 1):
        for name, (rewriter, budget, call_type) in rewriters.items():
            # A fresh slot each round: every round answers a first result. The garbage of
            # the run before is collected first, so that no run pays for another's.
            call = call_type("orders", f"orders {i}")
            gc.collect()
            answer, owed, outcome, new = run(rewriter, budget, call, line)
            if i:  # (round 0 warms up)
                times[name][0].append(answer)
                times[name][1].append(owed)
            seen[name] = (figures(outcome), None if new is None else json.loads(new))
    same = all(seen[name] == seen["before"] for name in rewriters)
    for name in rewriters:
        if seen[name] != seen["before"]:
            print(name, seen[name][0], seen["before"][0], file=sys.stderr)
    ms = {
        name: (statistics.median(a) * 1e3, statistics.median(b) * 1e3)
        for name, (a, b) in times.items()
    }
    print(kind, len(line), ms, "same" if same else "DIFFERENT", flush=True)
    return kind, len(line), seen["settled"][0][0], ms, same, reps


def report(rows: list[Row], reps: int, out: Path | None) -> None:
    lines = [
        "# The answer path: before and after (bench/answer_path.py)",
        "",
        f"`python bench/answer_path.py --before DIR --reps {reps}`: one process, rounds"
        " interleaved, medians. *answer*: `Rewriter.rewrite_line` (what the client waits"
        " for); *ledger*: `Outcome.count_owed` after the answer is out. `before` is the"
        " `--before` tree's default rewriter, `exact` this tree's exact path"
        " (`Codec.exact()`), `settled` this tree's default (settled-estimate mode).",
        "*same*: every answer (the JSON message) and ledger figure equal to `before`'s.",
        "",
        "| result | decision | before answer ms | exact answer ms | settled answer ms |"
        " settled / before | ledger ms before / settled | same | rounds |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for kind, size, decision, ms, same, reps in rows:
        b, x, s = ms["before"][0], ms["exact"][0], ms["settled"][0]
        lines.append(
            f"| {kind} {_size(size)} | {decision} | {b:.2f} | {x:.2f} | {s:.2f} | {s / b:.2f}"
            f" | {ms['before'][1]:.2f} / {ms['settled'][1]:.2f} | {'yes' if same else 'NO'}"
            f" | {reps} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if out is not None:
        out.write_text(text, encoding="utf-8")


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} KB"


if __name__ == "__main__":
    main()
