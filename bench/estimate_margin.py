"""The margin of the proxy's estimate mode (gcfkit.answers.estimates), measured.

For every value of the MCP corpus (each text block that is a JSON object or array) and each
of TOON's datasets (its original taken as ``json.dumps(indent=2)``), every form the proxy
weighs is built as it builds it: the original text, compact JSON, GCF and the dense profile
(both with their ``payload`` explanation), and the dense form whose definitions the
profile's own estimate chose (what estimate mode weighs instead of a dense form whose
definitions need exact counts). For each form, the error ratio ``r = estimate / exact``
(``gcfkit.tokens.estimate`` against the exact count; for the approximate dense form, against
the exact count of the exact dense form). For each pair of forms of one value, ``r(A) /
r(B)``: a choice between A and B made from estimates separated by more than that ratio is
the exact choice. Then, for candidate margins, the corpus replayed through
``Rewriter.rewrite_line`` in estimate mode: how many results are close calls, and whether
any answer differs from the exact path's.

    python bench/estimate_margin.py [--corpus ../shared/corpus]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

from gcfkit import tokens
from gcfkit.answers import estimates
from gcfkit.answers.codec import DENSE_CONSTRUCTS, Codec
from gcfkit.answers.forms import FullForms
from gcfkit.jsonio import dumps_compact

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


def ratios(original: str, value: Any, encoding: str) -> dict[str, float]:
    """The estimate's error ratio for each form of ``value``."""

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
    approximate = FullForms(codec, count=None, dense=DENSE_CONSTRUCTS, primer="payload")
    for form in approximate.texts(value, []):
        if form.kind == "dense" and "dense" in texts:
            out["dense~"] = estimate(form.text) / max(1, exact(texts["dense"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = ap.parse_args()
    items = values(args.corpus)
    print(f"{len(items)} values\n")
    for encoding in ENCODINGS:
        per_pair: dict[tuple[str, str], list[float]] = {}
        per_form: dict[str, list[float]] = {}
        for _name, original, value in items:
            r = ratios(original, value, encoding)
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
        print()
    print(f"margin in use: {estimates.MARGIN} relative + {estimates.SLACK} tokens")


if __name__ == "__main__":
    main()
