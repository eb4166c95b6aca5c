"""JSON-RPC envelopes as the proxy sees them: one line in, a message or nothing; a message
out, one line.

The proxy re-serializes a message only when it changed it, and only when that keeps the
JSON value (:func:`parse_envelope` says whether it does); everything else is relayed as the
bytes that came in.

>>> msg, safe = parse_envelope(b'{"jsonrpc":"2.0","id":7,"method":"ping"}\\n')
>>> safe, request_key(msg["id"]), dump_message(msg)
(True, ('int', 7), b'{"jsonrpc":"2.0","id":7,"method":"ping"}\\n')
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from .. import speedups
from ..errors import GCFError
from ..jsonio import dumps_compact, loads_json

try:  # the C string scanner json's own decoder uses
    from json.decoder import c_scanstring as _scanstring  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a Python without json's C speedups
    from json.decoder import py_scanstring as _scanstring  # type: ignore[attr-defined]

__all__ = [
    "CONNECTION_CLOSED",
    "Envelope",
    "RequestKey",
    "dump_edited",
    "dump_message",
    "error_response",
    "leading_members",
    "parse_envelope",
    "request_key",
    "sniff_envelope",
    "splice_texts",
]

#: The JSON-RPC error code the SDKs use for a connection that closed under a request.
CONNECTION_CLOSED: Final = -32000

#: A request id as a dict key: its JSON type and its value (1 and "1" are different ids).
RequestKey = tuple[str, Any]


def parse_envelope(line: bytes) -> tuple[Any, bool]:
    """(message, safe): ``safe`` means re-serializing keeps the JSON value (no duplicate keys,
    no NaN/Infinity/overflowing numbers). ``(None, False)`` for anything that is not JSON.

    >>> parse_envelope(b'{"id":1,"id":2}')
    ({'id': 2}, False)
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None, False
    try:
        return loads_json(text), True
    except (GCFError, RecursionError):
        pass
    try:
        return json.loads(text), False
    except (ValueError, RecursionError):
        return None, False


