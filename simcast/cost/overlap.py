"""MoE communication hidden behind compute, as the engines schedule it: two-batch overlap (TBO) and
single-batch overlap (SBO). Pure functions over one stage's op costs (:class:`OpCost`, with replay counts).

**Two-batch overlap** (SGLang ``--enable-two-batch-overlap``; ``sgl-project/sglang``
``python/sglang/srt/operations_strategy.py`` @ 1e90555b, ``_compute_moe_deepseek_blog_prefill`` / ``_decode``):
the batch is split in two micro-batches A and B whose layer operations interleave at yield points. Per MoE
layer and micro-batch the chain is ``c1`` (attention, router, shared experts and the rest of the layer's
compute) -> dispatch ``d`` -> ``c2`` (routed experts) -> combine ``k`` -> the next layer's ``c1``. Compute
runs on one stream in the order A.c1, B.c1, A.c2, B.c2, A.c1', ... and the DeepEP kernels on their own
SMs in the order A.d, B.d, A.k, B.k, ...; each op starts when its stream is free and its predecessor in
the chain is done. So A's dispatch runs under B's ``c1``, B's dispatch under A's experts, and so on: the
step takes ``max(compute, comm)`` plus what the chain cannot hide (the first ``c1`` and the last
combine, and every slot where one side is longer). The SMs the DeepEP normal kernels hold are taken from
the GEMMs meanwhile (``deep_gemm_num_sms = total - DeepEPConfig.num_sms``): the compute-bound DeepGEMM
GEMMs of the overlapped layers (:data:`DEEPGEMM_OPS`) run ``total / (total - comm_sms)`` slower. Ops
outside the MoE layers (embedding, LM head, dense layers) run as before, both micro-batches back to back.

Bounds (``tests/cost/test_overlap.py``): ``max(C, M) <= t_TBO <= C + M`` with ``C`` the two
micro-batches' compute (after the SM share) and ``M`` their communication.

**Single-batch overlap** (SGLang ``--enable-single-batch-overlap``; ``python/sglang/srt/single_batch_overlap.py``
@ 04d8ec18, ``execute_sbo``): the shared experts run on a second stream beside the combine, with
``SGLANG_DEEPEP_LL_COMBINE_SEND_NUM_SMS`` (32) SMs left to the combine: per MoE layer the combine and the
shared experts take ``max(k, s · total/(total - 32))`` instead of ``k + s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcast.cost.ops.op_work import OpCost

DISPATCH, COMBINE, EXPERTS = "moe_dispatch", "moe_combine", "moe_experts"
DEEPGEMM_OPS = ("quant_linear", "moe_experts")
"""The GEMMs SGLang runs through DeepGEMM (the ones ``configure_deep_gemm_num_sms`` limits during TBO)."""


def _slowed(c: OpCost) -> bool:
    """A DeepGEMM GEMM bound by compute: it runs on the SMs DeepEP leaves."""
    return c.bound == "Cube" and c.op.split("::")[-1] in DEEPGEMM_OPS


def _kind(op: str) -> str:
    """``dispatch``, ``combine``, ``experts`` or ``other`` for an op name (``simcast::moe_dispatch``, ...)."""
    for k in (DISPATCH, COMBINE, EXPERTS):
        if op.endswith(k):
            return k
    return "other"


@dataclass(frozen=True, kw_only=True)
class LayerParts:
    """One micro-batch's stage split for the overlap: per MoE layer ``c1_s`` (compute but the routed
    experts), ``experts_s``, ``dispatch_s``, ``combine_s``; ``moe_layers`` of them; ``rest_s`` the compute
    outside them (seconds)."""

    c1_s: float
    experts_s: float
    dispatch_s: float
    combine_s: float
    moe_layers: int
    rest_s: float


def moe_layer_counts(costs: Sequence[OpCost]) -> dict[str, int]:
    """The MoE layers of a stage: each traced scope holding a dispatch, with its replay count."""
    return {c.scope: c.count for c in costs if _kind(c.op) == DISPATCH}


def in_moe_layer(c: OpCost, layers: dict[str, int]) -> bool:
    """``c`` runs once per replay of a MoE layer (its scope holds a dispatch replayed as often)."""
    return layers.get(c.scope) == c.count


def layer_parts(costs: Sequence[OpCost], cube_slowdown: float = 1.0) -> LayerParts:
    """The parts of one micro-batch's op costs, per MoE layer (the mean over the stage's MoE layers: the
    traced scopes holding a dispatch, each replayed ``count`` times); ops outside them are ``rest_s``; the
    compute-bound DeepGEMM GEMMs of the MoE layers run ``cube_slowdown`` times slower."""
    layers = moe_layer_counts(costs)
    n = sum(layers.values())
    c1 = experts = d = k = rest = 0.0
    for c in costs:
        if not in_moe_layer(c, layers):
            rest += c.time_s * c.count
            continue
        kind = _kind(c.op)
        t = c.time_s * c.count * (cube_slowdown if _slowed(c) else 1.0)
        if kind == DISPATCH:
            d += t
        elif kind == COMBINE:
            k += t
        elif kind == EXPERTS:
            experts += t
        else:
            c1 += t
    per = 1 / n if n else 0.0
    return LayerParts(
        c1_s=c1 * per, experts_s=experts * per, dispatch_s=d * per, combine_s=k * per, moe_layers=n, rest_s=rest
    )


def two_batch_s(a: LayerParts, b: LayerParts) -> float:
    """Seconds of the MoE layers of two interleaved micro-batches (module docstring), by simulating the
    compute and communication streams over the layers."""
    parts = (a, b)
    compute_free = comm_free = 0.0
    ready = [0.0, 0.0]  # when each micro-batch's next compute may start (its last combine done)
    for _ in range(max(a.moe_layers, b.moe_layers)):
        dispatched = [0.0, 0.0]
        for i, p in enumerate(parts):  # c1 of A, then B; each launches its dispatch
            compute_free = max(compute_free, ready[i]) + p.c1_s
            comm_free = max(comm_free, compute_free) + p.dispatch_s
            dispatched[i] = comm_free
        for i, p in enumerate(parts):  # routed experts of A, then B; each launches its combine
            compute_free = max(compute_free, dispatched[i]) + p.experts_s
            comm_free = max(comm_free, compute_free) + p.combine_s
            ready[i] = comm_free
    return max(compute_free, *ready)


def two_batch_costs(a: Sequence[OpCost], b: Sequence[OpCost], cube_slowdown: float = 1.0) -> tuple[OpCost, ...]:
    """The op costs of a batch run as two overlapped micro-batches ``a`` and ``b`` (same ops, same order):
    each op's time is the two halves' sum (the SM share applied to the MoE layers' DeepGEMM GEMMs), and
    the dispatch/combine times are scaled so that the stage sums to the overlapped time (what stays
    exposed of the communication; 0 when it is all hidden)."""
    pa, pb = layer_parts(a, cube_slowdown), layer_parts(b, cube_slowdown)
    moe_compute = sum(p.moe_layers * (p.c1_s + p.experts_s) for p in (pa, pb))
    moe_comm = sum(p.moe_layers * (p.dispatch_s + p.combine_s) for p in (pa, pb))
    exposed = max(0.0, two_batch_s(pa, pb) - moe_compute)
    scale = exposed / moe_comm if moe_comm > 0 else 0.0
    layers = moe_layer_counts(a)
    out = []
    for x, y in zip(a, b):
        kind = _kind(x.op)
        t = x.time_s + y.time_s
        if kind in (DISPATCH, COMBINE):
            t *= scale
        elif _slowed(x) and in_moe_layer(x, layers):  # slowed in the MoE layers only
            t *= cube_slowdown
        out.append(replace(x, time_s=t, flops=x.flops + y.flops, bytes=x.bytes + y.bytes))
    return tuple(out)


SHARED_OPS = ("quant_linear", "silu_and_mul", "linear")
"""Op names of the shared experts (gate/up, activation, down: :class:`simcast.trace.moe.MoEBlock`)."""


def shared_expert_indices(costs: Sequence[OpCost], combine: int) -> tuple[int, ...]:
    """Indices of the shared-expert ops of the combine at index ``combine``: those right after it in its
    layer (the MoE block traces the shared experts after the combine)."""
    out: list[int] = []
    j = combine + 1
    while j < len(costs) and costs[j].scope == costs[combine].scope and costs[j].op.split("::")[-1] in SHARED_OPS:
        out.append(j)
        j += 1
    return tuple(out)


def single_batch_costs(costs: Sequence[OpCost], comm_sms: int, total_sms: int) -> tuple[OpCost, ...]:
    """The op costs with the shared experts beside the combine on ``total_sms - comm_sms`` SMs: they take
    ``s' = s · total/(total - comm)`` and the combine keeps what they do not cover, ``max(k, s') - s'``
    (per MoE layer; no shared experts: unchanged)."""
    slow = total_sms / max(1, total_sms - comm_sms)
    out = list(costs)
    for i, c in enumerate(costs):
        if _kind(c.op) != COMBINE:
            continue
        idx = shared_expert_indices(costs, i)
        if not idx:
            continue
        shared = sum(costs[j].time_s for j in idx) * slow
        out[i] = replace(c, time_s=max(c.time_s, shared) - shared)
        for j in idx:
            out[j] = replace(costs[j], time_s=costs[j].time_s * slow)
    return tuple(out)
