"""The dense profile's entry points, its selection rule and its isolation from v3.5.3."""

from __future__ import annotations

import datetime
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import gcfkit
from gcfkit import GCFError, dense, tokens
from gcfkit.errors import GCFEncodeError
from gcfkit.generic import definitions
from gcfkit.traffic.corpus import read_sessions
from tests.codec_support import identical
from tests.conformance import CORPUS_DIR
from tests.gcf_python import rejects_at_line_1

# Run again on the pure-Python codec by make test (the marker's description).
pytestmark = pytest.mark.pure

LONG = "authored 2026-08-07 by Dayna Blackwell"
MEMORY = CORPUS_DIR / "mcp" / "memory" / "015_read_graph.json"


def _memory_graph() -> Any:
    call = json.loads(MEMORY.read_text(encoding="utf-8"))
    return json.loads(call["result"]["content"][0]["text"])


# -- entry points --------------------------------------------------------------------------


def test_decode_reads_dense_and_loads_refuses_it() -> None:
    wire = dense.dumps({"rows": [{"id": 1, "t": ["a"]}, {"id": 2, "t": []}]})
    assert gcfkit.decode(wire) == {"rows": [{"id": 1, "t": ["a"]}, {"id": 2, "t": []}]}
    assert gcfkit.decode(wire.encode()) == gcfkit.decode(wire)
    with pytest.raises(GCFError) as err:
        gcfkit.loads(wire)
    assert (err.value.code, err.value.line) == ("unsupported_profile", 1)
    assert "dense" in str(err.value) and "gcfkit.dense.loads" in str(err.value)


def test_dense_loads_refuses_other_profiles() -> None:
    for text in ("GCF profile=generic\nk=1\n", "GCF profile=graph\n## targets\n"):
        with pytest.raises(GCFError) as err:
            dense.loads(text)
        assert (err.value.code, err.value.line) == ("unsupported_profile", 1)
    with pytest.raises(GCFError) as err:
        dense.loads("GCF-densest\n=1\n")
    assert err.value.code == "missing_header"
    # The old header (before the dense magic) names the new one.
    with pytest.raises(GCFError, match="GCF-dense") as err:
        dense.loads("GCF profile=dense\n=1\n")
    assert (err.value.code, err.value.line) == ("unknown_profile", 1)


def test_gcf_python_rejects_dense_payloads_at_line_1() -> None:
    # Both decoders, the graph one too (it skips header fields it does not know, so with a
    # "GCF profile=dense" header it read an empty dense payload as an empty graph).
    for value in [{}, {"rows": [{"a": LONG, "l": [1]}, {"a": LONG, "l": [2]}, {"a": LONG}]}]:
        rejects_at_line_1(dense.dumps(value))
        rejects_at_line_1(dense.dumps(value, tool="t"))


def test_bytes_files_and_tool_header() -> None:
    value = {"a": [LONG, LONG, LONG]}
    wire = dense.dumps(value, tool="read_graph")
    assert wire.startswith("GCF-dense tool=read_graph\n")
    assert dense.loads(wire.encode("utf-8")) == value
    buf = io.StringIO()
    dense.dump(value, buf, tool="read_graph")
    assert buf.getvalue() == wire
    assert dense.load(io.BytesIO(wire.encode())) == value
    with pytest.raises(GCFError) as err:
        dense.loads(b"GCF-dense\n=\xff\n")
    assert err.value.code == "invalid_utf8"
    with pytest.raises(GCFError):
        dense.dumps(value, tool="two words")


def test_encode_reports_the_constructs_it_used() -> None:
    rows = [{"id": i, "k": "same", "note": LONG, "l": [i], "opt": i or None} for i in range(4)]
    rows[1].pop("opt")
    used = dense.encode({"rows": rows}).constructs
    assert used == ("defs", "lists", "constants", "short_rows")
    assert dense.encode({"rows": rows}, defs=False, lists=False).constructs == (
        "constants",
        "short_rows",
    )
    assert dense.encode({"a": 1}).constructs == ()
    assert dense.primer(used).count(".") == 5


