"""Mixture of experts: the routed-expert sub-spec and the default routing skew.

:class:`MoESpec` is the frozen sub-spec :class:`simcast.core.model_spec.ModelSpec` carries when a config
has routed experts (``None`` for a dense model). Element counts, not bytes; bytes come from
:class:`simcast.core.quant.QuantSpec`. Constructors validate and never touch files.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require

ROUTING_GINI = 0.105
"""Gini coefficient of per-expert token counts on real text, the most balanced band measured: DeepSeek-MoE-16B
on wikitext, 0.105 (Ma et al., "Diagnosing Overhead in Dispatch Operations: Cross-architecture Observatory",
arXiv:2605.20982, 2026: five MoE checkpoints incl. Qwen3-30B and DeepSeek-V2-Lite on H100s; MLA and GDN
models stay above 0.24, GQA lies between; EP size changes the per-expert max/mean ratio by <= 5 %)."""
DEFAULT_EXPERT_IMBALANCE = round(1.0 + 3.0 * ROUTING_GINI, 3)
"""Default busiest-expert load over the uniform expectation, 1.315: loads spread evenly between ``1 - a`` and
``1 + a`` times the mean have Gini ``a / 3``, so max/mean = ``1 + 3 · Gini`` (an assumption on the shape of
the load profile; the cited paper gives the Gini). Applied to the busiest EP rank as if its hottest expert's
excess were the rank's (the upper side when a rank holds many experts); ``--expert-imbalance`` overrides."""


@dataclass(frozen=True, kw_only=True)
class MoESpec:
    """Routed experts of a sparse MLP (Mixtral, Qwen3-MoE, DeepSeek-V3, gpt-oss).

    ``expert_intermediate`` is one expert's FFN width (gate/up columns, down rows);
    ``num_shared_experts`` always-on experts of width ``shared_intermediate`` each
    (DeepSeek: 1 x 2048); layers ``< first_k_dense`` use the dense MLP of width
    ``ModelSpec.intermediate_size`` instead (DeepSeek ``first_k_dense_replace``).
    ``expert_bias``: gate_up and down carry biases (gpt-oss); ``router_bias``: the
    router has a per-expert bias (gpt-oss; DeepSeek's ``e_score_correction_bias``).
    ``expert_groups`` / ``topk_groups``: node-limited (group-limited) routing, DeepSeek ``n_group`` /
    ``topk_group``: a token's experts come from at most ``topk_groups`` of ``expert_groups`` contiguous
    groups (1 / 1: no groups).
    ``layer_step``: every ``layer_step``-th layer is MoE (layer ``i`` when ``(i + 1) % layer_step == 0``),
    the others dense (Llama-4's ``interleave_moe_layer_step``; vLLM ``llama4.py`` and HF use this rule).
    """

    num_experts: int
    top_k: int
    expert_intermediate: int
    num_shared_experts: int = 0
    shared_intermediate: int = 0
    first_k_dense: int = 0
    expert_bias: bool = False
    router_bias: bool = False
    expert_groups: int = 1
    topk_groups: int = 1
    layer_step: int = 1

    def __post_init__(self) -> None:
        for f in ("num_experts", "top_k", "expert_intermediate"):
            v = getattr(self, f)
            require(isinstance(v, int) and v > 0, f"model.moe.{f}", v, "a positive integer is required")
        require(
            self.top_k <= self.num_experts,
            "model.moe.top_k",
            self.top_k,
            f"must be <= the number of experts ({self.num_experts})",
        )
        require(self.num_shared_experts >= 0, "model.moe.num_shared_experts", self.num_shared_experts, "must be >= 0")
        require(
            self.num_shared_experts == 0 or self.shared_intermediate > 0,
            "model.moe.shared_intermediate",
            self.shared_intermediate,
            "must be > 0 when there are shared experts",
        )
        require(
            self.expert_groups >= 1 and 1 <= self.topk_groups <= self.expert_groups,
            "model.moe.topk_groups",
            f"{self.topk_groups} of {self.expert_groups}",
            "needs 1 <= topk_group <= n_group",
        )
        require(self.first_k_dense >= 0, "model.moe.first_k_dense", self.first_k_dense, "must be >= 0")
        require(self.layer_step >= 1, "model.moe.layer_step", self.layer_step, "must be >= 1")

    def is_moe_layer(self, layer: int) -> bool:
        return layer >= self.first_k_dense and (layer + 1) % self.layer_step == 0
