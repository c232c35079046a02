"""The engines' fitted GEMM and attention kernels over many batches at once (numpy arrays).

:func:`gemm_many` is :func:`simcast.cost.engine_cost.gemm_s` (its padding envelope in M included) and
:func:`attention_many` is :func:`simcast.cost.engine_cost.attention_s` (decode and prefill parts, the
decode context envelope and the prefill query-tile lookahead), each evaluated for ``N`` batches in one
pass. The kernel forms are the array-friendly ones of :mod:`simcast.cost.gemm` and
:mod:`simcast.cost.attention`; only the bookkeeping (which candidates, which groups of which batch) is
done here, with the same rules in the same order as the scalar functions.
"""

from __future__ import annotations

import math

import numpy as np

from simcast.core.device import DeviceSpec
from simcast.cost import attention as attn
from simcast.cost.batches import Batches
from simcast.cost.curves import saturation, smooth_max
from simcast.cost.diff_kv import diff_kv_s
from simcast.cost.engine_cost import PREFILL_LOOKAHEAD_TILES, PREFILL_MAX_LOOKAHEAD, pick
from simcast.cost.flash_decode import FA2_CTAS_PER_SM, FA2_VARLEN_RULE, fa2_copies_s, fa2_launch
from simcast.cost.gemm import PEAK_DTYPE, gemm_parts, gemm_time_s, m_candidates
from simcast.cost.prefill_rules import rule_tile, tile_kv_heads
from simcast.cost.xqa_launch import xqa_launch_terms


