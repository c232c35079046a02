"""CLI wiring for ``simcast simulate``: one forward step of one layout (edge module)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from simcast.api.common import TargetOptions
from simcast.api.layout_spelling import layout_reading
from simcast.api.moe_comm_options import MOE_COMM_FIELDS
from simcast.api.options import Flag, opt
from simcast.api.step import StepOptions, run_step, step_spec
from simcast.cli.option_flags import add_option_flags, option_values
from simcast.cli.outputs import emit, emit_json, run_metadata, write_outputs, write_report
from simcast.cli.shared_flags import (
    add_fabric_args,
    add_output_args,
    add_partition_arg,
    add_precision_args,
    target_kwargs,
)
from simcast.cli.speculative import add_speculative_args, speculative_kwargs
from simcast.core.specs import SimSpec

_LAYOUT = ("tp", "pp", "num_devices", "tp_size", "dp_size", "ep", "moe_dp", "expert_imbalance")
_STEP = (
    "dp_attention",
    "enable_attention_dp",
    "moe_dense_tp_size",
    "enable_dp_lm_head",
    "enable_expert_parallel",
    "ep_num_redundant_experts",
    "enable_eplb",
    "batch_size",
    "input_length",
    "phase",
    "context_length",
    "microbatches",
    "chunked_prefill_size",
    "enable_dynamic_chunking",
    "dynamic_chunking_smooth_factor",
)
_KERNELS = ("dtype", "engine", "tp_sharded_send", "residual_send")
STEP_FLAGS = _LAYOUT + _STEP + ("devices_per_node",) + _KERNELS + MOE_COMM_FIELDS
"""The :class:`StepOptions` fields ``simcast simulate`` reads from its own flags (declared on the fields)."""


@dataclass(frozen=True, kw_only=True)
class SimulateFlags:
    """``simcast simulate``'s flags that are not keywords of :func:`simcast.api.step.simulate_step`."""

    json: bool = opt(
        False,
        "print the report as JSON",
        flag=Flag(names=("--json",), help="print the report as JSON", action="store_true"),
    )


def add_simulate_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(p, TargetOptions, ("model", "device"))
    add_option_flags(p, StepOptions, _LAYOUT)
    add_precision_args(p)
    add_option_flags(p, StepOptions, _STEP)
    add_partition_arg(p)
    add_option_flags(p, StepOptions, ("devices_per_node",))
    add_fabric_args(p)
    add_option_flags(p, StepOptions, _KERNELS)
    add_option_flags(p, StepOptions, MOE_COMM_FIELDS)
    add_option_flags(p, TargetOptions, ("use_cache",))
    add_option_flags(p, SimulateFlags, ("json",))
    add_speculative_args(p)
    add_output_args(p)


def step_options(a: argparse.Namespace) -> StepOptions:
    """The :func:`simcast.api.step.simulate_step` keywords of parsed ``simcast simulate`` flags."""
    return StepOptions(**option_values(a, StepOptions, STEP_FLAGS), **target_kwargs(a), **speculative_kwargs(a))


def build_spec(a: argparse.Namespace) -> SimSpec:
    """The checked :class:`SimSpec` of parsed ``simcast simulate`` flags."""
    return step_spec(step_options(a))


def cmd_simulate(a: argparse.Namespace) -> int:
    from simcast.render.tables import format_report

    o = step_options(a)
    report = run_step(o)
    reading = layout_reading(o)  # the engine-spelled layout flags, as read ("" for simcast's own)
    if a.json:
        emit_json(
            {**report.to_dict(), **({"layout_read": reading} if reading else {})}
            | {"run": run_metadata(device=a.device, engine=a.engine)}
        )
    else:
        from simcast.render.interval_text import interval_lines

        text = format_report(report)
        if reading:  # under the header line
            head, _, rest = text.partition("\n")
            text = "\n".join([head, f"layout: {reading}", rest])
        ms = ("step latency", "ms", 3)
        emit("\n".join([text, *interval_lines(report.intervals, {"latency_ms": ms})]))
    write_outputs(a, report)
    write_report(a, report)
    return 0
