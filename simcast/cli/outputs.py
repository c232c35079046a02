"""CLI output files: ``--trace out.json`` (Chrome trace) and ``--plot out.png`` (edge module).

``simcast.cli.shared_flags.add_output_args`` adds the flags to a subcommand's parser; ``write_outputs``
writes the files for ``simcast simulate``; ``write_pareto_plot`` serves
``simcast optimize --plot`` and ``write_bench_plot`` ``simcast bench-serve --plot``.
Progress lines go to stderr so ``--json`` output on stdout stays valid JSON. matplotlib is
imported only when a plot is asked for.

Every output path is checked when the flags are parsed (its folder exists and is
writable; it is not a folder or a device), before any work, and every file is
written atomically (:func:`write_atomic`: a temporary file, then a rename). Everything the CLI
prints goes through :func:`emit` (control characters replaced) and every JSON it writes or prints
is strict (:func:`write_json`, :func:`emit_json`: no ``NaN`` tokens).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from simcast.core.errors import SimcastInputError, bounded_repr, printable, require
from simcast.inputs.files import is_dir, package_data_dir, path_stat
from simcast.render.text import json_text

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

    from simcast.serving.request_level.bench_result import BenchResult
    from simcast.sim.simulate import Report

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
REPORT_SUFFIXES = (".html", ".htm")


def simcast_version() -> str:
    """The installed package's version (its metadata), or the source tree's
    (:data:`simcast.core.version.VERSION`) when the
    tree runs without being installed (``PYTHONPATH=.``)."""
    from importlib import metadata

    from simcast.core.version import VERSION

    try:
        return metadata.version("simcast")
    except metadata.PackageNotFoundError:
        return VERSION


def run_metadata(*, device: str | None = None, engine: str | None = None) -> dict[str, str]:
    """What produced an output file or JSON document: ``simcast_version``, ``device`` and
    ``device_profile_sha256`` (of the profile file as read, when a device was used), ``engine`` (when
    one applies) and ``date_utc`` (ISO 8601, seconds). Every JSON output carries it under ``run``; every
    CSV as columns of those names."""
    from datetime import datetime, timezone

    out = {"simcast_version": simcast_version()}
    if device is not None:
        from simcast.inputs.catalog import profile_sha256
        from simcast.inputs.loaders import load_device

        out["device"] = load_device(device).name
        out["device_profile_sha256"] = profile_sha256(device)
    if engine is not None:
        out["engine"] = engine
    out["date_utc"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return out


def check_output_path(path: str, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """An output file that can be written: its folder exists and is writable, and the path is not a
    folder or a device. Checked when the flags are parsed, before any work, and again at write time."""
    out = Path(path)
    require(bool(str(path)) and out.name not in ("", ".", ".."), flag, path, "must name a file")
    if suffixes:
        require(out.suffix.lower() in suffixes, flag, path, f"the file name must end in {', '.join(suffixes)}")
    parent = out.parent
    limit = _name_max(parent)
    require(
        all(len(part.encode("utf-8", "surrogateescape")) <= limit for part in out.parts),
        flag,
        path,
        f"a folder or file name is longer than {limit} bytes (the file system's limit)",
    )
    pst = path_stat(parent, flag)
    require(pst is not None, flag, path, f"the folder {parent} does not exist")
    require(
        not _inside(out, package_data_dir("")),
        flag,
        path,
        "is inside simcast's installed data (shipped profiles, models, workloads): write elsewhere; a shipped "
        "file is replaced only by a change to the package",
    )
    require(is_dir(parent, flag), flag, path, f"{parent} is not a folder")
    require(os.access(parent, os.W_OK | os.X_OK), flag, path, f"the folder {parent} is not writable")
    st = path_stat(out, flag)
    if st is not None:
        require(not stat.S_ISDIR(st.st_mode), flag, path, "is a directory; give a file name")
        require(stat.S_ISREG(st.st_mode), flag, path, "exists and is not a regular file")
        require(os.access(out, os.W_OK), flag, path, "exists and is not writable")
    return out


def _inside(path: Path, folder: Path) -> bool:
    """``path`` (resolved: through symlinks and ``..``) lies inside ``folder``."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a symlink loop: not a data file either
        return False


