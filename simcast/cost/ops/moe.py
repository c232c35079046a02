"""Cost formulas of the MoE ops (:mod:`simcast.trace.moe`): routed experts, dispatch/combine, router top-k.

Expert load (uniform top-k routing, the default). ``N = dp · T / moe_dp`` tokens enter one
MoE-DP group's ``ep`` ranks (``T`` tokens per replica; ``dp`` replicas share the MoE layer).
Each token picks ``k`` distinct experts of ``E`` uniformly, so the token-expert pairs on a
rank holding ``E/ep`` experts have mean ``μ = N·k/ep`` and variance
``σ² = N·k·(1/ep)(1 − 1/ep)(E − k)/(E − 1)`` (hypergeometric per token, tokens independent).
The busiest of ``ep`` ranks is taken as ``μ + σ·√(2 ln ep)`` (Gaussian extreme value),
times ``expert_imbalance`` (``--expert-imbalance``, 1 = uniform), capped at
``N · min(k, E/ep)``. Experts with at least one token on the rank:
``(E/ep)·(1 − (1 − k/E)^N)``; only their weights are read. A grouped GEMM's rows per expert
are the rank's pairs over those experts.

All-to-all (DeepEP-style dispatch and combine, the same bytes each way): each rank sends its
``T/tp`` tokens once per *destination rank* holding one of their experts (expected
``ep·(1 − C(E − E/ep, k)/C(E, k))`` ranks per token), ``(ep−1)/ep`` of them remote:
``t = latency + bytes / (bw · eff)`` over the MoE group's bottleneck link.

With ``--engine`` and a profile that has that engine's fits (:mod:`simcast.cost.kernels.moe_kernels`), the
routed experts and the all-to-all inside a node are costed with them instead (fallbacks labelled). When the
engine runs DeepEP (``--moe-a2a-backend deepep``: :class:`~simcast.core.moe_comm.MoECommPlan`), an
all-to-all without such a fit (across nodes, or no engine) is DeepEP's (:mod:`simcast.cost.comm.deepep`:
per-node deduplication over RDMA, NVLink forwarding, FP8 dispatch for FP8 experts, BF16 combine).
"""

from __future__ import annotations

import math

from simcast.core.dtypes import DTYPE_BYTES, WEIGHT_FORMAT_BYTES, gemm_compute_dtype
from simcast.core.layout import Path
from simcast.cost.comm import deepep
from simcast.cost.comm import time as comm
from simcast.cost.kernels import engine_cost
from simcast.cost.kernels.moe_kernels import ranks_per_token
from simcast.cost.ops.op_work import CostContext, OpWork, io_bytes, numel
from simcast.trace.ir import OpRecord, shape_fn

MOE_BLOCK_M = 16


