"""CLI output files: ``--trace out.json`` (Chrome trace) and ``--plot out.png`` (edge module).

``add_output_args`` adds the flags to a subcommand's parser; ``write_outputs``
writes the files for ``simcast simulate``; ``write_pareto_plot`` serves
``simcast optimize --plot`` and ``write_bench_plot`` ``simcast bench-serve --plot``.
Progress lines go to stderr so ``--json`` output on stdout stays valid JSON. matplotlib is
imported only when a plot is asked for.

Every output path is checked when the flags are parsed (its folder exists and is
writable; it is not a folder or a device), before any work, and every file is
written atomically (:func:`write_atomic`: a temporary file, then a rename).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from simcast.core.errors import SimcastInputError, bounded_repr, require

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

    from simcast.serving.requests import BenchResult
    from simcast.sim.simulate import Report

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def add_output_args(p: argparse.ArgumentParser, *, trace: bool = True) -> None:
    """``--plot PATH`` and (unless ``trace=False``, e.g. for ``optimize``) ``--trace PATH``, ``--overlap``."""
    if trace:
        p.add_argument(
            "--trace",
            metavar="PATH",
            default=None,
            type=output_path("--trace"),
            help="write the step's timeline as a Chrome trace (JSON; open in Perfetto or chrome://tracing)",
        )
    p.add_argument(
        "--plot",
        metavar="PATH",
        default=None,
        type=output_path("--plot", PLOT_SUFFIXES),
        help="write a figure (.png, .svg or .pdf)",
    )
    if trace:
        p.add_argument(
            "--overlap",
            action="store_true",
            help="trace/Gantt with each hidden-state transfer overlapped with the receiver's earlier work "
            "(a lower bound) instead of the receiver waiting for it (what the latency assumes)",
        )


def check_output_path(path: str, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """An output file that can be written: its folder exists and is writable, and the path is not a
    folder or a device. Checked when the flags are parsed, before any work, and again at write time."""
    out = Path(path)
    require(bool(str(path)) and out.name not in ("", ".", ".."), flag, path, "must name a file")
    if suffixes:
        require(out.suffix.lower() in suffixes, flag, path, f"the file name must end in {', '.join(suffixes)}")
    parent = out.parent
    require(parent.exists(), flag, path, f"the folder {parent} does not exist")
    require(parent.is_dir(), flag, path, f"{parent} is not a folder")
    require(os.access(parent, os.W_OK | os.X_OK), flag, path, f"the folder {parent} is not writable")
    if out.exists():
        require(not out.is_dir(), flag, path, "is a directory; give a file name")
        require(out.is_file(), flag, path, "exists and is not a regular file")
        require(os.access(out, os.W_OK), flag, path, "exists and is not writable")
    return out


def output_path(flag: str, suffixes: tuple[str, ...] = ()) -> Callable[[str], str]:
    """An argparse type for an output file flag: a bad path is a parse error (exit 2) before any work."""

    def parse(path: str) -> str:
        try:
            check_output_path(path, flag, suffixes)
        except SimcastInputError as e:
            raise argparse.ArgumentTypeError(f"got {bounded_repr(path)}; {e.allowed}") from None
        return path

    parse.__name__ = "path"
    return parse


def write_atomic(path: str, flag: str, write: Callable[[Path], object]) -> Path:
    """Write ``path`` through ``write(temporary_path)`` then rename: a failed write (disk full, quota)
    leaves no partial file behind and becomes one error line naming ``flag``."""
    out = check_output_path(path, flag)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=out.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # the mode an ordinary open() would give, not mkstemp's 0600
        write(tmp)
        os.replace(tmp, out)
    except OSError as e:
        raise SimcastInputError(flag, path, f"could not be written ({e.strerror or e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


def save_figure(fig: Figure, path: str, flag: str = "--plot") -> Path:
    """Save ``fig`` to ``path`` (format from the suffix), atomically; returns the path."""
    out = check_output_path(path, flag, PLOT_SUFFIXES)
    return write_atomic(str(out), flag, lambda tmp: fig.savefig(tmp, dpi=130, format=out.suffix[1:].lower()))


def write_outputs(args: argparse.Namespace, report: Report) -> None:
    """Write ``--trace`` and ``--plot`` files of a simulate report, if asked for."""
    mode = "overlap" if getattr(args, "overlap", False) else "receiver"
    trace_path, plot_path = getattr(args, "trace", None), getattr(args, "plot", None)
    if trace_path:
        from simcast.render.chrome_trace import chrome_trace

        tr = chrome_trace(report, send_recv=mode)
        text = json.dumps(tr, separators=(",", ":"))
        out = write_atomic(trace_path, "--trace", lambda tmp: tmp.write_text(text))
        od = tr["otherData"]
        sys.stderr.write(
            f"simcast: wrote {out} ({len(tr['traceEvents'])} events, {od['send_recv']}, "
            f"makespan {od['timeline_makespan_ms']:.3f} ms; open in https://ui.perfetto.dev)\n"
        )
    if plot_path:
        from simcast.render.plots import plot_report

        out = save_figure(plot_report(report, send_recv=mode), plot_path)
        sys.stderr.write(f"simcast: wrote {out}\n")
    if trace_path or plot_path:
        from simcast.sim.timeline import SEND_RECV_LABELS, report_timeline

        other_mode = "receiver" if mode == "overlap" else "overlap"
        other = report_timeline(report, send_recv=other_mode).makespan_s
        sys.stderr.write(f"simcast: the timeline with {SEND_RECV_LABELS[other_mode]} would take {other * 1e3:.3f} ms\n")


def write_pareto_plot(df: pd.DataFrame, path: str, title: str | None = None) -> Path:
    """``simcast optimize --plot``: the Pareto chart of the optimizer's table (see plots.plot_pareto)."""
    from simcast.render.plots import plot_pareto

    check_output_path(path, "--plot", PLOT_SUFFIXES)
    out = save_figure(plot_pareto(df, title=title), path)
    sys.stderr.write(f"simcast: wrote {out}\n")
    return out


def write_bench_plot(result: BenchResult, path: str, title: str | None = None) -> Path:
    """``simcast bench-serve --plot``: queue, running batch and KV use over time, TTFT/TPOT CDFs."""
    from simcast.render.bench_plots import plot_bench

    check_output_path(path, "--plot", PLOT_SUFFIXES)
    out = save_figure(plot_bench(result, title=title), path)
    sys.stderr.write(f"simcast: wrote {out}\n")
    return out
