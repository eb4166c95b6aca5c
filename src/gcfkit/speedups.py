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
import gc
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Protocol

__all__ = [
    "ENV_VAR",
    "Refused",
    "Speedups",
    "accelerator",
    "active",
    "decode",
    "decode_dense",
    "dense_estimate",
    "encode",
    "encode_dense",
    "json_hooks",
    "minify_json",
    "occurrences",
    "pure_python",
    "same_value",
    "spelling",
    "status",
    "table_cells",
    "token_features",
    "utf8_len",
]

#: Set to a non-empty value other than ``0`` to force the pure-Python codec.
ENV_VAR: Final = "GCFKIT_PURE_PYTHON"


class Speedups(Protocol):
    """The interface of ``gcfkit._speedups`` (its stub is ``_speedups.pyi``)."""

    def encode(
        self, value: Any, header: str, flatten: bool, shared_schemas: bool, inline_schemas: bool, /
    ) -> str | None: ...

    def encode_dense(
        self,
        value: Any,
        header: str,
        defs: dict[str, str],
        lists: bool,
        constants: bool,
        short_rows: bool,
        /,
    ) -> tuple[str, int] | None: ...

    def decode_dense(self, text: str, header: str, /) -> tuple[Any] | None: ...

    def same_value(self, a: Any, b: Any, /) -> bool | None: ...

    def table_cells(self, value: Any, stop: int | None = None, /) -> int | None: ...

    def utf8_len(self, text: str, /) -> int: ...

    def text_spans(self, line: str, /) -> list[tuple[int, int]] | None: ...

    def token_features(self, text: str, /) -> tuple[int, int, int, int, int, int, int]: ...

    def dense_estimate(self, text: str, /) -> int: ...

    def spelling(self, s: str, /) -> str | None: ...

    def minify_json(self, text: str, /) -> str | None: ...

    def json_pairs(self, pairs: list[tuple[str, Any]], /) -> dict[str, Any]: ...

    def json_float(self, text: str, /) -> float: ...

    def occurrences(self, value: Any, /) -> dict[str, int] | None: ...

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


class _NotLoaded(Exception):
    """Never raised: the stand-in for :data:`Refused` without the accelerator."""


#: What the accelerator's JSON hooks (:func:`json_hooks`) raise, with ``(code, message)``
#: as its arguments; :func:`gcfkit.jsonio.loads_json` raises the matching ``GCFError``.
Refused: type[Exception] = getattr(_LOADED, "Refused", _NotLoaded)


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


def encode(
    value: Any, header: str, flatten: bool, shared_schemas: bool, inline_schemas: bool
) -> str | None:
    """The accelerator's canonical text for ``value`` (``header`` first), or None: no
    accelerator, or it leaves the value (errors included) to the pure-Python encoder, which
    then encodes it from the start.

    >>> text = encode([1, 2], "GCF profile=generic", True, True, True)
    >>> text is None or text == "GCF profile=generic\\n## [2]: 1,2\\n"
    True
    """
    accel = accelerator
    if accel is None:
        return None
    return accel.encode(value, header, flatten, shared_schemas, inline_schemas)


#: The dense constructs, as the accelerator's bits say which ones an encode used.
_USED_BITS: Final = (("defs", 1), ("lists", 2), ("constants", 4), ("short_rows", 8))


def encode_dense(
    value: Any,
    header: str,
    defs: Mapping[str, str],
    lists: bool,
    constants: bool,
    short_rows: bool,
) -> tuple[str, set[str]] | None:
    """The accelerator's dense payload of ``value`` (``header`` first, then the definition
    lines of ``defs``: string -> name, in name order) and the constructs it used, or None:
    no accelerator, or it leaves the value (errors included) to the pure-Python encoder.

    >>> got = encode_dense({"t": [1]}, "GCF profile=dense", {}, True, True, True)
    >>> got is None or got == ("GCF profile=dense\\nt[1]: 1\\n", set())
    True
    """
    accel = accelerator
    if accel is None or type(defs) is not dict:  # another mapping: the reference's
        return None
    got = accel.encode_dense(value, header, defs, lists, constants, short_rows)
    if got is None:
        return None
    text, bits = got
    return text, {name for name, bit in _USED_BITS if bits & bit}


def decode_dense(text: str, header: str, reference: Callable[[str], Any]) -> Any:
    """The value of the dense payload ``text`` whose header line, without fields, is
    ``header``: the accelerator's when it reads it, else ``reference(text)``. The cyclic GC
    is paused meanwhile, as in :func:`decode`.

    >>> from gcfkit import dense
    >>> decode_dense("GCF profile=dense\\n$a=x y z\\nv=$a\\n", "GCF profile=dense", dense.loads)
    {'v': 'x y z'}
    """
    return _paused(lambda: _decode_dense(text, header, reference))


