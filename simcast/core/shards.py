"""Per-rank tensor-parallel shard sizes: the one place that knows how TP splits a layer.

Shapes follow vLLM's Megatron-style sharding: q heads / tp; kv heads / tp, each rank
keeping one whole kv head (replicated) when tp > kv heads; intermediate / tp (gate and
up column-parallel, down row-parallel); the vocabulary split in ``ceil(vocab / tp)``
rows per rank. Memory, parameter counts, stage-module shapes, single-kernel predictions
and the measured-data readers all derive their shapes from :class:`ShardedDims`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcast.core.errors import require
from simcast.core.model_spec import ModelSpec


@dataclass(frozen=True, kw_only=True)
class ShardedDims:
    """Per-rank sizes of one decoder layer under tensor parallelism ``tp`` (element counts)."""

    tp: int
    hidden: int
    head_dim: int
    q_heads: int
    kv_heads: int
    intermediate: int
    vocab_shard: int
    attention_bias: bool = False
    qk_norm: bool = False

    @property
    def q_width(self) -> int:
        """Columns of the query projection (= o_proj's input width)."""
        return self.q_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Columns of one of K or V."""
        return self.kv_heads * self.head_dim

    @property
    def qkv_width(self) -> int:
        """Columns of the fused QKV projection."""
        return self.q_width + 2 * self.kv_width

    def gemm_shapes(self, tokens: int) -> dict[str, tuple[int, int, int]]:
        """(M, N, K) of the layer's four GEMMs for ``tokens`` rows, keyed as in Vidur's profiles."""
        h = self.hidden
        return {
            "attn_pre_proj": (tokens, self.qkv_width, h),
            "attn_post_proj": (tokens, h, self.q_width),
            "mlp_up_proj": (tokens, 2 * self.intermediate, h),
            "mlp_down_proj": (tokens, h, self.intermediate),
        }

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer on one rank (QKV(+bias), o_proj, gate/up/down, norms)."""
        h, d = self.hidden, self.head_dim
        attn = h * self.qkv_width + self.q_width * h + (self.qkv_width if self.attention_bias else 0)
        return attn + 3 * h * self.intermediate + 2 * h + (2 * d if self.qk_norm else 0)


def shard(
    *,
    hidden: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate: int,
    vocab: int,
    tp: int,
    name: str = "model",
    attention_bias: bool = False,
    qk_norm: bool = False,
) -> ShardedDims:
    """Per-rank sizes from raw dimensions; a one-line error when ``tp`` cannot split them."""
    require(tp >= 1, "tp_size", tp, "must be >= 1")
    require(heads % tp == 0, "tp_size", tp, f"must divide num_attention_heads={heads} of {name}")
    if tp <= kv_heads:
        require(
            kv_heads % tp == 0,
            "tp_size",
            tp,
            f"must divide num_key_value_heads={kv_heads} of {name} (or be a multiple of it)",
        )
        kv = kv_heads // tp
    else:
        require(
            tp % kv_heads == 0,
            "tp_size",
            tp,
            f"must be a multiple of num_key_value_heads={kv_heads} of {name} when larger",
        )
        kv = 1  # replicated kv heads, as vLLM does
    require(intermediate % tp == 0, "tp_size", tp, f"must divide intermediate_size={intermediate} of {name}")
    return ShardedDims(
        tp=tp,
        hidden=hidden,
        head_dim=head_dim,
        q_heads=heads // tp,
        kv_heads=kv,
        intermediate=intermediate // tp,
        vocab_shard=math.ceil(vocab / tp),
        attention_bias=attention_bias,
        qk_norm=qk_norm,
    )


def sharded_dims(model: ModelSpec, tp: int) -> ShardedDims:
    """Per-rank sizes of ``model`` under ``tp``; raises a one-line error when ``tp`` cannot split it."""
    return shard(
        hidden=model.hidden_size,
        heads=model.num_heads,
        kv_heads=model.num_kv_heads,
        head_dim=model.head_dim,
        intermediate=model.intermediate_size,
        vocab=model.vocab_size,
        tp=tp,
        name=model.name,
        attention_bias=model.attention_bias,
        qk_norm=model.qk_norm,
    )


def param_count(model: ModelSpec) -> int:
    """Total parameters, unsharded (embedding counted once when tied; every expert of an MoE model)."""
    from simcast.core.params import total_params  # params builds on this module

    return total_params(model)
