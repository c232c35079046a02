"""CLI wiring of ``simcast optimize``'s arguments: the parser and the check of its list flags (edge module)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from simcast.api.moe_comm_options import MOE_COMM_FIELDS
from simcast.api.options import Flag, opt
from simcast.api.search_inputs import SearchOptions
from simcast.cli.args import parse_int
from simcast.cli.disagg import add_disagg_args
from simcast.cli.engine_args import add_engine_args
from simcast.cli.option_flags import add_option_flags
from simcast.cli.shared_flags import add_fabric_args, add_output_args, add_partition_arg, add_precision_args
from simcast.cli.speculative import add_speculative_args
from simcast.cli.sweep import add_sweep_args
from simcast.core.errors import require
from simcast.engines import EMIT_ENGINES
from simcast.inputs.limits import (
    MAX_BATCH_SIZES,
    MAX_BATCHED_TOKENS,
    MAX_CHUNK_SIZES,
    MAX_DEVICES,
    MAX_REQUESTS,
)
from simcast.serving.request_level.routers import ROUTERS

_WORKLOAD = ("num_devices", "input_length", "output_length", "dataset_name", "prefix_hit_rate")
_SPACE = (
    "usage",
    "tp_sizes",
    "pp_sizes",
    "ep_sizes",
    "moe_dp_sizes",
    "ep_num_redundant_experts",
    "enable_eplb",
    "expert_imbalance",
)
_LIMITS = ("batch_sizes", "ttft_limit_ms", "tpot_limit_ms", "chunked_prefill_sizes", "devices_per_node")
SEARCH_FLAGS = _WORKLOAD + _SPACE + _LIMITS + MOE_COMM_FIELDS
"""The :class:`SearchOptions` fields ``simcast optimize`` reads from its own flags (declared on the fields)."""


@dataclass(frozen=True, kw_only=True)
class OptimizeFlags:
    """``simcast optimize``'s flags that are not keywords of :func:`simcast.api.optimize.optimize`: what it
    prints and writes, and the finite run it adds."""

    model_flag: str | None = opt(
        None,
        "the model as a flag (the same as the last argument)",
        flag=Flag(
            names=("--model",),
            help="shipped model id (`simcast models`; an Instruct/Chat name of a shipped base works) or a "
            "config.json path",
            metavar="MODEL_FLAG",
        ),
    )
    num_prompts: int | None = opt(
        None,
        "prompts of the finite run also predicted (None: none)",
        flag=Flag(
            names=("--num-prompts",),
            help="also predict a finite run of this many prompts all sent at once (vllm bench throughput, MLPerf "
            "Offline, bench-serve --request-rate inf): whole-run throughput with ramp-up and drain, beside the "
            "steady state, for the rows shown [<= 10^5]",
            value_type="requests",
        ),
    )
    top: int = opt(10, "rows to print", flag=Flag(names=("--top",), help="rows to print", value_type="count"))
    csv: str | None = opt(
        None,
        "CSV path of all rows",
        flag=Flag(names=("--csv",), help="write all rows to this CSV file", value_type="output_path"),
    )
    json: bool = opt(
        False,
        "print rows (and rejections) as JSON",
        flag=Flag(names=("--json",), help="print rows (and rejections) as JSON", action="store_true"),
    )
    emit: str | None = opt(
        None,
        "the engine whose launch commands are printed",
        flag=Flag(
            names=("--emit",),
            help="print each ranked layout's server launch command (one per node when it spans nodes), checked "
            "against the engine's argument rules, and a vllm bench serve line reproducing the predicted point; "
            "implies --engine of the same name unless --engine is given (dynamo: disaggregated rows only)",
            choices=(*EMIT_ENGINES, "dynamo"),
        ),
    )
    router: str | None = opt(
        None,
        "with --emit: the router in front of a layout's replicas",
        flag=Flag(
            names=("--router",),
            help="with --emit: the router in front of a layout's replicas (dp > 1), its launch line where one "
            "exists (sgl-router --policy; Dynamo's frontend for kv_aware); bench-serve --router simulates it",
            choices=ROUTERS,
        ),
    )
    show_rejected: bool = opt(
        False,
        "list rejected layouts with the reason",
        flag=Flag(names=("--show-rejected",), help="list rejected layouts with the reason", action="store_true"),
    )


def add_optimize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(  # a positional: argparse takes no dest for it, which a Flag sets
        "model",
        nargs="?",
        default=None,
        help="shipped model id or config.json path, as the last argument (the same as --model)",
    )
    add_option_flags(p, OptimizeFlags, ("model_flag",))
    add_option_flags(p, SearchOptions, ("device",))
    add_option_flags(p, SearchOptions, _WORKLOAD)
    add_option_flags(p, OptimizeFlags, ("num_prompts",))
    add_option_flags(p, SearchOptions, _SPACE)
    add_option_flags(p, SearchOptions, MOE_COMM_FIELDS)
    add_precision_args(p)
    add_option_flags(p, SearchOptions, _LIMITS)
    add_fabric_args(p)
    add_partition_arg(p)
    add_engine_args(p, default=None, help_default="the --emit engine, else vllm")
    add_speculative_args(p)
    add_option_flags(p, OptimizeFlags, ("top", "csv", "json", "emit", "router"))
    add_disagg_args(p)
    add_option_flags(p, OptimizeFlags, ("show_rejected",))
    add_option_flags(p, SearchOptions, ("use_cache",))
    add_sweep_args(p)
    add_output_args(p, trace=False)


def normalize_trailing_model(a: argparse.Namespace) -> None:
    """The model id comes last; after a list flag (``--pp-sizes 1 2 Qwen/Qwen3-32B``, or an empty
    ``--pp-sizes``) argparse files it under that flag. Move it back, then check the lists are integers."""
    flag = getattr(a, "model_flag", None)
    for name in ("tp_sizes", "pp_sizes", "ep_sizes", "moe_dp_sizes", "batch_sizes", "chunked_prefill_sizes"):
        vals = getattr(a, name, None)
        if a.model is None and flag is None and vals and parse_int(vals[-1]) is None:
            a.model = vals.pop()
    require(
        flag is None or a.model is None or a.model == flag,
        "--model",
        flag,
        f"the model is also given as the last argument ({a.model}); give it once",
    )
    a.model = flag or a.model
    require(a.model is not None, "--model", None, "a model id or config.json path is required (--model M or last)")
    require(a.router is None or a.emit, "--router", a.router, "prints the router's launch line: give --emit too")
    for name in ("tp_sizes", "pp_sizes", "ep_sizes", "moe_dp_sizes", "batch_sizes", "chunked_prefill_sizes"):
        vals = getattr(a, name, None)
        if vals is None:
            continue
        flag = "--" + name.replace("_", "-")
        hi = {"batch_sizes": MAX_REQUESTS, "chunked_prefill_sizes": MAX_BATCHED_TOKENS}.get(name, MAX_DEVICES)
        if name == "chunked_prefill_sizes":  # each value is a concurrency sweep per layout
            require(
                len(vals) <= MAX_CHUNK_SIZES,
                flag,
                f"{len(vals)} values",
                f"at most {MAX_CHUNK_SIZES} values (each is a concurrency sweep per layout searched)",
            )
        if name == "batch_sizes":  # each value is a steady-state estimate per layout
            require(
                len(vals) <= MAX_BATCH_SIZES,
                flag,
                f"{len(vals)} values",
                f"at most {MAX_BATCH_SIZES} values (each is one steady-state estimate per layout searched)",
            )
        for v in vals:
            n = parse_int(v)
            require(n is not None and 1 <= n <= hi, flag, v, f"each value must be a positive integer <= {hi}")
        setattr(a, name, [parse_int(v) for v in vals])
