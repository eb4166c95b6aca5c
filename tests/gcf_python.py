"""What gcf-python (the reference implementation, a test dependency) makes of a payload.

``rejects_at_line_1``: both of its decoders, the graph decoder (``gcf.decode``) and the
generic one (``gcf.decode_generic``), reject the payload at its header line. Their errors
name no line, so "at line 1" is checked as: the header line alone fails with the same
message as the whole payload, and that message is the decoder's header error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Each decoder and how its header error begins.
_HEADER_ERRORS: dict[str, str] = {
    "decode": "invalid header",
    "decode_generic": "missing_header",
}


def decoders() -> list[tuple[str, Callable[[str], Any]]]:
    gcf = pytest.importorskip("gcf")
    return [(name, getattr(gcf, name)) for name in _HEADER_ERRORS]


def rejects_at_line_1(text: str) -> None:
    """Both gcf-python decoders reject ``text`` at its header line (line 1)."""
    head = text.split("\n", 1)[0] + "\n"
    for name, decode in decoders():
        with pytest.raises(Exception) as whole:
            decode(text)
        with pytest.raises(Exception) as alone:
            decode(head)
        message = str(whole.value)
        assert message == str(alone.value), (name, text[:80], message)
        assert message.startswith(_HEADER_ERRORS[name]), (name, text[:80], message)