def busiest_rank_pairs(tokens: float, top_k: int, num_experts: int, ep: int, imbalance: float = 1.0) -> float:
    """Expected token-expert pairs on the busiest of ``ep`` expert ranks (module docstring)."""
    mean = tokens * top_k / ep
    if ep > 1 and num_experts > 1:
        var = tokens * top_k * (1 / ep) * (1 - 1 / ep) * (num_experts - top_k) / (num_experts - 1)
        mean += math.sqrt(var) * math.sqrt(2 * math.log(ep))
    return min(mean * imbalance, tokens * min(top_k, num_experts // ep))


def active_experts(tokens: float, top_k: int, num_experts: int, ep: int) -> float:
    """Expected experts of one rank that receive at least one of ``tokens`` tokens."""
    return (num_experts / ep) * (1 - (1 - top_k / num_experts) ** tokens)


def moe_group_tokens(tokens_per_rank: float, dp: int, moe_dp: int, active_dp_ranks: int = 0) -> float:
    """Tokens entering the busiest MoE-DP group: ``dp / moe_dp`` attention replicas feed each group, each
    with ``tokens_per_rank``; with only ``active_dp_ranks`` of them carrying tokens (one prompt on an idle
    attention-DP layout: 1), the busiest group holds ``min(active, dp / moe_dp)`` replicas' tokens."""
    if not active_dp_ranks or active_dp_ranks >= dp:
        return dp * tokens_per_rank / moe_dp
    return tokens_per_rank * min(active_dp_ranks, dp / moe_dp)


def moe_experts(rec: OpRecord, ctx: CostContext) -> OpWork:
    x, w13 = rec.args[0], rec.args[3]
    fmt, top_k, num_e, ep, moe_dp, dp = rec.args[5:11]
    dims = ctx.dims
    t = shape_fn(x.shape[0])(*dims)
    h = shape_fn(x.shape[1])(*dims)
    e_local, two_i = (shape_fn(e)(*dims) for e in w13.shape[:2])
    i_r = two_i // 2
    tokens = moe_group_tokens(t, dp, moe_dp, ctx.active_dp_ranks)
    pairs = busiest_rank_pairs(tokens, top_k, num_e, ep, ctx.expert_imbalance)
    act = max(1.0, min(e_local, active_experts(tokens, top_k, num_e, ep)))
    flops = 2.0 * pairs * h * 3 * i_r
    wb = WEIGHT_FORMAT_BYTES.get(fmt, DTYPE_BYTES.get(fmt, 2))
    ab = DTYPE_BYTES[x.dtype]
    bytes_ = act * 3 * h * i_r * wb + pairs * (2 * h + 3 * i_r) * ab
    # one grouped kernel over all active experts: each expert's rows padded to the kernel's M tile
    # (vLLM moe_align_block_size; 16 rows, the smallest block) -> the kernel's M for the shape curve
    rows = act * math.ceil(max(pairs / act, 1.0) / MOE_BLOCK_M) * MOE_BLOCK_M
    return OpWork(
        flops=flops,
        bytes=bytes_,
        unit="cube",
        mnk=(int(rows), 2 * i_r, h),
        dtype=gemm_compute_dtype(fmt, x.dtype, ctx.device.has_fp4),
        moe=(pairs, act, i_r, h, tokens * top_k),
    )


def dispatch_combine(rec: OpRecord, ctx: CostContext) -> OpWork:
    x = rec.args[0]
    mode, ep, dp, num_e, tp = rec.args[2:7]
    dims = ctx.dims
    t, h = (shape_fn(e)(*dims) for e in x.shape)
    b = DTYPE_BYTES[x.dtype]
    path = ctx.moe_path or ctx.tp_path
    top_k = shape_fn(rec.args[1].shape[1])(*dims)
    if mode == "all_gather":  # every rank gathers all dp replicas' tokens; combine is the reduce-scatter
        # a step with idle DP ranks gathers only the busy ranks' tokens: SGLang pads an extend batch's gather
        # to the sum of the ranks' tokens (DpPaddingMode.get_dp_padding_mode: SUM_LEN when is_extend_in_batch;
        # sgl-project/sglang python/sglang/srt/layers/dp_attention.py)
        busy = ctx.active_dp_ranks if 0 < ctx.active_dp_ranks < dp else dp
        size = busy * t * h * b
        return OpWork(flops=0.0, bytes=size, unit="comm", comm_s=comm.all_gather_s(size, dp, path))
    sent = (t / tp) * ranks_per_token(top_k, num_e, ep) * (ep - 1) / ep * h * b
    plan = ctx.moe_comm
    phase = "dispatch" if rec.op.endswith("dispatch") else "combine"
    if ctx.engine is not None and not path.cross_node:
        # the engine's fitted DeepEP kernels: low-latency mode for decode steps, normal mode otherwise
        mode = (
            plan.mode_for(ctx.batch.is_decode)
            if plan is not None
            else "low_latency"
            if ctx.batch.is_decode
            else "normal"
        )
        got = engine_cost.a2a_s(ctx.device, ctx.engine, mode, phase, sent)
        if got is not None:
            return OpWork(flops=0.0, bytes=sent, unit="comm", comm_s=got)
    if plan is not None and plan.deepep:
        return deepep_work(ctx, path, phase, t / tp, h, b, top_k, num_e, ep)
    return OpWork(flops=0.0, bytes=sent, unit="comm", comm_s=comm.all_to_all_s(sent, path))


def deepep_work(
    ctx: CostContext, path: Path, phase: str, tokens: float, h: int, act_bytes: float, top_k: int, num_e: int, ep: int
) -> OpWork:
    """One DeepEP dispatch or combine of ``tokens`` per rank (:mod:`simcast.cost.comm.deepep`): the EP group's
    ranks per node and link rates from its path (a group spanning nodes: its hierarchy; else one node)."""
    assert ctx.moe_comm is not None
    hier = path.hierarchy
    if hier is not None:
        g, intra, inter = hier.ranks_per_node, hier.intra.bw_bytes_per_s, hier.inter.bw_bytes_per_s
    elif path.cross_node:  # uneven spread over nodes: one rank per node, every hop over the fabric
        g, intra, inter = 1, path.bw_bytes_per_s, path.bw_bytes_per_s
    else:
        g, intra, inter = ep, path.bw_bytes_per_s, path.bw_bytes_per_s
    call = deepep.DeepEPCall(
        mode=ctx.moe_comm.mode_for(ctx.batch.is_decode),
        phase=phase,
        tokens=tokens,
        hidden=int(h),
        top_k=int(top_k),
        num_experts=int(num_e),
        ep=int(ep),
        ranks_per_node=g,
        intra_bw_bytes_per_s=intra,
        inter_bw_bytes_per_s=inter,
        fp8_dispatch=ctx.fp8_dispatch,
        act_bytes=act_bytes,
        expert_groups=ctx.routing_groups[0],
        topk_groups=ctx.routing_groups[1],
    )
    tr = deepep.traffic_of(call)
    return OpWork(flops=0.0, bytes=tr.rdma_bytes + tr.nvlink_bytes, unit="comm", comm_s=deepep.deepep_s(call))


def moe_topk(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Router softmax/sigmoid + top-k: logits read once, ~5 FLOPs per logit."""
    n = numel(rec.args[0], ctx.dims)
    return OpWork(flops=5.0 * n, bytes=io_bytes(rec, ctx.dims), unit="vec")
