"""Keyed sets and generic deltas (§10a): atomicity, wire strictness, sessions (the fixtures
are run by tests/test_conformance.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gcfkit.errors import GCFError
from gcfkit.keyed import (
    DeltaSession,
    FixedN,
    GenericDelta,
    KeyedSet,
    SizeGuard,
    apply_delta,
    diff,
    dumps_delta,
    dumps_full,
    dumps_unchanged,
    loads_delta,
    loads_keyed,
    pack_root,
)

# Run a second time on the pure-Python codec by `make test` (GCFKIT_PURE_PYTHON=1).
pytestmark = pytest.mark.pure

F = ["id", "total", "status"]


def _base() -> KeyedSet:
    return KeyedSet(
        "id",
        F,
        [
            {"id": 1, "total": 9.5, "status": "open"},
            {"id": 2, "total": 3, "status": None},
            {"id": 3, "total": 0, "status": "shut"},
        ],
        name="orders",
    )


# ---------------------------------------------------------------------------------------
# Keyed sets and pack roots
# ---------------------------------------------------------------------------------------


def test_identity_is_canonical() -> None:
    # "1" and 1 are different identities; 1 and 1.0 are the same (one canonical number).
    KeyedSet("id", ["id"], [{"id": "1"}, {"id": 1}])
    with pytest.raises(GCFError) as info:
        KeyedSet("id", ["id"], [{"id": 1}, {"id": 1.0}])
    assert info.value.code == "duplicate_key"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("id", ["v"], []), "invalid_keyed_set"),
        (("id", ["id", "id"], []), "duplicate_field_name"),
        (("id", ["id"], [{"v": 1}]), "invalid_keyed_set"),
        (("id", ["id"], [{"id": 1, "x": 2}]), "invalid_keyed_set"),
        (("id", ["id", "v"], [{"id": 1, "v": [1]}]), "unsupported_type"),
        (("id", ["id", "v"], [{"id": 1, "v": "\ud800"}]), "invalid_surrogate"),
        (("id", ["id"], [[1]]), "invalid_keyed_set"),
    ],
)
def test_keyed_set_validation(args: tuple[Any, ...], code: str) -> None:
    with pytest.raises(GCFError) as info:
        KeyedSet(*args)
    assert info.value.code == code


def test_pack_root_distinguishes_types_and_absence() -> None:
    roots = {
        pack_root(KeyedSet("id", ["id", "v"], [{"id": 1, "v": v}]))
        for v in ("1", 1, True, "true", None, "-", 1.5)
    }
    assert len(roots) == 7
    absent = pack_root(KeyedSet("id", ["id", "v"], [{"id": 1}]))
    null = pack_root(KeyedSet("id", ["id", "v"], [{"id": 1, "v": None}]))
    assert absent != null


def test_rows_are_copied() -> None:
    rows = [{"id": 1, "total": 1, "status": "a"}]
    s = KeyedSet("id", F, rows)
    rows[0]["total"] = 99
    assert s.rows[0]["total"] == 1


# ---------------------------------------------------------------------------------------
# Deltas on the wire
# ---------------------------------------------------------------------------------------


def test_dumps_loads_delta_round_trip() -> None:
    base = _base()
    new = KeyedSet(
        "id",
        F,
        [
            {"id": 2, "total": 3, "status": "paid"},
            {"id": 3, "total": 0, "status": "shut"},
            {"id": "x|y", "total": -1.25, "status": "a,b"},
            {"id": 4, "total": 1},
        ],
    )
    delta = diff(base, new, tool="orders")
    wire = dumps_delta(delta)
    assert wire.startswith("GCF profile=generic tool=orders delta=true base_root=sha256:")
    back = loads_delta(wire)
    assert back == delta
    assert [r["id"] for r in back.added] == ["x|y", 4] and back.removed == (1,)
    assert pack_root(apply_delta(base, back)) == pack_root(new)


def test_savings_header() -> None:
    d = GenericDelta("id", ["id"], "sha256:a", "sha256:b", removed=[1], delta_tokens=30,
                     full_tokens=160)  # fmt: skip
    assert " savings=81% " not in dumps_delta(d) and dumps_delta(d).split("\n")[0].endswith(
        "key=id savings=81%"
    )


W = "GCF profile=generic delta=true base_root=sha256:a new_root=sha256:b key=id\n"


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        (W + "## updated [1]{@id}\n1\n", "malformed_delta"),
        (W + "## removed [1]{@id,v}\n1|2\n", "malformed_delta"),
        (W + "## added [1]{id,v}\n1|2\n", "malformed_delta"),
        (W + "## added [1]{@id,v}\n1|2\n## changed [1]{@id,w}\n2|3\n", "malformed_delta"),
        (W + "## added [1:]{@id,v}\nk|2\n", "malformed_delta"),
        (W + "## added [1]{@id,v}\n@0 1|^\n.v [1]: x\n", "malformed_delta"),
        (W + "x=1\n", "malformed_delta"),
        (W + "=1\n", "malformed_delta"),
        (W + "## added [2]{@id,v}\n1|2\n", "count_mismatch"),
        (W + "## added [2]{@id,v}\n1|2\n1|3\n", "duplicate_key"),
        (W + "## added [1]{@v,id}\n1|2\n", "invalid_key"),
        ("GCF profile=generic key=id base_root=a new_root=b\n", "malformed_delta"),
        ("GCF profile=generic delta=true new_root=b key=id\n", "malformed_delta"),
        ("GCF profile=generic delta=true base_root=a new_root=b\n", "malformed_delta"),
        ("GCF profile=graph delta=true base_root=a new_root=b\n", "unsupported_profile"),
        (b"GCF profile=generic delta=true base_root=a new_root=b key=id\n\xff\n", "invalid_utf8"),
    ],
)
def test_loads_delta_rejects(wire: str | bytes, code: str) -> None:
    with pytest.raises(GCFError) as info:
        loads_delta(wire)
    assert info.value.code == code, str(info.value)


# ---------------------------------------------------------------------------------------
# Atomic application
# ---------------------------------------------------------------------------------------


def _reject(base: KeyedSet, delta: GenericDelta, **kw: Any) -> GCFError:
    rows_before = copy.deepcopy(base.rows)
    root_before = pack_root(base)
    with pytest.raises(GCFError) as info:
        apply_delta(base, delta, **kw)
    # Atomic: nothing about the base changed, not even inside its row dicts.
    assert base.rows == rows_before and pack_root(base) == root_before
    return info.value


def test_apply_rejections_leave_the_base_unchanged() -> None:
    base = _base()
    root = pack_root(base)
    row1 = {"id": 1, "total": 1, "status": "x"}
    new = {"id": 9, "total": 1, "status": "x"}
    cases = [
        (GenericDelta("id", F, "sha256:" + "0" * 64, root), "root_mismatch", ""),
        (GenericDelta("id", F, root, "sha256:" + "0" * 64, removed=[3]), "root_mismatch", ""),
        (GenericDelta("id", F, root, root, added=[row1]), "invalid_delta", "already exists"),
        (GenericDelta("id", F, root, root, changed=[new]), "invalid_delta", "does not exist"),
        (GenericDelta("id", F, root, root, removed=[9]), "invalid_delta", "does not exist"),
        (GenericDelta("id", F, root, root, removed=["1"]), "invalid_delta", "does not exist"),
        (GenericDelta("id", F, root, root, changed=[row1], removed=[1]), "invalid_delta", "two"),
        (GenericDelta("id", ["id", "total"], root, root, added=[{"id": 8}]), "invalid_delta", ""),
        (GenericDelta("total", F, root, root, removed=[3]), "invalid_delta", "key"),
    ]
    for delta, code, phrase in cases:
        err = _reject(base, delta)
        assert err.code == code and phrase in str(err), str(err)
    # A valid delta whose result hashes elsewhere than expected_root is rejected too.
    ok = diff(base, KeyedSet("id", F, [new]))
    assert _reject(base, ok, expected_root="sha256:" + "1" * 64).code == "root_mismatch"
    assert pack_root(apply_delta(base, ok)) == ok.new_root


def test_apply_keeps_order_and_untouched_rows() -> None:
    base = _base()
    changed = {"id": 2, "total": 4, "status": "paid"}
    added = {"id": 7, "total": 1, "status": "new"}
    target = [base.rows[0], changed, added]
    delta = GenericDelta(
        "id", F, pack_root(base), pack_root(KeyedSet("id", F, target)),
        added=[added], changed=[changed], removed=[3],
    )  # fmt: skip
    result = apply_delta(base, delta)
    assert list(result.rows) == target and result.name == "orders"


# ---------------------------------------------------------------------------------------
# Sessions: the three outcomes, re-anchoring, schema change
# ---------------------------------------------------------------------------------------


def _bump(s: KeyedSet, i: int) -> KeyedSet:
    rows = [dict(r) for r in s.rows]
    rows[i % len(rows)]["total"] = rows[i % len(rows)]["total"] + 1
    return KeyedSet(s.key, s.fields, rows, s.name)


def test_session_outcomes() -> None:
    base = _base()
    session = DeltaSession(base, tool="q", reanchor=FixedN(3))
    full = session.full()
    assert full.startswith("GCF profile=generic tool=q pack_root=") and "## orders [3]{@id," in full
    assert session.next(base) == (dumps_unchanged(base), False)
    assert dumps_unchanged(base) == (
        f"GCF profile=generic unchanged=true pack_root={pack_root(base)} count=3\n"
    )
    s1 = _bump(base, 0)
    wire, is_full = session.next(s1)
    assert not is_full and "delta=true" in wire
    # Unchanged turns do not count toward the re-anchor.
    assert session.next(s1)[1] is False
    s2 = _bump(s1, 1)
    assert session.next(s2)[1] is False
    s3 = _bump(s2, 2)
    wire, is_full = session.next(s3)
    assert is_full and wire == dumps_full(s3, tool="q")
    # Schema change: full even right after an anchor.
    narrow = KeyedSet("id", ["id", "total"], [{"id": 1, "total": 0}], name="orders")
    assert session.next(narrow) == (dumps_full(narrow, tool="q"), True)


def test_size_guard_ratio() -> None:
    rows = [{"id": i, "total": i, "status": "s"} for i in range(60)]
    base = KeyedSet("id", F, rows)
    session = DeltaSession(base, reanchor=SizeGuard())
    session.full()
    # Changing every row makes the delta as big as a full payload: full wins.
    every = KeyedSet("id", F, [dict(r, status="t") for r in rows])
    assert session.next(every)[1] is True
    one = KeyedSet("id", F, [dict(r, status="u" if r["id"] == 0 else "t") for r in rows])
    assert session.next(one)[1] is False


def test_policies_validate() -> None:
    for bad in (lambda: FixedN(0), lambda: SizeGuard(0), lambda: SizeGuard(1.5)):
        with pytest.raises(GCFError) as info:
            bad()
        assert info.value.code == "invalid_option"


def test_loads_keyed() -> None:
    base = _base()
    assert loads_keyed(dumps_full(base, tool="t")) == base
    forged = dumps_full(base).replace("9.5", "9.6")
    with pytest.raises(GCFError) as info:
        loads_keyed(forged)
    assert info.value.code == "root_mismatch"


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------

_IDS = st.one_of(st.integers(-5, 40), st.text(max_size=3), st.sampled_from(["1", "-", "a|b"]))
_CELLS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
_FIELDS = ["id", "a", "b c", "é"]


@st.composite
def _keyed_sets(draw: Any) -> KeyedSet:
    ids = draw(st.lists(_IDS, max_size=8, unique_by=lambda v: (type(v), v)))
    rows = []
    for ident in ids:
        row = {"id": ident}
        for f in _FIELDS[1:]:
            if draw(st.booleans()):
                row[f] = draw(_CELLS)
        rows.append(row)
    return KeyedSet("id", _FIELDS, rows)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_keyed_sets(), _keyed_sets())
def test_delta_between_any_two_sets_applies(a: KeyedSet, b: KeyedSet) -> None:
    delta = loads_delta(dumps_delta(diff(a, b)))
    assert pack_root(apply_delta(a, delta)) == pack_root(b)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_keyed_sets(), min_size=1, max_size=6), st.integers(1, 4), st.booleans())
def test_consumer_follows_any_session(sets: list[KeyedSet], n: int, guard: bool) -> None:
    session = DeltaSession(sets[0], reanchor=SizeGuard() if guard else FixedN(n))
    held = loads_keyed(session.full())
    for update in sets[1:]:
        wire, is_full = session.next(update)
        if is_full:
            held = loads_keyed(wire)
        elif "unchanged=true" not in wire.split("\n", 1)[0]:
            held = apply_delta(held, loads_delta(wire))
        assert pack_root(held) == pack_root(update)


def test_pack_root_matches_peer_implementation() -> None:
    # Complete rows only: gcf-python hashes an absent field as null, and an int at or
    # above 2^53 as a double; we keep absent apart from null (lossless) and hash every
    # int64 as its plain digits (§2.3.1).
    gcf = pytest.importorskip("gcf")
    rows: list[dict[str, Any]] = [
        {"id": 1, "v": "x", "w": None},
        {"id": "1", "v": 1.5, "w": True},
        {"id": 2, "v": "tab\there", "w": -0.0},
        {"id": 3, "v": 1e-7, "w": 2**53 - 1},
        {"id": 4, "v": "é\u2028", "w": 1e21},
    ]
    mine = pack_root(KeyedSet("id", ["id", "v", "w"], rows))
    assert mine == gcf.generic_pack_root(gcf.GenericSet("id", ["id", "v", "w"], rows))


def test_unchanged_answer_reads_as_an_empty_delta() -> None:
    base = _base()
    delta = loads_delta(dumps_unchanged(base))
    assert delta.empty and delta.base_root == delta.new_root == pack_root(base)
    assert apply_delta(base, delta) == base
    with pytest.raises(GCFError) as info:
        apply_delta(KeyedSet("id", F, base.rows[:1]), delta)
    assert info.value.code == "root_mismatch"
    with pytest.raises(GCFError) as info:
        loads_delta("GCF profile=generic unchanged=true pack_root=sha256:a\nx=1\n")
    assert info.value.code == "malformed_delta"
