"""The proxy's relative answers (docs/extensions/relative-answers.md): which results it names,
what it remembers of them, and the relative answer to a call that names one with ``_since``.

:class:`Names` is one session's state, sans I/O, driven by :class:`~gcfkit.proxy.ProxyCore`;
the choice between a relative answer and the full result is the one answer policy's
(:mod:`gcfkit.answers.choose`). The rules:

* a result is named (``ref=`` in its GCF header, else one extra ``ref=`` text block) when it
  is one value or one text block of at least ``min_bytes``; ``auto`` names a result of at
  least ``free_bytes`` (:data:`FREE_NAMING_BYTES`) from the start, where its 4-token name is
  at most 1-2% of it and a repeat is dearest to resend, and a smaller one only where that
  keeps it no larger than the cheaper plain form (so naming costs nothing), until the
  client has passed ``_since`` in the session (it reads names: every result is named from
  then on); ``all`` names every result; ``off`` none;
* a call's ``_since`` names a held result when this session remembers it (bounded LRU:
  :class:`~gcfkit.relative.ResultMemory`) for the same tool and kind (its other arguments
  too: the reader names what it holds, and ``git_log`` with another ``max_count`` is often a
  small edit of the held one), fewer than ``reanchor`` relative answers deep, and its tool
  can be named on an answer line;
* with ``session`` (``--delta session``), a repeated call without ``_since`` names the
  latest result of that call (remember-everything), re-anchored with a full result after
  ``reanchor`` such answers in a row.

>>> names = Names("auto", reanchor=15, min_bytes=0, count=len, memory=ResultMemory(seed=1))
>>> names.take_since("t", {"q": 1, "_since": 482913})
({'q': 1}, '482913')
>>> names.uses_since
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from .. import relative
from ..errors import GCFError
from ..header import check_header_value
from ..jsonio import dumps_compact
from ..relative import Held, ResultMemory
from ..relative.memory import Kind
from .choose import (
    VERIFIED_FORMS,
    AnswerPolicy,
    Candidates,
    Choice,
    Cost,
    Fallback,
    Form,
    RelativeKind,
    choose_text,
    utf8_len,
)

__all__ = [
    "FREE_NAMING_BYTES",
    "SINCE_ARGUMENT",
    "SINCE_SCHEMA",
    "Asked",
    "Names",
    "RefMode",
    "TextAnswer",
    "handle_of",
]

#: The argument that names a held result (docs/extensions/relative-answers.md §3), stripped
#: before forwarding.
SINCE_ARGUMENT: Final = "_since"

#: Which results are named: see the module docstring.
RefMode = Literal["auto", "all", "off"]

#: In ``auto`` mode, a result of at least this many bytes is named from the start. Its
#: 4-token ``ref=`` block is then 0.9-1.7% of it at the 2.4-4.4 bytes per o200k token of
#: the corpus's text results (bench/proxy.md), and the repeats it lets the client answer
#: ``@@ unchanged`` or ``@@ edit`` (a 1,507-token git_log, a re-read file) are the ones
#: that cost most to resend. Measured on the corpus with an agent passing ``_since``
#: (docs/extensions/relative-answers.md §10): 512 or 768 bytes name 6 or 3 more results for
#: no repeat, 1,536 misses a 321-token file re-read, and 448 would name git_status results
#: where the block is 3.3% of them.
FREE_NAMING_BYTES: Final = 1024

#: The ``_since`` property ``--advertise-format`` adds to a tool's input schema.
SINCE_SCHEMA: Final = {
    "type": "string",
    "description": (
        "Optional, read by the gcfkit proxy and removed before the call: the ref= of an "
        "earlier result of this tool that you still hold, to get only what changed."
    ),
}


def handle_of(value: Any) -> str | None:
    """The handle a ``_since`` argument names: a handle string, or the number a model may
    have written for a digits-only handle; anything else names nothing.

    >>> handle_of("482913"), handle_of(482913), handle_of(True), handle_of("a b")
    ('482913', '482913', None, None)
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    return value if isinstance(value, str) and relative.is_handle(value) else None


@dataclass(frozen=True, slots=True)
class Asked:
    """Where a result's answer is decided: its ``tool``, its ``slot`` (tool and arguments:
    the call it answers) and the held result it is relative to, ``since`` (named by the
    call, or, with ``--delta session`` and ``implicit``, the call's latest).

    >>> Asked("git_log", "git_log\\x00{}").since is None
    True
    """

    tool: str
    slot: str
    since: str | None = None
    implicit: bool = False


@dataclass(frozen=True, slots=True)
class TextAnswer:
    """What becomes of a text result: its new ``content`` (a relative ``answer`` replacing
    the text, else the text and its ``ref=`` block), what the text cost when it had to be
    counted (``original``), the tokens and bytes the answer or block costs, and a refused
    answer."""

    content: list[Any] = field(default_factory=list)
    answer: Choice | None = None
    original: Cost | None = None
    tokens: int = 0
    size: int = 0
    fallback: Fallback | None = None


