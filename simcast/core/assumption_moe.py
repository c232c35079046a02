"""The MoE assumption records (:mod:`simcast.core.assumption` registers them under their topics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class MoeComm:
    """The MoE all-to-all the engine runs and what it overlaps (:mod:`simcast.cost.comm.deepep`,
    :mod:`simcast.cost.overlap`)."""

    deepep: bool
    prefill_mode: str  # DeepEP mode of prefill (extend) batches
    decode_mode: str  # ... of decode batches
    nodes: int  # nodes the EP group spans
    nodes_per_token: float  # expected distinct nodes per token (normal mode's RDMA sends)
    grouped_routing: bool  # the model's node-limited routing (False: uniform)
    expert_groups: int
    topk_groups: int
    two_batch_overlap: bool
    single_batch_overlap: bool
    source: str  # the engine's code read


@dataclass(frozen=True, kw_only=True)
class MoeLayout:
    """How the layout's MoE layers meet its replicas and place its experts (only stated when it matters)."""

    replicas_share_nothing: bool  # moe_dp == dp: each replica its own experts, no cross-replica traffic
    active_dp_ranks: int  # attention-DP: DP ranks carrying tokens this step (0: all)
    dp: int
    ep: int
    expert_slots: int  # per rank, ceil((E + R) / ep)
    redundant_experts: int
    eplb: bool
    rank_imbalance: float  # the busiest EP rank's load over the uniform expectation used
