"""What the one-call functions share: a model or device given by name or as a spec, and bounded numbers.

The CLI checks its flags' sizes while parsing them (``simcast/cli/args.py``); a keyword argument of the
API gets the same bounds here (:mod:`simcast.inputs.limits`), as one :class:`SimcastInputError` each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from simcast.api.options import Flag, opt, required
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.core.fabrics import FabricChoice, with_fabric
from simcast.core.kv import KV_CACHE_DTYPES
from simcast.core.model_spec import ModelSpec
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE
from simcast.engines import NO_ENGINE, REGISTRY
from simcast.inputs.limits import check_fabric_choice
from simcast.inputs.loaders import QUANTIZATIONS

ModelArg = str | ModelSpec
"""A shipped model id (``meta-llama/Llama-3.1-70B``), a config.json path, or a :class:`ModelSpec`."""
DeviceArg = str | DeviceSpec
"""A shipped device profile name (``h100_sxm``), a profile YAML path, or a :class:`DeviceSpec`."""

EXPERT_IMBALANCE_FLAG = Flag(
    names=("--expert-imbalance",),
    help="MoE: busiest expert rank's load over the uniform-routing expectation "
    f"[default {DEFAULT_EXPERT_IMBALANCE:g}: published routing skew, see simcast.core.moe; 1 = uniform]",
    value_type="imbalance",
)
"""``--expert-imbalance``, the flag of every options class that costs MoE layers."""


def resolve_model(model: ModelArg, *, dtype: str | None = None, quantization: str | None = None) -> ModelSpec:
    """``model`` loaded (a name or path) or taken as it is (a spec, with ``quantization`` applied)."""
    from simcast.inputs.loaders import load_model, with_quantization

    if isinstance(model, ModelSpec):
        require(dtype is None, "dtype", dtype, "applies to a model loaded by name; a ModelSpec carries its own")
        return with_quantization(model, quantization)
    require(
        isinstance(model, str), "model", type(model).__name__, "must be a model id, a config.json path or a ModelSpec"
    )
    return load_model(model, dtype=dtype, quantization=quantization)


def resolve_device(
    device: DeviceArg, *, devices_per_node: int | None = None, fabric: FabricChoice | None = None
) -> DeviceSpec:
    """``device`` loaded (a name or path) or taken as it is, with ``devices_per_node`` and the inter-node
    ``fabric`` applied (:func:`simcast.core.fabrics.with_fabric`)."""
    from dataclasses import replace

    from simcast.inputs.loaders import load_device

    if isinstance(device, DeviceSpec):
        from simcast.inputs.profile_schema import check_device_spec

        dev = check_device_spec(device)  # the physical floors a profile YAML gets (simcast.inputs.limits)
        if devices_per_node is not None:
            dev = replace(dev, links=replace(dev.links, devices_per_node=devices_per_node))
    else:
        require(
            isinstance(device, str),
            "device",
            type(device).__name__,
            "must be a profile name, a YAML path or a DeviceSpec",
        )
        dev = load_device(device, devices_per_node)
    return with_fabric(dev, check_fabric_choice(fabric or FabricChoice()))


def check_int(field: str, value: int | None, lo: int, hi: int) -> None:
    """``value`` (None: not given) is a whole number in ``lo..hi``."""
    if value is None:
        return
    ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    require(ok, field, value, f"must be an integer in {lo}..{hi}")


def check_float(field: str, value: float | None, lo: float, hi: float, *, inf_ok: bool = False) -> None:
    """``value`` (None: not given) is a number in ``lo..hi`` (or +inf when ``inf_ok``)."""
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    ok = ok and ((inf_ok and value == math.inf) or (math.isfinite(value) and lo <= value <= hi))
    require(ok, field, value, f"must be a number in [{lo:g}, {hi:g}]" + (" or inf" if inf_ok else ""))


def check_options(o: Any) -> None:
    """Each field of the options ``o`` whose flag names a bounded kind (``Flag.value_type`` in
    :data:`simcast.inputs.bounds.BOUNDS`) within that kind's range, None meaning not given: the range the
    CLI's type of the same flag takes, declared once. One :class:`SimcastInputError` naming the flag."""
    from dataclasses import fields

    from simcast.api.option_types import CLI, flag_of
    from simcast.inputs.bounds import BOUNDS

    for f in fields(o):
        kind = getattr(f.metadata.get(CLI), "value_type", None)
        value = getattr(o, f.name)
        if kind in BOUNDS and value is not None:
            require(BOUNDS[kind].ok(value), flag_of(type(o), f.name), value, BOUNDS[kind].allowed())


