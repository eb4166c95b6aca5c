"""The stdio transport: the thin asyncio shell around :class:`~gcfkit.proxy.core.ProxyCore`.

It spawns the MCP server, pumps newline-delimited JSON-RPC both ways through the core, lets
the server's stderr through untouched, writes ledger records, and shuts down cleanly:

* client EOF: the server's stdin is closed, then the server gets ``grace`` seconds to exit,
  then its process group gets SIGTERM, then SIGKILL (:class:`~.process.ServerProcess`); its
  remaining output is still relayed;
* server exit (or a server that closes its stdout): every pending request gets a JSON-RPC
  error, what is left of the server's group is stopped, and the proxy exits with the
  server's status (``128 + signal`` when it was killed by a signal);
* SIGTERM, SIGHUP or SIGINT to the proxy: the server's group gets SIGTERM at once and SIGKILL
  at most :data:`~.process.TERM_GRACE` (1 s) later, so the proxy is gone before a client's
  own SIGKILL (the MCP SDK sends it 2 s after its SIGTERM); the exit status is
  ``128 + signal``;
* a client that goes away (its stdout breaks): the same as client EOF.

The server runs in its own process group and signals go to the group, so the children of a
launcher (``npx``, ``uvx``) go with it; a stray grandchild that leaves the group and keeps
the server's stdout open cannot hold the proxy up for more than ``grace`` seconds.

Lines are framed by the core's :class:`~gcfkit.proxy.linebuffer.LineBuffer` from fixed-size
reads, so a message of any size (64 MB and beyond) flows without hitting a StreamReader limit
and without quadratic buffering.

What the sans-I/O core leaves to its shell, this shell does: it owns the clock the core
reads (``time.perf_counter``), warms the core up in a thread while the server starts (when
no worker can ever run: otherwise small results are answered from estimates and the rest
in a worker, :mod:`gcfkit.transports.pools`) and awaits that before relaying the first
tool result (so the core needs no lock), and stamps each ledger record with the wall time
as it appends it.

>>> import asyncio, sys
>>> status = asyncio.run(run_proxy([sys.executable, "examples/demo_server.py"]))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import IO, TYPE_CHECKING, Protocol

from ..ledger import Ledger, utc_now_iso
from ..proxy.config import Codec
from ..proxy.core import Output, ProxyConfig, ProxyCore
from ..proxy.linebuffer import LineBuffer
from .outbox import Outbox, coalesce
from .pools import session_pool, start_or_warm
from .process import DEFAULT_GRACE, ServerProcess, exit_status, stop_signals, widen_pipe

if TYPE_CHECKING:
    from ..traffic.capture import Capture

__all__ = [
    "DEFAULT_GRACE",
    "client_pipes",
    "run_proxy",
    "split_batches",
    "split_lines",
]

_CHUNK = 1 << 18

#: After a signal, how long the server's last output may take to arrive once it is gone.
_DRAIN_HURRIED = 0.25


async def split_lines(read: _Reader) -> AsyncIterator[bytes]:
    """Yield LF-terminated lines (the LF kept) from ``read(n)``; a final unterminated line is
    yielded as is. The framing is :class:`~gcfkit.proxy.linebuffer.LineBuffer`'s.

    >>> import asyncio
    >>> data = [b"a\\nb", b"c\\n", b"d", b""]
    >>> async def read(n: int) -> bytes:
    ...     return data.pop(0)
    >>> async def collect() -> list[bytes]:
    ...     return [line async for line in split_lines(read)]
    >>> asyncio.run(collect())
    [b'a\\n', b'bc\\n', b'd']
    """
    async for lines in split_batches(read):
        lines.reverse()
        while lines:
            # Popped, not bound to a loop variable: a suspended generator's locals stay
            # alive, and the last line (64 MB, say) would be held until the next read.
            yield lines.pop()


async def split_batches(read: _Reader) -> AsyncIterator[list[bytes]]:
    """The lines of :func:`split_lines`, as the lists each read completes: a shell that
    handles a list at once writes what it makes of it in one write. A relay that falls
    behind reads several lines at a time, so under load it writes (and wakes its reader)
    once per read, not once per line; at one line per read nothing changes.

    >>> import asyncio
    >>> data = [b"a\\nb\\n", b"c", b""]
    >>> async def read(n: int) -> bytes:
    ...     return data.pop(0)
    >>> async def collect() -> list[list[bytes]]:
    ...     return [lines async for lines in split_batches(read)]
    >>> asyncio.run(collect())
    [[b'a\\n', b'b\\n'], [b'c']]
    """
    buffer = LineBuffer()
    while True:
        chunk = await read(_CHUNK)
        if not chunk:
            break
        lines = buffer.feed(chunk)
        del chunk
        if lines:
            yield lines
            del lines  # (the caller empties it; see split_lines)
    final = buffer.close()
    if final is not None:
        yield [final]


class _Reader(Protocol):
    async def __call__(self, n: int, /) -> bytes: ...


#: Large lines are handed to a pipe transport this much at a time: what the pipe cannot take
#: at once is copied into the transport's buffer, so a 64 MB line written whole would be.
_WRITE_SLICE = 1 << 20


async def write_chunked(writer: asyncio.StreamWriter, data: bytes) -> None:
    """``data`` to ``writer``, a slice at a time, draining in between: the bytes are never
    copied into the transport's buffer all at once."""
    if len(data) <= _WRITE_SLICE:
        writer.write(data)
        await writer.drain()
        return
    view = memoryview(data)
    for start in range(0, len(view), _WRITE_SLICE):
        writer.write(view[start : start + _WRITE_SLICE])
        await writer.drain()


