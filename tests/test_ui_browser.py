"""gcfkit ui in a real browser: Debian's headless chromium driven by Playwright.

One ``gcfkit ui`` process (a generated ledger, a free loopback port) and one browser for the
module. The tests type into the playground and read the page's numbers back against
``gcfkit stats --json``, exercise the dashboard, check that the page asks nothing of any other
host, and take a screenshot each (under the test's tmp dir; ``GCFKIT_SCREENSHOTS=DIR`` keeps
them somewhere else). Without chromium the module is skipped, except in CI, where
``.ci/run`` installs it and a missing browser is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .ledger_gen import make_ledger

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        raise RuntimeError("chromium is missing: .ci/run installs it (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect  # waits by polling the DOM: the page's CSP forbids eval()


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    out["PYTHONPATH"] = str(ROOT / "src")
    return out


def cli_json(*args: str) -> Any:
    proc = subprocess.run(
        [sys.executable, "-m", "gcfkit.cli", *args],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ledger")
    return make_ledger(tmp / "ledger.jsonl", tmp)


@pytest.fixture(scope="module")
def server(ledger: Path) -> Iterator[str]:
    """``gcfkit ui --port 0``: the URL it printed; stopped (and reaped) after the module."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gcfkit.cli", "ui", "--port", "0", "--ledger-file", str(ledger)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            url = m.group(1) if m else None
        assert url, "gcfkit ui did not print its URL"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="gcfkit-chromium-")
    try:
        with sync_api.sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=FLAGS,
                viewport={"width": 1360, "height": 940},
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    keep = os.environ.get("GCFKIT_SCREENSHOTS")
    path = Path(keep) if keep else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    page = browser.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server)
    page.wait_for_selector("#example option[value='time-convert']", state="attached")
    yield page
    page.close()
    foreign = [u for u in requests if not u.startswith(server)]
    assert not foreign, f"the page asked other hosts: {foreign}"
    assert not [e for e in errors if "400" not in e], errors  # a 400 is a test's bad input


def numbers(page: Any, fmt: str) -> dict[str, int]:
    card = page.locator(f".fmt[data-format='{fmt}']")
    out = {}
    for field in ("o200k", "cl100k", "bytes"):
        out[field] = int(card.locator(f"[data-field='{field}']").inner_text().replace(",", ""))
    return out


def stats_of(text: str, tmp: Path) -> dict[str, Any]:
    path = tmp / "input.json"
    path.write_text(text, encoding="utf-8")
    data = cli_json("stats", "--json", str(path))
    return {f["format"]: f for f in data["formats"]} | {"best": data["best_lossless"]}


def test_typing_json_shows_every_format_with_the_numbers_of_gcfkit_stats(
    page: Any, shots: Path, tmp_path: Path
) -> None:
    rows = [{"id": i, "name": f"user {i}", "team": "core", "active": i % 3 != 0} for i in range(12)]
    text = json.dumps({"users": rows}, indent=2)
    area = page.locator("#input")
    area.click()
    page.keyboard.insert_text(text[:-1])
    page.keyboard.type(text[-1])  # the last key typed, as a person would end
    page.wait_for_selector(".fmt[data-format='gcf'] [data-field='o200k']")
    expect(page.locator("#status")).to_contain_text("valid JSON")
    want = stats_of(text, tmp_path)
    for fmt in ("json-pretty", "json-compact", "gcf"):
        got = numbers(page, fmt)
        w = want[fmt]
        assert got == {
            "o200k": w["tokens"]["o200k_base"],
            "cl100k": w["tokens"]["cl100k_base"],
            "bytes": w["bytes"],
        }, fmt
        lossless = page.locator(f".fmt[data-format='{fmt}'] [data-field='lossless']").inner_text()
        assert "✓ lossless" in lossless
    saving = page.locator(".fmt[data-format='gcf'] [data-field='saving']").inner_text()
    assert saving == f"−{want['gcf']['saving']['o200k_base'] * 100:.1f}%"
    label = {"gcf": "GCF", "gcx1": "GCX1", "toon": "TOON", "json-compact": "JSON, compact"}
    assert page.locator("[data-field='best-format']").inner_text() == label[want["best"]]
    best = want[want["best"]]["tokens"]["o200k_base"]
    assert page.locator("[data-field='best-tokens']").inner_text() == f"{best:,}"
    gcf_text = page.locator(".fmt[data-format='gcf'] [data-field='text']").inner_text()
    assert gcf_text.startswith("GCF profile=generic\n## users [12]{id,name,team,active}")
    ext = page.locator(".fmt[data-format='gcf-ext']")
    assert ext.count() == 1 and "GCF with extensions" in ext.inner_text()
    page.screenshot(path=str(shots / "playground-typed.png"), full_page=True)


