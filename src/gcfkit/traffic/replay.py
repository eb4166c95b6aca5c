"""A recorded session replayed through the proxy core, in process, in the order it happened.

:class:`Replay` feeds a :class:`~gcfkit.proxy.core.ProxyCore` the session's ``initialize``,
``tools/list`` and each ``tools/call`` (request, then the server's recorded answer), exactly as
the stdio shell would, and hands back what the client would have received and the ledger
record the core built. ``gcfkit verify`` and the benchmarks in ``bench/`` replay sessions
with it.

>>> import tempfile, pathlib
>>> from gcfkit.traffic.corpus import SessionWriter, read_session
>>> d = pathlib.Path(tempfile.mkdtemp()) / "shop"
>>> w = SessionWriter(d, "shop")
>>> rows = [{"id": i, "name": f"item {i}", "price": 10 + i} for i in range(20)]
>>> _ = w.write_call("list", {}, {"content": [{"type": "text", "text": json.dumps(rows)}]})
>>> replay = Replay(read_session(d))
>>> got = replay.call(replay.session.calls[0])
>>> got.result["content"][0]["text"].splitlines()[0]
'GCF profile=generic ref=...'
>>> got.record.decision, got.record.tokens_after < got.record.tokens_before
('gcf', True)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..proxy.core import Codec, ProxyConfig, ProxyCore
from ..proxy.record import LedgerRecord
from ..relative import ResultMemory
from .corpus import Call, Session

__all__ = ["Exchange", "Replay", "replay_config"]

#: Seconds per result in a replay: the live default (0.5 s) is about the relay's latency on a
#: busy machine; a replay measures what the proxy decides, so it gives the core more room.
REPLAY_TIME_BUDGET = 5.0


@dataclass(frozen=True)
class Exchange:
    """One replayed ``tools/call``: the call, the arguments the client sent and those the server
    received (``_format`` and ``_since`` are the proxy's), what the client received (``result``,
    or the JSON-RPC ``error``) and the ledger record (None with ``stats`` off)."""

    call: Call
    sent: Any
    forwarded: Any
    result: dict[str, Any] | None
    error: Any
    record: LedgerRecord | None


def replay_config(session: Session, config: ProxyConfig | None = None) -> ProxyConfig:
    """``config`` (default: the proxy's defaults with :data:`REPLAY_TIME_BUDGET`) with the
    session's name as the ledger's server name, unless the config names one."""
    config = config or ProxyConfig(time_budget=REPLAY_TIME_BUDGET)
    return config if config.server_name else replace(config, server_name=session.name)


def _line(message: dict[str, Any]) -> bytes:
    try:
        return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate travels as a \u escape
        return json.dumps(message).encode("ascii") + b"\n"


class Replay:
    """One session through one proxy core. :meth:`handshake` (called on the first
    :meth:`call` when not called before) replays ``initialize`` and ``tools/list``."""

    def __init__(
        self,
        session: Session,
        config: ProxyConfig | None = None,
        *,
        memory: Callable[[], ResultMemory] | None = None,
        codec: Codec | None = None,
    ) -> None:
        self.session = session
        self.config = replay_config(session, config)
        self.core = ProxyCore(self.config, codec, memory=memory)
        self.core.warm_up()
        self._id = 0
        self._started = False
        self.initialize: dict[str, Any] | None = None
        self.tools_list: dict[str, Any] | None = None

    def _exchange(
        self, method: str, params: Any, result: Any, error: Any = None
    ) -> tuple[Any, dict[str, Any]]:
        """Request and response through the core: (params the server got, message the client
        got)."""
        self._id += 1
        request = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        up = self.core.from_client(_line(request))
        forwarded = json.loads(up[-1].data).get("params") if up else params
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id}
        if result is None:
            response["error"] = error
        else:
            response["result"] = result
        line = _line(response)
        down = self.core.from_server(line)
        message = response if down[0].data == line else json.loads(down[0].data)
        return forwarded, message

    def handshake(self) -> None:
        """Replay the recorded ``initialize`` and ``tools/list`` (each only if recorded)."""
        if self._started:
            return
        self._started = True
        s = self.session
        if s.initialize is not None:
            params = {"protocolVersion": s.initialize.get("protocolVersion", "2025-11-25")}
            params |= {"capabilities": {}, "clientInfo": {"name": "gcfkit-verify"}}
            _, msg = self._exchange("initialize", params, s.initialize)
            self.initialize = msg.get("result")
        if s.tools_list is not None:
            _, msg = self._exchange("tools/list", {}, s.tools_list)
            self.tools_list = msg.get("result")

    def call(self, call: Call, arguments: Any = None) -> Exchange:
        """Replay one call; ``arguments`` replaces the recorded ones (an agent passing
        ``_since``, say)."""
        self.handshake()
        sent = call.arguments if arguments is None else arguments
        params = {"name": call.tool, "arguments": sent}
        forwarded, msg = self._exchange("tools/call", params, call.result, call.error)
        records = self.core.pop_records()
        result = msg.get("result")
        return Exchange(
            call=call,
            sent=sent,
            forwarded=forwarded.get("arguments") if isinstance(forwarded, dict) else None,
            result=result if isinstance(result, dict) else None,
            error=msg.get("error"),
            record=records[-1] if records else None,
        )
