"""The README's screenshot of the demo's report: ``make demo``'s search as ``--report`` writes it, opened in
headless Chromium (Playwright), the top of the page -> docs/report_demo.png.

Usage::

    python scripts/report_screenshot.py [--out docs/report_demo.png]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simcast.api.optimize import optimize  # noqa: E402
from simcast.api.report import report_html  # noqa: E402
from simcast.api.search_inputs import DEMO_MODEL, DEMO_REPORT, DEMO_SEARCH  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "report_demo.png")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as d:
        page_path = report_html(optimize(model=DEMO_MODEL, **DEMO_SEARCH), Path(d) / DEMO_REPORT)
        with sync_playwright() as pw:
            b = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = b.new_page(viewport={"width": 1280, "height": 1180}, device_scale_factor=1)
            page.goto(page_path.as_uri())
            page.screenshot(path=str(args.out))
            b.close()
    print(f"wrote {args.out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
