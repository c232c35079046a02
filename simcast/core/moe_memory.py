"""Per-rank shards of routed experts (weights per layer: :mod:`simcast.core.weights`).

Experts: ``ceil((E + R) / ep)`` expert slots per rank (``R`` redundant replicas,
:mod:`simcast.core.moe_placement`; ``E / ep`` without them), each expert's FFN width split ``/ moe_tp``; shared experts
TP-sharded ``/ tp`` (vLLM). A split that does not divide the model is a one-line input error.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require
from simcast.core.model_spec import ModelSpec
from simcast.core.moe_placement import expert_slots
from simcast.core.specs import ParallelSpec


@dataclass(frozen=True, kw_only=True)
class MoEShard:
    """Per-rank MoE sizes (elements)."""

    experts_local: int
    expert_intermediate: int
    shared_intermediate: int  # all shared experts together, / tp


def moe_shard(model: ModelSpec, par: ParallelSpec) -> MoEShard:
    """Per-rank expert sizes; a one-line error when ep / moe_tp cannot split the model."""
    m = model.moe
    require(m is not None, "ep_size", par.ep, f"{model.name} has no experts")
    assert m is not None
    slots = m.num_experts + par.redundant_experts
    require(
        par.ep <= slots,
        "ep_size",
        par.ep,
        f"must be <= the {m.num_experts} experts of {model.name} plus --ep-num-redundant-experts "
        f"{par.redundant_experts}",
    )
    require(
        par.redundant_experts == 0 or par.ep > 1,
        "ep_num_redundant_experts",
        par.redundant_experts,
        "needs expert parallelism (--ep > 1)",
    )
    require(
        m.expert_intermediate % par.moe_tp == 0,
        "moe_tp_size",
        par.moe_tp,
        f"must divide moe_intermediate_size={m.expert_intermediate} of {model.name}",
    )
    shared = m.num_shared_experts * m.shared_intermediate
    require(shared % par.tp == 0, "tp_size", par.tp, f"must divide the shared experts' width {shared}")
    return MoEShard(
        experts_local=expert_slots(m.num_experts, par.redundant_experts, par.ep),
        expert_intermediate=m.expert_intermediate // par.moe_tp,
        shared_intermediate=shared // par.tp,
    )
