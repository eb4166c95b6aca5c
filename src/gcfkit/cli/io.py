"""The command line's own I/O: input bytes from FILE or stdin, UTF-8 text to stdout."""

from __future__ import annotations

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
