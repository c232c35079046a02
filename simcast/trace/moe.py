"""Leaf ops and layer pieces for MoE, MLA, sliding-window attention and quantised linears.

Like :mod:`simcast.trace.ops`, every op has only a fake kernel and stays one graph node
at the place the engine launches it:

- ``moe_topk``: router softmax/sigmoid + top-k (one fused kernel in vLLM/SGLang).
- ``moe_dispatch`` / ``moe_combine``: the EP all-to-all (DeepEP-style) or, with no EP
  across replicas, the all-gather / reduce-scatter of the tokens; cost from the link table.
- ``moe_experts``: the fused grouped expert GEMMs (gate/up, activation, down) of this
  rank's ``experts_local`` experts, weights in ``fmt`` (``bf16``, ``fp8_block``, ``mxfp4``).
  Its tokens per rank come from the routing model at cost time (:mod:`simcast.cost.moe`).
- ``mla_attention``: DeepSeek MLA over the compressed latent cache; the cost model picks
  decompressed K/V for prefill rows and weight absorption for decode rows.
- ``attention_sliding``: attention over the last ``window`` tokens (gpt-oss sliding layers).
- ``quant_linear``: a GEMM with fp8 block-scaled or mxfp4 weights.

Importing this module imports torch.
"""

from __future__ import annotations

import math
from typing import NoReturn

import torch
from torch import nn

from simcast.trace import ops
from simcast.trace.key import StageKey

_LIB = "simcast"


def _no_kernel(*_a: object, **_k: object) -> NoReturn:
    raise RuntimeError("simcast ops have no real kernel")


