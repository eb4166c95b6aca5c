"""The primer the proxy appends to a server's ``instructions``: how to read GCF.

It is re-read by the model every turn, so it is kept under 60 o200k tokens (a test checks).

>>> append_primer(None) == PRIMER
True
>>> append_primer("Git tools.").startswith("Git tools.\\n\\n")
True
"""

from __future__ import annotations

from typing import Final

__all__ = ["PRIMER", "append_primer"]

PRIMER: Final = (
    "Tool results starting with 'GCF' are lossless compact JSON: "
    "'## name [N]{a,b}' heads N rows of fields a|b; k=v is a member; "
    "- null, ~ absent, ^ value below the row; indent nests."
)


def append_primer(instructions: object) -> str:
    """``instructions`` with the primer appended (or the primer alone when there are none)."""
    if isinstance(instructions, str) and instructions.strip():
        return f"{instructions.rstrip()}\n\n{PRIMER}"
    return PRIMER
