"""``gcfkit doctor``: does each wrapped server really start and answer through the proxy?

For each server entry of the selected client configs, :func:`check_entry` runs the entry's
command exactly as a client would (its ``command``, ``args``, ``env`` and ``cwd``), which for
a wrapped entry is ``gcfkit proxy ... -- SERVER``, and speaks MCP to it over stdio:
``initialize``, ``notifications/initialized``, ``tools/list``. Every step has a deadline;
the process runs in its own process group and is stopped the way the MCP stdio transport
says (stdin closed, then SIGTERM, then SIGKILL, all to the group) and reaped, whatever
happened. :func:`check_ledger` tells whether the proxy can write its savings ledger.

Stdlib only, like the rest of :mod:`gcfkit.clients`.

>>> import sys
>>> check = check_entry({"command": sys.executable, "args": ["-c", "pass"]}, timeout=10)
>>> check.ok, check.step
(False, 'initialize')
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from .. import __version__
from ..paths import default_ledger_path

__all__ = ["EntryCheck", "LedgerCheck", "check_entry", "check_ledger", "ledger_of"]

_PROTOCOL: Final = "2025-11-25"


@dataclass(frozen=True)
class EntryCheck:
    """What starting one entry showed: ``ok``, the ``step`` reached (``start``,
    ``initialize``, ``tools/list``, ``done``), the server's name and version, how many tools,
    whether the GCF primer was in its instructions (the proxy is in the path), the seconds
    it took, and on failure what went wrong and the end of the server's stderr."""

    ok: bool
    step: str
    problem: str = ""
    server: str = ""
    version: str = ""
    tools: int = 0
    primer: bool = False
    seconds: float = 0.0
    stderr: str = ""


@dataclass(frozen=True)
class LedgerCheck:
    """Whether the proxy can append to ``path`` (``problem`` says why not)."""

    path: Path
    ok: bool
    problem: str = ""


def ledger_of(proxy_args: tuple[str, ...] | list[str]) -> Path | None:
    """The ledger a wrapped entry's proxy writes: ``--ledger FILE`` if it has one, None
    when it has ``--no-stats``, else the default ledger.

    >>> ledger_of(["--ledger", "/x/l.jsonl"]).as_posix(), ledger_of(["--no-stats"])
    ('/x/l.jsonl', None)
    """
    args = list(proxy_args)
    if "--no-stats" in args:
        return None
    for i, a in enumerate(args):
        if a == "--ledger" and i + 1 < len(args):
            return Path(args[i + 1]).expanduser()
        if a.startswith("--ledger="):
            return Path(a.split("=", 1)[1]).expanduser()
    return default_ledger_path()


def check_ledger(path: Path) -> LedgerCheck:
    """Whether ``path`` can be appended to (created if missing), without writing to it.

    >>> import tempfile, pathlib
    >>> check_ledger(pathlib.Path(tempfile.mkdtemp()) / "sub" / "ledger.jsonl").ok
    True
    """
    if path.exists():
        if path.is_dir():
            return LedgerCheck(path, False, "it is a directory")
        if not os.access(path, os.W_OK):
            return LedgerCheck(path, False, "the file is not writable by you")
        return LedgerCheck(path, True)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return LedgerCheck(path, False, f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        return LedgerCheck(path, False, f"cannot create it: {parent} is not writable by you")
    return LedgerCheck(path, True)


# ---------------------------------------------------------------------------------------
# Starting an entry
# ---------------------------------------------------------------------------------------


def _environment(entry: Mapping[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    extra = entry.get("env")
    if isinstance(extra, dict):
        env.update({str(k): str(v) for k, v in extra.items()})
    return env


def _reader(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    with contextlib.suppress(Exception):
        for line in iter(stream.readline, b""):
            lines.put(line)
    lines.put(None)


@dataclass
class _Conversation:
    process: subprocess.Popen[bytes]
    lines: queue.Queue[bytes | None] = field(default_factory=queue.Queue)
    next_id: int = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any], deadline: float) -> Any:
        """The result of one request (server requests and notifications on the way are
        skipped; a server request gets a method-not-found error so it does not wait)."""
        self.next_id += 1
        my_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to {method} in time")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                raise TimeoutError(f"no answer to {method} in time") from None
            if line is None:
                raise EOFError(f"the server exited before answering {method}")
            try:
                msg = json.loads(line)
            except ValueError:
                raise ValueError(
                    f"the server wrote a line that is not JSON: {line[:80]!r}"
                ) from None
            if not isinstance(msg, dict):
                continue
            if "method" in msg and "id" in msg:
                error = {"code": -32601, "message": "gcfkit doctor does not answer requests"}
                self.send({"jsonrpc": "2.0", "id": msg["id"], "error": error})
                continue
            if msg.get("id") != my_id:
                continue
            if "error" in msg:
                raise RuntimeError(f"{method} failed: {json.dumps(msg['error'])[:200]}")
            return msg.get("result")


def _stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """Close stdin, then SIGTERM, then SIGKILL, to the whole process group; reap."""
    with contextlib.suppress(Exception):
        if process.stdin is not None:
            process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        try:
            process.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # A grandchild that ignored its group's signals is gone after SIGKILL; nothing waits.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def check_entry(
    entry: Mapping[str, Any], *, timeout: float = 30.0, grace: float = 2.0
) -> EntryCheck:
    """Start ``entry`` as a client would and go through the MCP handshake and tools/list,
    within ``timeout`` seconds in all; the process (group) is always stopped and reaped."""
    command = entry.get("command")
    args = entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return EntryCheck(False, "start", "not a stdio entry (command and args)")
    cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
    started = time.monotonic()
    deadline = started + timeout
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(
                [command, *map(str, args)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=_environment(entry),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as e:
            return EntryCheck(False, "start", f"cannot start {command!r}: {e.strerror or e}")
        talk = _Conversation(process)
        assert process.stdout is not None
        threading.Thread(
            target=_reader, args=(process.stdout, talk.lines), name="gcfkit-doctor", daemon=True
        ).start()
        step = "initialize"
        info: dict[str, Any] = {}
        instructions = ""
        tools = 0
        problem = ""
        try:
            params = {
                "protocolVersion": _PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "gcfkit-doctor", "version": __version__},
            }
            result = talk.request("initialize", params, deadline)
            if isinstance(result, dict):
                if isinstance(result.get("serverInfo"), dict):
                    info = result["serverInfo"]
                if isinstance(result.get("instructions"), str):
                    instructions = result["instructions"]
            talk.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            step = "tools/list"
            listed = talk.request("tools/list", {}, deadline)
            found = listed.get("tools") if isinstance(listed, dict) else None
            if not isinstance(found, list):
                raise ValueError("tools/list did not return a list of tools")
            tools = len(found)
            step = "done"
        except (TimeoutError, EOFError, ValueError, RuntimeError, OSError) as e:
            problem = str(e)
        finally:
            _stop(process, grace)
        errors.seek(0)
        tail = errors.read()[-2000:].decode("utf-8", "replace")
    return EntryCheck(
        ok=step == "done",
        step=step,
        problem=problem,
        server=str(info.get("name", "")),
        version=str(info.get("version", "")),
        tools=tools,
        # What the proxy appends: how to read GCF (--primer instructions) or how to ask for
        # a relative answer (its default: GCF itself is explained inside each payload).
        primer="GCF" in instructions or '"_since"' in instructions,
        seconds=time.monotonic() - started,
        stderr=tail.strip(),
    )
