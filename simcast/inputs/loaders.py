"""Strict loading of model configs (HF ``config.json``) and device profiles (YAML).

Every problem is one :class:`~simcast.core.errors.SimcastInputError` line naming the
field, the bad value and what is allowed. This is an edge module: it reads files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from simcast.core.device import DeviceSpec, Efficiency, LinkSpec, LinkTable
from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.errors import SimcastInputError, require
from simcast.core.model_spec import ModelSpec
from simcast.core.quant import QuantSpec
from simcast.inputs.aliases import device_profile_name, model_alias, models_dir
from simcast.inputs.engine_kernels_yaml import engine_kernels as engine_kernels
from simcast.inputs.files import is_dir, is_file, load_json, load_yaml, loads_yaml, package_data_dir
from simcast.inputs.limits import (
    MAX_HEADS,
    MAX_HIDDEN,
    MAX_LAYERS,
    MAX_VOCAB,
)
from simcast.inputs.moe_config import MOE_ARCHITECTURES, architecture_fields, text_config
from simcast.inputs.profile_schema import PROFILE_SCHEMA
from simcast.inputs.schema import Int, Num, check

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    **MOE_ARCHITECTURES,
}
_HF_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16"}


def profiles_dir() -> Path:
    """The shipped device profiles (package data ``simcast/data/device_profiles``; the repository's
    ``device_profiles`` links there); ``SIMCAST_DEVICE_PROFILES_DIR`` overrides it."""
    env = os.environ.get("SIMCAST_DEVICE_PROFILES_DIR")
    return Path(env) if env else package_data_dir("device_profiles")


def shipped_models() -> list[str]:
    return sorted(str(p.parent.relative_to(models_dir())) for p in models_dir().glob("*/*/config.json"))


def shipped_devices() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def resolve_model_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if is_dir(p, "--model"):
        p = p / "config.json"
    if is_file(p, "--model"):
        return p
    shipped = models_dir() / name_or_path / "config.json"
    if _MODEL_ID.fullmatch(name_or_path) and is_file(shipped, "--model"):
        return shipped
    base = model_alias(name_or_path)  # an Instruct/Chat name with the base's shapes (inputs/aliases.py)
    if base is not None and is_file(models_dir() / base / "config.json", "--model"):
        return models_dir() / base / "config.json"
    raise SimcastInputError(
        "--model", name_or_path, f"not a config.json path or a shipped model; shipped: {', '.join(shipped_models())}"
    )


QUANTIZATIONS = ("none", "fp8", "nvfp4", "modelopt_fp4", "mxfp4")
"""``--quantization`` choices (vLLM's flag of the same name): ``fp8`` = every linear layer but
``lm_head`` (and a MoE router) runs W8A8 with per-tensor scales — fp8 weights, activations
quantised to fp8 on the way into each GEMM, bf16/fp16 everywhere else — as vLLM ``--quantization
fp8`` and NVIDIA ModelOpt FP8 checkpoints (TensorRT-LLM) run it. ``nvfp4`` (engine name ``modelopt_fp4``) =
every linear layer but ``lm_head`` and the router in NVFP4 (fp4 weights, an fp8 scale per 16, W4A4 where the
device has fp4 tensor cores), as an NVIDIA ModelOpt NVFP4 checkpoint holds them. ``mxfp4`` = the routed and
shared experts in OCP MXFP4 (fp4 weights, an e8m0 scale per 32; weight-only), the other layers unquantised, as
vLLM's ``Mxfp4Config`` applies it to MoE layers only (gpt-oss)."""

_ENGINE_ALIASES = {"modelopt_fp4": "nvfp4"}


def _flag_spec(model: ModelSpec, quantization: str) -> QuantSpec:
    """The :class:`QuantSpec` of ``--quantization`` (checked by :func:`with_quantization`)."""
    name = _ENGINE_ALIASES.get(quantization, quantization)
    src = f"--quantization {quantization}"
    if name == "mxfp4":
        require(
            model.moe is not None, "--quantization", quantization, "mxfp4 quantises MoE experts; the model has none"
        )
        return QuantSpec(method="mxfp4", expert_format="mxfp4", dense_format=model.dtype, source=src)
    return QuantSpec(method=name, expert_format=name, dense_format=name, source=src)


def with_quantization(model: ModelSpec, quantization: str | None) -> ModelSpec:
    """``model`` with ``--quantization`` applied (``None``/``none``: unchanged).

    A checkpoint that is already quantised by its ``quantization_config`` keeps its own formats: naming its own
    method again is accepted unchanged (as vLLM's ``ModelConfig._verify_quantization`` accepts a ``--quantization``
    equal to the checkpoint's ``quant_method``, and launch scripts pass ``--quantization fp8`` /
    ``modelopt_fp4`` with FP8 / NVFP4 checkpoints); asking for another is an error rather than a silent override.
    """
    if quantization in (None, "none"):
        return model
    require(quantization in QUANTIZATIONS, "--quantization", quantization, f"allowed: {', '.join(QUANTIZATIONS)}")
    if model.quant is not None and model.quant.method == _ENGINE_ALIASES.get(quantization, quantization):
        return model
    require(
        model.quant is None,
        "--quantization",
        quantization,
        f"{model.name} is already quantized by its config ({model.quant.method if model.quant else ''}); drop the flag",
    )
    require(
        model.dtype in ("bf16", "fp16"),
        "--quantization",
        quantization,
        f"needs a bf16/fp16 model (activations stay 16-bit); got --dtype {model.dtype}",
    )
    return replace(model, quant=_flag_spec(model, quantization))


def _with_hf_quant_config(cfg: dict, path: Path) -> dict:
    """``cfg`` with a ModelOpt ``hf_quant_config.json`` beside it read as its ``quantization_config`` (``quant_method:
    modelopt`` plus the file's ``quantization`` block) when config.json has none (older ModelOpt exports)."""
    if "quantization_config" in cfg or not path.is_file():
        return cfg
    h = load_json(path, "hf_quant_config.json")
    q = h.get("quantization") if isinstance(h, dict) else None
    require(isinstance(q, dict), "hf_quant_config.json:quantization", q, "must be an object")
    assert isinstance(q, dict)
    return {**cfg, "quantization_config": {"quant_method": "modelopt", **q}}


def load_model(name_or_path: str, dtype: str | None = None, quantization: str | None = None) -> ModelSpec:
    """ModelSpec from a shipped name (``Qwen/Qwen3-32B``), a folder or a ``config.json`` path;
    ``quantization`` as :func:`with_quantization`."""
    path = resolve_model_path(name_or_path)
    cfg = load_json(path, "config.json")
    require(isinstance(cfg, dict), "config.json", str(path), "must hold a JSON object")
    cfg = _with_hf_quant_config(cfg, path.parent / "hf_quant_config.json")
    shipped = path != Path(name_or_path) and path != Path(name_or_path) / "config.json"
    own = cfg.get("_name_or_path")
    if shipped:
        name = name_or_path
    elif isinstance(own, str) and _MODEL_ID.fullmatch(own):
        name = own
    else:  # no usable id in the file (often a local path, or anything at all): the path given stands for it
        name = str(name_or_path)
    return with_quantization(model_from_hf_config(cfg, name=name, dtype=dtype), quantization)


_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")
"""A Hugging Face model id (``org/name``; letters, digits, ``.``, ``_``, ``-``; at most 96 characters each,
as the Hub allows). A config.json's ``_name_or_path`` names the model in headers and in ``--emit`` command
lines only when it is one: it is free text (``x; touch PWNED #`` would otherwise run when a launch line
is pasted, and an escape sequence would reach the terminal)."""


_BOUNDS: dict[str, Any] = {
    "hidden_size": Int(1, MAX_HIDDEN),
    "intermediate_size": Int(1, MAX_HIDDEN),
    "head_dim": Int(1, MAX_HIDDEN),
    "num_attention_heads": Int(1, MAX_HEADS),
    "num_key_value_heads": Int(1, MAX_HEADS),
    "num_hidden_layers": Int(1, MAX_LAYERS),
    "vocab_size": Int(1, MAX_VOCAB),
    "rms_norm_eps": Num(0.0, 1.0, lo_open=True),
    "rope_theta": Num(0.0, 1e15, lo_open=True),
}


def _get(cfg: dict, key: str, kind: Any, default: Any = None) -> Any:
    """``cfg[key]`` (or ``default`` when absent or null) checked against ``kind`` (a type or a bound)."""
    v = cfg.get(key)
    v = default if v is None else v
    field = f"config.json:{key}"
    require(v is not None, field, v, "is required")
    if kind is bool:
        require(isinstance(v, bool), field, v, "must be true or false")
        return v
    return check(v, _BOUNDS.get(key, kind), field)


# Keys of a HF config that change what the model computes but that simcast's dense Llama/Qwen/Mistral
# decoder does not model: (allowed value test, what is allowed). A key that is absent or null is fine.
# Everything else (rope_scaling, max_position_embeddings, token ids, dropout, ...) leaves the cost of
# a forward step unchanged and is ignored (docs/inputs.md, "Models").
_MOE_KEYS = (
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
)
_UNMODELLED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "mlp_bias": (lambda v: v is False, "MLP biases are not modelled (allowed: false)"),
    "hidden_act": (lambda v: v == "silu", "the MLP is modelled as SiLU-and-mul (allowed: silu)"),
}
_UNMODELLED_DENSE: dict[str, tuple[Callable[[Any], bool], str]] = {  # the MoE families read these themselves
    "quantization_config": (
        lambda v: False,
        "quantized checkpoints are not read for a dense architecture; "
        "use the unquantized config and --quantization fp8",
    ),
    **{
        k: ((lambda v: v == 0), "mixture-of-experts layers are not modelled for a dense architecture")
        for k in _MOE_KEYS
    },
}
_WINDOWED_FAMILIES = ("mistral", "mixtral")  # HF applies sliding_window when set; Qwen only with use_sliding_window


