"""Helpers the codec's test modules share: the fast-path comparisons, the decoder's edge
tokens, the fuzz corpus and its mutators, the property tests' strategies and their
type-strict equality, the dense fixtures' identity. (One module, so that no test module
imports another.)"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck
from hypothesis import strategies as st

import gcfkit
from gcfkit import GCFError, speedups
from gcfkit.errors import CODES, GCFDecodeError
from gcfkit.generic import fast
from tests.conformance import load_fixtures


def outcome(decode: Callable[[Any], Any], payload: Any) -> tuple[Any, ...]:
    """What decoding gives: the value's repr (types, key order and -0.0 included), or the
    error's code and place (line, column). The C accelerator is off: it would read canonical
    payloads itself, both ways (tests/test_speedups.py compares it with this pure-Python
    decoder)."""
    try:
        with speedups.pure_python():
            value = decode(payload)
    except GCFError as e:
        return ("error", e.code, e.line, getattr(e, "colno", None))
    return ("value", type(value).__name__, repr(value))


def general(decode: Callable[[Any], Any], payload: Any) -> tuple[Any, ...]:
    """:func:`outcome` with the fast paths off."""
    saved = fast.ENABLED
    fast.ENABLED = False
    try:
        return outcome(decode, payload)
    finally:
        fast.ENABLED = saved


def assert_same(payload: Any, decode: Callable[[Any], Any] = gcfkit.decode) -> None:
    assert fast.ENABLED
    want = general(decode, payload)
    got = outcome(decode, payload)
    assert got == want, f"fast {got!r:.300}\ngeneral {want!r:.300}\n{payload!r:.1000}"


EDGE_TOKENS = [
    "0",
    "-0",
    "01",
    "-01",
    "1.",
    ".5",
    "1.0",
    "1e5",
    "1E+5",
    "1e-400",
    "1e999",
    "-1e999",
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "inf",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1_000",
    "0x10",
    "+1",
    "1.5.5",
    "١٢",
    "1٥",
    "true",
    "false",
    "-",
    "null",
    "tru",
    '"12"',
    '"a|b"',
    "  7  ",
    "4 ",
    "-.5",
    "--1",
]

H = "GCF profile=generic\n"

HANDWRITTEN = [
    H + "## rows [2]{id,o,a,t}\n@0 1|^|^{x,y,z}|^\n.o {}\n    k=1\n1|2|3\n.t [1]{s}\n    q\n"
    "@1 2|~|^|^\n4|5|6\n.t [1]\n    r\n",
    H + '## [3]{id,"a>b","a>c",d}\n1|2|3|4\n2|~|~|-\n3|-|-|"x|y"\n',
    H + "## items [4]\n@0 =a\n@1 {}\n  k=v\n  ## s\n    z=1\n@2 [2]: 1,2\n@3 [1:]{key,v}\n  m|1\n",
    H + "## m [?:]{key,a,b}\nk1|1|2\nk2|3|~\n## t [?]{x,y}\n1|2\n##! summary counts=2,1\n",
    "GCF profile=generic key=id pack_root=sha256:00\n## r [2]{@id,v}\n1|a\n2|b\n",
    H + 'a="q\\"uote"\nb=1.5e-7\nc=-\nd=true\n"e f"[2]: "x,y",-\n## n\n  ## m\n    x=1\n',
]

SPECIALS = [
    "|", "^", "~", '"', "\\", "@", ".", "#", ">", "{", "}", "[", "]", ":", "=", ",", " ", "\t",
    "\r", "\n", "\ufeff", "\u00a0", "-", "0", "?", "##", "##! summary counts=", "^{a,b}", "@0 ",
    "\\u", "\\ud800", "é",
]  # fmt: skip


GRAPHS = [
    "GCF profile=graph tool=t symbols=3 edges=2\n## targets\n@0 fn a.A 0.90 lsp\n"
    "## related\n@1 type a.B 0.50 ast\n## distance_4\n@2 x a.C -1.25 p\n"
    "## edges [2]\n@0<@1 calls\n@2<@0 uses added\n",
    "GCF profile=graph\n## targets\n@0 iface p.I 1.00 x\n## edges [?]\n@0<@0 self\n"
    "##! summary symbols=1 edges=1 counts=1,1\n",
    "GCF profile=graph tool=t delta=true base_root=sha256:aa new_root=sha256:bb tokens=9 "
    "savings=50%\n## removed\nfn a.Old\n## added\n@0 fn a.New 0.85 rwr 1\n"
    "## edges_removed\na.X -> a.Y calls\n## edges_added\na.New -> a.Y calls\n",
]


def fixture_texts(prefix: str) -> list[str]:
    """Every fixture text that starts with ``prefix`` (inputs, expected wires, delta wires)."""
    out = []
    for _, fx in load_fixtures():
        texts = [fx.get("input"), fx.get("expected")]
        nested = fx.get("input")
        if isinstance(nested, dict):
            texts.append(nested.get("wire"))
        expected = fx.get("expected")
        if isinstance(expected, dict):
            texts.append(expected.get("initialFull"))
            texts += [e.get("wire") for e in expected.get("emissions", [])]
        out += [t for t in texts if isinstance(t, str) and t.startswith(prefix)]
    return out


def _corpus() -> list[str]:
    return list(HANDWRITTEN) + fixture_texts("GCF profile=generic")


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
    return text[:pos] + rng.choice(SPECIALS) + text[pos:]


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


MUTATORS: list[Callable[[random.Random, str], str | bytes]] = [
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


def rejected(e: GCFError) -> None:
    """What a decoder may raise: a decode error with a known code and a place in its text."""
    assert isinstance(e, GCFDecodeError), repr(e)
    assert e.code in CODES, e
    assert e.lineno >= 1 and e.colno >= 1 and 0 <= e.pos <= len(e.doc)


def assert_json_model(value: Any) -> None:
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


def mutants(
    seed: int, cases: int = 500, corpus: list[str] | None = None, keep_head_odds: float = 0.85
) -> Iterator[str | bytes]:
    """``cases`` seeded mutations of ``corpus`` (the generic one by default), mostly of the
    body, keeping the header in ``keep_head_odds`` of them."""
    rng = random.Random(seed)
    corpus = CORPUS if corpus is None else corpus
    for _ in range(cases):
        text = rng.choice(corpus)
        # Mostly mutate the body: a broken header ends decoding at line 1.
        head, _, body = text.partition("\n")
        keep_head = rng.random() < keep_head_odds and bool(body)
        payload: str | bytes = body if keep_head else text
        for _ in range(rng.randint(1, 3)):
            mutate = rng.choice(MUTATORS)
            payload = mutate(rng, payload if isinstance(payload, str) else lossy(payload))
        if keep_head:
            payload = (
                head + "\n" + payload
                if isinstance(payload, str)
                else head.encode() + b"\n" + payload
            )
        yield payload


def lossy(data: bytes) -> str:
    return data.decode("utf-8", "replace")


AWKWARD = [
    "",
    " ",
    "-",
    "~",
    "^",
    "true",
    "false",
    "null",
    "0",
    "-0",
    "01",
    "007",
    "+1",
    "-.5",
    ".5",
    "1e5",
    "1.5",
    "6.022E+23",
    "1.\u0665",
    "123abc",
    "^{a,b}",
    "^{a}",
    "^{a b}",
    "^{",
    "#x",
    "# comment",
    "##! summary counts=1",
    "@0 x",
    ".x",
    " x",
    "x ",
    "\t",
    "\x00",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9f",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\ufeff",
    "a\u3000b",
    "[1]: x",
    "ERR[404]: Not Found",
    "x[0]",
    "a|b",
    "|",
    "a,b",
    ",",
    '"',
    '"q"',
    "back\\slash",
    "\\",
    "a>b",
    ">",
    "a>",
    ">b",
    "key",
    "_key",
    "__key",
    "x=y",
    "=",
    "{}",
    "[0]",
    "caf\u00e9",
    "\U0001f600",
    "line\nbreak",
    "\r\n",
]

text_values = st.one_of(
    st.sampled_from(AWKWARD),
    st.text(max_size=6),
    st.text(alphabet='ab|,"\\ >~^-.#@[]:{}=\n\t0123456789e+', max_size=6),
)
key_strings = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=4), st.sampled_from("abcdk"))
scalar_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-300, max_value=300),
    st.floats(allow_nan=False, allow_infinity=False),
    text_values,
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(key_strings, children, max_size=4),
    )


json_values = st.recursive(scalar_values, _containers, max_leaves=24)

# Shapes that reach tables, keyed maps, flattening and attachments far more often: rows
# drawn from a small field pool, with nested objects sharing their keys.
field_names = st.sampled_from(["a", "b", "key", "_key", "x>y", "", "c d"])
_leaf = st.one_of(scalar_values, st.lists(scalar_values, max_size=2))
_nested = st.one_of(
    st.none(),
    st.fixed_dictionaries({"p": scalar_values, "q": scalar_values}),
    st.fixed_dictionaries({"p": scalar_values, "q": st.fixed_dictionaries({"r": scalar_values})}),
    st.dictionaries(field_names, _leaf, max_size=3),
)
_row = st.dictionaries(field_names, st.one_of(_leaf, _nested), max_size=4)
_deep_row = st.dictionaries(
    field_names, st.one_of(_leaf, _nested, st.lists(_row, max_size=3)), max_size=4
)
tables = st.lists(st.one_of(_row, _deep_row), min_size=1, max_size=5)
keyed_maps = st.dictionaries(key_strings, st.one_of(_row, _deep_row), min_size=2, max_size=5)
documents = st.one_of(
    tables,
    keyed_maps,
    st.dictionaries(key_strings, st.one_of(tables, keyed_maps, json_values), max_size=3),
    st.lists(st.one_of(tables, keyed_maps, json_values), max_size=3),
)

PROPERTY_SETTINGS = {
    "derandomize": True,
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def same(got: Any, want: Any) -> bool:
    """Structural equality of decoded ``got`` and ``want``, key order included."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, float):
        if type(got) is float:
            return got == want
        return type(got) is int and want.is_integer() and got == want
    if isinstance(want, int):
        return type(got) is int and got == want
    if isinstance(want, dict):
        return (
            type(got) is dict
            and list(got) == list(want)
            and all(same(got[k], want[k]) for k in want)
        )
    if isinstance(want, list):
        return (
            type(got) is list
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and got == want


# An independent statement of the encoder's form choices, from the spec and the encoder's
# documented options, so that a wrong plan cannot make its own expectation.


def _is_table(arr: list[Any]) -> bool:
    """§7.3 rule 3: a non-empty array of objects with some column (a field without ``>``,
    §7.4.6.1 rule 4) whose attachments can all be spelled (see _schema_conflict)."""
    return (
        bool(arr)
        and all(isinstance(x, dict) for x in arr)
        and any(">" not in k for row in arr for k in row)
        and not _schema_conflict(arr)
    )


def _schema_conflict(rows: list[dict[str, Any]]) -> bool:
    """A field holding a tabular array and, in a later row, an expanded one (§7.4.5.3):
    the first tabular attachment establishes a schema the later one cannot carry."""
    tabular: set[str] = set()
    for row in rows:
        for f, v in row.items():
            if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
                if _is_table(v):
                    tabular.add(f)
                elif f in tabular:
                    return True
    return False


def _has_null_object(obj: dict[str, Any]) -> bool:
    """Some object in ``obj`` (itself included) whose members are all null."""
    return all(v is None for v in obj.values()) or any(
        _has_null_object(v) for v in obj.values() if isinstance(v, dict)
    )


def _flattens(values: list[Any], top: bool = True) -> bool:
    """§7.4.6.1: one field's present values become ``>`` path columns when each is an
    object (null allowed only at the top, rule 10) with the same non-empty keys in the same
    order (rule 1), no key empty or holding ``>`` (rule 3), and every leaf a scalar or such
    an object itself (rules 2, 6); an object of only nulls would come back as null
    (§7.4.6.2 rule 5), so it blocks flattening."""
    objs = [v for v in values if not (top and v is None)]
    if not objs or not all(isinstance(v, dict) for v in objs):
        return False
    keys = list(objs[0])
    if not keys or any(not k or ">" in k for k in keys) or any(list(o) != keys for o in objs):
        return False
    for k in keys:
        sub = [o[k] for o in objs]
        if any(isinstance(x, (dict, list)) for x in sub) and not _flattens(sub, top=False):
            return False
    return not top or not any(_has_null_object(o) for o in objs)


def _as_rows(rows: list[dict[str, Any]], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows as a table gives them back: columns in field-union order (§7.4.3), then the
    ``>``-named fields, which travel as attachments after them (§7.4.6.1 rule 4)."""
    union = list(dict.fromkeys(k for row in rows for k in row))
    flat = {
        f
        for f in union
        if options.get("flatten", True)
        and f
        and ">" not in f
        and _flattens([r[f] for r in rows if f in r])
    }
    order = [f for f in union if ">" not in f] + [f for f in union if ">" in f]
    # A flattened object comes back exactly as it was (same keys in every row); every
    # other value follows its own form's rules.
    return [
        {f: row[f] if f in flat else wire_order(row[f], options) for f in order if f in row}
        for row in rows
    ]


def wire_order(v: Any, options: dict[str, Any] | None = None) -> Any:
    """``v`` with every table row's keys in the order the wire gives them back."""
    options = options or {}
    if isinstance(v, list):
        if _is_table(v):
            return _as_rows(v, options)
        return [wire_order(x, options) for x in v]
    if isinstance(v, dict):
        values = list(v.values())
        if len(v) >= 2 and _is_table(values):  # a keyed map (§7.2a.1)
            return dict(zip(v, _as_rows(values, options), strict=True))
        return {k: wire_order(x, options) for k, x in v.items()}
    return v


def identical(got: Any, want: Any) -> bool:
    """Equality that keeps key order and never mixes bool, int and float."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return list(got) == list(want) and all(identical(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(
            identical(g, w) for g, w in zip(got, want, strict=True)
        )
    return bool(got == want)
