"""The worker process: tool results rewritten where they cannot hold up the relay.

The bpe tokenizer holds the GIL for a whole count (0.6 s on a 5 MB text), ``json.dumps``
does too, and the GCF encoder is pure Python: in a thread beside the event loop they still
stall it. So the shells run tool-result rewrites in worker processes,
``python -m gcfkit.transports.worker``, through :mod:`gcfkit.transports.offload`, which
gives up on a worker at a result's deadline, sending the original and starting a new one:
the time budget is a real bound, and a ping is answered while a large result is encoded.

A worker serves any number of sessions (the HTTP gateway's, a pool of a few workers for up
to a thousand sessions), one job at a time. It owns each session's
:class:`~gcfkit.proxy.rewrite.Rewriter` (and so what that client holds for deltas and
relative answers: a killed worker takes it with it, and the next answers are full ones,
which is always correct), created at the session's first job here, dropped when the shell
says so. A job of no session gets a fresh rewriter of its own (a request of the sessionless
2026-07-28 protocol); a *stray* job (one of a session whose worker is busy, run elsewhere
so that it need not wait) gets one that names nothing, so it never mints a handle the
session's own worker might mint too. The ledger counts are taken after the answer is sent,
and appended to the ledger by the worker itself. It exits when its stdin closes, and on
Linux dies with its parent (PR_SET_PDEATHSIG), so it never outlives the proxy.

Frames both ways are an 8-byte big-endian length and a pickle (a private pipe between two
processes of the same program). To the worker: ``("init", config, codec, ledger_path)``
first, then ``("job", id, session, stray, spent, events, line, call, deadline, server)``
(``session``: a key, or None for a fresh rewriter; ``spent``: given when the session starts
here, the result handles its earlier workers issued; ``events``: what the core saw happen to
the session since its last job, ``("forget", slot)`` and ``("reset",)``) and
``("drop", session)``. From the worker: ``("ready",)`` once warmed up, then ``("answer",
id, line or None, handles minted)`` per job, in order, each followed by ``("idle", record)``
once its ledger record is written (the pool sends the next job only then; ``record``: that
:class:`~gcfkit.proxy.record.LedgerRecord`, for the server's metrics, or None without a
ledger).

>>> import io
>>> buf = io.BytesIO()
>>> write_frame(buf, ("drop", 7))
>>> _ = buf.seek(0)
>>> read_frame(buf)
('drop', 7)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pickle
import signal
import struct
import sys
import time
from typing import IO, Any, Final

from ..proxy.config import Codec, ProxyConfig
from ..proxy.jsonrpc import dump_edited, parse_envelope
from ..proxy.rewrite import Budget, Call, Outcome, Rewriter, text_blocks_of

__all__ = ["decode_frame_length", "encode_frame", "main", "read_frame", "write_frame"]

_HEADER: Final = struct.Struct(">Q")
HEADER_SIZE: Final = _HEADER.size


def encode_frame(obj: Any) -> bytes:
    """One frame: length and pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def decode_frame_length(header: bytes) -> int:
    """The payload length of a frame header."""
    length: int = _HEADER.unpack(header)[0]
    return length


def write_frame(stream: IO[bytes], obj: Any) -> None:
    """Write one frame to a blocking stream and flush it."""
    stream.write(encode_frame(obj))
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """Read one frame from a blocking stream; None at end of stream."""
    header = _read_exactly(stream, HEADER_SIZE)
    if header is None:
        return None
    data = _read_exactly(stream, decode_frame_length(header))
    if data is None:
        return None
    return pickle.loads(data)


