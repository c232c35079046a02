"""CLI wiring for ``simcast optimize`` and ``simcast serve-config`` (edge module)."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.api.common import MEM_FLAGS, engine_limits
from simcast.api.optimize import optimize_setup, run_search, search_space
from simcast.cli.args import (
    BATCHED_TOKENS,
    DEVICES,
    DEVICES_PER_NODE,
    FRACTION,
    LIMIT_MS,
    REQUESTS,
    TOKENS,
    add_expert_imbalance_arg,
    add_fabric_args,
    add_partition_arg,
    add_precision_args,
    fabric_choice,
    float_in,
    parse_int,
    positive_int,
)
from simcast.cli.disagg import add_disagg_args, check_disagg_args, cmd_optimize_modes, wanted
from simcast.cli.exits import EXIT_NO_LAYOUT, EXIT_OK
from simcast.cli.outputs import (
    add_output_args,
    emit,
    emit_json,
    note_model_alias,
    output_path,
    run_metadata,
    write_atomic,
    write_pareto_plot,
)
from simcast.cli.speculative import add_speculative_args, speculative_kwargs
from simcast.cli.sweep import add_sweep_args, check_sweep_args, run_refine
from simcast.core.engines import EMIT_ENGINES
from simcast.core.errors import bounded_repr, require
from simcast.inputs.limits import (
    MAX_BATCH_SIZES,
    MAX_BATCHED_TOKENS,
    MAX_CHUNK_SIZES,
    MAX_DEVICES,
    MAX_REQUESTS,
)
from simcast.render.finite_tables import finite_row, format_finite, workload_label
from simcast.serving.engine_records import ENGINE_CHOICES

NULL_ROWS = (
    "steady_rate_per_s and refined_* are null on rows --refine-top did not refine (it fills each refined layout's "
    "best row); on a refined row refined_miss_* are null when no probed rate missed the TTFT limit and "
    "the other refined_* when none met it"
)
"""Why a value of ``optimize --json`` is null (strict JSON has no NaN)."""


def add_engine_args(p: argparse.ArgumentParser, default: str | None, help_default: str = "") -> None:
    """``--engine`` (alias ``--runtime``) and the engine limits a user may override."""
    p.add_argument(
        "--engine",
        "--runtime",
        dest="runtime",
        default=default,
        choices=ENGINE_CHOICES,
        help="serving engine whose scheduler defaults and CPU overheads apply (none: kernels only)"
        + (f" [default {help_default or default}]" if help_default or default else ""),
    )
    p.add_argument(
        "--max-num-batched-tokens",
        "--max-batched-tokens",
        "--chunked-prefill-size",
        dest="max_batched_tokens",
        type=BATCHED_TOKENS,
        default=None,
        help="token budget of one step, the prompt chunk size with chunked prefill (vLLM --max-num-batched-tokens, "
        "SGLang --chunked-prefill-size) [default: the engine's own; <= 10^9]",
    )
    p.add_argument(
        "--max-num-seqs",
        type=REQUESTS,
        default=None,
        help="running requests per step [default: the engine's own; <= 10^6]",
    )
    p.add_argument(
        "--engine-profile",
        default=None,
        help="engine profile YAML (simcast calibrate-serving --out): its CPU overheads and limits replace the "
        "engine's defaults",
    )
    mem = p.add_mutually_exclusive_group()
    for flag, engine, what in (
        ("--gpu-memory-utilization", "vllm", "fraction of total GPU memory for weights, activations and KV"),
        ("--mem-fraction-static", "sglang", "fraction of total GPU memory for weights and the KV pool"),
        ("--kv-cache-free-gpu-memory-fraction", "trtllm", "fraction of the memory left after weights for KV"),
    ):
        mem.add_argument(
            flag,
            dest="mem_" + engine,
            type=FRACTION,
            default=None,
            help=f"{engine}'s memory flag: {what} [default: the engine's own; (0, 1]]",
        )
    p.add_argument(
        "--max-model-len",
        type=TOKENS,
        default=None,
        help="longest request the engine accepts (vLLM --max-model-len, SGLang --context-length, TensorRT-LLM "
        "--max_seq_len); longer requests are refused, and the KV cache must hold one [default: not set]",
    )
    pc = p.add_mutually_exclusive_group()
    pc.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        dest="prefix_caching",
        default=None,
        help="prefix caching (vLLM's flag; --no-enable-prefix-caching: off): prompts reuse cached KV blocks of "
        "shared prefixes [default: the engine's own: vLLM V1, SGLang radix cache and TensorRT-LLM block reuse on]",
    )
    pc.add_argument(
        "--disable-radix-cache",
        action="store_false",
        dest="prefix_caching",
        default=None,
        help="SGLang's flag: prefix caching off (the same setting as --no-enable-prefix-caching)",
    )


def _hit_rate(v: str) -> float:
    """``--prefix-hit-rate``: a share in [0, 1) (one prompt token is always computed)."""
    x = float_in(-1.0, 1.0, "share of prompt tokens")(v)
    if not 0 <= x < 1:
        raise argparse.ArgumentTypeError(f"got {bounded_repr(v)}; must be in [0, 1) (one prompt token is computed)")
    return x


def engine_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The ServingConfig fields the engine flags of :func:`add_engine_args` set (absent flags: defaults)."""
    return engine_limits(**engine_limit_args(a))


