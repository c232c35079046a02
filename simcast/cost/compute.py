"""Per-op FLOPs, bytes and roofline time.

Bytes are what a kernel really addresses: each input read once and each output
written once (fused kernels are single ops in the trace), and a stride-0
broadcast dim counts once. Time:

    t = max(flops / (peak · eff_compute), bytes / (hbm_bw · eff_mem)) + launch_s

The op is labelled by its bound: ``Cube`` (compute-bound matmul/attention),
``Vec`` (compute-bound vector op), ``Mem`` (memory-bound) or ``Comm``
(TP collective). The registry maps an op name from the trace to its formula;
it is keyed by name, not by the torch object, so a cached trace is costed
without importing torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simcast.core.kernel_fits import GEMM_DTYPES
from simcast.core.layout import Path
from simcast.core.specs import DTYPE_BYTES, Batch, DeviceSpec
from simcast.cost import comm, engine_cost
from simcast.cost.moe_kernels import moe_family
from simcast.trace.ir import OpRecord, TensorArg, shape_fn

FA_QUERY_TILE = 128  # FlashAttention-2/3 query-block rows; KV is re-read once per query block


@dataclass(frozen=True, kw_only=True)
class CostContext:
    """Concrete dims for one microbatch on one stage."""

    batch: Batch
    device: DeviceSpec
    tp_path: Path
    collective_algorithm: str = "auto"
    engine: str | None = None  # vllm | sglang | trtllm: the profile's fitted kernels for that engine
    attention_phase: str = "auto"  # "prefill": cost 1-token prompts with the prefill fit (kernel benchmarks)
    moe_path: Path | None = None  # MoE dispatch/combine group (None: the TP path)
    expert_imbalance: float = 1.0  # busiest expert rank's load / the uniform-routing expectation
    kv_bytes: float = 0.0  # bytes per KV-cache element (--kv-cache-dtype); 0: the traced cache tensor's dtype
    captured: bool = True  # the step replays a captured CUDA graph (core.cuda_graphs); False: host floors apply

    def cache_bytes(self, cache: TensorArg) -> float:
        """Bytes per element of the KV cache ``cache`` as stored (an fp8 cache halves a bf16 one)."""
        return self.kv_bytes or DTYPE_BYTES[cache.dtype]

    @property
    def dims(self) -> tuple[int, int, int]:
        return self.batch.num_tokens, self.batch.num_requests, self.batch.kv_tokens


@dataclass(frozen=True, kw_only=True)
class OpWork:
    """What an op does: FLOPs, HBM bytes, which unit it runs on; comm ops carry their time."""

    flops: float
    bytes: float
    unit: str  # "cube" | "vec" | "comm"
    comm_s: float = 0.0
    mnk: tuple[int, int, int] | None = None  # GEMM shape (rows M, cols N, reduction K) for the shape curves
    attn: tuple[int, int, int] | None = None  # attention (query heads, KV heads, head_dim) per rank
    dtype: str | None = None  # compute dtype when it differs from the model's (fp8 GEMMs)
    # routed experts: (pairs, active experts, i per rank, h, routed pairs = layer tokens · top_k)
    moe: tuple[float, float, int, int, float] | None = None


@dataclass(frozen=True, kw_only=True)
class OpCost:
    op: str
    scope: str
    count: int  # times this op runs in the stage (layer replay)
    flops: float
    bytes: float
    time_s: float  # one instance
    bound: str  # Cube | Vec | Mem | Comm


def numel(t: TensorArg, dims: tuple[int, int, int], addressed: bool = False) -> int:
    n = 1
    for i, e in enumerate(t.shape):
        if addressed and i in t.broadcast_dims:
            continue
        n *= shape_fn(e)(*dims)
    return n


def nbytes(t: TensorArg | None, dims: tuple[int, int, int]) -> float:
    """Bytes a kernel addresses for ``t`` (stride-0 dims counted once)."""
    if not isinstance(t, TensorArg):
        return 0.0
    return numel(t, dims, addressed=True) * DTYPE_BYTES.get(t.dtype, 8 if t.dtype == "int64" else 4)


def _io_bytes(rec: OpRecord, dims) -> float:
    return sum(nbytes(a, dims) for a in rec.args if isinstance(a, TensorArg)) + sum(
        nbytes(o, dims) for o in rec.outputs
    )


OP_FORMULAS: dict[str, Callable[[OpRecord, CostContext], OpWork]] = {}


def formula(*names: str):
    def deco(fn):
        for n in names:
            OP_FORMULAS[n] = fn
        return fn

    return deco


@formula("linear")
def _linear(rec: OpRecord, ctx: CostContext) -> OpWork:
    x, w = rec.args[0], rec.args[1]
    dims = ctx.dims
    m = numel(x, dims) // shape_fn(x.shape[-1])(*dims)
    n, k = (shape_fn(e)(*dims) for e in w.shape)
    bias = m * n if len(rec.args) > 2 and isinstance(rec.args[2], TensorArg) else 0
    return OpWork(flops=2.0 * m * n * k + bias, bytes=_io_bytes(rec, dims), unit="cube", mnk=(m, n, k))


@formula("simcast::attention")
def _attention(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Causal attention over each request's context + new tokens.

    FLOPs: ``4 · Hq · D · Σ_r (q_r·c_r + q_r(q_r+1)/2)`` (QK^T and PV).
    Bytes: Q read and O written once (activation dtype); K and V read, in the cache's own
    element type (``--kv-cache-dtype``), once per query tile of
    ``FA_QUERY_TILE`` rows (GQA group heads packed into the tile), the causal
    mask skipping blocks past the diagonal (mean visible length ``c + (q+1)/2``).
    """
    q, kc = rec.args[0], rec.args[1]
    dims = ctx.dims
    d = shape_fn(kc.shape[-1])(*dims)
    hkv = shape_fn(kc.shape[-2])(*dims)
    hq = shape_fn(q.shape[-1])(*dims) // d
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(kc)
    b_ = ctx.batch
    pairs, tile_tokens = _attention_sums(b_.query_lens, b_.context_lens, b_.counts, hq // max(hkv, 1))
    io = 2 * ctx.batch.num_tokens * hq * d * b
    return OpWork(
        flops=4.0 * hq * d * pairs, bytes=io + tile_tokens * 2 * hkv * d * kvb, unit="cube", attn=(hq, hkv, d)
    )


VECTORISE_GROUPS = 64  # above this many request groups numpy beats a Python loop


@lru_cache(maxsize=4096)
def _attention_sums(
    query_lens: tuple[int, ...], context_lens: tuple[int, ...], counts: tuple[int, ...], group: int
) -> tuple[float, float]:
    """(query-key pairs, KV tokens read summed over query tiles) of a batch, weighted by group counts.

    Per request: pairs ``q·c + q(q+1)/2``; KV tokens ``ceil(q·group/128) · (c + (q+1)/2)``
    (``c + 1`` for a decode). O(groups); vectorised with numpy for many groups.
    """
    if len(query_lens) > VECTORISE_GROUPS:
        qa = np.asarray(query_lens, dtype=np.float64)
        ca = np.asarray(context_lens, dtype=np.float64)
        na = np.asarray(counts, dtype=np.float64)
        tiles_a = np.ceil(qa * group / FA_QUERY_TILE)
        seen = np.where(qa > 1, ca + (qa + 1) / 2, ca + 1)
        return float(np.sum(na * (qa * ca + qa * (qa + 1) / 2))), float(np.sum(na * tiles_a * seen))
    pairs = kv_tokens = 0.0
    for ql, cl, n in zip(query_lens, context_lens, counts):
        pairs += n * (ql * cl + ql * (ql + 1) / 2)
        tiles = math.ceil(ql * group / FA_QUERY_TILE)
        kv_tokens += n * tiles * (cl + (ql + 1) / 2 if ql > 1 else cl + 1)
    return pairs, kv_tokens


def _elementwise(flops_per_out: float):
    def fn(rec: OpRecord, ctx: CostContext) -> OpWork:
        out = sum(numel(o, ctx.dims) for o in rec.outputs)
        return OpWork(flops=flops_per_out * out, bytes=_io_bytes(rec, ctx.dims), unit="vec")

    return fn


formula("simcast::rms_norm")(_elementwise(4.0))  # x², mean, rsqrt·x, ·w
formula("simcast::fused_add_rms_norm")(_elementwise(3.0))  # per output (2 outputs): add + norm
formula("simcast::silu_and_mul")(_elementwise(5.0))  # sigmoid (~3), ·x, ·up
formula("simcast::rope")(_elementwise(3.0))  # 2 mul + add per element, cos/sin cached


@formula("simcast::kv_cache_write", "simcast::vocab_embedding", "index_select")
def _data_movement(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Gathers and scatters: the rows touched are read and written once."""
    dims = ctx.dims
    if rec.op == "simcast::kv_cache_write":  # reads k, v; writes them into the cache in its own element type
        read = sum(nbytes(a, dims) for a in rec.args[:2])
        moved = read + read * ctx.cache_bytes(rec.args[2]) / DTYPE_BYTES[rec.args[0].dtype]
    elif rec.op == "simcast::vocab_embedding":  # ids + gathered rows + output
        moved = nbytes(rec.args[0], dims) + 2 * nbytes(rec.outputs[0], dims)
    else:  # index_select: rows selected + indices + output
        moved = 2 * nbytes(rec.outputs[0], dims) + nbytes(rec.args[2], dims)
    return OpWork(flops=0.0, bytes=moved, unit="vec")


@formula("simcast::sample")
def _sample(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Greedy/top-k sampling: logits read once (fp32 softmax ≈ 5 FLOPs/elem)."""
    n = numel(rec.args[0], ctx.dims)
    return OpWork(flops=5.0 * n, bytes=nbytes(rec.args[0], ctx.dims), unit="vec")


@formula("simcast::all_reduce")
def _all_reduce(rec: OpRecord, ctx: CostContext) -> OpWork:
    size = nbytes(rec.args[0], ctx.dims)
    n = int(rec.args[1])
    eng = engine_cost.all_reduce_s(ctx.device, ctx.engine, n, size, ctx.tp_path.cross_node)
    return OpWork(
        flops=0.0,
        bytes=size,
        unit="comm",
        comm_s=eng[0] if eng else comm.all_reduce_s(size, n, ctx.tp_path, ctx.collective_algorithm),
    )


@formula("simcast::all_gather")
def _all_gather(rec: OpRecord, ctx: CostContext) -> OpWork:
    size = nbytes(rec.outputs[0], ctx.dims)
    return OpWork(flops=0.0, bytes=size, unit="comm", comm_s=comm.all_gather_s(size, int(rec.args[1]), ctx.tp_path))


def _saturation(size, half: float):
    """``size / (size + half)``; 1 when the curve is disabled (``half <= 0``). Works on numpy arrays."""
    return size / (size + half) if half > 0 else 1.0


def matmul_efficiency(dev: DeviceSpec, mnk: tuple | None = None, dtype: str | None = None) -> float:
    """Fraction of the matmul peak a GEMM/attention kernel reaches.

    ``matmul [· sat(M) · sat(N) · sat(K)]`` where ``sat(d) = d / (d + d_half)``;
    the M half point scales with the device's ridge intensity in tokens
    (``peak[dtype] · dtype_bytes / (2 · hbm_bw)``). Array-friendly (calibration evaluates it on numpy arrays).
    """
    e = dev.efficiency
    eff = e.matmul
    if mnk is not None:
        m, n, k = mnk
        if e.matmul_half_m_ridge > 0:
            dt = dtype or "bf16"
            ridge_tokens = dev.matmul_peak(dt) * DTYPE_BYTES.get(dt, 2) / (2.0 * dev.hbm_bw_bytes_per_s)
            eff = eff * _saturation(m, e.matmul_half_m_ridge * ridge_tokens)
        eff = eff * _saturation(n, e.matmul_half_n) * _saturation(k, e.matmul_half_k)
    return eff


def memory_efficiency(dev: DeviceSpec, nbytes_: float, unit: str = "cube") -> float:
    """Fraction of HBM bandwidth reached: GEMM/attention (``cube``) or other (``vec``) kernels."""
    e = dev.efficiency
    base = e.vector_memory if unit == "vec" and e.vector_memory > 0 else e.memory
    return base


def roofline_parts(flops, nbytes_, unit: str, dev: DeviceSpec, dtype: str, mnk: tuple | None = None):
    """(compute_s, memory_s) of a kernel, without launch overhead. Array-friendly (both > 0 for arrays)."""
    if unit == "cube":
        peak = dev.matmul_peak(dtype) * matmul_efficiency(dev, mnk, dtype)
    else:
        peak = dev.vector_peak(dtype) * dev.efficiency.vector
    return flops / peak, nbytes_ / (dev.hbm_bw_bytes_per_s * memory_efficiency(dev, nbytes_, unit))


def roofline(work: OpWork, dev: DeviceSpec, dtype: str) -> tuple[float, str]:
    """(time_s, bound) of one op instance on ``dev``:
    ``max(flops / (peak · eff_c), bytes / (hbm_bw · eff_m)) + launch_s``."""
    if work.unit == "comm":
        return work.comm_s, "Comm"
    t_c, t_m = roofline_parts(work.flops or 1.0, work.bytes or 1.0, work.unit, dev, dtype, work.mnk)
    t_c, t_m = (t_c if work.flops else 0.0), (t_m if work.bytes else 0.0)
    bound = ("Cube" if work.unit == "cube" else "Vec") if t_c >= t_m else "Mem"
    return max(t_c, t_m) + launch_s(dev, work.unit), bound


_ENGINE_BOUNDS = {"compute": "Cube", "memory": "Mem", "latency": "Mem"}  # a per-wave floor counts as non-compute


def gemm_family(rec: OpRecord, compute_dtype: str) -> str | None:
    """The engine GEMM fit family of a dense GEMM op, or None (no fitted family: generic roofline).

    ``linear`` runs in its compute dtype; ``quant_linear`` in its weight format when the engines
    have a fitted family for it (``fp8``, ``fp8_block``); mxfp4 weights (w4a16 on Hopper) have none.
    Grouped MoE expert GEMMs are not dense GEMMs and keep their own formula.
    """
    if rec.op == "linear":
        return compute_dtype
    if rec.op == "simcast::quant_linear":
        fmt = str(rec.args[2])
        return fmt if fmt in GEMM_DTYPES else None
    return None


def engine_roofline(rec: OpRecord, work: OpWork, ctx: CostContext, dtype: str) -> tuple[float, str]:
    """(time_s, bound) with the engine's fitted GEMM / attention kernels, else the generic roofline."""
    got = None
    family = gemm_family(rec, dtype) if work.mnk is not None else None
    if family is not None and work.mnk is not None:
        got = engine_cost.gemm_s(ctx.device, ctx.engine, family, *work.mnk, captured=ctx.captured)
    elif work.moe is not None:
        family = moe_family(str(rec.args[5]))
        got = engine_cost.moe_s(ctx.device, ctx.engine, family, *work.moe) if family else None
    elif work.attn is not None:
        b = ctx.batch
        got = engine_cost.attention_s(
            ctx.device,
            ctx.engine,
            "fp8" if ctx.kv_bytes == 1 else dtype,  # the fit of the KV dtype the kernel reads
            b.query_lens,
            b.context_lens,
            *work.attn,
            phase=ctx.attention_phase,
            counts=b.counts,
        )
    if got is None:
        return roofline(work, ctx.device, dtype)
    return got[0], _ENGINE_BOUNDS[got[1]]


def launch_s(dev: DeviceSpec, unit: str) -> float:
    """Fixed per-kernel time: GEMM/attention kernels, or the vector kernels' own when fitted."""
    e = dev.efficiency
    return (
        e.vector_launch_overhead_s if unit == "vec" and e.vector_launch_overhead_s is not None else e.launch_overhead_s
    )


def op_cost(rec: OpRecord, ctx: CostContext, dtype: str, count: int) -> OpCost:
    fn = OP_FORMULAS.get(rec.op)
    if fn is None:
        # Unknown op (e.g. a new elementwise op from a newer torch): memory-bound estimate, labelled.
        work = OpWork(flops=0.0, bytes=_io_bytes(rec, ctx.dims), unit="vec")
    else:
        work = fn(rec, ctx)
    if ctx.engine is not None:
        t, bound = engine_roofline(rec, work, ctx, work.dtype or dtype)
    else:
        t, bound = roofline(work, ctx.device, work.dtype or dtype)
    return OpCost(
        op=rec.op if fn else f"{rec.op} (unregistered: memory-bound estimate)",
        scope=rec.scope,
        count=count,
        flops=work.flops,
        bytes=work.bytes,
        time_s=t,
        bound=bound,
    )
