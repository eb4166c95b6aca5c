"""Line edits between two texts: kept line ranges with quoted anchors, and added lines.

A :class:`TextEdit` rebuilds a new text from an old one the reader holds, in terms the
reader can check by reading: ``=12-40 "def main" "    return 0"`` copies lines 12 to 40 of
the old text (the first and last of them begin with those quoted anchors), ``+text`` adds
a line. Old lines that no range copies are gone. docs/extensions/relative-answers.md §5.

>>> old = "commit 486c5a6\\nAuthor: Dayna\\n\\n    docs: update version references\\n\\n" * 2
>>> new = old.replace("486c5a6", "1f0e2d3", 1)
>>> edit = diff_text(old, new)
>>> print("\\n".join(format_edit_lines(edit)))
+commit 1f0e2d3
=2-10 "Author: Dayna" ""
>>> apply_text(edit, old) == new
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

from ..errors import GCFError
from ..scalar import parse_quoted_at, quote_string

__all__ = [
    "ANCHOR_CHARS",
    "Add",
    "Keep",
    "TextEdit",
    "apply_text",
    "diff_text",
    "format_edit_lines",
    "join_lines",
    "parse_edit_lines",
    "split_lines",
]

#: An anchor is the first ANCHOR_CHARS characters of its line (the whole line if shorter).
ANCHOR_CHARS: Final = 32

# Above this many line pairs the middle part is not searched for matches (difflib is
# quadratic in the worst case); it is sent as added lines, which is still exact.
_MATCH_BUDGET: Final = 4_000_000

# Characters that make an added line travel quoted: anything a transport or a line
# splitter could alter, and a leading quote (which would read as the quoted form).
_UNSAFE: Final = re.compile("[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")
_KEEP: Final = re.compile(r"=([1-9][0-9]*)(?:-([1-9][0-9]*))? ")


@dataclass(frozen=True, slots=True)
class Keep:
    """Old lines ``first`` to ``last`` (1-based, inclusive), kept; ``anchors`` are the
    prefixes their first and (for a range) last line begin with."""

    first: int
    last: int
    anchors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Add:
    """One new line (without its line feed)."""

    line: str


EditOp = Keep | Add


@dataclass(frozen=True, slots=True)
class TextEdit:
    """The operations that rebuild a text, its line count, and whether its last line ends
    with a line feed (``eol``)."""

    ops: tuple[EditOp, ...]
    lines: int
    eol: bool = True


def split_lines(text: str) -> tuple[list[str], bool]:
    """The lines of ``text`` split on LF only, and whether the last one ends with LF.

    >>> split_lines("a\\r\\nb"), split_lines("a\\n"), split_lines("")
    ((['a\\r', 'b'], False), (['a'], True), ([], True))
    """
    if not text:
        return [], True
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
        return lines, True
    return lines, False


def join_lines(lines: Sequence[str], eol: bool) -> str:
    """The inverse of :func:`split_lines`.

    >>> join_lines(["a", "b"], True), join_lines(["a", "b"], False)
    ('a\\nb\\n', 'a\\nb')
    """
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if eol else "")


def _anchor(line: str) -> str:
    return line[:ANCHOR_CHARS]


def _keep(first: int, last: int, old: Sequence[str]) -> Keep:
    if first == last:
        return Keep(first, last, (_anchor(old[first - 1]),))
    return Keep(first, last, (_anchor(old[first - 1]), _anchor(old[last - 1])))


def _format_op(op: EditOp) -> str:
    if isinstance(op, Add):
        line = op.line
        if line.startswith('"') or _UNSAFE.search(line):
            return "+" + quote_string(line)
        return "+" + line
    span = str(op.first) if op.first == op.last else f"{op.first}-{op.last}"
    return f"={span} " + " ".join(quote_string(a) for a in op.anchors)


def format_edit_lines(edit: TextEdit) -> list[str]:
    """The body lines of ``edit`` (no terminators)."""
    return [_format_op(op) for op in edit.ops]


def _blocks(old: list[str], new: list[str]) -> list[tuple[int, int, int]]:
    """Matching blocks (i, j, size) in order: common head and tail first, difflib between."""
    n, m = len(old), len(new)
    head = 0
    while head < n and head < m and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and old[n - 1 - tail] == new[m - 1 - tail]:
        tail += 1
    out: list[tuple[int, int, int]] = []
    if head:
        out.append((0, 0, head))
    a, b = old[head : n - tail], new[head : m - tail]
    if a and b and len(a) * len(b) <= _MATCH_BUDGET:
        sm = SequenceMatcher(None, a, b, autojunk=False)
        out.extend((i + head, j + head, k) for i, j, k in sm.get_matching_blocks() if k)
    if tail:
        out.append((n - tail, m - tail, tail))
    return out


def diff_text(old: str, new: str) -> TextEdit:
    """The edit that rebuilds ``new`` from ``old``, deterministic for the pair.

    A kept range is used only where it is no longer to write than the lines it copies.

    >>> diff_text("a\\nb\\n", "a\\nb\\n").ops  # shorter as two added lines than as =1-2 "a" "b"
    (Add(line='a'), Add(line='b'))
    >>> diff_text("a line\\n" * 9, "a line\\n" * 9).ops
    (Keep(first=1, last=9, anchors=('a line', 'a line')),)
    """
    old_lines, _ = split_lines(old)
    new_lines, eol = split_lines(new)
    ops: list[EditOp] = []
    j = 0
    for i, jj, size in _blocks(old_lines, new_lines):
        ops.extend(Add(line) for line in new_lines[j:jj])
        keep = _keep(i + 1, i + size, old_lines)
        copied = [Add(line) for line in new_lines[jj : jj + size]]
        if len(_format_op(keep)) <= sum(len(_format_op(a)) + 1 for a in copied):
            ops.append(keep)
        else:
            ops.extend(copied)
        j = jj + size
    ops.extend(Add(line) for line in new_lines[j:])
    return TextEdit(tuple(ops), len(new_lines), eol)


def _bad(why: str, line: int | None) -> GCFError:
    return GCFError("invalid_edit", why, line)


def parse_edit_lines(lines: Iterable[str], count: int, eol: bool, first_line: int = 1) -> TextEdit:
    """Parse body lines (no terminators); ``first_line`` is the payload line of the first.

    Blank lines are skipped, as a GCF decoder skips them (an added empty line is ``+``).
    The edit must produce exactly ``count`` lines (the header's ``lines=``).

    >>> parse_edit_lines(['=1-2 "a" "b"', "+c"], 3, True, 3).ops[1]
    Add(line='c')
    """
    ops: list[EditOp] = []
    produced = 0
    no = first_line - 1
    for no, text in enumerate(lines, first_line):
        if not text:
            continue
        if text.startswith("+"):
            body = text[1:]
            if body.startswith('"'):
                value, end = parse_quoted_at(body, 0, no)
                if end != len(body):
                    raise _bad("characters after the closing quote of an added line", no)
                body = value
            elif _UNSAFE.search(body):
                raise _bad("a control character in an unquoted added line", no)
            ops.append(Add(body))
            produced += 1
            continue
        m = _KEEP.match(text)
        if m is None:
            raise _bad(f'expected =A-B "anchor" "anchor" or +line, not {text[:40]!r}', no)
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        if m.group(2) and last <= first:
            raise _bad(f"range {first}-{last}: the last line must come after the first", no)
        anchors: list[str] = []
        pos = m.end()
        while True:
            anchor, pos = parse_quoted_at(text, pos, no)
            anchors.append(anchor)
            if pos == len(text):
                break
            if text[pos] != " ":
                raise _bad("anchors are quoted strings separated by one space", no)
            pos += 1
        if len(anchors) != (1 if first == last else 2):
            want = "one anchor" if first == last else "two anchors (first and last line)"
            raise _bad(f"a kept range of {last - first + 1} line(s) has {want}", no)
        if any(len(a) > ANCHOR_CHARS for a in anchors):
            raise _bad(f"an anchor is at most {ANCHOR_CHARS} characters", no)
        ops.append(Keep(first, last, tuple(anchors)))
        produced += last - first + 1
    if produced != count:
        raise _bad(f"the edit makes {produced} line(s) but the @@ line says lines={count}", no)
    return TextEdit(tuple(ops), count, eol)


def apply_text(edit: TextEdit, old: str) -> str:
    """Rebuild the new text from ``old``; ``base_mismatch`` if a range or anchor does not fit.

    >>> apply_text(TextEdit((Keep(2, 2, ("b",)),), 1), "a\\nb\\n")
    'b\\n'
    >>> apply_text(TextEdit((Keep(1, 1, ("x",)),), 1), "a\\n")
    Traceback (most recent call last):
    gcfkit.errors.GCFError: error[base_mismatch]: kept line 1 does not begin with "x"
    """
    old_lines, _ = split_lines(old)
    out: list[str] = []
    for op in edit.ops:
        if isinstance(op, Add):
            out.append(op.line)
            continue
        if op.last > len(old_lines):
            raise GCFError(
                "base_mismatch",
                f"kept range {op.first}-{op.last}: the held text has {len(old_lines)} lines",
            )
        ends = (op.first, op.last) if len(op.anchors) == 2 else (op.first,)
        for no, anchor in zip(ends, op.anchors, strict=True):
            if not old_lines[no - 1].startswith(anchor):
                raise GCFError(
                    "base_mismatch", f"kept line {no} does not begin with {quote_string(anchor)}"
                )
        out.extend(old_lines[op.first - 1 : op.last])
    if len(out) != edit.lines:
        raise GCFError("base_mismatch", f"the edit makes {len(out)} lines, not {edit.lines}")
    return join_lines(out, edit.eol)
