"""Reference-leak and memory-error checks of the C accelerator (gcfkit._speedups).

``python bench/c_checks.py refleaks`` builds the extension for the running interpreter
(``-O0 -g``, in a temporary copy of the package) and runs a workload that reaches every
path of it, answered and handed back: encoding every kind of value (with the errors,
subclasses and conflicts that make it give up half-way), decoding every fixture and
canonical payload, and decoding thousands of mutated payloads (which stop at every kind of
line). It repeats the workload and reports how much ``sys.gettotalrefcount()`` (on a debug
build of Python, e.g. Debian's ``python3-dbg``: ``python3.11-dbg bench/c_checks.py
refleaks``) and ``sys.getallocatedblocks()`` grow per round after a warm-up; a leak grows
every round.

``python bench/c_checks.py memcheck`` runs a smaller round of the same workload under
valgrind's memcheck (``PYTHONMALLOC=malloc``, so every object is a malloc block) and reports
the errors whose stack reaches the extension (CPython's own start-up noise is left out).

Both exit 1 when they find something.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def build(dest: Path) -> Path:
    """Copy the package into dest and compile _speedups.c for this interpreter there."""
    pkg = dest / "gcfkit"
    shutil.copytree(
        ROOT / "src" / "gcfkit", pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    out = pkg / ("_speedups" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [
        "gcc", "-shared", "-fPIC", "-O0", "-g", "-Wall",
        f"-I{sysconfig.get_paths()['include']}",
        str(pkg / "_speedups.c"), "-o", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    return dest


def _values() -> list[Any]:
    import collections
    import enum

    class Level(enum.IntEnum):
        LOW = 1

    corpus = ROOT.parent / "shared" / "corpus" / "toon"
    out: list[Any] = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(corpus.glob("*"))
                      if p.suffix == ".json"]  # fmt: skip
    rows = [{"id": i, "name": f"n{i}", "tags": ["a", "b"][: i % 3], "sub": {"x": i, "y": None}}
            for i in range(30)]  # fmt: skip
    deep: Any = 1
    for _ in range(150):
        deep = [deep]
    conflict = [{"f": [{"a": 1}]}, {"f": [1, [2]]}]
    out += [
        rows, {"m": {f"k{i}": {"a": i, "b": [i]} for i in range(5)}}, deep, conflict,
        [{"a": {"p": 1, "q": 2, "r": 3}}, {"a": {"p": 4, "q": 5, "r": 6}}],
        [{"a>b": 1, "c": 2}, {"c": 3}], {"x": float("nan")}, [{"a": 2**64}], {"s": "\ud800"},
        [{"a": collections.OrderedDict(b=1)}], [{"a": Level.LOW}], {1: 2}, {"q": "a|b,\"c\"\n"},
        [1.5, -0.0, 1e-7, 1e300, 5e-324, 2.0**53], ["é", "\U0001f600", "x\u2028y"],
    ]  # fmt: skip
    return out


def workload(seed: int, scale: int) -> None:
    """One round: every value encoded with every option set, every payload decoded."""
    import gcfkit
    from gcfkit.generic.encoder import dumps

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.conformance import load_fixtures

    payloads: list[str] = [
        text
        for _, fx in load_fixtures()
        for key in ("input", "expected")
        if isinstance(text := fx.get(key), str) and text.startswith("GCF profile=generic")
    ]
    for value in _values():
        for flags in ((True, True, True), (False, False, False), (True, False, True)):
            with contextlib.suppress(gcfkit.GCFError):
                payloads.append(dumps(value, flatten=flags[0], shared_schemas=flags[1],
                                      inline_schemas=flags[2]))  # fmt: skip
    rng = random.Random(seed)
    for text in payloads:
        _decode(text)
    _text_functions(rng, scale)
    for _ in range(scale):
        payload = rng.choice(payloads)
        for _ in range(rng.randint(1, 3)):
            payload = _mutate(rng, payload)
        _decode(payload)


def _text_functions(rng: random.Random, scale: int) -> None:
    """The accelerator's text functions (token estimates, dense spellings, compact JSON) on
    JSON texts of every value in every spelling, on mutations of them (which stop at every
    kind of escape and number), and on every string in them."""
    from gcfkit import speedups

    texts = []
    for value in _values():
        for kw in ({"ensure_ascii": False}, {"ensure_ascii": True, "indent": 1}):
            with contextlib.suppress(ValueError, TypeError):
                texts.append(json.dumps(value, **kw))
    texts += ['["\\ud83d\\ude00\\ud800", -0, 1E400, 1e5, "\\u001f\\/"]', '["\ud800"]']
    for _ in range(scale):
        text = rng.choice(texts)
        pos = rng.randrange(len(text) + 1)
        texts.append(text[:pos] + rng.choice(_SPECIALS) + text[pos + rng.randint(0, 3) :])
    for text in texts:
        speedups.minify_json(text)
        speedups.token_features(text)
        speedups.dense_estimate(text)
        for s in text.split('"'):
            speedups.spelling(s)


_SPECIALS = ["|", "^", "~", '"', "\\", "@", ".", "#", ">", "{", "}", "[", "]", ":", "=",
             ",", " ", "\t", "\n", "-", "0", "?", "@0 ", "^{a,b}", "\\u", "\\ud800", "é",
             "## "]  # fmt: skip


def _mutate(rng: random.Random, text: str) -> str:
    """A small edit (tests/test_fuzz.py has the full set; this runs without pytest)."""
    lines = text.split("\n")
    kind = rng.randrange(6)
    if kind == 0:
        return text[: rng.randrange(len(text) + 1)]
    if kind == 1:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    elif kind == 2:
        del lines[rng.randrange(len(lines))]
    elif kind == 3:
        i = rng.randrange(len(lines))
        lines[i] = rng.choice(["", " ", "  ", "    "]) + lines[i].lstrip(" ")
    elif kind == 4:
        pos = rng.randrange(len(text) + 1)
        return text[:pos] + rng.choice(_SPECIALS) + text[pos:]
    else:
        pos = rng.randrange(len(text) + 1)
        return text[:pos] + text[pos + rng.randint(1, 6) :]
    return "\n".join(lines)


def _decode(text: str | bytes) -> None:
    import gcfkit

    with contextlib.suppress(gcfkit.GCFError):
        gcfkit.loads(text)


def refleaks() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, str(build(Path(tmp))))
        gcfkit = importlib.import_module("gcfkit")
        assert gcfkit.speedups_active(), "the freshly built accelerator did not load"
        total = getattr(sys, "gettotalrefcount", None)
        import gc

        def growth(rounds: int) -> tuple[int, int]:
            """Growth over `rounds` runs of the same two workload rounds."""
            gc.collect()
            refs, blocks = total() if total else 0, sys.getallocatedblocks()
            for r in range(rounds):
                workload(r % 2, 1500)
            gc.collect()
            return (total() if total else 0) - refs, sys.getallocatedblocks() - blocks

        growth(2)  # warm-up: caches fill, lazy imports happen
        # The measuring itself costs the same in both; only a leak grows with the rounds.
        (r2, b2), (r6, b6) = growth(2), growth(6)
        leak_refs, leak_blocks = (r6 - r2) / 4, (b6 - b2) / 4
        print(f"debug build: {total is not None}; growth per workload round, after a warm-up:")
        if total is not None:
            print(f"  references: {leak_refs:+.1f} (over 2 rounds {r2:+d}, over 6 {r6:+d})")
        print(f"  allocated blocks: {leak_blocks:+.1f} (over 2 rounds {b2:+d}, over 6 {b6:+d})")
        leak = leak_refs >= 1 or leak_blocks >= 1
        print("LEAK" if leak else "no growth: no leak")
        return 1 if leak else 0


def memcheck() -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp))
        code = (
            f"import sys; sys.path.insert(0, {str(path)!r}); sys.path.insert(1, {str(ROOT)!r});"
            "import gcfkit; assert gcfkit.speedups_active();"
            "sys.path.insert(0, " + repr(str(ROOT / "bench")) + ");"
            "import c_checks; c_checks.workload(0, 300)"
        )
        proc = subprocess.run(
            ["valgrind", "--error-limit=no", "--num-callers=30", sys.executable, "-c", code],
            env={"PYTHONMALLOC": "malloc", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=False,
        )
    blocks = proc.stderr.split("\n==")
    ours = [b for b in blocks if "_speedups" in b and ("Invalid" in b or "uninitialised" in b
                                                        or "definitely lost" in b)]  # fmt: skip
    summary = [line for line in proc.stderr.splitlines() if "ERROR SUMMARY" in line]
    print(f"valgrind exit {proc.returncode}; {summary[-1] if summary else ''}")
    print(f"errors in gcfkit._speedups frames: {len(ours)}")
    for b in ours[:5]:
        print("==" + b[:3000])
    return 1 if ours or proc.returncode not in (0,) else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[1] == "refleaks":
        return refleaks()
    if len(argv) == 2 and argv[1] == "memcheck":
        return memcheck()
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
