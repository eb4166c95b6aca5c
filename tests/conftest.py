"""Prints the conformance tally (per operation: passed, failed, expected to fail)."""

from __future__ import annotations

import sys
from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    module = sys.modules.get("tests.test_conformance")
    outcomes = getattr(module, "OUTCOMES", None)
    if not outcomes:
        return
    tr = terminalreporter
    tr.section("GCF conformance (../shared/conformance)")
    ops = sorted({op for op, _ in outcomes})
    totals = {"passed": 0, "failed": 0, "xfail": 0}
    for op in ops:
        counts = {k: outcomes[(op, k)] for k in totals}
        for k, v in counts.items():
            totals[k] += v
        tr.write_line(
            f"{op:<22} {counts['passed']:>4} passed {counts['failed']:>4} failed "
            f"{counts['xfail']:>4} expected to fail"
        )
    tr.write_line(
        f"{'total':<22} {totals['passed']:>4} passed {totals['failed']:>4} failed "
        f"{totals['xfail']:>4} expected to fail"
    )
