"""Which engine's fitted kernels cost an op, and the op's time with them.

``--engine vllm|sglang|trtllm`` picks the profile's ``engines.<engine>`` section.
Kernel kinds are resolved one by one (GEMM per dtype family, prefill and decode
attention per KV dtype, all-reduce): the requested engine's fit if the profile
has one, else the nearest engine's, labelled as a fallback, else the device's
generic roofline (also labelled). Nearest: vLLM and SGLang share kernel families
(torch/cuBLAS GEMMs, FlashAttention/FlashInfer attention, SGLang's custom
all-reduce is adapted from vLLM's), TensorRT-LLM ships its own kernels; so
vllm <-> sglang first, then trtllm.

This module only reads plain values (no import of :mod:`simcast.cost.compute`,
which calls it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from simcast.core.assumption import KernelSource, KernelsUsed
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.core.kernel_fits import EngineKernels
from simcast.cost import attention as attn
from simcast.cost import collectives, moe_kernels
from simcast.cost.curves import saturation, smooth_max
from simcast.cost.diff_kv import diff_kv_s
from simcast.cost.flash_decode import FA2_CTAS_PER_SM, FA2_VARLEN_RULE, fa2_copies_s, fa2_launch
from simcast.cost.gemm import PEAK_DTYPE, gemm_bound, gemm_eval_s
from simcast.cost.prefill_rules import rule_tile, tile_kv_heads
from simcast.cost.xqa_launch import xqa_launch_terms
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
    take at least the fit's host floor when it has one.
    """
    fit, _ = pick(dev, engine, "gemm", dtype)
    if fit is None:
        return None
    peak = dev.matmul_peak(PEAK_DTYPE[fit.dtype])
    t = gemm_eval_s(fit, peak, dev.hbm_bw_bytes_per_s, m, n, k, captured)
    return t, gemm_bound(fit, peak, dev.hbm_bw_bytes_per_s, m, n, k, captured)


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

    Request group ``i`` is ``counts[i]`` identical requests (default one each). Decode requests
    (one new token) use the decode fit with the batch's total KV read and split-KV units; prefill
    requests the prefill fit with their tiled causal FLOPs summed and the mean query length for
    the efficiency. A mixed batch (chunked prefill beside decodes, one varlen launch in
    vLLM/SGLang) costs both parts and one launch. ``phase="prefill"`` costs every request with
    the prefill fit (a 1-token prompt is a prefill). ``v_head_dim`` (0: ``head_dim``): the values' head size;
    a decode with distinct sizes is costed as :mod:`simcast.cost.diff_kv` states (prefill keeps ``head_dim``).
    """
    dv = v_head_dim or head_dim
    dm = (head_dim + dv) / 2
    q = np.asarray(query_lens, dtype=float)
    c = np.asarray(context_lens, dtype=float)
    n = np.asarray(counts, dtype=float) if len(counts) else np.ones_like(q)
    dec, pre = (q == 1, q > 1) if phase != "prefill" else (q < 0, q >= 1)
    peak = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16")
    parts: list[tuple[float, float, str]] = []  # (time without launch, launch, bound)
    if dec.any():
        fit, _ = pick(dev, engine, "decode", dtype)
        if fit is None:
            return None
        w = n[dec]
        kv = attn.decode_kv_padded(
            fit, peak, dev.hbm_bw_bytes_per_s, heads, kv_heads, head_dim, float(np.sum(w)), c[dec] + 1, float(dv)
        )
        # the batch's totals: for equal requests this is attention.decode_parts exactly
        # the kernel family the engine picks for this launch (its batch and longest context)
        reads, cta_heads, wave_s = (
            float(v) for v in attn.decode_kernel(fit, float(np.sum(w)), float(np.max(kv)), heads, kv_heads, head_dim)
        )
        units = float(np.sum(w * cta_heads * np.maximum(1.0, kv / fit.split_tokens)))
        t_w = float(np.ceil(np.sum(w) * cta_heads / fit.sm_count)) * wave_s
        if fit.kernel_rule == FA2_VARLEN_RULE:  # no split for group 1; CTAs over 2 slots per SM
            units = float(np.sum(fa2_launch(fit, w, kv, heads, kv_heads, head_dim)[0]))
            t_w = float(np.ceil(units / (FA2_CTAS_PER_SM * fit.sm_count))) * wave_s
        mean_kv = float(np.sum(w * kv) / np.sum(w))
        nbytes = float(np.sum(w * attn.decode_bytes(1, kv, heads, kv_heads, dm, fit.dtype, reads=reads)))
        eff_m = (
            fit.memory
            * saturation(units, fit.half_units)
            * saturation(mean_kv, fit.half_kv_len)
            * float(attn.l2_factor(fit, nbytes))
        )
        t_m = nbytes / (dev.hbm_bw_bytes_per_s * eff_m)
        t_c = float(np.sum(w * 4.0 * heads * dm * kv)) / (peak * fit.matmul)
        t_c, t_m, t_w = (
            float(v)
            for v in xqa_launch_terms(
                fit,
                dev.hbm_bw_bytes_per_s,
                float(np.sum(w)),
                float(np.max(kv)),
                lambda m: float(np.sum(w * np.ceil(kv / m)) / np.sum(w)),
                heads,
                kv_heads,
                head_dim,
                nbytes,
                (t_c, t_m, t_w),
            )
        )
        parts.append(
            (
                float(smooth_max(t_c, t_m, t_w, p=fit.smooth_p)),
                fit.launch_s
                + float(fa2_copies_s(fit, dev.hbm_bw_bytes_per_s, float(np.sum(w)), heads, kv_heads, head_dim))
                + float(diff_kv_s(fit, head_dim, dv)),
                "memory" if t_m >= max(t_c, t_w) else ("compute" if t_c >= t_w else "latency"),
            )
        )
    if pre.any():
        fit, _ = pick(dev, engine, "prefill", dtype)
        if fit is None:
            return None
        qp, cp, w = q[pre], c[pre], n[pre]
        g = heads / max(tile_kv_heads(fit, heads, kv_heads), 1)  # the rows of a query tile per position
        tl = float(_launch_tile(fit, qp, w, heads, kv_heads, head_dim))
        tiles = np.ceil(qp * g / tl)
        best: tuple[float, float, str] | None = None
        # the padding envelope in the query length (attention.py): the next tiles' first rows, as many as the
        # fitted time can still fall over (it falls while sqrt(half_q_len * half_units * group / tile / units)
        # tiles are not reached: the two saturations' product), at least PREFILL_LOOKAHEAD_TILES
        few = math.sqrt(fit.half_q_len * fit.half_units * g / tl / max(float(np.sum(w)) * heads / g, 1.0))
        for j in range(min(PREFILL_MAX_LOOKAHEAD, max(PREFILL_LOOKAHEAD_TILES, 2 * math.ceil(few) + 2)) + 1):
            qj = qp if j == 0 else (tiles + j - 1) * tl / g + 1
            t_c, t_m = _prefill_parts(dev, fit, peak, qj, cp, w, heads, kv_heads, head_dim)
            got = (float(smooth_max(t_c, t_m, p=fit.smooth_p)), fit.launch_s, "compute" if t_c >= t_m else "memory")
            best = got if best is None or got[0] < best[0] else best
        assert best is not None
        parts.append(best)
    body = sum(p[0] for p in parts)
    bound = max(parts, key=lambda p: p[0])[2]
    return body + max(p[1] for p in parts), bound


PREFILL_LOOKAHEAD_TILES = 4
PREFILL_MAX_LOOKAHEAD = 128
"""Later query tiles whose first row is tried in the prefill padding envelope: the fitted time can fall
when a tile is added (more CTAs saturate the GPU) while the tiles are few; past a few it only rises."""


def _launch_tile(fit, qp, w, heads, kv_heads, head_dim):
    """The query tile of a launch over request groups: the fit's rule at the launch's mean query length (FlashInfer
    takes the batch's mean packed length, rounded down: :func:`simcast.cost.prefill_rules.rule_tile`)."""
    g = heads / max(kv_heads, 1)
    mean_packed = np.floor(np.sum(w * qp) * g / np.sum(w))
    return rule_tile(fit, mean_packed / g, heads, kv_heads, head_dim)


def _prefill_parts(dev, fit, peak, qp, cp, w, heads, kv_heads, head_dim) -> tuple[float, float]:
    """(compute_s, memory_s) of one prefill launch over request groups (query, cached, count)."""
    pk = tile_kv_heads(fit, heads, kv_heads)
    tl = _launch_tile(fit, qp, w, heads, kv_heads, head_dim)
    fl = float(np.sum(w * attn.prefill_flops(1, qp, cp, heads, head_dim, tl, pk)))
    nb = float(np.sum(w * attn.prefill_bytes(1, qp, cp, heads, kv_heads, head_dim, fit.dtype)))
    b = float(np.sum(w))
    mean_q = attn.padded_q(float(np.sum(w * qp) / b), heads, pk, float(tl))
    t_c, _ = attn.prefill_parts(
        fit, peak, dev.hbm_bw_bytes_per_s, b, mean_q, 0.0, heads, kv_heads, head_dim, fl, tile=tl
    )
    return float(t_c), float(attn.prefill_memory_s(fit, dev.hbm_bw_bytes_per_s, nb))


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
