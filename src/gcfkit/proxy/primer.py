"""The primer the proxy appends to a server's ``instructions``: how to read GCF, and (with
relative answers on) how to ask for one.

It is re-read by the model every turn, so each part is kept under 70 o200k tokens (a test
checks). Instructions are the cheapest carrier that reaches the agent: once per session,
against a schema property on every tool (bench/relative.md measures both); a reader that
never sees them never passes ``_since``, and simply gets full results.

>>> append_primer(None) == PRIMER
True
>>> append_primer("Git tools.").startswith("Git tools.\\n\\n")
True
"""

from __future__ import annotations

from typing import Final

__all__ = ["PRIMER", "RELATIVE_PRIMER", "append_primer", "append_relative_primer"]

PRIMER: Final = (
    "Tool results starting with 'GCF' are lossless compact JSON: "
    "'## name [N]{a,b}' heads N rows of fields a|b; k=v is a member; "
    "- null, ~ absent, ^ value below the row; indent nests."
)


#: How to ask for a relative answer, and how to read one (docs/extensions/relative-answers.md).
RELATIVE_PRIMER: Final = (
    'To repeat a call whose result you still hold as ref=N, add "_since":"N": the reply is '
    "the full result, or @@ unchanged (N is current), @@ patch (op|path|value rows to apply "
    "to N), or @@ edit (=A-B: lines A-B of N; +x: new line x)."
)


def _append(instructions: object, text: str) -> str:
    if isinstance(instructions, str) and instructions.strip():
        return f"{instructions.rstrip()}\n\n{text}"
    return text


def append_primer(instructions: object) -> str:
    """``instructions`` with the primer appended (or the primer alone when there are none)."""
    return _append(instructions, PRIMER)


def append_relative_primer(instructions: object) -> str:
    """``instructions`` with :data:`RELATIVE_PRIMER` appended.

    >>> append_relative_primer("Hi.").endswith("+x: new line x).")
    True
    """
    return _append(instructions, RELATIVE_PRIMER)