def engine_limit_args(a: argparse.Namespace) -> dict[str, Any]:
    """The engine-limit keywords of the API (:func:`simcast.api.common.engine_limits`) from parsed flags."""
    out: dict[str, Any] = {kw: getattr(a, "mem_" + engine, None) for engine, _, kw in MEM_FLAGS}
    out["max_model_len"] = getattr(a, "max_model_len", None)
    out["prefix_caching"] = getattr(a, "prefix_caching", None)
    return out


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
        help="restrict concurrency per replica to these values (default: binary search up to 4096) "
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


def cmd_optimize(a: argparse.Namespace) -> int:
    from simcast.render.search_tables import format_search
    from simcast.serving.search import meets

    came_positional = a.model is not None
    normalize_trailing_model(a)
    if not came_positional:  # main() noted a positional alias already
        note_model_alias(a.model)
    implied = a.emit if a.emit in EMIT_ENGINES else None  # dynamo is a launcher, not an engine
    a.runtime = a.runtime or implied or "vllm"  # --emit X implies --engine X unless --engine was given
    n = a.num_devices
    space = search_space(
        num_devices=n,
        tp_sizes=a.tp_sizes,
        pp_sizes=a.pp_sizes,
        ep_sizes=a.ep_sizes,
        moe_dp_sizes=a.moe_dp_sizes,
        batch_sizes=a.batch_sizes,
        ttft_limit_ms=a.ttft_limit,
        tpot_limit_ms=a.tpot_limit,
        chunked_prefill_sizes=a.chunked_prefill_sizes,
    )
    check_sweep_args(a)
    check_disagg_args(a)
    setup = optimize_setup(
        space=space,
        model=a.model,
        device=a.device,
        input_length=a.input_length,
        output_length=a.output_length,
        dataset_name=a.dataset_name,
        usage=a.usage,
        explicit_moe_sizes=a.ep_sizes is not None or a.moe_dp_sizes is not None,
        expert_imbalance=a.expert_imbalance,
        quantization=a.quantization,
        kv_cache_dtype=a.kv_cache_dtype,
        devices_per_node=a.devices_per_node,
        fabric=fabric_choice(a),
        partition=a.partition,
        engine=a.runtime,
        max_num_batched_tokens=a.max_batched_tokens,
        max_num_seqs=a.max_num_seqs,
        engine_profile=a.engine_profile,
        prefix_hit_rate=a.prefix_hit_rate,
        **engine_limit_args(a),
        **speculative_kwargs(a),
    )
    base, space, workload, dist = setup.config, setup.space, setup.workload, setup.lengths
    model, device = base.model, base.device
    require(
        base.speculative is None or not wanted(a),
        "--serving-mode",
        getattr(a, "serving_mode", None),
        "speculative decoding is modelled for aggregated serving only (agg)",
    )
    require(
        not space.chunk_sizes or not wanted(a),
        "--chunked-prefill-sizes",
        list(space.chunk_sizes),
        "searches aggregated layouts only (not with --serving-mode disagg/both or a request rate)",
    )
    if wanted(a):  # another serving mode than agg, or the fewest devices for a request rate
        return cmd_optimize_modes(a, base, space)
    found = run_search(setup, use_cache=not a.no_cache, workers=a.workers, ray_address=a.ray, progress=None)
    rows, rejected = list(found.candidates), list(found.rejected)
    refs, refined = run_refine(a, rows) if a.refine_top else ([], [])
    finite = []
    if a.num_prompts:
        from simcast.serving.finite import finite_run

        finite = [
            finite_run(c.result.config, a.num_prompts, lengths=dist, use_disk_cache=not a.no_cache)
            for c in rows[: a.top]
        ]
    if a.csv or a.json or a.plot:  # pandas only for these (its import is a third of a warm run)
        from simcast.render.refine_tables import csv_columns
        from simcast.render.search_tables import points_dataframe

        pts = points_dataframe(rows, lambda r: meets(r, space), {r["parallel"]: csv_columns(r) for r in refined})
    meta = run_metadata(device=a.device, engine=a.runtime) if a.csv or a.json else {}  # the text table has none
    if a.csv:
        table_ = pts.assign(**{k: v for k, v in meta.items() if k not in pts.columns})
        write_atomic(a.csv, "--csv", lambda tmp: table_.to_csv(tmp, index=False))
    if a.plot:
        write_pareto_plot(
            pts,
            a.plot,
            f"{model.name}, {n} x {device.name}, {workload_label(workload)}, engine {a.runtime}",
            ttft_limit_ms=a.ttft_limit,
            tpot_limit_ms=a.tpot_limit,
        )
    launch = []
    if a.emit:
        from simcast.render.launch import launch_lines
        from simcast.serving.search import model_label

        launch = [
            (model_label(c.result.config), launch_lines(c.result.config, a.emit, c.result.concurrency))
            for c in rows[: a.top]
        ]
    if a.json:
        out = {
            "run": meta,
            "rows": pts.to_dict(orient="records"),
            "rejected": [{"parallel": r.parallel, "reason": r.reason} for r in rejected],
        }
        if a.refine_top:
            out["refined"] = refined
        if finite:
            out["finite_runs"] = [finite_row(f) for f in finite]
        if a.emit:
            from simcast.render.launch import launch_dict

            out["launch"] = [{"parallel": lab, **launch_dict(ll)} for lab, ll in launch]
        emit_json(out, null_reason=NULL_ROWS)
        return EXIT_OK if rows else EXIT_NO_LAYOUT
    lim = []
    if a.ttft_limit:
        lim.append(f"TTFT <= {a.ttft_limit:g} ms")
    if a.tpot_limit:
        lim.append(f"TPOT <= {a.tpot_limit:g} ms")
    header = (
        f"simcast optimize: {model.name} on {n} x {device.name} ({device.links.devices_per_node} per node), "
        f"{workload_label(workload)}, tp {list(space.tp_sizes)} x pp {list(space.pp_sizes)}"
        + (
            (
                f" x ep {list(space.ep_sizes)}, MoE experts per replica (MoE-DP = DP)"
                if space.moe_replicas
                else f" x ep {list(space.ep_sizes)} x moe_dp {list(space.moe_dp_sizes)}"
            )
            if model.moe is not None
            else ""
        )
        + (f", limits {', '.join(lim)}" if lim else "")
        + "; ranked by token/s/device"
    )
    assumptions = rows[0].result.assumptions if rows else ()
    emit(format_search(rows, rejected, header, a.top, a.show_rejected, assumptions, has_limits=bool(lim)))
    if refined:
        from simcast.render.refine_tables import format_refined

        emit("\n" + format_refined(refined, refs))
    if finite:
        emit("\n" + format_finite(finite))
    if a.emit:
        from simcast.render.launch import format_launch

        emit("\n" + format_launch(launch, a.emit))
    return EXIT_OK if rows else EXIT_NO_LAYOUT
