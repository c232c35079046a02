"""``bench-serve --serving-mode disagg``'s keywords: P prefill workers and D decode workers, each pool's layout
given as overrides of the run's own options (one options dataclass for both pools, never a second copy of
its layout fields), and the KV transfer between them.

A pool's layout is ``KEY=VALUE,...`` (or a mapping, from the API) whose keys are the run's own option names
(:data:`POOL_KEYS` that :class:`~simcast.api.bench.BenchOptions` has: ``tp``, ``pp``, ``dp``, the expert and
attention-DP layout fields, ``kv_cache_dtype``, ``quantization``, ``device``, ``max_num_batched_tokens``,
``max_num_seqs``); a key not given takes the run's value. So ``--tp 8 --prefill-layout dp=2
--decode-layout tp=4,dp=4`` runs TP8 x DP2 prefill workers and TP4 x DP4 decode workers. Speculative decoding
(the run's ``--speculative-*`` flags) runs in the decode pool only: the prefill pool makes one token per
request and never drafts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from simcast.api.options import Flag, opt
from simcast.serving.disagg.kv_transfer import KV_TRANSFER_MODES
from simcast.serving.request_level.routers import ROUTERS

POOL_KEYS = (
    "tp",
    "pp",
    "dp",
    "ep",
    "enable_expert_parallel",
    "moe_dp",
    "enable_dp_attention",
    "dp_attention",
    "moe_dense_tp_size",
    "enable_dp_lm_head",
    "ep_num_redundant_experts",
    "enable_eplb",
    "kv_cache_dtype",
    "quantization",
    "device",
    "max_num_batched_tokens",
    "max_num_seqs",
    "engine_profile",
    "gpu_memory_utilization",
    "mem_fraction_static",
    "kv_cache_free_gpu_memory_fraction",
)
"""Option names a pool's layout may set: the ones the options dataclass has are accepted (the layout fields
another change adds to it become pool keys without a change here)."""

PoolLayout = str | Mapping[str, Any]
"""A pool's overrides: ``"tp=4,dp=4,kv_cache_dtype=fp8"`` or ``{"tp": 4, "dp": 4}``."""


@dataclass(frozen=True, kw_only=True)
class DisaggOptions:
    """The disaggregated deployment of a ``bench-serve`` run (``serving_mode="agg"``: none of these act)."""

    serving_mode: Literal["agg", "disagg"] = opt(
        "agg",
        "agg: one engine prefills and decodes; disagg: prefill and decode workers joined by a KV transfer",
        flag=Flag(
            names=("--serving-mode",),
            help="agg: each replica prefills and decodes; disagg: --prefill-workers prefill workers and "
            "--decode-workers decode workers (Dynamo, SGLang PD, TensorRT-LLM disaggregated serving) joined by a "
            "KV transfer (--kv-transfer) [agg]",
            choices=("agg", "disagg"),
        ),
    )
    prefill_workers: int = opt(
        1,
        "disagg: prefill workers (each one engine of the prefill layout)",
        flag=Flag(names=("--prefill-workers",), help="disagg: prefill workers (engines) [1]", value_type="devices"),
    )
    decode_workers: int = opt(
        1,
        "disagg: decode workers (each one engine of the decode layout)",
        flag=Flag(names=("--decode-workers",), help="disagg: decode workers (engines) [1]", value_type="devices"),
    )
    prefill_layout: PoolLayout = opt(
        "",
        "disagg: the prefill workers' overrides of the run's options, KEY=VALUE,... or a mapping",
        flag=Flag(
            names=("--prefill-layout",),
            help="disagg: the prefill workers' layout as overrides of this run's options, e.g. "
            "tp=8,dp=2,kv_cache_dtype=fp8 (keys: the option names tp, pp, dp, the EP/attention-DP fields, "
            "kv_cache_dtype, quantization, device, max_num_batched_tokens, max_num_seqs) [the run's own]",
            metavar="KEY=VALUE,...",
        ),
    )
    decode_layout: PoolLayout = opt(
        "",
        "disagg: the decode workers' overrides of the run's options, KEY=VALUE,... or a mapping",
        flag=Flag(
            names=("--decode-layout",),
            help="disagg: the decode workers' layout as overrides of this run's options (keys as "
            "--prefill-layout); speculative decoding runs in the decode workers only [the run's own]",
            metavar="KEY=VALUE,...",
        ),
    )
    kv_transfer: Literal["whole", "per-layer"] = opt(
        "whole",
        "disagg: the prompt's KV moves after the prefill (whole) or layer by layer during it (per-layer)",
        flag=Flag(
            names=("--kv-transfer",),
            help="disagg: the prompt's KV moves after the prefill (whole: vLLM's NixlConnector) or streams layer "
            "by layer during it (per-layer) [whole]",
            choices=KV_TRANSFER_MODES,
        ),
    )
    disagg_router: str = opt(
        "engine",
        "disagg: the router picking each request's prefill and decode worker (engine: the engine's own)",
        flag=Flag(
            names=("--disagg-router",),
            help="disagg: the router that picks each request's prefill and decode worker: engine (the engine's "
            "PD router: SGLang sgl-router cache_aware, vLLM/TensorRT-LLM/Dynamo round_robin) or a --router "
            "policy [engine]",
            choices=("engine", *ROUTERS),
        ),
    )