MEM_FLAGS = tuple((e.name, e.memory_flag, e.memory_keyword) for e in REGISTRY.values() if e.memory_flag)
"""Each engine's memory flag: (engine, CLI flag, keyword of the API)."""


@dataclass(frozen=True, kw_only=True)
class TargetOptions:
    """What every one-call runs on: the model, the devices, precision and the stage partition."""

    model: ModelArg = field(
        metadata=required(
            "a shipped model id, a config.json path, or a ModelSpec",
            flag=Flag(
                names=("--model",), help="shipped model id (e.g. meta-llama/Llama-3.1-70B) or a config.json path"
            ),
        )
    )
    device: DeviceArg = field(
        metadata=required(
            "a shipped device profile name, a profile YAML path, or a DeviceSpec",
            flag=Flag(names=("--device",), help="shipped device profile (e.g. h100_sxm) or a YAML path"),
        )
    )
    quantization: str | None = opt(
        None,
        "none, fp8 (W8A8 linear layers, as vLLM --quantization fp8), nvfp4 / modelopt_fp4 (NVFP4 linear "
        "layers) or mxfp4 (MXFP4 MoE experts); None: the config's own",
        flag=Flag(
            names=("--quantization",),
            help="fp8: W8A8 linear layers (fp8 weights, per-tensor scales, 16-bit activations; lm_head stays "
            "16-bit), as vLLM --quantization fp8 and ModelOpt FP8 run; nvfp4 (= modelopt_fp4): NVFP4 linear layers "
            "(W4A4 on fp4 tensor cores, weight-only elsewhere); mxfp4: MXFP4 MoE experts [default none: the "
            "config's own]",
            choices=QUANTIZATIONS,
        ),
    )
    kv_cache_dtype: str = opt(
        "auto",
        "KV cache element type: auto (the model's dtype), bf16, fp8 or nvfp4 (FP4 values + an fp8 scale per 16: "
        "0.5625 bytes per element; Blackwell only)",
        flag=Flag(
            names=("--kv-cache-dtype",),
            help="KV cache element type (the engines' fp8_e4m3 / fp8_e5m2 are fp8); nvfp4: 4-bit values + one 1-byte "
            "scale per 16 (0.5625 bytes per element), SGLang/vLLM --kv-cache-dtype nvfp4, TensorRT-LLM "
            "kv_cache_config.dtype nvfp4, Blackwell only [default auto: the model dtype]",
            choices=KV_CACHE_DTYPES,
            value_type="kv_cache_dtype",
        ),
    )
    fabric: FabricChoice | None = opt(None, "the inter-node fabric (None: the device profile's inter-node link)")
    partition: str | None = opt(
        None,
        'layers per stage: a rule or counts like "4,6,6,4" (None: the engine\'s)',
        flag=Flag(
            names=("--partition", "--pp-layer-partition"),
            help="uniform | vllm | sglang | trtllm | balanced (minimise the slowest stage) | explicit layer counts "
            "like 4,6,6,4, also as the engines write them (VLLM_PP_LAYER_PARTITION=4,6,6,4, "
            "SGLANG_PP_LAYER_PARTITION=4,6,6,4) [default: the engine's own rule: vllm, sglang or trtllm; vllm "
            "without an engine]",
        ),
    )
    use_cache: bool = opt(
        True,
        "read and write the on-disk trace cache (False: trace anew)",
        flag=Flag(names=("--no-cache",), help="bypass the on-disk trace cache", action="store_false"),
    )


