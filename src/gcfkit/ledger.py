"""The payload-free savings ledger: one JSON line per tool result the proxy handled.

A record says which server and tool answered, how many bytes and tokens the result had before
and after the proxy, what the proxy decided, and how long encoding took. It never holds
content, arguments or anything else from the payload, so the ledger is safe to keep and share.

The split follows the architecture: the sans-I/O proxy core only *builds*
:class:`LedgerRecord` values; the transport *writes* them with :meth:`Ledger.append`, which
never raises. ``gcfkit stats`` reads them back with :func:`read_records`, aggregates with
:func:`summarize` and shows them with :func:`render_summary` or :func:`summary_to_json`.

Location: ``$GCFKIT_STATE_DIR/ledger.jsonl`` if that variable is set, else
``$XDG_STATE_HOME/gcfkit/ledger.jsonl``, else ``~/.local/state/gcfkit/ledger.jsonl``.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl"
>>> rec = LedgerRecord(server="git", tool="git_log", bytes_before=1000, bytes_after=400,
...                    tokens_before=300, tokens_after=120, encoding="o200k_base",
...                    decision="gcf", encode_ms=1.5, time="2026-01-02T03:04:05.000Z")
>>> Ledger(path).append(rec)
True
>>> s = summarize(read_records(path))
>>> (s.total.calls, s.total.tokens_saved)
(1, 180)
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .errors import GCFError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "LEDGER_FILENAME",
    "Ledger",
    "LedgerRecord",
    "LedgerRecords",
    "Summary",
    "Totals",
    "default_ledger_path",
    "parse_since",
    "read_records",
    "render_summary",
    "state_dir",
    "summarize",
    "summary_to_json",
    "utc_now_iso",
]

LEDGER_FILENAME = "ledger.jsonl"

#: The integer fields of a record, in wire order after ``time``/``server``/``tool``.
_INT_FIELDS = ("bytes_before", "bytes_after", "tokens_before", "tokens_after")


def utc_now_iso() -> str:
    """The current time as ISO 8601 UTC with milliseconds and a ``Z`` suffix.

    >>> len(utc_now_iso()) == len("2026-01-02T03:04:05.000Z")
    True
    """
    return _format_time(datetime.now(timezone.utc))


def _format_time(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _parse_time(text: str) -> datetime:
    # datetime.fromisoformat only learned the Z suffix in 3.11; we support 3.10.
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """gcfkit's per-user state directory (ledger, install records, config backups).

    ``GCFKIT_STATE_DIR`` wins, then ``$XDG_STATE_HOME/gcfkit``, then
    ``~/.local/state/gcfkit`` (``~`` from ``HOME`` in ``env`` when given).

    >>> state_dir({"GCFKIT_STATE_DIR": "/tmp/s"}).as_posix()
    '/tmp/s'
    >>> state_dir({"HOME": "/home/u"}).as_posix()
    '/home/u/.local/state/gcfkit'
    """
    env = os.environ if env is None else env
    explicit = env.get("GCFKIT_STATE_DIR")
    if explicit:
        return Path(explicit)
    xdg = env.get("XDG_STATE_HOME")
    # The XDG spec says a relative value is invalid and must be ignored.
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "gcfkit"
    home = env.get("HOME")
    base = Path(home) if home else Path.home()
    return base / ".local" / "state" / "gcfkit"


def default_ledger_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the ledger lives unless a path is given: ``state_dir(env) / "ledger.jsonl"``.

    >>> default_ledger_path({"XDG_STATE_HOME": "/x"}).as_posix()
    '/x/gcfkit/ledger.jsonl'
    """
    return state_dir(env) / LEDGER_FILENAME