def _read_exactly(stream: IO[bytes], n: int) -> bytes | None:
    parts: list[bytes] = []
    left = n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _die_with_parent(parent: int) -> None:
    """On Linux, ask for SIGKILL when the parent dies (even SIGKILLed itself)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(0)


class _Sessions:
    """The rewriters of the sessions this worker serves, by key (the shell creates and
    drops them: it bounds how many sessions there are)."""

    def __init__(self, config: ProxyConfig, codec: Codec) -> None:
        self.config = config
        self.codec = codec
        # A stray job names nothing (see the module docstring).
        self.stray_config = dataclasses.replace(config, refs="off")
        self.rewriters: dict[int, tuple[Rewriter, list[int]]] = {}

    def for_job(
        self, session: int | None, stray: bool, spent: list[str] | None
    ) -> tuple[Rewriter, list[int]]:
        """The rewriter for one job and its count of handles reported so far (a one-item
        list, so that the caller can move it on)."""
        if session is None or stray:
            rewriter = Rewriter(self.stray_config if stray else self.config, self.codec)
            return rewriter, [0]
        found = self.rewriters.get(session)
        if found is None or spent is not None:
            rewriter = Rewriter(self.config, self.codec)
            # Handles earlier workers of this session issued: a reader may still hold them.
            rewriter.names.memory.spend(spent or ())
            found = self.rewriters[session] = (rewriter, [len(rewriter.names.memory.issued)])
        return found

    def apply(self, rewriter: Rewriter, events: list[tuple[str, ...]]) -> None:
        for event in events:
            if event[0] == "forget" and len(event) == 2:
                rewriter.forget(event[1])
            elif event[0] == "reset":
                rewriter.reset()


def main() -> None:
    """The worker's loop (see the module docstring)."""
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    _die_with_parent(parent)
    # Frames go to the real stdout only: anything a library prints goes to stderr instead.
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inbox = sys.stdin.buffer
    # The shell stops the proxy's group with signals; the worker goes when its pipe closes.
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    init = read_frame(inbox)
    if not (isinstance(init, tuple) and init and init[0] == "init"):
        return
    _, config, codec, ledger_path = init
    sessions = _Sessions(config, codec)
    Rewriter(config, codec).warm_up()  # the tokenizer and codec, once for every session
    ledger = None
    if ledger_path is not None:
        from ..ledger import Ledger

        ledger = Ledger(ledger_path)
    write_frame(channel, ("ready",))
    while True:
        frame = read_frame(inbox)
        if frame is None:
            return
        if frame[0] == "drop":
            sessions.rewriters.pop(frame[1], None)
            continue
        if frame[0] != "job":
            continue
        _, job_id, session, stray, spent, events, line, call, deadline, server = frame
        rewriter, reported = sessions.for_job(session, stray, spent)
        sessions.apply(rewriter, events)
        tool = call.tool
        started = time.monotonic()
        outcome, out = _answer(rewriter, line, call, deadline)
        issued = rewriter.names.memory.issued
        minted = list(issued[reported[0] :])
        reported[0] = len(issued)
        write_frame(channel, ("answer", job_id, out, minted))
        del line, out, frame
        record = None
        if ledger is not None:
            record = outcome.ledger_record(
                rewriter.count,
                server=server,
                tool=tool,
                encoding=config.encoding,
                encode_ms=(time.monotonic() - started) * 1000.0,
            )
            ledger.append(record)
        # Free for the next job only now: its clock must not run during this bookkeeping.
        write_frame(channel, ("idle", record))


def _answer(
    rewriter: Rewriter, line: bytes, call: Call, deadline: float
) -> tuple[Outcome, bytes | None]:
    """The outcome for one tools/call response line, and the line to send (None: as is)."""
    msg, safe = parse_envelope(line)
    result = msg.get("result") if isinstance(msg, dict) else None
    if not isinstance(result, dict):
        rewriter.forget(call.slot)
        return Outcome(None, "unchanged"), None
    if not safe:
        rewriter.forget(call.slot)
        return Outcome(None, "fallback:unsafe-envelope", lazy=text_blocks_of(result)), None
    outcome = rewriter.rewrite(result, call, Budget(time.monotonic, deadline))
    if outcome.result is None:
        return outcome, None
    assert isinstance(msg, dict)
    return outcome, dump_edited({**msg, "result": outcome.result}, msg, line)


if __name__ == "__main__":
    main()
