"""The test suite itself: without the conformance suite next to the checkout, ``make test``
says where it looked and how to point it elsewhere (GCF_CONFORMANCE_DIR)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_missing_conformance_suite_names_gcf_conformance_dir(tmp_path: Path) -> None:
    environment = {**os.environ, "GCF_CONFORMANCE_DIR": str(tmp_path / "nowhere")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_conformance.py::test_suite_is_complete",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # It fails, loudly: the fixtures are read at collection, so a missing suite is an error
    # there (every module that reads them stops), not a pass with nothing collected.
    assert done.returncode != 0, done.stdout
    assert "error" in done.stdout
    assert "GCF_CONFORMANCE_DIR" in done.stdout  # says how to point elsewhere
    assert str(tmp_path / "nowhere") in done.stdout
