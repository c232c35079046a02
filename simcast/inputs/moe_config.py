"""Strict reading of the MoE architectures' keys (experts, MLA, attention pattern) of a HF ``config.json``.

The ``quantization_config`` block is read by :mod:`simcast.inputs.quant_config`.

:func:`architecture_fields` returns the extra :class:`~simcast.core.model_spec.ModelSpec`
keyword arguments of one architecture family; every problem is one
:class:`~simcast.core.errors.SimcastInputError` line naming the key.
Key names follow the hub configs of Mixtral (``MixtralForCausalLM``), Qwen3-MoE
(``Qwen3MoeForCausalLM``), DeepSeek-V3 (``DeepseekV3ForCausalLM``) and gpt-oss
(``GptOssForCausalLM``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simcast.core.errors import require
from simcast.core.mla import MLASpec
from simcast.core.moe import MoESpec
from simcast.inputs.limits import MAX_EXPERTS, MAX_HIDDEN, MAX_TOKENS
from simcast.inputs.quant_config import quant_spec

MOE_ARCHITECTURES = {
    "MixtralForCausalLM": "mixtral",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
}


def _int(cfg: dict, key: str, default: Any = None, minimum: int = 1, maximum: int = MAX_HIDDEN) -> int:
    """``cfg[key]`` as an integer in ``[minimum, maximum]`` (sizes default to the model-dimension bound)."""
    v = cfg.get(key, default)
    require(
        isinstance(v, int) and not isinstance(v, bool) and minimum <= v <= maximum,
        f"config.json:{key}",
        v,
        f"must be an integer in [{minimum}, {maximum}]",
    )
    return v


def _mixtral(cfg: dict) -> dict:
    return {
        "moe": MoESpec(
            num_experts=_int(cfg, "num_local_experts", maximum=MAX_EXPERTS),
            top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=_int(cfg, "intermediate_size"),
        )
    }


def _qwen3_moe(cfg: dict) -> dict:
    require(
        cfg.get("decoder_sparse_step", 1) == 1,
        "config.json:decoder_sparse_step",
        cfg.get("decoder_sparse_step"),
        "only 1 (every layer sparse) is supported",
    )
    require(
        not cfg.get("mlp_only_layers"),
        "config.json:mlp_only_layers",
        cfg.get("mlp_only_layers"),
        "only [] (no dense layers) is supported",
    )
    return {
        "qk_norm": True,
        "moe": MoESpec(
            num_experts=_int(cfg, "num_experts", maximum=MAX_EXPERTS),
            top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=_int(cfg, "moe_intermediate_size"),
        ),
    }


def _deepseek_v3(cfg: dict) -> dict:
    require(
        cfg.get("moe_layer_freq", 1) == 1,
        "config.json:moe_layer_freq",
        cfg.get("moe_layer_freq"),
        "only 1 is supported",
    )
    shared = _int(cfg, "n_shared_experts", 0, minimum=0, maximum=MAX_EXPERTS)
    moe = MoESpec(
        num_experts=_int(cfg, "n_routed_experts", maximum=MAX_EXPERTS),
        top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
        expert_intermediate=_int(cfg, "moe_intermediate_size"),
        num_shared_experts=shared,
        shared_intermediate=_int(cfg, "moe_intermediate_size") if shared else 0,
        first_k_dense=_int(cfg, "first_k_dense_replace", 0, minimum=0),
        router_bias=cfg.get("topk_method") == "noaux_tc",  # e_score_correction_bias
        expert_groups=_int({"n_group": cfg.get("n_group") or 1}, "n_group", maximum=MAX_EXPERTS),
        topk_groups=_int({"topk_group": cfg.get("topk_group") or 1}, "topk_group", maximum=MAX_EXPERTS),
    )
    q_lora = cfg.get("q_lora_rank")
    mla = MLASpec(
        q_lora_rank=0 if q_lora is None else _int(cfg, "q_lora_rank"),
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
        v_head_dim=_int(cfg, "v_head_dim"),
    )
    return {
        "moe": moe,
        "mla": mla,
        "head_dim": mla.v_head_dim,
        "num_mtp_layers": _int(cfg, "num_nextn_predict_layers", 0, minimum=0),
    }


def _gpt_oss(cfg: dict) -> dict:
    types = cfg.get("layer_types") or []
    require(
        isinstance(types, list) and all(isinstance(t, str) for t in types),
        "config.json:layer_types",
        types,
        "must be a list of strings",
    )
    k = cfg.get("num_experts_per_tok", cfg.get("experts_per_token"))
    return {
        "moe": MoESpec(
            num_experts=_int(cfg, "num_local_experts", maximum=MAX_EXPERTS),
            top_k=_int({"num_experts_per_tok": k}, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=_int(cfg, "intermediate_size"),
            expert_bias=True,
            router_bias=True,
        ),
        "layer_types": tuple(types),
        "sliding_window": _int(cfg, "sliding_window", 0, minimum=0, maximum=MAX_TOKENS),
        "attention_sinks": True,
        "o_proj_bias": bool(cfg.get("attention_bias", True)),
    }


_FAMILIES: dict[str, Callable[[dict], dict]] = {
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek_v3,
    "gpt_oss": _gpt_oss,
}


def architecture_fields(cfg: dict, family: str, model_dtype: str) -> dict:
    """Extra ModelSpec keyword arguments of ``family`` (empty for the dense families)."""
    out = _FAMILIES[family](cfg) if family in _FAMILIES else {}
    q = quant_spec(cfg, model_dtype)
    if q is not None:
        out["quant"] = q
    return out
