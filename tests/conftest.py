"""Prints the conformance tally: per operation, how many fixtures passed and failed."""

from __future__ import annotations

import sys
from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    module = sys.modules.get("tests.test_conformance")
    outcomes = getattr(module, "OUTCOMES", None)
    if not outcomes:
        return
    tr = terminalreporter
    from tests.conformance import CONFORMANCE_DIR

    tr.section(f"GCF conformance ({CONFORMANCE_DIR})")
    passed = failed = 0
    for op in sorted({op for op, _ in outcomes}):
        p, f = outcomes[(op, "passed")], outcomes[(op, "failed")]
        passed, failed = passed + p, failed + f
        tr.write_line(f"{op:<22} {p:>4} passed {f:>4} failed")
    tr.write_line(f"{'total':<22} {passed:>4} passed {failed:>4} failed")
