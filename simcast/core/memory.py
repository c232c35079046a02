"""Per-stage, per-rank memory: weights, KV cache, activation peak (bytes).

Shapes are the TP-sharded ones of :mod:`simcast.core.shards`.
"""

from __future__ import annotations

from simcast.core.plan import PipelineStageInfo, StageModuleSpec
from simcast.core.shards import ShardedDims
from simcast.core.specs import Batch, ModelSpec


def layer_weight_bytes(model: ModelSpec, sd: ShardedDims) -> int:
    """One decoder layer's weights on one rank."""
    return sd.layer_params * model.dtype_bytes


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
    act = t * (2 * model.hidden_size + max(sd.qkv_width, 3 * sd.intermediate)) * b
    if mods.lm_head:
        act = max(act, micro.num_requests * model.vocab_size * (b + 4) + 2 * t * model.hidden_size * b)
    return act
