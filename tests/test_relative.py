"""Unit tests of gcfkit.relative: the rules of docs/extensions/relative-answers.md one by one,
what plain v3.5.3 decoders (gcfkit's and gcf-python's) do with each form, the result memory,
and the document's own examples."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import gcf
import pytest

import gcfkit
import gcfkit.keyed
from gcfkit import GCFError, relative
from gcfkit.errors import CODES
from gcfkit.relative import Op, ResultMemory, parse_path
from gcfkit.relative.textdiff import _MATCH_BUDGET, apply_text, diff_text

DOC = Path(__file__).resolve().parents[1] / "docs" / "extensions" / "relative-answers.md"

HELD = {
    "entities": [
        {"name": "gcf-python", "entityType": "repository", "observations": ["version 2.5.0"]},
        {"name": "session.py", "entityType": "module", "observations": ["staged"]},
    ]
}
NEW = json.loads(json.dumps(HELD))
NEW["entities"][1]["observations"].append("diff reviewed")

FULL = "GCF profile=generic ref=482913\n## [2]{id,v}\n1|a\n2|b\n"
ANSWERS = {
    "unchanged": relative.dumps_unchanged("read_graph", "482913"),
    "patch": relative.json_answer(HELD, NEW, tool="read_graph", since="482913", ref="771204"),
    "edit": relative.text_answer(
        "Commit history:\n" + "x\n" * 30, "Commit history:\n" + "x\n" * 31,
        tool="git_log", since="482913", ref="771204",
    ),
}  # fmt: skip


# -- what a plain v3.5.3 decoder does (§8) -------------------------------------------------


def test_a_full_result_with_ref_decodes_in_plain_decoders() -> None:
    want = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert gcfkit.loads(FULL) == want
    assert gcf.decode_generic(FULL) == want
    assert gcfkit.decode(FULL) == want


@pytest.mark.parametrize("kind", sorted(ANSWERS))
def test_plain_decoders_reject_every_answer(kind: str) -> None:
    wire = ANSWERS[kind]
    assert wire.startswith(f"@@ {kind} ")
    with pytest.raises(GCFError) as info:
        gcfkit.loads(wire)
    assert info.value.code == "missing_header"
    with pytest.raises(ValueError, match="missing_header"):
        gcf.decode_generic(wire)
    with pytest.raises(Exception, match="header"):
        gcf.decode(wire)
    with pytest.raises(GCFError):
        gcfkit.keyed.loads_delta(wire)


def test_why_the_answer_is_not_a_header_field() -> None:
    # gcf-python ignores the header: an answer marked only there would decode as a value.
    assert gcf.decode_generic("GCF profile=generic tool=t unchanged=true since=1\n") == {}
    assert gcf.decode_generic("GCF profile=generic\n@@ unchanged since=1\n") == {
        "@@ unchanged since": 1
    }


def test_decode_recognises_answers() -> None:
    assert isinstance(gcfkit.decode(ANSWERS["unchanged"]), relative.Unchanged)
    assert isinstance(gcfkit.decode(ANSWERS["patch"].encode()), relative.Patch)
    assert isinstance(gcfkit.decode(ANSWERS["edit"]), relative.Edit)
    with pytest.raises(GCFError) as info:
        gcfkit.decode("@@ nonsense tool=t since=1\n")
    assert info.value.code == "invalid_answer"


# -- handles --------------------------------------------------------------------------------


def test_stamp_ref_and_ref_of() -> None:
    stamped = relative.stamp_ref("GCF profile=generic tool=t\n=1\n", "482913")
    assert stamped == "GCF profile=generic tool=t ref=482913\n=1\n"
    assert relative.ref_of(stamped) == "482913"
    assert relative.ref_of(relative.ref_block("482913")) == "482913"
    assert relative.ref_of("ref=482913\n") == "482913"
    assert relative.ref_of("ref=482913 and more") is None
    assert relative.ref_of("GCF profile=generic\n=1\n") is None
    with pytest.raises(GCFError):
        relative.stamp_ref(stamped, "1")
    with pytest.raises(GCFError):
        relative.stamp_ref("GCF profile=graph\n", "1")
    with pytest.raises(GCFError):
        relative.stamp_ref("GCF profile=generic\n=1\n", "no spaces")


def test_memory_evicts_by_count_and_bytes() -> None:
    m = ResultMemory(max_results=3, max_bytes=100, seed=1)
    hs = [m.remember("t", "{}", "json", i, size=10) for i in range(4)]
    assert [m.recall(h) is not None for h in hs if h] == [False, True, True, True]
    assert hs[1] is not None and hs[2] is not None
    assert m.recall(hs[1]) is not None  # now the most recent: hs[2] goes next
    big = m.remember("t", "{}", "text", "x" * 80, size=80)
    assert big is not None and m.recall(big) is not None
    assert m.bytes <= 100 and len(m) <= 3
    assert m.recall(hs[2]) is None and m.recall(hs[1]) is not None
    assert m.remember("t", "{}", "text", "x", size=101) is None  # larger than the memory


def test_handles_are_six_digits_and_never_reused() -> None:
    m = ResultMemory(max_results=1, seed=3)
    seen = set()
    for i in range(5000):
        h = m.remember("t", "{}", "json", i, size=1)
        assert h is not None and re.fullmatch(r"[1-9][0-9]{5}", h)
        assert h not in seen
        seen.add(h)
    m.clear()
    assert len(m) == 0 and m.remember("t", "{}", "json", 0, size=1) not in seen


def test_handles_are_reproducible_with_a_seed_only() -> None:
    def first(seed: int | None) -> str | None:
        return ResultMemory(seed=seed).remember("t", "{}", "json", 0, size=1)

    assert first(11) == first(11)
    assert len({first(None) for _ in range(20)}) > 1


# -- patches --------------------------------------------------------------------------------


def test_identity_prefers_the_policy_key_then_the_usual_names() -> None:
    a = [{"sku": "A", "id": 1, "q": 1}, {"sku": "B", "id": 2, "q": 1}]
    b = [{"sku": "A", "id": 1, "q": 2}, {"sku": "B", "id": 2, "q": 1}]
    assert [str(o) for o in relative.diff(a, b)] == ["set [id=1].q 2"]
    assert [str(o) for o in relative.diff(a, b, key="sku")] == ["set [sku=A].q 2"]


def test_no_identity_from_booleans_floats_or_duplicates() -> None:
    for ids in ([True, False], [1.5, 2.5], [1, 1]):
        a = [{"id": x, "note": "a long enough note to keep"} for x in ids]
        b = [*a[:1], {**a[1], "note": "changed"}]
        ops = relative.diff(a, b)
        paths = [relative.format_path(o.path) for o in ops]
        # Not an identity of its own (all scalar fields together may still be one).
        assert not any(re.search(r"\[id=[^,\]]*\]", p) for p in paths), paths
        relative.apply(ops, a, expect=b)


def test_a_selector_never_names_a_position() -> None:
    rng = random.Random(1)
    for _ in range(200):
        a = [rng.choice([1, "x", [1], {"k": 1}, None]) for _ in range(rng.randint(0, 6))]
        b = [rng.choice([1, "x", [1], {"k": 2}, None]) for _ in range(rng.randint(0, 6))]
        for op in relative.diff({"xs": a}, {"xs": b}):
            assert all(not isinstance(s, int) for s in op.path)
            assert not re.search(r"\[[0-9]+\]", relative.format_path(op.path))


def test_apply_is_all_or_nothing_and_never_mutates() -> None:
    held = json.loads(json.dumps(HELD))
    ops = [
        Op("append", parse_path("entities[name=session.py].observations"), "x"),
        Op("del", parse_path("entities[name=nobody]")),
    ]
    with pytest.raises(GCFError) as info:
        relative.apply(ops, held)
    assert info.value.code == "base_mismatch"
    assert held == HELD
    out = relative.apply(ops[:1], held)
    assert held == HELD and out["entities"][1]["observations"][-1] == "x"


def test_apply_checks_the_expected_value() -> None:
    ops = relative.diff(HELD, NEW)
    with pytest.raises(GCFError) as info:
        relative.apply(ops, HELD, expect=HELD)
    assert info.value.code == "base_mismatch"


def test_the_producer_refuses_a_patch_gcf_cannot_carry() -> None:
    # Rows of a GCF table come back in field-union order (spec §7.4.3): a patch whose value
    # has rows with different key orders does not rebuild the new value, so it is refused.
    held = {"t": "x"}
    new = {"t": "x", "rows": [{"a": 1, "b": 2}, {"b": 3, "a": 4}]}
    with pytest.raises(GCFError) as info:
        relative.json_answer(held, new, tool="t", since="1")
    assert info.value.code == "base_mismatch"


def test_patch_needs_a_header_safe_tool_name() -> None:
    with pytest.raises(GCFError) as info:
        relative.json_answer(HELD, NEW, tool="read graph", since="1")
    assert info.value.code == "invalid_answer"


def test_patch_errors_name_the_operation() -> None:
    with pytest.raises(GCFError, match="operation 2"):
        relative.loads("@@ patch tool=t since=1\n## [2]{op,path,value}\nset|a|1\nadd|b[=1]|2\n")


# -- text edits -----------------------------------------------------------------------------


def test_edit_anchors_are_line_prefixes() -> None:
    old = "".join(f"line {i} of a long enough text, with detail {i}\n" for i in range(40))
    new = old.replace("line 20 of", "LINE 20 of")
    edit = diff_text(old, new)
    keeps = [op for op in edit.ops if isinstance(op, relative.Keep)]
    assert [(k.first, k.last) for k in keeps] == [(1, 20), (22, 40)]
    assert keeps[0].anchors == (
        "line 0 of a long enough text, wi",
        "line 19 of a long enough text, w",
    )
    assert apply_text(edit, old) == new


def test_edit_of_huge_texts_stays_exact() -> None:
    n = int(_MATCH_BUDGET**0.5) + 10
    old = "".join(f"row {i}\n" for i in range(n))
    new = "head\n" + "".join(f"row {i}\n" for i in range(n - 1, -1, -1)) + "tail\n"
    assert apply_text(diff_text(old, new), old) == new


def test_a_file_reread_is_only_ever_unchanged() -> None:
    # What the codec offers for files: identical texts are unchanged; the proxy sends any
    # other file read in full (docs §3), so text_answer is never used for them.
    text = '{\n  "name": "x"\n}\n'
    assert relative.text_answer(text, text, tool="read_text_file", since="1").startswith(
        "@@ unchanged "
    )


# -- the reader -----------------------------------------------------------------------------


def test_a_reader_that_does_not_hold_the_result_says_so() -> None:
    reader = relative.Reader()
    with pytest.raises(GCFError) as info:
        reader.read(ANSWERS["unchanged"])
    assert info.value.code == "unresolved_reference"
    reader.read(FULL)
    assert reader.holds("482913")
    reader.forget("482913")
    with pytest.raises(GCFError):
        reader.read("@@ unchanged tool=t since=482913\n")


def test_a_reader_keeps_json_and_text_apart() -> None:
    reader = relative.Reader()
    reader.hold("1", "a JSON string")
    with pytest.raises(GCFError) as info:
        reader.read("@@ edit tool=t since=1 lines=1\n+x\n")
    assert info.value.code == "base_mismatch"
    reader.hold("2", "a text", text=True)
    with pytest.raises(GCFError):
        reader.read('@@ patch tool=t since=2\n## [1]{op,path,value}\nset|""|1\n')


# -- the extension document -----------------------------------------------------------------


def _doc_answers() -> list[str]:
    """Every code block of the document that is an answer (it starts with ``@@``)."""
    blocks = re.findall(r"```\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return [b for b in blocks if b.startswith("@@ ")]


def test_the_documents_answers_decode() -> None:
    answers = _doc_answers()
    assert len(answers) >= 3
    for text in answers:
        relative.loads(text)


def test_the_documents_error_codes_exist() -> None:
    table = DOC.read_text(encoding="utf-8").split("## 9. Error codes", 1)[1].split("## 10.")[0]
    codes = re.findall(r"^\| `([a-z_]+)` \|", table, re.M)
    assert codes and all(c in CODES for c in codes)