def test_a_bundled_example_and_gcf_decoded_back(page: Any, shots: Path, tmp_path: Path) -> None:
    page.select_option("#example", "memory-read-graph")
    expect(page.locator("#status")).to_contain_text("4,405 bytes")
    text = page.locator("#input").input_value()
    want = stats_of(text, tmp_path)
    assert numbers(page, "gcf")["o200k"] == want["gcf"]["tokens"]["o200k_base"]
    gcx1 = page.locator(".fmt[data-format='gcx1'] [data-field='error']").inner_text()
    assert "unsupported_shape" in gcx1  # GCX1 refuses nested records, and says so
    page.screenshot(path=str(shots / "playground-example.png"), full_page=True)

    gcf = page.locator(".fmt[data-format='gcf'] [data-field='text']").inner_text()
    page.fill("#input", gcf)
    page.wait_for_selector("#decoded-panel:not([hidden])")
    decoded = json.loads(page.locator("#decoded").inner_text())
    assert decoded == json.loads(text)
    assert "GCF (generic profile), decoded" in page.locator("#status").inner_text()
    page.screenshot(path=str(shots / "playground-gcf-decoded.png"), full_page=True)


def test_bad_input_says_what_and_where(page: Any, shots: Path) -> None:
    page.fill("#input", '{\n  "a": 1,\n  "b": \n}')
    page.wait_for_selector("#status.error")
    status = page.locator("#status").inner_text()
    assert status.startswith("invalid_json (line 4):"), status
    assert page.locator(".fmt").count() == 0
    page.fill("#input", "GCF profile=generic\nx=~\n")
    expect(page.locator("#status")).to_contain_text("invalid_missing (line 2)")
    page.screenshot(path=str(shots / "playground-error.png"))


def test_the_dashboard_shows_the_numbers_of_gcfkit_stats(
    page: Any, shots: Path, ledger: Path
) -> None:
    page.click("a.tab[data-tab='savings']")
    page.wait_for_selector("#sv-cards [data-field='tokens_saved']")
    want = cli_json("stats", "--json", "--ledger", "--ledger-file", str(ledger))
    total = want["total"]
    card = page.locator("#sv-cards [data-field='tokens_saved']").inner_text()
    assert card == f"{total['tokens_saved']:,}"
    assert page.locator("#sv-cards [data-field='calls']").inner_text() == f"{total['calls']:,}"
    assert page.locator("#sv-tool-table tbody tr").count() == len(want["tools"])
    first = page.locator("#sv-tool-table tbody tr").first.locator("td")
    top = want["tools"][0]
    assert first.nth(0).inner_text() == top["server"] and first.nth(1).inner_text() == top["tool"]
    assert first.nth(3).inner_text() == f"{top['tokens_before']:,} → {top['tokens_after']:,}"
    foot = page.locator("#sv-server-table tfoot td").nth(2).inner_text()
    assert foot == f"{total['tokens_before']:,} → {total['tokens_after']:,}"
    assert page.locator("#sv-timeline svg rect").count() > 10
    left = page.locator("#sv-decisions tbody tr", has_text="fallback:time-budget")
    assert "left alone" in left.inner_text() and "time budget" in left.inner_text()
    page.screenshot(path=str(shots / "dashboard-all.png"), full_page=True)

    page.click("#since button[data-since='7d']")
    week = cli_json("stats", "--json", "--ledger", "--ledger-file", str(ledger), "--since", "7d")
    calls = f"{week['total']['calls']:,}"
    expect(page.locator("#sv-cards [data-field='calls']")).to_have_text(calls)
    saved = page.locator("#sv-cards [data-field='tokens_saved']").inner_text()
    assert saved == f"{week['total']['tokens_saved']:,}"
    page.screenshot(path=str(shots / "dashboard-7d.png"), full_page=True)