def dump_message(msg: Any) -> bytes:
    """One LF-terminated UTF-8 line of compact JSON.

    >>> dump_message({"s": "\\udc80"})  # a lone surrogate cannot be UTF-8: escaped instead
    b'{"s":"\\\\udc80"}\\n'
    """
    try:
        return dumps_compact(msg).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8; \\u escapes keep the same JSON value.
        return json.dumps(msg, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def dump_edited(new: Any, old: Any, line: bytes) -> bytes:
    """:func:`dump_message` of ``new``, an edit of ``old`` (the message parsed from ``line``),
    with every number the edit kept spelled as it was in ``line``: a parse and a dump would
    turn ``-0`` into ``0`` and ``1E2`` into ``100.0``, and a server (or client) may tell.

    Kept means the same object: the core builds edits from the parts it does not change
    (``{**params, "arguments": rest}``), so those are found by identity and written from a
    second parse of ``line`` that keeps each number's text.

    >>> line = b'{"id":1,"params":{"a":-0,"b":1E2,"_format":"json"}}\\n'
    >>> old, _ = parse_envelope(line)
    >>> new = {**old, "params": {k: v for k, v in old["params"].items() if k != "_format"}}
    >>> dump_edited(new, old, line)
    b'{"id":1,"params":{"a":-0,"b":1E2}}\\n'
    """
    try:
        literal = json.loads(line, parse_int=_Number, parse_float=_Number)
    except (ValueError, RecursionError):
        return dump_message(new)
    numbers: list[str] = []
    tree = _with_sentinels(_graft(new, old, literal), numbers)
    if not numbers:
        return dump_message(new)
    out = dump_message(tree)
    if out.count(_SENTINEL_MARK) != len(numbers):  # the message itself holds the mark
        return dump_message(new)
    for i, text in enumerate(numbers):
        out = out.replace(b'"' + _sentinel(i).encode() + b'"', text.encode(), 1)
    return out


#: A member named "text" as JSON writes it, up to its string value's opening quote.
_TEXT_MEMBER: Final = re.compile(r'"text"[ \t\n\r]*:[ \t\n\r]*"')


def splice_texts(line: bytes, msg: dict[str, Any], new: dict[str, Any]) -> bytes | None:
    """The response ``line`` (``msg`` parsed from it, without duplicate keys) with its
    result replaced by ``new``, when ``new`` differs from ``old`` only in the texts of its
    content blocks: each new text written, as :func:`dump_message` writes a string, where
    the old one stood, and every other byte as the server wrote it. No parse or dump of the
    whole message: at 1 MB this is a few milliseconds where :func:`dump_edited` takes 15-20.

    Blocks ``new`` adds after the old ones (a ``ref=`` block) are written, as
    :func:`dump_message` writes them, before the bracket that closes the content array, found
    by reading the envelope's members (not the texts of the blocks ahead of it).

    None when that cannot be done exactly (then :func:`dump_edited`): blocks removed or
    otherwise changed; a member named ``text`` not spelled plainly in ``line``; an old
    text that is the value of more than one ``text`` member.

    >>> line = b'{"id": 1, "result": {"content": [{"type": "text", "text": "[1, 2]"}]}}'
    >>> msg = json.loads(line)
    >>> old = msg["result"]
    >>> new = {**old, "content": [{**old["content"][0], "text": "[1,2]"}]}
    >>> splice_texts(line, msg, new)
    b'{"id": 1, "result": {"content": [{"type": "text", "text": "[1,2]"}]}}\\n'
    """
    old = msg.get("result")
    changes = _text_edits(old, new) if type(old) is dict else None
    if changes is None:
        return None
    edits, added = changes
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    cuts: list[tuple[int, int, str]] = []
    if edits and not _text_cuts(text, msg, edits, cuts):
        return None
    if added:
        was = msg["result"]["content"]
        # The last old block's text found exactly: the array closes after that block.
        last_edited = bool(was) and new["content"][len(was) - 1] is not was[-1]
        close = _block_close(text, cuts[-1][1]) if last_edited else _content_close(text)
        if close is None:
            return None
        blocks = ",".join(dumps_compact(block) for block in added)
        cuts.append((close[0], close[0], "," + blocks if close[1] else blocks))
    cuts.sort()
    parts: list[str] = []
    at = 0
    for start, end, literal in cuts:
        if start < at:
            return None
        parts += (text[at:start], literal)
        at = end
    parts.append(text[at:].rstrip(" \t\r\n"))
    parts.append("\n")
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:  # pragma: no cover - dumps_compact escapes lone surrogates
        return None


def _text_cuts(
    text: str,
    msg: dict[str, Any],
    edits: list[tuple[dict[str, Any], str]],
    cuts: list[tuple[int, int, str]],
) -> bool:
    """Add to ``cuts`` where the text of each block of ``edits`` stands in ``text`` (the line
    ``msg`` was parsed from) and its new text; False when that is not known exactly.

    Every member named ``text`` whose value is a string spelled plainly is found in the line
    (the accelerator's ``text_spans``, or :func:`_text_spans_py`); when they are all the
    ``text`` members ``msg`` has (:func:`_text_holders`), the k-th found is the k-th in
    ``msg`` in document order (json keeps a message's key order, and it has no duplicate
    keys), so each edited block's text is where its member stands: no old text is compared,
    encoded or decoded (a 1 MB text costs one scan for its closing quote).
    """
    accel = speedups.accelerator
    spans = accel.text_spans(text) if accel is not None else _text_spans_py(text)
    holders = _text_holders(msg)
    if spans is None or holders is None or len(spans) != len(holders):
        return False  # one is spelled with escapes, or holds no string: which is which?
    at = {id(holder): k for k, holder in enumerate(holders)}
    for block, after in edits:
        k = at.get(id(block))
        if k is None:
            return False
        start, end = spans[k]
        cuts.append((start, end, dumps_compact(after)))
    return True


def _text_spans_py(text: str) -> list[tuple[int, int]] | None:
    """Where the string value of each member named ``text`` spelled plainly stands in
    ``text`` (one valid JSON message), in document order: the index of its opening quote
    and the index after its closing one; None when a string does not end. (The reference of
    the accelerator's ``text_spans``.)

    An unescaped quote followed by ``text"``, a colon and a quote opens a member name and
    its string value: in valid JSON a closing quote is never followed by a letter.

    >>> _text_spans_py('{"text": "a\\\\"b", "x": {"text":"c"}, "y": "text"}')
    [(9, 15), (30, 33)]
    """
    spans: list[tuple[int, int]] = []
    start = text.find('"text"')
    while start >= 0:
        m = _TEXT_MEMBER.match(text, start)
        at, start = start, text.find('"text"', start + 6)
        if m is None:
            continue
        slashes = 0
        while at - slashes > 0 and text[at - slashes - 1] == "\\":
            slashes += 1
        if slashes % 2:
            continue  # an escaped quote: inside a string
        try:
            _, end = _scanstring(text, m.end(), True)
        except ValueError:
            return None
        spans.append((m.end() - 1, end))
        if start >= 0 and start < end:
            start = text.find('"text"', end)
    return spans


def _text_holders(value: Any) -> list[dict[str, Any]] | None:
    """The objects in ``value`` that have a member named ``text``, in the document order of
    those members (an object's ``text`` member before the members that follow it); None
    past a depth no message of the protocol reaches (the caller does not splice)."""
    holders: list[dict[str, Any]] = []
    if not _holders(value, holders, 0):
        return None
    return holders


def _holders(value: Any, out: list[dict[str, Any]], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if type(value) is dict:
        for key, item in value.items():
            if key == "text":
                out.append(value)
            if (type(item) is dict or type(item) is list) and not _holders(item, out, depth + 1):
                return False
    elif type(value) is list:
        for item in value:
            if (type(item) is dict or type(item) is list) and not _holders(item, out, depth + 1):
                return False
    return True


#: How deep :func:`_text_holders` looks (a recursion, bounded well inside Python's).
_MAX_DEPTH: Final = 200


#: Whitespace JSON allows between tokens (as a pattern).
_JSON_WS: Final = re.compile(r"[ \t\n\r]*")
_SCAN_ONCE: Final = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _content_close(text: str) -> tuple[int, bool] | None:
    """Where the bracket closing ``result.content`` stands in ``text`` (one JSON-RPC
    response, valid JSON without duplicate keys), and whether the array holds anything;
    None when it is not there. The members on the way are read as JSON reads them (a
    string's end by the scanner, a value skipped by parsing it); the texts in the blocks
    are skipped the same way, which costs a string's decode, not a message's dump."""
    try:
        at = _object_member(text, 0, "result")
        if at is None:
            return None
        at = _object_member(text, at, "content")
        if at is None or text[at] != "[":
            return None
        at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]
        if text[at] == "]":
            return at, False
        while True:
            _, at = _SCAN_ONCE(text, at)
            at = _JSON_WS.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == "]":
                return at, True
            if text[at] != ",":
                return None
            at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]
    except (ValueError, IndexError, StopIteration, RecursionError):
        return None


