"""Leaf ops and the layer block of a mixture-of-experts MLP.

Like :mod:`simcast.trace.ops`, every op has only a fake kernel and stays one graph node
at the place the engine launches it:

- ``moe_topk``: router softmax/sigmoid + top-k (one fused kernel in vLLM/SGLang).
- ``moe_dispatch`` / ``moe_combine``: the EP all-to-all (DeepEP-style) or, with no EP
  across replicas, the all-gather / reduce-scatter of the tokens; cost from the link table.
- ``moe_experts``: the fused grouped expert GEMMs (gate/up, activation, down) of this
  rank's ``experts_local`` experts, weights in ``fmt`` (``bf16``, ``fp8_block``, ``mxfp4``).
  Its tokens per rank come from the routing model at cost time (:mod:`simcast.cost.ops.moe`).

MLA: :mod:`simcast.trace.mla`; quantised linears: :mod:`simcast.trace.quant`; sliding-window
attention: :mod:`simcast.trace.ops`.

Importing this module imports torch.
"""

from __future__ import annotations

import torch
from torch import nn

from simcast.trace import ops
from simcast.trace.key import StageKey
from simcast.trace.ops import _LIB
from simcast.trace.ops import no_kernel as _no_kernel
from simcast.trace.quant import Linear


@torch.library.custom_op(f"{_LIB}::moe_topk", mutates_args=())
def moe_topk(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Router scores (T, E) -> top-k weights (T, k) fp32 and expert ids (T, k) int32."""
    _no_kernel()


@moe_topk.register_fake
def _(logits, top_k):
    t = logits.shape[0]
    return logits.new_empty((t, top_k), dtype=torch.float32), logits.new_empty((t, top_k), dtype=torch.int32)


@torch.library.custom_op(f"{_LIB}::moe_dispatch", mutates_args=())
def moe_dispatch(
    x: torch.Tensor, topk_ids: torch.Tensor, mode: str, ep: int, dp: int, num_experts: int, tp: int
) -> torch.Tensor:
    """Send each token to the ranks of its experts (``all_to_all``) or gather all replicas' tokens (``all_gather``)."""
    _no_kernel()


@moe_dispatch.register_fake
def _(x, topk_ids, mode, ep, dp, num_experts, tp):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::moe_combine", mutates_args=())
def moe_combine(
    y: torch.Tensor, topk_ids: torch.Tensor, mode: str, ep: int, dp: int, num_experts: int, tp: int
) -> torch.Tensor:
    """Return expert outputs to their tokens' ranks (the inverse of :func:`moe_dispatch`)."""
    _no_kernel()


@moe_combine.register_fake
def _(y, topk_ids, mode, ep, dp, num_experts, tp):
    return torch.empty_like(y)


@torch.library.custom_op(f"{_LIB}::moe_experts", mutates_args=())
def moe_experts(
    x: torch.Tensor,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    fmt: str,
    top_k: int,
    num_experts: int,
    ep: int,
    moe_dp: int,
    dp: int,
) -> torch.Tensor:
    """Fused MoE: x (T, H); w13 (E_local, 2·I_r, H); w2 (E_local, H, I_r) -> (T, H)."""
    _no_kernel()


@moe_experts.register_fake
def _(x, topk_weights, topk_ids, w13, w2, fmt, top_k, num_experts, ep, moe_dp, dp):
    return torch.empty_like(x)


class MoEBlock(nn.Module):
    """Router, top-k, dispatch, grouped experts, combine, shared experts, reduction (one rank)."""

    def __init__(self, k: StageKey, **mk) -> None:
        super().__init__()
        self.k = k
        h = k.hidden_size
        self.gate = nn.Linear(h, k.num_experts, bias=k.router_bias, **mk)  # router: replicated, model dtype
        self.w13 = nn.Parameter(torch.empty(k.experts_local, 2 * k.expert_intermediate, h, **mk))
        self.w2 = nn.Parameter(torch.empty(k.experts_local, h, k.expert_intermediate, **mk))
        self.shared_gate_up = (
            Linear(h, 2 * k.shared_intermediate, False, k.expert_format, **mk) if k.shared_intermediate else None
        )
        self.shared_down = (
            Linear(k.shared_intermediate, h, False, k.expert_format, **mk) if k.shared_intermediate else None
        )

    def forward(self, hidden):
        k = self.k
        weights, ids = moe_topk(self.gate(hidden), k.top_k)
        x = hidden
        if k.moe_comm in ("all_to_all", "all_gather"):
            x = moe_dispatch(x, ids, k.moe_comm, k.ep, k.dp, k.num_experts, k.tp)
        out = moe_experts(
            x, weights, ids, self.w13, self.w2, k.expert_format or k.dtype, k.top_k, k.num_experts, k.ep, k.moe_dp, k.dp
        )
        if k.moe_comm in ("all_to_all", "all_gather"):
            out = moe_combine(out, ids, k.moe_comm, k.ep, k.dp, k.num_experts, k.tp)
        if self.shared_gate_up is not None:
            out = out + self.shared_down(ops.silu_and_mul(self.shared_gate_up(hidden)))
        if k.moe_comm == "all_reduce":  # EP / MoE-TP inside the TP group: partial sums reduced like a dense MLP
            out = ops.all_reduce(out, k.tp)
        return out
