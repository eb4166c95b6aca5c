"""The worker process: tool results rewritten where they cannot hold up the relay.

The bpe tokenizer holds the GIL for a whole count (0.6 s on a 5 MB text), ``json.dumps``
does too, and the GCF encoder is pure Python: in a thread beside the event loop they still
stall it. So the shell (:mod:`gcfkit.transports.offload`) runs one worker process per
proxy, ``python -m gcfkit.transports.worker``, and gives up on it at each result's deadline,
sending the original and starting a new worker: the time budget is a real bound, and a
ping is answered while a large result is being encoded.

The worker owns the session's :class:`~gcfkit.proxy.rewrite.Rewriter` (and so what the
client holds for deltas: a killed worker takes that with it, and the next answers are full
ones, which is always correct) and the ledger counts, which it takes after the answer is
sent and appends to the ledger itself. It exits when its stdin closes, and on Linux dies
with its parent (PR_SET_PDEATHSIG), so it never outlives the proxy.

Frames both ways are an 8-byte big-endian length and a pickle (a private pipe between two
processes of the same program). To the worker: ``("init", config, codec, ledger_path,
spent)`` first (``spent``: the result handles earlier workers of the session issued), then
``("job", id, line, call, deadline, server)``, ``("forget", slot)`` and ``("reset",)`` (a
new session). From the worker: ``("ready",)`` once warmed up, then ``("answer", id, line or
None, handles minted)`` per job, in order.

>>> import io
>>> buf = io.BytesIO()
>>> write_frame(buf, ("forget", "t"))
>>> _ = buf.seek(0)
>>> read_frame(buf)
('forget', 't')
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
import time
from typing import IO, Any, Final

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
    _, config, codec, ledger_path, spent = init
    rewriter = Rewriter(config, codec)
    memory = rewriter.names.memory
    # Handles an earlier worker of this session issued: a reader may still hold them.
    memory.spend(spent)
    issued = len(memory.issued)
    rewriter.warm_up()
    ledger = None
    if ledger_path is not None:
        from ..ledger import Ledger

        ledger = Ledger(ledger_path)
    write_frame(channel, ("ready",))
    while True:
        frame = read_frame(inbox)
        if frame is None:
            return
        if frame[0] == "forget":
            rewriter.forget(frame[1])
            continue
        if frame[0] == "reset":
            rewriter.reset()
            continue
        if frame[0] != "job":
            continue
        _, job_id, line, call, deadline, server = frame
        tool = call.tool
        started = time.monotonic()
        outcome, out = _answer(rewriter, line, call, deadline)
        minted = list(memory.issued[issued:])
        issued += len(minted)
        write_frame(channel, ("answer", job_id, out, minted))
        if ledger is not None:
            ledger.append(
                outcome.ledger_record(
                    rewriter.count,
                    server=server,
                    tool=tool,
                    encoding=config.encoding,
                    encode_ms=(time.monotonic() - started) * 1000.0,
                )
            )


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
