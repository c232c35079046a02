"""``report_html``: any run's result as one self-contained HTML page (``--report PATH.html`` on the CLI).

Accepts what the API's calls return: :func:`~simcast.api.optimize.optimize`'s ``SearchResult``,
:func:`~simcast.api.bench.bench_serve`'s ``BenchResult``, :func:`~simcast.api.step.simulate_step`'s report,
and a steady-state ``ServingResult`` (``serve-config``). The page needs no network: see
:mod:`simcast.render.report.page`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from simcast.core.errors import SimcastInputError, require

SUFFIXES = (".html", ".htm")


def render_html(result: Any, *, command: str = "") -> str:
    """The page's text for ``result`` (``command``: the command line shown on the page, optional)."""
    from simcast.api.bench import BenchResult
    from simcast.api.optimize import SearchResult
    from simcast.api.search_uncertainty import BENCH_LABELS, search_uncertainty
    from simcast.render.interval_text import interval_lines
    from simcast.render.report.optimize_page import optimize_page
    from simcast.render.report.run_pages import bench_page, serving_page, simulate_page
    from simcast.serving.steady.model import ServingResult
    from simcast.sim.report import Report

    if isinstance(result, SearchResult):
        _, lines = search_uncertainty(
            list(result.candidates), result.config.runtime, len(result.candidates), result.user_residuals
        )
        return optimize_page(result, _launch(result), result.config.runtime, lines)
    if isinstance(result, BenchResult):
        return bench_page(result, command, interval_lines(result.intervals, BENCH_LABELS))
    if isinstance(result, Report):
        lines = (
            interval_lines(result.intervals, {"latency_ms": ("step latency", "ms", 3)})
            if hasattr(result, "intervals")
            else []
        )
        return simulate_page(result, command, lines)
    if isinstance(result, ServingResult):
        from simcast.serving.search.layouts import layout_links

        return serving_page(result, layout_links(result.config), command)
    raise SimcastInputError(
        "result",
        type(result).__name__,
        "allowed: the result of optimize, bench_serve, simulate_step or a steady-state ServingResult",
    )


def _launch(result: Any) -> list[Any]:
    """Each ranked layout's launch lines for the engine the search ran (none for the generic engine)."""
    from simcast.engines import EMIT_ENGINES
    from simcast.render.launch import launch_lines
    from simcast.serving.search.layouts import model_label

    engine = result.config.runtime
    if engine not in EMIT_ENGINES:
        return []
    return [
        (model_label(c.result.config), launch_lines(c.result.config, engine, c.result.concurrency))
        for c in result.candidates
    ]


def report_html(result: Any, path: str | os.PathLike[str], *, command: str = "") -> Path:
    """Write ``result``'s page to ``path`` (``.html``), atomically (no partial file on failure); returns it."""
    out = Path(path)
    require(out.suffix.lower() in SUFFIXES, "path", str(path), "the file name must end in .html or .htm")
    require(out.parent.is_dir(), "path", str(path), f"the folder {out.parent} does not exist")
    text = render_html(result, command=command)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name[:200]}.", suffix=".part", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
