"""Recording what an MCP server sends, in the corpus format, beside a relay that never waits.

A :class:`Capture` is handed the lines a relay passes: :meth:`~Capture.to_server` each line
the server receives (after the proxy, so ``_format``/``_since`` are not in the recorded
arguments) and :meth:`~Capture.from_server` each line the server writes (before the proxy: the
raw result). Both only queue the bytes; a writer thread parses them, pairs each response with
its request and writes the session with :class:`~gcfkit.traffic.corpus.SessionWriter`. The
writer threads are shared by every capture of the process (at most :data:`WRITER_THREADS`,
started when first needed), so an HTTP server recording a thousand idle sessions runs no
thread for them. What is
forwarded never depends on the capture: it sees copies, and when it falls behind (more than
``queue_bytes`` waiting) or reaches ``max_bytes`` written or ``max_calls`` calls, it drops
lines and counts them instead of slowing the relay down.

A session goes to ``ROOT/<server>/`` (``--name``, else the server's ``serverInfo.name``), or
``ROOT/<server>.2/`` and so on when that exists: concurrent proxies never share a directory.
``meta/capture.json`` says what was dropped, if anything.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> cap = Capture(root, "demo")
>>> cap.to_server(b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
...               b'"params":{"name":"t","arguments":{}}}\\n')
>>> cap.from_server(b'{"jsonrpc":"2.0","id":1,"result":{"content":[]}}\\n')
>>> cap.close()
>>> sorted(p.name for p in (root / "demo").iterdir())
['000_t.json', 'meta']
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO, Any, Final

from .. import __version__
from ..ledger import utc_now_iso
from .corpus import SessionWriter, session_dir_name

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_CALLS", "WRITER_THREADS", "Capture"]

#: Threads writing the captures of one process, however many sessions record.
WRITER_THREADS: Final = 2
#: Lines one capture writes before the thread turns to another waiting (fairness).
_TURN: Final = 64

DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
DEFAULT_MAX_CALLS: Final = 100_000
DEFAULT_QUEUE_BYTES: Final = 64 * 1024 * 1024
_RECORDED: Final = frozenset({"initialize", "tools/list", "tools/call"})


class Capture:
    """Queue a relay's lines and record them in the corpus format; see the module docstring.

    ``root`` is where session directories go, ``name`` the session's server name (default:
    the server's own, from ``initialize``). :meth:`close` flushes and stops the writer.
    """

    def __init__(
        self,
        root: Path | str,
        name: str = "",
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_calls: int = DEFAULT_MAX_CALLS,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        warn_stream: IO[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.name = name
        self.max_bytes = max_bytes
        self.max_calls = max_calls
        self.queue_bytes = queue_bytes
        self.dropped = 0
        self.written_bytes = 0
        self._warn_stream = warn_stream
        self._warned = False
        self._lines: deque[tuple[bool, bytes]] = deque()
        self._queued = 0
        self._cond = threading.Condition()
        self._closing = False
        self._pending: dict[str, tuple[str, Any]] = {}
        self._writer: SessionWriter | None = None
        self._server = name
        self._started = utc_now_iso()
        self._scheduled = False
        self._done = threading.Event()

    @property
    def path(self) -> Path | None:
        """The session directory, once something was written."""
        return self._writer.path if self._writer is not None else None

    # -- the relay's side: never blocks on I/O -----------------------------------------

    def to_server(self, line: bytes) -> None:
        """A line the server is sent (the proxy's output towards it)."""
        self._put(True, line)

    def from_server(self, line: bytes) -> None:
        """A line the server wrote (before the proxy rewrites anything)."""
        self._put(False, line)

    def _put(self, upstream: bool, line: bytes) -> None:
        with self._cond:
            if self._closing or self._queued + len(line) > self.queue_bytes:
                self.dropped += 1
                return
            self._lines.append((upstream, line))
            self._queued += len(line)
            wake = not self._scheduled
            self._scheduled = True
        if wake:
            _WRITERS.wake(self)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (for at most ``timeout`` seconds) and stop."""
        with self._cond:
            self._closing = True
            wake = not self._scheduled
            self._scheduled = True
        if wake:
            _WRITERS.wake(self)
        self._done.wait(timeout)
        if self._writer is not None or self.dropped:
            with contextlib.suppress(Exception):
                self._write_note()

    # -- in a writer thread --------------------------------------------------------------

    def _work(self) -> bool:
        """Write up to a turn's lines; whether more wait (the capture stays scheduled)."""
        for _ in range(_TURN):
            with self._cond:
                if not self._lines:
                    self._scheduled = False
                    if self._closing:
                        self._done.set()
                    return False
                upstream, line = self._lines.popleft()
                self._queued -= len(line)
            try:
                self._handle(upstream, line)
            except Exception as e:  # a capture problem never reaches the relay
                self._warn(f"cannot record a message: {e}")
        return True

    def _handle(self, upstream: bool, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict):
                (self._request if upstream else self._response)(item)

    def _request(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if "id" not in msg or method not in _RECORDED:
            return
        if len(self._pending) >= 10_000:  # requests never answered must not pile up
            self._pending.pop(next(iter(self._pending)))
        self._pending[json.dumps(msg["id"])] = (str(method), msg.get("params"))

    def _response(self, msg: dict[str, Any]) -> None:
        if "method" in msg or "id" not in msg:
            return
        pending = self._pending.pop(json.dumps(msg["id"]), None)
        if pending is None:
            return
        method, params = pending
        result = msg.get("result")
        if method == "initialize" and isinstance(result, dict) and not self._server:
            info = result.get("serverInfo")
            if isinstance(info, dict) and isinstance(info.get("name"), str):
                self._server = info["name"]
        if self.written_bytes >= self.max_bytes:
            self._drop("the capture reached its size limit")
            return
        writer = self._session()
        if method in ("initialize", "tools/list"):
            if isinstance(result, dict):
                writer.write_meta(method, result)
            return
        if writer.calls >= self.max_calls:
            self._drop("the capture reached its call limit")
            return
        if isinstance(result, dict) and "content" not in result and "task" in result:
            return  # a task-augmented call: its payload comes later, from tasks/result
        tool = params.get("name") if isinstance(params, dict) else None
        arguments = params.get("arguments", {}) if isinstance(params, dict) else {}
        if not isinstance(tool, str):
            return
        name = writer.write_call(
            tool,
            arguments,
            result if isinstance(result, dict) else None,
            None if isinstance(result, dict) else msg.get("error"),
        )
        with contextlib.suppress(OSError):
            self.written_bytes += (writer.path / name).stat().st_size

    def _session(self) -> SessionWriter:
        if self._writer is not None:
            return self._writer
        base = session_dir_name(self._server or "server")
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for n in range(1, 10_000):
            path = self.root / (base if n == 1 else f"{base}.{n}")
            try:
                os.mkdir(path, 0o700)  # atomic: a concurrent proxy takes the next name
            except FileExistsError:
                continue
            self._writer = SessionWriter(path, self._server or base)
            return self._writer
        raise OSError(f"no free session directory for {base} in {self.root}")

    def _drop(self, why: str) -> None:
        with self._cond:
            self.dropped += 1
        self._warn(f"{why}; further results are not recorded")

    def _write_note(self) -> None:
        note = {
            "gcfkit": __version__,
            "started": self._started,
            "closed": utc_now_iso(),
            "dropped_lines": self.dropped,
        }
        writer = self._writer or self._session()
        writer.write_meta_file("capture.json", note)

    def _warn(self, text: str) -> None:
        if self._warned:
            return
        self._warned = True
        stream = self._warn_stream if self._warn_stream is not None else sys.stderr
        with contextlib.suppress(Exception):
            print(f"gcfkit: capture: {text}", file=stream)


class _Writers:
    """The writer threads every :class:`Capture` of the process shares (module doc): each
    takes a capture with lines waiting, writes a turn of them, and puts it back while more
    wait. A capture is in the queue at most once, so its lines are written in order."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._ready: deque[Capture] = deque()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0

    def wake(self, capture: Capture) -> None:
        with self._cond:
            self._ready.append(capture)
            if self._idle == 0 and len(self._threads) < self._size:
                thread = threading.Thread(target=self._run, name="gcfkit-capture", daemon=True)
                self._threads.append(thread)
                thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._ready:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                capture = self._ready.popleft()
            if capture._work():
                self.wake(capture)


_WRITERS: Final = _Writers(WRITER_THREADS)
