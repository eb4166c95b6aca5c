"""Where gcfkit keeps its files: one per-user state directory.

It holds the savings ledger (``ledger.jsonl``), the install records of ``install-mcp``
(``installed.json``) and the backups of the client configs it edited (``backups/``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["LEDGER_FILENAME", "default_ledger_path", "state_dir"]

LEDGER_FILENAME: Final = "ledger.jsonl"


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