@dataclass(frozen=True, kw_only=True)
class EngineLimitOptions:
    """An engine's memory flag (at most one), its context limit and its prefix cache."""

    gpu_memory_utilization: float | None = opt(None, "vLLM's --gpu-memory-utilization, a fraction in (0, 1]")
    mem_fraction_static: float | None = opt(None, "SGLang's --mem-fraction-static, a fraction in (0, 1]")
    kv_cache_free_gpu_memory_fraction: float | None = opt(
        None, "TensorRT-LLM's --kv-cache-free-gpu-memory-fraction, a fraction in (0, 1]"
    )
    max_model_len: int | None = opt(
        None, "longest request the engine accepts, tokens (vLLM --max-model-len; None: not set)"
    )
    prefix_caching: bool | None = opt(None, "prefix caching on or off (None: the engine's default)")


@dataclass(frozen=True, kw_only=True)
class ServingEngineOptions(EngineLimitOptions):
    """The serving engine whose scheduler decides each step, and its limits."""

    engine: str = opt("vllm", "the serving engine whose scheduler defaults and overheads apply (none: kernels only)")
    max_num_batched_tokens: int | None = opt(None, "token budget per step (None: the engine's default)")
    max_num_seqs: int | None = opt(None, "requests per step at most (None: the engine's default)")
    engine_profile: str | None = opt(
        None, "engine profile YAML (calibrate-serving --out): its overheads and limits replace the defaults"
    )
    engine_settings: dict[str, Any] | None = opt(
        None,
        "the engine's own settings by keyword, e.g. {'stream_interval': 30} for SGLang or TensorRT-LLM "
        "(simcast.engines.flags; None: the engine's defaults)",
    )

    def __post_init__(self) -> None:
        normalise_engine(self)


def normalise_engine(o: Any) -> None:
    """``engine=None`` on options ``o`` becomes :data:`~simcast.engines.NO_ENGINE` ("none"): past the
    API's entry point "no engine" has one spelling."""
    if getattr(o, "engine", NO_ENGINE) is None:
        object.__setattr__(o, "engine", NO_ENGINE)


def engine_limits(o: EngineLimitOptions) -> dict[str, float | int | str | bool]:
    """The ServingConfig fields an engine's memory flag, ``max_model_len`` and ``prefix_caching`` (vLLM
    ``--enable-prefix-caching``/``--no-enable-prefix-caching``, SGLang ``--disable-radix-cache``; None: the
    engine's default) set (none given: {})."""
    from simcast.inputs.limits import MAX_TOKENS

    given = {flag: getattr(o, kw) for _, flag, kw in MEM_FLAGS if getattr(o, kw) is not None}
    require(len(given) <= 1, "/".join(given), len(given), "give at most one engine memory fraction")
    out: dict[str, float | int | str | bool] = {}
    for flag, v in given.items():
        check_float(flag, v, 0.0, 1.0)
        require(v > 0, flag, v, "must be in (0, 1]")
        out.update(mem_fraction=v, mem_flag=flag)
    max_model_len, prefix_caching = o.max_model_len, o.prefix_caching
    check_int("--max-model-len", max_model_len, 1, MAX_TOKENS)
    if max_model_len:
        out["max_model_len"] = max_model_len
    require(
        prefix_caching is None or isinstance(prefix_caching, bool),
        "--enable-prefix-caching",
        prefix_caching,
        "True, False or None (the engine's default)",
    )
    if prefix_caching is not None:
        out["prefix_caching"] = prefix_caching
    return out


def engine_profile_for(name: str | None, engine: str, device: DeviceSpec, *, tp: int = 1, pp: int = 1) -> Any:
    """``--engine-profile``'s :class:`~simcast.engines.policy.EnginePolicy`, or None when not given; its
    module (and the overhead fit's) is imported only then (``tp``, ``pp``: the layout the fit is for)."""
    if not name:
        return None
    from simcast.serving.engine_profile import profile_for

    return profile_for(name, engine, device, tp=tp, pp=pp)
