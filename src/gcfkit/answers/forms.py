"""The full GCF forms of one value: GCF v3.5.3 and the dense profile (docs/extensions/dense.md),
each with the explanation its reader needs, and the check that it decodes back.

:class:`FullForms` is used by the proxy (:class:`~gcfkit.proxy.rewrite.Rewriter`, which counts
them as cheaply as it can) and by the server helpers (:mod:`gcfkit.mcp.server`,
:func:`full_candidates`), so both send the same forms, chosen by the one answer policy
(:mod:`gcfkit.answers.choose`):

* the dense form is built when the codec has the profile (``gcfkit.dense``) and constructs are
  enabled; the v3.5.3 form too, except on a value of :data:`GENERIC_SKIP_BYTES` or more whose
  dense form uses a construct: a dense payload writes what v3.5.3 writes with each construct
  only where it saves tokens, so there the v3.5.3 form cannot catch up (its explanation
  aside, at most 44 tokens shorter), and building it would cost a third of the encoding time;
  it is built after all if the dense form fails its check;
* with the ``payload`` primer each form carries, as a ``# `` comment line after its header,
  the sentences of what it uses (:func:`gcfkit.answers.primer.annotate`): part of the form,
  counted with it;
* :meth:`FullForms.verified` decodes a form and compares it with the value (type-strict, key
  order kept), or for a Python literal checks that it renders back to the exact text.

>>> from gcfkit.proxy.config import Codec
>>> forms = FullForms(Codec(dense_encode=None, dense_loads=None), primer="off")
>>> [(t.kind, t.text) for t in forms.texts([{"id": 1}, {"id": 2}], [])]
[('gcf', 'GCF profile=generic\\n## [2]{id}\\n1\\n2\\n')]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..errors import GCFError
from ..jsonio import decodes_to, dumps_compact
from .choose import Candidates, Fallback, Form, utf8_len
from .codec import Codec
from .estimates import NeedsExactCounts
from .primer import PrimerMode, annotate
from .pyliteral import renders

__all__ = ["GENERIC_SKIP_BYTES", "FullForms", "Text", "full_candidates"]

#: From this size of compact JSON on, a value whose dense form uses a construct gets no
#: v3.5.3 form unless the dense one fails its check (see the module docstring).
GENERIC_SKIP_BYTES: Final = 16 * 1024

_ENCODE_ERRORS: Final = (GCFError, RecursionError, ValueError, TypeError)


@dataclass(frozen=True, slots=True)
class Text:
    """One full form: ``kind`` (``gcf`` or ``dense``, the answer policy's decision), its
    text (explanation included) and the dense constructs it uses."""

    kind: str
    text: str
    constructs: tuple[str, ...] = ()


class FullForms:
    """Builds and checks the full GCF forms of values (see the module docstring).

    ``count``: the exact count dense definitions are chosen with (D9.2: the tokenizer's own
    choice; None: the profile's estimate); ``dense``: the dense constructs that may be used
    (empty, or a codec without the profile: none); ``primer``: ``payload`` explains each form
    in it; ``explain_gcf=False`` explains only the dense constructs (a reader that asked for
    GCF knows GCF itself)."""

    def __init__(
        self,
        codec: Codec,
        *,
        count: Callable[[str], int] | None = None,
        dense: tuple[str, ...] = (),
        primer: PrimerMode = "payload",
        explain_gcf: bool = True,
    ) -> None:
        self._codec = codec
        self._count = count
        self.dense = dense if codec.dense_encode is not None else ()
        self._primer = primer
        self._explain_gcf = explain_gcf

    def texts(self, value: Any, fallbacks: list[Fallback], *, compact_size: int = 0) -> list[Text]:
        """The full forms of ``value`` (refusals are added to ``fallbacks``), dense first.

        A count that raises :class:`~gcfkit.answers.estimates.NeedsExactCounts` (estimate
        mode: dense definitions are chosen by exact counts, D9.2) raises it from here."""
        out: list[Text] = []
        made = self._dense(value, fallbacks)
        if made is not None:
            out.append(made)
        if not (made is not None and made.constructs and compact_size >= GENERIC_SKIP_BYTES):
            generic = self.generic(value, fallbacks)
            if generic is not None:
                out.append(generic)
        return out

    def skipped_generic(self, forms: list[Text]) -> bool:
        """Whether :meth:`texts` left the v3.5.3 form out of ``forms``."""
        return not any(f.kind == "gcf" for f in forms)

    def generic(self, value: Any, fallbacks: list[Fallback]) -> Text | None:
        """The v3.5.3 form, or None (the refusal in ``fallbacks``)."""
        try:
            text = self._codec.dumps(value)
        except _ENCODE_ERRORS as e:
            fallbacks.append(Fallback("encode", getattr(e, "code", type(e).__name__)))
            return None
        return Text("gcf", self._explained(text, ("gcf",)), ("gcf",))

    def _dense(self, value: Any, fallbacks: list[Fallback]) -> Text | None:
        encode = self._codec.dense_encode
        if not self.dense or encode is None:
            return None
        on = set(self.dense)
        flags = {c: c in on for c in ("defs", "lists", "constants", "short_rows")}
        try:
            encoded = encode(value, count=self._count, **flags)
        except NeedsExactCounts:
            raise  # (estimate mode: not a failure of the form, a question for exact counts)
        except Exception as e:  # an extension's failure must not cost the v3.5.3 form
            fallbacks.append(Fallback("encode", getattr(e, "code", type(e).__name__)))
            return None
        used = tuple(encoded.constructs)
        return Text("dense", self._explained(encoded.text, ("dense", *used)), used)

    def _explained(self, payload: str, constructs: tuple[str, ...]) -> str:
        if self._primer != "payload":
            return payload
        return annotate(payload, constructs, base=self._explain_gcf)

    def verified(self, form: Text, value: Any, compact: str, literal: str | None = None) -> bool:
        """Whether ``form`` decodes to ``value`` (with ``literal``, the Python literal the
        value was read from: whether it renders back to that exact text)."""
        loads = self._codec.loads if form.kind == "gcf" else self._codec.dense_loads
        if loads is None:
            return False
        try:
            decoded = loads(form.text)
            if literal is not None:
                return renders(decoded, literal)
            return decodes_to(decoded, value, compact)
        except Exception:  # a decoder failing in any way is a failed check, not a crash
            return False


def full_candidates(
    value: Any, forms: FullForms, count: Callable[[str], int], *, selfcheck: bool = True
) -> tuple[Candidates, tuple[str, ...]]:
    """The candidates of ``value`` with every form counted in full (the server helpers: no
    original text to race against), each GCF form checked before it is one; and the dense
    constructs of the dense form, if it is one.

    >>> from gcfkit.proxy.config import Codec
    >>> forms = FullForms(Codec(dense_encode=None, dense_loads=None), primer="off")
    >>> c, _ = full_candidates([{"id": i} for i in range(9)], forms, len)
    >>> c.gcf is not None and c.gcf.tokens < c.json.tokens
    True
    """
    compact = dumps_compact(value)
    fallbacks: list[Fallback] = []
    made = forms.texts(value, fallbacks, compact_size=utf8_len(compact))
    kept: dict[str, Form] = {}
    constructs: tuple[str, ...] = ()
    for form in made:
        if selfcheck and not forms.verified(form, value, compact):
            fallbacks.append(Fallback("selfcheck"))
            if form.kind == "dense" and forms.skipped_generic(made):
                generic = forms.generic(value, fallbacks)
                if generic is not None and forms.verified(generic, value, compact):
                    kept["gcf"] = Form.of(generic.text, count)
            continue
        kept[form.kind] = Form.of(form.text, count)
        if form.kind == "dense":
            constructs = form.constructs
    candidates = Candidates(
        json=Form.of(compact, count),
        gcf=kept.get("gcf"),
        dense=kept.get("dense"),
        fallbacks=tuple(fallbacks),
    )
    return candidates, constructs if "dense" in kept else ()