@dataclass
class Names:
    """The named results of one session and the rules above; ``count`` counts tokens."""

    mode: RefMode
    reanchor: int
    min_bytes: int
    count: Callable[[str], int]
    memory: ResultMemory = field(default_factory=ResultMemory)
    session: bool = False
    free_bytes: int = FREE_NAMING_BYTES
    # The client has passed _since in this session: it reads names, so naming pays.
    uses_since: bool = False
    # The size past which the client shows its model only a preview of a result (the call's).
    preview: int | None = None
    native: set[str] = field(default_factory=set)
    # With session: the latest handle of each call, and the relative answers nobody asked
    # for since its last full one.
    latest: dict[str, str] = field(default_factory=dict)
    unasked: dict[str, int] = field(default_factory=dict)

    def reset(self) -> None:
        """A new session (``initialize``): nothing delivered before is held any more; the
        handles issued stay spent, so an old one can never name a new result."""
        self.memory.clear()
        self.latest.clear()
        self.unasked.clear()
        self.uses_since = False

    def take_since(self, tool: str, args: dict[str, Any]) -> tuple[dict[str, Any] | None, Any]:
        """``args`` without ``_since`` and the handle it named (None for none or garbage);
        ``(None, None)`` when there is none to take, or the tool declares ``_since`` itself."""
        if SINCE_ARGUMENT not in args or tool in self.native:
            return None, None
        self.uses_since = True
        rest = {k: v for k, v in args.items() if k != SINCE_ARGUMENT}
        return rest, handle_of(args[SINCE_ARGUMENT])

    def implicit_since(self, args_key: str) -> str | None:
        """With ``session``, the latest result of a call that named none."""
        return self.latest.get(args_key) if self.session else None

    def may_name(self, size: int) -> bool:
        """Whether a result of ``size`` bytes may be named at all (not past ``preview``: a
        client that shows its model only the start of such a result would hide the name).

        >>> names = Names("auto", reanchor=15, min_bytes=128, count=len, preview=1000)
        >>> names.may_name(127), names.may_name(500), names.may_name(1001)
        (False, True, False)
        """
        if self.preview is not None and size > self.preview:
            return False
        return self.mode != "off" and size >= self.min_bytes

    def names_freely(self, size: int) -> bool:
        """Whether a result of ``size`` bytes may be named even where that makes it larger
        than the server's (by its ``ref=`` block, or ``ref=`` in a GCF header).

        >>> names = Names("auto", reanchor=15, min_bytes=128, count=len)
        >>> names.names_freely(300), names.names_freely(FREE_NAMING_BYTES)
        (False, True)
        >>> names.uses_since = True
        >>> names.names_freely(300)
        True
        """
        if self.mode == "all":
            return True
        return self.mode == "auto" and (self.uses_since or size >= self.free_bytes)

    def held(self, asked: Asked, kind: Kind) -> Held | None:
        """The result ``asked.since`` names, when a relative answer may use it (module
        docstring)."""
        tool, args_key, since, implicit = asked.tool, asked.slot, asked.since, asked.implicit
        if since is None or self.mode == "off":
            return None
        held = self.memory.recall(since)
        if held is None or held.tool != tool or held.kind != kind:
            return None
        if implicit and held.args != args_key:
            return None  # remember-everything answers a repeat of the same call only
        if held.depth >= self.reanchor:
            return None
        if implicit and self.unasked.get(args_key, 0) >= self.reanchor:
            # Remember-everything re-anchors on its own: the reader may have lost the result.
            self.unasked.pop(args_key, None)
            return None
        try:
            check_header_value("tool", tool, "invalid_answer")
        except GCFError:
            return None
        return held

    def name(self, choice: Choice, handle: str) -> tuple[Choice, int | None]:
        """``choice`` with the result named ``handle`` where it says so itself (a GCF header
        gets ``ref=``), and the tokens naming it adds (None: it is not named, as an
        ``@@ unchanged`` answer, which leaves the held result's name in place; a patch's
        ``@@`` line already carries its ``ref=``)."""
        if choice.decision == "since-unchanged":
            return choice, None
        if choice.decision.startswith("since-"):
            return choice, 0
        if choice.decision in VERIFIED_FORMS and choice.text is not None:
            stamped = relative.stamp_ref(choice.text, handle)
            named = Choice(stamped, choice.tokens, choice.decision, choice.fallbacks)
            return named, self.count(f" ref={handle}")
        return choice, self.count(relative.ref_block(handle))

    def name_value(
        self,
        choice: Choice,
        handle: str,
        plain: int,
        asked: Asked,
        value: Any,
        held: Held | None,
        size: int,
        json_size: int | None = None,
    ) -> tuple[Choice, int, str | None]:
        """Name the answer to a JSON value (``size``: the server's bytes; ``json_size``: its
        compact JSON's, when the caller knows them already): the choice as
        delivered (``ref=`` stamped into a GCF header), the tokens that adds, and the ``ref=``
        block to append (compact JSON or the original) or None. In ``auto`` mode before the
        client used ``_since``, a result under ``free_bytes`` that naming would make dearer
        than ``plain`` (the cheaper of compact JSON and the original) stays unnamed, and
        nothing is remembered."""
        named, extra = self.name(choice, handle)
        if extra is not None and not (self.names_freely(size) or choice.tokens + extra <= plain):
            return choice, 0, None
        self.remember(asked, "json", value, held, handle, choice, json_size)
        block = relative.ref_block(handle) if choice.decision in ("json", "original") else None
        return named, extra or 0, block

    def remember(
        self,
        asked: Asked,
        kind: Kind,
        value: Any,
        held: Held | None,
        handle: str,
        choice: Choice,
        size: int | None = None,
    ) -> None:
        """Remember what the client now holds under ``handle`` (an ``@@ unchanged`` answer
        only counts towards re-anchoring: the held result keeps its name); ``size``: the
        value's bytes (its compact JSON's for a JSON value) when the caller knows them."""
        tool, args_key = asked.tool, asked.slot
        answered = choice.decision.startswith("since-")
        if asked.implicit:
            if answered:
                self.unasked[args_key] = self.unasked.get(args_key, 0) + 1
            else:
                self.unasked.pop(args_key, None)
        if choice.decision == "since-unchanged":
            return
        depth = held.depth + 1 if answered and held is not None else 0
        if size is None:
            size = utf8_len(value) if isinstance(value, str) else utf8_len(dumps_compact(value))
        kept = self.memory.remember(
            tool, args_key, kind, value, size=size, depth=depth, handle=handle
        )
        if kept is not None:
            self.latest[args_key] = kept

    def json_candidate(
        self,
        candidates: Candidates,
        held: Held,
        value: Any,
        tool: str,
        handle: str | None,
        key: str | None,
    ) -> Candidates:
        """``candidates`` with the relative answer to ``held``: built and verified by
        :func:`gcfkit.relative.json_answer` (decoded and applied to the held value, it must
        give ``value``), or refused (``since-selfcheck``). It is counted only when it is
        shorter than the best full form in characters: a longer one is not clearly smaller."""
        try:
            wire = relative.json_answer(
                held.value, value, tool=tool, since=held.handle, ref=handle, key=key
            )
        except (GCFError, RecursionError, ValueError, TypeError):
            refused = Fallback("since-selfcheck")
            return replace(candidates, fallbacks=(*candidates.fallbacks, refused))
        full = candidates.gcf if candidates.gcf is not None else candidates.json
        if len(wire) >= len(full.text):
            return candidates
        kind: RelativeKind = "unchanged" if wire.startswith("@@ unchanged") else "patch"
        return replace(candidates, relative=Form.of(wire, self.count), relative_kind=kind)

    def text_result(
        self,
        block: dict[str, Any],
        asked: Asked,
        kind: Kind,
        policy: AnswerPolicy,
        check: Callable[[], None],
    ) -> TextAnswer | None:
        """The answer to a result that is one text ``block`` (``kind`` text or file): relative
        to the held text when that wins (a file only ever ``@@ unchanged``), else the text
        and its ``ref=`` block; None when it is not named at all."""
        text = block["text"]
        tool = asked.tool
        held = self.held(asked, kind)
        size = utf8_len(text)
        if not self.may_name(size) or not (self.names_freely(size) or held is not None):
            # A ref= block makes a text result larger: in auto mode, a small one only once
            # the client has shown it uses names (a call that named a held result is such a
            # sign); a large one pays for it with the repeat it can answer.
            return None
        handle = self.memory.mint()
        if handle is None:
            return None
        ref = relative.ref_block(handle)
        full = TextAnswer(
            [block, {"type": "text", "text": ref}], tokens=self.count(ref), size=utf8_len(ref)
        )
        answer = self._relative_text(text, held, tool, kind, handle, policy, check, full)
        self.remember(asked, kind, text, held, handle, answer.answer or _ORIGINAL)
        if answer.answer is not None:
            # The answer replaces the text in its own block (annotations and all).
            return replace(answer, content=[{**block, "text": answer.answer.text}])
        return answer

    def _relative_text(
        self,
        text: str,
        held: Held | None,
        tool: str,
        kind: Kind,
        handle: str,
        policy: AnswerPolicy,
        check: Callable[[], None],
        full: TextAnswer,
    ) -> TextAnswer:
        if held is None:
            return full
        wire: str | None = None
        if held.value == text:
            wire = relative.dumps_unchanged(tool, held.handle)
        elif kind == "text":
            try:
                wire = relative.text_answer(
                    held.value, text, tool=tool, since=held.handle, ref=handle
                )
            except (GCFError, RecursionError, ValueError):
                return replace(full, fallback=Fallback("since-selfcheck"))
        check()
        if wire is None or len(wire) >= len(text):
            return full
        original = Cost(self.count(text), utf8_len(text))
        answer_kind: RelativeKind = "unchanged" if wire.startswith("@@ unchanged") else "edit"
        choice = choose_text(original, Form.of(wire, self.count), answer_kind, policy)
        if choice.text is None:
            return replace(full, original=original)
        content = [{"type": "text", "text": choice.text}]
        return TextAnswer(content, choice, original, choice.tokens, utf8_len(choice.text))


_ORIGINAL: Final = Choice(None, 0, "original")
