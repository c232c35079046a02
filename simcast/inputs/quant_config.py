"""Strict reading of a HF ``config.json``'s ``quantization_config`` into a :class:`~simcast.core.quant.QuantSpec`."""

from __future__ import annotations

from simcast.core.errors import require
from simcast.core.quant import QuantSpec


def quant_spec(cfg: dict, model_dtype: str) -> QuantSpec | None:
    """``quantization_config`` -> weight formats; ``None`` when absent (weights in the model dtype)."""
    q = cfg.get("quantization_config")
    if q is None:
        return None
    require(isinstance(q, dict), "config.json:quantization_config", q, "must be an object")
    method = q.get("quant_method")
    if method == "fp8":
        fmt = q.get("fmt", "e4m3")  # MiniMax-M2 spells it with the torch dtype name
        require(fmt in ("e4m3", "float8_e4m3fn"), "config.json:quantization_config.fmt", fmt, "allowed: e4m3")
        block = q.get("weight_block_size")
        require(
            isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block),
            "config.json:quantization_config.weight_block_size",
            block,
            "must be two positive integers",
        )
        # DeepSeek-V3 / Qwen3-FP8: every linear except lm_head and the router is fp8 (modules_to_not_convert)
        return QuantSpec(method="fp8", expert_format="fp8_block", dense_format="fp8_block", block=(block[0], block[1]))
    if method == "mxfp4":
        skip = q.get("modules_to_not_convert", [])
        require(
            isinstance(skip, list), "config.json:quantization_config.modules_to_not_convert", skip, "must be a list"
        )
        # gpt-oss: only the expert weights are MXFP4; attention, router, embeddings and lm_head stay bf16
        dense = model_dtype if any("self_attn" in m for m in skip) else "mxfp4"
        return QuantSpec(method="mxfp4", expert_format="mxfp4", dense_format=dense)
    if method == "modelopt":
        return _modelopt(q, model_dtype)
    if method == "quark":
        return _quark(q, model_dtype)
    require(
        False,
        "config.json:quantization_config.quant_method",
        method,
        "supported: fp8 (block-scaled), mxfp4, modelopt (quant_algo NVFP4), quark (OCP MXFP4)",
    )
    return None


def _whole_attention(n: str) -> bool:
    """An exclude pattern that names the whole attention block (``*self_attn*``, ``model.layers.3.self_attn``)."""
    return n.rstrip("*").endswith("self_attn")


def _attention_formats(skip: list, model_dtype: str) -> tuple[str, str]:
    """``qkv_format`` / ``o_format`` of a checkpoint whose exclude list is ``skip`` ("": the layer's format)."""
    names = [n for n in skip if isinstance(n, str)]
    qkv = any(
        _whole_attention(n) or any(p in n for p in ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj")) for n in names
    )
    o = any(_whole_attention(n) or "o_proj" in n for n in names)
    return (model_dtype if qkv else "", model_dtype if o else "")


def _modelopt(q: dict, model_dtype: str) -> QuantSpec:
    """NVIDIA ModelOpt (``hf_quant_config.json``'s ``quantization`` block, or config.json's ``quant_method:
    modelopt``): ``quant_algo: NVFP4`` = fp4 e2m1 weights with an fp8 scale per ``group_size: 16`` values and
    fp4 activations (W4A4) in every linear layer but those in ``exclude_modules`` (lm_head; the DeepSeek
    checkpoints also the q/kv projections and the MTP layer)."""
    algo = q.get("quant_algo")
    require(algo == "NVFP4", "config.json:quantization_config.quant_algo", algo, "supported: NVFP4")
    require(
        q.get("group_size", 16) == 16, "config.json:quantization_config.group_size", q.get("group_size"), "allowed: 16"
    )
    skip = q.get("exclude_modules", [])
    require(isinstance(skip, list), "config.json:quantization_config.exclude_modules", skip, "must be a list")
    qkv, o = _attention_formats(skip, model_dtype)
    return QuantSpec(method="nvfp4", expert_format="nvfp4", dense_format="nvfp4", qkv_format=qkv, o_format=o)


def _quark(q: dict, model_dtype: str) -> QuantSpec:
    """AMD Quark OCP MXFP4 (``global_quant_config.weight``: ``dtype: fp4``, ``group_size: 32``, e8m0 scales):
    ``w_mxfp4_a_mxfp4`` checkpoints quantise the activations to MXFP4 too (``input_tensors.dtype: fp4``:
    W4A4); every linear layer but those in ``exclude`` (``*self_attn*``, ``*mlp.gate.*``, ``lm_head``)."""
    g = q.get("global_quant_config")
    require(isinstance(g, dict), "config.json:quantization_config.global_quant_config", g, "must be an object")
    assert isinstance(g, dict)
    w, a = g.get("weight") or {}, g.get("input_tensors") or {}
    require(
        isinstance(w, dict) and w.get("dtype") == "fp4" and w.get("group_size") == 32,
        "config.json:quantization_config.global_quant_config.weight",
        w,
        "supported: OCP MXFP4 (dtype fp4, group_size 32)",
    )
    fmt = "mxfp4_w4a4" if isinstance(a, dict) and a.get("dtype") == "fp4" else "mxfp4"
    skip = q.get("exclude", [])
    require(isinstance(skip, list), "config.json:quantization_config.exclude", skip, "must be a list")
    qkv, o = _attention_formats(skip, model_dtype)
    return QuantSpec(method="mxfp4", expert_format=fmt, dense_format=fmt, qkv_format=qkv, o_format=o)