def _block_close(text: str, at: int) -> tuple[int, bool] | None:
    """Where the bracket closing ``result.content`` stands in ``text``, from ``at``: the
    end of a member's value in the array's last block (the rest of its members, its
    closing brace, then the bracket)."""
    try:
        while True:
            at = _JSON_WS.match(text, at).end()  # type: ignore[union-attr]
            if text[at] == "}":
                break
            if text[at] != ",":
                return None
            at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]
            if text[at] != '"':
                return None
            _, at = _scanstring(text, at + 1, True)
            at = _JSON_WS.match(text, at).end()  # type: ignore[union-attr]
            if text[at] != ":":
                return None
            _, at = _SCAN_ONCE(text, _JSON_WS.match(text, at + 1).end())  # type: ignore[union-attr]
        at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]
        return (at, True) if text[at] == "]" else None
    except (ValueError, IndexError, StopIteration, RecursionError):
        return None


def _object_member(text: str, at: int, name: str) -> int | None:
    """Where the value of the member ``name`` of the object at ``at`` (after whitespace)
    starts in ``text``, or None when it has none."""
    at = _JSON_WS.match(text, at).end()  # type: ignore[union-attr]
    if text[at] != "{":
        return None
    at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]
    if text[at] == "}":
        return None
    while True:
        if text[at] != '"':
            return None
        key, at = _scanstring(text, at + 1, True)
        at = _JSON_WS.match(text, at).end()  # type: ignore[union-attr]
        if text[at] != ":":
            return None
        at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]
        if key == name:
            return at
        _, at = _SCAN_ONCE(text, at)
        at = _JSON_WS.match(text, at).end()  # type: ignore[union-attr]
        if text[at] != ",":
            return None
        at = _JSON_WS.match(text, at + 1).end()  # type: ignore[union-attr]