def test_unsupported_values_raise_like_dumps() -> None:
    for bad in ({"a": {1, 2}}, {"a": float("nan")}, {"a": 2**64}, {1: "x"}):
        with pytest.raises(GCFEncodeError) as err:
            dense.dumps(bad)
        with pytest.raises(GCFEncodeError) as like:
            gcfkit.dumps(bad)
        assert (err.value.code, err.value.path) == (like.value.code, like.value.path)
    with pytest.raises(GCFEncodeError) as err:
        dense.dumps({"rows": [{"l": [float("inf")]}, {"l": []}]})
    assert err.value.path == "$.rows[0].l[0]"


def test_default_and_parse_float_as_in_the_front_door() -> None:
    day = datetime.date(2026, 8, 7)
    value = {"rows": [{"id": i, "on": day, "tags": {"x"}} for i in range(3)]}
    for on in (True, False):
        wire = dense.dumps(
            value,
            default=lambda o: sorted(o) if isinstance(o, set) else str(o),
            lists=on,
            constants=on,
        )
        want = {"rows": [{"id": i, "on": "2026-08-07", "tags": ["x"]} for i in range(3)]}
        assert identical(dense.loads(wire), want)
    # What default gives back is checked, and named, like the value itself.
    with pytest.raises(GCFEncodeError) as err:
        dense.dumps({"a": [1, {"b": day}]}, default=lambda o: [o])
    assert err.value.code == "limit_exceeded" and err.value.path.startswith("$.a[1].b[0]")
    # parse_float sees every double: key=value, inline arrays, cells, list cells, constants.
    wire = "GCF-dense\nx=1.50\nl[2]: 2.50,3\n## r [2]{a,b,c=0.10}\n1|[2]: 2.5,3\n2|1e5\n"
    got = dense.loads(wire, parse_float=Decimal)
    assert got == {
        "x": Decimal("1.50"),
        "l": [Decimal("2.50"), 3],
        "r": [
            {"a": 1, "b": [Decimal("2.5"), 3], "c": Decimal("0.10")},
            {"a": 2, "b": Decimal("1e5"), "c": Decimal("0.10")},
        ],
    }
    assert type(got["l"][1]) is int and type(got["r"][1]["a"]) is int
    assert dense.load(io.StringIO(wire), parse_float=Decimal) == got
    assert dense.loads(wire)["x"] == 1.5


# -- selection (D9.2, D9.3) ----------------------------------------------------------------


def test_selection_uses_the_cost_function_and_is_deterministic() -> None:
    value = {"logs": [{"path": p} for p in ["/api/users", "/api/auth"] * 6]}
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return definitions.estimate(text)

    assert definitions.select(value, count) == definitions.select(value)
    assert "|$a|" in calls and "|/api/users|" in calls
    # A cost function under which no reference pays defines nothing.
    assert definitions.select(value, lambda t: 1) == {}
    assert dense.dumps(value, count=count) == dense.dumps(value, count=count)


def test_names_go_to_the_biggest_savers_and_ignore_key_order() -> None:
    a, b = "first long repeated string here", "second long repeated string here"
    value = {"x": [b, a, b, a, b], "y": ["abc", "abc", "abc"], "z": {"k": a, "l": a}}
    # a occurs 4 times, b 3 times: a saves more; "abc" saves nothing.
    assert definitions.select(value) == {a: "a", b: "b"}
    # Equal savings: the strings' code-point order. Key order changes nothing.
    tie = {"p": [b, b, b], "r": [a, a, a]}
    assert definitions.select(tie) == {a: "a", b: "b"}
    assert definitions.select(dict(reversed(tie.items()))) == {a: "a", b: "b"}


