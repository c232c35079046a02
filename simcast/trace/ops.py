"""Leaf custom ops for the kernels a serving engine really launches.

Each op is registered with ``torch.library`` and has only a fake (meta) kernel:
simcast never computes anything, it only needs output shapes.  Because they are
opaque custom ops, ``torch.compile`` keeps each one as a single graph node at
the place the engine launches it (plain SDPA on meta would decompose into fp32
casts, an s x s mask and two bmms; an all-reduce written as Python would vanish).

Token layout follows vLLM/SGLang: the batch is flattened to ``T`` tokens
(all requests' new tokens back to back), ``R`` requests, and a paged KV cache
flattened to ``S`` slots of ``(kv_heads, head_dim)``.

Importing this module imports torch; it is only imported when a trace is built.
"""

from __future__ import annotations

from typing import NoReturn

import torch

_LIB = "simcast"


def no_kernel(*_a: object, **_k: object) -> NoReturn:
    raise RuntimeError("simcast ops have no real kernel")


@torch.library.custom_op(f"{_LIB}::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim. x: (..., d), weight: (d,)."""
    raise RuntimeError("simcast ops have no real kernel")


@rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::fused_add_rms_norm", mutates_args=())
def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """residual += x; out = RMSNorm(residual). Returns (out, new_residual); (T, d) each."""
    raise RuntimeError("simcast ops have no real kernel")


@fused_add_rms_norm.register_fake
def _(x, residual, weight, eps):
    return torch.empty_like(x), torch.empty_like(residual)


@torch.library.custom_op(f"{_LIB}::rope", mutates_args=())
def rope(
    positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, head_dim: int, theta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary embedding applied to q (T, Hq*D) and k (T, Hkv*D) at positions (T,)."""
    raise RuntimeError("simcast ops have no real kernel")


@rope.register_fake
def _(positions, q, k, head_dim, theta):
    return torch.empty_like(q), torch.empty_like(k)


@torch.library.custom_op(f"{_LIB}::silu_and_mul", mutates_args=())
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """x: (T, 2*I) -> silu(x[:, :I]) * x[:, I:] of shape (T, I)."""
    raise RuntimeError("simcast ops have no real kernel")


@silu_and_mul.register_fake
def _(x):
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


@torch.library.custom_op(f"{_LIB}::kv_cache_write", mutates_args=("k_cache", "v_cache"))
def kv_cache_write(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    """Scatter the T new tokens' k, v (T, Hkv*D) into the paged cache (S, Hkv, D)."""
    raise RuntimeError("simcast ops have no real kernel")


@kv_cache_write.register_fake
def _(k, v, k_cache, v_cache):
    return None


@torch.library.custom_op(f"{_LIB}::attention", mutates_args=())
def attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    causal: bool,
    scale: float,
) -> torch.Tensor:
    """Paged attention (FlashAttention varlen / paged decode) over R requests.

    q: (T, Hq*D); caches (S, Hkv, D); query_lens, context_lens: (R,).
    Its cost depends on the per-request lengths, evaluated from the batch.
    """
    raise RuntimeError("simcast ops have no real kernel")


@attention.register_fake
def _(q, k_cache, v_cache, query_lens, context_lens, causal, scale):
    return torch.empty_like(q)


@torch.library.custom_op(f"{_LIB}::all_reduce", mutates_args=())
def all_reduce(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """Sum-all-reduce over a TP group of ``group_size`` ranks."""
    raise RuntimeError("simcast ops have no real kernel")


@all_reduce.register_fake
def _(x, group_size):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::all_gather", mutates_args=())
def all_gather(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """Gather the last dim over a TP group: (..., n) -> (..., n * group_size)."""
    raise RuntimeError("simcast ops have no real kernel")


@all_gather.register_fake
def _(x, group_size):
    return x.new_empty((*x.shape[:-1], x.shape[-1] * group_size))


@torch.library.custom_op(f"{_LIB}::dp_comm", mutates_args=())
def dp_comm(x: torch.Tensor, ref: torch.Tensor, kind: str, group_size: int, factor: int, over: str) -> torch.Tensor:
    """The row movements of a dense MLP or LM head outside the attention-TP group (SGLang's DP gather/scatter,
    :mod:`simcast.engines.sglang_layers`), over ``group_size`` ranks of the ``over`` group ("tp": attention TP,
    "dp": every rank of the stage): ``gather_rows`` (T, H) -> (factor·T, H); ``scatter_rows`` (factor·T, H) ->
    (T, H) (a local copy); ``reduce_scatter_rows`` (T, H) -> (T // factor, H); ``all_gather_rows`` -> ``ref``'s
    shape; ``all_reduce``; ``all_gather_cols`` (..., n) -> (..., factor·n)."""
    raise RuntimeError("simcast ops have no real kernel")


@dp_comm.register_fake
def _(x, ref, kind, group_size, factor, over):
    if kind == "gather_rows":
        return x.new_empty((x.shape[0] * factor, *x.shape[1:]))
    if kind == "scatter_rows":
        return x.new_empty((x.shape[0] // factor, *x.shape[1:]))
    if kind == "reduce_scatter_rows":
        return x.new_empty((x.shape[0] // factor, *x.shape[1:]))
    if kind == "all_gather_rows":
        return torch.empty_like(ref)
    if kind == "all_gather_cols":
        return x.new_empty((*x.shape[:-1], x.shape[-1] * factor))
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::vocab_embedding", mutates_args=())
def vocab_embedding(ids: torch.Tensor, weight: torch.Tensor, tp: int) -> torch.Tensor:
    """Vocab-parallel embedding lookup: rows of this rank's shard, zeros elsewhere.

    ids: (T,), weight: (V/tp, d) -> (T, d). Followed by an all-reduce when tp > 1.
    """
    raise RuntimeError("simcast ops have no real kernel")


@vocab_embedding.register_fake
def _(ids, weight, tp):
    return weight.new_empty((ids.shape[0], weight.shape[1]))


@torch.library.custom_op(f"{_LIB}::sample", mutates_args=())
def sample(logits: torch.Tensor) -> torch.Tensor:
    """Sampler over the full-vocab logits (R, V) -> token ids (R,)."""
    raise RuntimeError("simcast ops have no real kernel")


@sample.register_fake
def _(logits):
    return logits.new_empty((logits.shape[0],), dtype=torch.int64)


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
    no_kernel()


@attention_sliding.register_fake
def _(q, k_cache, v_cache, query_lens, context_lens, scale, window):
    return torch.empty_like(q)


@torch.library.custom_op(f"{_LIB}::attention_chunked", mutates_args=())
def attention_chunked(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    chunk: int,
) -> torch.Tensor:
    """Chunked local attention (Llama-4): a query at position p sees the keys of its own ``chunk``-token chunk."""
    no_kernel()


@attention_chunked.register_fake
def _(q, k_cache, v_cache, query_lens, context_lens, scale, chunk):
    return torch.empty_like(q)
