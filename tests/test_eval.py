"""``gcfkit eval``: these tests check the harness, never a model.

Models are the scripted loopback server (gcfkit.eval.scripted, answering over real HTTP in
the OpenAI chat-completions and Anthropic Messages protocols) and a command that reads
the prompt on stdin. A "correct" answer is what gcfkit's own decoders read from the prompt.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gcfkit import eval as ev
from gcfkit.cli import main
from gcfkit.errors import ConfigError
from gcfkit.eval import datasets, formats, oracle, questions, runner, scoring
from gcfkit.eval.models import (
    AnthropicModel,
    CommandModel,
    OpenAIChatModel,
    Params,
    parse_model,
    parse_retry_after,
)
from gcfkit.eval.prompts import build_prompt, extract_results
from gcfkit.eval.report import render_html, render_markdown
from gcfkit.eval.scripted import Script, serve, wrong_answer

ROOT = Path(__file__).resolve().parent.parent
CORPUS = datasets.corpus_dir()
HAVE_CORPUS = (CORPUS / "toon" / "tabular.json").is_file()
EXAMPLE = ROOT / "examples" / "eval_command_model.py"
FAST = runner.RetryPolicy(attempts=3, base=0.01, cap=0.05)
SMALL = ["synthetic:records:12"]


def _run(model: Any, out: Path, **kw: Any) -> ev.Outputs:
    opts: dict[str, Any] = {
        "datasets": SMALL,
        "formats": ["json", "gcf"],
        "per_kind": 1,
        "params": Params(timeout=5.0),
        "retry": FAST,
        "concurrency": 4,
    }
    opts.update(kw)
    return ev.run(model, out, **opts)


def _records(out: ev.Outputs) -> list[dict[str, Any]]:
    return runner.read_run(out.run)[1]


def _accuracy(out: ev.Outputs) -> dict[str, float]:
    return {c: cell.accuracy for (_, c), cell in out.summary.overall.items()}


# ---------------------------------------------------------------------------------------
# Datasets and questions
# ---------------------------------------------------------------------------------------

SPECS = ["synthetic:records:30", "synthetic:graph:60:25"]
if HAVE_CORPUS:
    SPECS += ["toon:tabular", "toon:nested", "toon:keyed", "toon:nested-config", "mcp:memory/015"]


@pytest.mark.parametrize("spec", SPECS)
def test_questions_are_deterministic_by_seed(spec: str) -> None:
    def gen(seed: int) -> list[dict[str, Any]]:
        ds = datasets.load_dataset(spec, seed=seed, rows=25)
        return [q.to_json() for q in questions.generate_questions(ds, per_kind=3, seed=seed)]

    first = gen(7)
    assert first == gen(7)
    assert first != gen(8)
    assert {q["kind"] for q in first} >= {"count", "lookup"}


@pytest.mark.parametrize("spec", SPECS)
def test_every_question_reads_back_and_the_reference_reader_agrees(spec: str) -> None:
    # The ground truth, computed on the dataset, equals what a strict reader of each
    # rendered prompt computes: the formats carry the data and the texts are exact.
    ds = datasets.load_dataset(spec, seed=1, rows=25)
    qs = questions.generate_questions(ds, per_kind=4, seed=1)
    assert qs
    for name in formats.available_formats():
        fmt = formats.get_format(name)
        for q in qs:
            p = build_prompt(q, ds, fmt, primer=True)
            if q.kind != "generate":
                assert questions.parse_question(q.text) == q.query
            got = oracle.answer(p.user)
            s = scoring.score_answer(got, q.answer_type, q.expected, name)
            assert s.correct, (name, q.text, q.expected, got[:200])


def test_kinds_cover_the_issue_and_delta_uses_the_proxys_delta() -> None:
    assert set(questions.KINDS) >= {
        "count",
        "count_where",
        "lookup",
        "absent_null",
        "aggregate",
        "nested",
        "reference",
        "delta",
        "generate",
    }
    rows = [{"id": i, "name": f"n{i}", "v": i * 2} for i in range(40)]
    ds = datasets.Dataset("flat", {"rows": rows}, "list_rows", "test")
    qs = questions.generate_questions(ds, kinds=["delta"], per_kind=4, seed=0)
    gcf = formats.get_format("gcf")
    seconds = [build_prompt(q, ds, gcf, primer=True).user for q in qs]
    heads = [extract_results(u)[1].split("\n", 1)[0] for u in seconds]
    assert any("unchanged=true" in h for h in heads)
    assert any("delta=true" in h for h in heads)
    # JSON has no delta: the second call is the full result again.
    js = build_prompt(qs[1], ds, formats.get_format("json"), primer=True).user
    assert json.loads(extract_results(js)[1])[0]["id"] == 0


def test_gcf_ext_repeats_are_relative_answers_with_the_proxys_primer() -> None:
    from gcfkit.answers.primer import PRIMER, RELATIVE_PRIMER

    ext = formats.get_format("gcf-ext")
    assert ext.available
    assert ext.primer == f"{PRIMER}\n\n{RELATIVE_PRIMER}"
    rows = [{"id": i, "name": f"n{i}", "v": i * 2} for i in range(40)]
    ds = datasets.Dataset("flat", {"rows": rows}, "list_rows", "test")
    qs = questions.generate_questions(ds, kinds=["delta"], per_kind=4, seed=0)
    prompts = [build_prompt(q, ds, ext, primer=True) for q in qs]
    firsts = [extract_results(p.user)[0] for p in prompts]
    seconds = [extract_results(p.user)[1] for p in prompts]
    assert all(" ref=" in t.split("\n", 1)[0] for t in firsts)
    assert any(t.startswith("@@ unchanged tool=list_rows since=") for t in seconds)
    assert any(t.startswith("@@ patch tool=list_rows since=") for t in seconds)
    assert all("named the first result with _since" in p.user for p in prompts)
    assert all(RELATIVE_PRIMER in p.system for p in prompts)
    for q, p in zip(qs, prompts, strict=True):
        got = oracle.answer(p.user)
        assert scoring.score_answer(got, q.answer_type, q.expected).correct
    # The same calls give the same texts (seeded handles): prompts are reproducible.
    assert [build_prompt(q, ds, ext, primer=True) for q in qs] == prompts


def test_absent_null_questions_cover_all_three_answers() -> None:
    ds = datasets.load_dataset("synthetic:records:40", seed=2)
    qs = questions.generate_questions(ds, kinds=["absent_null"], per_kind=6, seed=2)
    assert {q.expected for q in qs} == {"absent", "null", "value"}


def test_graph_dataset_matches_the_server_helpers_json_and_uses_the_graph_profile() -> None:
    server = pytest.importorskip("gcfkit.mcp.server")
    ds = datasets.load_dataset("synthetic:graph", seed=0)
    assert ds.graph is not None
    assert len(ds.graph.symbols) == 500 and len(ds.graph.edges) == 200
    assert ds.value == server.graph_to_json(ds.graph)
    text = formats.get_format("gcf").render(ds.value, ds.tool, ds.graph)
    assert text.startswith("GCF profile=graph")
    assert formats.get_format("gcf").decode(text) == ds.value


def test_primer_is_the_proxys_and_noprimer_conditions_drop_it() -> None:
    from gcfkit.answers.primer import PRIMER

    assert formats.get_format("gcf").primer == PRIMER
    conds = runner.parse_conditions(["json", "gcf"], primer="both")
    assert [c.name for c in conds] == ["json", "gcf", "gcf:noprimer"]
    ds = datasets.load_dataset("synthetic:records:5")
    q = questions.generate_questions(ds, kinds=["count"], per_kind=1)[0]
    gcf = formats.get_format("gcf")
    assert PRIMER in build_prompt(q, ds, gcf, primer=True).system
    assert PRIMER not in build_prompt(q, ds, gcf, primer=False).system
    with pytest.raises(ConfigError):
        runner.parse_conditions(["nope"])


def test_unavailable_formats_are_reported_and_skipped() -> None:
    formats.register_format(
        "absent-test",
        lambda: formats.EvalFormat(
            "absent-test",
            "X",
            formats._unavailable,
            formats._unavailable,
            available=False,
            note="not here",
        ),
    )
    try:
        p = runner.plan(datasets=SMALL, formats=["json", "absent-test"], per_kind=1)
    finally:
        del formats.FORMATS["absent-test"]
    assert p.unavailable == {"absent-test": "not here"}
    assert {t.condition.name for t in p.tasks} == {"json"}


# ---------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "expected", "ok"),
    [
        ("42", "int", 42, True),
        ("**42**", "int", 42, True),
        ("The answer is 42.", "int", 42, True),
        ("1,204", "int", 1204, True),
        ("41", "int", 42, False),
        ("between 40 and 42", "int", 42, False),
        ("3.30", "number", 3.3, True),
        ("3.31", "number", 3.3, False),
        ("`Sales`", "string", "Sales", True),
        ('"Sales"', "string", "Sales", True),
        ("Sales.", "string", "Sales", True),
        ("sales", "string", "Sales", False),
        ("Null", "presence", "null", True),
        ("It is absent.", "presence", "absent", True),
        ("absent or null", "presence", "absent", False),
        ("yes", "bool", True, True),
        ("```\n7\n```", "int", 7, True),
    ],
)
def test_answer_normalisation(text: str, kind: str, expected: Any, ok: bool) -> None:
    assert scoring.score_answer(text, kind, expected).correct is ok


def test_payload_answers_are_decoded_strictly() -> None:
    data = {"t": [{"id": 1, "x": None}]}
    good = formats.get_format("gcf").render(data, "", None)
    assert scoring.score_answer(f"```gcf\n{good}```", "payload", data, "gcf").correct
    bad = scoring.score_answer(good.replace("[1]", "[2]"), "payload", data, "gcf")
    assert not bad.correct and bad.detail.startswith("invalid")
    other = scoring.score_answer('{"t": []}', "payload", data, "json")
    assert not other.correct and other.detail == "valid, but not the given data"


def test_wilson_and_mcnemar_against_known_values() -> None:
    lo, hi = scoring.wilson(0, 10)
    assert lo == 0.0 and abs(hi - 0.2775) < 1e-3
    lo, hi = scoring.wilson(50, 100)
    assert abs(lo - 0.4038) < 1e-3 and abs(hi - 0.5962) < 1e-3
    assert scoring.wilson(0, 0) == (0.0, 1.0)
    assert scoring.mcnemar_exact(0, 0) == 1.0
    assert scoring.mcnemar_exact(5, 5) == 1.0
    assert abs(scoring.mcnemar_exact(1, 9) - 0.021484375) < 1e-12
    assert scoring.mcnemar_exact(9, 1) == scoring.mcnemar_exact(1, 9)


def test_paired_comparison_counts_discordant_questions() -> None:
    def rec(q: str, cond: str, answer: str) -> dict[str, Any]:
        return {
            "model": "m",
            "condition": cond,
            "format": cond,
            "answer": answer,
            "error": None,
            "question": {
                "id": q,
                "kind": "count",
                "dataset": "d",
                "answer_type": "int",
                "expected": 1,
                "text": "?",
            },
        }

    recs = [rec(f"q{i}", "a", "1") for i in range(6)]
    recs += [rec(f"q{i}", "b", "1" if i < 1 else "2") for i in range(6)]
    s = scoring.summarise(recs)
    (pair,) = s.pairs
    assert (pair.n, pair.both, pair.only_a, pair.only_b) == (6, 1, 5, 0)
    assert pair.p_value == scoring.mcnemar_exact(5, 0)


# ---------------------------------------------------------------------------------------
# Models over real loopback HTTP
# ---------------------------------------------------------------------------------------


def test_model_specs() -> None:
    m = parse_model("openai-compatible:http://127.0.0.1:9/v1:qwen2.5:7b")
    assert isinstance(m, OpenAIChatModel) and m.model == "qwen2.5:7b"
    assert m.url == "http://127.0.0.1:9/v1/chat/completions"
    m = parse_model("openai-compatible:http://[::1]:9/v1/chat/completions:x")
    assert isinstance(m, OpenAIChatModel) and m.url == "http://[::1]:9/v1/chat/completions"
    a = parse_model("anthropic:http://127.0.0.1:9:claude-x")
    assert isinstance(a, AnthropicModel) and a.url == "http://127.0.0.1:9/v1/messages"
    assert isinstance(parse_model("command:echo 1"), CommandModel)
    for bad in ("openai-compatible:nourl", "gpt", "foo:bar", "command:"):
        with pytest.raises(ConfigError):
            parse_model(bad)
    assert parse_retry_after("1.5") == 1.5 and parse_retry_after(None) is None


def test_correct_script_scores_everything_right_and_records_sampling(tmp_path: Path) -> None:
    with serve("correct") as srv:
        model = parse_model(f"openai-compatible:{srv.url}:demo-model")
        out = _run(model, tmp_path, params=Params(temperature=0.25, seed=11, timeout=5.0))
        log = srv.log
    assert _accuracy(out) == {"json": 1.0, "gcf": 1.0}
    header, recs = runner.read_run(out.run)
    assert header["temperature"] == 0.25 and header["seed"] == 11
    assert all(r["temperature"] == 0.25 and r["seed"] == 11 for r in recs)
    assert all(r["sent"] == {"temperature": 0.25, "seed": 11, "max_tokens": 1024} for r in recs)
    assert all(e["body"]["temperature"] == 0.25 and e["body"]["seed"] == 11 for e in log)
    assert len(recs) == header["tasks"] == len(log)
    assert all(r["prompt"]["user"] and r["tokens"]["prompt"]["o200k_base"] > 0 for r in recs)


def test_wrong_script_scores_everything_wrong(tmp_path: Path) -> None:
    with serve("wrong") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path)
    assert _accuracy(out) == {"json": 0.0, "gcf": 0.0}
    assert all(r["error"] is None for r in _records(out))


def test_empty_answers_score_wrong_and_count_as_unreadable(tmp_path: Path) -> None:
    with serve("empty") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, formats=["gcf"])
    (cell,) = out.summary.overall.values()
    assert cell.correct == 0 and cell.errors == 0
    ints = [r for r in _records(out) if r["question"]["answer_type"] in ("int", "presence")]
    assert ints and cell.unparsed >= len(ints)


@pytest.mark.parametrize("first", ["malformed", "badshape", "500", "503", "429"])
def test_transient_failures_are_retried(tmp_path: Path, first: str) -> None:
    with serve(f"{first},correct", retry_after="0") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, formats=["gcf"])
    recs = _records(out)
    assert _accuracy(out) == {"gcf": 1.0}
    assert all(len(r["attempts"]) == 1 for r in recs)
    kind = {"malformed": "malformed", "badshape": "malformed", "429": "rate_limited"}
    assert {r["attempts"][0]["kind"] for r in recs} == {kind.get(first, "server_error")}


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    with serve("429,correct", retry_after="1") as srv:
        model = parse_model(f"openai-compatible:{srv.url}:m")
        out = _run(model, tmp_path, formats=["gcf"], kinds=["count"])
        log = srv.log
    assert _accuracy(out) == {"gcf": 1.0}
    (first, second) = log
    assert first["behaviour"] == "429" and second["behaviour"] == "correct"
    assert second["time"] - first["time"] >= 0.95
    (rec,) = _records(out)
    assert rec["attempts"][0]["retry_after"] == 1.0 and rec["attempts"][0]["waited"] >= 1.0


def test_a_failure_that_persists_is_recorded_not_raised(tmp_path: Path) -> None:
    with serve("malformed") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, formats=["gcf"])
    recs = _records(out)
    assert all(r["answer"] is None and r["error"]["kind"] == "malformed" for r in recs)
    assert all(len(r["attempts"]) == FAST.attempts for r in recs)
    cell = out.summary.overall[(recs[0]["model"], "gcf")]
    assert cell.accuracy == 0.0 and cell.errors == cell.n


def test_refusals_are_not_retried(tmp_path: Path) -> None:
    with serve("400") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, formats=["gcf"])
        n = len(srv.log)
    recs = _records(out)
    assert n == len(recs)
    assert {r["error"]["status"] for r in recs} == {400}


def test_slow_answers_time_out_and_are_retried(tmp_path: Path) -> None:
    with serve("slow,correct", slow=3.0) as srv:
        model = parse_model(f"openai-compatible:{srv.url}:m")
        started = time.monotonic()
        out = _run(model, tmp_path, formats=["gcf"], kinds=["count"], params=Params(timeout=0.3))
        elapsed = time.monotonic() - started
    (rec,) = _records(out)
    assert rec["attempts"][0]["kind"] == "timeout"
    assert _accuracy(out) == {"gcf": 1.0}
    assert elapsed < 2.5


def test_the_api_key_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve("correct", require_key="sekret") as srv:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path / "a", formats=["gcf"])
        assert {r["error"]["status"] for r in _records(out)} == {401}
        monkeypatch.setenv("MY_KEY", "sekret")
        model = parse_model(f"openai-compatible:{srv.url}:m", api_key_env="MY_KEY")
        out = _run(model, tmp_path / "b", formats=["gcf"])
        assert _accuracy(out) == {"gcf": 1.0}
    text = out.run.read_text()
    assert "sekret" not in text


def test_anthropic_messages_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak")
    with serve("529,correct", retry_after="0", require_key="ak") as srv:
        model = parse_model(f"anthropic:http://127.0.0.1:{srv.port}:claude-test")
        out = _run(model, tmp_path, params=Params(temperature=0.0, seed=5, timeout=5.0))
        log = srv.log
    assert _accuracy(out) == {"json": 1.0, "gcf": 1.0}
    assert {e["protocol"] for e in log} == {"anthropic"}
    assert all("seed" not in e["body"] and e["body"]["temperature"] == 0.0 for e in log)
    recs = _records(out)
    assert all(r["sent"] == {"temperature": 0.0, "max_tokens": 1024} for r in recs)
    assert all(r["attempts"][0]["kind"] == "server_error" for r in recs)


def test_mixed_script_is_deterministic_per_prompt() -> None:
    s = Script.parse("mixed:3")
    assert [s.behaviour(f"p{i}", 1) for i in range(50)] == [
        s.behaviour(f"p{i}", 1) for i in range(50)
    ]
    assert {s.behaviour(f"p{i}", 1) for i in range(200)} >= {"correct", "wrong", "429"}
    with pytest.raises(ValueError):
        Script.parse("correct,teleport")


def test_mixed_script_treats_every_format_alike(tmp_path: Path) -> None:
    with serve("mixed:1", retry_after="0") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, per_kind=2)
    (pair,) = out.summary.pairs
    assert pair.only_a == pair.only_b == 0 and pair.both < pair.n
    assert len(set(_accuracy(out).values())) == 1


def test_wrong_answers_are_wrong() -> None:
    ds = datasets.load_dataset("synthetic:records:20", seed=4)
    for q in questions.generate_questions(ds, per_kind=2, seed=4):
        p = build_prompt(q, ds, formats.get_format("gcf"), primer=True)
        bad = wrong_answer(p.user, oracle.answer(p.user))
        assert not scoring.score_answer(bad, q.answer_type, q.expected, "gcf").correct, q.text


# ---------------------------------------------------------------------------------------
# Command models
# ---------------------------------------------------------------------------------------


def test_command_model_reads_the_prompt_on_stdin(tmp_path: Path) -> None:
    model = CommandModel([sys.executable, str(EXAMPLE)])
    out = _run(model, tmp_path, params=Params(temperature=0.5, seed=3, timeout=30.0))
    assert _accuracy(out) == {"json": 1.0, "gcf": 1.0}


def test_command_failures_and_timeouts(tmp_path: Path) -> None:
    failing = CommandModel([sys.executable, "-c", "import sys; sys.exit(3)"])
    out = _run(failing, tmp_path / "a", formats=["gcf"], kinds=["count"])
    (rec,) = _records(out)
    assert rec["error"]["kind"] == "command" and "exit status 3" in rec["error"]["message"]
    pidfile = tmp_path / "pids"
    script = (
        "import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'a').write(f'{{os.getpid()}} {{child.pid}}\\n')\n"
        "time.sleep(60)\n"
    )
    sleeper = CommandModel([sys.executable, "-c", script])
    retry = runner.RetryPolicy(attempts=1)
    out = _run(
        sleeper,
        tmp_path / "b",
        formats=["gcf"],
        kinds=["count"],
        params=Params(timeout=1.0),
        retry=retry,
    )
    (rec,) = _records(out)
    assert rec["error"]["kind"] == "timeout"
    deadline = time.monotonic() + 5
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 2
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), "the command's process group outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------------------------------
# Storage, re-scoring, resume, report
# ---------------------------------------------------------------------------------------


def test_rescoring_from_stored_jsonl_gives_the_same_report(tmp_path: Path) -> None:
    with serve("mixed:1", retry_after="0") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path / "run", per_kind=2)
    md, page, summary = ev.rescore([out.run], tmp_path / "again")
    assert md.read_text() == out.markdown.read_text()
    assert page.read_text() == out.html.read_text()
    acc = {c: cell.accuracy for (_, c), cell in summary.overall.items()}
    assert acc == _accuracy(out)
    assert min(acc.values()) < 1  # the mix is in the numbers
    # Re-scoring reads the stored answers: correcting a stored wrong answer moves the score.
    lines = out.run.read_text().splitlines()
    for i, line in enumerate(lines):
        rec = json.loads(line)
        q = rec.get("question") or {}
        wrong = rec["type"] == "answer" and q["answer_type"] != "payload"
        if (
            wrong
            and not scoring.score_answer(rec["answer"], q["answer_type"], q["expected"]).correct
        ):
            rec["answer"] = oracle.format_answer(q["expected"])
            lines[i] = json.dumps(rec)
            break
    else:
        pytest.fail("the mixed script gave no wrong answer to correct")
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    _, _, fixed = ev.rescore([edited], tmp_path / "fixed")
    cond = rec["condition"]
    assert (
        fixed.overall[(rec["model"], cond)].correct
        == summary.overall[(rec["model"], cond)].correct + 1
    )


def test_rescoring_several_runs_makes_the_model_a_dimension(tmp_path: Path) -> None:
    with serve("correct") as srv:
        a = _run(parse_model(f"openai-compatible:{srv.url}:model-a"), tmp_path / "a")
        b = _run(parse_model(f"openai-compatible:{srv.url}:model-b"), tmp_path / "b")
    md, _, summary = ev.rescore([a.run, b.run], tmp_path / "both")
    assert len(summary.models) == 2 and all(
        m.endswith((":model-a", ":model-b")) for m in summary.models
    )
    assert "| model | format | accuracy |" in md.read_text()
    assert len(summary.pairs) == 2  # json vs gcf, per model


def test_resume_asks_only_what_failed(tmp_path: Path) -> None:
    with serve("400") as srv:
        first = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path)
    n = len(_records(first))
    assert all(r["error"] for r in _records(first))
    with serve("correct") as srv:
        again = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, resume=True)
        asked = len(srv.log)
    assert asked == n
    assert _accuracy(again) == {"json": 1.0, "gcf": 1.0}
    with serve("correct") as srv:
        third = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, resume=True)
        assert len(srv.log) == 0
    assert _accuracy(third) == {"json": 1.0, "gcf": 1.0}
    with pytest.raises(ConfigError):
        _run(parse_model("command:true"), tmp_path, resume=True, seed=9)


def test_html_report_is_self_contained_and_escapes_answers(tmp_path: Path) -> None:
    hostile = CommandModel([sys.executable, "-c", "print('<script>alert(1)</script>|x')"])
    out = _run(hostile, tmp_path, formats=["json", "gcf"], kinds=["lookup", "count"])
    page = out.html.read_text()
    assert "<svg" in page and "<script" not in page
    assert "&lt;script&gt;" in page
    for needle in ("src=", "href=", "url(", "@import", "<link"):
        assert needle not in page
    md = out.markdown.read_text()
    assert "\\|x" in md  # a pipe in an answer cannot break the table
    assert "scripted test server" not in md


def test_reports_show_per_format_accuracy_tokens_kinds_and_pairs(tmp_path: Path) -> None:
    with serve("correct") as srv:
        out = _run(parse_model(f"openai-compatible:{srv.url}:m"), tmp_path, primer="both")
    md = out.markdown.read_text()
    assert "scripted test server, not from a model" in md
    for cond in ("json", "gcf", "gcf:noprimer"):
        assert f"| {cond} | 100.0% |" in md
    assert "prompt tokens (o200k)" in md and "prompt tokens (cl100k)" in md
    assert "| json vs gcf |" in md and "| gcf vs gcf:noprimer |" in md
    s = out.summary
    gcf, js = s.overall[(s.models[0], "gcf")], s.overall[(s.models[0], "json")]
    assert gcf.mean_tokens("payload", "o200k_base") < js.mean_tokens("payload", "o200k_base")
    html_page = render_html(s, {})
    assert html_page.count("<svg") == 3
    assert render_markdown(s, {}).startswith("# gcfkit eval report")


def test_rate_limit_spaces_request_starts(tmp_path: Path) -> None:
    with serve("correct") as srv:
        model = parse_model(f"openai-compatible:{srv.url}:m")
        out = _run(model, tmp_path, formats=["gcf"], rpm=600, per_kind=1)
        times = sorted(e["time"] for e in srv.log)
    assert len(times) >= 5
    # 600 per minute: one start per 0.1 s; arrival times at the server jitter (the first
    # request also opens the connection), so only the span is checked here.
    assert times[-1] - times[0] >= 0.1 * (len(times) - 1) - 0.15
    assert _accuracy(out) == {"gcf": 1.0}


def test_rate_limiter_spacing_and_shared_pause() -> None:
    import asyncio

    async def starts() -> list[float]:
        limiter = runner.RateLimiter(600)
        out = []
        for i in range(5):
            await limiter.acquire()
            out.append(time.monotonic())
            if i == 2:
                limiter.pause(0.3)
        return out

    t = asyncio.run(starts())
    gaps = [b - a for a, b in itertools.pairwise(t)]
    assert all(g >= 0.095 for g in gaps), gaps
    assert gaps[2] >= 0.29  # the pause holds the next start back
    with pytest.raises(ConfigError):
        runner.RateLimiter(0)


# ---------------------------------------------------------------------------------------
# The CLI, end to end (the README's commands)
# ---------------------------------------------------------------------------------------


def test_cli_end_to_end_against_the_scripted_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve("mixed", retry_after="0") as srv:
        rc = main(
            [
                "eval",
                "--model",
                f"openai-compatible:{srv.url}:demo",
                "--formats",
                "json,gcf,gcf-ext",
                "--datasets",
                "synthetic:records:20,synthetic:graph:40:16",
                "--questions",
                "2",
                "--backoff",
                "0.01",
                "--out",
                str(tmp_path),
            ]
        )
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "| json |" in cap.out and "| gcf |" in cap.out
    md = (tmp_path / "report.md").read_text()
    assert "## Accuracy and tokens per format" in md
    assert (tmp_path / "report.html").is_file()
    if not formats.get_format("gcf-ext").available:
        assert "not run: gcf-ext" in md and "skipping gcf-ext" in cap.err
    else:
        assert "| gcf-ext |" in md
    rc = main(["eval", "--rescore", str(tmp_path / "run.jsonl"), "--out", str(tmp_path / "r")])
    assert rc == 0
    assert (tmp_path / "r" / "report.md").read_text() == md


def test_cli_dry_run_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["eval", "--dry-run", "--datasets", "synthetic:records:10", "--formats", "json,gcf"])
        == 0
    )
    out = capsys.readouterr().out
    assert "mean prompt tokens" in out and "gcf:" in out
    assert main(["eval", "--datasets", "synthetic:records:10"]) == 2
    assert "needs --model" in capsys.readouterr().err
    assert main(["eval", "--dry-run", "--datasets", "nowhere:x"]) == 2
