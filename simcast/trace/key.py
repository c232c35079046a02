"""The cache key of a stage trace (importable without torch)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class StageKey:
    """Everything the traced graph of a stage-local module depends on.

    Layer *counts* are not part of it: the representative layer is replayed.
    Shapes are per TP rank.
    """

    hidden_size: int
    q_heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab_shard: int
    tp: int
    qk_norm: bool
    attention_bias: bool
    rms_norm_eps: float
    rope_theta: float
    dtype: str
    has_embedding: bool
    has_head: bool
    traced_layers: int  # 1, or 2 on stage 0 (model's first layer + a representative one)
