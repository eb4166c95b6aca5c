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
from typing import Any, Final

from ..errors import GCFError
from ..jsonio import dumps_compact, loads_json

__all__ = [
    "CONNECTION_CLOSED",
    "RequestKey",
    "dump_message",
    "error_response",
    "parse_envelope",
    "request_key",
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
