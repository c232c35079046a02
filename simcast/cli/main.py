"""Command line: ``simcast simulate ...`` (edge module: parses flags, reads files, prints)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from simcast.cli.exits import EPILOG, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from simcast.cli.outputs import emit, flush_stdout, note_model_alias
from simcast.core.errors import SimcastInputError, one_line


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad flags as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        emit(f"simcast: error: {message}", err=True)
        sys.exit(EXIT_BAD_INPUT)


def _lazy(module: str, name: str) -> Callable[[Any], Any]:
    """``simcast.cli.<module>.<name>``, imported when first called: a run imports only its own command's
    module (the others' imports cost ~0.1 s of every run)."""

    def call(arg: Any) -> Any:
        return getattr(importlib.import_module(f"simcast.cli.{module}"), name)(arg)

    call.__name__ = call.__qualname__ = name
    return call


COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int], str]] = {
    "simulate": (
        _lazy("simulate", "add_simulate_args"),
        _lazy("simulate", "cmd_simulate"),
        "simulate one forward step of one TP x PP x DP layout",
    ),
    "optimize": (
        _lazy("optimize_args", "add_optimize_args"),
        _lazy("optimize", "cmd_optimize"),
        "search TP x PP x DP layouts and batch sizes for the most token/s within latency limits",
    ),
    "serve-config": (
        _lazy("serve_config", "add_serve_config_args"),
        _lazy("serve_config", "cmd_serve_config"),
        "estimate serving (TTFT, TPOT, token/s, memory) of a service YAML",
    ),
    "bench-serve": (
        _lazy("bench_serve", "add_bench_serve_args"),
        _lazy("bench_serve", "cmd_bench_serve"),
        "simulate a vllm bench serve run request by request (arrivals, scheduler, KV blocks)",
    ),
    "workloads": (
        _lazy("workloads", "add_workloads_args"),
        _lazy("workloads", "cmd_workloads"),
        "list the shipped request-length distributions of bench-serve --dataset-name (means, source)",
    ),
    "calibrate-serving": (
        _lazy("calibrate_serving", "add_calibrate_serving_args"),
        _lazy("calibrate_serving", "cmd_calibrate_serving"),
        "fit an engine's CPU time per step and per request to measured vllm bench serve runs; write an engine profile",
    ),
    "kernel": (
        _lazy("kernel", "add_kernel_args"),
        _lazy("kernel", "cmd_kernel"),
        "predict one kernel (gemm, attention, allreduce, allgather, p2p) on a device",
    ),
    "calibrate": (
        _lazy("kernel", "add_calibrate_args"),
        _lazy("kernel", "cmd_calibrate"),
        "fit a device profile's efficiency and link parameters to measured times",
    ),
    "microbench": (
        _lazy("microbench", "add_microbench_args"),
        _lazy("microbench", "cmd_microbench"),
        "time this machine's GEMMs, attention, adds and all-reduce with torch; write the measured-kernel CSV "
        "for simcast calibrate --device-template",
    ),
    "validate": (
        _lazy("kernel", "add_validate_args"),
        _lazy("kernel", "cmd_validate"),
        "predicted vs measured kernel times, median and p90 error per kind",
    ),
    "models": (
        _lazy("catalog", "add_models_args"),
        _lazy("catalog", "cmd_models"),
        "list the shipped models: architecture, parameter count, the Instruct/Chat names that resolve to them",
    ),
    "devices": (
        _lazy("catalog", "add_devices_args"),
        _lazy("catalog", "cmd_devices"),
        "list the shipped device profiles: fitted or unfitted, where their efficiencies and engine kernels come from",
    ),
}


class _Version(argparse._VersionAction):
    """``--version``: the package metadata is read only when the flag is given (its import and lookup cost
    ~0.05 s of every run otherwise)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        self.version = f"simcast {simcast_version()}"
        super().__call__(parser, namespace, values, option_string)


def make_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or (``only``) of the one command a run names: building the others'
    parsers costs ~0.03 s a run and parses nothing differently (their flags are never seen)."""
    p = _Parser(
        prog="simcast",
        description="Stage-first performance simulator for distributed LLM inference.",
        epilog=EPILOG,
    )
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (add, _, help_) in COMMANDS.items():
        if only is not None and name != only:
            continue
        add(sub.add_parser(name, help=help_, description=help_, epilog=EPILOG))
    return p


def simcast_version() -> str:
    """The installed package's version (its metadata), or the source tree's when not installed."""
    from simcast.cli.outputs import simcast_version as version

    return version()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every way it can fail ends as one line on stderr (no traceback).

    Bad input: exit 2 (``simcast: error: ...``); stdout that cannot be written (a full device): exit 2;
    a closed pipe (``| head``): exit 0; Ctrl-C: exit 130 (``simcast: interrupted``); ``optimize`` with no
    layout meeting the limits: exit 3 (codes in :mod:`simcast.cli.exits`). A warning (numpy's
    overflow, say) is one ``simcast: warning:`` line, not a source line.
    """
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        try:
            argv = sys.argv[1:] if argv is None else list(argv)
            args = make_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
            note_model_alias(getattr(args, "model", None))  # optimize's --model: noted by the command
            rc = COMMANDS[args.command][1](args)
            flush_stdout()  # a full device fails here, not in the interpreter's exit
            return rc
        except SimcastInputError as e:
            if e.field in ("stdout", "stderr"):
                _detach_stdout()
            return _error(str(e))
        except KeyboardInterrupt:
            return _error("interrupted", code=EXIT_INTERRUPTED, prefix="simcast: ")
        except BrokenPipeError:
            _detach_stdout()
            return EXIT_OK


def _error(message: str, code: int = EXIT_BAD_INPUT, prefix: str = "simcast: error: ") -> int:
    try:
        emit(f"{prefix}{message}", err=True)
    except (OSError, SimcastInputError):  # stderr too is a full device: the exit code is all there is
        pass
    return code


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    emit(f"simcast: warning: {one_line(str(message), 300)}", err=True)


def _detach_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's exit does not fail flushing it a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # captured in tests: no file descriptor
        pass


if __name__ == "__main__":
    sys.exit(main())