def _check_modelled(cfg: dict, family: str) -> None:
    """Refuse config keys whose value would make the real model compute something simcast does not."""
    dense = family not in MOE_ARCHITECTURES.values()
    for key, (ok, allowed) in {**_UNMODELLED, **(_UNMODELLED_DENSE if dense else {})}.items():
        v = cfg.get(key)
        require(v is None or ok(v), f"config.json:{key}", v, allowed)
    if family in ("gpt_oss", "deepseek_v3", "llama4"):  # gpt-oss/Llama-4 model their local layers; V3 has none
        return
    window = cfg.get("sliding_window")
    windowed = window is not None and (family in _WINDOWED_FAMILIES or cfg.get("use_sliding_window") is True)
    require(
        not windowed,
        "config.json:sliding_window",
        window,
        "sliding-window attention is not modelled for this architecture; set it to null for full attention",
    )


def model_from_hf_config(cfg: dict, *, name: str, dtype: str | None = None) -> ModelSpec:
    archs = cfg.get("architectures") or []
    require(
        isinstance(archs, list) and all(isinstance(a, str) for a in archs),
        "config.json:architectures",
        archs,
        "must be a list of class names",
    )
    arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None:
        mt = cfg.get("model_type")
        arch = next((a for a, t in SUPPORTED_ARCHITECTURES.items() if t == mt), None)
    if arch is None:
        raise SimcastInputError(
            "config.json:architectures",
            archs or cfg.get("model_type"),
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}",
        )
    family = SUPPORTED_ARCHITECTURES[arch]
    cfg = text_config(cfg)
    _check_modelled(cfg, family)
    hidden = _get(cfg, "hidden_size", int)
    heads = _get(cfg, "num_attention_heads", int)
    if cfg.get("head_dim") is None:  # HF's default when the key is absent or null
        require(
            hidden % heads == 0,
            "config.json:hidden_size",
            hidden,
            f"must be a multiple of num_attention_heads={heads} when head_dim is not given",
        )
        head_dim = hidden // heads
    else:
        head_dim = _get(cfg, "head_dim", int)
    hf_dtype = cfg.get("torch_dtype", "bfloat16")
    torch_dtype = dtype or (_HF_DTYPES.get(hf_dtype) if isinstance(hf_dtype, str) else None)
    if torch_dtype not in DTYPE_BYTES:
        raise SimcastInputError(
            "config.json:torch_dtype" if dtype is None else "dtype",
            dtype or hf_dtype,
            f"allowed: {', '.join(sorted(_HF_DTYPES))}",
        )
    fields: dict[str, Any] = dict(
        name=name,
        architecture=arch,
        hidden_size=hidden,
        num_layers=_get(cfg, "num_hidden_layers", int),
        num_heads=heads,
        num_kv_heads=_get(cfg, "num_key_value_heads", int, heads),
        head_dim=head_dim,
        intermediate_size=_get(cfg, "intermediate_size", int),
        vocab_size=_get(cfg, "vocab_size", int),
        tie_word_embeddings=_get(cfg, "tie_word_embeddings", bool, False),
        rms_norm_eps=_get(cfg, "rms_norm_eps", float, 1e-6),
        rope_theta=_get(cfg, "rope_theta", float, 10000.0),
        qk_norm=family == "qwen3",
        attention_bias=True if family == "qwen2" else _get(cfg, "attention_bias", bool, False),
        dtype=torch_dtype,
    )
    fields.update(architecture_fields(cfg, family, torch_dtype))  # MoE / MLA / layer types / quantization
    return ModelSpec(**fields)


