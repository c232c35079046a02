"""The cache key of a stage trace (importable without torch)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class StageKey:
    """Everything the traced graph of a stage-local module depends on.

    Layer *counts* are not part of it: the representative layer is replayed.
    Shapes are per TP rank. ``layer_kinds`` names each traced layer's structure
    (``dense`` / ``moe``, ``+sliding`` / ``+chunked`` / ``+linear``); the MoE fields are per rank
    (``experts_local = E / ep``, ``expert_intermediate = I / moe_tp``,
    ``shared_intermediate = n_shared · I_s / tp``). MLA sets ``kv_lora_rank`` and the
    cache shape ``(S, kv_heads=1, head_dim=kv_lora + rope)``. ``*_format``: weight
    formats of quantised GEMMs ("" = model dtype).
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
    traced_layers: int  # 1, or 2 on stage 0 (model's first layer + a representative one); one per kind
    layer_kinds: tuple[str, ...] = ()
    num_experts: int = 0
    experts_local: int = 0
    top_k: int = 0
    expert_intermediate: int = 0
    shared_intermediate: int = 0
    ep: int = 1
    moe_dp: int = 1
    dp: int = 1
    moe_comm: str = ""  # "all_reduce" (MoE group = TP group), "all_to_all" (EP across replicas), "all_gather"
    router_bias: bool = False
    expert_format: str = ""
    dense_format: str = ""
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    attention_chunk_size: int = 0
    linear_k_heads: int = 0  # Gated DeltaNet heads per rank (0: no linear-attention layer)
    linear_v_heads: int = 0
    linear_k_dim: int = 0
    linear_v_dim: int = 0
    linear_conv_kernel: int = 0
    attn_output_gate: bool = False
    o_proj_bias: bool = False
