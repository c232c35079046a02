"""Strict loading of model configs (HF ``config.json``) and device profiles (YAML).

Every problem is one :class:`~simcast.core.errors.SimcastInputError` line naming the
field, the bad value and what is allowed. This is an edge module: it reads files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from simcast.core.errors import SimcastInputError, require
from simcast.core.specs import DTYPE_BYTES, DeviceSpec, Efficiency, LinkSpec, LinkTable, ModelSpec
from simcast.inputs.moe_config import MOE_ARCHITECTURES, architecture_fields

ROOT = Path(__file__).resolve().parents[2]  # the repository: models/ and device_profiles/ sit beside simcast/
SUPPORTED_ARCHITECTURES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                           "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", **MOE_ARCHITECTURES}
_HF_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16"}


def models_dir() -> Path:
    return Path(os.environ.get("SIMCAST_MODELS_DIR", ROOT / "models"))


def profiles_dir() -> Path:
    return Path(os.environ.get("SIMCAST_DEVICE_PROFILES_DIR", ROOT / "device_profiles"))


def shipped_models() -> list[str]:
    return sorted(str(p.parent.relative_to(models_dir())) for p in models_dir().glob("*/*/config.json"))


def shipped_devices() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


def _read_json(path: Path, field: str) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SimcastInputError(field, str(path), f"is not valid JSON (line {e.lineno}: {e.msg})") from None
    except OSError as e:
        raise SimcastInputError(field, str(path), f"cannot be read ({e.strerror})") from None
    require(isinstance(data, dict), field, str(path), "must hold a JSON object")
    return data


def resolve_model_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.is_dir():
        p = p / "config.json"
    if p.is_file():
        return p
    shipped = models_dir() / name_or_path / "config.json"
    if shipped.is_file():
        return shipped
    raise SimcastInputError("--model", name_or_path,
                            f"not a config.json path or a shipped model; shipped: {', '.join(shipped_models())}")


def load_model(name_or_path: str, dtype: str | None = None) -> ModelSpec:
    """ModelSpec from a shipped name (``Qwen/Qwen3-32B``), a folder or a ``config.json`` path."""
    path = resolve_model_path(name_or_path)
    cfg = _read_json(path, "--model")
    name = name_or_path if not Path(name_or_path).exists() else cfg.get("_name_or_path") or str(name_or_path)
    return model_from_hf_config(cfg, name=name, dtype=dtype)


def _get(cfg: dict, key: str, kind: type, default: Any = None) -> Any:
    v = cfg.get(key, default)
    field = f"config.json:{key}"
    require(v is not None, field, v, "is required")
    if kind is float:
        require(isinstance(v, (int, float)) and not isinstance(v, bool), field, v, "must be a number")
        return float(v)
    if kind is int:
        require(isinstance(v, int) and not isinstance(v, bool) and v > 0, field, v, "must be a positive integer")
    if kind is bool:
        require(isinstance(v, bool), field, v, "must be true or false")
    return v


def model_from_hf_config(cfg: dict, *, name: str, dtype: str | None = None) -> ModelSpec:
    archs = cfg.get("architectures") or []
    arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None:
        mt = cfg.get("model_type")
        arch = next((a for a, t in SUPPORTED_ARCHITECTURES.items() if t == mt), None)
    require(arch is not None, "config.json:architectures", archs or cfg.get("model_type"),
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    family = SUPPORTED_ARCHITECTURES[arch]
    hidden = _get(cfg, "hidden_size", int)
    heads = _get(cfg, "num_attention_heads", int)
    head_dim = cfg.get("head_dim") or hidden // heads
    torch_dtype = dtype or _HF_DTYPES.get(str(cfg.get("torch_dtype", "bfloat16")), None)
    require(torch_dtype in DTYPE_BYTES, "dtype", dtype or cfg.get("torch_dtype"), f"allowed: {sorted(DTYPE_BYTES)}")
    fields: dict[str, Any] = dict(
        name=name, architecture=arch, hidden_size=hidden,
        num_layers=_get(cfg, "num_hidden_layers", int), num_heads=heads,
        num_kv_heads=_get(cfg, "num_key_value_heads", int, heads), head_dim=_get({"head_dim": head_dim}, "head_dim", int),
        intermediate_size=_get(cfg, "intermediate_size", int), vocab_size=_get(cfg, "vocab_size", int),
        tie_word_embeddings=_get(cfg, "tie_word_embeddings", bool, False),
        rms_norm_eps=_get(cfg, "rms_norm_eps", float, 1e-6), rope_theta=_get(cfg, "rope_theta", float, 10000.0),
        qk_norm=family == "qwen3",
        attention_bias=True if family == "qwen2" else _get(cfg, "attention_bias", bool, False),
        dtype=torch_dtype)
    fields.update(architecture_fields(cfg, family, torch_dtype))  # MoE / MLA / layer types / quantization
    return ModelSpec(**fields)


# ------------------------------------------------------------------- devices
_COLLECTIVE_SCHEMA: dict[str, Any] = {"kind": str, "gpus": int, "latency_s": float, "bus_bw_bytes_per_s": float}
_PROFILE_SCHEMA: dict[str, Any] = {
    "name": str, "description": str,
    "compute": {"matmul_flops_per_s": "dtype_map", "vector_flops_per_s": "dtype_map"},
    "memory": {"hbm_bytes": int, "hbm_bw_bytes_per_s": float},
    "efficiency": {"matmul": float, "vector": float, "memory": float, "launch_overhead_s": float,
                   "matmul_half_m_ridge?": float, "matmul_half_n?": float, "matmul_half_k?": float,
                   "vector_memory?": float, "vector_launch_overhead_s?": float},
    "links": {"devices_per_node": int,
              "intra_node": {"name": str, "bw_bytes_per_s": float, "latency_s": float, "efficiency": float,
                             "collectives?": [_COLLECTIVE_SCHEMA], "mesh_links?": int},
              "inter_node": {"name": str, "bw_bytes_per_s": float, "latency_s": float, "efficiency": float,
                             "collectives?": [_COLLECTIVE_SCHEMA], "mesh_links?": int}},
    "calibration?": dict,  # provenance of fitted numbers (free-form), written by `simcast calibrate`
}


def _check(node: Any, schema: Any, where: str) -> Any:
    if schema == "dtype_map":
        require(isinstance(node, dict) and node, where, node, f"must map dtypes ({', '.join(DTYPE_BYTES)}) to FLOP/s")
        out = {}
        for k, v in node.items():
            require(k in DTYPE_BYTES, f"{where}.{k}", k, f"allowed dtypes: {', '.join(DTYPE_BYTES)}")
            out[k] = _check(v, float, f"{where}.{k}")
            require(out[k] > 0, f"{where}.{k}", v, "must be a positive number")
        return out
    if isinstance(schema, list):  # a list of items of one schema
        require(isinstance(node, list), where, node, "must be a list")
        return [_check(item, schema[0], f"{where}[{i}]") for i, item in enumerate(node)]
    if isinstance(schema, dict):
        require(isinstance(node, dict), where, node, "must be a mapping")
        allowed = {k.rstrip("?") for k in schema}
        for k in node:
            require(k in allowed, f"{where}.{k}".lstrip("."), k, f"unknown key; allowed: {', '.join(sorted(allowed))}")
        out = {}
        for k, sub in schema.items():
            key = k.rstrip("?")
            if key not in node:
                require(k.endswith("?"), f"{where}.{key}".lstrip("."), None, "is required")
                continue
            out[key] = _check(node[key], sub, f"{where}.{key}".lstrip("."))
        return out
    if schema is float:
        if isinstance(node, str):  # YAML 1.1 reads 989.4e12 (no exponent sign) as a string
            try:
                node = float(node)
            except ValueError:
                pass
        require(isinstance(node, (int, float)) and not isinstance(node, bool), where, node, "must be a number")
        return float(node)
    if schema is int:
        require(isinstance(node, (int, float)) and not isinstance(node, bool) and float(node) == int(node),
                where, node, "must be an integer")
        return int(node)
    require(isinstance(node, schema), where, node, f"must be a {schema.__name__}")
    return node


def read_yaml(p: Path, what: str) -> Any:
    """Parse a YAML file; a syntax error becomes one line naming the file and the line."""
    try:
        return yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SimcastInputError(f"{what} {p.name}", "YAML",
                                f"is malformed at line {mark.line + 1 if mark else '?'}: {getattr(e, 'problem', e)}") from None


def load_device(name_or_path: str, devices_per_node: int | None = None) -> DeviceSpec:
    """DeviceSpec from a shipped profile name (``h100_sxm``) or a YAML path."""
    p = Path(name_or_path)
    if not p.is_file():
        p = profiles_dir() / f"{name_or_path}.yaml"
    require(p.is_file(), "--device", name_or_path, f"not a YAML path or a shipped profile; shipped: {', '.join(shipped_devices())}")
    d = _check(read_yaml(p, "device profile"), _PROFILE_SCHEMA, "")
    return device_from_dict(d, devices_per_node)


def device_from_dict(d: dict, devices_per_node: int | None = None) -> DeviceSpec:
    ln = d["links"]
    dpn = devices_per_node if devices_per_node is not None else ln["devices_per_node"]
    require(dpn >= 1, "--devices-per-node", dpn, "must be >= 1")
    links = LinkTable(devices_per_node=dpn, intra_node=LinkSpec(**ln["intra_node"]),
                      inter_node=LinkSpec(**ln["inter_node"]))
    require(d["memory"]["hbm_bytes"] > 0, "memory.hbm_bytes", d["memory"]["hbm_bytes"], "must be > 0")
    require(d["memory"]["hbm_bw_bytes_per_s"] > 0, "memory.hbm_bw_bytes_per_s", d["memory"]["hbm_bw_bytes_per_s"], "must be > 0")
    return DeviceSpec(name=d["name"], description=d["description"],
                      matmul_flops_per_s=d["compute"]["matmul_flops_per_s"],
                      vector_flops_per_s=d["compute"]["vector_flops_per_s"],
                      hbm_bytes=d["memory"]["hbm_bytes"], hbm_bw_bytes_per_s=d["memory"]["hbm_bw_bytes_per_s"],
                      efficiency=Efficiency(**d["efficiency"]), links=links)
