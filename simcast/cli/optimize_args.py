"""CLI wiring of ``simcast optimize``'s arguments: the parser and the check of its list flags (edge module)."""

from __future__ import annotations

import argparse
import math

from simcast.cli.args import (
    DEVICES,
    DEVICES_PER_NODE,
    LIMIT_MS,
    REQUESTS,
    TOKENS,
    add_expert_imbalance_arg,
    add_fabric_args,
    add_partition_arg,
    add_precision_args,
    parse_int,
    positive_int,
)
from simcast.cli.disagg import add_disagg_args
from simcast.cli.engine_args import add_engine_args
from simcast.cli.outputs import add_output_args, output_path
from simcast.cli.speculative import add_speculative_args
from simcast.cli.sweep import add_sweep_args
from simcast.core.errors import bounded_repr, require
from simcast.engines import EMIT_ENGINES
from simcast.inputs.limits import (
    MAX_BATCH_SIZES,
    MAX_BATCHED_TOKENS,
    MAX_CHUNK_SIZES,
    MAX_DEVICES,
    MAX_REQUESTS,
    PREFIX_HIT_RATE_RANGE,
    prefix_hit_rate_ok,
)


def _hit_rate(v: str) -> float:
    """``--prefix-hit-rate``: a share in [0, 1) (one prompt token is always computed)."""
    try:
        x = float(v)
    except ValueError:
        x = math.nan
    if not prefix_hit_rate_ok(x):
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; {PREFIX_HIT_RATE_RANGE}")
    return x


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
    p.add_argument("--num-devices", type=DEVICES, required=True, help="devices in the deployment [<= 65536]")
    p.add_argument(
        "--input-length", type=TOKENS, default=None, help="ISL, tokens [<= 10^7; required unless --dataset-name]"
    )
    p.add_argument(
        "--output-length", type=TOKENS, default=None, help="OSL, tokens [<= 10^7; required unless --dataset-name]"
    )
    p.add_argument(
        "--dataset-name",
        default=None,
        help="a shipped request-length distribution (simcast workloads: sharegpt, arxiv_summarization, ...): the "
        "steady state takes its means and its KV per running request over the whole distribution, finite runs "
        "draw from it [default: fixed --input-length / --output-length]",
    )
    p.add_argument(
        "--prefix-hit-rate",
        type=_hit_rate,
        default=0.0,
        help="share of prompt tokens the prefix cache serves (a prefix every prompt shares, e.g. a system "
        "prompt; bench-serve --random-prefix-len P --random-input-len I gives about P/(P+I)): only the rest is "
        "prefilled, attention still spans the whole context, the shared prefix's KV is held once; 0 with "
        "--no-enable-prefix-caching [0, < 1]",
    )
    p.add_argument(
        "--num-prompts",
        type=REQUESTS,
        default=None,
        help="also predict a finite run of this many prompts all sent at once (vllm bench throughput, MLPerf "
        "Offline, bench-serve --request-rate inf): whole-run throughput with ramp-up and drain, beside the "
        "steady state, for the rows shown [<= 10^5]",
    )
    p.add_argument(
        "--usage",
        choices=("server", "offline"),
        default="server",
        help="the engine runs as a server (vllm serve) or offline (vllm.LLM / vllm bench throughput): vLLM's "
        "defaults differ (offline: 16384 batched tokens on big GPUs) [default server]",
    )
    p.add_argument(
        "--tp-sizes", nargs="*", default=None, help="TP sizes; absent: powers of two <= num-devices; no value: same"
    )
    p.add_argument(
        "--pp-sizes", nargs="*", default=None, help="PP sizes; absent: [1]; no value: powers of two <= num-devices"
    )
    p.add_argument(
        "--ep-sizes",
        nargs="*",
        default=None,
        help="MoE expert-parallel sizes; absent: [1]; no value: powers of two <= num-devices",
    )
    p.add_argument(
        "--moe-dp-sizes",
        nargs="*",
        default=None,
        help="MoE expert data-parallel sizes; absent: [1]; no value: powers of two <= num-devices",
    )
    add_expert_imbalance_arg(p)
    add_precision_args(p)
    p.add_argument(
        "--batch-sizes",
        nargs="+",
        default=None,
        help="restrict concurrency per replica to these values (default: 1, 2, 3, 4, 6, 8, 12, ... up to what "
        "memory allows, at most 4096) "
        "[each <= 10^6, at most 256 values]",
    )
    p.add_argument("--ttft-limit", type=LIMIT_MS, default=None, help="TTFT limit, ms")
    p.add_argument("--tpot-limit", type=LIMIT_MS, default=None, help="TPOT limit, ms")
    p.add_argument(
        "--chunked-prefill-sizes",
        nargs="*",
        default=None,
        help="search the prompt chunk size per layout (vLLM --max-num-batched-tokens, SGLang "
        "--chunked-prefill-size; with SGLang at PP > 1 also --enable-dynamic-chunking on/off): each layout keeps "
        "the setting with the lowest 1-prompt TTFT whose best point meets the limits (within 1%%: the higher "
        "token/s/device); absent: the engine's own chunk only; no value: 2048 4096 8192 16384 and the engine's "
        "own [each <= 10^9, at most 16 values]",
    )
    p.add_argument("--devices-per-node", type=DEVICES_PER_NODE, default=None, help="override the profile [<= 1024]")
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