def _text_edits(
    old: dict[str, Any], new: dict[str, Any]
) -> tuple[list[tuple[dict[str, Any], str]], list[Any]] | None:
    """(old block, new text) of each content block ``new`` changes only the text of, and the
    blocks it adds after the old ones, when that is all it changes (and it changes
    something); else None."""
    if new.keys() != old.keys():
        return None
    if any(new[k] is not old[k] for k in old if k != "content"):
        return None
    was, now = old.get("content"), new.get("content")
    if type(was) is not list or type(now) is not list or len(was) > len(now):
        return None
    edits: list[tuple[dict[str, Any], str]] = []
    for a, b in zip(was, now[: len(was)], strict=True):
        if a is b:
            continue
        if type(a) is not dict or type(b) is not dict or a.keys() != b.keys():
            return None
        if any(b[k] is not a[k] for k in a if k != "text"):
            return None
        if type(a.get("text")) is not str or type(b.get("text")) is not str:
            return None
        edits.append((a, b["text"]))
    added = now[len(was) :]
    return (edits, added) if edits or added else None


class _Number(str):
    """A number's text, as ``line`` spells it (a parse hook's result)."""

    __slots__ = ()


_SENTINEL_MARK: Final = b"\\u0000gcfkit-number-"


def _sentinel(i: int) -> str:
    # dump_message writes U+0000 as \u0000: the mark is the escaped text.
    return f"\\u0000gcfkit-number-{i}\\u0000"


def _graft(new: Any, old: Any, literal: Any) -> Any:
    """``new`` with the parts it kept from ``old`` replaced by ``literal``'s (same shape as
    ``old``, numbers as :class:`_Number`)."""
    if new is old:
        return literal
    if type(new) is dict and type(old) is dict and type(literal) is dict:
        return {
            k: _graft(v, old[k], literal[k]) if k in old and k in literal else v
            for k, v in new.items()
        }
    if type(new) is list and type(old) is list and type(literal) is list:
        if len(old) != len(literal):
            return new
        where = {id(item): i for i, item in enumerate(old)}
        return [
            _graft(item, old[where[id(item)]], literal[where[id(item)]])
            if id(item) in where
            else item
            for item in new
        ]
    return new


def _with_sentinels(value: Any, numbers: list[str]) -> Any:
    if isinstance(value, _Number):
        numbers.append(str.__str__(value))
        return "\x00gcfkit-number-" + str(len(numbers) - 1) + "\x00"
    if type(value) is dict:
        return {k: _with_sentinels(v, numbers) for k, v in value.items()}
    if type(value) is list:
        return [_with_sentinels(v, numbers) for v in value]
    return value


