"""A progress bar that appears only when the work takes more than a second.

Shown with ``rich`` on stderr when stderr is a terminal; otherwise (piped, CI, no ``rich``)
nothing is drawn, and the work is the same.

>>> with Progress(3, "replaying") as bar:
...     for _ in range(3):
...         bar.advance()
>>> bar.done
3
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any

__all__ = ["Progress"]

#: Seconds of work before the bar is drawn: quick runs print nothing extra.
DELAY = 1.0


class Progress:
    """Counts ``total`` steps; draws a bar once :data:`DELAY` seconds have passed."""

    def __init__(self, total: int, label: str, *, delay: float = DELAY) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self._delay = delay
        self._started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        self._enabled = _stderr_is_terminal()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more done."""
        self.done += steps
        if self._bar is None and self._enabled:
            if time.monotonic() - self._started < self._delay:
                return
            self._start()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)

    def _start(self) -> None:
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress
        except ImportError:
            self._enabled = False
            return
        self._bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
