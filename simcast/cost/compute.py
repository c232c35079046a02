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
from dataclasses import dataclass
from typing import Callable

from ..groups import Path
from ..specs import DTYPE_BYTES, Batch, DeviceSpec
from ..trace import OpRecord, TensorArg, shape_fn
from . import comm

FA_QUERY_TILE = 128  # FlashAttention-2/3 query-block rows; KV is re-read once per query block


@dataclass(frozen=True, kw_only=True)
class CostContext:
    """Concrete dims for one microbatch on one stage."""

    batch: Batch
    device: DeviceSpec
    tp_path: Path
    collective_algorithm: str = "auto"

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
    return sum(nbytes(a, dims) for a in rec.args if isinstance(a, TensorArg)) + \
        sum(nbytes(o, dims) for o in rec.outputs)


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
    return OpWork(flops=2.0 * m * n * k + bias, bytes=_io_bytes(rec, dims), unit="cube")


@formula("simcast::attention")
def _attention(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Causal attention over each request's context + new tokens.

    FLOPs: ``4 · Hq · D · Σ_r (q_r·c_r + q_r(q_r+1)/2)`` (QK^T and PV).
    Bytes: Q read and O written once; K and V read once per query tile of
    ``FA_QUERY_TILE`` rows (GQA group heads packed into the tile), the causal
    mask skipping blocks past the diagonal (mean visible length ``c + (q+1)/2``).
    """
    q, kc = rec.args[0], rec.args[1]
    dims = ctx.dims
    d = shape_fn(kc.shape[-1])(*dims)
    hkv = shape_fn(kc.shape[-2])(*dims)
    hq = shape_fn(q.shape[-1])(*dims) // d
    b = DTYPE_BYTES[q.dtype]
    group = hq // max(hkv, 1)
    pairs = kv_bytes = 0.0
    for ql, cl in zip(ctx.batch.query_lens, ctx.batch.context_lens):
        pairs += ql * cl + ql * (ql + 1) / 2
        tiles = math.ceil(ql * group / FA_QUERY_TILE)
        visible = cl + (ql + 1) / 2 if ql > 1 else cl + 1
        kv_bytes += tiles * visible * 2 * hkv * d * b
    io = 2 * ctx.batch.num_tokens * hq * d * b
    return OpWork(flops=4.0 * hq * d * pairs, bytes=io + kv_bytes, unit="cube")


def _elementwise(flops_per_out: float):
    def fn(rec: OpRecord, ctx: CostContext) -> OpWork:
        out = sum(numel(o, ctx.dims) for o in rec.outputs)
        return OpWork(flops=flops_per_out * out, bytes=_io_bytes(rec, ctx.dims), unit="vec")
    return fn


formula("simcast::rms_norm")(_elementwise(4.0))          # x², mean, rsqrt·x, ·w
formula("simcast::fused_add_rms_norm")(_elementwise(3.0))  # per output (2 outputs): add + norm
formula("simcast::silu_and_mul")(_elementwise(5.0))      # sigmoid (~3), ·x, ·up
formula("simcast::rope")(_elementwise(3.0))              # 2 mul + add per element, cos/sin cached


@formula("simcast::kv_cache_write", "simcast::vocab_embedding", "index_select")
def _data_movement(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Gathers and scatters: the rows touched are read and written once."""
    dims = ctx.dims
    if rec.op == "simcast::kv_cache_write":  # reads k, v; writes the same bytes into the cache
        moved = 2 * sum(nbytes(a, dims) for a in rec.args[:2])
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
    return OpWork(flops=0.0, bytes=size, unit="comm",
                  comm_s=comm.all_reduce_s(size, int(rec.args[1]), ctx.tp_path, ctx.collective_algorithm))


@formula("simcast::all_gather")
def _all_gather(rec: OpRecord, ctx: CostContext) -> OpWork:
    size = nbytes(rec.outputs[0], ctx.dims)
    return OpWork(flops=0.0, bytes=size, unit="comm",
                  comm_s=comm.all_gather_s(size, int(rec.args[1]), ctx.tp_path))


def matmul_efficiency(dev: DeviceSpec, flops: float) -> float:
    e = dev.efficiency
    if e.matmul_half_size_flops <= 0:
        return e.matmul
    return e.matmul * flops / (flops + e.matmul_half_size_flops)


def memory_efficiency(dev: DeviceSpec, nbytes_: float) -> float:
    e = dev.efficiency
    if e.memory_half_size_bytes <= 0:
        return e.memory
    return e.memory * nbytes_ / (nbytes_ + e.memory_half_size_bytes)


def roofline(work: OpWork, dev: DeviceSpec, dtype: str) -> tuple[float, str]:
    """(time_s, bound) of one op instance on ``dev``."""
    if work.unit == "comm":
        return work.comm_s, "Comm"
    if work.unit == "cube":
        peak = dev.matmul_peak(dtype) * matmul_efficiency(dev, work.flops)
    else:
        peak = dev.vector_peak(dtype) * dev.efficiency.vector
    t_c = work.flops / peak if work.flops else 0.0
    t_m = work.bytes / (dev.hbm_bw_bytes_per_s * memory_efficiency(dev, work.bytes)) if work.bytes else 0.0
    bound = ("Cube" if work.unit == "cube" else "Vec") if t_c >= t_m else "Mem"
    return max(t_c, t_m) + dev.efficiency.launch_overhead_s, bound


def op_cost(rec: OpRecord, ctx: CostContext, dtype: str, count: int) -> OpCost:
    fn = OP_FORMULAS.get(rec.op)
    if fn is None:
        # Unknown op (e.g. a new elementwise op from a newer torch): memory-bound estimate, labelled.
        work = OpWork(flops=0.0, bytes=_io_bytes(rec, ctx.dims), unit="vec")
    else:
        work = fn(rec, ctx)
    t, bound = roofline(work, ctx.device, dtype)
    return OpCost(op=rec.op if fn else f"{rec.op} (unregistered: memory-bound estimate)", scope=rec.scope,
                  count=count, flops=work.flops, bytes=work.bytes, time_s=t, bound=bound)
