"""Per-stage, per-rank memory: weights, KV cache, activation peak (bytes).

Shapes are the TP-sharded ones vLLM allocates: q heads / tp, kv heads / tp
(each rank keeps one whole kv head when tp > kv heads), intermediate / tp,
vocab padded to a multiple of tp and split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcast.core.errors import require
from simcast.core.plan import PipelineStageInfo, StageModuleSpec
from simcast.core.specs import Batch, ModelSpec


@dataclass(frozen=True, kw_only=True)
class ShardedDims:
    """Per-rank sizes under tensor parallelism ``tp``."""

    tp: int
    q_heads: int
    kv_heads: int
    intermediate: int
    vocab_shard: int


def sharded_dims(model: ModelSpec, tp: int) -> ShardedDims:
    """Per-rank sizes; raises a one-line error when ``tp`` cannot split the model."""
    require(
        model.num_heads % tp == 0, "tp_size", tp, f"must divide num_attention_heads={model.num_heads} of {model.name}"
    )
    if tp <= model.num_kv_heads:
        require(
            model.num_kv_heads % tp == 0,
            "tp_size",
            tp,
            f"must divide num_key_value_heads={model.num_kv_heads} of {model.name} (or be a multiple of it)",
        )
        kv = model.num_kv_heads // tp
    else:
        require(
            tp % model.num_kv_heads == 0,
            "tp_size",
            tp,
            f"must be a multiple of num_key_value_heads={model.num_kv_heads} of {model.name} when larger",
        )
        kv = 1  # replicated kv heads, as vLLM does
    require(
        model.intermediate_size % tp == 0,
        "tp_size",
        tp,
        f"must divide intermediate_size={model.intermediate_size} of {model.name}",
    )
    return ShardedDims(
        tp=tp,
        q_heads=model.num_heads // tp,
        kv_heads=kv,
        intermediate=model.intermediate_size // tp,
        vocab_shard=math.ceil(model.vocab_size / tp),
    )


def layer_weight_bytes(model: ModelSpec, sd: ShardedDims) -> int:
    """One decoder layer's weights on one rank."""
    h, d = model.hidden_size, model.head_dim
    qkv_out = (sd.q_heads + 2 * sd.kv_heads) * d
    params = h * qkv_out + (qkv_out if model.attention_bias else 0) + sd.q_heads * d * h
    params += 3 * h * sd.intermediate + 2 * h + (2 * d if model.qk_norm else 0)
    return params * model.dtype_bytes


def stage_weight_bytes(model: ModelSpec, sd: ShardedDims, info: PipelineStageInfo, mods: StageModuleSpec) -> int:
    """Owned layers plus edge modules (embedding / norm / lm_head) on one rank of a stage."""
    emb = sd.vocab_shard * model.hidden_size * model.dtype_bytes
    w = info.num_layers * layer_weight_bytes(model, sd)
    if mods.embedding_weights:
        w += emb
    if mods.final_norm:
        w += model.hidden_size * model.dtype_bytes
    if mods.lm_head and not model.tie_word_embeddings:
        w += emb
    return w


def kv_bytes_per_token(model: ModelSpec, sd: ShardedDims, num_layers: int) -> int:
    """K and V of one token across ``num_layers`` layers on one rank."""
    return 2 * num_layers * sd.kv_heads * model.head_dim * model.dtype_bytes


def stage_kv_cache_bytes(model: ModelSpec, sd: ShardedDims, info: PipelineStageInfo, batch: Batch) -> int:
    """KV cache the batch holds on this stage: active layers only."""
    return batch.kv_tokens * kv_bytes_per_token(model, sd, info.num_layers)


def stage_activation_bytes(model: ModelSpec, sd: ShardedDims, mods: StageModuleSpec, micro: Batch) -> int:
    """Peak live activations of one microbatch (estimate).

    Assumes the largest layer-internal set is live at once: hidden + residual,
    the fused QKV output and the gate_up output with its SiLU product; on the
    last stage also the gathered logits in bf16 plus fp32 sampler copies.
    """
    t, b = micro.num_tokens, model.dtype_bytes
    qkv = (sd.q_heads + 2 * sd.kv_heads) * model.head_dim
    act = t * (2 * model.hidden_size + max(qkv, 3 * sd.intermediate)) * b
    if mods.lm_head:
        act = max(act, micro.num_requests * model.vocab_size * (b + 4) + 2 * t * model.hidden_size * b)
    return act
