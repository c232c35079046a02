"""The flags several commands share, each declared once as an options field with its :class:`Flag`
(default, unit, help, check) and added by :func:`simcast.cli.option_flags.add_option_flags` (edge module).

The model, device, precision, partition and ``--no-cache`` flags are fields of
:class:`simcast.api.common.TargetOptions` (the API's keywords of the same name). The fabric flags are three
here (:class:`FabricFlags`) and one ``fabric=`` :class:`~simcast.core.fabrics.FabricChoice` in the API
(:func:`fabric_choice` maps them); the output files (:class:`OutputFlags`) are the CLI's own.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from simcast.api.common import TargetOptions
from simcast.api.options import Flag, opt
from simcast.cli.option_flags import add_option_flags
from simcast.core.fabrics import FABRICS, FabricChoice
from simcast.inputs import limits


@dataclass(frozen=True, kw_only=True)
class FabricFlags:
    """The inter-node link a command's device uses: profile < named fabric < explicit bandwidth / latency
    (:mod:`simcast.core.fabrics`)."""

    fabric: str | None = opt(
        None,
        "a named inter-node fabric (None: the device profile's inter-node link)",
        flag=Flag(
            names=("--fabric",),
            help="inter-node fabric, one NIC of this rate per GPU (sources: simcast/core/fabrics.py) "
            "[default: the device profile's inter-node link]",
            choices=tuple(FABRICS),
        ),
    )
    inter_node_bandwidth_gbps: float | None = opt(
        None,
        "inter-node bandwidth per GPU per direction, GB/s",
        flag=Flag(
            names=("--inter-node-bandwidth",),
            help="inter-node bandwidth per GPU per direction, GB/s (a NIC shared by k GPUs: its rate / k); "
            "overrides --fabric's and the profile's",
            value_type="link_gbps",
            metavar="GBPS",
        ),
    )
    inter_node_latency_us: float | None = opt(
        None,
        "inter-node message latency, microseconds",
        flag=Flag(
            names=("--inter-node-latency",),
            help="inter-node message latency, microseconds; overrides --fabric's and the profile's",
            value_type="latency_us",
            metavar="US",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class OutputFlags:
    """The files a command writes beside what it prints (:mod:`simcast.cli.outputs`)."""

    trace: str | None = opt(
        None,
        "Chrome trace JSON path of the step's timeline",
        flag=Flag(
            names=("--trace",),
            help="write the step's timeline as a Chrome trace (JSON; open in Perfetto or chrome://tracing)",
            value_type="output_path",
            metavar="PATH",
        ),
    )
    plot: str | None = opt(
        None,
        "figure path (.png, .svg or .pdf)",
        flag=Flag(
            names=("--plot",), help="write a figure (.png, .svg or .pdf)", value_type="plot_path", metavar="PATH"
        ),
    )
    report: str | None = opt(
        None,
        "self-contained HTML page of the run (.html)",
        flag=Flag(
            names=("--report",),
            help="write the run as one self-contained HTML page (.html: tables, charts, assumptions; works offline)",
            value_type="report_path",
            metavar="PATH",
        ),
    )
    overlap: bool = opt(
        False,
        "trace/Gantt with each hidden-state transfer overlapped with the receiver's earlier work",
        flag=Flag(
            names=("--overlap",),
            help="trace/Gantt with each hidden-state transfer overlapped with the receiver's earlier work "
            "(a lower bound) instead of the receiver waiting for it (what the latency assumes)",
            action="store_true",
        ),
    )


FABRIC_FLAGS = ("fabric", "inter_node_bandwidth_gbps", "inter_node_latency_us")
PRECISION_FLAGS = ("quantization", "kv_cache_dtype")


def add_precision_args(p: argparse.ArgumentParser) -> None:
    """``--quantization`` and ``--kv-cache-dtype``, shared by every command that builds a model."""
    add_option_flags(p, TargetOptions, PRECISION_FLAGS)


def add_fabric_args(p: argparse.ArgumentParser) -> None:
    """``--fabric``, ``--inter-node-bandwidth``, ``--inter-node-latency``: every command that builds a device."""
    add_option_flags(p, FabricFlags, FABRIC_FLAGS)


def add_partition_arg(p: argparse.ArgumentParser) -> None:
    """``--partition`` (alias ``--pp-layer-partition``): a named rule or explicit layer counts."""
    add_option_flags(p, TargetOptions, ("partition",))


def add_output_args(p: argparse.ArgumentParser, *, trace: bool = True) -> None:
    """``--trace``, ``--plot``, ``--report`` and ``--overlap`` (``trace=False``: ``--plot`` and ``--report``)."""
    add_option_flags(p, OutputFlags, ("trace", "plot", "report", "overlap") if trace else ("plot", "report"))


def fabric_choice(a: argparse.Namespace) -> FabricChoice:
    """The :class:`~simcast.core.fabrics.FabricChoice` of parsed fabric flags."""
    choice = FabricChoice(
        fabric=a.fabric, bandwidth_gbps=a.inter_node_bandwidth_gbps, latency_us=a.inter_node_latency_us
    )
    return limits.check_fabric_choice(choice)  # the physical bounds (the flag's type checks only the sign)


def target_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The :class:`simcast.api.common.TargetOptions` keywords of parsed flags (every one-call command has
    them): the model, the device, precision, fabric, partition and ``--no-cache``."""
    return dict(
        model=a.model,
        device=a.device,
        quantization=a.quantization,
        kv_cache_dtype=a.kv_cache_dtype,
        fabric=fabric_choice(a),
        partition=a.partition,
        use_cache=a.use_cache,
    )
