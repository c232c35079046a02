"""Leaf ops and the layer block of Gated DeltaNet linear attention (Qwen3-Next), as vLLM runs it on one TP rank.

vLLM ``model_executor/models/qwen3_next.py`` ``Qwen3NextGatedDeltaNet``: ``in_proj_qkvz`` and ``in_proj_ba``
(column-parallel), a causal depthwise conv over q, k, v (``causal_conv1d_fn`` for prefill, ``causal_conv1d_update``
for decode), the gated delta rule (fla's ``chunk_gated_delta_rule`` for prefill, ``fused_recurrent_gated_delta_rule``
for decode: ``vllm/model_executor/layers/fla/ops/``), ``RMSNormGated`` (norm times SiLU(z)) and the row-parallel
``out_proj`` (all-reduce after it). Every op has only a fake kernel and stays one graph node.

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


@torch.library.custom_op(f"{_LIB}::causal_conv1d", mutates_args=())
def causal_conv1d(
    x: torch.Tensor, weight: torch.Tensor, query_lens: torch.Tensor, context_lens: torch.Tensor
) -> torch.Tensor:
    """Causal depthwise conv of ``weight.shape[1]`` taps over x (T, C), each request's conv window read and
    written (a state of ``(taps - 1) x C`` per request)."""
    _no_kernel()


@causal_conv1d.register_fake
def _(x, weight, query_lens, context_lens):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::gated_delta_rule", mutates_args=())
def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    query_lens: torch.Tensor,
    context_lens: torch.Tensor,
    k_head_dim: int,
    v_head_dim: int,
) -> torch.Tensor:
    """The gated delta rule: q, k (T, Hk·dk), v (T, Hv·dv) -> o (T, Hv·dv); each value head carries a
    ``dk x dv`` state per request (read at the start of the step, written at its end)."""
    _no_kernel()


@gated_delta_rule.register_fake
def _(q, k, v, query_lens, context_lens, k_head_dim, v_head_dim):
    return torch.empty_like(v)


@torch.library.custom_op(f"{_LIB}::gated_rms_norm", mutates_args=())
def gated_rms_norm(x: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of x over each head's ``weight.shape[0]`` channels, times SiLU(z); x, z (T, n)."""
    _no_kernel()


@gated_rms_norm.register_fake
def _(x, z, weight, eps):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_LIB}::sigmoid_mul", mutates_args=())
def sigmoid_mul(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """x · sigmoid(gate), elementwise (Qwen3-Next's attention output gate)."""
    _no_kernel()


@sigmoid_mul.register_fake
def _(x, gate):
    return torch.empty_like(x)


class GatedDeltaNet(nn.Module):
    """One Gated DeltaNet layer on one TP rank (heads split ``/ tp``); returns out_proj's partial sum."""

    def __init__(self, k: StageKey, **mk) -> None:
        super().__init__()
        self.k = k
        hk, hv = k.linear_k_heads, k.linear_v_heads
        self.key_dim, self.value_dim = hk * k.linear_k_dim, hv * k.linear_v_dim
        fmt = k.dense_format
        self.in_proj_qkvz = Linear(k.hidden_size, 2 * self.key_dim + 2 * self.value_dim, False, fmt, **mk)
        self.in_proj_ba = Linear(k.hidden_size, 2 * hv, False, fmt, **mk)
        conv_dim = 2 * self.key_dim + self.value_dim
        self.conv_weight = nn.Parameter(torch.empty(conv_dim, k.linear_conv_kernel, **mk))
        self.norm = nn.Parameter(torch.empty(k.linear_v_dim, **mk))
        self.out_proj = Linear(self.value_dim, k.hidden_size, False, fmt, **mk)

    def forward(self, hidden, query_lens, context_lens):
        k = self.k
        qkvz = self.in_proj_qkvz(hidden)
        self.in_proj_ba(hidden)  # b (beta) and a (decay) per value head: read by the fused kernel
        qkv, z = qkvz.split([2 * self.key_dim + self.value_dim, self.value_dim], dim=-1)
        qkv = causal_conv1d(qkv, self.conv_weight, query_lens, context_lens)
        q, kk, v = qkv.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        o = gated_delta_rule(q, kk, v, query_lens, context_lens, k.linear_k_dim, k.linear_v_dim)
        o = gated_rms_norm(o, z, self.norm, k.rms_norm_eps)
        return self.out_proj(o)


__all__ = ["GatedDeltaNet", "ops"]