@torch.library.custom_op(f"{_LIB}::moe_topk", mutates_args=())
def moe_topk(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Router scores (T, E) -> top-k weights (T, k) fp32 and expert ids (T, k) int32."""
    _no_kernel()


@moe_topk.register_fake
def _(logits, top_k):
    t = logits.shape[0]
    return logits.new_empty((t, top_k), dtype=torch.float32), logits.new_empty((t, top_k), dtype=torch.int32)


@torch.library.custom_op(f"{_LIB}::moe_dispatch", mutates_args=())
def moe_dispatch(
    x: torch.Tensor, topk_ids: torch.Tensor, mode: str, ep: int, dp: int, num_experts: int, tp: int
) -> torch.Tensor:
    """Send each token to the ranks of its experts (``all_to_all``) or gather all replicas' tokens (``all_gather``)."""
    _no_kernel()


@moe_dispatch.register_fake
def _(x, topk_ids, mode, ep, dp, num_experts, tp):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::moe_combine", mutates_args=())
def moe_combine(
    y: torch.Tensor, topk_ids: torch.Tensor, mode: str, ep: int, dp: int, num_experts: int, tp: int
) -> torch.Tensor:
    """Return expert outputs to their tokens' ranks (the inverse of :func:`moe_dispatch`)."""
    _no_kernel()


@moe_combine.register_fake
def _(y, topk_ids, mode, ep, dp, num_experts, tp):
    return torch.empty_like(y)


@torch.library.custom_op(f"{_LIB}::moe_experts", mutates_args=())
def moe_experts(
    x: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    fmt: str,
    top_k: int,
    num_experts: int,
    ep: int,
    moe_dp: int,
    dp: int,
) -> torch.Tensor:
    """Fused MoE: x (T, H); w13 (E_local, 2·I_r, H); w2 (E_local, H, I_r) -> (T, H)."""
    _no_kernel()


@moe_experts.register_fake
def _(x, topk_weights, topk_ids, w13, w2, fmt, top_k, num_experts, ep, moe_dp, dp):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::quant_linear", mutates_args=())
def quant_linear(x: torch.Tensor, weight: torch.Tensor, fmt: str) -> torch.Tensor:
    """x (..., K) @ weight (N, K)^T with weights stored in ``fmt``; output in x's dtype."""
    _no_kernel()


@quant_linear.register_fake
def _(x, weight, fmt):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.custom_op(f"{_LIB}::mla_cache_write", mutates_args=("cache",))
def mla_cache_write(latent: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor) -> None:
    """Scatter the T new tokens' latent (T, kv_lora) and rope key (T, rope) into the cache (S, 1, kv_lora + rope)."""
    _no_kernel()


@mla_cache_write.register_fake
def _(latent, k_pe, cache):
    return None


@torch.library.custom_op(f"{_LIB}::mla_attention", mutates_args=())
def mla_attention(
    q: torch.Tensor,
    cache: torch.Tensor,
    w_kv_b: torch.Tensor,
    query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    heads: int,
    nope: int,
    rope: int,
    v_dim: int,
    scale: float,
) -> torch.Tensor:
    """MLA over the latent cache. q (T, heads·(nope+rope)); cache (S, kv_lora+rope); w_kv_b (heads·(nope+v), kv_lora)
    -> (T, heads·v)."""
    _no_kernel()


@mla_attention.register_fake
def _(q, cache, w_kv_b, query_lens, context_lens, heads, nope, rope, v_dim, scale):
    return q.new_empty((q.shape[0], heads * v_dim))


@torch.library.custom_op(f"{_LIB}::attention_sliding", mutates_args=())
def attention_sliding(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    window: int,
) -> torch.Tensor:
    """Causal attention restricted to the last ``window`` keys (sliding window; sinks add one logit per head)."""
    _no_kernel()


@attention_sliding.register_fake
def _(q, k_cache, v_cache, query_lens, context_lens, scale, window):
    return torch.empty_like(q)


class Linear(nn.Module):
    """``nn.Linear`` (traced as ``linear``) or, with a quantised ``fmt``, ``quant_linear``."""

    def __init__(self, n_in: int, n_out: int, bias: bool, fmt: str, **mk) -> None:
        super().__init__()
        self.fmt = fmt
        self.lin = nn.Linear(n_in, n_out, bias=bias, **mk) if not fmt else None
        self.weight = nn.Parameter(torch.empty(n_out, n_in, **mk)) if fmt else None

    def forward(self, x):
        return self.lin(x) if self.lin is not None else quant_linear(x, self.weight, self.fmt)


class MoEBlock(nn.Module):
    """Router, top-k, dispatch, grouped experts, combine, shared experts, reduction (one rank)."""

    def __init__(self, k: StageKey, **mk) -> None:
        super().__init__()
        self.k = k
        h = k.hidden_size
        self.gate = nn.Linear(h, k.num_experts, bias=k.router_bias, **mk)  # router: replicated, model dtype
        self.w13 = nn.Parameter(torch.empty(k.experts_local, 2 * k.expert_intermediate, h, **mk))
        self.w2 = nn.Parameter(torch.empty(k.experts_local, h, k.expert_intermediate, **mk))
        self.shared_gate_up = (
            Linear(h, 2 * k.shared_intermediate, False, k.expert_format, **mk) if k.shared_intermediate else None
        )
        self.shared_down = (
            Linear(k.shared_intermediate, h, False, k.expert_format, **mk) if k.shared_intermediate else None
        )

    def forward(self, hidden):
        k = self.k
        weights, ids = moe_topk(self.gate(hidden), k.top_k)
        x = hidden
        if k.moe_comm in ("all_to_all", "all_gather"):
            x = moe_dispatch(x, ids, k.moe_comm, k.ep, k.dp, k.num_experts, k.tp)
        out = moe_experts(
            x, weights, ids, self.w13, self.w2, k.expert_format or k.dtype, k.top_k, k.num_experts, k.ep, k.moe_dp, k.dp
        )
        if k.moe_comm in ("all_to_all", "all_gather"):
            out = moe_combine(out, ids, k.moe_comm, k.ep, k.dp, k.num_experts, k.tp)
        if self.shared_gate_up is not None:
            out = out + self.shared_down(ops.silu_and_mul(self.shared_gate_up(hidden)))
        if k.moe_comm == "all_reduce":  # EP / MoE-TP inside the TP group: partial sums reduced like a dense MLP
            out = ops.all_reduce(out, k.tp)
        return out


class MLAAttention(nn.Module):
    """DeepSeek MLA on one TP rank: heads / tp; the latent cache is replicated on every TP rank (as vLLM/SGLang)."""

    def __init__(self, k: StageKey, **mk) -> None:
        super().__init__()
        self.k = k
        h, hr, fmt = k.hidden_size, k.q_heads, k.dense_format
        qk = k.qk_nope_head_dim + k.qk_rope_head_dim
        self.q_a: Linear | None
        if k.q_lora_rank:
            self.q_a = Linear(h, k.q_lora_rank, False, fmt, **mk)
            self.q_a_norm = nn.Parameter(torch.empty(k.q_lora_rank, **mk))
            self.q_b = Linear(k.q_lora_rank, hr * qk, False, fmt, **mk)
        else:
            self.q_a, self.q_b = None, Linear(h, hr * qk, False, fmt, **mk)
        self.kv_a = Linear(h, k.kv_lora_rank + k.qk_rope_head_dim, False, fmt, **mk)
        self.kv_a_norm = nn.Parameter(torch.empty(k.kv_lora_rank, **mk))
        self.w_kv_b = nn.Parameter(torch.empty(hr * (k.qk_nope_head_dim + k.v_head_dim), k.kv_lora_rank, **mk))
        self.o_proj = Linear(hr * k.v_head_dim, h, False, fmt, **mk)

    def forward(self, positions, hidden, cache, query_lens, context_lens):
        k, eps = self.k, self.k.rms_norm_eps
        q = self.q_b(ops.rms_norm(self.q_a(hidden), self.q_a_norm, eps)) if self.q_a is not None else self.q_b(hidden)
        latent, k_pe = self.kv_a(hidden).split([k.kv_lora_rank, k.qk_rope_head_dim], dim=-1)
        latent = ops.rms_norm(latent, self.kv_a_norm, eps)
        q, k_pe = ops.rope(positions, q, k_pe, k.qk_rope_head_dim, k.rope_theta)
        mla_cache_write(latent, k_pe, cache)
        scale = 1.0 / math.sqrt(k.qk_nope_head_dim + k.qk_rope_head_dim)
        out = mla_attention(
            q,
            cache,
            self.w_kv_b,
            query_lens,
            context_lens,
            k.q_heads,
            k.qk_nope_head_dim,
            k.qk_rope_head_dim,
            k.v_head_dim,
            scale,
        )
        return self.o_proj(out)
