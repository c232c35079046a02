"""Service YAML -> ServingConfig. Precedence: defaults < YAML < CLI overrides.

```yaml
model: meta-llama/Llama-3.1-70B     # shipped id or config.json path
device: h100_sxm                    # shipped profile or YAML path
runtime: vllm                       # engine: vllm | sglang | trtllm | none (scheduler defaults, CPU overhead)
engine_profile: engine.yaml         # optional: simcast calibrate-serving output; its engine when runtime is absent
workload:
  input_length: 2048                # ISL, tokens
  output_length: 512                # OSL, tokens
  batch_size: 32                    # concurrency per replica
  max_batched_tokens: 8192          # step token budget (optional, default: the engine's)
  max_num_seqs: 256                 # running requests per step (optional, default: the engine's)
parallel_config:
  world_size: 8                     # must equal tp_size * pp_size * dp_size
  tp_size: 4
  pp_size: 2
  dp_size: 1
  partition: vllm                   # uniform | vllm | sglang | trtllm | balanced | "20,20,20,20" (optional,
                                    #   default: the runtime's own rule; SGLANG_PP_LAYER_PARTITION=... accepted)
  microbatches: 2                   # decode microbatches in flight (optional, default pp_size)
  devices_per_node: 8               # optional, default from the device profile
  fabric: roce-200g                 # optional: named inter-node fabric (simcast/core/fabrics.py)
  inter_node_bandwidth_gbps: 25     # optional: GB/s per GPU per direction; overrides fabric and profile
  inter_node_latency_us: 20         # optional: microseconds; overrides fabric and profile
  ep_size: 1                        # MoE (optional): expert-parallel size
  moe_dp_size: 1                    # MoE (optional): expert data-parallel size; moe_tp = world/(pp*ep*moe_dp)
  enable_dp_attention: false        # MoE (optional): dp replicas are attention-DP groups (needs dp_size > 1)
  router: cache_aware               # optional: router across the dp replicas (simcast.serving.request_level.routers)
  ep_num_redundant_experts: 0       # MoE (optional): redundant expert replicas, ceil((E+R)/ep) slots per rank
  enable_eplb: false                # MoE (optional): busiest EP rank's load from EPLB's placement
  # layout_spelling: engine         # optional: tp_size counts every GPU of a stage, dp_size/enable_dp_attention
  #                                 #   as SGLang's; TensorRT-LLM's tensor_parallel_size, pipeline_parallel_size,
  #                                 #   moe_expert_parallel_size, enable_attention_dp read as it reads them
  # moe_dense_tp_size: 1            # SGLang (optional): dense MLP layers unsharded per rank; enable_dp_lm_head: true
limits: {ttft_ms: 2000, tpot_ms: 50} # optional: reported as met / violated
gpu_memory_utilization: 0.9         # optional, the engine's own memory flag (one of the three, matching runtime):
# mem_fraction_static: 0.85         #   SGLang; kv_cache_free_gpu_memory_fraction: 0.9 for TensorRT-LLM
max_model_len: 8192                 # optional: longest request the engine accepts
# engine_args: {stream_interval: 30}  # optional: the engine's own settings (SGLang stream_interval,
#                                     #   scheduler_recv_interval, cuda_graph_max_bs, num_continuous_decode_steps;
#                                     #   TensorRT-LLM stream_interval, cuda_graph_max_batch_size, ...)
serving_mode: disagg                # optional: agg (default) | disagg (simcast.serving.disagg.service_yaml)
kv_transfer: whole                  # disagg: whole | per-layer
speculative:                        # optional (agg): vLLM's --speculative-config keys, plus acceptance
  method: eagle3                    #   mtp (deepseek_mtp, ...) | eagle | eagle3 | ngram
  num_speculative_tokens: 3         #   draft tokens per step (MTP: default the model's MTP layers)
  acceptance: [0.8, 0.6, 0.4]       #   optional: one rate or one per token (default: the method's, cited)
request_rate: 20                    # optional, requests/s: disagg: the pools run at it (default: the decode
                                    # pool's at its batch); agg: the open-loop estimate at it (utilisation, TTFT)
max_concurrency: 64                 # disagg, optional: the --num-prompts replay's client cap on requests in flight
prefill: {replicas: 2, tp_size: 1}  # disagg: the prefill pool (tp/pp/dp/ep_size, enable_dp_attention, device,
decode: {replicas: 1, tp_size: 2, batch_size: 128}  # max_batched_tokens, kv_cache_dtype: auto|bf16|fp8|nvfp4,
                                    #   quantization: none|fp8, replicas; decode also batch_size; a
                                    #   speculative block (or flags) runs in the decode pool only
```
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from simcast.core.device import DeviceSpec
from simcast.core.errors import SimcastInputError, require
from simcast.core.fabrics import FABRICS, FabricChoice, with_fabric
from simcast.core.model_spec import ModelSpec
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import ENGINE_FLAGS
from simcast.engines.partition import Partition, canonical_partition, default_partition, partition_layers
from simcast.engines.policy import EnginePolicy
from simcast.inputs.files import load_yaml
from simcast.inputs.limits import (
    MAX_BATCHED_TOKENS,
    MAX_DEVICES,
    MAX_DEVICES_PER_NODE,
    MAX_LIMIT_MS,
    MAX_LINK_GBPS,
    MAX_LINK_LATENCY_US,
    MAX_MICROBATCHES,
    MAX_REQUESTS,
    MAX_SPEC_TOKENS,
    MAX_STAGE_MICROBATCHES,
    MAX_TOKENS,
    MIN_LINK_GBPS,
    check_fabric_choice,
)
from simcast.inputs.loaders import load_device, load_model
from simcast.inputs.schema import Int, Num, Str, check
from simcast.serving.engine_profile import profile_for
from simcast.serving.request_level.routers import check_router
from simcast.serving.speculative.spec import from_mapping
from simcast.serving.steady.model import ServingConfig, Workload
from simcast.serving.yaml_layout import TRTLLM_KEYS, read_engine_layout

_DEVICES = Int(1, MAX_DEVICES)
_MS = Num(0.0, MAX_LIMIT_MS, lo_open=True)
MAX_RATE = 1e9  # requests/s, as bench-serve's --request-rate
POOL_SCHEMA: dict[str, Any] = {
    "replicas?": _DEVICES,
    "tp_size?": _DEVICES,
    "pp_size?": _DEVICES,
    "dp_size?": _DEVICES,
    "ep_size?": _DEVICES,
    "moe_dp_size?": _DEVICES,
    "enable_dp_attention?": bool,
    "device?": Str(),
    "batch_size?": Int(1, MAX_REQUESTS),
    "max_batched_tokens?": Int(0, MAX_BATCHED_TOKENS),
    "kv_cache_dtype?": Str(8),
    "quantization?": Str(8),
}
"""One pool of a disaggregated service (``prefill:`` / ``decode:``); absent keys: 1, the top-level device,
the workload's batch size and token budget."""
SCHEMA: dict[str, Any] = {
    "model": Str(),
    "device": Str(),
    "runtime?": Str(64),
    "workload": {
        "input_length": Int(1, MAX_TOKENS),
        "output_length": Int(1, MAX_TOKENS),
        "batch_size?": Int(1, MAX_REQUESTS),
        "max_batched_tokens?": Int(0, MAX_BATCHED_TOKENS),
        "max_num_seqs?": Int(0, MAX_REQUESTS),
    },
    "parallel_config": {
        "world_size?": _DEVICES,
        "tp_size?": _DEVICES,
        "pp_size?": _DEVICES,
        "dp_size?": _DEVICES,
        "partition?": Str(),
        "microbatches?": Int(0, MAX_MICROBATCHES),
        "devices_per_node?": Int(1, MAX_DEVICES_PER_NODE),
        "fabric?": Str(64),
        "inter_node_bandwidth_gbps?": Num(MIN_LINK_GBPS, MAX_LINK_GBPS),
        "inter_node_latency_us?": Num(0.0, MAX_LINK_LATENCY_US),
        "ep_size?": _DEVICES,
        "moe_dp_size?": _DEVICES,
        "enable_dp_attention?": bool,
        "router?": Str(32),
        "ep_num_redundant_experts?": Int(0, 65536),
        "enable_eplb?": bool,
        "layout_spelling?": Str(16),  # the engines' spelling (simcast.serving.yaml_layout)
        **{f"{k}?": _DEVICES for k in TRTLLM_KEYS},
        "enable_attention_dp?": bool,
        "moe_dense_tp_size?": Int(1, 1),  # SGLang's (simcast.engines.sglang_layers)
        "enable_dp_lm_head?": bool,
    },
    "limits?": {"ttft_ms?": _MS, "tpot_ms?": _MS},
    "engine_profile?": Str(),
    "gpu_memory_utilization?": Num(0.0, 1.0, lo_open=True),
    "mem_fraction_static?": Num(0.0, 1.0, lo_open=True),
    "kv_cache_free_gpu_memory_fraction?": Num(0.0, 1.0, lo_open=True),
    "max_model_len?": Int(1, MAX_TOKENS),
    "engine_args?": {
        **{
            f"{f.keyword}?": (Int(int(f.check[0]), int(f.check[1])) if f.integer else Num(*f.check))
            for f in ENGINE_FLAGS
            if f.engine and f.keyword and isinstance(f.check, tuple)
        },
        **{f"{f.keyword}?": bool for f in ENGINE_FLAGS if f.engine and f.keyword and f.action == "boolean_optional"},
    },
    "serving_mode?": Str(16),
    "kv_transfer?": Str(16),
    "request_rate?": Num(0.0, MAX_RATE, lo_open=True),
    "max_concurrency?": Int(1, MAX_REQUESTS),
    "prefill?": POOL_SCHEMA,
    "decode?": POOL_SCHEMA,
    "speculative?": {
        "method": Str(32),
        "num_speculative_tokens?": Int(1, MAX_SPEC_TOKENS),
        "acceptance?": [Num(0.0, 1.0)],
        "model?": Str(),
    },
}
"""Types and ranges of every key (bounds from :mod:`simcast.inputs.limits`); errors name the YAML key."""
T = TypeVar("T")
DEFAULTS: dict[str, Any] = {
    "runtime": "vllm",
    "batch_size": 1,
    "max_batched_tokens": 0,
    "max_num_seqs": 0,
    "tp_size": 1,
    "pp_size": 1,
    "dp_size": 1,
    "partition": None,
    "microbatches": 0,
    "devices_per_node": None,
    "fabric": None,
    "inter_node_bandwidth_gbps": None,
    "inter_node_latency_us": None,
    "ep_size": 1,
    "moe_dp_size": 1,
    "enable_dp_attention": False,
    "router": None,
    "ep_num_redundant_experts": 0,
    "enable_eplb": False,
    "layout_spelling": "simcast",
    **dict.fromkeys(TRTLLM_KEYS),
    "enable_attention_dp": False,
    "moe_dense_tp_size": None,
    "enable_dp_lm_head": False,
    "ttft_ms": None,
    "tpot_ms": None,
    "engine_profile": None,
    "gpu_memory_utilization": None,
    "mem_fraction_static": None,
    "kv_cache_free_gpu_memory_fraction": None,
    "max_model_len": None,
    "serving_mode": "agg",
    "kv_transfer": "whole",
    "request_rate": None,
    "max_concurrency": None,
}
MEMORY_KEYS = ("gpu_memory_utilization", "mem_fraction_static", "kv_cache_free_gpu_memory_fraction")
"""The engines' memory flags as YAML keys (vLLM, SGLang, TensorRT-LLM)."""


