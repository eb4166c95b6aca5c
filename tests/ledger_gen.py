"""A generated savings ledger for the dashboard tests: real decisions, spread over days.

The records come from the real corpus replayed through the proxy core when it is there
(``../shared/corpus/mcp``), else from a synthetic session; each is stamped at a seeded
moment in the ten days before ``now``, and a few fallbacks and file reads are added, so the
dashboard has every kind of row to show.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gcfkit.ledger import Ledger, LedgerRecord
from gcfkit.traffic.corpus import SessionWriter, read_sessions
from gcfkit.traffic.replay import Replay

from .conformance import CORPUS_DIR

CORPUS = CORPUS_DIR / "mcp"
#: Records are stamped up to ten days before now, none within an hour of the dashboard's
#: period boundaries (24 hours, 7 and 30 days ago), so a period's totals cannot depend on the
#: second a test asks.
NOW = datetime.now(timezone.utc).replace(microsecond=0)
_BOUNDARIES = (86400, 7 * 86400, 30 * 86400)


def _records(tmp: Path) -> list[LedgerRecord]:
    if CORPUS.is_dir():
        sessions = read_sessions(CORPUS)
    else:
        w = SessionWriter(tmp / "shop", "shop")
        for n in range(12):
            rows = [
                {"id": i, "sku": f"S-{i:04d}", "qty": i % 7, "state": "open"} for i in range(n * 5)
            ]
            w.write_call(
                "list_orders",
                {"page": n},
                {"content": [{"type": "text", "text": json.dumps(rows)}]},
            )
        sessions = read_sessions(tmp / "shop")
    out: list[LedgerRecord] = []
    for session in sessions:
        replay = Replay(session)
        out += [x.record for call in session.calls if (x := replay.call(call)).record is not None]
    return out


def make_ledger(path: Path, tmp: Path, *, seed: int = 7) -> Path:
    """Write the ledger at ``path`` (a fresh file) and return it."""
    rng = random.Random(seed)
    records = _records(tmp)
    records += [
        LedgerRecord(
            "git",
            "git_diff",
            90_000,
            90_000,
            24_000,
            24_000,
            "o200k_base",
            "fallback:time-budget",
            512.0,
        ),
        LedgerRecord(
            "memory",
            "read_graph",
            4_000,
            4_000,
            1_100,
            1_100,
            "o200k_base",
            "fallback:selfcheck",
            3.0,
        ),
    ]
    ledger = Ledger(path)
    stamped = []
    for record in records:
        age = rng.randrange(3600, 10 * 86400)
        while any(abs(age - b) < 3600 for b in _BOUNDARIES):
            age = rng.randrange(3600, 10 * 86400)
        stamped.append((NOW - timedelta(seconds=age), record))
    for moment, record in sorted(stamped, key=lambda x: x[0]):
        iso = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        assert ledger.append(record, time=iso)
    return path