def test_an_empty_ledger_says_what_to_do(browser: Any, tmp_path: Path, shots: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gcfkit.cli",
            "ui",
            "--port",
            "0",
            "--ledger-file",
            str(tmp_path / "none"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stderr is not None
        m = re.search(r"(http://127\.0\.0\.1:\d+/)", proc.stderr.readline())
        assert m
        page = browser.new_page()
        with contextlib.closing(page):
            page.goto(m.group(1) + "#savings")
            page.wait_for_selector("#sv-empty:not([hidden])")
            assert "gcfkit install-mcp" in page.locator("#sv-empty").inner_text()
            page.screenshot(path=str(shots / "dashboard-empty.png"))
    finally:
        proc.terminate()
        proc.wait(10)


def _overflow(page: Any) -> int:
    """How far the page is wider than the viewport (0: nothing spills past the edge)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def _inside(page: Any, locator: Any, width: int) -> None:
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, box


@pytest.mark.parametrize("width", [420, 900, 1366])
def test_the_playground_fits_the_screen(page: Any, shots: Path, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.select_option("#example", "memory-read-graph")  # compact JSON: one 4 KB line
    expect(page.locator("#status")).to_contain_text("4,405 bytes")
    page.wait_for_selector(".fmt[data-format='gcf'] [data-field='o200k']")
    assert _overflow(page) == 0
    cards = page.locator(".fmt")
    assert cards.count() == 6
    for i in range(cards.count()):
        card = cards.nth(i)
        _inside(page, card, width)
        _inside(page, card.locator("[data-field='lossless']"), width)
        if card.locator("button").count():
            _inside(page, card.locator("button"), width)
            _inside(page, card.locator("[data-field='o200k']"), width)
    _inside(page, page.locator(".summary-panel"), width)
    page.screenshot(path=str(shots / f"playground-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [420, 900, 1366])
def test_invalid_json_says_why_in_the_right_panel(page: Any, shots: Path, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.fill("#input", '{"a": 1,')
    page.wait_for_selector("#headline [data-field='problem']")
    said = page.locator(".summary-panel").inner_text()
    assert "Paste something" not in said
    assert "invalid_json (line 1)" in said
    assert _overflow(page) == 0
    page.screenshot(path=str(shots / f"playground-invalid-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [420, 900, 1366])
def test_the_dashboard_fits_and_explains_every_decision(
    page: Any, shots: Path, ledger: Path, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.click("a.tab[data-tab='savings']")
    page.wait_for_selector("#sv-cards [data-field='tokens_saved']")
    assert _overflow(page) == 0
    for word in ("dense", "gcf", "unchanged", "passthrough-file", "json-minified"):
        row = page.locator("#sv-decisions tbody tr", has_text=word).first
        meaning = row.locator("td").nth(3).inner_text()
        assert meaning and meaning != word, (word, meaning)
    dense = page.locator("#sv-decisions tbody tr").filter(
        has=page.locator("code", has_text=re.compile(r"^dense$"))
    )
    assert "dense profile" in dense.inner_text()
    want = cli_json("stats", "--json", "--ledger", "--ledger-file", str(ledger))
    grown = [t for t in want["tools"] if t["why_larger"]]
    assert grown  # the corpus replay names text results with a ref= block
    row = page.locator("#sv-tool-table tbody tr", has_text=grown[0]["tool"]).first
    assert row.locator("[data-field='change']").inner_text().startswith(grown[0]["change"])
    assert "ref= handle" in row.locator("[data-field='why-larger']").inner_text()
    # The timeline is drawn for the width it has, so its labels are never scaled down.
    svg = page.locator("#sv-timeline svg")
    box = svg.bounding_box()
    assert box is not None and box["x"] > 0 and box["x"] + box["width"] <= width
    assert abs(box["width"] - float(svg.get_attribute("width") or 0)) < 1.5
    page.screenshot(path=str(shots / f"dashboard-{width}.png"), full_page=True)
