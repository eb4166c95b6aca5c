"""Codec functions that misbehave, importable by name (the proxy's worker process receives
its codec by pickle, by reference)."""

from __future__ import annotations

import time
from typing import Any

import gcfkit


def stuck_dumps(value: Any) -> str:
    """An encode that does not end (an hour) on anything but a tiny value (the warm-up's),
    like a pathological input would."""
    if len(repr(value)) > 100:
        time.sleep(3600)
    return gcfkit.dumps(value)