def test_a_decoded_table_re_encodes_to_itself() -> None:
    # The wire moves a '>'-named field after the columns and writes rows in the table's
    # field order; the definitions must not depend on that order (D9.2 step 5).
    rows = [{"x>y": LONG, "name": "a|b, quoted"}, {"name": "a|b, quoted", "x>y": LONG}] * 2
    wire = dense.dumps(rows)
    assert dense.dumps(dense.loads(wire)) == wire


def test_estimate_follows_d9_3() -> None:
    est = definitions.estimate
    assert est("") == 0
    assert est("abcdef") == 1 and est("abcdefg") == 2
    assert est("1234567") == 3  # 123 456 7
    assert est("a b") == 2 and est("a  b") == 3
    assert est("é\t,") == 3


def test_exact_counts_choose_per_tokenizer() -> None:
    if not tokens.is_exact("o200k_base"):
        pytest.skip("needs the tokens extra")
    value = {"logs": [{"path": p} for p in ["/api/users", "/api/auth"] * 6 + ["/api/users"] * 3]}
    o200k = dense.dumps(value, count=tokens.counter("o200k_base").count)
    # o200k: /api/users (9 times) pays, /api/auth (6 times) does not; the estimate takes both.
    assert "$a=/api/users\n" in o200k and "\n/api/auth\n" in o200k and "$b=" not in o200k
    assert "$b=/api/auth" in dense.dumps(value)


# -- the real corpus -----------------------------------------------------------------------


@pytest.mark.parametrize("exact", [False, True])
def test_memory_graph_round_trips_smaller(exact: bool) -> None:
    if exact and not tokens.is_exact("o200k_base"):
        pytest.skip("needs the tokens extra")
    value = _memory_graph()
    count = tokens.counter("o200k_base").count if exact else None
    wire = dense.dumps(value, count=count)
    assert identical(dense.loads(wire), value)
    assert dense.dumps(dense.loads(wire), count=count) == wire
    plain = gcfkit.dumps(value)
    assert tokens.count(wire) < tokens.count(plain)


def test_every_corpus_json_result_round_trips() -> None:
    checked = 0
    for session in read_sessions(CORPUS_DIR / "mcp"):
        for call in session.calls:
            for block in (call.result or {}).get("content", []):
                try:
                    value = json.loads(block.get("text", ""))
                except ValueError:
                    continue
                wire = dense.dumps(value)
                where = f"{session.name}/{call.file}"
                assert identical(dense.loads(wire), gcfkit.loads(gcfkit.dumps(value))), where
                checked += 1
    assert checked >= 41


def test_cli_encode_dense_and_decode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gcfkit.cli import main

    src = tmp_path / "v.json"
    src.write_text(json.dumps({"rows": [{"a": LONG}, {"a": LONG}, {"a": LONG, "b": 1}]}))
    assert main(["encode", "--dense", str(src)]) == 0
    wire = capsys.readouterr().out
    assert wire.startswith("GCF-dense\n")
    gcf = tmp_path / "v.gcf"
    gcf.write_text(wire)
    assert main(["decode", str(gcf)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(src.read_text())


def test_quoted_cells_and_list_cells_split_where_they_should() -> None:
    # Found by fuzzing: a quoted cell holding '|' before a list cell holding a quoted '|',
    # and a bare '[2: ...' whose ']:' is only found in a later cell.
    value = {"r": [{"a": '[2: "x|y",z', "b": 2, "c": ["|", "a|b"]}, {"a": "[1]", "b": 3}]}
    wire = dense.dumps(value)
    assert wire.split("\n")[2] == '"[2: \\"x|y\\",z"|2|[2]: "|","a|b"'
    assert identical(dense.loads(wire), value)
    with pytest.raises(GCFError) as err:
        dense.loads('GCF-dense\n## r [1]{a,b,c}\n[2: "x|y",z|2|[1]: "|"\n')
    assert err.value.code == "row_width_mismatch"
