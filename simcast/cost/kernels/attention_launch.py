"""One attention launch's time per batch with an engine's fitted kernels, over ``N`` batches at once (numpy).

The single implementation of the fitted attention cost: :func:`simcast.cost.kernels.engine_cost.attention_s` (one
batch) and :func:`simcast.cost.kernels.batched_kernels.attention_many` (many) pick the decode and prefill fits and call
:func:`attention_launch`. Decode requests (one new token) use the decode fit with each batch's total KV read and
split-KV units (the kernel family of each ``kernel_rule`` from :mod:`simcast.cost.kernels.attention`,
:mod:`simcast.cost.kernels.flash_decode`, :mod:`simcast.cost.kernels.xqa_launch`,
:mod:`simcast.cost.kernels.diff_kv`); prefill
requests the prefill fit with their tiled causal FLOPs summed and the mean query length for the efficiency,
the least time over a query-tile lookahead (the padding envelope). A mixed batch (chunked prefill beside
decodes, one varlen launch in vLLM/SGLang) costs both parts and one launch.
"""

from __future__ import annotations

import math

import numpy as np

from simcast.core.device import DeviceSpec
from simcast.core.kernel_fits import DecodeAttentionFit, PrefillAttentionFit
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels.curves import saturation, smooth_max
from simcast.cost.kernels.diff_kv import diff_kv_s
from simcast.cost.kernels.flash_decode import FA2_CTAS_PER_SM, FA2_VARLEN_RULE, fa2_copies_s, fa2_launch
from simcast.cost.kernels.prefill_rules import rule_tile, tile_kv_heads
from simcast.cost.kernels.xqa_launch import xqa_launch_terms
from simcast.cost.ops.batches import Batches

PREFILL_LOOKAHEAD_TILES = 4
PREFILL_MAX_LOOKAHEAD = 128
"""Later query tiles whose first row is tried in the prefill padding envelope: the fitted time can fall
when a tile is added (more CTAs saturate the GPU) while the tiles are few; past a few it only rises."""


def _kinds(nb: int) -> np.ndarray:
    return np.full(nb, "", dtype="<U7")


def attention_launch(
    dev: DeviceSpec,
    decode_fit: DecodeAttentionFit | None,
    prefill_fit: PrefillAttentionFit | None,
    dtype: str,
    bs: Batches,
    heads: int,
    kv_heads: int,
    head_dim: int,
    v_head_dim: int = 0,
    phase: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds, bound, has a fit) of one attention launch per batch of ``bs``.

    ``decode_fit`` / ``prefill_fit``: the engine's fits for the KV dtype ``dtype`` (None: no fit; where a batch
    has a part without a fit, ``has a fit`` is False and the caller uses the roofline). ``phase="prefill"``
    costs every request with the prefill fit (a 1-token prompt is a prefill). ``v_head_dim`` (0:
    ``head_dim``): the values' head size; a decode with distinct sizes is costed as :mod:`simcast.cost.kernels.diff_kv`
    states (prefill keeps ``head_dim``).
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
        if decode_fit is None:
            ok &= ~has_dec
        else:
            dv = v_head_dim or head_dim
            t_dec, k_dec = _decode_part(decode_fit, peak, bw, bs, dec, heads, kv_heads, head_dim, dv)
            copies = fa2_copies_s(decode_fit, bw, bs.per_batch(dec * bs.n), heads, kv_heads, head_dim)
            l_dec = np.where(has_dec, decode_fit.launch_s + copies + diff_kv_s(decode_fit, head_dim, dv), 0.0)
    if has_pre.any():
        if prefill_fit is None:
            ok &= ~has_pre
        else:
            t_pre, k_pre = _prefill_part(prefill_fit, peak, bw, bs, pre, heads, kv_heads, head_dim)
            l_pre = np.where(has_pre, prefill_fit.launch_s, 0.0)
    # body: the parts summed (decode first); bound: the larger part's (decode on ties); one launch
    body = np.where(has_dec, t_dec, 0.0) + np.where(has_pre, t_pre, 0.0)
    kind = np.where(has_dec & (~has_pre | (t_dec >= t_pre)), k_dec, k_pre)
    launch = np.where(has_dec & has_pre, np.maximum(l_dec, l_pre), np.where(has_dec, l_dec, l_pre))
    return body + launch, kind, ok


def _decode_part(fit, peak, bw, bs: Batches, dec, heads, kv_heads, head_dim, dv) -> tuple[np.ndarray, np.ndarray]:
    """The decode part of each batch (zeros where it has no decode group); ``dv``: the values' head size."""
    dm = (head_dim + dv) / 2  # bytes and FLOPs at the mean head size (simcast.cost.kernels.diff_kv)
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

    def launch_tile(sum_wq: np.ndarray) -> np.ndarray:  # the rule's tile at each batch's mean packed length
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
