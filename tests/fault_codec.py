"""Codec functions that misbehave, importable by name (the proxy's worker process receives
its codec by pickle, by reference)."""

from __future__ import annotations

import os
import time
from typing import Any

import gcfkit


def stuck_dumps(value: Any) -> str:
    """An encode that does not end (an hour) on anything but a tiny value (the warm-up's),
    like a pathological input would."""
    if len(repr(value)) > 100:
        time.sleep(3600)
    return gcfkit.dumps(value)


def marked_stuck_dumps(value: Any) -> str:
    """:func:`stuck_dumps` that first appends a line to the file ``$GCFKIT_TEST_MARK``, so a
    test knows the encode has begun (and the result is in the proxy) without sleeping."""
    if len(repr(value)) > 100:
        mark = os.environ.get("GCFKIT_TEST_MARK")
        if mark:
            with open(mark, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\n")
        time.sleep(3600)
    return gcfkit.dumps(value)


def slow_marked_count(text: str, encoding: str) -> int:
    """:func:`gcfkit.tokens.count` that takes 3 s on a text containing ``SLOW-COUNT`` (a
    large text on a loaded machine): only the ledger counts such a text (it is delivered
    unchanged)."""
    if "SLOW-COUNT" in text:
        time.sleep(3)
    from gcfkit import tokens

    return tokens.count(text, encoding)


#: Encodes done in the test's own process by :func:`crash_dumps` (the event loop's).
IN_PARENT: list[int] = []


def crash_dumps(value: Any) -> str:
    """An encode that kills the worker process it runs in (as a crash of compiled code would)
    on anything but a tiny value; in the process named by ``$GCFKIT_TEST_PARENT`` (the test
    itself) it only counts the call in :data:`IN_PARENT` and encodes."""
    if len(repr(value)) > 100:
        if str(os.getpid()) == os.environ.get("GCFKIT_TEST_PARENT"):
            IN_PARENT.append(1)
        else:
            os._exit(70)
    return gcfkit.dumps(value)


def stuck_on_mark_dumps(value: Any) -> str:
    """An encode that does not end (an hour) on a value that holds the string ``STUCK``
    (one session's pathological result); any other encodes as usual."""
    if "STUCK" in repr(value):
        time.sleep(3600)
    return gcfkit.dumps(value)