# ------------------------------------------------------------------- devices


def read_yaml(p: Path, what: str) -> Any:
    """A YAML file through the one checked loader (:func:`simcast.inputs.files.load_yaml`)."""
    return load_yaml(p, what)


def load_device(name_or_path: str, devices_per_node: int | None = None) -> DeviceSpec:
    """DeviceSpec from a shipped profile name (``h100_sxm``) or a YAML path."""
    p = profile_path(name_or_path)
    require(
        is_file(p, "--device"),
        "--device",
        name_or_path,
        f"not a YAML path or a shipped profile; shipped: {', '.join(shipped_devices())}",
    )
    d = check(load_yaml(p, "device profile"), PROFILE_SCHEMA, "")
    require(
        d["name"] == p.stem,
        "name",
        d["name"],
        f"must equal the file name without .yaml: {p.stem} (in {p.name}; or rename the file to {d['name']}.yaml)",
    )
    return device_from_dict(d, devices_per_node)


def profile_path(name_or_path: str) -> Path:
    """The YAML file of a device profile: ``name_or_path`` itself when it is a file, else the shipped
    profile of that name (which may not exist: :func:`load_device` says so)."""
    if is_file(name_or_path, "--device"):
        return Path(name_or_path)
    exact = profiles_dir() / f"{name_or_path}.yaml"
    if is_file(exact, "--device") or "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return exact
    return profiles_dir() / f"{device_profile_name(name_or_path)}.yaml"  # H200, GB300, gb200-nvl72, ...


