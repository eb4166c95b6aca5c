"""How a reader learns to read what the proxy sends: GCF itself, each dense construct, and
relative answers (``ref=`` / ``_since``), and where that explanation travels.

Two carriers, measured on the corpus in bench/proxy.md (``--primer``):

* ``payload``: each payload carries, as ``# `` comment lines after its header (legal in
  v3.5.3 §11 and in the dense profile, D4.1; every decoder drops them), the sentences of the
  constructs *it* uses, and nothing else. Every reader of a payload (a sub-agent, a context
  compacted since the first result) reads its explanation beside it; a session that never
  receives GCF pays nothing; and the sentences are part of the payload the answer policy
  counts, so GCF is sent only where it pays for its own explanation.
* ``instructions``: every sentence the proxy might need is appended to the server's
  ``instructions`` at ``initialize``, before anything is known about the results: once per
  session, paid by sessions that never see GCF too (today's behaviour; 53 tokens for GCF).

How to *ask* for a relative answer (``_since``) has to be known before the repeated call:
:data:`RELATIVE_PRIMER` goes into ``instructions`` whenever relative answers are on, in both
modes; an answer itself says what it is on its ``@@`` line. The first result a session names
is also before the repeat, and would spare the sessions never shown a ``ref=`` (2 of 7 on
the corpus, 112 tokens), but a compacting client may drop a tool result while it keeps the
handle, and ``gcfkit doctor`` recognises the proxy by the sentence in ``instructions``.

>>> annotate("GCF profile=generic\\n## r [1]{a}\\n1\\n", ("gcf",)).splitlines()[1][:9]
'# GCF is '
>>> append_primer(None, ()) == ""
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

__all__ = [
    "CONSTRUCTS",
    "NOTES",
    "PRIMER",
    "PRIMER_MODES",
    "RELATIVE_PRIMER",
    "PrimerMode",
    "annotate",
    "append_primer",
    "append_relative_primer",
    "notes_for",
]

#: Where the explanation travels (see the module docstring); ``off`` sends none.
PrimerMode = Literal["payload", "instructions", "off"]
PRIMER_MODES: Final[tuple[PrimerMode, ...]] = ("payload", "instructions", "off")

#: What a payload can use that a reader must be told about: GCF v3.5.3 itself, then the dense
#: profile's constructs (docs/extensions/dense.md), in the order they are explained.
CONSTRUCTS: Final = ("gcf", "dense", "defs", "lists", "constants", "short_rows")

#: One sentence per construct, each kept short: it is read wherever the construct is.
NOTES: Final[dict[str, str]] = {
    "gcf": (
        "GCF is lossless JSON: ## name [N]{a,b} heads N rows a|b; k=v is a member; - null; "
        "~ absent; ^ value on the lines below."
    ),
    "dense": "dense adds:",
    "defs": "$x is the text of line $x=...;",
    "lists": "a cell [N]: a,b is a list;",
    "constants": "a header field f=v is in every row;",
    "short_rows": "a short row leaves its last fields absent.",
}

#: The instructions form of the GCF sentence (53 o200k tokens; kept for ``instructions``).
PRIMER: Final = (
    "Tool results starting with 'GCF' are lossless compact JSON: "
    "'## name [N]{a,b}' heads N rows of fields a|b; k=v is a member; "
    "- null, ~ absent, ^ value below the row; indent nests."
)


#: How to ask for a relative answer, and how to read one (docs/extensions/relative-answers.md):
#: 56 o200k and cl100k tokens (the sentence before was 68). A patch's rows are not spelled
#: out: its own table header names them (``## [N]{op,path,value}``).
RELATIVE_PRIMER: Final = (
    'Repeat a call whose result you hold as ref=N with "_since":"N": @@ unchanged (still N), '
    "@@ patch (apply its rows to N) or @@ edit (=A-B: lines A-B of N; +x: new line x), else "
    "the full result."
)


def notes_for(constructs: Iterable[str], *, base: bool = True) -> list[str]:
    """The sentences a payload using ``constructs`` needs, in :data:`CONSTRUCTS` order (a
    dense construct brings the ``dense`` lead-in, and GCF's own sentence unless ``base`` is
    False: a reader that asked for GCF knows it).

    >>> notes_for(["lists"])[1:]
    ['dense adds:', 'a cell [N]: a,b is a list;']
    """
    used = set(constructs)
    if used - {"gcf"}:
        used |= {"gcf", "dense"}
    if not base:
        used.discard("gcf")
    return [NOTES[c] for c in CONSTRUCTS if c in used]


def annotate(payload: str, constructs: Iterable[str], *, base: bool = True) -> str:
    """``payload`` with the sentences of ``constructs`` as one ``# `` comment line after its
    header (a comment is one line of printable text: the sentences hold no line break).

    >>> lines = annotate("GCF profile=dense\\n## r [1]{a}\\n[1]: x\\n", ["lists"]).splitlines()
    >>> lines[0], lines[1][:20], lines[1].endswith("a cell [N]: a,b is a list;"), lines[2]
    ('GCF profile=dense', '# GCF is lossless JS', True, '## r [1]{a}')
    """
    notes = notes_for(constructs, base=base)
    if not notes:
        return payload
    head, nl, rest = payload.partition("\n")
    return f"{head}\n# {' '.join(notes)}\n{rest}" if nl else f"{head}\n# {' '.join(notes)}\n"


def _append(instructions: object, text: str) -> str:
    if not text:
        return instructions if isinstance(instructions, str) else ""
    if isinstance(instructions, str) and instructions.strip():
        return f"{instructions.rstrip()}\n\n{text}"
    return text


def append_primer(instructions: object, constructs: Iterable[str] = ("gcf",)) -> str:
    """``instructions`` with the sentences for ``constructs`` appended (the ``instructions``
    carrier): :data:`PRIMER` for GCF, then the dense sentences.

    >>> append_primer("Git tools.").startswith("Git tools.\\n\\nTool results starting")
    True
    """
    notes = notes_for(constructs)
    text = " ".join([PRIMER, *notes[1:]]) if notes else ""
    return _append(instructions, text)


def append_relative_primer(instructions: object) -> str:
    """``instructions`` with :data:`RELATIVE_PRIMER` appended.

    >>> append_relative_primer("Hi.").endswith("new line x), else the full result.")
    True
    """
    return _append(instructions, RELATIVE_PRIMER)
