"""Cost formulas of the MoE, MLA, sliding-window and quantised-GEMM ops (:mod:`simcast.trace.moe`).

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

With ``--engine`` and a profile that has that engine's fits (:mod:`simcast.cost.moe_kernels`), the
routed experts and the all-to-all inside a node are costed with them instead (fallbacks labelled).
"""

from __future__ import annotations

import math

from simcast.core.moe import WEIGHT_FORMAT_BYTES
from simcast.core.specs import DTYPE_BYTES
from simcast.cost import comm, engine_cost
from simcast.cost.compute import FA_QUERY_TILE, CostContext, OpWork, _attention_sums, _io_bytes, formula, nbytes, numel
from simcast.cost.moe_kernels import ranks_per_token
from simcast.trace.ir import OpRecord, shape_fn

MOE_BLOCK_M = 16
MOE_OPS = ("simcast::moe_experts", "simcast::moe_dispatch", "simcast::moe_combine", "simcast::moe_topk")


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


def _fmt_dtype(fmt: str, model_dtype: str) -> str:
    """Compute dtype of a GEMM with weights in ``fmt``: fp8 weights run w8a8 at the fp8 peak;
    mxfp4 on Hopper runs w4a16 (weights dequantised in the kernel) at the 16-bit peak."""
    return "fp8" if fmt.startswith("fp8") else model_dtype


@formula("simcast::moe_experts")
def _moe_experts(rec: OpRecord, ctx: CostContext) -> OpWork:
    x, w13 = rec.args[0], rec.args[3]
    fmt, top_k, num_e, ep, moe_dp, dp = rec.args[5:11]
    dims = ctx.dims
    t = shape_fn(x.shape[0])(*dims)
    h = shape_fn(x.shape[1])(*dims)
    e_local, two_i = (shape_fn(e)(*dims) for e in w13.shape[:2])
    i_r = two_i // 2
    tokens = dp * t / moe_dp
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
        dtype=_fmt_dtype(fmt, x.dtype),
        moe=(pairs, act, i_r, h, tokens * top_k),
    )


def _a2a(rec: OpRecord, ctx: CostContext) -> OpWork:
    x = rec.args[0]
    mode, ep, dp, num_e, tp = rec.args[2:7]
    dims = ctx.dims
    t, h = (shape_fn(e)(*dims) for e in x.shape)
    b = DTYPE_BYTES[x.dtype]
    path = ctx.moe_path or ctx.tp_path
    top_k = shape_fn(rec.args[1].shape[1])(*dims)
    if mode == "all_gather":  # every rank gathers all dp replicas' tokens; combine is the reduce-scatter
        size = dp * t * h * b
        return OpWork(flops=0.0, bytes=size, unit="comm", comm_s=comm.all_gather_s(size, dp, path))
    sent = (t / tp) * ranks_per_token(top_k, num_e, ep) * (ep - 1) / ep * h * b
    if ctx.engine is not None and not path.cross_node:
        # the engine's fitted DeepEP kernels: low-latency mode for decode steps, normal mode otherwise
        mode = "low_latency" if ctx.batch.is_decode else "normal"
        phase = "dispatch" if rec.op.endswith("dispatch") else "combine"
        got = engine_cost.a2a_s(ctx.device, ctx.engine, mode, phase, sent)
        if got is not None:
            return OpWork(flops=0.0, bytes=sent, unit="comm", comm_s=got)
    return OpWork(flops=0.0, bytes=sent, unit="comm", comm_s=comm.all_to_all_s(sent, path))


formula("simcast::moe_dispatch", "simcast::moe_combine")(_a2a)