def shipped_profile_path(name: str, field: str) -> Path:
    """The shipped profile called ``name`` (never a path: a measured CSV's device column names only these)."""
    ok = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", name) is not None
    p = profiles_dir() / f"{name}.yaml"
    require(
        ok and is_file(p, field),
        field,
        name,
        f"not a shipped profile ({', '.join(shipped_devices())}); to predict on a profile file give --device PATH",
    )
    return p


def device_from_text(text: str, field: str) -> DeviceSpec:
    """A profile written in memory (``calibrate --out``), checked exactly as :func:`load_device` checks a
    file, so a profile that would not load never replaces one on disk."""
    return device_from_dict(check(loads_yaml(text, field), PROFILE_SCHEMA, ""))


def device_from_dict(d: dict, devices_per_node: int | None = None) -> DeviceSpec:
    ln = d["links"]
    dpn = devices_per_node if devices_per_node is not None else ln["devices_per_node"]
    require(dpn >= 1, "--devices-per-node", dpn, "must be >= 1")
    links = LinkTable(
        devices_per_node=dpn, intra_node=LinkSpec(**ln["intra_node"]), inter_node=LinkSpec(**ln["inter_node"])
    )
    mem = d["memory"]
    require(mem["hbm_bytes"] > 0, "memory.hbm_bytes", mem["hbm_bytes"], "must be > 0")
    require(mem["hbm_bw_bytes_per_s"] > 0, "memory.hbm_bw_bytes_per_s", mem["hbm_bw_bytes_per_s"], "must be > 0")
    return DeviceSpec(
        name=d["name"],
        description=d["description"],
        matmul_flops_per_s=d["compute"]["matmul_flops_per_s"],
        vector_flops_per_s=d["compute"]["vector_flops_per_s"],
        hbm_bytes=d["memory"]["hbm_bytes"],
        hbm_bw_bytes_per_s=d["memory"]["hbm_bw_bytes_per_s"],
        efficiency=Efficiency(**d["efficiency"]),
        links=links,
        engines={e: engine_kernels(e, sec) for e, sec in d.get("engines", {}).items()},
        reported_name=d.get("reported_name", ""),
    )