def read_service_yaml(path: str) -> dict[str, Any]:
    """The checked service YAML at ``path`` (unknown keys, types, ranges: one line naming the key)."""
    return check(load_yaml(Path(path), "service YAML"), SCHEMA, "")


_SECTION = {
    k.rstrip("?"): sec
    for sec in ("workload", "parallel_config", "limits")
    for k in SCHEMA[sec if sec != "limits" else "limits?"]
}


def flatten(d: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in d.items() if not isinstance(v, dict)}
    for sub in ("workload", "parallel_config", "limits"):
        flat.update(d.get(sub, {}))
    return flat


def _checked_layout(v: dict[str, Any], name: Callable[[str], str]) -> tuple[ModelSpec, int, bool]:
    """The model, the world size and whether a partition was given, each layout value checked under its own
    key (``name``) before any tracing; ``v["partition"]`` becomes the canonical rule."""
    tp, pp, dp = v["tp_size"], v["pp_size"], v["dp_size"]
    world = v.get("world_size") or tp * pp * dp
    require(
        world == tp * pp * dp,
        name("world_size"),
        world,
        f"must equal tp_size*pp_size*dp_size = {tp}*{pp}*{dp} = {tp * pp * dp}",
    )
    require(world <= MAX_DEVICES, name("world_size"), world, f"must be <= {MAX_DEVICES} (tp_size*pp_size*dp_size)")
    model = _named(lambda: load_model(v["model"]), name("model"))
    require(pp <= model.num_layers, name("pp_size"), pp, f"must be <= the model's {model.num_layers} layers")
    m = v["microbatches"] or pp
    require(
        pp * m <= MAX_STAGE_MICROBATCHES,
        name("microbatches"),
        m,
        f"must be <= {MAX_STAGE_MICROBATCHES // pp} with pp_size {pp} (at most {MAX_STAGE_MICROBATCHES} "
        "stage x microbatch pairs)",
    )
    partition_given = v["partition"] is not None
    v["partition"] = canonical_partition(v["partition"]) if partition_given else default_partition(v["runtime"])
    if v["partition"] != "balanced":  # checked here, under its own key, before any tracing
        _named(lambda: partition_layers(model.num_layers, pp, v["partition"]), name("partition"))
    return model, world, partition_given