def same_file(a: str | Path, b: str | Path) -> bool:
    """``a`` and ``b`` name the same file (resolved paths; an existing pair compared by inode too)."""
    try:
        pa, pb = Path(a), Path(b)
        if pa.exists() and pb.exists():
            return os.path.samefile(pa, pb)
        return pa.resolve() == pb.resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def _name_max(folder: Path) -> int:
    """Longest file name (bytes) the file system of ``folder`` takes; 255 (ext4, XFS, APFS, NTFS) when unknown."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


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
    tmp: Path | None = None
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name[:200]}.", suffix=".part", dir=out.parent)
        os.close(fd)
        tmp = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # the mode an ordinary open() would give, not mkstemp's 0600
        write(tmp)
        os.replace(tmp, out)
    except OSError as e:
        raise SimcastInputError(flag, path, f"could not be written ({e.strerror or e})") from None
    finally:
        if tmp is not None:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
    return out


def write_text(path: str, flag: str, text: str) -> Path:
    """:func:`write_atomic` of ``text`` (UTF-8)."""
    return write_atomic(path, flag, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: str, flag: str, doc: object, *, indent: int | None = 2, null_reason: str = "", **kw) -> Path:
    """``doc`` as strict JSON (:func:`simcast.render.text.json_text`: no NaN/Infinity tokens), atomically."""
    return write_text(path, flag, json_text(doc, indent=indent, null_reason=null_reason, **kw))


def emit(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` (and a newline) on stdout, or stderr with ``err``: the one printer of the CLI.

    Control characters are replaced (:func:`simcast.core.errors.printable`): names come from user files
    (a config.json's ``_name_or_path``, a profile's ``name``), and an escape sequence in one must not
    reach the terminal.
    """
    stream = sys.stderr if err else sys.stdout
    try:
        stream.write(printable(f"{text}\n"))
    except BrokenPipeError:  # a reader that stopped (| head): not an error
        raise
    except OSError as e:  # a full device (> /dev/full), a quota
        raise SimcastInputError("stderr" if err else "stdout", getattr(stream, "name", ""), _unwritable(e)) from None


def note_model_alias(model: object) -> None:
    """One stderr note when a model name is an Instruct/Chat variant run on its shipped base's config."""
    if isinstance(model, str):
        from simcast.inputs.aliases import alias_note

        note = alias_note(model)
        if note:
            emit(note, err=True)


def flush_stdout() -> None:
    """Flush stdout (where a full device fails when stdout is not a terminal): one error line, not a traceback."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise SimcastInputError("stdout", getattr(sys.stdout, "name", ""), _unwritable(e)) from None


def _unwritable(e: OSError) -> str:
    return f"could not be written ({e.strerror or e}); what was printed before may be cut"


def emit_json(doc: object, *, indent: int | None = 2, null_reason: str = "") -> None:
    """``doc`` as strict JSON on stdout (:func:`simcast.render.text.json_text`)."""
    emit(json_text(doc, indent=indent, null_reason=null_reason))


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
        tr["otherData"]["run"] = run_metadata(
            device=getattr(args, "device", None), engine=getattr(args, "engine", None)
        )
        out = write_json(trace_path, "--trace", tr, indent=None, separators=(",", ":"))
        od = tr["otherData"]
        emit(
            f"simcast: wrote {out} ({len(tr['traceEvents'])} events, {od['send_recv']}, "
            f"makespan {od['timeline_makespan_ms']:.3f} ms; open in https://ui.perfetto.dev)",
            err=True,
        )
    if plot_path:
        from simcast.render.plots import plot_report

        out = save_figure(plot_report(report, send_recv=mode), plot_path)
        emit(f"simcast: wrote {out}", err=True)
    if trace_path or plot_path:
        from simcast.sim.timeline import SEND_RECV_LABELS, report_timeline

        other_mode = "receiver" if mode == "overlap" else "overlap"
        other = report_timeline(report, send_recv=other_mode).makespan_s
        emit(f"simcast: the timeline with {SEND_RECV_LABELS[other_mode]} would take {other * 1e3:.3f} ms", err=True)


def write_report(a: argparse.Namespace, result: object) -> None:
    """``--report PATH``: ``result``'s page (:func:`simcast.api.report.render_html`), the command line on it."""
    path = getattr(a, "report", None)
    if not path:
        return
    import shlex
    import sys

    from simcast.api.report import render_html

    command = "simcast " + shlex.join(sys.argv[1:]) if len(sys.argv) > 1 else ""
    out = write_text(path, "--report", render_html(result, command=command))
    emit(f"simcast: wrote {out}", err=True)


def write_pareto_plot(
    df: pd.DataFrame,
    path: str,
    title: str | None = None,
    *,
    ttft_limit_ms: float | None = None,
    tpot_limit_ms: float | None = None,
) -> Path:
    """``simcast optimize --plot``: every swept point, the front and the limits (see pareto_plot.plot_pareto)."""
    from simcast.render.pareto_plot import plot_pareto

    check_output_path(path, "--plot", PLOT_SUFFIXES)
    fig = plot_pareto(df, title=title, ttft_limit_ms=ttft_limit_ms, tpot_limit_ms=tpot_limit_ms)
    out = save_figure(fig, path)
    emit(f"simcast: wrote {out}", err=True)
    return out


def write_bench_plot(result: BenchResult, path: str, title: str | None = None) -> Path:
    """``simcast bench-serve --plot``: queue, running batch and KV use over time, TTFT/TPOT CDFs."""
    from simcast.render.bench_plots import plot_bench

    check_output_path(path, "--plot", PLOT_SUFFIXES)
    out = save_figure(plot_bench(result, title=title), path)
    emit(f"simcast: wrote {out}", err=True)
    return out