@formula("simcast::moe_topk")
def _topk(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Router softmax/sigmoid + top-k: logits read once, ~5 FLOPs per logit."""
    n = numel(rec.args[0], ctx.dims)
    return OpWork(flops=5.0 * n, bytes=_io_bytes(rec, ctx.dims), unit="vec")


@formula("simcast::quant_linear")
def _quant_linear(rec: OpRecord, ctx: CostContext) -> OpWork:
    x, w, fmt = rec.args[0], rec.args[1], rec.args[2]
    dims = ctx.dims
    m = numel(x, dims) // shape_fn(x.shape[-1])(*dims)
    n, k = (shape_fn(e)(*dims) for e in w.shape)
    ab = DTYPE_BYTES[x.dtype]
    bytes_ = n * k * WEIGHT_FORMAT_BYTES[fmt] + m * (k + n) * ab
    return OpWork(flops=2.0 * m * n * k, bytes=bytes_, unit="cube", mnk=(m, n, k), dtype=_fmt_dtype(fmt, x.dtype))


@formula("simcast::mla_cache_write")
def _mla_write(rec: OpRecord, ctx: CostContext) -> OpWork:
    read = nbytes(rec.args[0], ctx.dims) + nbytes(rec.args[1], ctx.dims)
    moved = read + read * ctx.cache_bytes(rec.args[2]) / DTYPE_BYTES[rec.args[0].dtype]
    return OpWork(flops=0.0, bytes=moved, unit="vec")


@formula("simcast::mla_attention")
def _mla_attention(rec: OpRecord, ctx: CostContext) -> OpWork:
    """MLA as vLLM/SGLang run it.

    Prefill rows (q > 1): the latent of context + new tokens is decompressed by kv_b
    (``2·tokens·kv_lora·heads·(nope+v)``), then causal attention with qk dim ``nope+rope``
    and v dim ``v``. Decode rows (q = 1): weight absorption — q_nope·W_UK per head
    (``2·heads·nope·kv_lora``), attention over the latent as one shared KV head of width
    ``kv_lora + rope`` (scores) and ``kv_lora`` (values), then ·W_UV (``2·heads·kv_lora·v``).
    """
    q, cache = rec.args[0], rec.args[1]
    heads, nope, rope, v = (int(a) for a in rec.args[5:9])
    dims = ctx.dims
    lat = shape_fn(cache.shape[-1])(*dims) - rope
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(cache)
    flops = bytes_ = 0.0
    bt = ctx.batch
    pre = [(ql, cl, n) for ql, cl, n in zip(bt.query_lens, bt.context_lens, bt.counts) if ql > 1]
    dec = [(cl, n) for ql, cl, n in zip(bt.query_lens, bt.context_lens, bt.counts) if ql == 1]
    if pre:
        qs, cs, ns = (tuple(p[i] for p in pre) for i in range(3))
        pairs, tile_tokens = _attention_sums(qs, cs, ns, 1)
        q_tok = sum(ql * n for ql, n in zip(qs, ns))
        kv_tokens = q_tok + sum(cl * n for cl, n in zip(cs, ns))
        flops += 2.0 * kv_tokens * lat * heads * (nope + v) + 2.0 * heads * (nope + rope + v) * pairs
        bytes_ += (
            kv_tokens * (lat + rope) * kvb
            + kv_tokens * heads * (nope + v + nope + rope) * b * 2
            + q_tok * heads * (nope + rope + v) * b
            + heads * (nope + v) * lat * b
        )
    if dec:
        r = sum(n for _, n in dec)
        ctxs = sum((cl + 1) * n for cl, n in dec)
        flops += 2.0 * r * heads * (nope * lat + lat * v) + 2.0 * heads * ctxs * ((lat + rope) + lat)
        tiles = math.ceil(heads / FA_QUERY_TILE)  # heads packed into the query tile (FlashMLA)
        bytes_ += tiles * ctxs * (lat + rope) * kvb + r * heads * (nope + rope + v) * b + heads * (nope + v) * lat * b
    return OpWork(flops=flops, bytes=bytes_, unit="cube")


@formula("simcast::attention_sliding")
def _attention_sliding(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Causal attention with each query seeing at most ``window`` keys: context capped at the window."""
    q, kc, window = rec.args[0], rec.args[1], int(rec.args[6])
    dims = ctx.dims
    d = shape_fn(kc.shape[-1])(*dims)
    hkv = shape_fn(kc.shape[-2])(*dims)
    hq = shape_fn(q.shape[-1])(*dims) // d
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(kc)
    pairs = tile_tokens = 0.0
    for ql, c0, n in zip(ctx.batch.query_lens, ctx.batch.context_lens, ctx.batch.counts):  # O(groups)
        cl = min(c0, window)
        vis = min(ql, window)  # a long prefill: each query sees <= window keys
        pairs += n * (ql * min(cl + (ql + 1) / 2, window) if ql > 1 else min(cl + 1, window))
        tiles = math.ceil(ql * (hq // max(hkv, 1)) / FA_QUERY_TILE)
        tile_tokens += n * (tiles * min(cl + vis, window + FA_QUERY_TILE) if ql > 1 else min(cl + 1, window))
    io = 2 * ctx.batch.num_tokens * hq * d * b
    return OpWork(flops=4.0 * hq * d * pairs, bytes=io + tile_tokens * 2 * hkv * d * kvb, unit="cube")