def _checked_device(v: dict[str, Any], name: Callable[[str], str], model: ModelSpec) -> DeviceSpec:
    """The device with its fabric, and the expert layout checked against the model."""
    require(
        v["fabric"] is None or v["fabric"] in FABRICS, name("fabric"), v["fabric"], f"allowed: {', '.join(FABRICS)}"
    )
    fabric = FabricChoice(
        fabric=v["fabric"],
        bandwidth_gbps=v["inter_node_bandwidth_gbps"],
        latency_us=v["inter_node_latency_us"],
        fabric_field=name("fabric"),
        bandwidth_field=name("inter_node_bandwidth_gbps"),
        latency_field=name("inter_node_latency_us"),
    )
    device = with_fabric(
        _named(lambda: load_device(v["device"], v["devices_per_node"]), name("device")), check_fabric_choice(fabric)
    )
    ep, mdp = v["ep_size"], v["moe_dp_size"]
    require(
        model.moe is not None or (ep == 1 and mdp == 1),
        name("ep_size"),
        f"{ep}/{mdp}",
        f"{model.name} has no experts: ep_size and moe_dp_size must be 1",
    )
    return device


def _engine_profile(
    v: dict[str, Any], name: Callable[[str], str], device: DeviceSpec, *, runtime_given: bool, partition_given: bool
) -> EnginePolicy | None:
    """The ``engine_profile``'s policy (None: not given); its engine becomes ``v["runtime"]`` (and its
    partition rule the partition, when none was given)."""
    if not v["engine_profile"]:
        return None
    profile = profile_for(
        v["engine_profile"],
        v["runtime"] if runtime_given else None,
        device,
        tp=v["tp_size"],
        pp=v["pp_size"],
        field=name("runtime"),
    )
    v["runtime"] = profile.name
    if not partition_given:  # the profile's engine's own rule
        v["partition"] = default_partition(v["runtime"])
    return profile


