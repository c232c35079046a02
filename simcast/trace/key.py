"""The cache key of a stage trace (importable without torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
    # where the dense MLP layers and the LM head run (ParallelSpec.dense_ffn / lm_head, as the engine resolved
    # them): "" the attention-TP group on the rank's own tokens; "gathered" the tokens of ``dense_group // tp`` DP
    # ranks over ``dense_group`` ranks; "scattered" unsharded on 1/tp of the tokens. Left out of the cache key
    # when "" (LATE_DEFAULTS), so the traces of every other layout keep their keys.
    dense_mode: str = ""
    dense_group: int = 0
    dense_intermediate: int = 0  # the dense MLP's per-rank intermediate size in that group
    head_mode: str = ""
    head_group: int = 0
    head_vocab: int = 0  # the LM head's per-rank vocabulary rows in that group


LATE_DEFAULTS = {
    "dense_mode": "",
    "dense_group": 0,
    "dense_intermediate": 0,
    "head_mode": "",
    "head_group": 0,
    "head_vocab": 0,
}
"""Fields added after traces were shipped: at these values they are left out of a key's dict (:func:`key_dict`)."""


def key_dict(key: StageKey) -> dict:
    """``key`` as the trace cache stores and hashes it: its fields, those of :data:`LATE_DEFAULTS` only when set."""
    d = asdict(key)
    return {k: v for k, v in d.items() if k not in LATE_DEFAULTS or v != LATE_DEFAULTS[k]}
