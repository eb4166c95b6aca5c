"""Helpers the proxy's test modules share: JSON-RPC lines, a call through a core, what a
client holds after each answer, whether a process is alive. (One module, so that no test
module imports another.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gcfkit
from gcfkit import keyed
from gcfkit.proxy.core import Output, ProxyConfig, ProxyCore
from gcfkit.proxy.policy import Policy


def line(msg: Any) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def request(msg_id: Any, method: str, params: Any = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return line(msg)


def response(msg_id: Any, result: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": msg_id, "result": result})


def text_result(*texts: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t} for t in texts], **extra}


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2)


def call(
    core: ProxyCore,
    tool: str,
    result: Any,
    args: Any = None,
    msg_id: Any = 1,
) -> tuple[list[Output], list[Output]]:
    params: dict[str, Any] = {"name": tool, "arguments": {} if args is None else args}
    up = core.from_client(request(msg_id, "tools/call", params))
    down = core.from_server(response(msg_id, result))
    return up, down


#: A keyed set (delta on for list_*, keyed by order_id), large enough to be named.
DELTA_CONFIG = ProxyConfig(
    policy=Policy.from_mapping({"tools": {"list_*": {"delta": True, "key": "order_id"}}})
)


def orders(n: int, shift: int = 0) -> bytes:
    """The response line (id ``n``) of ``n`` orders, pretty-printed; ``shift`` changes the
    first order's total."""
    rows: list[dict[str, Any]] = [
        {"order_id": i, "status": f"open since day {i}", "total": i + (shift if i == 0 else 0)}
        for i in range(n)
    ]
    return response(n, text_result(json.dumps(rows, indent=2))).rstrip(b"\n")


def only(outputs: list[Output], to: str) -> bytes:
    assert len(outputs) == 1
    assert outputs[0].to == to
    return outputs[0].data


def delivered_result(outputs: list[Output]) -> dict[str, Any]:
    msg = json.loads(only(outputs, "client"))
    assert isinstance(msg["result"], dict)
    return msg["result"]


class Client:
    """What an agent holds after each answer, whatever its form."""

    def __init__(self) -> None:
        self.rows: Any = None

    def read(self, text: str) -> list[dict[str, Any]]:
        head = text.split("\n", 1)[0].split(" ")
        if "delta=true" in head:
            base = keyed.KeyedSet("id", ["id", "qty"], self.rows)
            self.rows = list(keyed.apply_delta(base, keyed.loads_delta(text)).rows)
        elif "unchanged=true" in head:
            pass
        elif text.startswith("GCF"):
            self.rows = gcfkit.loads(text)
        else:
            self.rows = json.loads(text)
        return by_id(self.rows)


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: str(r["id"]))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: only its parent's reaping is
    left, and the kernel has already freed everything else)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")
