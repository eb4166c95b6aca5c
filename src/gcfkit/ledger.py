"""The savings ledger file: one payload-free JSON line per tool result the proxy handled.

A line is a :class:`~gcfkit.proxy.record.LedgerRecord` (server, tool, bytes and tokens
before and after, decision, encode time) stamped with the wall time it was written. It never
holds content, arguments or anything else from the payload, so the ledger is safe to keep
and share.

The split follows the architecture: the sans-I/O proxy core builds records; the transport
appends them with :meth:`Ledger.append`, which stamps the time and never raises.
``gcfkit stats`` reads them back with :func:`read_entries` and aggregates them with
:mod:`gcfkit.measure.savings`.

Location: ``$GCFKIT_STATE_DIR/ledger.jsonl`` if that variable is set, else
``$XDG_STATE_HOME/gcfkit/ledger.jsonl``, else ``~/.local/state/gcfkit/ledger.jsonl``
(:func:`gcfkit.paths.default_ledger_path`).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl"
>>> rec = LedgerRecord(server="git", tool="git_log", bytes_before=1000, bytes_after=400,
...                    tokens_before=300, tokens_after=120, encoding="o200k_base",
...                    decision="gcf", encode_ms=1.5)
>>> Ledger(path).append(rec, time="2026-01-02T03:04:05.000Z")
True
>>> [(e.time, e.record.tokens_saved) for e in read_entries(path)]
[('2026-01-02T03:04:05.000Z', 180)]
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO

from .errors import ConfigError
from .jsonio import dumps_compact
from .paths import default_ledger_path
from .proxy.record import LedgerRecord

__all__ = [
    "Ledger",
    "LedgerEntries",
    "LedgerEntry",
    "LedgerRecord",
    "parse_since",
    "parse_time",
    "read_entries",
    "utc_now_iso",
]


def utc_now_iso() -> str:
    """The current time as ISO 8601 UTC with milliseconds and a ``Z`` suffix.

    >>> len(utc_now_iso()) == len("2026-01-02T03:04:05.000Z")
    True
    """
    return _format_time(datetime.now(timezone.utc))


def _format_time(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime:
    """An ISO 8601 date or datetime as an aware UTC datetime (naive means UTC).

    Raises ``ValueError`` when ``text`` is not one.

    >>> parse_time("2026-01-02T03:04:05.000Z").isoformat()
    '2026-01-02T03:04:05+00:00'
    """
    # datetime.fromisoformat only learned the Z suffix in 3.11; we support 3.10.
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:
        # 0001-01-01T00:00:00+01:00 is a valid ISO text whose UTC moment is before year 1.
        raise ValueError(f"{text!r} is out of range in UTC") from None


@dataclass(frozen=True)
class LedgerEntry:
    """One ledger line: the wall time it was written and the record.

    >>> e = LedgerEntry("2026-01-02T03:04:05.000Z",
    ...                 LedgerRecord("git", "git_log", 100, 40, 30, 12, "o200k_base", "gcf", 0.5))
    >>> LedgerEntry.from_json(e.to_json()) == e
    True
    """

    time: str
    record: LedgerRecord

    def to_json(self) -> str:
        """One compact JSON line, ``time`` first, without the trailing newline."""
        return dumps_compact({"time": self.time, **self.record.to_dict()})

    @classmethod
    def from_json(cls, line: str) -> LedgerEntry:
        """Parse one ledger line; raises ``ValueError`` if it is not a valid entry."""
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("a ledger line is not a JSON object")
        time = data.get("time")
        if not isinstance(time, str):
            raise ValueError("field 'time' is not a string")
        parse_time(time)
        return cls(time, LedgerRecord.from_dict(data))


class Ledger:
    """An append-only ledger file. :meth:`append` never raises into its caller.

    ``path`` defaults to :func:`gcfkit.paths.default_ledger_path`. An I/O failure is reported
    once per ``Ledger`` on ``stderr`` (or the ``warn_stream`` given) and then silently
    ignored: losing a statistic must never break a tool call.

    >>> import tempfile, pathlib
    >>> led = Ledger(pathlib.Path(tempfile.mkdtemp()) / "sub" / "ledger.jsonl")
    >>> led.append(LedgerRecord("s", "t", 10, 5, 4, 2, "o200k_base", "gcf", 0.1))
    True
    >>> len(led.path.read_text().splitlines())
    1
    """

    def __init__(self, path: Path | str | None = None, *, warn_stream: IO[str] | None = None):
        self.path = Path(path) if path is not None else default_ledger_path()
        self._warn_stream = warn_stream
        self._warned = False

    def append(self, record: LedgerRecord, *, time: str | None = None) -> bool:
        """Append one line stamped ``time`` (default: now, :func:`utc_now_iso`); ``True`` if it
        was written, ``False`` if it was dropped."""
        return self.append_all((record,), time=time)

    def append_all(self, records: Iterable[LedgerRecord], *, time: str | None = None) -> bool:
        """Append one line per record, all stamped ``time`` (default: now), with one open of
        the file (a proxy answering hundreds of results a second writes them in batches).

        >>> import tempfile, pathlib
        >>> led = Ledger(pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl")
        >>> led.append_all([LedgerRecord("s", t, 10, 5, 4, 2, "o200k_base", "gcf", 0.1)
        ...                 for t in ("a", "b")])
        True
        >>> [e.record.tool for e in read_entries(led.path)]
        ['a', 'b']
        """
        try:
            stamp = utc_now_iso() if time is None else time
            data = "".join(LedgerEntry(stamp, r).to_json() + "\n" for r in records).encode()
            if not data:
                return True
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                # One write: an O_APPEND write to a regular file is not interleaved with
                # another process's, whatever its size.
                _append_line(fd, data)
            finally:
                os.close(fd)
        except Exception as e:  # the proxy must survive any ledger failure, whatever it is
            self._warn(e)
            return False
        return True

    def _warn(self, error: BaseException) -> None:
        if self._warned:
            return
        self._warned = True
        stream = self._warn_stream if self._warn_stream is not None else sys.stderr
        # A closed or broken stderr must not break the proxy either.
        with contextlib.suppress(Exception):
            print(
                f"gcfkit: warning: cannot write the savings ledger {self.path}: {error} "
                "(further ledger errors are not reported)",
                file=stream,
            )


def _append_line(fd: int, data: bytes) -> None:
    """Append one LF-terminated line to the O_APPEND file ``fd`` so that it stays a line of
    its own whatever happened before: a full disk can leave a torn line behind (a short
    ``os.write``), and a record written right after it would be glued to it and lost.

    So a file that does not end with LF gets one first (the torn line stays one corrupt
    line), a short write is continued, and a failure mid-line still tries to end the line.
    One ``os.write`` on an O_APPEND descriptor is what keeps concurrent proxies from
    interleaving inside a line (records are far below PIPE_BUF), so the LF goes in the
    same write as the record.
    """
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        data = b"\n" + data
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            if written <= 0:
                raise OSError(errno.ENOSPC, "short write: no space left")
            view = view[written:]
    except OSError:
        if len(view) < len(data):
            with contextlib.suppress(OSError):
                os.write(fd, b"\n")
        raise


class LedgerEntries(list[LedgerEntry]):
    """The entries read from a ledger, plus ``corrupt``: how many lines were skipped."""

    corrupt: int = 0


def read_entries(path: Path | str | None = None, since: datetime | None = None) -> LedgerEntries:
    """Read a ledger, oldest first, keeping entries at or after ``since`` (UTC if naive).

    A missing file is an empty ledger. Lines that are not valid entries (torn writes, hand
    edits) are skipped and counted in the result's ``corrupt``. An unreadable file raises
    :class:`~gcfkit.errors.ConfigError` ``io_error``.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl"
    >>> _ = p.write_text("not json\\n")
    >>> rs = read_entries(p)
    >>> (len(rs), rs.corrupt)
    (0, 1)
    """
    target = Path(path) if path is not None else default_ledger_path()
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    result = LedgerEntries()
    try:
        handle = open(target, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return result
    except OSError as e:
        raise ConfigError("io_error", f"cannot read the ledger {target}: {e.strerror}") from e
    corrupt = 0
    with handle:
        try:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    entry = LedgerEntry.from_json(raw.decode("utf-8"))
                    moment = parse_time(entry.time)
                except (ValueError, UnicodeDecodeError, RecursionError):
                    corrupt += 1
                    continue
                if since is None or moment >= since:
                    result.append(entry)
        except OSError as e:
            raise ConfigError("io_error", f"cannot read the ledger {target}: {e.strerror}") from e
    result.corrupt = corrupt
    return result


_RELATIVE = re.compile(r"\s*(\d+)\s*([smhdw])\s*", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """Parse a ``--since`` value into an aware UTC datetime.

    Accepts a relative age (``90s``, ``30m``, ``24h``, ``7d``, ``2w``: that long before
    ``now``), an ISO date (``2026-01-02``: midnight UTC) or an ISO datetime (``Z`` or an offset;
    naive means UTC). Anything else raises :class:`~gcfkit.errors.ConfigError`
    ``invalid_option``.

    >>> now = datetime(2026, 1, 8, 12, tzinfo=timezone.utc)
    >>> parse_since("7d", now=now).isoformat()
    '2026-01-01T12:00:00+00:00'
    >>> parse_since("2026-01-02").isoformat()
    '2026-01-02T00:00:00+00:00'
    """
    match = _RELATIVE.fullmatch(text)
    if match:
        if now is None:
            now = datetime.now(timezone.utc)
        elif now.tzinfo is None:
            now = now.replace(tzinfo=timezone.utc)
        seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        try:
            return (now - timedelta(seconds=seconds)).astimezone(timezone.utc)
        except OverflowError:
            return datetime.min.replace(tzinfo=timezone.utc)
    try:
        return parse_time(text.strip())
    except ValueError:
        raise ConfigError(
            "invalid_option",
            f"--since {text!r} is neither an age like 7d, 24h, 30m, 2w nor an ISO date or "
            "datetime like 2026-01-02 or 2026-01-02T15:00:00Z",
        ) from None
