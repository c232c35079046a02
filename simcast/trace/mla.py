"""Multi-head latent attention (DeepSeek MLA): its leaf ops and the attention module of one TP rank.

- ``mla_cache_write``: the new tokens' latent and rope key into the compressed cache.
- ``mla_attention``: MLA over the compressed latent cache; the cost model picks
  decompressed K/V for prefill rows and weight absorption for decode rows.

Importing this module imports torch.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from simcast.trace import ops
from simcast.trace.key import StageKey
from simcast.trace.ops import _LIB
from simcast.trace.ops import no_kernel as _no_kernel
from simcast.trace.quant import Linear


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
