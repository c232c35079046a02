"""The HTML report (``--report``, ``simcast.report_html``) without a browser: self-contained, one marker and one
table row per layout, the terminal's figures digit for digit, bounded size, deterministic, bad paths refused."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import simcast
from simcast.api.optimize import optimize
from simcast.api.report import render_html
from simcast.core.errors import SimcastInputError
from simcast.render.search_tables import best_rows, ranked_cells

SEARCH = dict(
    model="meta-llama/Llama-3.1-8B",
    device="h100_sxm",
    num_devices=4,
    input_length=1024,
    output_length=256,
    tp_sizes=(1, 2, 4),
    pp_sizes=(1, 2),
    tpot_limit_ms=30.0,
)


@pytest.fixture(scope="module")
def search() -> simcast.SearchResult:
    return optimize(**SEARCH)


@pytest.fixture(scope="module")
def page(search: simcast.SearchResult) -> str:
    return render_html(search)


def _external_refs(html: str) -> list[str]:
    """Every src/href/url() that points off the page (anything but a fragment)."""
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html) + re.findall(r"url\(([^)]*)\)", html)
    return [r for r in refs if not r.startswith("#")]


def test_page_is_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert _external_refs(page) == []
    assert "<link" not in page and "@import" not in page and "<iframe" not in page
    assert len(page.encode()) < 2_000_000


def test_one_marker_and_one_row_per_layout(search: simcast.SearchResult, page: str) -> None:
    n = len(search.best())
    assert n >= 3
    assert len(re.findall(r'<g id="pareto-pt\d+" class="pt" data-tip=', page)) == n
    body = page.split('id="layouts"', 1)[1].split("</tbody>", 1)[0]
    assert body.count("<tr") == n + 1  # header row + one per layout
    assert page.count('<tr class="best">') == 1


def test_figures_match_the_terminal_table(search: simcast.SearchResult, page: str) -> None:
    """Each ranked layout's cells, as the terminal table formats them, appear in that row of the page."""
    rows = best_rows(list(search.candidates))
    body = page.split('id="layouts"', 1)[1].split("</tbody>", 1)[0]
    html_rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body)[1:]
    for i, r in enumerate(rows):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", html_rows[i])
        assert cells[: len(ranked_cells(i, r, False))] == ranked_cells(i, r, False)


def test_answer_first_names_the_best_layout(search: simcast.SearchResult, page: str) -> None:
    best = best_rows(list(search.candidates))[0]
    answer = page.split('class="answer"', 1)[1].split("</p>", 1)[0]
    assert best["parallel"] in answer.replace("&#x27;", "'")
    assert f"{best['tokens_per_s_per_device']:.1f} token/s/device" in answer
    assert page.index('class="answer"') < page.index('id="layouts"') < page.index("<svg")


def test_deterministic(search: simcast.SearchResult, page: str) -> None:
    assert render_html(search) == page


def test_ids_are_unique(page: str) -> None:
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_report_html_writes_and_refuses_bad_paths(search: simcast.SearchResult, tmp_path: Path) -> None:
    out = simcast.report_html(search, tmp_path / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(SimcastInputError, match="must end in .html"):
        simcast.report_html(search, tmp_path / "r.txt")
    with pytest.raises(SimcastInputError, match="does not exist"):
        simcast.report_html(search, tmp_path / "nope" / "r.html")
    with pytest.raises(SimcastInputError, match="allowed: the result of"):
        render_html(42)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]  # nothing half-written


@pytest.mark.slow
def test_cli_report_on_each_command(tmp_path: Path) -> None:
    runs = {
        "simulate": ["simulate", "--model", "Qwen/Qwen3-8B", "--device", "h100_sxm", "--tp", "2", "--pp", "2"],
        "bench": ["bench-serve", "--model", "Qwen/Qwen3-8B", "--device", "h100_sxm", "--num-prompts", "40"],
    }
    for name, args in runs.items():
        out = tmp_path / f"{name}.html"
        r = subprocess.run(
            [sys.executable, "-m", "simcast", *args, "--report", str(out)], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        html = out.read_text()
        assert _external_refs(html) == [] and "simcast " + args[0] in html
    bad = subprocess.run(
        [sys.executable, "-m", "simcast", *runs["simulate"], "--report", str(tmp_path / "x.pdf")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--report" in bad.stderr
    assert not (tmp_path / "x.pdf").exists()
