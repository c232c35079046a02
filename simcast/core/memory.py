"""Per-stage, per-rank memory: weights, KV cache, activation peak (bytes).

Shapes are the TP-sharded ones of :mod:`simcast.core.shards`.
"""

from __future__ import annotations

from simcast.core.kv import kv_elements_per_token_layer, linear_state_bytes, sliding_tokens
from simcast.core.model_spec import ModelSpec
from simcast.core.plan import PipelineStageInfo, StageModuleSpec
from simcast.core.shards import ShardedDims
from simcast.core.specs import Batch, ParallelSpec
from simcast.core.weights import layer_weight_bytes_at


def layer_weight_bytes(model: ModelSpec, sd: ShardedDims) -> int:
    """One decoder layer's weights on one rank."""
    return sd.layer_params * model.dtype_bytes


def stage_weight_bytes(
    model: ModelSpec, sd: ShardedDims, info: PipelineStageInfo, mods: StageModuleSpec, par: ParallelSpec | None = None
) -> int:
    """Owned layers plus edge modules (embedding / norm / lm_head) on one rank of a stage.
    MoE / MLA / quantised models: per layer from :mod:`simcast.core.weights` (``par`` gives ep, moe_tp)."""
    emb = sd.vocab_shard * model.hidden_size * model.dtype_bytes
    if model.moe is not None or model.mla is not None or model.quant is not None or model.o_proj_bias:
        p = par or ParallelSpec(tp=sd.tp)
        w = int(sum(layer_weight_bytes_at(model, sd, p, i) for i in info.active_layer_indices))
    else:
        w = info.num_layers * layer_weight_bytes(model, sd)
    if mods.embedding_weights:
        w += emb + model.encoder_params * model.dtype_bytes // sd.tp
    if mods.final_norm:
        w += model.hidden_size * model.dtype_bytes
    if mods.lm_head and not model.tie_word_embeddings:
        w += emb
    return w


def kv_bytes_per_token(model: ModelSpec, sd: ShardedDims, num_layers: int, kv_bytes: float = 0) -> float:
    """K and V (MLA: the compressed latent) of one token across ``num_layers`` layers on one rank.
    ``kv_bytes`` per element, scales included (0: the model dtype; fractional for an FP4 cache: 0.5625).
    An int for whole-byte dtypes."""
    return num_layers * kv_elements_per_token_layer(model, sd) * (kv_bytes or model.dtype_bytes)


def stage_kv_cache_bytes(
    model: ModelSpec, sd: ShardedDims, info: PipelineStageInfo, batch: Batch, kv_bytes: float = 0
) -> int:
    """KV cache the batch holds on this stage: active layers only (sliding layers: the window)."""
    if not model.layer_types:
        return int(batch.kv_tokens * kv_bytes_per_token(model, sd, info.num_layers, kv_bytes))
    per = kv_bytes_per_token(model, sd, 1, kv_bytes)
    groups = [(q + c, n) for q, c, n in zip(batch.query_lens, batch.context_lens, batch.counts)]
    state = sum(linear_state_bytes(model, i, sd.tp) for i in info.active_layer_indices) * sum(batch.counts)
    kept = sum(n * sliding_tokens(model, i, t) for i in info.active_layer_indices for t, n in groups)
    return int(per * kept) + state


def stage_kv_bytes_for(
    model: ModelSpec,
    sd: ShardedDims,
    info: PipelineStageInfo,
    requests: int,
    tokens_per_request: int,
    kv_bytes: float = 0,
) -> int:
    """KV of ``requests`` requests of ``tokens_per_request`` tokens each on this stage (serving memory); a
    linear-attention layer adds its constant state per request."""
    per = kv_bytes_per_token(model, sd, 1, kv_bytes)
    state = requests * sum(linear_state_bytes(model, i, sd.tp) for i in info.active_layer_indices)
    return (
        int(per * requests * sum(sliding_tokens(model, i, tokens_per_request) for i in info.active_layer_indices))
        + state
    )


def stage_activation_bytes(model: ModelSpec, sd: ShardedDims, mods: StageModuleSpec, micro: Batch) -> int:
    """Peak live activations of one microbatch (estimate).

    Assumes the largest layer-internal set is live at once: hidden + residual,
    the fused QKV output and the gate_up output with its SiLU product; on the
    last stage also the gathered logits in bf16 plus fp32 sampler copies.
    """
    t, b = micro.num_tokens, model.dtype_bytes
    act = t * (2 * model.hidden_size + max(sd.qkv_width, 3 * sd.intermediate)) * b
    if model.moe is not None:  # routed copies (top_k per token) of the hidden state and the expert intermediate
        act = max(act, t * model.moe.top_k * (2 * model.hidden_size + 3 * model.moe.expert_intermediate) * b)
    if mods.lm_head:
        act = max(act, micro.num_requests * model.vocab_size * (b + 4) + 2 * t * model.hidden_size * b)
    return act
