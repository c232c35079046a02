"""CLI wiring of ``simcast optimize``'s arguments: the parser and the check of its list flags (edge module)."""

from __future__ import annotations

import argparse

from simcast.api.search_inputs import SearchOptions
from simcast.cli.args import (
    REQUESTS,
    add_fabric_args,
    add_partition_arg,
    add_precision_args,
    parse_int,
    positive_int,
)
from simcast.cli.disagg import add_disagg_args
from simcast.cli.engine_args import add_engine_args
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import add_output_args, output_path
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
SEARCH_FLAGS = _WORKLOAD + _SPACE + _LIMITS
"""The :class:`SearchOptions` fields ``simcast optimize`` reads from its own flags (declared on the fields)."""


def add_optimize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        nargs="?",
        default=None,
        help="shipped model id or config.json path, as the last argument (the same as --model)",
    )
    p.add_argument(
        "--model",
        dest="model_flag",
        default=None,
        help="shipped model id (`simcast models`; an Instruct/Chat name of a shipped base works) or a config.json path",
    )
    p.add_argument("--device", required=True, help="shipped device profile or YAML path")
    add_option_flags(p, SearchOptions, _WORKLOAD)
    p.add_argument(
        "--num-prompts",
        type=REQUESTS,
        default=None,
        help="also predict a finite run of this many prompts all sent at once (vllm bench throughput, MLPerf "
        "Offline, bench-serve --request-rate inf): whole-run throughput with ramp-up and drain, beside the "
        "steady state, for the rows shown [<= 10^5]",
    )
    add_option_flags(p, SearchOptions, _SPACE)
    add_precision_args(p)
    add_option_flags(p, SearchOptions, _LIMITS)
    add_fabric_args(p)
    add_partition_arg(p, "uniform | vllm | sglang | trtllm | balanced (minimise the slowest decode stage)")
    add_engine_args(p, default=None, help_default="the --emit engine, else vllm")
    add_speculative_args(p)
    p.add_argument("--top", type=positive_int, default=10, help="rows to print")
    p.add_argument("--csv", default=None, type=output_path("--csv"), help="write all rows to this CSV file")
    p.add_argument("--json", action="store_true", help="print rows (and rejections) as JSON")
    p.add_argument(
        "--emit",
        choices=(*EMIT_ENGINES, "dynamo"),
        default=None,
        help="print each ranked layout's server launch command (one per node when it spans nodes), checked "
        "against the engine's argument rules, and a vllm bench serve line reproducing the predicted point; "
        "implies --engine of the same name unless --engine is given (dynamo: disaggregated rows only)",
    )
    add_disagg_args(p)
    p.add_argument("--show-rejected", action="store_true", help="list rejected layouts with the reason")
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk trace cache")
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
