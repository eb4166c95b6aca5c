#!/usr/bin/env python3
"""An MCP stdio server that misbehaves on request, for the proxy's fault tests (stdlib only).

Every line it writes to stdout is also appended, byte for byte, to ``--log FILE`` (and every
line it reads to ``--inlog FILE``), so a test can compare what the client received with what
the server sent, and what the server received with what the client sent. Process facts go to
``--pids FILE`` as JSON lines (``{"role": "server"|"child", "pid": ..., "pgid": ...}``).

Options: ``--children N`` starts N children that only sleep (the server's process group);
``--linger`` keeps running after stdin EOF; ``--ignore-term`` ignores SIGTERM (children too).

Tools (``tools/call`` name, arguments):

* ``echo`` ``{...}``: the arguments as a JSON text block;
* ``text`` ``{"text": s}``: ``s`` as the text block, as it is (``readFile`` and ``bash``
  too: a file read and a shell, by their names);
* ``records`` ``{"n": N, "shape": "union"|"uniform"}``: N records as JSON text
  (``union``: record i is ``{"k<i>": i}``, the field union grows with every row);
* ``blob`` ``{"bytes": N}``: a JSON string of N bytes in one text block;
* ``notify`` ``{"n": N}``: N ``notifications/message`` before the answer;
* ``ask``: a ``roots/list`` request to the client; the call is answered with its answer;
* ``crash``: exits with status 3 without answering;
* ``sleep`` ``{"seconds": s}``: answers after ``s`` seconds (nothing else is read meanwhile);
* ``garbage``: a line that is not JSON and a partial line, then the answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

ARGS = sys.argv[1:]


def option(name: str) -> str | None:
    return ARGS[ARGS.index(name) + 1] if name in ARGS else None


LOG = option("--log")
INLOG = option("--inlog")
PIDS = option("--pids")
CHILDREN = int(option("--children") or 0)
LINGER = "--linger" in ARGS
IGNORE_TERM = "--ignore-term" in ARGS

_out = sys.stdout.buffer
_log = open(LOG, "ab", buffering=0) if LOG else None  # noqa: SIM115
_inlog = open(INLOG, "ab", buffering=0) if INLOG else None  # noqa: SIM115


def note(role: str, pid: int) -> None:
    if PIDS:
        with open(PIDS, "a", encoding="utf-8") as f:
            f.write(json.dumps({"role": role, "pid": pid, "pgid": os.getpgid(pid)}) + "\n")


def emit(data: bytes) -> None:
    _out.write(data)
    _out.flush()
    if _log is not None:
        _log.write(data)


def send(msg: dict[str, Any]) -> None:
    emit(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\n")


def result(msg_id: Any, text: str) -> None:
    send({"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": text}]}})


TOOLS = [
    {
        "name": name,
        "description": f"fault server tool {name}",
        "inputSchema": {"type": "object", "properties": {}},
    }
    for name in (
        "echo",
        "text",
        "readFile",
        "bash",
        "records",
        "blob",
        "notify",
        "ask",
        "crash",
        "garbage",
        "sleep",
    )
]


def records(n: int, shape: str) -> list[dict[str, Any]]:
    if shape == "union":
        return [{f"k{i}": i} for i in range(n)]
    return [{"id": i, "name": f"item {i}", "price": i * 1.5, "ok": i % 2 == 0} for i in range(n)]


def call(msg_id: Any, name: str, args: dict[str, Any], asks: dict[Any, Any]) -> None:
    if name == "echo":
        result(msg_id, json.dumps(args))
    elif name in ("text", "readFile", "bash"):
        result(msg_id, str(args.get("text", "")))
    elif name == "records":
        result(msg_id, json.dumps(records(int(args.get("n", 10)), str(args.get("shape", "")))))
    elif name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        result(msg_id, json.dumps({"slept": args.get("seconds", 1)}))
    elif name == "blob":
        result(msg_id, json.dumps("x" * int(args.get("bytes", 10))))
    elif name == "notify":
        for i in range(int(args.get("n", 3))):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": f"step {i} of {msg_id}"},
                }
            )
        result(msg_id, json.dumps({"done": msg_id}))
    elif name == "ask":
        ask_id = f"ask-{msg_id}"
        asks[ask_id] = msg_id
        send({"jsonrpc": "2.0", "id": ask_id, "method": "roots/list"})
    elif name == "crash":
        os._exit(3)
    elif name == "garbage":
        emit(b"this is not json\n")
        emit(b'{"jsonrpc":"2.0","method":"notifications/mess')
        emit(b'age","params":{"level":"info","data":"split"}}\n')
        result(msg_id, json.dumps({"after": "garbage"}))
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": name}})


def handle(msg: dict[str, Any], asks: dict[Any, Any]) -> None:
    if "method" not in msg:  # a response to one of our requests
        origin = asks.pop(msg.get("id"), None)
        if origin is not None:
            result(origin, json.dumps(msg.get("result")))
        return
    method = msg["method"]
    if "id" not in msg:
        return
    msg_id = msg["id"]
    params = msg.get("params") or {}
    if method == "initialize":
        version = params.get("protocolVersion", "2025-06-18")
        send(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "result": {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fault", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        call(msg_id, params.get("name", ""), params.get("arguments") or {}, asks)
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "result": {}})


def main() -> None:
    if IGNORE_TERM:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("server", os.getpid())
    for _ in range(CHILDREN):
        code = "import signal, time\n"
        if IGNORE_TERM:
            code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        code += "while True: time.sleep(1)\n"
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
        note("child", child.pid)
    asks: dict[Any, Any] = {}
    for line in sys.stdin.buffer:
        if _inlog is not None:
            _inlog.write(line)
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            handle(msg, asks)
    while LINGER:
        time.sleep(1)


if __name__ == "__main__":
    main()
