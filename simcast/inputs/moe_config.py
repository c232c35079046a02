"""Strict reading of the MoE architectures' keys (experts, MLA, attention pattern) of a HF ``config.json``.

The ``quantization_config`` block is read by :mod:`simcast.inputs.quant_config`.

:func:`architecture_fields` returns the extra :class:`~simcast.core.model_spec.ModelSpec`
keyword arguments of one architecture family; every problem is one
:class:`~simcast.core.errors.SimcastInputError` line naming the key.
Key names follow the hub configs of Mixtral (``MixtralForCausalLM``), Qwen3-MoE
(``Qwen3MoeForCausalLM``), DeepSeek-V3 (``DeepseekV3ForCausalLM``), gpt-oss
(``GptOssForCausalLM``), GLM-4.5/4.6 (``Glm4MoeForCausalLM``) and MiniMax-M2 (``MiniMaxM2ForCausalLM``).

Partial RoPE (GLM's ``partial_rotary_factor`` 0.5, MiniMax-M2's ``rotary_dim`` 64) is costed as a rope over
the full head (an elementwise op; the over-count is a fraction of a per-cent of a step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simcast.core.errors import require
from simcast.core.linear_attention import LinearAttentionSpec
from simcast.core.mla import MLASpec
from simcast.core.moe import MoESpec
from simcast.inputs.limits import MAX_EXPERTS, MAX_HIDDEN, MAX_TOKENS
from simcast.inputs.quant_config import quant_spec

MOE_ARCHITECTURES = {
    "MixtralForCausalLM": "mixtral",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
    "Glm4MoeForCausalLM": "glm4_moe",
    "MiniMaxM2ForCausalLM": "minimax_m2",
    "Llama4ForConditionalGeneration": "llama4",
    "Qwen3NextForCausalLM": "qwen3_next",
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


def text_config(cfg: dict) -> dict:
    """The language model's keys of a multimodal config (Llama-4's ``text_config``; the vision tower is not
    modelled), with the top-level ``architectures``, ``torch_dtype`` and ``quantization_config``; else ``cfg``."""
    text = cfg.get("text_config")
    if not isinstance(text, dict):
        return cfg
    top = {k: cfg[k] for k in ("architectures", "torch_dtype", "quantization_config") if cfg.get(k) is not None}
    return {**text, **top, "_encoder_params": vision_params(cfg)}


def vision_params(cfg: dict) -> int:
    """Parameters of Llama-4's vision tower and projector from ``vision_config`` (transformers
    ``modeling_llama4.py``): patch linear ``c·p²·h``; class and ``(image/p)² + 1`` position embeddings; pre/post
    LayerNorms; per layer q/k/v/o with biases, a GELU MLP ``h -> i -> h`` with biases and two LayerNorms; the
    pixel-shuffle MLP ``i -> projector_input_dim -> projector_output_dim`` and the ``vision_output_dim -> text
    hidden`` projector (no biases). 0 without a ``vision_config``."""
    v = cfg.get("vision_config")
    if not isinstance(v, dict):
        return 0
    h, i, p = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "patch_size")
    side = _int(v, "image_size") // p
    layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h
    stem = _int(v, "num_channels") * p * p * h + h + (side * side + 1) * h + 4 * h
    shuffle = i * _int(v, "projector_input_dim") + _int(v, "projector_input_dim") * _int(v, "projector_output_dim")
    projector = _int(v, "vision_output_dim") * _int(cfg.get("text_config") or {}, "hidden_size")
    return _int(v, "num_hidden_layers") * layer + stem + shuffle + projector


def _llama4(cfg: dict) -> dict:
    """Llama-4 text model (transformers ``Llama4TextConfig``, vLLM ``llama4.py``).

    MoE every ``interleave_moe_layer_step``-th layer (``num_local_experts`` of width ``intermediate_size``,
    top-``num_experts_per_tok``, plus one shared expert of the same width); dense layers of width
    ``intermediate_size_mlp``. Attention: ``no_rope_layers`` (empty -> HF's default: every
    ``no_rope_layer_interval``-th layer, default 4, is NoPE) mark NoPE layers, which attend globally; the
    RoPE layers use chunked local attention of ``attention_chunk_size`` tokens. The weightless L2 QK-norm of
    ``use_qk_norm`` is not costed (an elementwise op on q and k).
    """
    n = _int(cfg, "num_hidden_layers")
    chunk = cfg.get("attention_chunk_size")
    nope = cfg.get("no_rope_layers") or []
    interval = _int(cfg, "no_rope_layer_interval", 4)
    if not nope:
        nope = [int((i + 1) % interval != 0) for i in range(n)]  # 1 = uses RoPE (HF's convention)
    require(
        isinstance(nope, list) and len(nope) == n and all(v in (0, 1) for v in nope),
        "config.json:no_rope_layers",
        nope,
        f"must be {n} entries of 0 or 1",
    )
    types = tuple("chunked_attention" if (chunk and r) else "full_attention" for r in nope)
    width = _int(cfg, "intermediate_size")
    return {
        "intermediate_size": _int(cfg, "intermediate_size_mlp", width),
        "moe": MoESpec(
            num_experts=_int(cfg, "num_local_experts", maximum=MAX_EXPERTS),
            top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=width,
            num_shared_experts=1,
            shared_intermediate=width,
            layer_step=_int(cfg, "interleave_moe_layer_step", 1),
        ),
        "layer_types": types if "chunked_attention" in types else (),
        "attention_chunk_size": _int(cfg, "attention_chunk_size", maximum=MAX_TOKENS) if chunk else 0,
        "encoder_params": cfg.get("_encoder_params", 0),
    }


def _qwen3_next(cfg: dict) -> dict:
    """Qwen3-Next (transformers ``Qwen3NextConfig``): every ``full_attention_interval``-th layer is gated full
    attention (q_proj also yields a sigmoid output gate; per-head QK-norm), the others Gated DeltaNet linear
    attention; every layer MoE with one sigmoid-gated shared expert (its 1-wide gate is not counted)."""
    require(
        cfg.get("decoder_sparse_step", 1) == 1 and not cfg.get("mlp_only_layers"),
        "config.json:decoder_sparse_step",
        cfg.get("decoder_sparse_step"),
        "only every layer sparse (decoder_sparse_step 1, mlp_only_layers []) is supported",
    )
    n, every = _int(cfg, "num_hidden_layers"), _int(cfg, "full_attention_interval", 4)
    shared = _int(cfg, "shared_expert_intermediate_size", 0, minimum=0)
    return {
        "qk_norm": True,
        "attn_output_gate": True,
        "layer_types": tuple("full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)),
        "linear": LinearAttentionSpec(
            num_k_heads=_int(cfg, "linear_num_key_heads"),
            num_v_heads=_int(cfg, "linear_num_value_heads"),
            k_head_dim=_int(cfg, "linear_key_head_dim"),
            v_head_dim=_int(cfg, "linear_value_head_dim"),
            conv_kernel=_int(cfg, "linear_conv_kernel_dim"),
        ),
        "moe": MoESpec(
            num_experts=_int(cfg, "num_experts", maximum=MAX_EXPERTS),
            top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=_int(cfg, "moe_intermediate_size"),
            num_shared_experts=1 if shared else 0,
            shared_intermediate=shared,
        ),
    }


def _glm4_moe(cfg: dict) -> dict:
    """GLM-4.5/4.6 (transformers ``Glm4MoeConfig``): DeepSeek-style MoE (first ``first_k_dense_replace`` layers
    dense, routed + shared experts, sigmoid routing with a correction bias) on GQA attention with q/k/v bias and
    optional per-head QK-norm (``use_qk_norm``); ``num_nextn_predict_layers`` MTP layers."""
    shared = _int(cfg, "n_shared_experts", 0, minimum=0, maximum=MAX_EXPERTS)
    return {
        "qk_norm": bool(cfg.get("use_qk_norm", False)),
        "moe": MoESpec(
            num_experts=_int(cfg, "n_routed_experts", maximum=MAX_EXPERTS),
            top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=_int(cfg, "moe_intermediate_size"),
            num_shared_experts=shared,
            shared_intermediate=_int(cfg, "moe_intermediate_size") if shared else 0,
            first_k_dense=_int(cfg, "first_k_dense_replace", 0, minimum=0),
            router_bias=True,  # e_score_correction_bias (Glm4MoeTopkRouter)
        ),
        "num_mtp_layers": _int(cfg, "num_nextn_predict_layers", 0, minimum=0),
    }


def _minimax_m2(cfg: dict) -> dict:
    """MiniMax-M2 (``MiniMaxM2Config``): every layer full GQA attention (``attn_type_list`` all 1) and MoE
    (``num_local_experts`` of width ``intermediate_size``, sigmoid routing with bias, no shared expert).
    Its ``qk_norm_type`` ``per_layer`` RMSNorm spans all heads of q and of k (same bytes as a per-head norm;
    the norm weights are counted per head width). MTP: ``num_mtp_modules`` when ``use_mtp``."""
    types = cfg.get("attn_type_list") or []
    require(
        isinstance(types, list) and all(t == 1 for t in types),
        "config.json:attn_type_list",
        types,
        "only full attention (every entry 1) is modelled",
    )
    require(
        not cfg.get("shared_intermediate_size"),
        "config.json:shared_intermediate_size",
        cfg.get("shared_intermediate_size"),
        "shared experts are not modelled for MiniMax-M2 (allowed: 0)",
    )
    return {
        "qk_norm": bool(cfg.get("use_qk_norm", False)),
        "moe": MoESpec(
            num_experts=_int(cfg, "num_local_experts", maximum=MAX_EXPERTS),
            top_k=_int(cfg, "num_experts_per_tok", maximum=MAX_EXPERTS),
            expert_intermediate=_int(cfg, "intermediate_size"),
            router_bias=bool(cfg.get("use_routing_bias", False)),
        ),
        "num_mtp_layers": _int(cfg, "num_mtp_modules", 0, minimum=0) if cfg.get("use_mtp") else 0,
    }


_FAMILIES: dict[str, Callable[[dict], dict]] = {
    "mixtral": _mixtral,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v3": _deepseek_v3,
    "gpt_oss": _gpt_oss,
    "glm4_moe": _glm4_moe,
    "minimax_m2": _minimax_m2,
    "llama4": _llama4,
    "qwen3_next": _qwen3_next,
}


def architecture_fields(cfg: dict, family: str, model_dtype: str) -> dict:
    """Extra ModelSpec keyword arguments of ``family`` (empty for the dense families)."""
    out = _FAMILIES[family](cfg) if family in _FAMILIES else {}
    q = quant_spec(cfg, model_dtype)
    if q is not None:
        out["quant"] = q
    return out
