"""THE answer policy: which form of one tool result the client receives.

The proxy core (:class:`gcfkit.proxy.ProxyCore`) and the server helpers
(:class:`gcfkit.mcp.server.GCFResponder`) both build the :class:`Candidates` of a value and
call :func:`choose` (through :func:`settle` when a winner must be verified first). The rule:

1. The plain answer: the original text when the caller has one and compact JSON is not
   smaller (fewer tokens, ties broken by fewer bytes), else compact JSON.
2. GCF (a full payload) when it has strictly fewer tokens than every plain form; a dense
   payload (the extension, docs/extensions/dense.md) when it has strictly fewer tokens than
   that and every plain form.
3. A delta, or an ``unchanged`` answer (§10a), when it has strictly fewer tokens than
   ``delta_ratio`` times the best full form and than the original.
4. A relative answer (docs/extensions/relative-answers.md) to a call that named a result the
   reader holds, when it has strictly fewer tokens than everything above and than
   ``relative_ratio`` times the best full form (``@@ unchanged``: than the full form itself,
   as there is nothing to apply). Text results have only the original and a relative
   answer (:func:`choose_text`), under the same rule (:func:`relative_wins`).

So no answer ever costs more tokens than compact JSON (or than what the tool wrote). There
is no mode that asks for GCF regardless of size: a client asking for GCF is asking for the
cheapest lossless form, and JSON is one.

What the client holds afterwards, for deltas, is one :class:`DeltaState` per call (tool and
arguments); :func:`advance` diffs an update against it without touching it, and
:func:`held_after` says which state the client holds once the choice is delivered.

>>> json_form = Form.of('[{"id":1}]', len)
>>> gcf_form = Form.of("GCF profile=generic\\n## [1]{id}\\n1\\n", len)
>>> choose(Candidates(json=json_form, gcf=gcf_form), AnswerPolicy()).decision
'json'
>>> original = Cost(tokens=40, size=40)
>>> choose(Candidates(json=json_form, original=original), AnswerPolicy()).decision
'json'
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal, NewType

from .. import speedups
from ..errors import GCFError
from ..header import parse_header
from ..jsonio import same_value
from ..keyed import DeltaSession, KeyedSet, apply_delta, loads_delta, pack_root

__all__ = [
    "GCF_FORMS",
    "VERIFIED_FORMS",
    "AnswerPolicy",
    "Candidates",
    "Choice",
    "Cost",
    "Decision",
    "DeltaState",
    "DeltaStep",
    "FailureReason",
    "Fallback",
    "FallbackReason",
    "FallbackWord",
    "Form",
    "RelativeKind",
    "advance",
    "choose",
    "choose_text",
    "delta_rebuilds",
    "fallback_word",
    "held_after",
    "identity_column",
    "is_unchanged",
    "keyed_set",
    "relative_wins",
    "settle",
    "utf8_len",
]

#: What the client gets: a full GCF payload (v3.5.3, or the dense extension), compact JSON,
#: a §10a delta, an ``unchanged`` answer (§10a), the tool's original text untouched, or a
#: relative answer.
Decision = Literal[
    "gcf",
    "dense",
    "json",
    "delta",
    "unchanged",
    "original",
    "since-unchanged",
    "since-patch",
    "since-edit",
]

#: The relative answers: the held result is current, a patch of the held JSON value, an
#: edit of the held text.
RelativeKind = Literal["unchanged", "patch", "edit"]

#: The decisions that send GCF (and, for keyed sets, carry a pack root).
GCF_FORMS: Final[frozenset[Decision]] = frozenset({"gcf", "delta", "unchanged"})

#: The decisions :func:`settle` verifies before they are sent (a dense payload carries no
#: pack root, so it is not one of :data:`GCF_FORMS`, but it is decoded back all the same).
VERIFIED_FORMS: Final[frozenset[Decision]] = GCF_FORMS | {"dense"}

#: Why a smaller form was not sent: it could not be encoded, or it did not decode back to
#: the value (``selfcheck``), or the delta did not rebuild the update (``delta-selfcheck``),
#: or a relative answer could not be built and verified (``since-selfcheck``).
FallbackReason = Literal["encode", "selfcheck", "delta-selfcheck", "since-selfcheck"]

#: Why a whole result went out as the server wrote it: past its time budget, an envelope
#: that could not be edited safely, an exception (``detail``: its type), or, in a worker
#: pool (:mod:`gcfkit.transports.offload`), no worker, one that exited, none started in
#: time, the pool closed, or workers kept dying.
FailureReason = Literal[
    "time-budget",
    "unsafe-envelope",
    "error",
    "no-worker",
    "worker-exited",
    "worker-start",
    "closed",
    "workers-crashed",
]

#: The ledger's word for a fallback, ``fallback:<reason>[-<detail>]``: made only by
#: :func:`fallback_word`, so that no other string passes for one.
FallbackWord = NewType("FallbackWord", str)


def fallback_word(reason: FallbackReason | FailureReason, detail: str = "") -> FallbackWord:
    """The ledger's word for a fallback.

    >>> fallback_word("error", "KeyError"), fallback_word("time-budget")
    ('fallback:error-KeyError', 'fallback:time-budget')
    """
    return FallbackWord(f"fallback:{reason}-{detail}" if detail else f"fallback:{reason}")


def utf8_len(text: str) -> int:
    """The UTF-8 size of ``text`` (lone surrogates count as 3 bytes, as they would escape).

    >>> utf8_len("é"), utf8_len("ab")
    (2, 2)
    """
    if text.isascii():
        return len(text)
    if (size := speedups.utf8_len(text)) is not None:
        return size  # counted in C: no copy of a large text
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class Cost:
    """What a text costs: tokens (in the caller's encoding) and UTF-8 bytes."""

    tokens: int
    size: int


@dataclass(frozen=True, slots=True)
class Form:
    """One way to send the value: its text and what it costs."""

    text: str
    tokens: int
    size: int

    @classmethod
    def of(cls, text: str, count: Callable[[str], int]) -> Form:
        """``text`` counted with ``count``.

        >>> Form.of("abc", len)
        Form(text='abc', tokens=3, size=3)
        """
        return cls(text, count(text), utf8_len(text))


@dataclass(frozen=True, slots=True)
class Fallback:
    """A form that was refused, and why; ``detail`` is the error code or exception type.

    >>> Fallback("encode", "limit_exceeded").word
    'fallback:encode-limit_exceeded'
    """

    reason: FallbackReason
    detail: str = ""

    @property
    def word(self) -> FallbackWord:
        """The ledger's word for it: ``fallback:<reason>[-<detail>]``."""
        return fallback_word(self.reason, self.detail)


@dataclass(frozen=True, slots=True)
class Candidates:
    """Every form one value could be sent in.

    ``json`` is always there. ``original`` is the cost of what the tool wrote, when there is
    such a text (the proxy); ``gcf`` a full payload, ``dense`` a full dense-profile payload,
    and ``delta`` a delta or ``unchanged``
    answer (``unchanged`` True) against what the client holds, when they exist; ``relative``
    a verified relative answer of kind ``relative_kind`` to a call that named a held result.
    ``fallbacks`` records forms refused along the way.
    """

    json: Form
    original: Cost | None = None
    gcf: Form | None = None
    delta: Form | None = None
    unchanged: bool = False
    fallbacks: tuple[Fallback, ...] = ()
    relative: Form | None = None
    relative_kind: RelativeKind = "unchanged"
    dense: Form | None = None

    def refuse(self, decision: Decision) -> Candidates:
        """The candidates without the form ``decision`` chose, which failed its check."""
        if decision == "gcf":
            return replace(self, gcf=None, fallbacks=(*self.fallbacks, Fallback("selfcheck")))
        if decision == "dense":
            return replace(self, dense=None, fallbacks=(*self.fallbacks, Fallback("selfcheck")))
        if decision in ("delta", "unchanged"):
            reason = Fallback("delta-selfcheck")
            return replace(self, delta=None, fallbacks=(*self.fallbacks, reason))
        return self


@dataclass(frozen=True, slots=True)
class AnswerPolicy:
    """How :func:`choose` and :func:`held_after` decide, beyond the fixed rule.

    ``delta_ratio``: a delta must have fewer tokens than this fraction of the best full form
    (the proxy's ``--delta`` uses §10a.2's 0.6; the server helpers leave that guard to
    their :class:`~gcfkit.keyed.SizeGuard` and use 1.0). ``relative_ratio``: the same for a
    ``@@ patch`` or ``@@ edit`` answer (0.6, measured in bench/relative.md).
    ``tracks_delivery``: the answerer
    sees every answer reach the client (the proxy), so whatever form goes out, the client
    holds the new set; otherwise (the server helpers) the client holds a set only through a
    GCF form whose pack root it can echo.
    """

    delta_ratio: float = 1.0
    tracks_delivery: bool = False
    relative_ratio: float = 0.6


@dataclass(frozen=True, slots=True)
class Choice:
    """The form chosen: its ``text`` (None for ``original``: keep what the tool wrote), its
    tokens, the :data:`Decision`, and the forms refused on the way."""

    text: str | None
    tokens: int
    decision: Decision
    fallbacks: tuple[Fallback, ...] = ()


def choose(candidates: Candidates, policy: AnswerPolicy) -> Choice:
    """The form to send; pure (see the module docstring for the rule).

    >>> js = Form('{"a":1}', 5, 7)
    >>> choose(Candidates(json=js, gcf=Form("GCF ...", 4, 9)), AnswerPolicy()).decision
    'gcf'
    >>> choose(Candidates(json=js, gcf=Form("GCF ...", 5, 3)), AnswerPolicy()).decision
    'json'
    >>> dense = Form("GCF profile=dense ...", 3, 9)
    >>> choose(Candidates(json=js, gcf=Form("GCF ...", 4, 9), dense=dense), AnswerPolicy()).decision
    'dense'
    >>> delta = Form("GCF ... delta=true", 3, 20)
    >>> choose(Candidates(json=js, delta=delta), AnswerPolicy(delta_ratio=0.6)).decision
    'json'
    """
    c = candidates
    original = c.original
    if original is not None and (original.tokens, original.size) <= (c.json.tokens, c.json.size):
        best = Choice(None, original.tokens, "original", c.fallbacks)
    else:
        best = Choice(c.json.text, c.json.tokens, "json", c.fallbacks)
    below_original = original.tokens if original is not None else None
    if (
        c.gcf is not None
        and c.gcf.tokens < c.json.tokens
        and (below_original is None or c.gcf.tokens < below_original)
    ):
        best = Choice(c.gcf.text, c.gcf.tokens, "gcf", c.fallbacks)
    if (
        c.dense is not None
        and c.dense.tokens < min(best.tokens, c.json.tokens)
        and (below_original is None or c.dense.tokens < below_original)
    ):
        best = Choice(c.dense.text, c.dense.tokens, "dense", c.fallbacks)
    full = best
    if (
        c.delta is not None
        and c.delta.tokens < policy.delta_ratio * best.tokens
        and (below_original is None or c.delta.tokens < below_original)
    ):
        kind: Decision = "unchanged" if c.unchanged else "delta"
        best = Choice(c.delta.text, c.delta.tokens, kind, c.fallbacks)
    if (
        c.relative is not None
        and c.relative.tokens < best.tokens
        and relative_wins(c.relative.tokens, c.relative_kind, full.tokens, policy)
        and (below_original is None or c.relative.tokens < below_original)
    ):
        best = Choice(c.relative.text, c.relative.tokens, _SINCE[c.relative_kind], c.fallbacks)
    return best


def relative_wins(tokens: int, kind: RelativeKind, full: int, policy: AnswerPolicy) -> bool:
    """Whether a relative answer of ``tokens`` beats a full form of ``full`` tokens: an
    ``@@ unchanged`` answer whenever it is smaller, a patch or an edit when it is under
    ``relative_ratio`` of it (a reader applies those, so they must be clearly smaller).

    >>> relative_wins(11, "unchanged", 12, AnswerPolicy()), relative_wins(11, "patch", 12,
    ...                                                                   AnswerPolicy())
    (True, False)
    """
    ratio = 1.0 if kind == "unchanged" else policy.relative_ratio
    return tokens < ratio * full


def choose_text(
    original: Cost, relative: Form | None, kind: RelativeKind, policy: AnswerPolicy
) -> Choice:
    """The form of a text result (one that is not JSON): the original, or the relative
    answer when :func:`relative_wins`.

    >>> choose_text(Cost(120, 400), Form("@@ unchanged ...", 11, 40), "unchanged",
    ...             AnswerPolicy()).decision
    'since-unchanged'
    >>> choose_text(Cost(120, 400), None, "unchanged", AnswerPolicy()).decision
    'original'
    """
    if relative is not None and relative_wins(relative.tokens, kind, original.tokens, policy):
        return Choice(relative.text, relative.tokens, _SINCE[kind])
    return Choice(None, original.tokens, "original")


_SINCE: Final[dict[RelativeKind, Decision]] = {
    "unchanged": "since-unchanged",
    "patch": "since-patch",
    "edit": "since-edit",
}


def settle(
    candidates: Candidates,
    policy: AnswerPolicy,
    verify: Callable[[Choice], bool] | None = None,
) -> Choice:
    """:func:`choose`, then ``verify`` a winner of :data:`VERIFIED_FORMS`; a winner that fails
    is refused and the next best is chosen (and verified). ``verify=None`` trusts every form.

    Verifying only the winner costs one decode per answer, not one per form.

    >>> c = Candidates(json=Form("[1]", 3, 3), gcf=Form("GCF", 1, 3))
    >>> settle(c, AnswerPolicy(), verify=lambda choice: False).fallbacks
    (Fallback(reason='selfcheck', detail=''),)
    """
    while True:
        choice = choose(candidates, policy)
        if verify is None or choice.decision not in VERIFIED_FORMS or verify(choice):
            return choice
        candidates = candidates.refuse(choice.decision)


# ---------------------------------------------------------------------------------------
# The delta state
# ---------------------------------------------------------------------------------------


class DeltaState:
    """What the client holds for one call (tool and arguments): the keyed set last delivered,
    inside the producer :class:`~gcfkit.keyed.DeltaSession` that diffs against it (§10a.4)
    and counts towards its re-anchor (§10a.8).

    A state is never advanced in place (:func:`advance` returns a new one), so its ``root``,
    the pack root a client echoes, is computed at most once.
    """

    __slots__ = ("_root", "session")

    def __init__(self, session: DeltaSession) -> None:
        self.session = session
        self._root: str | None = None

    @property
    def base(self) -> KeyedSet:
        """The keyed set the client holds."""
        return self.session.base

    @property
    def root(self) -> str:
        """The pack root of :attr:`base` (§10a.3)."""
        if self._root is None:
            self._root = pack_root(self.session.base)
        return self._root

    def __repr__(self) -> str:
        return f"DeltaState({self.session!r})"


@dataclass(frozen=True, slots=True)
class DeltaStep:
    """An update diffed against what the client holds.

    ``wire`` is what the producer session answers (``None`` when there was no base: nothing
    to diff against), ``is_full`` whether that is a full payload (re-anchor or schema change)
    rather than a delta or ``unchanged`` answer; ``before`` is the state diffed against and
    ``after`` the state once the update is delivered.
    """

    wire: str | None
    is_full: bool
    before: DeltaState | None
    after: DeltaState


def advance(
    state: DeltaState | None, update: KeyedSet, start: Callable[[KeyedSet], DeltaSession]
) -> DeltaStep:
    """Diff ``update`` against ``state`` (``start`` makes the session when there is none).

    ``state`` is left as it was: the diff runs on a copy of its session.

    >>> from gcfkit.keyed import FixedN
    >>> start = lambda ks: DeltaSession(ks, reanchor=FixedN(15))
    >>> first = advance(None, KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}]), start)
    >>> first.wire is None
    True
    >>> step = advance(first.after, KeyedSet("id", ["id", "v"], [{"id": 1, "v": 1}]), start)
    >>> step.is_full, is_unchanged(step.wire), step.before is first.after
    (False, False, True)
    >>> list(first.after.base.rows)
    [{'id': 1, 'v': 0}]
    """
    if state is None:
        return DeltaStep(None, True, None, DeltaState(start(update)))
    session = copy.copy(state.session)
    wire, is_full = session.next(update)
    return DeltaStep(wire, is_full, state, DeltaState(session))


def held_after(choice: Choice, step: DeltaStep, policy: AnswerPolicy) -> DeltaState | None:
    """The state the client holds once ``choice`` is delivered (None: nothing to diff
    against next time).

    >>> from gcfkit.keyed import FixedN
    >>> step = advance(None, KeyedSet("id", ["id"], [{"id": 1}]), lambda ks: DeltaSession(ks))
    >>> held_after(Choice("[1]", 3, "json"), step, AnswerPolicy()) is None
    True
    >>> held_after(Choice("[1]", 3, "json"), step, AnswerPolicy(tracks_delivery=True)) is None
    False
    """
    if policy.tracks_delivery or choice.decision in GCF_FORMS:
        return step.after
    return None


def keyed_set(rows: object, key: str, name: str = "rows") -> KeyedSet | None:
    """``rows`` as a keyed set identified by column ``key``, its fields the union of the rows'
    members in first-seen order; None when they are not one (§10a.1: a non-empty list of
    flat objects, each with a unique string or integer ``key``).

    >>> keyed_set([{"id": 1, "a": 0}, {"id": 2, "b": 0}], "id").fields
    ('id', 'a', 'b')
    >>> keyed_set([{"id": 1, "a": {"nested": 0}}], "id") is None
    True
    """
    if not isinstance(rows, list) or not rows:
        return None
    fields: dict[str, None] = {}
    for row in rows:
        if not isinstance(row, dict) or key not in row:
            return None
        fields.update(dict.fromkeys(row))
    try:
        return KeyedSet(key, tuple(fields), rows, name=name)
    except (GCFError, ValueError, TypeError):  # nested values, duplicate identities...
        return None


def is_unchanged(wire: str) -> bool:
    """Whether a delta-session answer is the header-only ``unchanged=true`` one (§10a.4).

    >>> is_unchanged("GCF profile=generic unchanged=true pack_root=sha256:00\\n")
    True
    """
    return parse_header(wire.split("\n", 1)[0]).get("unchanged") == "true"


def delta_rebuilds(base: KeyedSet, wire: str, update: KeyedSet) -> bool:
    """Whether the delta (or ``unchanged`` answer) ``wire`` turns ``base`` into ``update``,
    as a consumer would apply it: same rows by identity, each the same value.

    >>> from gcfkit.keyed import diff, dumps_delta
    >>> a = KeyedSet("id", ["id", "v"], [{"id": 1, "v": 0}])
    >>> b = KeyedSet("id", ["id", "v"], [{"id": 1, "v": 1}])
    >>> delta_rebuilds(a, dumps_delta(diff(a, b)), b), delta_rebuilds(b, dumps_delta(diff(a, b)), b)
    (True, False)
    """
    try:
        if is_unchanged(wire):
            root = pack_root(update)
            head = parse_header(wire.split("\n", 1)[0])
            return pack_root(base) == root and head.get("pack_root") == root
        applied = apply_delta(base, loads_delta(wire))
    except (GCFError, ValueError, TypeError, KeyError):
        return False
    key = update.key
    got = {_identity(r[key]): r for r in applied.rows}
    want = {_identity(r[key]): r for r in update.rows}
    return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)


def _identity(value: object) -> tuple[str, object]:
    # 1 and "1" are different identities.
    return (type(value).__name__, value)


def identity_column(value: object, keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` that makes ``value`` a keyed set (§10a.1), or None: a non-empty
    array of objects where every row has that column, with unique string/integer values.

    >>> rows = [{"id": 1}, {"id": 2}]
    >>> identity_column(rows, ("key", "id")), identity_column(rows + rows, ("id",))
    ('id', None)
    """
    if not isinstance(value, list) or not value or not all(isinstance(r, dict) for r in value):
        return None
    for key in keys:
        seen: set[tuple[str, object]] = set()
        for row in value:
            v = row.get(key)
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                break
            k = _identity(v)
            if k in seen:
                break
            seen.add(k)
        else:
            return key
    return None
