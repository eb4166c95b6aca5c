"""The wire forms of relative answers, and the ``ref=`` handle that names a result.

docs/extensions/relative-answers.md is the normative text; in short:

* a full result names itself: ``GCF profile=generic ref=482913`` (a result that is not GCF:
  one extra text block ``ref=482913``). A v3.5.3 decoder ignores the unknown header field.
* an answer is one line that says what it is, of which tool, relative to which held result
  (and, when it makes a new result, that result's name), then its body. No GCF payload can
  start with ``@@``, so no GCF decoder takes an answer for a value::

      @@ unchanged tool=read_graph since=482913

      @@ patch tool=read_graph since=482913 ref=771204
      ## [1]{op,path,value}
      append|entities[name=commit 486c5a6].observations|tagged as release candidate

      @@ edit tool=git_log since=482913 ref=771204 lines=121
      +Commit history:
      +Commit: 1f0e2d3b9a8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e
      +Author: Dayna Blackwell
      =3-120 "Author: Dayna Blackwell" ""

>>> loads("@@ unchanged tool=read_graph since=482913\\n")
Unchanged(tool='read_graph', since='482913')
>>> import gcfkit
>>> gcfkit.loads("@@ unchanged tool=read_graph since=482913\\n")
Traceback (most recent call last):
gcfkit.errors.GCFDecodeError: error[missing_header] line 1: a payload starts with ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from ..errors import GCFDecodeError, GCFError, decode_error_at, placed
from ..generic.decoder import loads as _loads_generic
from ..generic.encoder import dumps as _dumps_generic
from ..grammar import count
from ..header import DENSE_MAGIC, check_header_value, parse_header, to_text
from ..jsonio import same_value
from .patch import NO_VALUE, Op, apply, check_op, diff, same
from .path import format_path, parse_path
from .textdiff import TextEdit, apply_text, diff_text, format_edit_lines, parse_edit_lines

__all__ = [
    "KINDS",
    "Answer",
    "Edit",
    "Patch",
    "Unchanged",
    "dumps_edit",
    "dumps_patch",
    "dumps_unchanged",
    "is_answer",
    "is_handle",
    "json_answer",
    "loads",
    "ref_block",
    "ref_of",
    "stamp_ref",
    "text_answer",
]

#: The answer kinds, as their ``@@`` line names them.
KINDS: Final = ("unchanged", "patch", "edit")

_HANDLE: Final = re.compile(r"[A-Za-z0-9_-]{1,32}\Z")
_REF_BLOCK: Final = re.compile(r"ref=([A-Za-z0-9_-]{1,32})\n?\Z")
_COUNT: Final = re.compile(f"(?:{count(19)})\\Z")  # §4 count, as grammar spells it
_HEAD: Final = "GCF profile=generic"


@dataclass(frozen=True, slots=True)
class Unchanged:
    """The held result ``since`` of ``tool`` is still the result."""

    tool: str
    since: str


@dataclass(frozen=True, slots=True)
class Patch:
    """Apply ``ops`` to the held JSON value ``since``; the result is named ``ref``."""

    tool: str
    since: str
    ops: tuple[Op, ...]
    ref: str | None = None


@dataclass(frozen=True, slots=True)
class Edit:
    """Rebuild the new text from the held text ``since``; the result is named ``ref``."""

    tool: str
    since: str
    edit: TextEdit
    ref: str | None = None


Answer = Unchanged | Patch | Edit


def is_handle(text: str) -> bool:
    """True when ``text`` is a handle: 1 to 32 of ``A-Z a-z 0-9 _ -``.

    >>> is_handle("482913"), is_handle("48 29"), is_handle("")
    (True, False, False)
    """
    return isinstance(text, str) and _HANDLE.match(text) is not None


def _check_handle(name: str, value: str) -> str:
    if not is_handle(value):
        raise GCFError("invalid_answer", f"{name}={value[:40]!r} is not a handle", 1)
    return value


def _line(kind: str, tool: str, since: str, ref: str | None, *extra: tuple[str, str]) -> str:
    parts = [f"@@ {kind}", f"tool={check_header_value('tool', tool, 'invalid_answer')}"]
    parts.append(f"since={_check_handle('since', since)}")
    if ref is not None:
        parts.append(f"ref={_check_handle('ref', ref)}")
    parts.extend(f"{k}={v}" for k, v in extra)
    return " ".join(parts)


# ---------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------


def dumps_unchanged(tool: str, since: str) -> str:
    """The answer "the result ``since`` of ``tool`` you hold is still the result".

    >>> dumps_unchanged("git_status", "482913")
    '@@ unchanged tool=git_status since=482913\\n'
    """
    return _line("unchanged", tool, since, None) + "\n"


def dumps_patch(ops: Any, *, tool: str, since: str, ref: str | None = None) -> str:
    """A patch answer: the operations as a canonical GCF table ``{op,path,value}``.

    >>> from gcfkit.relative.path import parse_path
    >>> print(dumps_patch([Op("set", parse_path("rows[id=2].status"), "done")],
    ...                   tool="list_rows", since="482913", ref="771204"), end="")
    @@ patch tool=list_rows since=482913 ref=771204
    ## [1]{op,path,value}
    set|rows[id=2].status|done
    """
    ops = tuple(ops)
    if not ops:
        raise GCFError("invalid_patch", "a patch has operations; an empty one is unchanged")
    rows: list[dict[str, Any]] = []
    for op in ops:
        check_op(op)
        row: dict[str, Any] = {"op": op.op, "path": format_path(op.path)}
        if op.value is not NO_VALUE:
            row["value"] = op.value
        rows.append(row)
    # No flattening: the table keeps its three columns, op|path|value, whatever the values.
    body = _dumps_generic(rows, flatten=False).split("\n", 1)[1]
    return f"{_line('patch', tool, since, ref)}\n{body}"


def dumps_edit(edit: TextEdit, *, tool: str, since: str, ref: str | None = None) -> str:
    """A text-edit answer: ``lines=`` (and ``eol=false`` when the text has no final LF).

    >>> from gcfkit.relative.textdiff import Add, Keep, TextEdit
    >>> print(dumps_edit(TextEdit((Keep(1, 3, ("On branch main", "")), Add("M README.md")), 4),
    ...                  tool="git_status", since="482913", ref="771204"), end="")
    @@ edit tool=git_status since=482913 ref=771204 lines=4
    =1-3 "On branch main" ""
    +M README.md
    """
    extra = [("lines", str(edit.lines))]
    if not edit.eol and edit.lines:
        extra.append(("eol", "false"))
    body = "".join(line + "\n" for line in format_edit_lines(edit))
    return f"{_line('edit', tool, since, ref, *extra)}\n{body}"


def stamp_ref(payload: str, handle: str) -> str:
    """Name a full GCF generic (or dense-profile) result: ``ref=<handle>`` is added to its
    header.

    >>> stamp_ref("GCF profile=generic\\n=1\\n", "482913")
    'GCF profile=generic ref=482913\\n=1\\n'
    """
    head, nl, rest = payload.partition("\n")
    header = parse_header(head)
    if header.profile not in ("generic", "dense"):
        raise GCFError("unsupported_profile", "only generic and dense results are named", 1)
    if "ref" in header.fields:
        raise GCFError("invalid_answer", "the payload already names a result", 1)
    return f"{head.rstrip()} ref={_check_handle('ref', handle)}{nl}{rest}"


def ref_block(handle: str) -> str:
    """The extra text block that names a text result.

    >>> ref_block("482913")
    'ref=482913'
    """
    return f"ref={_check_handle('ref', handle)}"


def ref_of(text: str) -> str | None:
    """The handle a text names: a GCF header's ``ref=``, an answer's (the result it makes),
    or a whole ``ref=`` block.

    >>> ref_of("GCF profile=generic ref=482913\\n=1\\n"), ref_of("ref=482913"), ref_of("x")
    ('482913', '482913', None)
    >>> ref_of("@@ patch tool=t since=482913 ref=771204\\n## [1]{op,path}\\ndel|a\\n")
    '771204'
    """
    first = text.split("\n", 1)[0]
    if text.startswith(("GCF ", "@@ ", DENSE_MAGIC)):
        pairs = first.split(" ")[2:] if text.startswith("@@ ") else None
        try:
            header = parse_header(first if pairs is None else " ".join([_HEAD, *pairs]))
        except GCFError:
            return None
        ref = header.fields.get("ref")
        return ref if ref is not None and is_handle(ref) else None
    m = _REF_BLOCK.match(text)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------


def is_answer(text: str | bytes) -> bool:
    """True when ``text`` is shaped like a relative answer (it starts with ``@@``);
    :func:`loads` then decides strictly.

    >>> is_answer("@@ unchanged tool=t since=1\\n"), is_answer("GCF profile=generic\\n")
    (True, False)
    """
    if isinstance(text, str):
        return text[:2] == "@@"
    # Anything else that is not bytes is left to the decoders' own unsupported_type.
    return isinstance(text, (bytes, bytearray, memoryview)) and bytes(text[:2]) == b"@@"


def loads(text: str | bytes) -> Answer:
    """Strict decode of a relative answer. Malformations are ``invalid_answer``,
    ``invalid_patch`` or ``invalid_edit`` (or the generic decoder's own code for a patch
    body that is not GCF): a :class:`~gcfkit.errors.GCFDecodeError` placed in the answer's
    text (``lineno``, ``colno``, ``pos`` into ``doc``), as every GCF decoder's.

    >>> loads("@@ patch tool=t since=1\\n## [1]{op,path}\\ndel|a\\n").ops
    (Op(op='del', path=(Member(key='a'),), value=NO_VALUE),)
    >>> loads("@@ unchanged tool=t\\n")
    Traceback (most recent call last):
    gcfkit.errors.GCFDecodeError: error[invalid_answer] line 1: an answer names its held ...
    """
    return placed(_loads, to_text(text))


def _loads(src: str) -> Answer:
    if "\r\n" in src:
        src = src.replace("\r\n", "\n")
    first, _, rest = src.partition("\n")
    if not first.startswith("@@ "):
        raise GCFDecodeError(
            "invalid_answer", "an answer starts with @@ unchanged, patch or edit", 1
        )
    kind, _, pairs = first[3:].rstrip(" ").partition(" ")
    if kind not in KINDS:
        raise decode_error_at("invalid_answer", f"unknown answer kind {kind[:20]!r}", 1, first, 3)
    try:
        fields = parse_header(f"{_HEAD} {pairs}" if pairs else _HEAD).fields
    except GCFError as e:
        raise GCFDecodeError("invalid_answer", e.detail, 1) from None
    if "since" not in fields:
        raise GCFDecodeError("invalid_answer", "an answer names its held result: since=", 1)
    if "tool" not in fields:
        raise GCFDecodeError("invalid_answer", "an answer names its tool: tool=", 1)
    tool = fields["tool"]
    since = _answer_handle(fields, "since")
    ref = fields.get("ref")
    if ref is not None:
        _answer_handle(fields, "ref")
    if kind != "edit" and ("lines" in fields or "eol" in fields):
        raise GCFDecodeError("invalid_answer", "lines= and eol= belong to an edit answer", 1)
    if kind == "unchanged":
        if ref is not None:
            raise GCFDecodeError("invalid_answer", "an unchanged answer names no new result", 1)
        for no, line in enumerate(rest.split("\n"), 2):
            if line.strip(" \t"):
                raise GCFDecodeError("invalid_answer", "an unchanged answer has no body", no)
        return Unchanged(tool, since)
    if kind == "patch":
        return Patch(tool, since, _patch_ops(rest), ref)
    lines = fields.get("lines")
    if lines is None:
        raise GCFDecodeError("invalid_answer", "an edit answer declares lines=<count>", 1)
    if not _COUNT.match(lines):
        raise decode_error_at(
            "invalid_answer", "an edit answer declares lines=<count>", 1, f"lines={lines}", 0
        )
    eol = fields.get("eol", "true")
    if eol not in ("true", "false"):
        raise decode_error_at("invalid_answer", "eol= is true or false", 1, f"eol={eol}", 0)
    edit = parse_edit_lines(rest.split("\n"), int(lines), eol == "true", 2)
    return Edit(tool, since, edit, ref)


def _answer_handle(fields: dict[str, str], name: str) -> str:
    """The handle of header field ``name`` of an answer's ``@@`` line, placed there when it
    is not one."""
    value = fields[name]
    if not is_handle(value):
        piece = f"{name}={value}"
        raise decode_error_at(
            "invalid_answer", f"{name}={value[:40]!r} is not a handle", 1, piece, 0
        )
    return value


def _patch_ops(body: str) -> tuple[Op, ...]:
    # The body is a GCF generic body; its line n is line n of the answer as well, since
    # the @@ line stands where the GCF header would (so the body's own errors keep their
    # place). An operation that is well-formed GCF but not an operation is reported at
    # line 2, where the list of operations starts.
    value = _loads_generic(f"{_HEAD}\n{body}")
    if not isinstance(value, list) or not value:
        raise GCFDecodeError("invalid_patch", "a patch body is a non-empty array of operations", 2)
    ops: list[Op] = []
    for n, item in enumerate(value, 1):
        if not isinstance(item, dict) or list(item) not in (
            ["op", "path"],
            ["op", "path", "value"],
        ):
            raise GCFDecodeError(
                "invalid_patch",
                f"operation {n}: the fields are op, path and (but for del) value, in this order",
                2,
            )
        op, path = item["op"], item["path"]
        if not isinstance(op, str) or not isinstance(path, str):
            raise GCFDecodeError("invalid_patch", f"operation {n}: op and path are strings", 2)
        try:
            new = Op(op, parse_path(path), item.get("value", NO_VALUE))
            check_op(new)
        except GCFError as e:
            raise GCFDecodeError(e.code, f"operation {n}: {e.detail}", 2) from None
        ops.append(new)
    return tuple(ops)


# ---------------------------------------------------------------------------------------
# Verified answers (the producer's side)
# ---------------------------------------------------------------------------------------


def json_answer(
    held: Any,
    new: Any,
    *,
    tool: str,
    since: str,
    ref: str | None = None,
    key: str | None = None,
) -> str:
    """The answer to a call whose held result ``since`` is ``held`` and whose new result is
    ``new``: unchanged when they are equal, else a patch, verified by decoding it and
    applying it to ``held`` (``base_mismatch`` if that does not give ``new``).

    Whether the patch is worth sending instead of the full result is the caller's policy.

    >>> print(json_answer({"n": 1, "tags": ["a"]}, {"n": 1, "tags": ["a", "b"]},
    ...                   tool="t", since="482913", ref="771204"), end="")
    @@ patch tool=t since=482913 ref=771204
    ## [1]{op,path,value}
    append|tags|b
    """
    if same(held, new):
        return dumps_unchanged(tool, since)
    wire = dumps_patch(diff(held, new, key=key), tool=tool, since=since, ref=ref)
    answer = loads(wire)
    assert isinstance(answer, Patch)
    if not same_value(apply(answer.ops, held), new):
        raise GCFError("base_mismatch", "the patch does not rebuild the new result on the wire")
    return wire


def text_answer(held: str, new: str, *, tool: str, since: str, ref: str | None = None) -> str:
    """As :func:`json_answer`, for texts: unchanged, or a verified line edit.

    >>> text_answer("same\\n", "same\\n", tool="git_status", since="482913")
    '@@ unchanged tool=git_status since=482913\\n'
    """
    if held == new:
        return dumps_unchanged(tool, since)
    wire = dumps_edit(diff_text(held, new), tool=tool, since=since, ref=ref)
    answer = loads(wire)
    assert isinstance(answer, Edit)
    if apply_text(answer.edit, held) != new:
        raise GCFError("base_mismatch", "the edit does not rebuild the new text on the wire")
    return wire
