"""The MCP server as a child process: started in its own process group, stopped in time.

Any shell that runs a local server (stdio today, the HTTP shell's ``--http -- CMD``) uses
:class:`ServerProcess`, so there is one stop sequence and one rule for the process tree:

* The server starts in a new session (its own process group), so a signal meant for it
  reaches every process it started (``npx`` and ``uvx`` launchers have children) and never
  the proxy or the client.
* :meth:`ServerProcess.stop` is the MCP stdio shutdown: close the server's stdin, wait up
  to ``grace`` seconds, SIGTERM the group, wait up to ``term_grace`` seconds (at most
  :data:`TERM_GRACE`), SIGKILL the group. Real clients are less patient than a long
  sequence: the official SDK closes the proxy's stdin, waits 2 s, SIGTERMs the proxy's
  group and SIGKILLs it 2 s later, and a SIGKILLed proxy can stop nothing. So a signal to
  the proxy (:meth:`ServerProcess.hurry`) skips the wait for stdin EOF, and what follows
  SIGTERM is bounded by :data:`TERM_GRACE` (1 s): the proxy is gone well inside the
  client's 2 s.
* The group outlives its leader when the leader exits (or crashes) and leaves children:
  :meth:`ServerProcess.stop` then takes the rest of the group down too (SIGTERM, SIGKILL).
* A proxy that is SIGKILLed (a client that gives up, the OOM killer) runs no stop sequence,
  so a watchdog does it for it (:func:`start_watchdog`): a tiny process of its own that
  holds the read end of a pipe whose write end only the proxy holds. The kernel closes that
  end whenever the proxy dies, however it dies; the watchdog reads EOF and stops the
  server's group (SIGTERM, SIGKILL :data:`TERM_GRACE` later). Every normal stop ends by
  killing the watchdog, so it never outlives a stop.

Waits poll ``returncode`` rather than ``Process.wait()``, which before Python 3.12 also
waits for the pipes to close: a stray grandchild holding stdout open would block it.

>>> import asyncio, sys
>>> async def demo() -> int | None:
...     code = "import sys; sys.stdin.read()"  # exits on stdin EOF
...     server = await ServerProcess.start([sys.executable, "-c", code], grace=5)
...     await server.stop()
...     return server.returncode
>>> asyncio.run(demo())
0
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, Final

__all__ = [
    "DEFAULT_GRACE",
    "TERM_GRACE",
    "ServerProcess",
    "Watchdog",
    "exit_status",
    "exited",
    "sigkill",
    "start_watchdog",
    "stop_signals",
    "widen_pipe",
]

#: Seconds the server gets to exit after its stdin closes (the MCP SDK's own wait).
DEFAULT_GRACE: Final = 2.0

#: The most the server gets after SIGTERM before SIGKILL: the whole stop after a signal to
#: the proxy must fit in the 2 s a client waits between its SIGTERM and its SIGKILL.
TERM_GRACE: Final = 1.0

#: How long to wait for the kernel to deliver a SIGKILL and the leader to be reaped.
_KILL_WAIT: Final = 1.0

_READ_BUFFER: Final = 1 << 20

_POLL_FIRST: Final = 0.005
_POLL_MAX: Final = 0.05

#: The signals that stop the proxy (and with it the server), in the order they are listed.
_STOP_SIGNALS: Final = ("SIGTERM", "SIGINT", "SIGHUP")

_GROUPS: Final = hasattr(os, "killpg")

# The watchdog's work, run as ``python -I -S -c _WATCHDOG PGID GRACE`` with the pipe's read
# end as its stdin (isolated, no site: it imports nothing of gcfkit and ignores PYTHON*
# variables). It waits for its pipe: data or EOF. Data is never sent (a normal stop SIGKILLs
# the watchdog), so anything readable means the proxy has died. Where it waits itself (no
# shell), it checks once a second that the group still exists, and leaves when it does not.
# Before it signals, it checks that the id still names the server's session: a group id is
# reused only after every process of the group has gone, and then by a stranger, whose
# leader is not the leader of a session of that id.
_WATCHDOG: Final = """
import os, select, signal, sys, time
fd, pgid, grace = 0, int(sys.argv[1]), float(sys.argv[2])
def alive():
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True
while not select.select([fd], [], [], 1.0)[0]:
    if not alive():
        sys.exit(0)