@dataclass(frozen=True)
class LedgerRecord:
    """What the proxy did with one tool result; sizes and a decision, never content.

    ``decision`` is a short word: ``gcf``, ``json-minified``, ``unchanged``,
    ``passthrough-file``, ``delta``, ``unchanged-delta`` or ``fallback:<reason>``.
    ``encoding`` names the tokenizer the token counts come from (e.g. ``o200k_base``).
    ``time`` defaults to now, so the sans-I/O core may leave it out; pass it for determinism.

    >>> r = LedgerRecord("git", "git_log", 100, 40, 30, 12, "o200k_base", "gcf", 0.5,
    ...                  time="2026-01-02T03:04:05.000Z")
    >>> r.tokens_saved, LedgerRecord.from_json(r.to_json()) == r
    (18, True)
    """

    server: str
    tool: str
    bytes_before: int
    bytes_after: int
    tokens_before: int
    tokens_after: int
    encoding: str
    decision: str
    encode_ms: float
    time: str = field(default_factory=utc_now_iso)

    @property
    def tokens_saved(self) -> int:
        """``tokens_before - tokens_after`` (negative if the result grew)."""
        return self.tokens_before - self.tokens_after

    @property
    def bytes_saved(self) -> int:
        """``bytes_before - bytes_after`` (negative if the result grew)."""
        return self.bytes_before - self.bytes_after

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, ``time`` first."""
        return {
            "time": self.time,
            "server": self.server,
            "tool": self.tool,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "encoding": self.encoding,
            "decision": self.decision,
            # A NaN timing must not make the line invalid JSON for every later reader.
            "encode_ms": round(self.encode_ms, 3) if math.isfinite(self.encode_ms) else 0.0,
        }

    def to_json(self) -> str:
        """One compact JSON line, without the trailing newline."""
        return json.dumps(
            self.to_dict(), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerRecord:
        """Validate and build a record; unknown keys are ignored (newer writers may add some).

        Raises ``ValueError`` on a missing or mistyped field or an unparsable time.
        """
        strings = {}
        for key in ("time", "server", "tool", "encoding", "decision"):
            value = data.get(key)
            if not isinstance(value, str):
                raise ValueError(f"field {key!r} is not a string")
            strings[key] = value
        ints = {}
        for key in _INT_FIELDS:
            value = data.get(key)
            # bool is an int subclass but never a size.
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"field {key!r} is not an integer")
            ints[key] = value
        ms = data.get("encode_ms")
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not math.isfinite(ms):
            raise ValueError("field 'encode_ms' is not a number")
        _parse_time(strings["time"])
        return cls(
            server=strings["server"],
            tool=strings["tool"],
            bytes_before=ints["bytes_before"],
            bytes_after=ints["bytes_after"],
            tokens_before=ints["tokens_before"],
            tokens_after=ints["tokens_after"],
            encoding=strings["encoding"],
            decision=strings["decision"],
            encode_ms=float(ms),
            time=strings["time"],
        )

    @classmethod
    def from_json(cls, line: str) -> LedgerRecord:
        """Parse one ledger line (see :meth:`from_dict`); raises ``ValueError`` if corrupt."""
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("a ledger line is not a JSON object")
        return cls.from_dict(data)


class Ledger:
    """An append-only ledger file. :meth:`append` never raises into its caller.

    ``path`` defaults to :func:`default_ledger_path`. An I/O failure is reported once per
    ``Ledger`` on ``stderr`` (or the ``warn_stream`` given) and then silently ignored: losing a
    statistic must never break a tool call.

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

    def append(self, record: LedgerRecord) -> bool:
        """Append one line; ``True`` if it was written, ``False`` if it was dropped."""
        try:
            data = (record.to_json() + "\n").encode("utf-8")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One os.write on an O_APPEND descriptor: concurrent proxies appending to the same
            # ledger cannot interleave inside a line (records are far below PIPE_BUF).
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
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


class LedgerRecords(list[LedgerRecord]):
    """The records read from a ledger, plus ``corrupt``: how many lines were skipped."""

    corrupt: int = 0


