"""CLI wiring for ``simcast serve-config``: the serving estimate of one deployment in a service YAML
(edge module)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from simcast.cli.args import DEVICES, REQUESTS, TOKENS, add_fabric_args, float_in, int_in
from simcast.cli.engine_args import add_engine_args
from simcast.cli.outputs import emit, emit_json, run_metadata
from simcast.cli.speculative import add_speculative_args, speculative_from_args
from simcast.core.errors import require
from simcast.inputs.limits import MAX_BENCH_PROMPTS


def add_serve_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("service_yaml", help="service YAML (see docs/inputs.md: model, device, workload, parallel_config)")
    p.add_argument("--tp", type=DEVICES, default=None, help="override parallel_config.tp_size")
    p.add_argument("--pp", type=DEVICES, default=None, help="override parallel_config.pp_size")
    p.add_argument("--dp", type=DEVICES, default=None, help="override parallel_config.dp_size")
    p.add_argument("--world-size", type=DEVICES, default=None, help="override parallel_config.world_size")
    p.add_argument("--batch", type=REQUESTS, default=None, help="override workload.batch_size")
    p.add_argument("--input-length", type=TOKENS, default=None, help="override workload.input_length")
    p.add_argument("--output-length", type=TOKENS, default=None, help="override workload.output_length")
    p.add_argument("--device", default=None, help="override device")
    add_fabric_args(p)
    add_engine_args(p, default=None)
    p.add_argument(
        "--num-prompts",
        type=int_in(1, MAX_BENCH_PROMPTS, "requests simulated"),
        default=None,
        help="disaggregated services: also replay this many requests through the prefill pool, the KV transfer and "
        "the decode pool with the request-level schedulers (bench-serve's), at --request-rate "
        f"[<= {MAX_BENCH_PROMPTS}]",
    )
    p.add_argument(
        "--request-rate",
        type=float_in(1e-6, 1e9, "requests/s"),
        default=None,
        help="with --num-prompts: Poisson arrivals at this rate [the steady state's rate]",
    )
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0, help="with --num-prompts: random seed [0]")
    add_speculative_args(p)
    p.add_argument("--json", action="store_true", help="print the result row as JSON")
    p.add_argument("--no-cache", action="store_true", help="bypass the on-disk trace cache")


SERVE_CONFIG_FLAGS = {
    "tp_size": "--tp",
    "pp_size": "--pp",
    "dp_size": "--dp",
    "world_size": "--world-size",
    "batch_size": "--batch",
    "input_length": "--input-length",
    "output_length": "--output-length",
    "device": "--device",
    "runtime": "--engine",
    "max_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "engine_profile": "--engine-profile",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "mem_fraction_static": "--mem-fraction-static",
    "kv_cache_free_gpu_memory_fraction": "--kv-cache-free-gpu-memory-fraction",
    "max_model_len": "--max-model-len",
    "fabric": "--fabric",
    "inter_node_bandwidth_gbps": "--inter-node-bandwidth",
    "inter_node_latency_us": "--inter-node-latency",
}
"""The flag that overrides each service-YAML key (errors name the flag when the value came from it)."""


def cmd_serve_config(a: argparse.Namespace) -> int:
    from simcast.render.search_tables import format_serving, result_row
    from simcast.serving.search.layouts import layout_links
    from simcast.serving.service_yaml import build_serving_config, read_service_yaml
    from simcast.serving.steady.model import estimate_serving

    overrides = {
        "tp_size": a.tp,
        "pp_size": a.pp,
        "dp_size": a.dp,
        "world_size": a.world_size,
        "batch_size": a.batch,
        "input_length": a.input_length,
        "output_length": a.output_length,
        "device": a.device,
        "runtime": a.runtime,
        "max_batched_tokens": a.max_batched_tokens,
        "max_num_seqs": a.max_num_seqs,
        "engine_profile": a.engine_profile,
        "gpu_memory_utilization": a.mem_vllm,
        "mem_fraction_static": a.mem_sglang,
        "kv_cache_free_gpu_memory_fraction": a.mem_trtllm,
        "max_model_len": a.max_model_len,
        "fabric": a.fabric,
        "inter_node_bandwidth_gbps": a.inter_node_bandwidth,
        "inter_node_latency_us": a.inter_node_latency,
    }
    require(
        a.request_rate is None or a.num_prompts is not None,
        "--request-rate",
        a.request_rate,
        "is the arrival rate of a --num-prompts replay: give --num-prompts too (the steady state runs at the "
        "service YAML's request_rate)",
    )
    doc = read_service_yaml(a.service_yaml)
    cfg, values = build_serving_config(doc, overrides, SERVE_CONFIG_FLAGS)
    if a.prefix_caching is not None:  # --enable-prefix-caching / --no-... / --disable-radix-cache
        cfg = replace(cfg, prefix_caching=a.prefix_caching)
    spec = speculative_from_args(a, cfg.model)  # the flags override the YAML's speculative block
    if spec is not None:
        cfg = replace(cfg, speculative=spec)
    if values["serving_mode"] != "agg" or "prefill" in doc or "decode" in doc:
        from simcast.cli.disagg import serve_disagg

        return serve_disagg(a, doc, cfg, values)
    require(
        a.num_prompts is None,
        "--num-prompts",
        a.num_prompts,
        "replays disaggregated services only; for an aggregated one run bench-serve with the same layout",
    )
    r = estimate_serving(cfg, use_disk_cache=not a.no_cache)
    links = layout_links(cfg)
    verdicts = []
    if values.get("ttft_ms"):
        met = r.ttft_s * 1e3 <= values["ttft_ms"]
        verdicts.append(f"TTFT limit {values['ttft_ms']:g} ms: {'met' if met else 'VIOLATED'}")
    if values.get("tpot_ms"):
        met = r.tpot_s * 1e3 <= values["tpot_ms"]
        verdicts.append(f"TPOT limit {values['tpot_ms']:g} ms: {'met' if met else 'VIOLATED'}")
    if a.json:
        row = result_row(r, links)
        row["fits"] = r.memory.fits
        row["limits"] = verdicts
        row["run"] = run_metadata(device=str(values["device"]), engine=cfg.runtime)
        emit_json(row)
    else:
        emit(format_serving(r, links) + ("\n" + "\n".join(verdicts) if verdicts else ""))
    return 0