try:
    if os.getsid(pgid) != pgid:
        sys.exit(0)
except OSError:
    pass
try:
    os.killpg(pgid, signal.SIGTERM)
except OSError:
    sys.exit(0)
deadline = time.monotonic() + grace
while alive() and time.monotonic() < deadline:
    time.sleep(0.02)
try:
    os.killpg(pgid, signal.SIGKILL)
except OSError:
    pass
"""

# The watchdog waits in a shell's ``read`` and starts the interpreter only at EOF: a shell
# starts in a millisecond, an interpreter in 13, and those would be taken from the server's
# own start on a busy machine (+3 to +10 ms to the first answer here, on 155 ms). Without a
# shell, the interpreter waits itself. The pipe is the watchdog's stdin, not a descriptor
# passed by number: dash refuses ``<&N`` above 9 ("Bad fd number").
_SHELL: Final = "/bin/sh"
_SHELL_WAIT: Final = 'read _ || exec "$@"'

#: Linux's F_SETPIPE_SZ (fcntl has the name only from Python 3.10 on some builds).
_F_SETPIPE_SZ: Final = 1031
_PIPE_SIZE: Final = 1 << 20


def widen_pipe(fd: int) -> None:
    """Give the pipe ``fd`` belongs to a 1 MB buffer where the system allows it (Linux; a
    no-op on anything that is not a pipe, or elsewhere): a 64 MB message through a 64 KB
    pipe is a thousand reads and wake-ups a hop (1.0 s against 0.7 s per 64 MB here)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(ImportError, OSError, ValueError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), _PIPE_SIZE)


def exit_status(returncode: int | None) -> int:
    """A process exit status as a shell reports it: ``128 + signal`` for a signal death.

    >>> exit_status(0), exit_status(-15), exit_status(None)
    (0, 143, 1)
    """
    if returncode is None:
        return 1
    if returncode < 0:
        return 128 + (-returncode)
    return returncode