def _decode_dense(text: str, header: str, reference: Callable[[str], Any]) -> Any:
    accel = accelerator
    if accel is not None:
        got = accel.decode_dense(text, header)
        if got is not None:
            return got[0]
    return reference(text)


def _paused(run: Callable[[], Any]) -> Any:
    if not gc.isenabled():
        return run()
    gc.disable()
    try:
        return run()
    finally:
        gc.enable()


def decode(text: str, reference: Callable[[str], Any]) -> Any:
    """The value of the generic payload ``text``: the accelerator's when it reads it, else
    ``reference(text)`` (the pure-Python decoder, which reports every error).

    The cyclic GC is paused meanwhile: a decoded tree holds no reference cycles, so the GC
    has nothing to find in it, and left on it would rescan the growing tree every few
    hundred containers (about a fifth of the time on large tables). A caller's own choice
    (GC already off) is left alone, and the GC runs again afterwards.

    >>> decode("GCF profile=generic\\nx=1\\n", lambda t: "reference")
    {'x': 1}
    """
    return _paused(lambda: _decode(text, reference))


def _decode(text: str, reference: Callable[[str], Any]) -> Any:
    accel = accelerator
    if accel is not None:
        got = accel.decode(text)
        if got is not None:
            return got[0]
    return reference(text)


def json_hooks() -> tuple[Callable[[Any], Any], Callable[[str], float]] | None:
    """The accelerator's ``object_pairs_hook`` (a duplicate key refused) and ``parse_float``
    (an overflow refused) for :func:`json.loads`, or None without the accelerator. They
    raise :class:`Refused`.

    >>> import json
    >>> hooks = json_hooks()
    >>> hooks is None or json.loads('{"a": 1.5}', object_pairs_hook=hooks[0]) == {"a": 1.5}
    True
    """
    loaded = _LOADED
    if loaded is None:
        return None
    return loaded.json_pairs, loaded.json_float


def occurrences(value: Any) -> dict[str, int] | None:
    """Each string in a value position of ``value`` counted, in first-seen order (the dense
    profile's D9.2 step 1, ``generic.definitions``), or None: no accelerator, or a value
    outside the plain JSON model, which the Python walk then counts.

    >>> occurrences({"a": ["x", "y", "x"], "b": 1}) in ({"x": 2, "y": 1}, None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.occurrences(value)


def same_value(a: Any, b: Any) -> bool | None:
    """:func:`gcfkit.jsonio.same_value` of ``a`` and ``b`` (key order kept, numbers by
    value) in one pass in C, or None: no accelerator, or a value of a type outside the
    plain JSON model (subclasses included), which the Python walk then decides.

    >>> same_value({"n": [25, True]}, {"n": (25.0, True)}) in (True, None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.same_value(a, b)


def table_cells(value: Any, stop: int | None) -> int | None:
    """:func:`gcfkit.proxy.rewrite.gcf_cells` (the table cells GCF would write for
    ``value``, counted until past ``stop``) in C, the same walk in the same order; None
    without the accelerator.

    >>> table_cells([{"a": 1}, {"b": 2}], None) in (4, None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.table_cells(value, stop)


def utf8_len(text: str) -> int | None:
    """The UTF-8 size of ``text`` (lone surrogates 3 bytes each, as ``surrogatepass``
    encodes them) counted in C without encoding a copy, or None without the accelerator.

    >>> utf8_len("é€😀") in (9, None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.utf8_len(text)


def token_features(text: str) -> tuple[int, int, int, int, int, int, int] | None:
    """:func:`gcfkit.tokens.estimate`'s seven feature counts of ``text`` (whitespace runs,
    their characters, words, word characters, digit groups, punctuation, non-ASCII
    characters) counted in C, or None without the accelerator.

    >>> token_features("ab  12345 é") in ((1, 2, 1, 2, 2, 0, 1), None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.token_features(text)


def dense_estimate(text: str) -> int | None:
    """The dense profile's D9.3 token estimate of ``text``
    (:func:`gcfkit.generic.definitions.estimate`) in C, or None without the accelerator.

    >>> dense_estimate("|$a|") in (4, None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.dense_estimate(text)


def spelling(s: str) -> str | None:
    """:func:`gcfkit.generic.definitions.spelling` of ``s`` (the wire spelling of a string
    as a dense row cell) in C, or None: no accelerator, or the reference decides (a ``str``
    subclass, a lone surrogate: its error).

    >>> spelling("$5") in ('"$5"', None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.spelling(s)


def minify_json(text: str) -> str | None:
    """:func:`gcfkit.jsonio.dumps_compact` of ``loads_json(text)`` written from ``text`` in C
    (for a text :func:`~gcfkit.jsonio.loads_json` accepts), or None: no accelerator, or a
    text it leaves to the dump.

    >>> minify_json('{"a": [1, 2.50]}') in ('{"a":[1,2.5]}', None)
    True
    """
    accel = accelerator
    return None if accel is None else accel.minify_json(text)


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
