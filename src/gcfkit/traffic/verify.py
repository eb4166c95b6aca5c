"""``gcfkit verify``: recorded sessions replayed through the proxy, every result checked.

For each session (:mod:`gcfkit.traffic.corpus`), :class:`~gcfkit.traffic.replay.Replay`
feeds the proxy core the calls in the order they happened, and :func:`read_back` reads each
delivered result the way a client does, with a :class:`gcfkit.relative.Reader` that holds
what it was shown: GCF decoded (with the extensions gcfkit knows), compact JSON parsed, the
``ref=`` block that names a result taken off, joined blocks split again, relative answers
(``@@ unchanged``, ``@@ patch``, ``@@ edit``) applied to the result they name. The
**lossless gate** passes when every result reads back to exactly what the server sent: the
same JSON values (types, key order), texts and file contents byte for byte, every other block
and field untouched. The savings are the core's own ledger records, aggregated by
:mod:`gcfkit.measure.savings` (the numbers ``gcfkit stats`` shows).

With ``agent_since`` the replay plays an agent that passes ``"_since"`` on every repeated
call, naming the latest result it was shown for the same call: that exercises relative
answers, as ``bench/relative.py`` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import decode as gcf_decode
from ..answers.pyliteral import literal_value, renders
from ..errors import GCFError
from ..header import dense_header
from ..jsonio import loads_json, same_value
from ..ledger import LedgerEntry, LedgerRecord
from ..measure.savings import Summary, summarize
from ..proxy.core import Codec, ProxyConfig
from ..relative import Reader, is_answer, ref_of
from ..relative.wire import ref_block
from .corpus import Session, call_key
from .replay import Exchange, Replay

__all__ = ["CallCheck", "SessionResult", "VerifyResult", "read_back", "verify_sessions"]


@dataclass(frozen=True)
class CallCheck:
    """One call's gate result: ``ok``, and ``problem`` when not; ``how`` says what the client
    got (``as sent``, ``GCF``, ``compact JSON``, ``@@ patch``, ...)."""

    session: str
    file: str
    tool: str
    ok: bool
    how: str
    problem: str = ""
    record: LedgerRecord | None = None


@dataclass
class SessionResult:
    """One session's calls, checked."""

    name: str
    checks: list[CallCheck] = field(default_factory=list)


@dataclass
class VerifyResult:
    """Every session checked, with the savings summary of all their ledger records."""

    encoding: str
    sessions: list[SessionResult]
    summary: Summary
    agent_since: bool = False

    @property
    def checks(self) -> list[CallCheck]:
        """Every call's check, session by session."""
        return [c for s in self.sessions for c in s.checks]

    @property
    def failures(self) -> list[CallCheck]:
        """The calls that did not read back to what the server sent."""
        return [c for c in self.checks if not c.ok]

    @property
    def passed(self) -> bool:
        """The lossless gate: every call read back to what the server sent."""
        return not self.failures


class GateError(Exception):
    """A delivered result that does not read back to what the server sent."""


# ---------------------------------------------------------------------------------------
# Reading a result back, as a client does
# ---------------------------------------------------------------------------------------


def _json_of(text: str) -> Any:
    """The JSON value of a text holding a JSON object or array, else None."""
    stripped = text.lstrip(" \t\r\n")
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return loads_json(text)
    except (GCFError, RecursionError, ValueError):
        return None


def _read_text(text: str, reader: Reader) -> tuple[Any, str]:
    """What a delivered text stands for, and its form's name."""
    if is_answer(text):
        return reader.read(text), "@@ " + text.split(" ", 2)[1]
    head = text.split("\n", 1)[0]
    if text.startswith("GCF ") or dense_header(head):
        if head.startswith("GCF profile=generic"):
            return reader.read(text), "GCF"
        # Other profiles (graph, the extensions) are read by the front door's dispatcher.
        value = gcf_decode(text)
        handle = ref_of(text)
        if dense_header(head):
            if handle is not None:
                reader.hold(handle, value)  # a named dense result, as a client holds it
            return value, "GCF dense"
        return value, head.split(" ")[1].replace("profile=", "GCF ")
    value = _json_of(text)
    if value is None:
        raise GateError("the proxy changed a text that is not JSON")
    return value, "compact JSON"


def _same_block_fields(sent: dict[str, Any], got: dict[str, Any]) -> bool:
    return same_value(
        {k: v for k, v in sent.items() if k != "text"},
        {k: v for k, v in got.items() if k != "text"},
    )


