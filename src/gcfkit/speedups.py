"""Which implementation of the generic codec runs: the C accelerator or pure Python.

>>> import gcfkit.speedups
>>> gcfkit.speedups.status() == "C accelerator" or gcfkit.speedups.status().startswith("pure")
True


``gcfkit._speedups`` (built from ``_speedups.c`` when a C compiler is there at install) is
picked at import, as the stdlib ``json`` module picks ``_json``. The pure-Python codec is the
reference: the accelerator answers only for documents it handles exactly as the reference
does and hands everything else back (errors included), so both give the same results.
``GCFKIT_PURE_PYTHON=1`` in the environment forces the pure-Python path.

The codec modules read :data:`accelerator` at each call, so :func:`pure_python` can switch
the accelerator off for a block (tests compare the two paths in one process).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, Final, Protocol

__all__ = ["ENV_VAR", "Speedups", "accelerator", "active", "pure_python", "status"]

#: Set to a non-empty value other than ``0`` to force the pure-Python codec.
ENV_VAR: Final = "GCFKIT_PURE_PYTHON"


class Speedups(Protocol):
    """The interface of ``gcfkit._speedups`` (its stub is ``_speedups.pyi``)."""

    def encode(
        self, value: Any, header: str, flatten: bool, shared_schemas: bool, inline_schemas: bool, /
    ) -> str | None: ...

    def format_number(self, value: Any, /) -> str | None: ...

    def format_scalar(self, value: Any, /) -> str | None: ...

    def decode(self, text: str, /) -> tuple[Any] | None: ...


def _load() -> tuple[Speedups | None, str]:
    if os.environ.get(ENV_VAR, "") not in ("", "0"):
        return None, f"pure Python: {ENV_VAR} is set"
    try:
        # The compiled module (_speedups.c); this is the one place that imports it.
        from . import _speedups
    except ImportError:
        return None, "pure Python: the C accelerator is not built"
    return _speedups, "C accelerator"


_LOADED, _STATUS = _load()
#: The loaded accelerator module, or None when the pure-Python codec runs.
accelerator: Speedups | None = _LOADED


def active() -> bool:
    """True when the C accelerator (``gcfkit._speedups``) serves the generic codec.

    It is False when the extension was not built (no C compiler at install), when
    ``GCFKIT_PURE_PYTHON=1`` is set, and inside :func:`pure_python`. Results are the same
    either way; only the speed differs.

    >>> import gcfkit
    >>> gcfkit.speedups_active() is active()
    True
    """
    return accelerator is not None


def status() -> str:
    """A short description of the active path, for ``gcfkit --version``.

    >>> status() == "C accelerator" or status().startswith("pure Python: ")
    True
    """
    if accelerator is None and _LOADED is not None:
        return "pure Python: switched off"
    return _STATUS


@contextlib.contextmanager
def pure_python() -> Iterator[None]:
    """Run the block on the pure-Python codec (for differential tests and benchmarks).

    Not thread-safe: it switches the module-level choice for every thread.

    >>> import gcfkit
    >>> with pure_python():
    ...     gcfkit.speedups_active()
    False
    """
    global accelerator
    saved = accelerator
    accelerator = None
    try:
        yield
    finally:
        accelerator = saved
