"""The expensive part of the proxy: one ``tools/call`` result rewritten, within a deadline.

:class:`Rewriter` holds the options, the codec and what the client holds for §10a deltas,
and answers one result at a time with an :class:`Outcome` (the new result, or None to keep
the original, and the ledger's numbers). It does no I/O and reads only the clock it is
given, so it runs wherever a shell puts it: in process (:meth:`ProxyCore.from_server
<gcfkit.proxy.core.ProxyCore.from_server>`), or in the worker process
(:mod:`gcfkit.transports.worker`), where nothing it does, however long, holds up the relay.
Either way the same code answers a result (:meth:`Rewriter.rewrite_line`): whether it is
rewritten, and into what, is decided here and in the answer layer it calls
(:mod:`gcfkit.answers.choose`, :mod:`~gcfkit.answers.forms`, :mod:`~gcfkit.answers.since`).

Three rules keep a result cheap to answer:

* **Estimate before building.** GCF writes every row of a table with the union of its
  rows' fields (§7.4.3), so ``[{"k0": 0}, {"k1": 1}, ...]`` costs rows x fields cells:
  4,000 such records are 57 KB of JSON and 32 MB of GCF. :func:`gcf_cells` counts those
  cells first (a walk as cheap as one ``json.dumps``); each cell and its delimiter is at
  least a quarter of a token and a token at least one byte, so past ``4 x`` the JSON's
  tokens GCF cannot win and is not built.
* **Count the likely winner first.** The GCF (when built) is counted in full, then compact
  JSON and the original only up to the count to beat
  (:func:`gcfkit.tokens.count_till_limit`); a text that loses is never counted to its end.
  The ledger's exact "before" count of a text that lost is taken after the answer is out
  (:attr:`Outcome.owed`).
* **Check the deadline between steps**; past it the original goes out. (Between steps only:
  the real bound is the shell's, which gives up on the worker at the deadline.)

>>> from gcfkit.proxy.config import ProxyConfig
>>> r = Rewriter(ProxyConfig())
>>> result = {"content": [{"type": "text", "text": '[{"a": 1}, {"a": 2}, {"a": 3}]'}]}
>>> out = r.rewrite(result, Call("t", "t", fmt="json"), Budget.unlimited())
>>> out.decision, out.result["content"][0]["text"]
('json-minified', '[{"a":1},{"a":2},{"a":3}]')
>>> gcf_cells([{f"k{i}": i} for i in range(100)])
10000
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from ..answers.choose import (
    VERIFIED_FORMS,
    AnswerPolicy,
    Candidates,
    Choice,
    Cost,
    DeltaState,
    DeltaStep,
    Fallback,
    Form,
    advance,
    choose,
    delta_rebuilds,
    fallback_word,
    held_after,
    identity_column,
    is_unchanged,
    keyed_set,
    settle,
    utf8_len,
)
from ..answers.estimates import NeedsExactCounts, close
from ..answers.forms import FullForms, Text
from ..answers.pyliteral import literal_json_renders, literal_value
from ..answers.since import Asked, Names
from ..errors import GCFError
from ..jsonio import compact_of, dumps_compact
from ..keyed import DeltaSession, FixedN, KeyedSet
from ..readers import Reads
from ..relative import Held, ResultMemory
from ..relative.memory import Kind
from .config import Codec, ProxyConfig
from .content import (
    Piece,
    content_of,
    edited_line,
    json_value_of,
    pieces_of,
    reassemble,
    text_blocks,
    text_blocks_of,
)
from .counts import (
    DENSE_CELLS_PER_BYTE,
    TOKENS_PER_CELL,
    Counts,
    Tally,
    definition_cost,
    gcf_cells,
    needs_exact_count,
)
from .estimated import estimated_choice
from .jsonrpc import parse_envelope, splice_texts
from .outcome import LEDGER_EXACT_CHARS, Budget, BudgetExceeded, Outcome, huge
from .policy import IDENTITY_KEYS, Format, ToolPolicy, cap_format
from .record import LedgerWord, ledger_decision
from .structured import carries_structured, flatten, model_view

__all__ = [
    "ENVELOPE_SLACK",
    "Budget",
    "BudgetExceeded",
    "Call",
    "Forget",
    "NeedsExactCounts",
    "Outcome",
    "Reset",
    "Rewriter",
    "SessionEvent",
    "gcf_cells",
]

_DEPTH: Final = 512

#: Settled mode counts a result with less text than this exactly from the start: below it
#: the estimates and a close call's exact counts cost more than exact counts alone
#: (bench/answer_path.py: even at 8-10 KB, faster from 10 KB of nested records on).
_SETTLE_MIN_CHARS: Final = 8 * 1024

#: What a response may hold around its text blocks and still be tried (``max_text_bytes``).
ENVELOPE_SLACK: Final = 64 * 1024


#: Tokens a ``ref=`` name may add to an answer (a stamp in a GCF header, or a block): the
#: counts a named result is compared with are bounded this much higher.
_NAMING_SLACK: Final = 64

#: A handle's shape (six digits, :class:`~gcfkit.relative.ResultMemory`): what a name costs by
#: estimate does not depend on its digits, so estimate mode weighs naming before it mints.
_ANY_HANDLE: Final = "000000"


@dataclass(frozen=True, slots=True)
class Forget:
    """The client got the original for the call ``slot``: no delta against what it held
    before (:meth:`Rewriter.forget`)."""

    slot: str


@dataclass(frozen=True, slots=True)
class Reset:
    """A new session (``initialize``): nothing delivered before is held (:meth:`Rewriter.reset`)."""


#: What happened to a session that its rewriter must hear of before its next result: the
#: core's events (:meth:`ProxyCore.pop_events <gcfkit.proxy.core.ProxyCore.pop_events>`),
#: which a worker process hears with the session's next job.
SessionEvent = Forget | Reset


@dataclass(frozen=True, slots=True)
class Call:
    """What the core knows of the call a result answers: the ``tool``, the ``slot`` (tool and
    arguments: where its delta state and held results live), the most the call may get
    (``fmt``), the held result it named with ``_since``, whether the client has used
    ``_since`` in this session at all (then every result is named) and whether the tool
    reads files."""

    tool: str
    slot: str
    fmt: Format = "gcf"
    since: str | None = None
    uses_since: bool = False
    #: Whether the tool reads files (None: by its name alone; the core decides it with the
    #: tool's ``tools/list`` entry, :meth:`~gcfkit.proxy.policy.Policy.is_file_tool`).
    file: bool | None = None
    #: What the client's model reads of a result carrying ``structuredContent``
    #: (:mod:`gcfkit.readers`), and whether such a result is delivered as its value
    #: (:func:`gcfkit.proxy.structured.flatten`: the core's word, UI tools never).
    reads: Reads = "content"
    flatten: bool = False
    #: The bytes past which the client shows its model a preview of a result, not the result
    #: (Claude Code's offload to a file): such a result gets no ``ref=`` name.
    preview: int | None = None


# ---------------------------------------------------------------------------------------
# The rewriter
# ---------------------------------------------------------------------------------------


class Rewriter:
    """Answers tool results for one session (see the module docstring).

    ``rewrite`` never raises: a failure of any kind sends the original and says why. With a
    codec in estimate mode (:meth:`Codec.estimating <gcfkit.answers.codec.Codec.estimating>`)
    it chooses from token estimates and loads no tokenizer; a result they cannot answer as
    exact counts would (a close call, :mod:`gcfkit.answers.estimates`; a delta or a relative
    answer; a form whose text depends on exact counts; a text over 4 MB) raises
    :class:`NeedsExactCounts` with the session as it was, for a rewriter with exact counts
    to answer. What such an answer owes the ledger is all in :attr:`Outcome.owed` and
    :attr:`Outcome.owed_after`.

    The default codec is in settled-estimate mode (:attr:`Codec.settles
    <gcfkit.answers.codec.Codec.settles>`): estimates choose as above, and what they cannot
    decide is counted exactly here (a close call for that value alone, a delta, a relative
    answer, a dense form's definitions), so the answer is the exact path's and nothing is
    raised; what the ledger needs and was not counted is owed, for after the answer.

    >>> import json
    >>> from gcfkit.answers.codec import Codec
    >>> r = Rewriter(ProxyConfig(), Codec.estimating())
    >>> result = lambda text: {"content": [{"type": "text", "text": text}]}
    >>> line = lambda text: json.dumps({"id": 1, "result": result(text)}).encode()
    >>> pretty = json.dumps([1, 2, 3], indent=2)
    >>> out, new = r.rewrite_line(line(pretty), Call("t", "t"), Budget.unlimited())
    >>> new  # (the new text spliced in: every other byte as the server wrote it)
    b'{"id": 1, "result": {"content": [{"type": "text", "text": "[1,2,3]"}]}}\\n'
    >>> out.owed, out.owed_after, out.tokens_before
    (['[\\n  1,\\n  2,\\n  3\\n]'], ['[1,2,3]'], 0)
    >>> r.rewrite_line(line("[1, 2, 3]"), Call("t", "t"), Budget.unlimited())
    Traceback (most recent call last):
      ...
    gcfkit.answers.estimates.NeedsExactCounts: a close call (json 6 vs original 6 estimated tokens)
    """

    def __init__(
        self,
        config: ProxyConfig,
        codec: Codec | None = None,
        *,
        memory: Callable[[], ResultMemory] | None = None,
    ) -> None:
        codec = codec or Codec()
        c = self.config = config
        #: Estimate mode: results are answered from estimates unless exact counts are asked
        #: for (``_estimate``: this result is); a close call raises, and every count the
        #: ledger needs is owed (names' counts through the tally).
        self._estimate_mode = codec.estimate
        #: Settled-estimate mode (:attr:`Codec.settles <gcfkit.answers.codec.Codec.settles>`):
        #: estimates as above, but what they cannot answer is answered with exact counts
        #: here, so nothing is raised.
        self._settle_mode = codec.settles
        #: Less text than this is counted exactly from the start (tests set 0).
        self.settle_min_chars = _SETTLE_MIN_CHARS
        self._estimate = False
        #: Whether the value just answered was counted exactly (its winner's count is exact).
        self._counted = True
        self._estimate_fn = codec.estimate_count
        self._tally = Tally(self._estimated) if codec.estimate or codec.settles else None
        self._dumps = codec.dumps
        self._loads = codec.loads
        self._count_fn = codec.count
        self._limited_fn = codec.limited()
        self._answers = AnswerPolicy(
            delta_ratio=c.delta_ratio, tracks_delivery=True, relative_ratio=c.relative_ratio
        )
        self._reanchor = FixedN(c.reanchor)
        self._selfcheck_on = c.selfcheck
        carrier = c.primer_carrier if c.primer else "off"
        # (One cost function per process and encoding: definitions' counts kept across
        # sessions.)
        cost = definition_cost(codec.count, c.encoding) or self.count
        self._forms = FullForms(codec, count=cost, dense=c.dense, primer=carrier)
        # Dense definitions are chosen by exact counts (D9.2): estimating, a value with a
        # string that may be defined is left to exact counts.
        self._probe_forms = FullForms(codec, count=needs_exact_count, dense=c.dense, primer=carrier)
        # What the client holds, per tool + arguments, for §10a deltas.
        self._deltas: dict[str, DeltaState] = {}
        held = (
            memory() if memory else ResultMemory(max_results=c.ref_results, max_bytes=c.ref_bytes)
        )
        #: The named results of the session (relative answers, :mod:`gcfkit.answers.since`).
        self.names = Names(
            mode=c.refs,
            reanchor=c.reanchor,
            min_bytes=c.ref_min_bytes,
            count=self.count,
            memory=held,
            session=c.session_deltas,
            free_bytes=c.ref_free_bytes,
        )

    # -- public ----------------------------------------------------------------------

    def count(self, text: str) -> int:
        """Tokens of ``text`` in the session's encoding."""
        return self._count_fn(text, self.config.encoding)

    def _estimated(self, text: str) -> int:
        return self._estimate_fn(text, self.config.encoding)

    @property
    def estimates(self) -> bool:
        """Whether results are answered from estimates unless exact counts are asked for."""
        return self._estimate_mode

    def warm_up(self) -> None:
        """Load the tokenizer (not in estimate mode) and codec now (about a second, once per
        process)."""
        try:
            if not self._estimate_mode:
                self.count("{}")
            self._loads(self._dumps({"a": [1]}))
        except Exception:  # a broken codec shows up, and is handled, per result
            pass

    @property
    def dense_constructs(self) -> tuple[str, ...]:
        """The dense constructs this rewriter may use (empty when the codec has none)."""
        return self._forms.dense

    def forget(self, slot: str) -> None:
        """The client got the original for ``slot``: no delta against what it held before.
        (Held results stay: a relative answer names the one it is relative to.)"""
        self._deltas.pop(slot, None)

    def reset(self) -> None:
        """A new session (``initialize``): nothing delivered before is held any more."""
        self._deltas.clear()
        self.names.reset()

    def apply(self, events: Sequence[SessionEvent]) -> None:
        """What the core saw happen to the session since this rewriter's last result."""
        for event in events:
            if isinstance(event, Forget):
                self.forget(event.slot)
            else:
                self.reset()

    def unread(self, call: Call, size: int) -> LedgerWord | None:
        """The ledger's decision for a result of ``call`` whose response line is ``size``
        bytes, when the rewrite would leave it as the server wrote it without reading it;
        None when it must be read (:meth:`rewrite_line`). The core asks before parsing a
        large line, so that a 64 MB message that is not rewritten costs what a small one
        does: too large to try (``max_text_bytes``), or a file read that no ``ref=`` name
        can be given (the one answer a file read may get is ``@@ unchanged``, and that
        needs the result named).

        >>> from gcfkit.proxy.config import ProxyConfig
        >>> r = Rewriter(ProxyConfig(max_text_bytes=10))
        >>> r.unread(Call("read_file", "s"), 100), r.unread(Call("t", "s"), 100_000)
        (None, 'unchanged')
        >>> Rewriter(ProxyConfig(refs="off")).unread(Call("read_file", "s"), 100)
        'passthrough-file'
        """
        file = self._file_passthrough(call)
        if size > self.config.max_text_bytes + ENVELOPE_SLACK:
            return "passthrough-file" if file else "unchanged"
        if file and not call.flatten and not self._may_name_file(call):
            # (A flattened file read is read: its text is in its structuredContent.)
            return "passthrough-file"
        return None

    def rewrite_line(
        self,
        line: bytes,
        call: Call,
        budget: Budget,
        *,
        exact: bool = False,
        message: dict[str, Any] | None = None,
    ) -> tuple[Outcome, bytes | None]:
        """The outcome for one ``tools/call`` response ``line`` (what :meth:`unread` left to
        read), and the line to send (None: the line as it is): the one road of a tool
        result, whether it runs in a worker (:mod:`gcfkit.transports.worker`) or in process
        (:meth:`ProxyCore.from_server <gcfkit.proxy.core.ProxyCore.from_server>`). The new
        text goes back into the message here: spliced into the line where only block texts
        changed (:func:`~gcfkit.proxy.jsonrpc.splice_texts`), else the message dumped again
        (:func:`~gcfkit.proxy.jsonrpc.dump_edited`); every other byte as the server wrote it.
        In estimate mode it may raise :class:`NeedsExactCounts` (see :meth:`rewrite`).
        ``message``: ``line`` as :func:`~gcfkit.proxy.jsonrpc.parse_envelope` read it, when
        it found it safe (the core's :class:`~gcfkit.proxy.core.ToolJob` carries it), so
        that a line answered in the process that read it is parsed once.

        >>> from gcfkit.proxy.config import ProxyConfig
        >>> line = b'{"id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}'
        >>> Rewriter(ProxyConfig()).rewrite_line(line, Call("t", "t"), Budget.unlimited())[1]
        b'{"id":1,"result":{"content":[{"type":"text","text":"[1,2]"}]}}\\n'
        """
        msg, safe = (message, True) if message is not None else parse_envelope(line)
        result = msg.get("result") if isinstance(msg, dict) else None
        if not isinstance(msg, dict) or not isinstance(result, dict):
            self.forget(call.slot)
            return Outcome(None, "unchanged"), None
        if not safe:
            self.forget(call.slot)
            return Outcome(
                None, fallback_word("unsafe-envelope"), lazy=text_blocks_of(result)
            ), None
        outcome = self.rewrite(result, call, budget, exact=exact)
        if outcome.result is None:
            return outcome, None
        spliced = splice_texts(line, msg, outcome.result)
        return outcome, spliced if spliced is not None else edited_line(msg, outcome.result, line)

    def rewrite(
        self, result: dict[str, Any], call: Call, budget: Budget, *, exact: bool = False
    ) -> Outcome:
        """The answer to one result of ``call``, as its client's model reads it.

        In estimate mode, unless ``exact``, it is chosen from estimates, or
        :class:`NeedsExactCounts` is raised with the session as it was: the same result
        rewritten with ``exact=True`` (here, or by a rewriter with exact counts holding the
        same session) then gets the answer exact counts give. In settled-estimate mode it is
        chosen the same way, and what estimates cannot decide is counted exactly here."""
        names = self.names
        if self._settle_mode and not exact:
            exact = sum(len(t) for t in text_blocks_of(result)) < self.settle_min_chars
        self._estimate = (self._estimate_mode or self._settle_mode) and not exact
        names.count = self._tally if self._estimate and self._tally is not None else self.count
        if not self._estimate:
            return self._rewrite_any(result, call, budget)
        deltas, uses_since, preview = dict(self._deltas), names.uses_since, names.preview
        try:
            return self._rewrite_any(result, call, budget)
        except NeedsExactCounts:
            # Nothing is minted or remembered before the choice is made; what else a rewrite
            # touches on its way there goes back as it was.
            self._deltas.clear()
            self._deltas.update(deltas)
            names.uses_since, names.preview = uses_since, preview
            if not self._settle_mode:
                raise
        # Settled-estimate mode: what estimates could not answer is answered exactly here.
        self._estimate = False
        names.count = self.count
        return self._rewrite_any(result, call, budget)

    def _rewrite_any(self, result: dict[str, Any], call: Call, budget: Budget) -> Outcome:
        if (call.reads == "content" and not call.flatten) or not carries_structured(result):
            return self._rewrite_result(result, call, budget)
        try:
            flat = flatten(result, call.reads, file=self._is_file(call)) if call.flatten else None
        except (ValueError, RecursionError):  # not JSON after all: left as it came
            flat = None
        if flat is not None:
            outcome = self._rewrite_result(flat.result, call, budget, flat.value)
            outcome.baseline = flat.baseline
            if outcome.result is None:
                outcome.result = flat.result
            return outcome
        if call.reads == "structured":
            # The model reads structuredContent as the server sent it: the text is no saving.
            self.forget(call.slot)
            return Outcome(None, "unchanged", lazy=model_view(result, call.reads))
        outcome = self._rewrite_result(result, call, budget)
        outcome.lazy.extend(model_view(result, call.reads)[len(text_blocks_of(result)) :])
        return outcome

    def _rewrite_result(
        self, result: dict[str, Any], call: Call, budget: Budget, known: Any = None
    ) -> Outcome:
        is_file = self._is_file(call)
        policy = self.config.policy.for_tool(call.tool, file=is_file)
        fmt = cap_format(policy.format, call.fmt)
        blocks = text_blocks(content_of(result))
        texts = [block["text"] for _, block in blocks]
        self.names.uses_since = call.uses_since
        self.names.preview = call.preview
        since, implicit = call.since, False
        if since is None:
            since = self.names.implicit_since(call.slot)
            implicit = since is not None
        at = Asked(call.tool, call.slot, since, implicit)
        if self._estimate:
            if since is not None:
                raise NeedsExactCounts("a call naming a held result")
            if not self._settle_mode and any(len(t) > LEDGER_EXACT_CHARS for t in texts):
                raise NeedsExactCounts("a text the ledger counts by its size")
        try:
            if _passes_files(is_file, policy):
                # Byte for byte: at most an identical re-read is answered (unchanged).
                outcome = Outcome(None, "passthrough-file", lazy=texts)
                if self._may_name_file(call):
                    outcome = self._text_answer(result, at, "file", outcome)
                return outcome
            return self._rewrite(result, policy, fmt, at, budget, (blocks, texts), known)
        except NeedsExactCounts:
            raise
        except BudgetExceeded:
            outcome = Outcome(None, fallback_word("time-budget"), lazy=texts)
        except Exception as e:  # never break the agent: the original goes through
            outcome = Outcome(None, fallback_word("error", type(e).__name__), lazy=texts)
        # The client gets the original: a delta next time must not be against an older set.
        self.forget(call.slot)
        return outcome

    # -- the rules that decide before any step ----------------------------------------

    def _is_file(self, call: Call) -> bool:
        return self.config.policy.is_file_tool(call.tool) if call.file is None else call.file

    def _file_passthrough(self, call: Call) -> bool:
        """Whether ``call``'s tool reads files and the policy leaves its results alone."""
        is_file = self._is_file(call)
        return _passes_files(is_file, self.config.policy.for_tool(call.tool, file=is_file))

    def _may_name_file(self, call: Call) -> bool:
        """Whether a file read may be named (and so a re-read answered ``@@ unchanged``)."""
        return call.fmt == "gcf" and self.config.refs != "off"

    # -- the steps -------------------------------------------------------------------

    def _rewrite(
        self,
        result: dict[str, Any],
        policy: ToolPolicy,
        fmt: Format,
        at: Asked,
        budget: Budget,
        found: tuple[list[tuple[int, dict[str, Any]]], list[str]],
        known: Any = None,
    ) -> Outcome:
        """The answer to a result of text blocks (``found``: its text blocks and their texts,
        :func:`~gcfkit.proxy.content.text_blocks`); ``known``: the value of its one text
        block, which is that value's compact JSON (a flattened result: not parsed back, not
        dumped again)."""
        content = content_of(result)
        blocks, texts = found
        outcome = Outcome(None, "unchanged", lazy=list(texts))
        if result.get("isError") is True or fmt == "off" or not blocks:
            self.forget(at.slot)
            return outcome
        sizes = [utf8_len(t) for t in texts]
        limit = self.config.max_text_bytes
        in_range = [policy.min_bytes <= n <= limit for n in sizes]
        if isinstance(known, (dict, list)) and len(texts) == 1:
            values: list[Any] = [known if in_range[0] else None]
        else:
            values = [
                json_value_of(t) if ok else None for t, ok in zip(texts, in_range, strict=True)
            ]
        budget.check()
        # Which values were parsed from their one text: their compact JSON is written from
        # that text (compact_of), not dumped from the value.
        parsed = {i for i, v in enumerate(values) if v is not None}
        literals = self._literals(texts, sizes, values, policy)
        compacts: dict[int, str | None] = {i: c for i, c in literals.items() if c is not None}
        if known is not None and values[0] is known:
            compacts[0] = texts[0]  # (its text is its compact JSON)
            parsed.discard(0)
        budget.check()
        if self._estimate and any(
            len(t) > LEDGER_EXACT_CHARS and v is None for t, v in zip(texts, values, strict=True)
        ):
            # (Settled mode: a huge text that is not a JSON value is answered as a text.)
            raise NeedsExactCounts("a text the ledger counts by its size")
        if all(v is None for v in values):
            self.forget(at.slot)
            if fmt == "gcf":
                return self._text_answer(result, at, "text", outcome, budget)
            return outcome
        join = policy.join and not literals
        pieces = pieces_of(blocks, values, join=join, content_length=len(content))
        answered = {i for piece in pieces for i in piece.blocks}
        outcome.lazy = [t for i, t in enumerate(texts) if i not in answered]
        # A delta replaces the whole result, so only a result answered as one value has one.
        whole = len(pieces) == 1 and len(pieces[0].blocks) == len(blocks)
        delta = whole and policy.delta and fmt == "gcf"
        if not delta:
            self.forget(at.slot)
        # A named result is one value that is the whole content (nothing else beside it).
        names = self.names
        named = whole and fmt == "gcf" and len(blocks) == len(content)
        named = named and names.may_name(sum(sizes))
        # Estimate mode mints once the choice is made (a close call leaves nothing spent).
        handle = names.memory.mint() if named and not self._estimate else None
        held = names.held(at, "json") if handle is not None else None
        # (Settled mode names after the choice; a value counted exactly leaves the name's
        # room in its limits as the exact path does, which a handle's shape stands for.)
        room = _ANY_HANDLE if named and self._settle_mode and handle is None else handle
        choices: list[Choice] = []
        plain = json_size = 0
        for piece in pieces:
            original = [texts[i] for i in piece.blocks]
            literal = piece.blocks[0] in literals
            choice, before, exact, plain, json_size = self._answer(
                piece.value,
                original,
                fmt,
                policy,
                at,
                delta,
                budget,
                (held, room),
                literal,
                self._compact(piece, texts, compacts, parsed),
            )
            choices.append(choice)
            outcome.bytes_before += before.size
            if not exact and self._estimate and choice.text is None and huge(original):
                # The exact path counts an original that wins exactly, where the ledger
                # would count a text this large by its size: so here.
                before = Cost(sum(self.count(t) for t in original), before.size)
                exact = True
            if exact:
                outcome.tokens_before += before.tokens
            else:
                outcome.owed.extend(original)
            estimated = not self._counted  # (estimate mode, and not counted exactly)
            if choice.text is None:
                outcome.bytes_after += before.size
                if estimated and not exact:
                    outcome.owed_after.extend(original)
                else:
                    outcome.tokens_after += before.tokens
            else:
                outcome.bytes_after += utf8_len(choice.text)
                if estimated:
                    outcome.owed_after.append(choice.text)
                else:
                    outcome.tokens_after += choice.tokens
        outcome.decision = ledger_decision(choices)
        block = None
        if named and self._estimate:
            self._naming_decided(choices[0], plain, sum(sizes))
            handle = names.memory.mint()
        if handle is not None:
            tally = self._tally if self._estimate else None
            if tally is not None:
                tally.texts.clear()
            choices[0], extra, block = names.name_value(
                choices[0], handle, plain, at, pieces[0].value, held, sum(sizes), json_size
            )
            if tally is None:
                outcome.tokens_after += extra
            elif extra:
                outcome.owed_after.extend(tally.texts)
        new_content = reassemble(content, blocks, pieces, [c.text for c in choices])
        if block is not None:
            # Not GCF: the handle travels in a text block of its own after the result's.
            base = new_content if new_content is not None else list(content)
            new_content = [*base, {"type": "text", "text": block}]
        if new_content is not None:
            outcome.result = {**result, "content": new_content}
        return outcome

    def _text_answer(
        self,
        result: dict[str, Any],
        at: Asked,
        kind: Kind,
        outcome: Outcome,
        budget: Budget | None = None,
    ) -> Outcome:
        """A text result (one text block, not JSON), or a file read: named with a ``ref=``
        block, or answered relative to the held text when the call named one."""
        content = content_of(result)
        if result.get("isError") is True or len(text_blocks(content)) != 1 or len(content) != 1:
            return outcome
        check = budget.check if budget is not None else (lambda: None)
        tally = self._tally if self._estimate else None
        if tally is not None:
            tally.texts.clear()
        answer = self.names.text_result(content[0], at, kind, self._answers, check)
        if answer is None:
            return outcome
        if answer.original is not None:  # counted now: no lazy count of the text
            outcome.lazy = []
            outcome.tokens_before = outcome.tokens_after = answer.original.tokens
            outcome.bytes_before = outcome.bytes_after = answer.original.size
        outcome.result = {**result, "content": answer.content}
        if answer.answer is not None:
            outcome.tokens_after, outcome.bytes_after = answer.tokens, answer.size
            outcome.decision = ledger_decision([answer.answer])
        else:
            # The text itself may be counted lazily (before and after alike); the block is new.
            if tally is not None:  # (estimate mode names no held text: only the block counted)
                outcome.owed_after.extend(tally.texts)
            else:
                outcome.tokens_after += answer.tokens
            outcome.bytes_after += answer.size
            if answer.fallback is not None:
                outcome.decision = answer.fallback.word
        return outcome

    def _answer(
        self,
        value: Any,
        original: list[str],
        fmt: Format,
        policy: ToolPolicy,
        at: Asked,
        delta: bool,
        budget: Budget,
        since: tuple[Held | None, str | None] = (None, None),
        literal: bool = False,
        compact: str | None = None,
    ) -> tuple[Choice, Cost, bool, int, int]:
        """The answer for one value, what its original texts cost, whether that cost is exact
        (else it is a lower bound, and the ledger counts the texts later), the tokens of the
        cheaper plain form (compact JSON or the original: what naming may not exceed) and the
        bytes of its compact JSON (what the held result's size is, when it is named).
        ``since``: the held result the call named (if usable) and the handle the result gets;
        ``literal``: the original is a Python literal (a GCF form must render back to it);
        ``compact``: the value's compact JSON, when it was made already.

        Every count that can decide the choice is exact; a form that lost a limited count
        carries ``limit + 1`` tokens, which keeps every comparison of the one answer policy
        (:func:`~gcfkit.answers.choose.choose`) as exact counts would have it. When the result
        may be named, the limits leave room for what the name costs, so that "no dearer than
        the plain form" is decided exactly too.
        """
        if compact is None:
            compact = dumps_compact(value)
        self._counted = not self._estimate
        built: list[Text] = []
        if self._estimate:
            prior = self._deltas.get(at.slot)
            try:
                return self._answer_estimated(
                    value, compact, original, fmt, policy, at, delta, budget, literal, built
                )
            except NeedsExactCounts:
                if not self._settle_mode:
                    raise
            # Settled mode: this value's close call (or delta) counted exactly, as the
            # exact path counts it, from the delta state it had.
            if prior is None:
                self._deltas.pop(at.slot, None)
            else:
                self._deltas[at.slot] = prior
            self._counted = True
        slot = at.slot
        since_held, handle = since
        slack = _NAMING_SLACK if handle is not None else 0
        json_size = utf8_len(compact)
        original_size = sum(utf8_len(t) for t in original)
        already_compact = len(original) == 1 and compact == original[0]
        budget.check()
        counts = Counts(self.count, self._limited, compact, original, already_compact, slack)
        gcf: tuple[str, Form] | None = None
        fallbacks: tuple[Fallback, ...] = ()
        # A Python literal's GCF must render back to its exact text (exact mode only).
        exact_literal = original[0] if literal and self.config.literals == "exact" else None
        if fmt == "gcf":
            cells = gcf_cells(value, stop=int(json_size / TOKENS_PER_CELL))
            if cells > json_size * DENSE_CELLS_PER_BYTE:
                # A sparse table: compact JSON first; GCF only if the cells leave it a chance.
                if cells * TOKENS_PER_CELL < counts.json_exact():
                    gcf, fallbacks = self._gcf(value, compact, counts, budget, exact_literal, built)
            else:
                gcf, fallbacks = self._gcf(value, compact, counts, budget, exact_literal, built)
        budget.check()
        best_full = gcf[1].tokens if gcf is not None else None
        json_form = Form(compact, counts.json(best_full), json_size)
        best = min(json_form.tokens, best_full) if best_full is not None else json_form.tokens
        before = Cost(counts.original(best), original_size)
        budget.check()
        candidates = Candidates(
            json=json_form,
            original=before,
            gcf=gcf[1] if gcf is not None and gcf[0] == "gcf" else None,
            dense=gcf[1] if gcf is not None and gcf[0] == "dense" else None,
            fallbacks=fallbacks,
        )
        step = self._delta_step(value, policy, slot) if delta else None
        if step is not None and step.wire is not None and not step.is_full:
            budget.check()
            best = _best_tokens(candidates, self._answers)
            bound = _largest_below(self._answers.delta_ratio * best)
            n = self._limited(step.wire, bound)
            wire_form = Form(step.wire, bound + 1 if n is None else n, utf8_len(step.wire))
            candidates = replace(candidates, delta=wire_form, unchanged=is_unchanged(step.wire))
        if since_held is not None:
            candidates = self.names.json_candidate(
                candidates, since_held, value, at.tool, handle, policy.key
            )
            budget.check()
        base = step.before.base if step is not None and step.before is not None else None
        update = step.after.base if step is not None else None

        def verify(choice: Choice) -> bool:
            if choice.text is None or choice.decision in ("gcf", "dense"):
                return True  # a full GCF form is checked before it is a candidate
            ok = (
                base is not None
                and update is not None
                and delta_rebuilds(base, choice.text, update)
            )
            budget.check()
            return ok

        choice = settle(candidates, self._answers, verify if self.config.selfcheck else None)
        if delta:
            held = held_after(choice, step, self._answers) if step is not None else None
            if held is None:
                self._deltas.pop(slot, None)
            else:
                self._deltas[slot] = held
        plain = min(json_form.tokens, before.tokens)
        return choice, before, counts.original_exact, plain, json_size

    def _answer_estimated(
        self,
        value: Any,
        compact: str,
        original: list[str],
        fmt: Format,
        policy: ToolPolicy,
        at: Asked,
        delta: bool,
        budget: Budget,
        literal: bool,
        built: list[Text] | None = None,
    ) -> tuple[Choice, Cost, bool, int, int]:
        """:meth:`_answer` from token estimates (estimate mode, no handle or held result):
        the choice exact counts make, or :class:`NeedsExactCounts` where an estimate cannot
        tell (every form the winner is compared with must be clearly dearer:
        :func:`~gcfkit.proxy.estimated.estimated_choice`)."""
        budget.check()
        if len(original) == 1 and compact == original[0] and huge(original):
            # The exact path may count compact JSON exactly, and so the original: a text the
            # ledger would otherwise count by its size.
            raise NeedsExactCounts("a text the ledger counts by its size")
        # What raises cheaply goes first: a delta, then forms that need exact counts; the
        # estimates (slower per byte than an exact count) come last.
        step = self._delta_step(value, policy, at.slot) if delta else None
        if step is not None and step.wire is not None and not step.is_full:
            raise NeedsExactCounts("a delta")
        exact_literal = original[0] if literal and self.config.literals == "exact" else None
        choice, before, plain, json_size = estimated_choice(
            value,
            compact,
            original,
            gcf=fmt == "gcf",
            count=self._estimated,
            # (Settled: dense definitions counted exactly, as on the exact path.)
            forms=self._forms if self._settle_mode else self._probe_forms,
            selfcheck=self._selfcheck_on,
            literal=exact_literal,
            answers=self._answers,
            check=budget.check,
            built=built if self._settle_mode else None,
        )
        if delta:
            held = held_after(choice, step, self._answers) if step is not None else None
            if held is None:
                self._deltas.pop(at.slot, None)
            else:
                self._deltas[at.slot] = held
        return choice, before, False, plain, json_size

    def _naming_decided(self, choice: Choice, plain: int, size: int) -> None:
        """Estimate mode: raise :class:`NeedsExactCounts` when whether
        :meth:`Names.name_value <gcfkit.answers.since.Names.name_value>` names ``choice`` is
        a close call (a GCF form that naming might make dearer than ``plain``)."""
        if choice.decision not in VERIFIED_FORMS or self.names.names_freely(size):
            return  # named regardless; or a plain form, which naming always makes dearer
        _, extra = self.names.name(choice, _ANY_HANDLE)
        if extra is not None and close(choice.tokens + extra, plain):
            raise NeedsExactCounts("whether naming makes the answer dearer")

    def _gcf(
        self,
        value: Any,
        compact: str,
        counts: Counts,
        budget: Budget,
        literal: str | None = None,
        built: list[Text] | None = None,
    ) -> tuple[tuple[str, Form] | None, tuple[Fallback, ...]]:
        """The best full GCF form (``gcf`` or ``dense``, :mod:`gcfkit.answers.forms`) if one can
        win: built (unless ``built`` has them already), the shorter counted in full and the
        other only up to it, and (when it beats the plain forms) decoded and compared with the
        value; else None and why not."""
        refused: list[Fallback] = []
        if built:  # (made already: settled mode's estimates, before a close call)
            made = list(built)
        else:
            made = self._forms.texts(value, refused, compact_size=utf8_len(compact))
        budget.check()
        # The likely winner first: the shorter form in characters.
        made.sort(key=lambda t: len(t.text))
        best: tuple[Text, int] | None = None
        while made:
            form = made.pop(0)
            if best is None:
                tokens = self.count(form.text)
            else:
                n = self._limited(form.text, best[1] - 1)
                tokens = best[1] if n is None else n  # None: not fewer, it cannot win
            budget.check()
            if best is not None and tokens >= best[1]:
                continue
            if counts.json(tokens) <= tokens or counts.original(tokens) <= tokens:
                best = (form, tokens)  # it loses to a plain form anyway: no need to check it
                continue
            if self._selfcheck_on and not self._forms.verified(form, value, compact, literal):
                refused.append(Fallback("selfcheck"))
                if form.kind == "dense" and not any(t.kind == "gcf" for t in made):
                    generic = self._forms.generic(value, refused)
                    if generic is not None and best is None:
                        made.append(generic)
                budget.check()
                continue
            budget.check()
            best = (form, tokens)
        if best is None:
            return None, tuple(refused)
        form, tokens = best
        return (form.kind, Form(form.text, tokens, utf8_len(form.text))), tuple(refused)

    @staticmethod
    def _compact(
        piece: Piece, texts: list[str], compacts: dict[int, str | None], parsed: set[int]
    ) -> str | None:
        """The compact JSON of a piece's value when it is known or can be written from its
        one text (:func:`~gcfkit.jsonio.compact_of`); None: dumped from the value (a joined
        piece, a Python literal in ``tuples`` mode)."""
        if len(piece.blocks) != 1:
            return None
        i = piece.blocks[0]
        if i in compacts:
            return compacts[i]
        return compact_of(texts[i], piece.value) if i in parsed else None

    def _literals(
        self, texts: list[str], sizes: list[int], values: list[Any], policy: ToolPolicy
    ) -> dict[int, str | None]:
        """Read the blocks that are Python literals (:mod:`gcfkit.answers.pyliteral`) into
        ``values``, in place; their positions, each with its value's compact JSON when that
        was made (not to be made twice). Exact literals only unless ``literals`` is
        ``tuples``; an exact literal is answered only when its compact JSON renders back to
        its text too (then every form sent is proven to)."""
        mode = self.config.literals
        found: dict[int, str | None] = {}
        if mode == "off":
            return found
        limit = self.config.max_text_bytes
        for i, (text, size) in enumerate(zip(texts, sizes, strict=True)):
            if values[i] is not None or not policy.min_bytes <= size <= limit:
                continue
            value = literal_value(text, tuples=mode == "tuples")
            if value is None:
                continue
            compact = dumps_compact(value) if mode == "exact" else None
            if compact is not None and not literal_json_renders(compact, text):
                continue
            values[i] = value
            found[i] = compact
        return found

    def _limited(self, text: str, limit: int) -> int | None:
        return self._limited_fn(text, limit, self.config.encoding)

    def _delta_step(self, value: Any, policy: ToolPolicy, slot: str) -> DeltaStep | None:
        """``value`` diffed against what the client holds for this call; None when it is not
        a keyed set (§10a.1), which also forgets what the client held."""
        key = identity_column(value, (policy.key,) if policy.key else IDENTITY_KEYS)
        update = keyed_set(value, key) if key is not None else None
        if update is None:
            self._deltas.pop(slot, None)
            return None
        try:
            return advance(self._deltas.get(slot), update, self._start_session)
        except (GCFError, ValueError, TypeError, KeyError):
            self._deltas.pop(slot, None)
            return None

    def _start_session(self, base: KeyedSet) -> DeltaSession:
        # The base is the logical set last delivered in any form: its pack root (§10a.3) is a
        # content hash, so a full result needs no pack_root header of its own. That keeps
        # first calls and re-anchors (every ``reanchor`` turns) at plain GCF size.
        return DeltaSession(base, reanchor=self._reanchor)


def _passes_files(is_file: bool, policy: ToolPolicy) -> bool:
    """Whether results of a tool that reads files (or not: ``is_file``) under ``policy`` go
    through byte for byte (a file read the policy leaves alone)."""
    return is_file and policy.format == "off"


def _best_tokens(candidates: Candidates, policy: AnswerPolicy) -> int:
    """The tokens of the best full form :func:`~gcfkit.answers.choose.choose` would pick."""
    return choose(candidates, policy).tokens


def _largest_below(bound: float) -> int:
    """The largest integer strictly below ``bound`` (-1 when there is none >= 0)."""
    n = int(bound)
    if n >= bound:
        n -= 1
    return max(n, -1)