class ServerProcess:
    """One running server, its pipes and its process group.

    ``grace`` is how long the server gets to exit after its stdin closes; ``term_grace``
    how long after SIGTERM (capped at :data:`TERM_GRACE`). ``stdin`` and ``stdout`` are the
    asyncio streams of its pipes; stderr is inherited (the server's log goes straight
    through) unless ``stderr`` says otherwise.
    """

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        grace: float = DEFAULT_GRACE,
        term_grace: float = TERM_GRACE,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.process = process
        self.watchdog = watchdog
        # The group id is the leader's pid (a new session). Never ask getpgid(): it fails
        # once the leader is reaped, even with live members left.
        self.pgid = process.pid if _GROUPS else None
        self.grace = max(grace, 0.0)
        self.term_grace = min(max(term_grace, 0.0), TERM_GRACE)
        self._level = 0  # 0: polite (stdin EOF), 1: SIGTERM sent, 2: SIGKILL sent
        self._signals = 0
        self._stopping: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        command: Sequence[str],
        *,
        grace: float = DEFAULT_GRACE,
        term_grace: float = TERM_GRACE,
        stderr: int | IO[Any] | None = None,
    ) -> ServerProcess:
        """Spawn ``command`` with piped stdin/stdout in a new session, and its watchdog
        (:func:`start_watchdog`); raises ``OSError`` when the command cannot start."""
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=_GROUPS,
            # What the pipe reader buffers before it pauses: the default 64 KB makes a 64 MB
            # line two thousand pause/resume round trips.
            limit=_READ_BUFFER,
        )
        for stream in (process.stdin, process.stdout):
            transport = getattr(stream, "transport", None) or getattr(stream, "_transport", None)
            pipe = transport.get_extra_info("pipe") if transport is not None else None
            if pipe is not None:
                widen_pipe(pipe.fileno())
        watchdog = start_watchdog(process.pid)
        return cls(process, grace=grace, term_grace=term_grace, watchdog=watchdog)

    @property
    def pid(self) -> int:
        """The leader's process id."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The leader's return code (``-N`` for signal N), or None while it runs."""
        return self.process.returncode

    @property
    def stdin(self) -> asyncio.StreamWriter:
        """The server's stdin."""
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        """The server's stdout."""
        assert self.process.stdout is not None
        return self.process.stdout

    @property
    def stopping(self) -> bool:
        """Whether a stop has begun."""
        return self._stopping is not None

    # -- signals and liveness --------------------------------------------------------

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to every process of the server's group (the leader alone where
        there are no groups)."""
        if self.pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
                return
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    def group_alive(self) -> bool:
        """Whether any process of the group is left (without process groups: whether the
        leader runs). A zombie counts until its parent reaps it."""
        if self.pgid is None:
            return self.process.returncode is None
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # EPERM proves nothing: treat the group as still there
        return True

    async def exited(self, timeout: float | None) -> bool:
        """Whether the leader exits within ``timeout`` seconds (None: as long as it takes)."""
        return await _poll(lambda: self.process.returncode is not None, timeout)

    # -- stopping --------------------------------------------------------------------

    def hurry(self) -> None:
        """A stop signal reached the proxy: begin stopping if not yet begun, skipping the
        wait for the server to notice stdin EOF (SIGTERM now); a second call skips the
        SIGTERM wait too (SIGKILL now)."""
        # The first signal asks for SIGTERM (no-op if already sent: the TERM wait is bounded
        # anyway), the second for SIGKILL.
        self._signals += 1
        self._level = max(self._level, min(self._signals, 2))
        self._begin()

    def _begin(self) -> asyncio.Task[None]:
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop_sequence())
        return self._stopping

    async def stop(self) -> None:
        """Stop the server and everything left in its group; returns when they are gone or
        SIGKILLed and waited for: at most ``grace + term_grace + 1`` seconds, and at most
        ``term_grace + 1`` after a :meth:`hurry`.

        Safe to call more than once and concurrently: every caller waits for the same stop,
        and cancelling a caller does not cancel the stop.
        """
        await asyncio.shield(self._begin())

    async def _stop_sequence(self) -> None:
        try:
            await self._stop_steps()
        finally:
            # The group is gone or SIGKILLed: nothing is left for the watchdog to guard.
            if self.watchdog is not None:
                await self.watchdog.dismiss()

    async def _stop_steps(self) -> None:
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            # Closing never blocks; draining could (a server that reads no more), and EOF
            # is what the server is told either way.
            with contextlib.suppress(Exception):
                stdin.close()
        if self._level == 0:
            await self._step(lambda: self.process.returncode is not None, self.grace)
        if self.process.returncode is not None and not self.group_alive():
            return
        if self._level < 2:
            self._level = max(self._level, 1)
            self.signal_group(signal.SIGTERM)
            await self._step(
                lambda: self.process.returncode is not None and not self.group_alive(),
                self.term_grace,
            )
        if self.process.returncode is None or self.group_alive():
            self._level = 2
            self.signal_group(signal.SIGKILL if _GROUPS else signal.SIGTERM)
            await _poll(lambda: self.process.returncode is not None, _KILL_WAIT)

    async def _step(self, done: Callable[[], bool], timeout: float) -> None:
        """Wait until ``done()``, ``timeout`` or a :meth:`hurry`, whichever comes first."""
        level = self._level
        await _poll(lambda: done() or self._level != level, timeout)


class Watchdog:
    """A running watchdog (:func:`start_watchdog`): its process and the pipe's write end."""

    def __init__(self, process: subprocess.Popen[bytes], fd: int) -> None:
        self.process = process
        self._fd: int | None = fd

    @property
    def armed(self) -> bool:
        """Whether the watchdog still guards the group (not yet dismissed)."""
        return self._fd is not None

    async def dismiss(self) -> None:
        """Kill the watchdog (it has nothing to do) and reap it, waiting at most a second."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        # Killed before the pipe closes, so it can never take the close for the proxy's
        # death. It is our child until reaped, so its pid cannot belong to anyone else.
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        os.close(fd)
        # poll() is a non-blocking waitpid: the loop never waits on a child here.
        await _poll(lambda: self.process.poll() is not None, _KILL_WAIT)


def start_watchdog(pgid: int, grace: float = TERM_GRACE) -> Watchdog | None:
    """Start the process that stops the group ``pgid`` (SIGTERM, then SIGKILL ``grace``
    seconds later) once this process has died, however it died; None where it cannot
    start (no interpreter to run it, or no process groups: Windows).

    Why a process and not ``PR_SET_PDEATHSIG``: that signal reaches only the direct child
    (the server, not what it started), fires when the *thread* that spawned it exits (not
    the process), needs a ``preexec_fn`` (unsafe in a process with threads, which the proxy
    has) and exists only on Linux. A pipe's EOF is POSIX, is delivered however the proxy
    dies, and costs one small process that sleeps in ``read``.

    The watchdog starts in a session of its own, so a signal to the proxy's group (a
    client's SIGKILL) does not take it along with the proxy; it inherits only the pipe's
    read end (as its stdin), and the write end is not inheritable, so no other child of the
    proxy can keep the pipe open.

    >>> import asyncio, subprocess
    >>> async def demo() -> tuple[bool, bool]:
    ...     group = subprocess.Popen(["sleep", "30"], start_new_session=True)
    ...     watchdog = start_watchdog(group.pid)
    ...     assert watchdog is not None and watchdog.armed
    ...     await watchdog.dismiss()  # a normal stop: the watchdog goes, doing nothing
    ...     untouched = group.poll() is None
    ...     group.kill(), group.wait()
    ...     return untouched, watchdog.process.returncode is not None
    >>> asyncio.run(demo())
    (True, True)
    """
    if not _GROUPS or not sys.executable:
        return None
    read_end, write_end = os.pipe()  # neither end is inheritable
    work = [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pgid), repr(grace)]
    if os.access(_SHELL, os.X_OK):
        work = [_SHELL, "-c", _SHELL_WAIT, "gcfkit-watchdog", *work]
    try:
        # A plain Popen, not the event loop's subprocess: it forks in 0.2 ms where an
        # awaited asyncio spawn takes 4 ms, and that is on the way to the first answer.
        process = subprocess.Popen(
            work,
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",  # holds no directory of the user's
        )
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    return Watchdog(process, write_end)


async def _poll(done: Callable[[], bool], timeout: float | None) -> bool:
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    delay = _POLL_FIRST
    while not done():
        now = loop.time()
        if deadline is not None and now >= deadline:
            return False
        await asyncio.sleep(delay if deadline is None else min(delay, deadline - now))
        delay = min(delay * 2, _POLL_MAX)
    return True


def stop_signals(
    loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]
) -> Callable[[], None]:
    """Route SIGTERM, SIGINT and SIGHUP to ``on_signal(signum)`` on ``loop``; returns the
    function that puts the previous handling back. Signals the platform or the thread
    cannot handle are skipped (Windows has no ``add_signal_handler``)."""
    installed: list[int] = []
    for name in _STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal, int(sig))
            installed.append(int(sig))

    def restore() -> None:
        for sig in installed:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        if sys.platform != "win32" and signal.SIGINT in installed:
            # remove_signal_handler restores SIG_DFL; Python's own Ctrl-C handling is nicer.
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, signal.default_int_handler)

    return restore


def sigkill(process: asyncio.subprocess.Process) -> None:
    """SIGKILL, by pid: ``Process.kill`` polls first, and a poll that reaps a worker that
    has just died races the child watcher (which then logs "Unknown child process" to
    stderr). Until the watcher reaps it, a dead worker keeps its pid."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)


async def exited(process: asyncio.subprocess.Process) -> Any:
    """The process's return code, once the child watcher has reaped it."""
    while process.returncode is None:
        await asyncio.sleep(0.01)
    return process.returncode
