"""CLI wiring for ``simcast serve-config``: the serving estimate of one deployment in a service YAML
(edge module)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from typing import Any

from simcast.api.options import CLI, Flag, opt
from simcast.cli.engine_args import add_engine_args, engine_settings
from simcast.cli.option_flags import add_option_flags, option_field, option_values
from simcast.cli.outputs import emit, emit_json, run_metadata, write_report
from simcast.cli.shared_flags import FABRIC_FLAGS, FabricFlags, OutputFlags, add_fabric_args
from simcast.cli.speculative import add_speculative_args, speculative_from_args
from simcast.core.errors import require
from simcast.inputs.limits import MAX_BENCH_PROMPTS
from simcast.serving.request_level.routers import ROUTERS


def _override(key: str, flag: str, value_type: str | None) -> Any:
    """A field overriding service-YAML key ``key`` by ``flag`` (None: the YAML's value)."""
    return opt(
        None,
        f"override of the service YAML's {key}",
        flag=Flag(names=(flag,), help=f"override {key}", value_type=value_type),
    )


@dataclass(frozen=True, kw_only=True)
class ServeConfigFlags:
    """``simcast serve-config``'s flags: overrides of the service YAML's keys (each field is named after
    its key), the disaggregated replay and the output."""

    tp_size: int | None = _override("parallel_config.tp_size", "--tp", "devices")
    pp_size: int | None = _override("parallel_config.pp_size", "--pp", "devices")
    dp_size: int | None = _override("parallel_config.dp_size", "--dp", "devices")
    router: str | None = opt(
        None,
        "override of the service YAML's parallel_config.router",
        flag=Flag(
            names=("--router",),
            help="override parallel_config.router: the router across the dp replicas (the steady state splits "
            "requests evenly; bench-serve --router replays it request by request)",
            choices=ROUTERS,
        ),
    )
    world_size: int | None = _override("parallel_config.world_size", "--world-size", "devices")
    batch_size: int | None = _override("workload.batch_size", "--batch", "requests")
    input_length: int | None = _override("workload.input_length", "--input-length", "tokens")
    output_length: int | None = _override("workload.output_length", "--output-length", "tokens")
    device: str | None = _override("device", "--device", None)
    num_prompts: int | None = opt(
        None,
        "disaggregated services: requests replayed through the pools",
        flag=Flag(
            names=("--num-prompts",),
            help="disaggregated services: also replay this many requests through the prefill pool, the KV transfer "
            "and the decode pool with the request-level schedulers (bench-serve's), at --request-rate "
            f"[<= {MAX_BENCH_PROMPTS}]",
            value_type="prompts",
        ),
    )
    request_rate: float | None = opt(
        None,
        "Poisson arrival rate, requests/s: aggregated services add the open-loop estimate at this rate "
        "(utilisation, mean and p99 TTFT); disaggregated ones replay --num-prompts at it (None: the YAML's)",
        flag=Flag(
            names=("--request-rate",),
            help="Poisson arrivals at this rate: aggregated services print utilisation, mean and p99 TTFT at it "
            "(and the rate at which p99 TTFT reaches the YAML's ttft_ms limit); disaggregated ones with "
            "--num-prompts replay at it [the service YAML's request_rate]",
            value_type="finite_rate",
        ),
    )
    seed: int = opt(
        0,
        "the replay's random seed",
        flag=Flag(names=("--seed",), help="with --num-prompts: random seed [0]", value_type="seed"),
    )
    json: bool = opt(
        False,
        "print the result row as JSON",
        flag=Flag(names=("--json",), help="print the result row as JSON", action="store_true"),
    )


_OVERRIDES = (
    "tp_size",
    "pp_size",
    "dp_size",
    "router",
    "world_size",
    "batch_size",
    "input_length",
    "output_length",
    "device",
)


def add_serve_config_args(p: argparse.ArgumentParser) -> None:
    from simcast.api.common import TargetOptions

    p.add_argument(  # a positional: argparse takes no dest for it, which a Flag sets
        "service_yaml", help="service YAML (see docs/inputs.md: model, device, workload, parallel_config)"
    )
    add_option_flags(p, ServeConfigFlags, _OVERRIDES)
    add_fabric_args(p)
    add_engine_args(p, default=None)
    add_option_flags(p, ServeConfigFlags, ("num_prompts", "request_rate", "seed"))
    add_speculative_args(p)
    add_option_flags(p, ServeConfigFlags, ("json",))
    add_option_flags(p, OutputFlags, ("report",))
    add_option_flags(p, TargetOptions, ("use_cache",))


_ENGINE_OVERRIDES = {  # the engine flags' (simcast/cli/engine_args.py) keys and parsed names
    "runtime": ("--engine", "runtime"),
    "max_batched_tokens": ("--max-num-batched-tokens", "max_batched_tokens"),
    "max_num_seqs": ("--max-num-seqs", "max_num_seqs"),
    "engine_profile": ("--engine-profile", "engine_profile"),
    "gpu_memory_utilization": ("--gpu-memory-utilization", "mem_vllm"),
    "mem_fraction_static": ("--mem-fraction-static", "mem_sglang"),
    "kv_cache_free_gpu_memory_fraction": ("--kv-cache-free-gpu-memory-fraction", "mem_trtllm"),
    "max_model_len": ("--max-model-len", "max_model_len"),
}

SERVE_CONFIG_FLAGS = {
    **{k: option_field(ServeConfigFlags, k).metadata[CLI].names[0] for k in _OVERRIDES},
    **{k: flag for k, (flag, _) in _ENGINE_OVERRIDES.items()},
    **{k: option_field(FabricFlags, k).metadata[CLI].names[0] for k in FABRIC_FLAGS},
}
"""The flag that overrides each service-YAML key (errors name the flag when the value came from it)."""


def _overrides(a: argparse.Namespace) -> dict[str, object]:
    """The service-YAML keys the parsed flags override (None: not given), in :data:`SERVE_CONFIG_FLAGS`'s order."""
    return {
        **option_values(a, ServeConfigFlags, _OVERRIDES),
        **{k: getattr(a, name) for k, (_, name) in _ENGINE_OVERRIDES.items()},
        **option_values(a, FabricFlags, FABRIC_FLAGS),
        "engine_settings": engine_settings(a) or None,
    }


def cmd_serve_config(a: argparse.Namespace) -> int:
    from simcast.serving.service_yaml import build_serving_config, read_service_yaml
    from simcast.serving.steady.model import estimate_serving

    overrides = _overrides(a)
    doc = read_service_yaml(a.service_yaml)
    cfg, values = build_serving_config(doc, overrides, SERVE_CONFIG_FLAGS)
    if a.prefix_caching is not None:  # --enable-prefix-caching / --no-... / --disable-radix-cache
        cfg = replace(cfg, prefix_caching=a.prefix_caching)
    spec = speculative_from_args(a, cfg.model)  # the flags override the YAML's speculative block
    if spec is not None:
        cfg = replace(cfg, speculative=spec)
    if values["serving_mode"] != "agg" or "prefill" in doc or "decode" in doc:
        from simcast.cli.disagg import serve_disagg

        require(
            values["router"] in (None, "round_robin"),
            "--router" if a.router else "parallel_config.router",
            values["router"],
            "the disaggregated replay sends requests to the pools' workers in turn (round_robin); "
            "the other routers are simulated across aggregated replicas (bench-serve --router)",
        )
        require(
            not a.report,
            "--report",
            a.report,
            "a disaggregated service has no report page yet: drop --report (an aggregated service's steady state "
            "and bench-serve --serving-mode disagg write one)",
        )
        require(
            a.request_rate is None or a.num_prompts is not None,
            "--request-rate",
            a.request_rate,
            "is the arrival rate of a --num-prompts replay: give --num-prompts too (the steady state runs at the "
            "service YAML's request_rate)",
        )
        return serve_disagg(a, doc, cfg, values)
    require(
        a.num_prompts is None,
        "--num-prompts",
        a.num_prompts,
        "replays disaggregated services only; for an aggregated one run bench-serve with the same layout",
    )
    r = estimate_serving(cfg, use_disk_cache=a.use_cache)
    _print_steady(a, cfg, values, r)
    write_report(a, r)
    return 0


def _print_steady(a: argparse.Namespace, cfg: Any, values: dict[str, Any], r: Any) -> None:
    """The steady state's table, limits, rate estimate and intervals (``--json``: one row)."""
    from simcast.render.search_tables import format_serving, result_row
    from simcast.serving.search.layouts import layout_links

    links = layout_links(cfg)
    verdicts = []
    if values.get("ttft_ms"):
        met = r.ttft_s * 1e3 <= values["ttft_ms"]
        verdicts.append(f"TTFT limit {values['ttft_ms']:g} ms: {'met' if met else 'VIOLATED'}")
    if values.get("tpot_ms"):
        met = r.tpot_s * 1e3 <= values["tpot_ms"]
        verdicts.append(f"TPOT limit {values['tpot_ms']:g} ms: {'met' if met else 'VIOLATED'}")
    if values["router"] is not None:
        verdicts.append(_router_line(values["router"], cfg.parallel.dp))
    from simcast.api.search_uncertainty import LABELS
    from simcast.api.uncertainty import as_dict, serving_intervals, user_residuals
    from simcast.render.interval_text import interval_lines

    figs = serving_intervals(
        ttft_ms=r.ttft_s * 1e3,
        tpot_ms=r.tpot_s * 1e3,
        tokens_per_s_per_device=r.tokens_per_s_per_device,
        engine=cfg.runtime,
        device=cfg.device,
        saturated=False,
        user=user_residuals(values.get("engine_profile")),
    )
    rate = a.request_rate if a.request_rate is not None else values.get("request_rate")
    at_rate = _at_rate(cfg, float(rate), values.get("ttft_ms"), a.use_cache) if rate else None
    if a.json:
        row = result_row(r, links)
        row["fits"] = r.memory.fits
        row["limits"] = verdicts
        row["intervals_80"] = as_dict(figs)
        if at_rate is not None:
            row["at_request_rate"] = at_rate[0]
        if values.get("layout_read"):
            row["layout_read"] = values["layout_read"]
        row["run"] = run_metadata(device=str(values["device"]), engine=cfg.runtime)
        emit_json(row)
    else:
        rate_text = [at_rate[1]] if at_rate is not None else []
        text = format_serving(r, links)
        if values.get("layout_read"):  # the engines' spelling of the layout, as read, under the header line
            head, _, rest = text.partition("\n")
            text = "\n".join([head, f"layout: {values['layout_read']}", rest])
        emit("\n".join([text, *verdicts, *rate_text, *interval_lines(figs, LABELS)]))


def _router_line(router: str, dp: int) -> str:
    """What the steady state makes of the service's router."""
    if dp == 1:
        return f"router {router}: one replica, nothing to route"
    return (
        f"router {router} across {dp} replicas: the steady state splits requests evenly; "
        f"bench-serve --dp {dp} --router {router} simulates it request by request"
    )


def _at_rate(cfg: Any, rate: float, ttft_ms: float | None, use_cache: bool) -> tuple[dict[str, object], str]:
    """The open-loop estimate at ``rate`` requests/s (JSON fields, text), with the rate at which TTFT p99
    reaches ``ttft_ms`` when a limit is given."""
    from simcast.render.rate_tables import format_at_rate, rate_row
    from simcast.serving.steady.rate import capacity_per_s, estimate_at_rate, rate_at_p99_limit

    known = capacity_per_s(cfg, use_disk_cache=use_cache)
    est = estimate_at_rate(cfg, rate, use_disk_cache=use_cache, capacity=known)
    limit_rate = rate_at_p99_limit(cfg, ttft_ms / 1e3, use_disk_cache=use_cache) if ttft_ms else None
    return rate_row(est, limit_rate), format_at_rate(est, limit_rate, ttft_ms)
