"""Decoder fuzzing: mutated fixtures and payloads only ever decode or raise GCFError.

Seeded and bounded: a few thousand cases in a few seconds. Any other exception (IndexError,
RecursionError, KeyError, ...) is a bug in the decoder's totality and fails the test.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gcfkit.errors import CODES, GCFError
from gcfkit.generic.decoder import loads
from tests.conformance import load_fixtures

H = "GCF profile=generic\n"

_HANDWRITTEN = [
    H + "## rows [2]{id,o,a,t}\n@0 1|^|^{x,y,z}|^\n.o {}\n    k=1\n1|2|3\n.t [1]{s}\n    q\n"
    "@1 2|~|^|^\n4|5|6\n.t [1]\n    r\n",
    H + '## [3]{id,"a>b","a>c",d}\n1|2|3|4\n2|~|~|-\n3|-|-|"x|y"\n',
    H + "## items [4]\n@0 =a\n@1 {}\n  k=v\n  ## s\n    z=1\n@2 [2]: 1,2\n@3 [1:]{key,v}\n  m|1\n",
    H + "## m [?:]{key,a,b}\nk1|1|2\nk2|3|~\n## t [?]{x,y}\n1|2\n##! summary counts=2,1\n",
    "GCF profile=generic key=id pack_root=sha256:00\n## r [2]{@id,v}\n1|a\n2|b\n",
    H + 'a="q\\"uote"\nb=1.5e-7\nc=-\nd=true\n"e f"[2]: "x,y",-\n## n\n  ## m\n    x=1\n',
]

_SPECIALS = [
    "|", "^", "~", '"', "\\", "@", ".", "#", ">", "{", "}", "[", "]", ":", "=", ",", " ", "\t",
    "\r", "\n", "\ufeff", "\u00a0", "-", "0", "?", "##", "##! summary counts=", "^{a,b}", "@0 ",
    "\\u", "\\ud800", "é",
]  # fmt: skip


def _corpus() -> list[str]:
    out = list(_HANDWRITTEN)
    for _, fx in load_fixtures():
        for key in ("input", "expected"):
            text = fx.get(key)
            if isinstance(text, str) and text.startswith("GCF profile=generic"):
                out.append(text)
    return out


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _truncate(rng: random.Random, text: str) -> str | bytes:
    return text[: rng.randrange(len(text) + 1)]


def _flip_byte(rng: random.Random, text: str) -> str | bytes:
    data = bytearray(text.encode("utf-8"))
    for _ in range(rng.randint(1, 3)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def _swap_lines(rng: random.Random, text: str) -> str | bytes:
    lines = _lines(text)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _dup_line(rng: random.Random, text: str) -> str | bytes:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "\n".join(lines)


def _drop_line(rng: random.Random, text: str) -> str | bytes:
    lines = _lines(text)
    del lines[rng.randrange(len(lines))]
    return "\n".join(lines)


def _reindent(rng: random.Random, text: str) -> str | bytes:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    pad = rng.choice(["", " ", "  ", "    ", "      ", "\t", " \t", "  " * 40])
    lines[i] = pad + lines[i].lstrip(" ")
    return "\n".join(lines)


def _insert_special(rng: random.Random, text: str) -> str | bytes:
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + rng.choice(_SPECIALS) + text[pos:]


def _delete_span(rng: random.Random, text: str) -> str | bytes:
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + text[pos + rng.randint(1, 6) :]


def _giant_count(rng: random.Random, text: str) -> str | bytes:
    if "[" not in text:
        return text + "## g [99999999999999]{a}\n"
    pos = text.index("[")
    end = text.find("]", pos)
    if end < 0:
        return text
    repl = rng.choice(["10000000000", "999999999999999999999", "?", "0", "1:", "?:", "", "07"])
    return text[: pos + 1] + repl + text[end:]


def _bad_utf8(rng: random.Random, text: str) -> str | bytes:
    data = text.encode("utf-8")
    pos = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"])
    return data[:pos] + junk + data[pos:]


_MUTATORS: list[Callable[[random.Random, str], str | bytes]] = [
    _truncate,
    _flip_byte,
    _swap_lines,
    _dup_line,
    _drop_line,
    _reindent,
    _insert_special,
    _delete_span,
    _giant_count,
    _bad_utf8,
]


def _deep(rng: random.Random, depth: int) -> str:
    kind = rng.randrange(3)
    if kind == 0:
        body = "".join(f"{'  ' * i}## k\n" for i in range(depth)) + "  " * depth + "x=1\n"
    elif kind == 1:
        body = "## [1]\n" + "".join(f"{'  ' * i}@0 [1]\n" for i in range(depth))
        body += "  " * depth + "@0 =x\n"
    else:
        body = "## [1]{a}\n@0 ^\n" + "".join(
            f"{'    ' * i}.a [1]{{a}}\n{'    ' * (i + 1)}@0 ^\n" for i in range(depth)
        )
        body += "    " * depth + ".a [1]: leaf\n"
    return H + body


def _check(payload: str | bytes) -> None:
    try:
        value = loads(payload)
    except GCFError as e:
        assert e.code in CODES, e
        assert e.line is None or e.line >= 1
        return
    _assert_json_model(value)


def _assert_json_model(value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            assert all(type(k) is str for k in v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        else:
            assert v is None or type(v) in (str, int, float, bool), type(v)


CORPUS = _corpus()


def mutants(seed: int, cases: int = 500) -> Iterator[str | bytes]:
    """``cases`` seeded mutations of the corpus (mostly of the body, keeping the header)."""
    rng = random.Random(seed)
    for _ in range(cases):
        text = rng.choice(CORPUS)
        # Mostly mutate the body: a broken header ends decoding at line 1.
        head, _, body = text.partition("\n")
        keep_head = rng.random() < 0.85 and bool(body)
        payload: str | bytes = body if keep_head else text
        for _ in range(rng.randint(1, 3)):
            mutate = rng.choice(_MUTATORS)
            payload = mutate(rng, payload if isinstance(payload, str) else _lossy(payload))
        if keep_head:
            payload = (
                head + "\n" + payload
                if isinstance(payload, str)
                else head.encode() + b"\n" + payload
            )
        yield payload


@pytest.mark.parametrize("seed", range(6))
def test_mutations_only_raise_gcferror(seed: int) -> None:
    for case, payload in enumerate(mutants(seed)):
        try:
            _check(payload)
        except AssertionError:
            raise
        except Exception as e:  # any other exception is a totality bug
            pytest.fail(f"seed {seed} case {case}: {type(e).__name__}: {e}\n{payload!r:.2000}")


def _lossy(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def test_deep_nesting_decodes_or_hits_the_limit() -> None:
    rng = random.Random(99)
    for depth in (1, 31, 64, 100, 200, 254, 256, 300, 1000):
        for _ in range(3):
            payload = _deep(rng, depth)
            try:
                _check(payload)
            except GCFError as e:  # pragma: no cover - _check swallows GCFError
                pytest.fail(str(e))
            if depth <= 100:
                value: Any = loads(payload)
                assert value is not None


def test_limits_are_reported_as_limit_exceeded() -> None:
    rng = random.Random(7)
    for depth in (300, 1000):
        with pytest.raises(GCFError) as info:
            loads(_deep(rng, depth))
        assert info.value.code == "limit_exceeded"
