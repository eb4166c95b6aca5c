"""``gcfkit eval``: ask a model questions about the same data in several formats.

Everything but argument parsing lives in :mod:`gcfkit.eval`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

_FORMATS = "json,json-compact,toon,gcf,gcf-ext"


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "eval",
        help="comprehension and generation eval of the formats with a model you choose",
        description="Ask a model questions with deterministic answers about the same data in "
        "several formats (each with the primer the proxy would send); store every prompt and "
        "answer in OUT/run.jsonl; write OUT/report.md and OUT/report.html (accuracy with "
        "95% Wilson intervals, paired McNemar tests between formats, tokens per question). "
        "Models: openai-compatible:URL:MODEL, anthropic:MODEL, anthropic:URL:MODEL, "
        "command:CMD (prompt on stdin). Needs the eval extra for HTTP models.",
    )
    p.add_argument("--model", help="the model to ask (see above)")
    p.add_argument(
        "--formats", default=_FORMATS, help="comma list, FORMAT[:noprimer] (default: %(default)s)"
    )
    p.add_argument(
        "--datasets",
        default="synthetic:records,synthetic:graph,toon:tabular,toon:nested",
        help="comma list: toon:NAME, mcp:SERVER[/NNN], synthetic:records[:N], "
        "synthetic:graph[:SYMBOLS:EDGES], FILE.json (default: %(default)s)",
    )
    p.add_argument("--kinds", help="comma list of question kinds (default: all)")
    p.add_argument(
        "--questions",
        type=int,
        default=3,
        help="questions per kind per dataset (default %(default)s)",
    )
    p.add_argument(
        "--rows", type=int, default=100, help="records sampled per collection (default %(default)s)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of data sampling and questions (default %(default)s)",
    )
    p.add_argument(
        "--primer",
        choices=("proxy", "none", "both"),
        default="proxy",
        help="primer as the proxy sends it (default), none, or both (paired)",
    )
    p.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (default %(default)s)"
    )
    p.add_argument(
        "--model-seed",
        type=int,
        default=0,
        help="sampling seed sent to the model (default %(default)s)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=1024,
        help="answer length limit, tokens (default %(default)s)",
    )
    p.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per request (default %(default)s)"
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="requests in flight at most (default %(default)s)",
    )
    p.add_argument("--rpm", type=float, help="requests per minute at most")
    p.add_argument(
        "--retries",
        type=int,
        default=4,
        help="retries after a failed attempt (default %(default)s)",
    )
    p.add_argument(
        "--backoff",
        type=float,
        default=1.0,
        help="first backoff wait, seconds (default %(default)s)",
    )
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument("--corpus", help="corpus folder with toon/ and mcp/ (../shared/corpus)")
    p.add_argument("--out", default="gcfkit-eval", help="output folder (default: gcfkit-eval)")
    p.add_argument("--resume", action="store_true", help="ask only what OUT/run.jsonl lacks")
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan and its token costs, ask nothing"
    )
    p.add_argument(
        "--rescore", nargs="+", metavar="RUN", help="re-score stored run.jsonl files into OUT"
    )
    p.set_defaults(func=run)


def _progress(done: int, total: int, rec: dict[str, Any]) -> None:
    if sys.stderr.isatty():
        print(f"\r{done}/{total} answers", end="" if done < total else "\n", file=sys.stderr)
    elif done == total or done % 50 == 0:
        print(f"{done}/{total} answers", file=sys.stderr)


def _print_overall(summary: Any) -> None:
    from ..eval.report import render_markdown

    md = render_markdown(summary, {})
    start = md.index("## Accuracy and tokens per format")
    end = md.index("Accuracy counts errors")
    sys.stdout.write(md[start:end])


def run(args: argparse.Namespace) -> int:
    """Entry point of ``gcfkit eval``; returns the exit status."""
    from .. import eval as ev
    from ..errors import ConfigError
    from ..eval.formats import get_format
    from ..eval.models import Params, parse_model
    from ..eval.runner import RetryPolicy

    if args.rescore:
        md, page, summary = ev.rescore(args.rescore, args.out)
        _print_overall(summary)
        print(f"reports: {md} {page}")
        return 0
    kinds: Sequence[str] | None = _csv(args.kinds) if args.kinds else None
    common: dict[str, Any] = dict(
        datasets=_csv(args.datasets),
        formats=_csv(args.formats),
        kinds=kinds,
        per_kind=args.questions,
        seed=args.seed,
        rows=args.rows,
        corpus=args.corpus,
        primer=args.primer,
    )
    if args.dry_run:
        return _dry_run(ev.run_plan(**common))
    if not args.model:
        raise ConfigError("invalid_option", "gcfkit eval needs --model (or --dry-run, --rescore)")
    model = parse_model(args.model, api_key_env=args.api_key_env)
    for name in dict.fromkeys(f.partition(":")[0] for f in common["formats"]):
        fmt = get_format(name)
        if not fmt.available:
            print(f"gcfkit eval: skipping {name}: {fmt.note}", file=sys.stderr)
    params = Params(args.temperature, args.model_seed, args.max_tokens, args.timeout)
    if args.retries < 0:
        raise ConfigError("invalid_option", "--retries must be >= 0")
    out = ev.run(
        model,
        args.out,
        params=params,
        concurrency=args.concurrency,
        rpm=args.rpm,
        retry=RetryPolicy(attempts=args.retries + 1, base=args.backoff),
        resume=args.resume,
        progress=_progress,
        **common,
    )
    _print_overall(out.summary)
    print(f"answers: {out.run}\nreports: {out.markdown} {out.html}")
    return 0


def _dry_run(p: Any) -> int:
    from .. import tokens

    names = ", ".join(c.name for c in p.conditions)
    print(f"{len(p.tasks)} prompts: {len(p.datasets)} datasets x conditions {names}")
    for name, note in p.unavailable.items():
        print(f"not run: {name} ({note})")
    totals: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    for t in p.tasks:
        c = t.condition.name
        counts[c] = counts.get(c, 0) + 1
        into = totals.setdefault(c, {})
        for e, v in t.tokens["prompt"].items():
            into[e] = into.get(e, 0) + v
    for c, n in counts.items():
        per = ", ".join(f"{e} {totals[c][e] / n:,.0f}" for e in tokens.ENCODINGS)
        print(f"  {c}: {n} prompts, mean prompt tokens {per}")
    return 0
