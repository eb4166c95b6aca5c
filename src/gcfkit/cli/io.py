"""The command line's own I/O: input bytes from FILE or stdin, UTF-8 text to stdout, and text
made safe to show on a terminal."""

from __future__ import annotations

import re
import sys

from ..errors import ConfigError


def read_input(path: str | None) -> bytes:
    """The bytes of FILE, or of stdin when FILE is absent or ``-``."""
    if path is None or path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError("io_error", f"cannot read {path}: {e.strerror}") from None


def write_text(text: str) -> None:
    """Write ``text`` to stdout as UTF-8, whatever the locale says, and flush."""
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


# C0 and C1 controls (ESC starts terminal escape sequences), DEL, the bidirectional
# overrides and isolates that reorder what is shown (CVE-2021-42574), and lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to show on a terminal: every control character, bidirectional override
    and lone surrogate becomes a visible ``\\xNN`` / ``\\uNNNN`` escape (spec §17: values a
    server chose are sanitised before display). Markup is the renderer's business: pass the
    result to ``rich`` as ``Text``, never as a markup string.

    ``keep`` lists characters to leave as they are (``"\\n"`` for multi-line text).

    >>> printable("git\\x1b[2J") == "git\\\\x1b[2J", printable("ok [/bold]")
    (True, 'ok [/bold]')
    """
    if text.isprintable():
        return text
    if keep:
        return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
