"""Relative answers: results named by a handle, answered relative to one the reader holds.

The codec side of docs/extensions/relative-answers.md. A producer names each result it
delivers with a handle (``ref=482913`` in a GCF header, or an extra ``ref=482913`` text
block beside a text result) and remembers it (:class:`ResultMemory`). A later call of the
same tool with the same arguments that passes ``"_since": "482913"`` may then be answered:

* ``@@ unchanged``: the held result is still the result;
* ``@@ patch``: operations on the held JSON value, records named by identity
  (``entities[name=X].observations``), never by a position or a hash;
* ``@@ edit``: the new text as kept line ranges of the held text, each with quoted anchors
  the reader can find, and added lines.

An answer starts with ``@@``, which no GCF payload can, so no v3.5.3 decoder takes it for a
value. :func:`loads` is the explicit entry point; :func:`gcfkit.decode`
recognises answers too. :class:`Reader` is a consumer that holds results and applies answers.

>>> held = {"entities": [{"name": "gcf-python", "observations": ["version 2.5.0"]}]}
>>> new = {"entities": [{"name": "gcf-python", "observations": ["version 2.5.0", "tagged"]}]}
>>> wire = json_answer(held, new, tool="read_graph", since="482913", ref="771204")
>>> print(wire, end="")
@@ patch tool=read_graph since=482913 ref=771204
## [1]{op,path,value}
append|entities[name=gcf-python].observations|tagged
>>> reader = Reader()
>>> reader.hold("482913", held)
>>> reader.read(wire) == new, reader.holds("771204")
(True, True)
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import GCFError
from ..header import dense_header, first_line
from .memory import DEFAULT_MAX_BYTES, DEFAULT_MAX_RESULTS, Held, ResultMemory
from .patch import IDENTITY_KEYS, NO_VALUE, OPS, Op, apply, diff, same
from .path import Element, Member, Path, Select, format_path, parse_path
from .textdiff import Add, Keep, TextEdit, apply_text, diff_text
from .wire import (
    KINDS,
    Answer,
    Edit,
    Patch,
    Unchanged,
    dumps_edit,
    dumps_patch,
    dumps_unchanged,
    is_answer,
    is_handle,
    json_answer,
    loads,
    ref_block,
    ref_of,
    stamp_ref,
    text_answer,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RESULTS",
    "IDENTITY_KEYS",
    "KINDS",
    "NO_VALUE",
    "OPS",
    "Add",
    "Answer",
    "Edit",
    "Element",
    "Held",
    "Keep",
    "Member",
    "Op",
    "Patch",
    "Path",
    "Reader",
    "ResultMemory",
    "Select",
    "TextEdit",
    "Unchanged",
    "apply",
    "apply_text",
    "diff",
    "diff_text",
    "dumps_edit",
    "dumps_patch",
    "dumps_unchanged",
    "format_path",
    "is_answer",
    "is_handle",
    "json_answer",
    "loads",
    "parse_path",
    "ref_block",
    "ref_of",
    "same",
    "stamp_ref",
    "text_answer",
]


class Reader:
    """A consumer of relative answers: it holds results by handle and applies answers.

    What a well-behaved client of a producer does, for tests and benchmarks: :meth:`read`
    decodes a full GCF result (holding it when it names itself) or resolves an answer
    against the result it names; :meth:`hold` takes a result it received in another form
    (compact JSON, a text with a ``ref=`` block). An answer naming a result this reader
    does not hold is ``unresolved_reference``: the reader never guesses.

    >>> r = Reader()
    >>> r.read("GCF profile=generic ref=482913\\n## [2]: a,b\\n")
    ['a', 'b']
    >>> r.read("@@ unchanged tool=t since=482913\\n")
    ['a', 'b']
    >>> r.read("@@ unchanged tool=t since=111111\\n")
    Traceback (most recent call last):
    gcfkit.errors.GCFError: error[unresolved_reference]: ... not held by this reader
    """

    def __init__(self) -> None:
        self._held: dict[str, tuple[bool, Any]] = {}  # handle -> (is a text, value)

    def hold(self, handle: str, value: Any, *, text: bool = False) -> None:
        """Hold ``value`` as ``handle``: a JSON value, or with ``text`` a text result."""
        if text and not isinstance(value, str):
            raise TypeError("a text result is a str")
        self._held[handle] = (text, value)

    def holds(self, handle: str) -> bool:
        """True when this reader holds a result named ``handle``."""
        return handle in self._held

    def forget(self, handle: str) -> None:
        """Drop a held result (a client that compacted its context)."""
        self._held.pop(handle, None)

    def read(self, payload: str | bytes) -> Any:
        """The value (or text) a GCF payload stands for, holding it under its ``ref=``."""
        if is_answer(payload):
            return self.resolve(loads(payload))
        from ..generic.decoder import loads as loads_generic

        text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
        if dense_header(first_line(text)):
            # The dense profile (docs/extensions/dense.md), where gcfkit.dense is installed.
            value = importlib.import_module("gcfkit.dense").loads(payload)
        else:
            value = loads_generic(payload)
        ref = ref_of(text)
        if ref is not None:
            self._held[ref] = (False, value)
        return value

    def resolve(self, answer: Answer) -> Any:
        """The result an answer stands for; a patched or edited one is held as its ref."""
        if answer.since not in self._held:
            raise GCFError(
                "unresolved_reference",
                f"since={answer.since}: {answer.tool} result not held by this reader",
            )
        is_text, held = self._held[answer.since]
        if isinstance(answer, Unchanged):
            return held
        if isinstance(answer, Patch):
            if is_text:
                raise GCFError("base_mismatch", "a patch applies to a JSON value, not a text")
            value = apply(answer.ops, held)
        else:
            if not is_text:
                raise GCFError("base_mismatch", "an edit applies to a text, not a JSON value")
            value = apply_text(answer.edit, held)
        if answer.ref is not None:
            self._held[answer.ref] = (is_text, value)
        return value
