"""A disaggregated service YAML (``serving_mode: disagg``, ``prefill:``, ``decode:``) -> DisaggConfig.

The top-level keys configure what both pools share (model, engine, workload, fabric, memory flags,
``parallel_config``'s partition and node size); each pool block sets its own layout (``tp_size``,
``pp_size``, ``dp_size``, ``ep_size``, ``moe_dp_size``, ``enable_dp_attention``), ``replicas``,
optionally its own ``device`` profile, ``max_batched_tokens``, ``kv_cache_dtype`` (auto | bf16 | fp8 | nvfp4) and
``quantization`` (none | fp8: the weights' format, as ``--quantization``); the decode block its ``batch_size``
(running requests per DP rank; default ``workload.batch_size``). A ``speculative`` block (or the flags)
runs in the decode pool only: the prefill pool makes one token per request and never drafts.
See :mod:`simcast.serving.service_yaml`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simcast.core.errors import require
from simcast.core.fabrics import FabricChoice, with_fabric
from simcast.core.kv import KV_CACHE_DTYPES
from simcast.core.specs import ParallelSpec
from simcast.inputs.limits import check_fabric_choice
from simcast.inputs.loaders import load_device, with_quantization
from simcast.serving.config import SERVING_MODES, ServingConfig
from simcast.serving.disagg.kv_transfer import KV_TRANSFER_MODES
from simcast.serving.disagg.steady import DisaggConfig

"""A pool's ``kv_cache_dtype`` (as ``--kv-cache-dtype``)."""


def _pool(base: ServingConfig, block: dict[str, Any], role: str, v: dict[str, Any]) -> ServingConfig:
    tp, pp, dp = block.get("tp_size", 1), block.get("pp_size", 1), block.get("dp_size", 1)
    ep, mdp = block.get("ep_size", 1), block.get("moe_dp_size", 1)
    require(
        base.model.moe is not None or (ep == 1 and mdp == 1),
        f"{role}.ep_size",
        f"{ep}/{mdp}",
        f"{base.model.name} has no experts: ep_size and moe_dp_size must be 1",
    )
    require(
        pp <= base.model.num_layers, f"{role}.pp_size", pp, f"must be <= the model's {base.model.num_layers} layers"
    )
    par = ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, moe_dp=mdp, dp_attention=block.get("enable_dp_attention", False))
    device = base.device
    if "device" in block:
        fabric = FabricChoice(
            fabric=v["fabric"], bandwidth_gbps=v["inter_node_bandwidth_gbps"], latency_us=v["inter_node_latency_us"]
        )
        device = with_fabric(load_device(block["device"], v["devices_per_node"]), check_fabric_choice(fabric))
    kv = block.get("kv_cache_dtype", base.kv_cache_dtype)
    require(kv in KV_CACHE_DTYPES, f"{role}.kv_cache_dtype", kv, f"allowed: {', '.join(KV_CACHE_DTYPES)}")
    model = with_quantization(base.model, block["quantization"]) if "quantization" in block else base.model
    w = base.workload
    if "max_batched_tokens" in block:
        w = replace(w, max_batched_tokens=block["max_batched_tokens"])
    return replace(
        base.redeployed(parallel=par, device=device, model=model, kv_cache_dtype=kv),
        workload=w,
        batch_size=block.get("batch_size", base.batch_size),
        decode_microbatches=0,
    )


def build_disagg_config(yaml_values: dict[str, Any], base: ServingConfig, v: dict[str, Any]) -> DisaggConfig | None:
    """The disaggregated deployment a checked service YAML describes (None for ``serving_mode: agg``);
    ``base``/``v``: the top-level config and merged values from
    :func:`~simcast.serving.service_yaml.build_serving_config`."""
    mode = v["serving_mode"]
    require(mode in SERVING_MODES[:2], "serving_mode", mode, "allowed: agg, disagg")
    require(
        v["kv_transfer"] in KV_TRANSFER_MODES,
        "kv_transfer",
        v["kv_transfer"],
        f"allowed: {', '.join(KV_TRANSFER_MODES)}",
    )
    if mode == "agg":
        for k in ("prefill", "decode", "request_rate", "max_concurrency"):
            require(k not in yaml_values, k, "given", "only with serving_mode: disagg")
        return None
    for k in ("prefill", "decode"):
        require(k in yaml_values, k, None, "is required with serving_mode: disagg (the pool's layout and replicas)")
    pre, dec = yaml_values["prefill"], yaml_values["decode"]
    require("batch_size" not in pre, "prefill.batch_size", pre.get("batch_size"), "only the decode pool has one")
    return DisaggConfig(
        prefill=replace(_pool(base, pre, "prefill", v), speculative=None),
        decode=_pool(base, dec, "decode", v),
        prefill_replicas=pre.get("replicas", 1),
        decode_replicas=dec.get("replicas", 1),
        kv_transfer=v["kv_transfer"],
        request_rate_per_s=v["request_rate"] or 0.0,
    )
