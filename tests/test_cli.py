"""The `gcfkit encode` / `gcfkit decode` commands, run as a user would."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import gcfkit
from gcfkit import speedups
from gcfkit.cli import build_parser, main


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_encode_stdin_to_stdout() -> None:
    value = {"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Lin"}], "n": None}
    res = run("encode", stdin=json.dumps(value).encode())
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == gcfkit.dumps(value)
    assert res.stderr == b""


def test_decode_file_roundtrip(tmp_path: Path) -> None:
    value = {"é": ["x", "y,z"], "deep": {"a": [1.5, True, None]}}
    p = tmp_path / "in.gcf"
    p.write_text(gcfkit.dumps(value), encoding="utf-8")
    res = run("decode", str(p), "--indent", "2")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == value
    assert res.stdout.decode().startswith("{\n  ")


def test_encode_tool_header() -> None:
    res = run("encode", "--tool", "search", stdin=b"[1,2]")
    assert res.stdout.decode().splitlines()[0] == "GCF profile=generic tool=search"


@pytest.mark.parametrize(
    ("args", "stdin", "code", "where"),
    [
        (("decode",), b"GCF profile=generic\nx=~\n", "invalid_missing", " line 2"),
        (("decode",), b"GCF profile=generic\n## r [2]{a}\n1\n", "count_mismatch", " line 2"),
        (("decode",), b"nope\n", "missing_header", " line 1"),
        (("decode",), b"GCF profile=generic\nx=\xff\n", "invalid_utf8", " line 2"),
        (("encode",), b'{"a": 1, "a": 2}', "duplicate_key", ""),
        (("encode",), b"[NaN]", "invalid_json", ""),
        # An encode error names the value it is about (msgspec's path).
        (("encode",), b"[9223372036854775808]", "out_of_range", " at $[0]"),
        (("encode",), b"{", "invalid_json", " line 1"),
    ],
)
def test_bad_input_exit_2_one_line(
    args: tuple[str, ...], stdin: bytes, code: str, where: str
) -> None:
    res = run(*args, stdin=stdin)
    assert res.returncode == 2
    assert res.stdout == b""
    err = res.stderr.decode().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error[{code}]{where}: ")


def test_missing_file_is_a_clean_error() -> None:
    res = run("decode", "/nonexistent/file.gcf")
    assert res.returncode == 2
    assert res.stderr.decode().startswith("error[io_error]")


def test_one_version_everywhere() -> None:
    # pyproject reads gcfkit.__version__; the installed metadata, the CLI and python -m agree.
    from importlib.metadata import version

    assert version("gcfkit") == gcfkit.__version__
    res = subprocess.run(
        [sys.executable, "-m", "gcfkit", "--version"], capture_output=True, timeout=60, check=False
    )
    # The version line also says which codec path runs (the same in a child process).
    want = f"gcfkit {gcfkit.__version__} ({speedups.status()})"
    assert res.returncode == 0 and res.stdout.decode().strip() == want


def test_python_dash_m_gcfkit_runs_the_command() -> None:
    value = {"a": [1, 2]}
    res = subprocess.run(
        [sys.executable, "-m", "gcfkit", "encode"],
        input=json.dumps(value).encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0 and res.stdout.decode() == gcfkit.dumps(value)


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"gcfkit {gcfkit.__version__} ({speedups.status()})"
    for cmd in ("encode", "decode"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "usage: gcfkit " + cmd in capsys.readouterr().out


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: gcfkit" in capsys.readouterr().out


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_every_help_text_reads_as_written(name: str) -> None:
    # argparse %-formats option help but prints a description as written, so a "%%" meant as
    # an escaped percent sign shows up doubled there.
    parser = _subparsers()[name]
    text = parser.format_help()
    assert "%%" not in text
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        label = action.option_strings or [action.dest]
        assert action.help, f"gcfkit {name} {label[0]} has no help text"
        usage = parser.format_usage()
        if action.option_strings and "[OPTIONS]" not in usage:
            # A hand-written usage line must still name every option.
            assert action.option_strings[-1] in usage, label


def test_graph_encode_and_decode_use_the_camelcase_model() -> None:
    model = {
        "tool": "t",
        "symbols": [
            {
                "qualifiedName": "pkg.A",
                "kind": "function",
                "score": 0.9,
                "provenance": "lsp",
                "distance": 0,
            },
            {
                "qualifiedName": "pkg.B",
                "kind": "widget",
                "score": 0.5,
                "provenance": "ast",
                "distance": 1,
            },
        ],
        "edges": [{"source": "pkg.B", "target": "pkg.A", "edgeType": "calls"}],
    }
    res = run("encode", "--graph", stdin=json.dumps(model).encode())
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(b"GCF profile=graph tool=t symbols=2 edges=1\n")
    back = json.loads(run("decode", stdin=res.stdout).stdout)
    assert back["symbols"] == model["symbols"]
    assert [(e["source"], e["target"], e["edgeType"]) for e in back["edges"]] == [
        ("pkg.B", "pkg.A", "calls")
    ]


def test_decode_prints_a_generic_delta_as_its_model() -> None:
    from gcfkit import keyed

    base = keyed.KeyedSet("id", ["id", "v"], [{"id": 1, "v": 2}, {"id": 2, "v": 2}])
    session = keyed.DeltaSession(base, reanchor=keyed.FixedN(15))
    session.full()
    new = keyed.KeyedSet("id", ["id", "v"], [{"id": 1, "v": 3}, {"id": 2, "v": 2}])
    wire, is_full = session.next(new)
    assert not is_full
    res = run("decode", stdin=wire.encode())
    assert res.returncode == 0, res.stderr
    model = json.loads(res.stdout)
    assert model["changed"] == [{"id": 1, "v": 3}]
    assert model["baseRoot"] == keyed.pack_root(base)
    assert model["newRoot"] == keyed.pack_root(new)