class _Sink:
    """An async writer over a file descriptor: a pipe transport when possible (backpressure,
    no threads), plain blocking writes for regular files and ttys that refuse transports."""

    def __init__(self, stream: asyncio.StreamWriter | None, fd: int | None) -> None:
        self._stream = stream
        self._fd = fd
        self.broken = False

    @classmethod
    async def open(cls, file: IO[bytes]) -> _Sink:
        loop = asyncio.get_running_loop()
        if not _is_pipe(file):
            return cls(None, file.fileno())
        try:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, file
            )
        except (ValueError, OSError):
            return cls(None, file.fileno())
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(writer, None)

    async def write(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            if self._stream is not None:
                await write_chunked(self._stream, data)
            elif self._fd is not None:
                view = memoryview(data)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.broken = True

    def close(self) -> None:
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()


async def _open_reader(file: IO[bytes]) -> _Reader:
    """``read(n)`` over ``file``: a pipe transport, or a daemon thread for files that refuse
    one (a daemon, so a read blocked forever cannot hold up interpreter exit)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_CHUNK * 4, loop=loop)
    try:
        if not _is_pipe(file):
            raise ValueError("not a pipe or socket")
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), file)
    except (ValueError, OSError):
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=4)
        fd = file.fileno()

        def pump() -> None:
            while True:
                try:
                    chunk = os.read(fd, _CHUNK)
                except OSError:
                    chunk = b""
                fut = asyncio.run_coroutine_threadsafe(queue.put(chunk), loop)
                try:
                    fut.result()
                except Exception:
                    return
                if not chunk:
                    return

        threading.Thread(target=pump, name="gcfkit-stdin", daemon=True).start()

        async def read_queue(n: int) -> bytes:
            return await queue.get()

        return read_queue

    async def read_stream(n: int) -> bytes:
        return await reader.read(n)

    return read_stream


def _is_pipe(file: IO[bytes]) -> bool:
    # Only pipes and sockets poll reliably: epoll refuses regular files and /dev/null, and
    # that refusal surfaces later, in a callback, as a read that never returns.
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def run_proxy(
    command: Sequence[str],
    config: ProxyConfig | None = None,
    *,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    ledger: Ledger | None = None,
    grace: float = DEFAULT_GRACE,
    codec: Codec | None = None,
    capture: Capture | None = None,
) -> int:
    """Run ``command`` as an MCP server behind the proxy, relaying ``stdin``/``stdout``
    (default: this process's); returns the exit status to use (the server's).

    ``ledger`` receives one record per tools/call result (unless ``config.stats`` is off;
    default: the ledger at :func:`gcfkit.paths.default_ledger_path`). ``capture`` is handed a
    copy of each line the server receives and of each line it writes (it only queues them).
    ``codec`` replaces the codec functions (tests: it must pickle, by reference, to reach the
    worker process).
    """
    config = config or ProxyConfig()
    core = ProxyCore(config, codec, clock=time.perf_counter)
    if config.stats and ledger is None:
        ledger = Ledger()
    client_in = stdin if stdin is not None else sys.stdin.buffer
    client_out = stdout if stdout is not None else sys.stdout.buffer
    try:
        server = await ServerProcess.start(command, grace=grace, term_grace=grace)
    except OSError as e:
        print(f"gcfkit proxy: cannot start {command[0]!r}: {e.strerror or e}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    server_in = server.stdin
    server_out = server.stdout
    loop = asyncio.get_running_loop()
    signalled: list[int] = []

    def on_signal(signum: int) -> None:
        signalled.append(signum)
        server.hurry()

    restore_signals = stop_signals(loop, on_signal)
    # Small tool results are answered here, from token estimates (no tokenizer); the rest
    # go to a worker process, so that nothing they cost can hold up the relay (or the
    # signal handlers), started when the first needs one and gone when idle (pools.py).
    # Without one (none can ever start: a codec that does not pickle), results are
    # rewritten here, and the warm-up runs in a thread meanwhile; the first waits for it.
    offload = session_pool(config, codec, ledger.path if ledger is not None else None)
    lane = offload.session()
    warming = await start_or_warm(offload, core)
    for pipe in (client_in, client_out):
        with contextlib.suppress(OSError, ValueError):
            if _is_pipe(pipe):
                widen_pipe(pipe.fileno())
    to_client = await _Sink.open(client_out)
    read_client = await _open_reader(client_in)
    server_write_broken = False
    background: set[asyncio.Task[None]] = set()

    def flush_records() -> None:
        if ledger is None:
            return
        for record in core.pop_records():
            ledger.append(record, time=utc_now_iso())

    async def write_client(data: bytes, _: None = None) -> None:
        await to_client.write(data)
        if to_client.broken and not server.stopping:
            # The client is gone: nobody will read the answers, so stop the server (its
            # remaining output is still drained, then the proxy exits).
            stopping = asyncio.ensure_future(server.stop())
            background.add(stopping)
            stopping.add_done_callback(background.discard)
        flush_records()

    lines: Outbox[None] = Outbox(core, lane, write_client, joined=True)

    async def write_server(outputs: list[Output]) -> None:
        nonlocal server_write_broken
        if server_write_broken or not outputs:
            return
        if capture is not None:
            for out in outputs:
                capture.to_server(out.data)
        # What one read of the client's made, in one write (one wake-up of the server).
        for data in coalesce([out.data for out in outputs]):
            try:
                await write_chunked(server_in, data)
            except (BrokenPipeError, ConnectionResetError, OSError):
                server_write_broken = True
                return

    async def client_to_server() -> None:
        async for lines in split_batches(read_client):
            outputs: list[Output] = []
            lines.reverse()
            while lines:  # (popped: a 64 MB line is not held while the next is awaited)
                outputs += core.from_client(lines.pop())
            await write_server(outputs)
            del outputs
        # Client EOF: the MCP shutdown sequence; the server pump relays what is left.
        await server.stop()

    async def relay_server_output() -> None:
        async for batch in split_batches(server_out.read):
            batch.reverse()
            while batch:  # (popped, as in client_to_server)
                line = batch.pop()
                if capture is not None:
                    capture.from_server(line)
                if not warming.done() and core.expects_tool_result:
                    await lines.flush()  # (what is ready does not wait for the warm-up)
                    await asyncio.shield(warming)
                await lines.feed(line, None, release=not batch)
                del line

    async def server_to_client() -> None:
        relay = asyncio.create_task(relay_server_output())
        exited = asyncio.create_task(server.exited(None))
        await asyncio.wait({relay, exited}, return_when=asyncio.FIRST_COMPLETED)
        if not relay.done():
            # The server is gone but its stdout is still open: a child of it holds the pipe.
            # Stop what is left of its group (which usually closes the pipe), relay what is
            # already written, then stop waiting for an EOF: a stray that left the group
            # gets ``grace`` (briefly when a signal asked the proxy to go: the client's
            # patience is short).
            stopping = asyncio.ensure_future(server.stop())
            background.add(stopping)
            stopping.add_done_callback(background.discard)
            await asyncio.wait({relay}, timeout=min(grace, _DRAIN_HURRIED) if signalled else grace)
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
        elif not exited.done() and not await server.exited(grace):
            # stdout closed but the server lives on: it can answer nothing more, so stop it
            # rather than leave the client's requests hanging.
            await server.stop()
        await exited
        # Results still being rewritten go out first (each within its deadline), then an
        # error for every request left unanswered.
        await lines.drain(timeout=_DRAIN_HURRIED if signalled else None)
        await lines.add(core.server_exited(server.returncode), None)

    upstream = asyncio.create_task(client_to_server())
    downstream = asyncio.create_task(server_to_client())
    try:
        await asyncio.shield(downstream)
    finally:
        # Reached when the server is gone (it exited, was stopped on client EOF or a
        # signal), and on cancellation (Ctrl-C before the handlers were in place): in
        # every case what is left of the server's group is stopped, bounded.
        if not downstream.done():
            server.hurry()
            with contextlib.suppress(BaseException):
                await asyncio.wait({downstream}, timeout=server.term_grace + _DRAIN_HURRIED + 1)
            downstream.cancel()
            with contextlib.suppress(BaseException):
                await downstream
        upstream.cancel()
        with contextlib.suppress(BaseException):
            await upstream
        with contextlib.suppress(Exception):
            await server.stop()
        with contextlib.suppress(Exception):
            await lines.drain(timeout=0)
        with contextlib.suppress(Exception):
            await offload.close()
        restore_signals()
        flush_records()
        to_client.close()
        if capture is not None:
            # The writer thread finishes the queue (bounded); the client is already answered.
            await loop.run_in_executor(None, capture.close)
        with contextlib.suppress(Exception):
            await warming
    if signalled:
        return 128 + signalled[0]
    return exit_status(server.returncode)


async def client_pipes(
    stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None
) -> tuple[AsyncIterator[bytes], Callable[[bytes], Awaitable[None]], Callable[[], None]]:
    """The client's side of a stdio relay, for any shell whose server is elsewhere (the HTTP
    upstream): its lines (LF kept), a writer that never raises once the client is gone, and
    the writer's close. Defaults: this process's stdin and stdout."""
    sink = await _Sink.open(stdout if stdout is not None else sys.stdout.buffer)
    read = await _open_reader(stdin if stdin is not None else sys.stdin.buffer)
    return split_lines(read), sink.write, sink.close
