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
    require(False, "config.json:quantization_config.quant_method", method, "supported: fp8 (block-scaled), mxfp4")
    return None
