"""Which engine's fitted kernels cost an op, and the op's time with them.

``--engine vllm|sglang|trtllm`` picks the profile's ``engines.<engine>`` section.
Kernel kinds are resolved one by one (GEMM per dtype family, prefill and decode
attention per KV dtype, all-reduce): the requested engine's fit if the profile
has one, else the nearest engine's, labelled as a fallback, else the device's
generic roofline (also labelled). Nearest: vLLM and SGLang share kernel families
(torch/cuBLAS GEMMs, FlashAttention/FlashInfer attention, SGLang's custom
all-reduce is adapted from vLLM's), TensorRT-LLM ships its own kernels; so
vllm <-> sglang first, then trtllm.

This module only reads plain values (no import of :mod:`simcast.cost.ops.compute`,
which calls it).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from simcast.core.assumption import KernelSource, KernelsUsed
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.core.kernel_fits import EngineKernels, GemmFit
from simcast.core.specs import Batch
from simcast.cost.comm import collectives
from simcast.cost.kernels import moe_kernels
from simcast.cost.kernels.attention_launch import attention_launch
from simcast.cost.kernels.curves import smooth_max
from simcast.cost.kernels.gemm import PEAK_DTYPE, gemm_envelope
from simcast.cost.ops.batches import Batches
from simcast.engines import ENGINES, NCCL, get_engine

FALLBACK: dict[str, tuple[str, ...]] = {n: get_engine(n).kernel_fallback for n in ENGINES}
KINDS = ("gemm", "prefill", "decode", "all_reduce")


def check_engine(engine: str | None, field: str = "--engine") -> str | None:
    """None (generic kernels), an engine name, or ``nccl`` (NCCL's own collectives); else a one-line error."""
    require(
        engine is None or engine in ENGINES or engine == NCCL,
        field,
        engine,
        f"allowed: {', '.join(ENGINES)} (or {NCCL} for NCCL's own all-reduce rows)",
    )
    return engine


def _has(ek: EngineKernels, kind: str, dtype: str) -> Any:
    if kind == "gemm":
        return ek.gemm_fit(dtype)
    if kind == "prefill":
        return ek.prefill_fit(dtype)
    if kind == "decode":
        return ek.decode_fit(dtype)
    if kind == "moe":
        return ek.moe_fit(dtype)
    if kind in ("dispatch", "combine"):  # dtype carries the DeepEP mode here
        return ek.a2a_fit(dtype, kind)
    return ek.all_reduce or None


def pick(dev: DeviceSpec, engine: str | None, kind: str, dtype: str = "bf16") -> tuple[Any, str]:
    """(fit, engine it came from) for one kernel kind; (None, "") when no engine section has one."""
    if engine is None or engine == NCCL:
        return None, ""
    for e in (engine,) + FALLBACK.get(engine, ()):
        ek = dev.engines.get(e)
        if ek is not None:
            fit = _has(ek, kind, dtype)
            if fit is not None:
                return fit, e
    return None, ""


def label(dev: DeviceSpec, engine: str | None, kind: str, dtype: str = "bf16") -> str:
    """How one kernel kind is costed for ``engine`` on ``dev`` (for outputs and assumptions)."""
    return source_label(engine, kind, dtype, pick(dev, engine, kind, dtype)[1], dev.name)


def source_label(engine: str | None, kind: str, dtype: str, fitted_by: str, device_name: str) -> str:
    """The words for one kernel kind's source: ``fitted_by`` the engine whose fit is used ("" none)."""
    if engine is None:
        return "generic roofline (no --engine)"
    if engine == NCCL:
        return "NCCL's own collectives (link fits)"
    if not fitted_by:
        generic = "link formula" if kind in ("dispatch", "combine") else "generic roofline"
        if kind in ("gemm", "moe") and PEAK_DTYPE.get(dtype) == "fp4":  # the fp4 peak (W4A4) or 16-bit (W4A16)
            return f"{generic}, transferred/unfitted (no {dtype} table of {device_name})"
        return f"{generic} (no engine fit for {kind} {dtype} on {device_name})"
    return f"{fitted_by} fit" + ("" if fitted_by == engine else f" (fallback: no {engine} fit on {device_name})")


def kernel_sources(
    dev: DeviceSpec, engine: str | None, dtype: str, gemm_dtype: str | None = None, moe: str = ""
) -> KernelsUsed:
    """Which fit costs each kernel kind for ``engine`` (a report's assumption record).

    ``gemm_dtype``: the dense GEMMs' family when it differs from ``dtype`` (fp8 / fp8_block / mxfp4
    weights); ``moe``: the routed experts' weight format of a MoE model ("" for a dense model): their
    grouped GEMMs and the all-to-all (DeepEP normal / low-latency) are listed too.
    """
    g = gemm_dtype or dtype
    kinds = [(k, g if k == "gemm" else dtype) for k in KINDS]
    if moe:
        kinds += [("moe", moe), ("dispatch", "normal"), ("dispatch", "low_latency")]
    sources = tuple(
        KernelSource(
            kind=k,
            dtype=d,
            fitted_by=pick(dev, engine, k, d)[1],
            quantised_weights=k == "gemm" and bool(gemm_dtype) and gemm_dtype != dtype,
        )
        for k, d in kinds
    )
    used = tuple(sorted({u for k in KINDS for u in (pick(dev, engine, k, dtype)[1],) if u}))
    return KernelsUsed(
        engine=engine,
        device_name=dev.name,
        profile_has_engines=bool(dev.engines),
        kernels=sources,
        tables_from=used,
    )


# ------------------------------------------------------------------ op times
def gemm_s(
    dev: DeviceSpec, engine: str | None, dtype: str, m: int, n: int, k: int, captured: bool = True
) -> tuple[float, str] | None:
    """(seconds, compute|memory|latency) of a GEMM with the engine's fit; None without one.

    ``captured``: the step is replayed from a CUDA graph (:mod:`simcast.engines.cuda_graphs`); eager calls
    take at least the fit's host floor when it has one. :func:`simcast.cost.kernels.gemm.gemm_envelope` on one row.
    """
    fit, _ = pick(dev, engine, "gemm", dtype)
    if fit is None:
        return None
    return _gemm_one(fit, dev.matmul_peak(PEAK_DTYPE[fit.dtype]), dev.hbm_bw_bytes_per_s, m, n, k, captured)


@lru_cache(maxsize=1 << 16)
def _gemm_one(fit: GemmFit, peak: float, bw: float, m: int, n: int, k: int, captured: bool) -> tuple[float, str]:
    t, kind = gemm_envelope(fit, peak, bw, np.array([m]), int(n), int(k), bool(captured))
    return float(t[0]), str(kind[0])


def attention_s(
    dev: DeviceSpec,
    engine: str | None,
    dtype: str,
    query_lens: Sequence[int],
    context_lens: Sequence[int],
    heads: int,
    kv_heads: int,
    head_dim: int,
    v_head_dim: int = 0,
    phase: str = "auto",
    counts: Sequence[int] = (),
) -> tuple[float, str] | None:
    """(seconds, bound) of one attention launch over a batch of requests; None without a fit.

    Request group ``i`` is ``counts[i]`` identical requests (default one each).
    :func:`simcast.cost.kernels.attention_launch.attention_launch` on this one batch (its docstring states the
    decode, prefill and mixed-batch rules).
    """
    batch = Batch(query_lens=tuple(query_lens), context_lens=tuple(context_lens), counts=tuple(counts))
    dec_fit, _ = pick(dev, engine, "decode", dtype)
    pre_fit, _ = pick(dev, engine, "prefill", dtype)
    t, kind, ok = attention_launch(
        dev, dec_fit, pre_fit, dtype, Batches.of([batch]), heads, kv_heads, head_dim, v_head_dim, phase
    )
    return (float(t[0]), str(kind[0])) if ok[0] else None


def all_reduce_s(
    dev: DeviceSpec, engine: str | None, n: int, message_bytes: float, cross_node: bool
) -> tuple[float, str] | None:
    """The engine's all-reduce as it issues it (one-shot / two-shot / NCCL regimes); None without a fit.

    Engine custom all-reduce kernels work through NVLink peer memory inside one node, so a
    group that spans nodes (or ``engine`` nccl / None) is left to NCCL's own link fits.
    """
    if cross_node or n <= 1 or message_bytes <= 0:
        return None
    fits, _ = pick(dev, engine, "all_reduce")
    if not fits:
        return None
    got = collectives.piecewise_s(fits, "all_reduce", n, message_bytes)
    if got is None:
        return None
    t, regime = got
    return t, regime.algorithm or "fitted"


def moe_s(
    dev: DeviceSpec,
    engine: str | None,
    family: str,
    pairs: float,
    active: float,
    i: int,
    h: int,
    routed_pairs: float,
) -> tuple[float, str] | None:
    """(seconds, compute|memory) of one rank's routed experts with the engine's MoE fit; None without one.

    ``routed_pairs``: the layer input's tokens × top-k (all ranks' pairs, :func:`moe_kernels.routing_s`)."""
    fit, _ = pick(dev, engine, "moe", family)
    if fit is None:
        return None
    peak = dev.matmul_peak(moe_kernels.PEAK_DTYPE[fit.dtype])
    t_c, t_m = moe_kernels.moe_parts(fit, peak, dev.hbm_bw_bytes_per_s, pairs, active, i, h)
    t = float(smooth_max(t_c, t_m, p=fit.smooth_p)) + fit.launch_s + float(moe_kernels.routing_s(fit, routed_pairs))
    return t, "compute" if float(t_c) >= float(t_m) else "memory"


def a2a_s(dev: DeviceSpec, engine: str | None, mode: str, phase: str, sent_bytes: float) -> float | None:
    """Seconds of one MoE dispatch or combine (DeepEP ``mode``) with the engine's fit; None without one."""
    fit, _ = pick(dev, engine, phase, mode)
    return None if fit is None else float(moe_kernels.a2a_time_s(fit, sent_bytes))
