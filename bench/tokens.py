"""Token benchmark: every format, both encodings, every cell round-trip verified.

Run ``python bench/tokens.py`` (with the ``bench`` extra installed). Writes
``bench/report.md`` and ``bench/*.png``. Inputs: ``../shared/corpus`` (override with
``GCFKIT_CORPUS``): TOON's 8 token-efficiency datasets and the JSON text blocks of the
real MCP tool results. Nothing is downloaded: token counts come from the rank files
bundled in ``bpe-openai`` (identical to tiktoken's), and terse-mcp, which counts with
tiktoken, is handed the same files.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import json
import os
import platform
import random
import re
import time
from dataclasses import replace
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import gcfkit
from gcfkit import tokens
from gcfkit.eval.datasets import TOON_DATASETS
from gcfkit.graph import Edge, Graph, Session, SessionReader, Symbol, graph_to_model
from gcfkit.graph import dumps as graph_dumps
from gcfkit.graph import loads as graph_loads
from gcfkit.jsonio import loads_json, same_value
from gcfkit.keyed import DeltaSession, KeyedSet, apply_delta, loads_delta
from gcfkit.measure.report import Format, FormatResult, default_formats, extension_format
from gcfkit.measure.report import measure as measure_format
from gcfkit.measure.savings import signed_change
from gcfkit.traffic.corpus import read_sessions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = Path(os.environ.get("GCFKIT_CORPUS", ROOT.parent / "shared" / "corpus"))
ENCODINGS = ("o200k_base", "cl100k_base")
SHORT = {"o200k_base": "o200k", "cl100k_base": "cl100k"}
GCF_PYTHON_REFERENCE_O200K = 249_016


# ---------------------------------------------------------------------------------------
# Offline tiktoken for terse-mcp
# ---------------------------------------------------------------------------------------


def _bundled_ranks(stem: str, expected_hash: str | None) -> dict[bytes, int]:
    blob = (resources.files("bpe_openai.data") / f"{stem}.tiktoken.gz").read_bytes()
    data = gzip.decompress(blob)
    if expected_hash is not None and hashlib.sha256(data).hexdigest() != expected_hash:
        raise RuntimeError(f"bundled {stem} ranks differ from tiktoken's")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def offline_tiktoken() -> bool:
    """Point tiktoken's loader at bpe-openai's files (hash-checked by tiktoken's value)."""
    try:
        import tiktoken_ext.openai_public as openai_public
    except ImportError:
        return False

    def load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        stem = blobpath.rsplit("/", 1)[-1].removesuffix(".tiktoken")
        return _bundled_ranks(stem, expected_hash)

    openai_public.load_tiktoken_bpe = load
    return True


# ---------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


# Column labels of the report's tables (gcfkit stats uses longer ones).
LABELS = {
    "json-pretty": "JSON pretty",
    "json-compact": "JSON compact",
    "toon": "TOON",
    "gcx1": "GCX1",
    "gcf": "GCF gcfkit",
}
# The formats "best lossless" chooses among per payload (what the proxy could send).
LOSSLESS_CHOICES = ("gcf", "gcf-ext", "json-compact")


def build_formats() -> list[Format]:
    """gcfkit stats' formats, then the two peers that are bench-only dependencies."""
    fmts = [replace(f, label=LABELS[f.name]) for f in default_formats(tool="bench")]
    # The dense profile (docs/extensions/dense.md), its definitions chosen by o200k counts.
    fmts.append(replace(extension_format("o200k_base"), label="GCF dense"))
    try:
        import gcf

        fmts.append(Format("gcf-python", "GCF gcf-python", gcf.encode_generic, gcf.decode_generic))
    except ImportError:
        fmts.append(_missing("gcf-python", "GCF gcf-python"))
    try:
        from terse import transforms

        fmts.append(
            Format(
                "terse",
                "terse lossless",
                transforms.compress,
                transforms.decompress,
                key_order=False,
                note="terse.transforms.compress (Tier 0 + 0.5); key order not promised",
            )
        )
    except ImportError:
        fmts.append(_missing("terse", "terse lossless"))
    return fmts


def _missing(name: str, label: str) -> Format:
    def unavailable(*_: Any) -> Any:
        raise RuntimeError(f"{label} is not installed")

    return Format(name, label, unavailable, unavailable, available=False, note="not installed")


def measure(fmt: Format, value: Any) -> FormatResult:
    return measure_format(fmt, value, ENCODINGS)


def toon_datasets() -> list[tuple[str, Any]]:
    out = []
    for name in TOON_DATASETS:
        path = CORPUS / "toon" / f"{name}.json"
        out.append((name, loads_json(path.read_text(encoding="utf-8"))))
    return out


def mcp_datasets() -> list[tuple[str, Any]]:
    out = []
    for session in read_sessions(CORPUS / "mcp"):
        for call in session.calls:
            for i, block in enumerate((call.result or {}).get("content", [])):
                if block.get("type") != "text":
                    continue
                try:
                    value = loads_json(block["text"])
                except gcfkit.GCFError:
                    continue
                if not isinstance(value, (dict, list)):
                    continue
                suffix = f"#{i}" if i else ""
                out.append((f"{session.name}/{Path(call.file).stem}{suffix}", value))
    return out


# ---------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------


Results = dict[str, dict[str, FormatResult]]  # dataset -> format -> cell


def run_all(datasets: list[tuple[str, Any]], fmts: list[Format]) -> Results:
    return {name: {f.name: measure(f, value) for f in fmts} for name, value in datasets}


def best_lossless(row: dict[str, FormatResult], enc: str) -> int | None:
    choices = [row[k].tokens[enc] for k in LOSSLESS_CHOICES if k in row and row[k].lossless]
    return min(choices) if choices else None


def cell_text(c: FormatResult, enc: str) -> str:
    if c.text is None:
        return "✗ n/a" if "not installed" in (c.error or "") else "✗ refused"
    if not c.lossless:
        return f"✗ {c.tokens[enc]:,}"
    return f"{c.tokens[enc]:,}"


def totals(results: Results, fmts: list[Format], enc: str) -> dict[str, tuple[int, int]]:
    """Per format: (total with failed cells counted as compact JSON, failed cells)."""
    out = {}
    for f in fmts:
        total = failed = 0
        for row in results.values():
            c = row[f.name]
            if c.lossless:
                total += c.tokens[enc]
            else:
                failed += 1
                total += row["json-compact"].tokens[enc]
        out[f.name] = (total, failed)
    return out


def table(results: Results, fmts: list[Format], enc: str) -> list[str]:
    head = ["dataset", *(f.label for f in fmts), "best lossless"]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for name, row in results.items():
        best = best_lossless(row, enc)
        cells = [cell_text(row[f.name], enc) for f in fmts]
        best_cell = f"{best:,}" if best is not None else "✗"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {best_cell} |")
    tot = totals(results, fmts, enc)
    best_total = sum(
        best_lossless(row, enc) or row["json-compact"].tokens[enc] for row in results.values()
    )
    cells = [f"**{t:,}**" + (f" ({n}✗)" if n else "") for t, n in tot.values()]
    lines.append("| **total** | " + " | ".join(cells) + f" | **{best_total:,}** |")
    base = tot["json-compact"][0]
    # The sign of every gcfkit view: −31.8% is 31.8% fewer tokens than compact JSON.
    cells = [signed_change(base, t) for t, _ in tot.values()]
    lines.append(
        "| change vs compact | " + " | ".join(cells) + f" | {signed_change(base, best_total)} |"
    )
    return lines


def failures(results: Results, fmts: list[Format]) -> list[str]:
    """Failed round trips and crashes one by one; refusals grouped by reason."""
    out = []
    refused: dict[tuple[str, str], list[str]] = {}
    for name, row in results.items():
        for f in fmts:
            c = row[f.name]
            if c.lossless or "not installed" in (c.error or ""):
                continue
            if "unsupported_shape" in (c.error or ""):
                reason = (c.error or "").split("] ", 1)[-1].split(":")[0].split(";")[0]
                refused.setdefault((f.label, reason), []).append(name)
            else:
                out.append(f"- **{name} / {f.label}**: {c.error}")
    for (label, reason), names in refused.items():
        out.append(f"- {label} refused {len(names)} (by design, {reason}): {', '.join(names)}")
    return out


def key_order_changes(results: Results, fmts: list[Format]) -> list[str]:
    return [
        f"- {name} / {f.label}"
        for name, row in results.items()
        for f in fmts
        if row[f.name].key_order_kept is False
    ]


def parity(results: Results, datasets: list[tuple[str, Any]]) -> list[str]:
    out = []
    for name, _ in datasets:
        mine, theirs = results[name]["gcf"].text, results[name]["gcf-python"].text
        if mine is None or theirs is None or mine == theirs:
            if mine is None and theirs is not None:
                out.append(f"- **{name}**: gcfkit failed ({results[name]['gcf'].error})")
            continue
        a, b = mine.split("\n"), theirs.split("\n")
        i = next(
            (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        ours = a[i][:110] if i < len(a) else "(end)"
        peer = b[i][:110] if i < len(b) else "(end)"
        out.append(
            f"- **{name}**: {len(mine):,} vs {len(theirs):,} bytes; first difference at line "
            f"{i + 1} ({classify(ours, peer)}):\n  - gcfkit: `{ours}`\n  - gcf-python: `{peer}`"
        )
    return out


_DECL = re.compile(r"\{([^}]*)\}")
_ATTACH = re.compile(r"\s*\.\S+ \[\d+\]")


def classify(ours: str, peer: str) -> str:
    """A first guess at which side a difference comes from, to speed up triage."""
    m_ours, m_peer = _DECL.search(ours), _DECL.search(peer)
    if m_peer and "=" in m_peer.group(1) and not (m_ours and "=" in m_ours.group(1)):
        return "gcf-python writes a constant column `field=value`, which spec v3.5.3 lacks"
    if _ATTACH.fullmatch(ours) and m_peer and peer.startswith(ours):
        return "gcfkit reuses a shared array schema (§7.4.5.3, optional); gcf-python repeats it"
    if _ATTACH.fullmatch(peer) and m_ours and ours.startswith(peer):
        return "gcf-python reuses a shared array schema (§7.4.5.3, optional); gcfkit repeats it"
    return "unclassified"


# ---------------------------------------------------------------------------------------
# Multi-call curves
# ---------------------------------------------------------------------------------------


def graph_session_curve() -> tuple[list[str], list[tuple[int, int, int, int]]]:
    """5 overlapping graph calls: (call, JSON compact, stateless GCF, session GCF) tokens."""
    rng = random.Random(20261130)
    kinds = ["function", "method", "class", "interface", "constant"]
    pool = [
        Symbol(
            f"gcf.pkg{i % 7}.Module{i % 13}.symbol_{i}",
            kinds[i % len(kinds)],
            round(rng.uniform(0.2, 0.99), 2),
            rng.choice(["lsp", "ast", "grep"]),
            distance=0 if i % 5 == 0 else 1 + i % 2,
        )
        for i in range(160)
    ]
    session, reader = Session(), SessionReader()
    rows = []
    notes = []
    for call in range(5):
        # Each call sees 80 symbols; consecutive windows overlap by 60.
        window = pool[call * 20 : call * 20 + 80]
        edges = [
            Edge(a.qualified_name, b.qualified_name, "calls")
            for a, b in zip(window, window[3:], strict=False)
            if rng.random() < 0.6
        ]
        g = Graph(window, edges, tool="find_usages")
        stateless = graph_dumps(g)
        wire = session.dumps(g)
        # Graph payloads come back in canonical order (§16.1), so compare with the
        # stateless decode; edges are ordered by IDs, which a session numbers differently,
        # so they compare as a set.
        got, want = reader.loads(wire), graph_loads(stateless)
        if got.symbols != want.symbols or set(got.edges) != set(want.edges):
            notes.append(f"call {call + 1}: session payload did not decode to the graph")
        model = json.dumps(graph_to_model(g), separators=(",", ":"))
        rows.append((call + 1, tokens.count(model), tokens.count(stateless), tokens.count(wire)))
    return notes, rows


def delta_curve(base_rows: list[dict[str, Any]]) -> tuple[list[str], list[tuple[int, ...]]]:
    """10 repeated calls with 1-5% churn: (call, churn %, JSON, full GCF, delta wire) tokens."""
    rng = random.Random(5)
    fields = list(base_rows[0])
    key = fields[0]
    current = [dict(r) for r in base_rows]
    try:
        session = DeltaSession(KeyedSet(key, fields, current, name="rows"), tool="list")
        first = session.full()
    except Exception as e:
        return [f"DeltaSession failed: {type(e).__name__}: {e}"], []
    full0 = gcfkit.dumps(current)
    rows: list[tuple[int, ...]] = [
        (
            1,
            0,
            tokens.count(json.dumps(current, separators=(",", ":"))),
            tokens.count(full0),
            tokens.count(first),
        )
    ]
    notes: list[str] = []
    prev = KeyedSet(key, fields, [dict(r) for r in current], name="rows")
    next_id = max(r[key] for r in current) + 1 if isinstance(current[0][key], int) else None
    for call in range(2, 11):
        churn = rng.uniform(0.01, 0.05)
        n = max(1, round(churn * len(current)))
        victims = rng.sample(range(len(current)), n)
        mutable = [f for f in fields[1:] if isinstance(current[0][f], (int, str))]
        for i in victims:
            f = rng.choice(mutable)
            v = current[i][f]
            current[i][f] = v + 1 if isinstance(v, int) and not isinstance(v, bool) else f"{v}*"
        if next_id is not None and call % 2 == 0:
            current.pop(rng.randrange(len(current)))
            new = dict(current[0])
            new[key] = next_id
            next_id += 1
            current.append(new)
        update = KeyedSet(key, fields, [dict(r) for r in current], name="rows")
        try:
            wire, is_full = session.next(update)
            if not is_full:
                got = apply_delta(prev, loads_delta(wire))
                # A keyed set is identified by its key column: compare as key -> row.
                have = {r[key]: r for r in got.rows}
                want = {r[key]: r for r in update.rows}
                if not same_value(have, want, key_order=False):
                    notes.append(f"call {call}: applying the delta did not rebuild the rows")
        except Exception as e:
            notes.append(f"call {call}: {type(e).__name__}: {e}")
            return notes, rows
        prev = update
        compact = json.dumps(current, separators=(",", ":"))
        rows.append(
            (
                call,
                round(churn * 100),
                tokens.count(compact),
                tokens.count(gcfkit.dumps(current)),
                tokens.count(wire),
            )
        )
    return notes, rows


# ---------------------------------------------------------------------------------------
# Throughput
# ---------------------------------------------------------------------------------------


def throughput(texts: list[str]) -> dict[str, float]:
    blob = "\n".join(texts)
    size = len(blob.encode("utf-8"))
    out = {}
    for enc in ENCODINGS:
        tokens.count("warm up", enc)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            tokens.count(blob, enc)
            best = min(best, time.perf_counter() - t0)
        out[enc] = size / best / 1e6
    out["bytes"] = size
    return out


# ---------------------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------------------


def charts(
    toon: Results,
    fmts: list[Format],
    graph_rows: list[tuple[int, int, int, int]],
    delta_rows: list[tuple[int, ...]],
) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    shown = [f for f in fmts if f.name != "json-pretty"]
    names = list(toon)
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / len(shown)
    for j, f in enumerate(shown):
        vals = [
            toon[n][f.name].tokens.get("o200k_base", 0) if toon[n][f.name].lossless else 0
            for n in names
        ]
        ax.bar([i + j * width for i in range(len(names))], vals, width, label=f.label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names, rotation=20)
    ax.set_ylabel("o200k_base tokens (0 = failed or refused)")
    ax.set_title("Tokens per TOON dataset and format (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "tokens_per_dataset.png", dpi=110)
    plt.close(fig)
    written.append("tokens_per_dataset.png")

    tot = totals(toon, fmts, "o200k_base")
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels = [f.label for f in fmts] + ["best lossless"]
    vals = [tot[f.name][0] for f in fmts]
    vals.append(
        sum(
            best_lossless(row, "o200k_base") or row["json-compact"].tokens["o200k_base"]
            for row in toon.values()
        )
    )
    bars = ax.barh(labels, vals, color="#4c72b0")
    for b, v in zip(bars, vals, strict=True):
        ax.text(v, b.get_y() + b.get_height() / 2, f" {v:,}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("o200k_base tokens, 8 TOON datasets (failed cells counted as compact JSON)")
    ax.set_title("Total tokens per format")
    fig.tight_layout()
    fig.savefig(HERE / "tokens_total.png", dpi=110)
    plt.close(fig)
    written.append("tokens_total.png")

    if graph_rows or delta_rows:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        series = (
            (
                axes[0],
                graph_rows,
                "Graph session: 5 overlapping calls",
                ((1, "JSON compact"), (2, "GCF stateless"), (3, "GCF session")),
            ),
            (
                axes[1],
                delta_rows,
                "Generic deltas: 10 calls, 1-5% churn",
                ((2, "JSON compact"), (3, "GCF full"), (4, "GCF delta session")),
            ),
        )
        for ax, rows, title, columns in series:
            if not rows:
                continue
            calls = [r[0] for r in rows]
            for idx, label in columns:
                ax.plot(
                    calls, list(itertools.accumulate(r[idx] for r in rows)), marker="o", label=label
                )
            ax.set_xticks(calls)
            ax.set_title(title)
            ax.set_xlabel("call")
            ax.legend()
        axes[0].set_ylabel("cumulative o200k tokens")
        fig.tight_layout()
        fig.savefig(HERE / "multi_call.png", dpi=110)
        plt.close(fig)
        written.append("multi_call.png")
    return written


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def main() -> int:
    started = time.perf_counter()
    have_tiktoken = offline_tiktoken()
    fmts = build_formats()
    toon_data = toon_datasets()
    mcp_data = mcp_datasets()
    toon = run_all(toon_data, fmts)
    mcp = run_all(mcp_data, fmts)
    graph_notes, graph_rows = graph_session_curve()
    tabular = dict(toon_data)["tabular"]["employees"]
    delta_notes, delta_rows = delta_curve(tabular[:500])
    texts = [c.text for res in (toon, mcp) for row in res.values() for c in row.values() if c.text]
    speed = throughput(texts)
    pngs = charts(toon, fmts, graph_rows, delta_rows)

    r: list[str] = ["# gcfkit token benchmark", ""]
    r.append(
        "Generated by `python bench/tokens.py`. Every cell is the token count of the payload "
        "in that format, **verified by decoding it back** and comparing type-strictly with "
        "the input (key order too, for formats that promise it). `✗` marks a failed or "
        "refused cell; it never drops a row. Totals count a failed cell as compact JSON "
        "(what a proxy falling back would send) and say how many cells failed."
    )
    r.append("")
    methods = ", ".join(f"{e}: {tokens.method(e)}" for e in ENCODINGS)
    r.append(
        f"- Token counts: {methods} (bpe-openai {_version('bpe-openai')}, rank files "
        "byte-identical to tiktoken's; no download)."
    )
    r.append(
        f"- Python {platform.python_version()}; gcfkit {gcfkit.__version__}; "
        f"toon-format {_version('toon-format')}; gcf-python {_version('gcf-python')}; "
        f"terse-mcp {_version('terse-mcp')}"
        + ("" if have_tiktoken else " (tiktoken missing: terse falls back to len/4)")
        + "."
    )
    r.append(
        "- best lossless = min(GCF gcfkit, GCF dense, compact JSON) per payload; GCF dense is "
        "gcfkit's extension profile (docs/extensions/dense.md), which v3.5.3 decoders reject."
    )
    r.append("")
    for enc in ENCODINGS:
        r.append(f"## TOON datasets, {enc}")
        r.append("")
        r += table(toon, fmts, enc)
        r.append("")
    tot = totals(toon, fmts, "o200k_base")
    best_total = sum(best_lossless(row, "o200k_base") or 0 for row in toon.values())
    others = {f.label: tot[f.name][0] for f in fmts}
    smallest = min(others.items(), key=lambda kv: kv[1])
    holds = best_total <= smallest[1]
    r.append(
        f"**Best lossless on TOON's datasets (o200k): {best_total:,} tokens**; smallest single "
        f"format: {smallest[0]} {smallest[1]:,}. Best lossless is the smallest of all: "
        f"**{'yes' if holds else 'NO'}**. Reference: GCF from gcf-python "
        f"{GCF_PYTHON_REFERENCE_O200K:,} o200k tokens (measured here: "
        f"{tot['gcf-python'][0]:,})."
    )
    r.append("")
    if pngs:
        r += [f"![{p}]({p})" for p in pngs if p != "multi_call.png"]
        r.append("")
    for enc in ENCODINGS:
        r.append(f"## MCP tool results (JSON text blocks), {enc}")
        r.append("")
        r.append(
            f"{len(mcp_data)} JSON text blocks from {CORPUS.name}/mcp (real `tools/call` "
            "results of 7 servers; non-JSON text blocks are not measured)."
        )
        r.append("")
        r += table(mcp, fmts, enc)
        r.append("")
    r.append("## Parity: gcfkit vs gcf-python canonical output")
    r.append("")
    diffs = parity(toon, toon_data) + parity(mcp, mcp_data)
    total_payloads = len(toon_data) + len(mcp_data)
    if diffs:
        r.append(
            f"{len(diffs)} of {total_payloads} payloads differ byte-wise. Each is a bug "
            "(in gcfkit or the peer) until shown otherwise:"
        )
        r.append("")
        r += diffs
    else:
        r.append(f"All {total_payloads} payloads are byte-identical.")
    r.append("")
    fails = failures(toon, fmts) + failures(mcp, fmts)
    r.append("## Failed or refused cells")
    r.append("")
    r += fails or ["None."]
    r.append("")
    order = key_order_changes(toon, fmts) + key_order_changes(mcp, fmts)
    r.append("## Object key order")
    r.append("")
    r.append(
        "Round trips that kept every type, key and value but not the order of some "
        "object's keys (checked for formats that promise key order; GCX1 and terse do "
        "not). GCF §1.1 lists key order among preserved properties while its equality and "
        "§7.11's field-union rule for tables do not keep a row's own order, so these "
        "count as lossless above and are listed here:"
    )
    r.append("")
    r += order or ["None."]
    r.append("")
    r.append("## Multi-call sessions (o200k_base)")
    r.append("")
    r.append(
        "Graph session (`gcfkit.graph.Session`): 5 calls of 80 symbols each, consecutive "
        "windows overlapping by 60 symbols (synthetic, seeded). Symbols already sent travel "
        "as `@N` references. Every session payload is decoded with `SessionReader` and "
        "checked against the stateless decode (same symbols, same edge set)."
    )
    r.append("")
    if graph_rows:
        r.append("| call | JSON compact | GCF stateless | GCF session | session vs stateless |")
        r.append("|---:|---:|---:|---:|---:|")
        cs = cj = cg = 0
        for call, j, g, s in graph_rows:
            cs, cj, cg = cs + s, cj + j, cg + g
            r.append(f"| {call} | {j:,} | {g:,} | {s:,} | {1 - s / g:+.1%} |")
        r.append(f"| **all** | {cj:,} | {cg:,} | {cs:,} | {1 - cs / cg:+.1%} |")
    r += [f"- {n}" for n in graph_notes]
    r.append("")
    r.append(
        "Generic deltas (`gcfkit.keyed.DeltaSession`, default re-anchoring): 500 employee "
        "rows (TOON tabular), 10 calls; each later call changes 1-5% of the rows (seeded) "
        "and every other call adds and removes a row."
    )
    r.append("")
    if delta_rows:
        r.append("| call | churn | JSON compact | GCF full | delta session | vs GCF full |")
        r.append("|---:|---:|---:|---:|---:|---:|")
        sj = sf = sd = 0
        for call, churn, j, f, d in delta_rows:
            sj, sf, sd = sj + j, sf + f, sd + d
            r.append(f"| {call} | {churn}% | {j:,} | {f:,} | {d:,} | {1 - d / f:+.1%} |")
        r.append(f"| **all** | | {sj:,} | {sf:,} | {sd:,} | {1 - sd / sf:+.1%} |")
    r += [f"- {n}" for n in delta_notes]
    r.append("")
    if "multi_call.png" in pngs:
        r += ["![multi_call.png](multi_call.png)", ""]
    r.append("## Token counting throughput")
    r.append("")
    r.append(
        f"`gcfkit.tokens.count` over all {speed['bytes'] / 1e6:.1f} MB of payload text above "
        f"(best of 3): o200k_base {speed['o200k_base']:.1f} MB/s, cl100k_base "
        f"{speed['cl100k_base']:.1f} MB/s (target: at least 1 MB/s)."
    )
    r.append("")
    r.append(f"Run time: {time.perf_counter() - started:.0f} s.")
    r.append("")
    (HERE / "report.md").write_text("\n".join(r), encoding="utf-8")
    print("\n".join(r[:3]))
    print(f"wrote {HERE / 'report.md'} and {', '.join(pngs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
