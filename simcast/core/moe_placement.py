"""Wide expert parallelism: expert slots per rank with redundant experts, and the load the busiest rank keeps
after placement (EPLB).

Slots: ``E`` logical experts plus ``R`` redundant replicas (SGLang ``--ep-num-redundant-experts``, vLLM
``--eplb-config '{"num_redundant_experts": R}'``) are spread over ``ep`` ranks, ``ceil((E + R) / ep)`` slots
each (a rank short of a full set holds empty slots), so ``ep`` need not divide ``E`` (EP48, EP72, EP96).

Busiest rank's load over the mean (the ``expert_imbalance`` the routed-expert cost multiplies,
:mod:`simcast.cost.ops.moe`):

- EPLB off: today's model, unchanged with or without redundant experts — ``--expert-imbalance`` (default
  ``1 + 3·Gini``, :data:`simcast.core.moe.DEFAULT_EXPERT_IMBALANCE`): the hottest expert's excess lands on one
  rank. Static redundant slots replicate experts by id (SGLang's trivial initial placement maps physical slot
  ``p`` to logical expert ``p mod E``), not by load, so they do not lower it.
- EPLB on: the placement deepseek-ai/EPLB computes (``eplb.py`` ``rebalance_experts`` with one group and
  node, its global policy): ``replicate_experts`` gives each of the ``R`` redundant slots to the expert with
  the highest load per replica, then ``balanced_packing`` places the replicas, heaviest first, on the
  lightest rank with a free slot. simcast runs those two steps on the load profile the default imbalance
  assumes (expert loads evenly spread between ``1 − a`` and ``1 + a`` times the mean, ``a`` = imbalance − 1)
  and returns the busiest rank's load over the mean rank's. An assumption: the profile is the routing
  statistics EPLB balances, and the placement is current (SGLang rebalances every
  ``--eplb-rebalance-num-iterations`` steps).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simcast.core.specs import SimSpec


def expert_slots(num_experts: int, redundant: int, ep: int) -> int:
    """Expert slots per rank: ``ceil((E + R) / ep)``."""
    return math.ceil((num_experts + redundant) / ep)


def load_profile(num_experts: int, imbalance: float) -> list[float]:
    """Per-expert loads (mean 1) evenly spread between ``2 − imbalance`` and ``imbalance`` (module docstring)."""
    a = imbalance - 1.0
    return [1.0 - a + 2.0 * a * (i + 0.5) / num_experts for i in range(num_experts)]


@lru_cache(maxsize=256)
def eplb_imbalance(num_experts: int, redundant: int, ep: int, imbalance: float) -> float:
    """Busiest rank's load over the mean rank's after EPLB's replicate + balanced packing (module docstring)."""
    loads = load_profile(num_experts, imbalance)
    count = [1] * num_experts
    for _ in range(redundant):  # replicate_experts: the highest load per replica gets the next slot
        i = max(range(num_experts), key=lambda j: loads[j] / count[j])
        count[i] += 1
    items = sorted((loads[i] / count[i] for i in range(num_experts) for _ in range(count[i])), reverse=True)
    slots = expert_slots(num_experts, redundant, ep)
    packs, filled = [0.0] * ep, [0] * ep
    for w in items:  # balanced_packing: heaviest first onto the lightest pack with a free slot
        p = min((k for k in range(ep) if filled[k] < slots), key=packs.__getitem__)
        packs[p] += w
        filled[p] += 1
    return max(packs) / (sum(loads) / ep)


def placement_imbalance(num_experts: int, redundant: int, ep: int, imbalance: float, eplb: bool) -> float:
    """The busiest EP rank's load over the uniform expectation with this placement: ``imbalance`` itself
    without EPLB (exactly today's model), else :func:`eplb_imbalance` (never below 1)."""
    if not eplb or ep <= 1:
        return imbalance
    return max(1.0, eplb_imbalance(num_experts, redundant, ep, imbalance))


def rank_imbalance(spec: SimSpec) -> float:
    """The busiest expert rank's load over the uniform expectation with the layout's expert placement
    (:func:`simcast.core.moe_placement.placement_imbalance`: ``spec.expert_imbalance`` without EPLB)."""
    m, par = spec.model.moe, spec.parallel
    if m is None or not par.eplb:
        return spec.expert_imbalance
    return placement_imbalance(m.num_experts, par.redundant_experts, par.ep, spec.expert_imbalance, True)
