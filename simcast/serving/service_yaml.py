"""Service YAML -> ServingConfig. Precedence: defaults < YAML < CLI overrides.

```yaml
model: meta-llama/Llama-3.1-70B     # shipped id or config.json path
device: h100_sxm                    # shipped profile or YAML path
runtime: vllm                       # engine: vllm | sglang | trtllm | none (scheduler defaults, CPU overhead)
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
  partition: vllm                   # uniform | vllm | balanced | "20,20,20,20" (optional)
  microbatches: 2                   # decode microbatches in flight (optional, default pp_size)
  devices_per_node: 8               # optional, default from the device profile
  ep_size: 1                        # MoE (optional): expert-parallel size
  moe_dp_size: 1                    # MoE (optional): expert data-parallel size; moe_tp = world/(pp*ep*moe_dp)
  enable_dp_attention: false        # MoE (optional): dp replicas are attention-DP groups (needs dp_size > 1)
limits: {ttft_ms: 2000, tpot_ms: 50} # optional: reported as met / violated
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simcast.inputs.loaders import _check, load_device, load_model, read_yaml
from simcast.core.errors import require
from simcast.serving.model import ServingConfig, Workload
from simcast.core.specs import ParallelSpec

SCHEMA: dict[str, Any] = {
    "model": str, "device": str, "runtime?": str,
    "workload": {"input_length": int, "output_length": int, "batch_size?": int, "max_batched_tokens?": int,
                 "max_num_seqs?": int},
    "parallel_config": {"world_size?": int, "tp_size?": int, "pp_size?": int, "dp_size?": int, "partition?": str,
                        "microbatches?": int, "devices_per_node?": int, "ep_size?": int, "moe_dp_size?": int,
                        "enable_dp_attention?": bool},
    "limits?": {"ttft_ms?": float, "tpot_ms?": float},
}
DEFAULTS: dict[str, Any] = {"runtime": "vllm", "batch_size": 1, "max_batched_tokens": 0, "max_num_seqs": 0, "tp_size": 1, "pp_size": 1,
                            "dp_size": 1, "partition": "vllm", "microbatches": 0, "devices_per_node": None,
                            "ep_size": 1, "moe_dp_size": 1, "enable_dp_attention": False,
                            "ttft_ms": None, "tpot_ms": None}


def read_service_yaml(path: str) -> dict[str, Any]:
    p = Path(path)
    require(p.is_file(), "service YAML", path, "file not found")
    return _check(read_yaml(p, "service YAML"), SCHEMA, "")


def flatten(d: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in d.items() if not isinstance(v, dict)}
    for sub in ("workload", "parallel_config", "limits"):
        flat.update(d.get(sub, {}))
    return flat


def build_serving_config(yaml_values: dict[str, Any], overrides: dict[str, Any]) -> tuple[ServingConfig, dict[str, Any]]:
    """Merge defaults < YAML < CLI overrides (None = not given) and build the config."""
    v = dict(DEFAULTS)
    v.update(flatten(yaml_values))
    v.update({k: x for k, x in overrides.items() if x is not None})
    tp, pp, dp = v["tp_size"], v["pp_size"], v["dp_size"]
    world = v.get("world_size") or tp * pp * dp
    require(world == tp * pp * dp, "parallel_config.world_size", world,
            f"must equal tp_size*pp_size*dp_size = {tp}*{pp}*{dp} = {tp * pp * dp}")
    model = load_model(v["model"])
    require(pp <= model.num_layers, "parallel_config.pp_size", pp, f"must be <= the model's {model.num_layers} layers")
    ep, mdp = v["ep_size"], v["moe_dp_size"]
    require(model.moe is not None or (ep == 1 and mdp == 1), "parallel_config.ep_size/moe_dp_size", f"{ep}/{mdp}",
            f"{model.name} has no experts: both must be 1")
    cfg = ServingConfig(model=model, device=load_device(v["device"], v["devices_per_node"]),
                        parallel=ParallelSpec(tp=tp, pp=pp, dp=dp, world_size=world, ep=ep, moe_dp=mdp,
                                              dp_attention=v["enable_dp_attention"]),
                        workload=Workload(input_length=v["input_length"], output_length=v["output_length"],
                                          max_batched_tokens=v["max_batched_tokens"]),
                        batch_size=v["batch_size"], partition=v["partition"], decode_microbatches=v["microbatches"],
                        runtime=v["runtime"], max_num_seqs=v["max_num_seqs"])
    return cfg, v