def build_serving_config(
    yaml_values: dict[str, Any], overrides: dict[str, Any], flags: dict[str, str] | None = None
) -> tuple[ServingConfig, dict[str, Any]]:
    """Merge defaults < YAML < CLI overrides (None = not given) and build the config.

    An error names where the value came from: the YAML key (``parallel_config.pp_size``) or, for an
    override, its flag from ``flags`` (key -> flag name, e.g. ``{"pp_size": "--pp"}``).
    """
    v = dict(DEFAULTS)
    v.update(flatten(yaml_values))
    given = {k: x for k, x in overrides.items() if x is not None}
    v.update(given)
    runtime_given = "runtime" in given or "runtime" in yaml_values

    def name(key: str) -> str:
        if key in given:
            return (flags or {}).get(key, key)
        return f"{_SECTION[key]}.{key}" if key in _SECTION else key

    v["layout_read"] = read_engine_layout(v, set(flatten(yaml_values)) | set(given), name)  # the engines' spelling
    tp, pp, dp = v["tp_size"], v["pp_size"], v["dp_size"]
    if v["router"] is not None:
        check_router(name("router"), v["router"])
    model, world, partition_given = _checked_layout(v, name)
    device = _checked_device(v, name, model)
    ep, mdp = v["ep_size"], v["moe_dp_size"]
    profile = _engine_profile(v, name, device, runtime_given=runtime_given, partition_given=partition_given)
    mem = [k for k in MEMORY_KEYS if v[k] is not None]
    require(len(mem) <= 1, name(mem[-1]) if mem else "", ", ".join(mem), "give one memory fraction, the engine's own")
    mem_kw: dict[str, Any] = {"mem_fraction": v[mem[0]], "mem_flag": name(mem[0])} if mem else {}
    parallel = ParallelSpec(
        tp=tp,
        pp=pp,
        dp=dp,
        world_size=world,
        ep=ep,
        moe_dp=mdp,
        dp_attention=v["enable_dp_attention"],
        redundant_experts=v["ep_num_redundant_experts"],
        eplb=v["enable_eplb"],
    )
    settings = {**yaml_values.get("engine_args", {}), **(overrides.get("engine_settings") or {})}
    deployment = Deployment(
        model=model,
        device=device,
        parallel=parallel,
        partition=Partition.parse(v["partition"]),
        engine=v["runtime"],
        engine_settings=tuple(settings.items()),
        moe_dense_tp_size=v["moe_dense_tp_size"],
        enable_dp_lm_head=v["enable_dp_lm_head"],
    )
    cfg = ServingConfig(
        deployment=deployment,
        workload=Workload(
            input_length=v["input_length"], output_length=v["output_length"], max_batched_tokens=v["max_batched_tokens"]
        ),
        batch_size=v["batch_size"],
        decode_microbatches=v["microbatches"],
        max_num_seqs=v["max_num_seqs"],
        engine_profile=profile,
        max_model_len=v["max_model_len"] or 0,
        speculative=(
            from_mapping(yaml_values["speculative"], mtp_layers=model.num_mtp_layers)
            if yaml_values.get("speculative")
            else None
        ),
        **mem_kw,
    )
    return cfg, v


def _named(fn: Callable[[], T], field: str) -> T:
    """``fn()``, with an error about the value itself (reported under a CLI flag) renamed to ``field``."""
    try:
        return fn()
    except SimcastInputError as e:
        if e.field in ("--model", "--device", "--partition", "pp_size"):
            raise SimcastInputError(field, e.value, e.allowed) from None
        raise