def _is_text(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def read_back(sent: dict[str, Any], got: dict[str, Any], reader: Reader, *, file_tool: bool) -> str:
    """Check that ``got`` (the result a client received) reads back to ``sent`` (what the
    server wrote); returns how it was delivered, raises :class:`GateError` when it does not.
    ``reader`` holds the session's named results, and is updated as a client's would be.

    >>> r = Reader()
    >>> sent = {"content": [{"type": "text", "text": '[{"a": 1}, {"a": 2}]'}]}
    >>> got = {"content": [{"type": "text", "text": "GCF profile=generic\\n## [2]{a}\\n1\\n2\\n"}]}
    >>> read_back(sent, got, r, file_tool=False)
    'GCF'
    >>> bad = {"content": [{"type": "text", "text": "GCF profile=generic\\n## [2]{a}\\n1\\n3\\n"}]}
    >>> read_back(sent, bad, r, file_tool=False)
    Traceback (most recent call last):
    gcfkit.traffic.verify.GateError: text block 1 (GCF) does not read back to what the server sent
    """
    others_sent = {k: v for k, v in sent.items() if k != "content"}
    others_got = {k: v for k, v in got.items() if k != "content"}
    if not same_value(others_sent, others_got):
        raise GateError("a field other than content changed")
    blocks_sent = sent.get("content")
    blocks_got = got.get("content")
    if not isinstance(blocks_sent, list) or not isinstance(blocks_got, list):
        if same_value(blocks_sent, blocks_got):
            return "as sent"
        raise GateError("content changed")
    handle: str | None = None
    # The proxy's ref block comes last; a server's own last block that reads the same stays.
    if (
        len(blocks_got) >= 2
        and _is_text(blocks_got[-1])
        and set(blocks_got[-1]) == {"type", "text"}
        and not (
            len(blocks_got) == len(blocks_sent) and same_value(blocks_got[-1], blocks_sent[-1])
        )
    ):
        named = ref_of(blocks_got[-1]["text"])
        if named is not None and blocks_got[-1]["text"] == ref_block(named):
            handle = named
            blocks_got = blocks_got[:-1]
    forms: list[str] = []
    held: Any = None
    held_text = False
    if len(blocks_got) == len(blocks_sent):
        for i, (b_sent, b_got) in enumerate(zip(blocks_sent, blocks_got, strict=True), 1):
            if same_value(b_sent, b_got):
                if _is_text(b_sent):
                    text = b_sent["text"]
                    value = None if file_tool else _json_of(text)
                    if value is None and not file_tool:
                        value = literal_value(text)  # the proxy holds a literal as its value
                    held, held_text = (text, True) if value is None else (value, False)
                continue
            if not (_is_text(b_sent) and _is_text(b_got) and _same_block_fields(b_sent, b_got)):
                raise GateError(f"block {i} changed, and it is not a text block")
            original: str = b_sent["text"]
            want = None if file_tool else _json_of(original)
            literal = None if file_tool or want is not None else literal_value(original)
            try:
                value, form = _read_text(b_got["text"], reader)
            except GCFError as e:
                raise GateError(f"text block {i} does not decode: {e}") from e
            if literal is not None:
                # A Python literal: what was sent must render back to its exact text.
                if not renders(value, original):
                    raise GateError(f"text block {i} ({form}) does not render back to the literal")
                held, held_text = value, False
            elif want is None:
                # A file read or a non-JSON text: only a relative answer may stand for it, and
                # it must give back every byte.
                if not (is_answer(b_got["text"]) and value == original):
                    raise GateError(f"text block {i} ({form}) is not byte for byte what was sent")
                held, held_text = original, True
            else:
                if not same_value(value, want):
                    raise GateError(
                        f"text block {i} ({form}) does not read back to what the server sent"
                    )
                held, held_text = want, False
            forms.append(form)
    elif (
        len(blocks_got) == 1
        and len(blocks_sent) > 1
        and _is_text(blocks_got[0])
        and all(_is_text(b) for b in blocks_sent)
    ):
        want = [_json_of(b["text"]) for b in blocks_sent]
        if file_tool or any(not isinstance(v, dict) for v in want):
            raise GateError("blocks were joined that are not all JSON objects")
        try:
            value, form = _read_text(blocks_got[0]["text"], reader)
        except GCFError as e:
            raise GateError(f"the joined block does not decode: {e}") from e
        if not same_value(value, want):
            raise GateError(f"the joined block ({form}) does not read back to the blocks sent")
        forms.append(f"{form}, {len(blocks_sent)} blocks joined")
        held, held_text = want, False
    else:
        raise GateError(f"{len(blocks_sent)} content blocks became {len(blocks_got)}")
    if handle is not None and held is not None:
        reader.hold(handle, held, text=held_text)
    how = ", ".join(dict.fromkeys(forms)) or "as sent"
    return how + (" + ref" if handle is not None else "")


# ---------------------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------------------


def _latest_ref(result: dict[str, Any] | None) -> str | None:
    """The handle a delivered result was named by (its GCF header's or its ref block's)."""
    if result is None or not isinstance(result.get("content"), list):
        return None
    texts = [b["text"] for b in result["content"] if _is_text(b)]
    for text in (texts[-1:] + texts[:1]) if texts else []:
        handle = ref_of(text)
        if handle is not None:
            return handle
    return None


def _check(exchange: Exchange, reader: Reader, file_tool: bool, session: str) -> CallCheck:
    call = exchange.call

    def check(ok: bool, how: str, problem: str = "") -> CallCheck:
        return CallCheck(session, call.file, call.tool, ok, how, problem, exchange.record)

    if call.result is None:
        same = exchange.result is None and same_value(exchange.error, call.error)
        return check(same, "error, as sent", "" if same else "the JSON-RPC error changed")
    if exchange.result is None:
        return check(False, "", "the result became an error")
    try:
        how = read_back(call.result, exchange.result, reader, file_tool=file_tool)
    except GateError as e:
        return check(False, "", str(e))
    except Exception as e:  # the gate reports, it does not crash, whatever the reader hit
        return check(False, "", f"{type(e).__name__}: {e}")
    return check(True, how)


def verify_session(
    session: Session,
    config: ProxyConfig | None = None,
    *,
    agent_since: bool = False,
    progress: Callable[[], None] | None = None,
    codec: Codec | None = None,
) -> tuple[SessionResult, list[LedgerRecord]]:
    """Replay one session and check every call; returns the checks and the ledger records.
    ``codec`` replaces the core's (tests give it a broken one, to see the gate close)."""
    replay = Replay(session, config, codec=codec)
    files = replay.config.policy
    reader = Reader()
    latest: dict[str, str] = {}
    out = SessionResult(session.name)
    records: list[LedgerRecord] = []
    for call in session.calls:
        key = call_key(call.tool, call.arguments)
        arguments = call.arguments
        if agent_since and key in latest and isinstance(arguments, dict):
            arguments = {**arguments, "_since": latest[key]}
        exchange = replay.call(call, arguments)
        is_file = files.is_file_tool(call.tool) and files.for_tool(call.tool).format == "off"
        check = _check(exchange, reader, is_file, session.name)
        out.checks.append(check)
        if exchange.record is not None:
            records.append(exchange.record)
        handle = _latest_ref(exchange.result)
        if handle is not None:
            latest[key] = handle
        if progress is not None:
            progress()
    return out, records


def verify_sessions(
    sessions: list[Session],
    config: ProxyConfig | None = None,
    *,
    agent_since: bool = False,
    progress: Callable[[], None] | None = None,
    codec: Codec | None = None,
) -> VerifyResult:
    """Replay and check every session; the savings are summed by
    :func:`gcfkit.measure.savings.summarize`."""
    results: list[SessionResult] = []
    entries: list[LedgerEntry] = []
    encoding = (config or ProxyConfig()).encoding
    for session in sessions:
        result, records = verify_session(
            session, config, agent_since=agent_since, progress=progress, codec=codec
        )
        results.append(result)
        # A replay has no wall time: every record is stamped with the same instant.
        entries += [LedgerEntry("1970-01-01T00:00:00.000Z", r) for r in records]
    return VerifyResult(encoding, results, summarize(entries), agent_since)


def result_to_json(result: VerifyResult) -> dict[str, Any]:
    """A JSON-ready form of a verify run (``gcfkit verify --json``)."""
    from ..measure.savings import summary_to_json

    summary = summary_to_json(result.summary)
    summary.pop("first", None)
    summary.pop("last", None)
    return {
        "gate": "pass" if result.passed else "fail",
        "calls": len(result.checks),
        "failures": len(result.failures),
        "encoding": result.encoding,
        "agent_since": result.agent_since,
        "savings": summary,
        "checks": [
            {
                "session": c.session,
                "file": c.file,
                "tool": c.tool,
                "ok": c.ok,
                "how": c.how,
                "problem": c.problem,
                "decision": c.record.decision if c.record else None,
                "tokens_before": c.record.tokens_before if c.record else None,
                "tokens_after": c.record.tokens_after if c.record else None,
            }
            for c in result.checks
        ],
    }


def dumps_result(result: VerifyResult) -> str:
    """``result_to_json`` as indented JSON text."""
    return json.dumps(result_to_json(result), indent=2, ensure_ascii=False) + "\n"