def read_records(path: Path | str | None = None, since: datetime | None = None) -> LedgerRecords:
    """Read a ledger, oldest first, keeping records at or after ``since`` (UTC if naive).

    A missing file is an empty ledger. Lines that are not valid records (torn writes, hand
    edits) are skipped and counted in the result's ``corrupt``. An unreadable file raises
    :class:`GCFError` ``io_error``.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "ledger.jsonl"
    >>> _ = p.write_text("not json\\n")
    >>> rs = read_records(p)
    >>> (len(rs), rs.corrupt)
    (0, 1)
    """
    target = Path(path) if path is not None else default_ledger_path()
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    result = LedgerRecords()
    try:
        handle = open(target, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        return result
    except OSError as e:
        raise GCFError("io_error", f"cannot read the ledger {target}: {e.strerror}") from e
    corrupt = 0
    with handle:
        try:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    record = LedgerRecord.from_json(raw.decode("utf-8"))
                    moment = _parse_time(record.time)
                except (ValueError, UnicodeDecodeError, RecursionError):
                    corrupt += 1
                    continue
                if since is None or moment >= since:
                    result.append(record)
        except OSError as e:
            raise GCFError("io_error", f"cannot read the ledger {target}: {e.strerror}") from e
    result.corrupt = corrupt
    return result


_RELATIVE = re.compile(r"\s*(\d+)\s*([smhdw])\s*", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """Parse a ``--since`` value into an aware UTC datetime.

    Accepts a relative age (``90s``, ``30m``, ``24h``, ``7d``, ``2w``: that long before
    ``now``), an ISO date (``2026-01-02``: midnight UTC) or an ISO datetime (``Z`` or an offset;
    naive means UTC). Anything else raises :class:`GCFError` ``invalid_option``.

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
        return _parse_time(text.strip())
    except ValueError:
        raise GCFError(
            "invalid_option",
            f"--since {text!r} is neither an age like 7d, 24h, 30m, 2w nor an ISO date or "
            "datetime like 2026-01-02 or 2026-01-02T15:00:00Z",
        ) from None


@dataclass
class Totals:
    """Sums over a group of records (one tool, one server, or everything)."""

    calls: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    encode_ms: float = 0.0
    decisions: Counter[str] = field(default_factory=Counter)

    @property
    def tokens_saved(self) -> int:
        """Tokens the proxy kept out of the context (negative if results grew)."""
        return self.tokens_before - self.tokens_after

    @property
    def bytes_saved(self) -> int:
        """Bytes the proxy kept off the wire (negative if results grew)."""
        return self.bytes_before - self.bytes_after

    @property
    def token_savings(self) -> float:
        """Saved tokens as a fraction of ``tokens_before`` (0.0 when nothing was counted)."""
        return self.tokens_saved / self.tokens_before if self.tokens_before else 0.0

    @property
    def byte_savings(self) -> float:
        """Saved bytes as a fraction of ``bytes_before`` (0.0 when nothing was counted)."""
        return self.bytes_saved / self.bytes_before if self.bytes_before else 0.0

    def add(self, record: LedgerRecord) -> None:
        """Fold one record into the sums."""
        self.calls += 1
        self.bytes_before += record.bytes_before
        self.bytes_after += record.bytes_after
        self.tokens_before += record.tokens_before
        self.tokens_after += record.tokens_after
        self.encode_ms += record.encode_ms
        self.decisions[record.decision] += 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready sums, with the derived savings."""
        return {
            "calls": self.calls,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_saved": self.bytes_saved,
            "byte_savings": round(self.byte_savings, 4),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "tokens_saved": self.tokens_saved,
            "token_savings": round(self.token_savings, 4),
            "encode_ms": round(self.encode_ms, 3),
            "decisions": dict(sorted(self.decisions.items())),
        }


@dataclass
class Summary:
    """A ledger aggregated per (server, tool), per server and overall.

    ``tools`` and ``servers`` are ordered by tokens saved, largest first. ``encodings`` lists
    the tokenizers the counts come from (more than one means the token sums mix tokenizers).
    """

    total: Totals = field(default_factory=Totals)
    tools: dict[tuple[str, str], Totals] = field(default_factory=dict)
    servers: dict[str, Totals] = field(default_factory=dict)
    encodings: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None
    corrupt: int = 0


def summarize(records: Iterable[LedgerRecord], *, corrupt: int | None = None) -> Summary:
    """Aggregate records per tool, per server and in total.

    ``corrupt`` defaults to the ``corrupt`` count of a :class:`LedgerRecords`.

    >>> r = LedgerRecord("git", "log", 100, 50, 40, 10, "o200k_base", "gcf", 1.0,
    ...                  time="2026-01-02T03:04:05.000Z")
    >>> s = summarize([r, r])
    >>> (s.tools["git", "log"].calls, s.servers["git"].tokens_saved, s.total.token_savings)
    (2, 60, 0.75)
    """
    if corrupt is None:
        corrupt = getattr(records, "corrupt", 0)
    summary = Summary(corrupt=corrupt or 0)
    tools: dict[tuple[str, str], Totals] = {}
    servers: dict[str, Totals] = {}
    encodings: set[str] = set()
    first: tuple[datetime, str] | None = None
    last: tuple[datetime, str] | None = None
    for record in records:
        summary.total.add(record)
        tools.setdefault((record.server, record.tool), Totals()).add(record)
        servers.setdefault(record.server, Totals()).add(record)
        encodings.add(record.encoding)
        try:
            moment = _parse_time(record.time)
        except ValueError:
            continue
        if first is None or moment < first[0]:
            first = (moment, record.time)
        if last is None or moment > last[0]:
            last = (moment, record.time)
    summary.tools = dict(sorted(tools.items(), key=lambda kv: (-kv[1].tokens_saved, kv[0])))
    summary.servers = dict(sorted(servers.items(), key=lambda kv: (-kv[1].tokens_saved, kv[0])))
    summary.encodings = sorted(encodings)
    summary.first = first[1] if first else None
    summary.last = last[1] if last else None
    return summary


def summary_to_json(summary: Summary) -> dict[str, Any]:
    """A JSON-ready dict of a summary (``json.dumps`` it to print).

    >>> summary_to_json(summarize([]))["total"]["calls"]
    0
    """
    return {
        "first": summary.first,
        "last": summary.last,
        "encodings": list(summary.encodings),
        "corrupt_lines": summary.corrupt,
        "total": summary.total.to_dict(),
        "servers": [{"server": name, **t.to_dict()} for name, t in summary.servers.items()],
        "tools": [
            {"server": server, "tool": tool, **t.to_dict()}
            for (server, tool), t in summary.tools.items()
        ],
    }


_BAR_WIDTH = 10


def _bar(fraction: float, width: int = _BAR_WIDTH) -> str:
    fraction = min(max(fraction, 0.0), 1.0)
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled)


def render_summary(summary: Summary, console: Console | None = None) -> None:
    """Print a summary with ``rich``: one row per tool and a total, with savings bars.

    ``console`` defaults to a new ``rich.console.Console()`` (stdout). Without ``rich``
    installed it prints a plain-text table to stdout instead, so ``gcfkit stats`` still works
    on a minimal install.

    >>> import io
    >>> from rich.console import Console
    >>> buf = io.StringIO()
    >>> render_summary(summarize([]), console=Console(file=buf, width=100))
    >>> "no tool results" in buf.getvalue()
    True
    """
    try:
        from rich.console import Console as _Console
        from rich.table import Table
    except ImportError:
        print(_plain_summary(summary), end="")
        return
    out = console if console is not None else _Console()
    if summary.total.calls == 0:
        out.print("The ledger has no tool results yet" + _corrupt_note(summary) + ".")
        return
    title = "gcfkit savings"
    if summary.first and summary.last:
        title += f" ({summary.first[:10]} .. {summary.last[:10]})"
    # Fewer, denser columns fit 80 terminal columns; the bar is the first thing to go when
    # the terminal is narrower, and long server or tool names fold rather than the numbers.
    bar = out.width >= 80
    table = Table(title=title, show_footer=True)
    total = summary.total
    table.add_column("server", footer="total", overflow="fold", ratio=1)
    table.add_column("tool", overflow="fold", ratio=2)
    table.add_column("calls", justify="right", footer=str(total.calls), no_wrap=True)
    table.add_column("tokens → gcfkit", justify="right", footer=_before_after(total))
    table.add_column("saved", justify="right", footer=_saved(total), no_wrap=True)
    if bar:
        table.add_column("", footer=_bar(total.token_savings), no_wrap=True)
    for (server, tool), t in summary.tools.items():
        cells = [server, tool, str(t.calls), _before_after(t), _saved(t)]
        table.add_row(*cells, *([_bar(t.token_savings)] if bar else []))
    out.print(table)
    notes = [f"token counts: {', '.join(summary.encodings)}"]
    decisions = ", ".join(f"{k} {v}" for k, v in sorted(total.decisions.items()))
    notes.append(f"decisions: {decisions}")
    if summary.corrupt:
        notes.append(f"{summary.corrupt} corrupt ledger line(s) skipped")
    out.print("; ".join(notes), style="dim", markup=False, highlight=False)


def _before_after(t: Totals) -> str:
    return f"{t.tokens_before:,} → {t.tokens_after:,}"


def _saved(t: Totals) -> str:
    return f"{t.tokens_saved:,} ({t.token_savings:.0%})"


def _corrupt_note(summary: Summary) -> str:
    return f" ({summary.corrupt} corrupt line(s) skipped)" if summary.corrupt else ""


def _plain_summary(summary: Summary) -> str:
    if summary.total.calls == 0:
        return "The ledger has no tool results yet" + _corrupt_note(summary) + ".\n"
    lines = []
    rows = [((s, t), v) for (s, t), v in summary.tools.items()]
    rows.append((("total", ""), summary.total))
    for (server, tool), t in rows:
        lines.append(
            f"{server:<16} {tool:<24} {t.calls:>6} {t.tokens_before:>10} {t.tokens_after:>10} "
            f"{t.token_savings:>7.1%} {_bar(t.token_savings)}"
        )
    if summary.corrupt:
        lines.append(f"{summary.corrupt} corrupt ledger line(s) skipped")
    return "\n".join(lines) + "\n"
