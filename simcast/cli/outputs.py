"""CLI output files: ``--trace out.json`` (Chrome trace) and ``--plot out.png`` (edge module).

``add_output_args`` adds the flags to a subcommand's parser; ``write_outputs``
writes the files for ``simcast simulate``; ``write_pareto_plot`` serves
``simcast optimize --plot`` and ``write_bench_plot`` ``simcast bench-serve --plot``. Progress lines go to stderr so ``--json`` output
on stdout stays valid JSON. matplotlib is imported only when a plot is asked for.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from simcast.core.errors import SimcastInputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

    from simcast.serving.requests import BenchResult
    from simcast.sim.simulate import Report

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def add_output_args(p: argparse.ArgumentParser, *, trace: bool = True) -> None:
    """``--plot PATH`` and (unless ``trace=False``, e.g. for ``optimize``) ``--trace PATH``, ``--overlap``."""
    if trace:
        p.add_argument("--trace", metavar="PATH", default=None,
                       help="write the step's timeline as a Chrome trace (JSON; open in Perfetto or chrome://tracing)")
    p.add_argument("--plot", metavar="PATH", default=None, type=_plot_path,
                   help="write a figure (.png, .svg or .pdf)")
    if trace:
        p.add_argument("--overlap", action="store_true",
                       help="trace/Gantt with each hidden-state transfer overlapped with the receiver's earlier work "
                            "(a lower bound) instead of the receiver waiting for it (what the latency assumes)")


def _check_plot_path(path: str) -> Path:
    out = Path(path)
    if out.suffix.lower() not in PLOT_SUFFIXES:
        raise SimcastInputError("--plot", path, f"the file name must end in {', '.join(PLOT_SUFFIXES)}")
    return out


def _plot_path(path: str) -> str:
    """argparse type of ``--plot``: a bad suffix is a parse error (exit 2) before any simulation."""
    try:
        _check_plot_path(path)
    except SimcastInputError as e:
        raise argparse.ArgumentTypeError(f"got {path!r}; {e.allowed}") from None
    return path


def save_figure(fig: "Figure", path: str) -> Path:
    """Save ``fig`` to ``path`` (format from the suffix); returns the path."""
    out = _check_plot_path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    return out


def write_outputs(args: argparse.Namespace, report: "Report") -> None:
    """Write ``--trace`` and ``--plot`` files of a simulate report, if asked for."""
    mode = "overlap" if getattr(args, "overlap", False) else "receiver"
    trace_path, plot_path = getattr(args, "trace", None), getattr(args, "plot", None)
    if plot_path:
        _check_plot_path(plot_path)  # fail before any work
    if trace_path:
        from simcast.render.chrome_trace import chrome_trace
        tr = chrome_trace(report, send_recv=mode)
        out = Path(trace_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(tr, separators=(",", ":")))
        od = tr["otherData"]
        sys.stderr.write(f"simcast: wrote {out} ({len(tr['traceEvents'])} events, {od['send_recv']}, "
                         f"makespan {od['timeline_makespan_ms']:.3f} ms; open in https://ui.perfetto.dev)\n")
    if plot_path:
        from simcast.render.plots import plot_report
        out = save_figure(plot_report(report, send_recv=mode), plot_path)
        sys.stderr.write(f"simcast: wrote {out}\n")
    if trace_path or plot_path:
        from simcast.sim.timeline import SEND_RECV_LABELS, report_timeline
        other_mode = "receiver" if mode == "overlap" else "overlap"
        other = report_timeline(report, send_recv=other_mode).makespan_s
        sys.stderr.write(f"simcast: the timeline with {SEND_RECV_LABELS[other_mode]} would take {other * 1e3:.3f} ms\n")


def write_pareto_plot(df: "pd.DataFrame", path: str, title: str | None = None) -> Path:
    """``simcast optimize --plot``: the Pareto chart of the optimizer's table (see plots.plot_pareto)."""
    from simcast.render.plots import plot_pareto
    _check_plot_path(path)
    out = save_figure(plot_pareto(df, title=title), path)
    sys.stderr.write(f"simcast: wrote {out}\n")
    return out


def write_bench_plot(result: "BenchResult", path: str, title: str | None = None) -> Path:
    """``simcast bench-serve --plot``: queue, running batch and KV use over time, TTFT/TPOT CDFs."""
    from simcast.render.bench_plots import plot_bench
    _check_plot_path(path)
    out = save_figure(plot_bench(result, title=title), path)
    sys.stderr.write(f"simcast: wrote {out}\n")
    return out
