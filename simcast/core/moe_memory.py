"""Per-rank shards, weights and KV bytes of MoE / MLA / quantised layers.

- Experts: ``E / ep`` experts per rank, each expert's FFN width split ``/ moe_tp``; every
  rank holds its experts' weights whatever tokens it gets (weights count *all* experts).
- Shared experts and the dense MLP of DeepSeek's first layers: TP-sharded ``/ tp`` (vLLM).
- Router: replicated, model dtype. Attention: q/o and kv_b sharded ``/ tp``; MLA's q_a and
  kv_a (the down projections) are replicated on every TP rank (vLLM's ReplicatedLinear).
- Weight bytes per element from the config's ``quantization_config`` (fp8 block-scaled:
  1 byte + an fp32 scale per 128x128 block; mxfp4: 4.25 bits), else the model dtype.
- KV per token per layer: GQA ``2 · kv_heads/tp · head_dim`` elements; MLA the compressed
  ``kv_lora_rank + qk_rope_head_dim`` (576 for DeepSeek-V3), **not** divided by tp (every
  TP rank keeps the full latent, as vLLM and SGLang do); ``kv_cache_dtype`` sets the bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcast.core.errors import require
from simcast.core.moe import WEIGHT_FORMAT_BYTES
from simcast.core.shards import ShardedDims
from simcast.core.specs import DTYPE_BYTES, ModelSpec, ParallelSpec


@dataclass(frozen=True, kw_only=True)
class MoEShard:
    """Per-rank MoE sizes (elements)."""

    experts_local: int
    expert_intermediate: int
    shared_intermediate: int  # all shared experts together, / tp


def moe_shard(model: ModelSpec, par: ParallelSpec) -> MoEShard:
    """Per-rank expert sizes; a one-line error when ep / moe_tp cannot split the model."""
    m = model.moe
    require(m is not None, "ep_size", par.ep, f"{model.name} has no experts")
    assert m is not None
    require(m.num_experts % par.ep == 0, "ep_size", par.ep, f"must divide the {m.num_experts} experts of {model.name}")
    require(
        m.expert_intermediate % par.moe_tp == 0,
        "moe_tp_size",
        par.moe_tp,
        f"must divide moe_intermediate_size={m.expert_intermediate} of {model.name}",
    )
    shared = m.num_shared_experts * m.shared_intermediate
    require(shared % par.tp == 0, "tp_size", par.tp, f"must divide the shared experts' width {shared}")
    return MoEShard(
        experts_local=m.num_experts // par.ep,
        expert_intermediate=m.expert_intermediate // par.moe_tp,
        shared_intermediate=shared // par.tp,
    )


def _fmt_bytes(model: ModelSpec, expert: bool) -> float:
    q = model.quant
    if q is None:
        return float(model.dtype_bytes)
    return q.expert_bytes if expert else q.dense_bytes


def attention_rank_params(model: ModelSpec, sd: ShardedDims) -> tuple[int, int]:
    """(GEMM weights, other params) of one layer's attention on one TP rank."""
    h, tp = model.hidden_size, sd.tp
    if model.mla is not None:
        a, hr = model.mla, model.num_heads // tp
        gemm = h * a.q_lora_rank + a.q_lora_rank * hr * a.qk_head_dim if a.q_lora_rank else h * hr * a.qk_head_dim
        gemm += h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * hr * (a.qk_nope_head_dim + a.v_head_dim)
        gemm += hr * a.v_head_dim * h
        return gemm, a.q_lora_rank + a.kv_lora_rank
    gemm = h * sd.qkv_width + sd.q_width * h
    other = (
        (sd.qkv_width if sd.attention_bias else 0)
        + (h if model.o_proj_bias else 0)
        + (2 * sd.head_dim if sd.qk_norm else 0)
        + (sd.q_heads if model.attention_sinks else 0)
    )
    return gemm, other


def layer_weight_bytes_at(model: ModelSpec, sd: ShardedDims, par: ParallelSpec, layer: int) -> float:
    """Weights of decoder layer ``layer`` on one rank (bytes)."""
    b = model.dtype_bytes
    gemm, other = attention_rank_params(model, sd)
    w = gemm * _fmt_bytes(model, False) + (other + 2 * model.hidden_size) * b
    h = model.hidden_size
    if not model.is_moe_layer(layer):
        return w + 3 * h * sd.intermediate * _fmt_bytes(model, False)
    m, s = model.moe, moe_shard(model, par)
    assert m is not None
    expert = 3 * h * s.expert_intermediate * _fmt_bytes(model, True) + (
        (2 * s.expert_intermediate + h) * b if m.expert_bias else 0
    )
    router = (h * m.num_experts + (m.num_experts if m.router_bias else 0)) * b
    return w + s.experts_local * expert + router + 3 * h * s.shared_intermediate * _fmt_bytes(model, True)


def kv_elements_per_token_layer(model: ModelSpec, sd: ShardedDims) -> int:
    """Cache elements one token occupies in one layer on one rank (K and V, or MLA's latent)."""
    if model.mla is not None:
        return model.mla.cache_width
    return 2 * sd.kv_heads * model.head_dim


def kv_dtype_bytes(model: ModelSpec, kv_cache_dtype: str) -> int:
    """``auto`` = the model dtype (vLLM's default), else ``bf16`` / ``fp8``."""
    return model.dtype_bytes if kv_cache_dtype == "auto" else DTYPE_BYTES[kv_cache_dtype]


def sliding_tokens(model: ModelSpec, layer: int, tokens_per_request: float) -> float:
    """Cache tokens a request keeps in ``layer``: all, or the window on a sliding layer (vLLM's hybrid allocator)."""
    return min(tokens_per_request, model.sliding_window) if model.is_sliding(layer) else tokens_per_request


def weight_format_note(model: ModelSpec) -> str:
    q = model.quant
    if q is None:
        return ""
    return (
        f"weights from {q.source} ({q.method}): "
        + (f"experts {q.expert_format} ({WEIGHT_FORMAT_BYTES[q.expert_format]:.4g} B/elem), " if model.moe else "")
        + f"{'other' if model.moe else 'linear-layer'} GEMMs {q.dense_format} "
        f"({WEIGHT_FORMAT_BYTES[q.dense_format]:.4g} B/elem); fp8 GEMMs run W8A8 "
        f"at the fp8 matmul peak, activations quantised on entry; embedding, lm_head, norms, "
        f"{'router, ' if model.moe else ''}activations in {model.dtype}"
    )


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)
