"""Per-op FLOPs, bytes and roofline time.

Bytes are what a kernel really addresses: each input read once and each output
written once (fused kernels are single ops in the trace), and a stride-0
broadcast dim counts once. Time:

    t = max(flops / (peak · eff_compute), bytes / (hbm_bw · eff_mem)) + launch_s

The op is labelled by its bound: ``Cube`` (compute-bound matmul/attention),
``Vec`` (compute-bound vector op), ``Mem`` (memory-bound) or ``Comm``
(TP collective). Each op's FLOPs and bytes come from its formula in the op table
(:data:`simcast.cost.ops.formulas.OP_FORMULAS`), keyed by name, not by the torch object, so a
cached trace is costed without importing torch.
"""

from __future__ import annotations

from simcast.core.device import DeviceSpec
from simcast.core.dtypes import DTYPE_BYTES, element_bytes
from simcast.core.kernel_fits import GEMM_DTYPES
from simcast.cost.kernels import engine_cost
from simcast.cost.kernels.curves import saturation
from simcast.cost.kernels.moe_kernels import moe_family
from simcast.cost.ops.formulas import OP_FORMULAS
from simcast.cost.ops.op_work import CostContext, OpCost, OpWork, attention_fit_dtype, io_bytes
from simcast.trace.ir import OpRecord

__all__ = ["CostContext", "OpCost", "OpWork", "engine_roofline", "op_cost", "roofline", "roofline_parts"]


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
            eb = element_bytes(dt) if dt == "fp4" else DTYPE_BYTES.get(dt, 2)  # W4A4 GEMMs: 4-bit operands
            ridge_tokens = dev.matmul_peak(dt) * eb / (2.0 * dev.hbm_bw_bytes_per_s)
            eff = eff * saturation(m, e.matmul_half_m_ridge * ridge_tokens)
        eff = eff * saturation(n, e.matmul_half_n) * saturation(k, e.matmul_half_k)
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
    ``max(flops / (peak · eff_c), bytes / (hbm_bw · eff_m)) + launches · launch_s``."""
    if work.unit == "comm":
        return work.comm_s, "Comm"
    t_c, t_m = roofline_parts(work.flops or 1.0, work.bytes or 1.0, work.unit, dev, dtype, work.mnk)
    t_c, t_m = (t_c if work.flops else 0.0), (t_m if work.bytes else 0.0)
    bound = ("Cube" if work.unit == "cube" else "Vec") if t_c >= t_m else "Mem"
    return max(t_c, t_m) + work.launches * launch_s(dev, work.unit), bound


_ENGINE_BOUNDS = {"compute": "Cube", "memory": "Mem", "latency": "Mem"}  # a per-wave floor counts as non-compute


def gemm_family(rec: OpRecord, compute_dtype: str) -> str | None:
    """The engine GEMM fit family of a dense GEMM op, or None (no fitted family: generic roofline).

    ``linear`` runs in its compute dtype; ``quant_linear`` in its weight format when the engines
    have a fitted family for it (``fp8``, ``fp8_block``, ``nvfp4``); mxfp4 weights (w4a16 on Hopper) have none.
    An nvfp4 GEMM on a device without fp4 tensor cores runs weight-only (W4A16): no device has an nvfp4 fit
    there, so it falls to the generic roofline at the model dtype's peak, labelled.
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
        b = work.attn_batch or ctx.batch
        got = engine_cost.attention_s(
            ctx.device,
            ctx.engine,
            attention_fit_dtype(ctx.kv_bytes, dtype),  # the fit of the KV dtype the kernel reads
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
        work = OpWork(flops=0.0, bytes=io_bytes(rec, ctx.dims), unit="vec")
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
