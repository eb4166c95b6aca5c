"""Estimate mode's choice for one value (:mod:`gcfkit.answers.estimates`): the form exact
counts would choose, or :class:`~gcfkit.answers.estimates.NeedsExactCounts` where estimates
cannot tell. :class:`~gcfkit.proxy.rewrite.Rewriter` calls it in estimate mode instead of
counting exactly, for a value that has no delta or relative answer to weigh.

>>> import json
>>> from gcfkit.answers.choose import AnswerPolicy
>>> from gcfkit.answers.codec import Codec
>>> from gcfkit.answers.forms import FullForms
>>> from gcfkit.jsonio import dumps_compact
>>> from gcfkit.tokens import estimate
>>> rows = [{"id": i, "ok": i % 2 == 0} for i in range(20)]
>>> forms = FullForms(Codec(), count=needs_exact_count, primer="off")
>>> choice, before, plain, size = estimated_choice(
...     rows, dumps_compact(rows), [json.dumps(rows, indent=2)], gcf=True, count=estimate,
...     forms=forms, selfcheck=True, literal=None, answers=AnswerPolicy(), check=lambda: None)
>>> choice.decision, choice.text.splitlines()[:2]
('gcf', ['GCF profile=generic', '## [20]{id,ok}'])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..answers.choose import (
    AnswerPolicy,
    Candidates,
    Choice,
    Cost,
    Fallback,
    Form,
    choose,
    utf8_len,
)
from ..answers.estimates import NeedsExactCounts, close, decide, weighed
from ..answers.forms import FullForms, Text
from .counts import DENSE_CELLS_PER_BYTE, TOKENS_PER_CELL, gcf_cells, needs_exact_count

__all__ = ["estimated_choice", "needs_exact_count"]


def estimated_choice(
    value: Any,
    compact: str,
    original: list[str],
    *,
    gcf: bool,
    count: Callable[[str], int],
    forms: FullForms,
    selfcheck: bool,
    literal: str | None,
    answers: AnswerPolicy,
    check: Callable[[], None],
    built: list[Text] | None = None,
) -> tuple[Choice, Cost, int, int]:
    """The choice for ``value`` (``compact``: its compact JSON; ``original``: the texts the
    tool wrote) from the estimates of ``count``, what the original costs by estimate, the
    estimate of the cheaper plain form and the compact JSON's bytes. ``gcf``: GCF forms may
    be sent (built by ``forms``, whose count raises for dense definitions); ``literal``:
    the Python literal a GCF form must render back to; ``check``: the deadline.

    Every form the winner is compared with must be clearly dearer
    (:func:`~gcfkit.answers.estimates.close`), else it raises. With ``selfcheck`` it verifies
    what the exact path would (the winner, and a GCF form counted before it, shorter, that
    may beat the plain forms); a failed check is left to the exact path, which says which
    form fell back. The choice carries estimates: the ledger counts its text later.
    ``built``: the forms made are added to it (a caller that goes on to count exactly after
    a close call needs not make them again).
    """
    json_size = utf8_len(compact)
    same = len(original) == 1 and compact == original[0]
    json_tokens: int | None = None
    refused: list[Fallback] = []
    made: list[Text] = []
    if gcf:
        cells = gcf_cells(value, stop=int(json_size / TOKENS_PER_CELL))
        build = cells <= json_size * DENSE_CELLS_PER_BYTE
        if not build:
            json_tokens = weighed(count(compact), "json")
            build = decide(cells * TOKENS_PER_CELL, json_tokens)
        if build:
            made = forms.texts(value, refused, compact_size=json_size)
            if built is not None and not refused:
                built.extend(made)
    if refused:
        raise NeedsExactCounts("a form that could not be encoded")
    check()
    if json_tokens is None:
        json_tokens = weighed(count(compact), "json")
    json_form = Form(compact, json_tokens, json_size)
    # (The same text is weighed as what it is, compact JSON, whichever is counted.)
    original_tokens = json_tokens if same else weighed(sum(count(t) for t in original), "original")
    before = Cost(original_tokens, sum(utf8_len(t) for t in original))
    weighed_forms = [
        (t, Form(t.text, weighed(count(t.text), t.kind), utf8_len(t.text))) for t in made
    ]
    by_kind = {t.kind: form for t, form in weighed_forms}
    candidates = Candidates(
        json=json_form, original=before, gcf=by_kind.get("gcf"), dense=by_kind.get("dense")
    )
    choice = choose(candidates, answers)
    rivals = {kind: form.tokens for kind, form in by_kind.items()}
    rivals["json"] = json_form.tokens
    if not same:  # (the same text: the original, whichever is counted)
        rivals["original"] = before.tokens
    rivals.pop(choice.decision, None)
    if same and choice.decision == "original":
        rivals.pop("json")
    for kind, tokens in rivals.items():
        if close(choice.tokens, tokens, (choice.decision, kind)):
            raise NeedsExactCounts(
                f"a close call ({choice.decision} {choice.tokens} vs {kind} {tokens}"
                " estimated tokens)"
            )
    if selfcheck and choice.decision in ("gcf", "dense"):
        winner = next(t for t, form in weighed_forms if form.text == choice.text)
        plain = min(json_form.tokens, before.tokens)
        for t, form in weighed_forms:
            if t is winner or len(t.text) > len(winner.text) or form.tokens > plain:
                continue  # not counted first, or clearly losing to a plain form
            if not forms.verified(t, value, compact, literal):
                raise NeedsExactCounts("a form counted first may fail its check")
        if not forms.verified(winner, value, compact, literal):
            raise NeedsExactCounts("the winner failed its check")
        check()
    return choice, before, min(json_form.tokens, before.tokens), json_size