def request_key(value: Any) -> RequestKey | None:
    """The key of a JSON-RPC id, or None when ``value`` is not a valid id.

    >>> request_key(1) != request_key("1"), request_key(True), request_key(None)
    (True, None, None)
    """
    # 1 and "1" are different JSON-RPC ids; bool is not an id at all.
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (str, int, float)):
        return (type(value).__name__, value)
    return None


def error_response(key: RequestKey, code: int, message: str) -> bytes:
    """The line of a JSON-RPC error response to the request with ``key``.

    >>> error_response(("int", 3), CONNECTION_CLOSED, "gone")
    b'{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"gone"}}\\n'
    """
    return dump_message(
        {"jsonrpc": "2.0", "id": key[1], "error": {"code": code, "message": message}}
    )


# ---------------------------------------------------------------------------------------
# The envelope of a huge line, without parsing it
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Envelope:
    """The top level of a JSON-RPC object read from its two ends (see :func:`sniff_envelope`):
    its scalar members (``id``, ``method``, ``jsonrpc``...) and the key of its first member
    that is an object or array (``result``, ``error``, ``params``), if any."""

    members: dict[str, Any]
    container: str | None
    #: Where the first container's value starts (its ``{`` or ``[``); -1 without one.
    container_at: int

    @property
    def key(self) -> RequestKey | None:
        """The request key of its ``id``, if it has a valid one."""
        return request_key(self.members.get("id"))

    @property
    def is_response(self) -> bool:
        """Whether it is a response (an ``id`` and a result or error, no method)."""
        return (
            "method" not in self.members
            and "id" in self.members
            and self.container in ("result", "error")
        )


_WS: Final = b" \t\r\n"
_SCALAR_END: Final = re.compile(rb"[-+.0-9A-Za-z]+")
_SCALAR_START: Final = re.compile(rb"[-+.0-9A-Za-z]+$")
#: Escaped quotes a string may hold before the sniffer gives up on it (a top-level string
#: member is short in any JSON-RPC message; a huge one goes to the full parser).
_MAX_QUOTES: Final = 64


def sniff_envelope(line: bytes) -> Envelope | None:
    """The envelope of the JSON object ``line`` (bytes), read from both ends in time that does
    not grow with what its containers hold: a 64 MB result costs what a 64-byte one does.

    Members before the first object/array member are read from the front and members after
    the last one from the back, which finds ``id`` and ``method`` wherever SDKs put them
    (Python writes ``jsonrpc, id, result``; TypeScript ``result, jsonrpc, id``). None when
    the line is not that simple (then the caller parses it in full). Only the relay's
    bookkeeping reads this; what is relayed is the line itself.

    >>> e = sniff_envelope(b'{"result":{"content":[]},"jsonrpc":"2.0","id":7}\\n')
    >>> e.members, e.container, e.is_response
    ({'jsonrpc': '2.0', 'id': 7}, 'result', True)
    >>> sniff_envelope(b'[1, 2]') is None
    True
    """
    n = len(line)
    start = _skip_ws(line, 0, n)
    end = n
    while end > start and line[end - 1] in _WS:
        end -= 1
    if start >= end or line[start] != 0x7B or line[end - 1] != 0x7D:  # { ... }
        return None
    forward = _forward_members(line, start, end)
    if forward is None:
        return None
    members, container, pos = forward
    if container is None:
        return Envelope(members, None, -1) if pos == end else None
    # Backward: ..., "key": scalar } until the end of the last container.
    back = end - 1
    tail: dict[str, Any] = {}
    while True:
        back = _skip_ws_back(line, back, pos)
        if back <= pos:
            return None
        c = line[back - 1]
        if c in b"}]":
            break
        value = _scalar_backward(line, back, pos)
        if value is None:
            return None
        item, back = value
        back = _skip_ws_back(line, back, pos)
        if back <= pos or line[back - 1] != 0x3A:
            return None
        back = _skip_ws_back(line, back - 1, pos)
        got_key = _string_backward(line, back, pos)
        if got_key is None or not isinstance(got_key[0], str):
            return None
        key, back = got_key
        tail.setdefault(key, item)
        back = _skip_ws_back(line, back, pos)
        if back <= pos or line[back - 1] != 0x2C:
            return None
        back -= 1
    for key, item in reversed(tail.items()):
        members.setdefault(key, item)
    return Envelope(members, container, pos)


