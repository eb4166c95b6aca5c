"""The extension documents name every error code their fixtures expect.

An independent implementation is written from the documents and checked against the
fixtures: a code a fixture expects and no document names is a rule only gcfkit knows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = {
    "dense": ROOT / "docs" / "extensions" / "dense.md",
    "relative": ROOT / "docs" / "extensions" / "relative-answers.md",
    "v360": ROOT / "docs" / "extensions" / "v3.6.0-forms.md",
}


def expected_codes(folder: str) -> dict[str, list[str]]:
    """Each code the fixtures of ``folder`` expect, and the fixtures that expect it."""
    codes: dict[str, list[str]] = {}
    for p in sorted((ROOT / "tests" / "fixtures" / folder).rglob("*.json")):
        want = json.loads(p.read_text(encoding="utf-8")).get("expectedError")
        code = want.get("code") if isinstance(want, dict) else want
        if code is not None:
            codes.setdefault(code, []).append(p.name)
    return codes


@pytest.mark.parametrize("folder", sorted(DOCS))
def test_every_expected_code_is_named_in_its_document(folder: str) -> None:
    named = set(re.findall(r"`([a-z_]+)`", DOCS[folder].read_text(encoding="utf-8")))
    codes = expected_codes(folder)
    assert codes, folder
    missing = {c: fx for c, fx in codes.items() if c not in named}
    assert not missing, f"{DOCS[folder].name} names no {missing}"


@pytest.mark.parametrize("folder", sorted(DOCS))
def test_every_fixture_a_document_cites_exists(folder: str) -> None:
    text = DOCS[folder].read_text(encoding="utf-8")
    base = ROOT / "tests" / "fixtures" / folder
    names = {p.relative_to(base).with_suffix("").as_posix() for p in base.rglob("*.json")}
    folders = {n.split("/")[0] for n in names}
    cited = [
        f"{sub}/{name}"
        for sub, name in re.findall(r"`([a-z-]+)/(\d{3}_[a-z0-9_]+)`", text)
        if sub in folders
    ]
    assert cited, f"{DOCS[folder].name} cites no fixture"
    assert all(c in names for c in cited), [c for c in cited if c not in names]