def gemm_many(
    dev: DeviceSpec, engine: str | None, dtype: str, m: np.ndarray, n: int, k: int, captured: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(seconds, compute|memory|latency) of a GEMM on ``m[i]`` rows for each ``i``; None without a fit.

    :func:`simcast.cost.gemm.gemm_eval_s` for every row count: the least time over ``m`` and the first row
    of every later M tile up to the end of the wave after ``m``'s; the bound at ``m`` itself
    (:func:`simcast.cost.gemm.gemm_bound`).
    """
    fit, _ = pick(dev, engine, "gemm", dtype)
    if fit is None:
        return None
    peak = dev.matmul_peak(PEAK_DTYPE[fit.dtype])
    bw = dev.hbm_bw_bytes_per_s
    mi = np.asarray(m, dtype=np.int64)
    cap = np.broadcast_to(np.asarray(captured, dtype=bool), mi.shape)
    if fit.tile_rule:  # several kernel configs: each row count's candidates from the scalar rule
        per = [m_candidates(fit, int(x), n) for x in mi.ravel()]
        lens = np.array([len(c) for c in per], dtype=np.int64)
        cand = np.concatenate(per) if per else np.zeros(0)
        offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
        owner = np.repeat(np.arange(mi.size), lens)
    else:
        tiles_n = -(-n // fit.tile_n)
        first = -(-mi // fit.tile_m)  # M tiles m already uses
        wave = -(-(first * tiles_n) // fit.sm_count)
        last_tile = -(-((wave + 1) * fit.sm_count) // tiles_n)
        lens = 2 + np.maximum(first, last_tile) - first  # m itself, then the tile starts first..max(first, last)
        offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
        owner = np.repeat(np.arange(mi.size), lens)
        pos = np.arange(int(lens.sum())) - offsets[owner]
        cand = np.where(pos == 0, mi[owner].astype(float), (first[owner] + pos - 1).astype(float) * fit.tile_m + 1)
    t = gemm_time_s(fit, peak, bw, cand, n, k, True)
    if fit.host_floor_s > 0:
        t = np.where(cap[owner], t, np.maximum(t, fit.host_floor_s))
    best = np.minimum.reduceat(t, offsets)
    t_c, t_m = gemm_parts(fit, peak, bw, mi, n, k)
    own = smooth_max(t_c, t_m, p=fit.smooth_p) + fit.launch_s
    kind = np.where(t_c >= t_m, "compute", "memory").astype("<U7")
    kind[~cap & (fit.host_floor_s > own)] = "latency"
    return best, kind


def _kinds(nb: int) -> np.ndarray:
    return np.full(nb, "", dtype="<U7")


def attention_many(
    dev: DeviceSpec,
    engine: str | None,
    dtype: str,
    bs: Batches,
    heads: int,
    kv_heads: int,
    head_dim: int,
    v_head_dim: int = 0,
    phase: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds, bound, has a fit) of one attention launch per batch (:func:`engine_cost.attention_s`).

    Where ``has a fit`` is False (a part of that batch has no engine fit) the caller uses the roofline.
    """
    nb = len(bs)
    dec, pre = (bs.q == 1, bs.q > 1) if phase != "prefill" else (bs.q < 0, bs.q >= 1)
    peak = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16")
    bw = dev.hbm_bw_bytes_per_s
    ok = np.ones(nb, dtype=bool)
    has_dec = bs.per_batch(dec.astype(float)) > 0
    has_pre = bs.per_batch(pre.astype(float)) > 0
    t_dec, k_dec, l_dec = np.zeros(nb), _kinds(nb), np.zeros(nb)
    t_pre, k_pre, l_pre = np.zeros(nb), _kinds(nb), np.zeros(nb)
    if has_dec.any():
        fit, _ = pick(dev, engine, "decode", dtype)
        if fit is None:
            ok &= ~has_dec
        else:
            dv = v_head_dim or head_dim
            t_dec, k_dec = _decode_part(fit, peak, bw, bs, dec, heads, kv_heads, head_dim, dv)
            copies = fa2_copies_s(fit, bw, bs.per_batch(dec * bs.n), heads, kv_heads, head_dim)
            l_dec = np.where(has_dec, fit.launch_s + copies + diff_kv_s(fit, head_dim, dv), 0.0)
    if has_pre.any():
        fit, _ = pick(dev, engine, "prefill", dtype)
        if fit is None:
            ok &= ~has_pre
        else:
            t_pre, k_pre = _prefill_part(fit, peak, bw, bs, pre, heads, kv_heads, head_dim)
            l_pre = np.where(has_pre, fit.launch_s, 0.0)
    # body: the parts summed (decode first); bound: the larger part's (decode on ties); one launch
    body = np.where(has_dec, t_dec, 0.0) + np.where(has_pre, t_pre, 0.0)
    kind = np.where(has_dec & (~has_pre | (t_dec >= t_pre)), k_dec, k_pre)
    launch = np.where(has_dec & has_pre, np.maximum(l_dec, l_pre), np.where(has_dec, l_dec, l_pre))
    return body + launch, kind, ok


def _decode_part(fit, peak, bw, bs: Batches, dec, heads, kv_heads, head_dim, dv) -> tuple[np.ndarray, np.ndarray]:
    """The decode part of each batch (zeros where it has no decode group); ``dv``: the values' head size."""
    dm = (head_dim + dv) / 2  # bytes and FLOPs at the mean head size (simcast.cost.diff_kv)
    nb = len(bs)
    w = bs.n[dec].astype(float)
    owner = bs.owner[dec]
    wsum = np.bincount(owner, weights=w, minlength=nb)
    ctx1 = bs.c[dec].astype(float) + 1
    kv = np.empty_like(ctx1)
    g_batch = wsum[owner]
    for b in attn.sorted_unique(g_batch):  # the envelope depends on the batch's decodes: once per distinct count
        sel = g_batch == b
        kv[sel] = attn.decode_kv_padded(fit, peak, bw, heads, kv_heads, head_dim, float(b), ctx1[sel], float(dv))

    def tot(v: np.ndarray) -> np.ndarray:
        return np.bincount(owner, weights=v, minlength=nb)

    safe = np.where(wsum > 0, wsum, 1.0)
    kv_max = np.zeros(nb)
    np.maximum.at(kv_max, owner, kv)
    # the kernel family each batch's launch runs (its decodes and longest context), per batch
    reads, cta_heads, wave_s = (
        np.broadcast_to(v, (nb,)) for v in attn.decode_kernel(fit, wsum, kv_max, heads, kv_heads, head_dim)
    )
    units = tot(w * cta_heads[owner] * np.maximum(1.0, kv / fit.split_tokens))
    t_w = np.ceil(wsum * cta_heads / fit.sm_count) * wave_s
    if fit.kernel_rule == FA2_VARLEN_RULE:  # no split for group 1; CTAs over 2 slots per SM
        units = tot(w * fa2_launch(fit, 1.0, kv, heads, kv_heads, head_dim)[0])
        t_w = np.ceil(units / (FA2_CTAS_PER_SM * fit.sm_count)) * wave_s
    mean_kv = tot(w * kv) / safe
    nbytes = tot(w * attn.decode_bytes(1, kv, heads, kv_heads, dm, fit.dtype, reads=reads[owner]))
    eff_m = (
        fit.memory
        * saturation(units, fit.half_units)
        * saturation(mean_kv, fit.half_kv_len)
        * attn.l2_factor(fit, nbytes)
    )
    t_m = nbytes / (bw * np.where(eff_m > 0, eff_m, 1.0))
    t_c = tot(w * 4.0 * heads * dm * kv) / (peak * fit.matmul)
    t_c, t_m, t_w = xqa_launch_terms(
        fit,
        bw,
        wsum,
        kv_max,
        lambda m: tot(w * np.ceil(kv / m[owner])) / safe,
        heads,
        kv_heads,
        head_dim,
        nbytes,
        (t_c, t_m, t_w),
    )
    t = smooth_max(t_c, t_m, t_w, p=fit.smooth_p)
    kind = np.where(t_m >= np.maximum(t_c, t_w), "memory", np.where(t_c >= t_w, "compute", "latency"))
    return np.asarray(t, dtype=float), kind


def _prefill_part(fit, peak, bw, bs: Batches, pre, heads, kv_heads, head_dim) -> tuple[np.ndarray, np.ndarray]:
    """The prefill part of each batch: the least time over the query-tile lookahead (zeros where it has no
    prefill group)."""
    nb = len(bs)
    qp, cp, w = bs.q[pre].astype(float), bs.c[pre].astype(float), bs.n[pre].astype(float)
    owner = bs.owner[pre]
    pk = tile_kv_heads(fit, heads, kv_heads)
    g = heads / max(pk, 1)  # the rows of a query tile per position
    gq = heads / max(kv_heads, 1)  # the GQA group (FlashInfer's packed length, rule_tile)
    wsum = np.bincount(owner, weights=w, minlength=nb)

    def launch_tile(sum_wq: np.ndarray) -> np.ndarray:  # engine_cost._launch_tile per batch
        mean_packed = np.floor(sum_wq * gq / np.maximum(wsum, 1.0))
        return np.asarray(rule_tile(fit, mean_packed / gq, heads, kv_heads, head_dim), dtype=float) * np.ones_like(wsum)

    tile0 = launch_tile(np.bincount(owner, weights=w * qp, minlength=nb))
    tiles = np.ceil(qp * g / tile0[owner])
    few = np.sqrt(fit.half_q_len * fit.half_units * g / tile0 / np.maximum(wsum * pk, 1.0))
    steps = np.minimum(PREFILL_MAX_LOOKAHEAD, np.maximum(PREFILL_LOOKAHEAD_TILES, 2 * np.ceil(few) + 2)) + 1
    has = wsum > 0
    n_j = int(steps[has].max())
    j = np.arange(n_j, dtype=float)[:, None]
    qj = np.where(j == 0, qp[None, :], (tiles[None, :] + j - 1) * tile0[owner][None, :] / g + 1)  # (lookahead, groups)
    flat_owner = (np.arange(n_j)[:, None] * nb + owner[None, :]).ravel()

    def tot(v: np.ndarray) -> np.ndarray:
        return np.bincount(flat_owner, weights=np.broadcast_to(v, qj.shape).ravel(), minlength=n_j * nb).reshape(
            n_j, nb
        )

    wq = tot(w * qj)
    tile_j = np.stack([launch_tile(row) for row in wq])  # (lookahead, batches)
    fl = tot(w * attn.prefill_flops(1, qj, cp, heads, head_dim, tile_j[:, owner], pk))
    nbytes = tot(w * attn.prefill_bytes(1, qj, cp, heads, kv_heads, head_dim, fit.dtype))
    b = np.where(has, wsum, 1.0)
    mean_q = np.ceil(wq / b * g / tile_j) * tile_j / g  # attention.padded_q
    mean_q = np.where(has, mean_q, 1.0)  # batches without a prefill group: any positive value (unused)
    t_c, _ = attn.prefill_parts(fit, peak, bw, b, mean_q, 0.0, heads, kv_heads, head_dim, fl, tile=tile_j)
    t_m = attn.prefill_memory_s(fit, bw, nbytes)
    t = np.asarray(smooth_max(t_c, t_m, p=fit.smooth_p), dtype=float)
    t = np.where(np.arange(n_j)[:, None] < steps[None, :], t, math.inf)
    best = np.argmin(t, axis=0)  # the first least, as the scalar loop keeps it
    cols = np.arange(nb)
    t_best = np.where(has, t[best, cols], 0.0)
    kind = np.where(np.asarray(t_c)[best, cols] >= t_m[best, cols], "compute", "memory")
    return t_best, kind