def leading_members(line: bytes, start: int) -> dict[str, Any] | None:
    """The scalar members of the JSON object that opens at ``start``, up to its first
    object or array member (all of them when it has none); None when it cannot be read so.

    >>> leading_members(b'{"params":{"name":"write","arguments":{"a":1}}}', 10)
    {'name': 'write'}
    """
    got = _forward_members(line, start, len(line))
    return None if got is None else got[0]


def _forward_members(
    line: bytes, start: int, end: int
) -> tuple[dict[str, Any], str | None, int] | None:
    """From the ``{`` at ``start``: its scalar members up to the first container, that
    container's key and the position of its first character (no container: None and the
    position after the closing brace)."""
    if start >= end or line[start] != 0x7B:
        return None
    members: dict[str, Any] = {}
    pos = start + 1
    while True:
        pos = _skip_ws(line, pos, end)
        if pos >= end:
            return None
        if line[pos] == 0x7D:  # }
            return members, None, pos + 1
        got = _string_forward(line, pos, end)
        if got is None or not isinstance(got[0], str):
            return None
        key, pos = got
        pos = _skip_ws(line, pos, end)
        if pos >= end or line[pos] != 0x3A:  # :
            return None
        pos = _skip_ws(line, pos + 1, end)
        if pos >= end:
            return None
        if line[pos] in b"{[":
            return members, key, pos
        value = _scalar_forward(line, pos, end)
        if value is None:
            return None
        members[key], pos = value
        pos = _skip_ws(line, pos, end)
        if pos < end and line[pos] == 0x2C:  # ,
            pos += 1


def _skip_ws(line: bytes, pos: int, end: int) -> int:
    while pos < end and line[pos] in _WS:
        pos += 1
    return pos


def _skip_ws_back(line: bytes, back: int, floor: int) -> int:
    while back > floor and line[back - 1] in _WS:
        back -= 1
    return back


def _string_forward(line: bytes, pos: int, end: int) -> tuple[Any, int] | None:
    if line[pos] != 0x22:  # "
        return None
    i = pos + 1
    for _ in range(_MAX_QUOTES):
        j = line.find(b'"', i, end)
        if j < 0:
            return None
        k = j
        while line[k - 1] == 0x5C:  # backslash
            k -= 1
        if (j - k) % 2 == 0:
            return _decode_string(line[pos : j + 1]), j + 1
        i = j + 1
    return None


def _string_backward(line: bytes, back: int, floor: int) -> tuple[Any, int] | None:
    if back <= floor or line[back - 1] != 0x22:
        return None
    close = back - 1
    i = close
    for _ in range(_MAX_QUOTES):
        j = line.rfind(b'"', floor, i)
        if j < 0:
            return None
        k = j
        while k > floor and line[k - 1] == 0x5C:
            k -= 1
        if (j - k) % 2 == 0:
            return _decode_string(line[j : close + 1]), j
        i = j
    return None


def _decode_string(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return None


def _scalar_forward(line: bytes, pos: int, end: int) -> tuple[Any, int] | None:
    if line[pos] == 0x22:
        got = _string_forward(line, pos, end)
        return got
    m = _SCALAR_END.match(line, pos, end)
    if m is None:
        return None
    try:
        return json.loads(m.group()), m.end()
    except ValueError:
        return None


def _scalar_backward(line: bytes, back: int, floor: int) -> tuple[Any, int] | None:
    if line[back - 1] == 0x22:
        return _string_backward(line, back, floor)
    m = _SCALAR_START.search(line, max(floor, back - 64), back)
    if m is None:
        return None
    try:
        return json.loads(m.group()), m.start()
    except ValueError:
        return None
