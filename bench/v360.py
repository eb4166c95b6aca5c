"""The reference's v3.6.0 constant columns measured on the corpus, and dense's choice (D6.3).

Run ``python bench/v360.py`` (with the ``tokens`` or ``bench`` extra). Prints Markdown and
writes ``bench/v360.md``. Inputs: every distinct JSON value of ``../shared/corpus`` (override
with ``GCFKIT_CORPUS``): the MCP results' JSON text blocks and structuredContent, and TOON's
datasets, as ``tests/test_v360.py`` reads them.

1. Tokens of ``gcfkit.dumps(value)`` (v3.5.3) and ``gcfkit.dumps(value, spec="3.6.0")`` (the
   reference's constant columns), each decoded back and compared with the value.
2. docs/extensions/dense.md D6.3: what a dense encoder would pay if a constant column held
   the reference's meaning (a literal, never a reference): every constant whose value is a
   reference written as its definition's string instead (quoted when it holds ``}``), and a
   definition no longer referenced dropped. Definitions chosen with exact counts.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import gcfkit
from gcfkit import dense, tokens
from gcfkit.jsonio import same_value
from gcfkit.scalar import quote_string

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("GCFKIT_CORPUS", HERE.parent.parent / "shared" / "corpus"))
ENCODINGS = ("o200k_base", "cl100k_base")
_CONSTANT_REF = re.compile(r"(?<==)(\$[A-Za-z0-9_]+)(?=[,}])")
_DEFINITION = re.compile(r"^(\$[A-Za-z0-9_]+)=(.*)$")


def corpus_values() -> list[Any]:
    """Every distinct JSON value of the corpus (see the module's docstring)."""
    found: dict[str, Any] = {}
    for p in sorted((CORPUS / "toon").glob("*.json")):
        v = json.loads(p.read_text(encoding="utf-8"))
        found.setdefault(json.dumps(v), v)
    for p in sorted((CORPUS / "mcp").glob("*/[0-9]*.json")):
        result = json.loads(p.read_text(encoding="utf-8")).get("result") or {}
        for block in result.get("content", []):
            try:
                v = json.loads(block.get("text", ""))
            except ValueError:
                continue
            found.setdefault(json.dumps(v), v)
        if "structuredContent" in result:
            v = result["structuredContent"]
            found.setdefault(json.dumps(v), v)
    return list(found.values())


def literal_constants(wire: str) -> tuple[str, int]:
    """``wire`` (dense) with every constant that is a reference written as its string, the
    definitions then unused dropped; and how many constants changed."""
    lines = wire.split("\n")
    defs: dict[str, str] = {}
    for line in lines[1:]:
        m = _DEFINITION.match(line)
        if m is None:
            break
        defs[m.group(1)] = m.group(2)
    changed = 0
    out = []
    for line in lines:
        if "{" in line and not _DEFINITION.match(line):

            def literal(m: re.Match[str]) -> str:
                text = defs[m.group(1)]
                return quote_string(text) if "}" in text and text[:1] != '"' else text

            line, n = _CONSTANT_REF.subn(literal, line)
            changed += n
        out.append(line)
    body = "\n".join(x for x in out if not _DEFINITION.match(x))
    kept = [
        x
        for x in out
        if (m := _DEFINITION.match(x)) is None
        or re.search(re.escape(m.group(1)) + r"(?![A-Za-z0-9_])", body)
    ]
    return "\n".join(kept), changed


def main() -> int:
    values = corpus_values()
    rows = []
    for enc in ENCODINGS:
        counter = tokens.counter(enc)
        if not counter.exact:
            raise SystemExit(f"exact {enc} counts need the tokens extra (bpe-openai)")
        count = counter.count
        v353 = v360 = factored = 0
        dense_total = literal_total = constants = payloads = 0
        for v in values:
            plain, ref = gcfkit.dumps(v), gcfkit.dumps(v, spec="3.6.0")
            if not same_value(gcfkit.loads(ref), gcfkit.loads(plain)):
                raise SystemExit("a v3.6.0 payload does not read back")
            v353 += count(plain)
            v360 += count(ref)
            factored += plain != ref
            wire = dense.dumps(v, count=count)
            alt, n = literal_constants(wire)
            if not same_value(dense.loads(alt), dense.loads(wire)):
                raise SystemExit("the literal-constant form does not read back")
            dense_total += count(wire)
            literal_total += count(alt)
            constants += n
            payloads += n > 0
        rows.append((enc, v353, v360, factored, dense_total, literal_total, constants, payloads))
    out = [
        "# The reference's v3.6.0 constant columns, and dense's choice (D6.3)",
        "",
        f"`python bench/v360.py`: {len(values)} distinct JSON values of ../shared/corpus.",
        "",
        '| encoding | v3.5.3 (gcfkit.dumps) | v3.6.0 constant columns (spec="3.6.0") '
        "| values with one | saved |",
        "|---|---:|---:|---:|---:|",
    ]
    for enc, a, b, n, *_ in rows:
        out.append(f"| {enc} | {a:,} | {b:,} | {n} | {a - b:,} |")
    out += [
        "",
        "Dense, constants as dense reads them (a reference) against the reference's meaning "
        "(the literal):",
        "",
        "| encoding | dense | constants as literals | difference | constants that were "
        "references | in payloads |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for enc, *_, d, lit, c, p in rows:
        out.append(f"| {enc} | {d:,} | {lit:,} | {lit - d:+,} | {c} | {p} |")
    text = "\n".join(out) + "\n"
    (HERE / "v360.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
