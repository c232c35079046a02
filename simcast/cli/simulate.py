"""CLI wiring for ``simcast simulate``: one forward step of one layout (edge module)."""

from __future__ import annotations

import argparse

from simcast.api.step import StepOptions, run_step, step_spec
from simcast.cli.args import add_fabric_args, add_partition_arg, add_precision_args, target_kwargs
from simcast.cli.option_flags import add_option_flags, option_values
from simcast.cli.outputs import add_output_args, emit, emit_json, run_metadata, write_outputs, write_report
from simcast.cli.speculative import add_speculative_args, speculative_kwargs
from simcast.core.specs import SimSpec

_LAYOUT = ("tp", "pp", "num_devices", "ep", "moe_dp", "expert_imbalance")
_STEP = (
    "dp_attention",
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
STEP_FLAGS = _LAYOUT + _STEP + ("devices_per_node",) + _KERNELS
"""The :class:`StepOptions` fields ``simcast simulate`` reads from its own flags (declared on the fields)."""


def add_simulate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, help="shipped model id (e.g. meta-llama/Llama-3.1-70B) or a config.json path"
    )
    p.add_argument("--device", required=True, help="shipped device profile (e.g. h100_sxm) or a YAML path")
    add_option_flags(p, StepOptions, _LAYOUT)
    add_precision_args(p)
    add_option_flags(p, StepOptions, _STEP)
    add_partition_arg(p, "uniform | vllm | sglang | trtllm | balanced (minimise the slowest stage)")
    add_option_flags(p, StepOptions, ("devices_per_node",))
    add_fabric_args(p)
    add_option_flags(p, StepOptions, _KERNELS)
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk trace cache")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
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

    report = run_step(step_options(a))
    if a.json:
        emit_json({**report.to_dict(), "run": run_metadata(device=a.device, engine=a.engine)})
    else:
        emit(format_report(report))
    write_outputs(a, report)
    write_report(a, report)
    return 0
