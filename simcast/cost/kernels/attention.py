"""Attention kernel time with an engine's fitted parameters.

Prefill (causal, FlashAttention-style tiling): the kernel walks query tiles of
``tile`` rows; query tile ``i`` of a request with ``c`` cached tokens visits the
key tiles up to its last row, ``ceil((c + min((i+1)·tile, q)) / tile)`` of them,
and computes each visited ``tile × tile`` block in full (the causal mask only
zeroes the diagonal block's upper half). FLOPs are ``4 · heads · head_dim``
(QK^T and PV, 2 FLOPs per multiply-add) per visited query-key pair. Exact causal
pairs are ``q·c + q(q+1)/2``; the tiled count is larger by the diagonal blocks
and the padding of the last tile, which dominates short sequences.

GQA: for short queries FlashAttention-3 packs the ``group = heads / kv_heads``
query heads of one KV head into the query tile, so the padding of the last tile
is over ``q · group`` rows; FLOPs are then counted per KV head.

Decode (one new token per request): the kernel streams the request's keys and
values, ``2 · kv_len · kv_heads · head_dim`` elements, once; the query heads of a
GQA group share that read. Its efficiency depends on how many independent
units of work there are: ``batch · kv_heads`` (split-KV kernels cut each long
context into chunks of ``split_tokens`` that run in parallel and are merged),
and one CTA per (request, KV head) has a minimum time, so a large batch of
short contexts costs whole waves of CTAs over the SMs.

Both have a fixed launch time (the floor short kernels never go below).
Array-friendly where the fit needs it.

Evaluation (:func:`simcast.cost.kernels.engine_cost.attention_s`) keeps the time non-decreasing in the work
of a step (requests, new tokens, context) with the *padding envelope*: a kernel on less work can
always run as the kernel on more (padded), so it takes at most as long. Two terms of the fitted
forms break it and are evaluated at the padded point: prefill efficiency saturates in the query
length while its FLOPs are already padded to whole query tiles (:func:`padded_q`: the query length
that fills the last tile; measured on B200 vLLM, 1 query token takes 8.9 us, while the unpadded
form gave 59.6 us, above 64 tokens' 12.3 us), and decode's fixed per-request query/output bytes
are divided by the short-context efficiency, so a 1-token context costs more than a 10-token one
(:func:`decode_kv_padded`; likewise just past the split-KV length, where more chunks add CTAs). Under
TensorRT-LLM's kernel rule a launch left to masked MHA for having too few requests may be slower than
XQA on a few more: it takes the time of XQA on the launch padded to the fewest requests XQA is chosen
for, when smaller (:func:`simcast.cost.kernels.xqa_launch.xqa_launch_terms`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.kernel_fits import DecodeAttentionFit, PrefillAttentionFit
from simcast.cost.kernels.attention_io import decode_bytes, l2_factor
from simcast.cost.kernels.curves import saturation, smooth_max
from simcast.cost.kernels.diff_kv import diff_kv_s, mean_head_dim
from simcast.cost.kernels.flash_decode import FA2_VARLEN_RULE, fa2_copies_s, fa2_launch
from simcast.cost.kernels.flashinfer_decode import FLASHINFER_TC_RULE, tensor_core_runs
from simcast.cost.kernels.kv_write import kv_write_s
from simcast.cost.kernels.prefill_rules import cta_time_s, rule_tile, tile_kv_heads
from simcast.cost.kernels.trtllm_decode import (
    XQA_RULES,
    xqa_runs,
)
from simcast.cost.kernels.trtllm_decode_sm89 import SPLIT_FORM_RULES
from simcast.cost.kernels.xqa_launch import xqa_launch_terms


def causal_pairs(q_len, cached):
    """Exact query-key pairs of causal attention: ``q·c + q(q+1)/2`` (array-friendly)."""
    q, c = np.asarray(q_len, dtype=float), np.asarray(cached, dtype=float)
    return q * c + q * (q + 1) / 2


def _packed_sum(count, group):
    """``Σ_{i=1..count} ceil(i / group)`` in closed form (array-friendly)."""
    a = np.floor(count / group)
    r = count - a * group
    return group * a * (a + 1) / 2 + r * (a + 1)


def tiled_causal_blocks(q_len, cached, tile, group=1):
    """``tile × tile`` blocks a tiled causal kernel computes per KV head (array-friendly).

    Query rows are the request's ``q_len`` positions times ``group`` query heads of one KV head
    (GQA packing, as FlashAttention-3 does for short queries; ``group = 1`` is one head at a time,
    then count per query head). With ``n = ceil(q·group / tile)`` query tiles, tile ``i``
    (0-based) ends at position ``(i+1)·tile/group`` and visits ``ceil((c + end) / tile)`` key
    tiles; the full tiles sum to ``(n-1)·ceil(c/tile) + Σ_{i<n} ceil(i/group)`` (exact when the
    cached length is a multiple of the tile) and the last one ends at ``q``.
    """
    q, c, g = (np.asarray(v, dtype=float) for v in (q_len, cached, group))
    n = np.ceil(q * g / tile)
    return (n - 1) * np.ceil(c / tile) + _packed_sum(n - 1, g) + np.ceil((c + q) / tile)


def tiled_causal_pairs(q_len, cached, tile):
    """Query-key pairs one query head's tiled causal kernel computes: blocks × ``tile²``.

    For ``c = 0`` and ``q`` a multiple of the tile, ``n(n+1)/2`` blocks (``n = q / tile``).
    """
    return tiled_causal_blocks(q_len, cached, tile, 1) * tile * tile


def prefill_flops(batch, q_len, cached, heads, head_dim, tile=None, kv_heads=None):
    """``4 · batch · heads · head_dim · pairs``: exact causal pairs, or tiled when ``tile`` is given.

    Tiled with ``kv_heads``: GQA-packed tiles, ``4 · batch · kv_heads · head_dim · blocks · tile²``.
    """
    b, h, d = (np.asarray(v, float) for v in (batch, heads, head_dim))
    if tile is None:
        return 4.0 * b * h * d * causal_pairs(q_len, cached)
    if kv_heads is None:
        return 4.0 * b * h * d * tiled_causal_pairs(q_len, cached, tile)
    hkv = np.asarray(kv_heads, float)
    return 4.0 * b * hkv * d * tiled_causal_blocks(q_len, cached, tile, h / hkv) * tile * tile


def prefill_units(batch, q_len, heads, kv_heads, tile):
    """CTAs of a GQA-packed prefill: ``batch · kv_heads · ceil(q_len · group / tile)``."""
    b, q, h, hkv = (np.asarray(v, float) for v in (batch, q_len, heads, kv_heads))
    return b * hkv * np.ceil(q * (h / hkv) / tile)


def prefill_bytes(batch, q_len, cached, heads, kv_heads, head_dim, dtype: str):
    """Q read and O written once (2 bytes), K and V read once per query tile group (KV dtype)."""
    q, c = np.asarray(q_len, float), np.asarray(cached, float)
    b, h, hkv, d = (np.asarray(v, float) for v in (batch, heads, kv_heads, head_dim))
    return b * (2 * q * h * d * 2 + 2 * (c + q) * hkv * d * DTYPE_BYTES[dtype])


def padded_q(q_len: float, heads: int, kv_heads: int, tile: float) -> float:
    """The query length filling the GQA-packed query tiles ``q_len`` uses: ``ceil(q·g / tile) · tile / g``."""
    g = heads / max(kv_heads, 1)
    return float(np.ceil(q_len * g / tile) * tile / g)


@lru_cache(maxsize=64)
def _kv_grid(split_tokens: float) -> np.ndarray:
    """Contexts the decode padding envelope is computed on: every integer up to four split-KV lengths (at
    least 4096: the short-context and split-KV dips lie there; at most 2^17), then 400 log-spaced points
    to 1e8."""
    dense = float(min(1 << 17, max(4096, 4 * int(split_tokens))))
    return sorted_unique(np.concatenate([np.arange(1.0, dense + 1.0), np.round(np.geomspace(dense, 1e8, 400))]))


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` of a 1-D array (sorted distinct values) without its ``np.ma`` check: that check
    imports ``numpy.ma`` (~0.02 s of a run)."""
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s


def segment_tokens(fit: DecodeAttentionFit) -> int:
    """Under ``"trtllm_xqa_mb"`` the decode time of a batch is non-decreasing in the context between
    multiples of this many tokens: the multi-block count changes with ``floor(history / 128)``, masked MHA's
    tiles with ``ceil(kv / mmha_block_tokens)``, and tokens per CTA and bytes only grow in between; so its
    envelope grid holds each segment's first context instead of every integer."""
    return math.gcd(128, fit.mmha_block_tokens)


@lru_cache(maxsize=8)
def _segment_grid(step: int) -> np.ndarray:
    """The ``"trtllm_xqa_mb"`` envelope grid: every integer up to 4096, each segment's first context
    (``step · k + 1``) up to 2^17, then 400 log-spaced points to 1e8."""
    dense, top = 4096.0, float(1 << 17)
    seg = np.arange(dense + 1.0, top + 1.0, step)
    return sorted_unique(np.concatenate([np.arange(1.0, dense + 1.0), seg, np.round(np.geomspace(top, 1e8, 400))]))


def _grid(fit: DecodeAttentionFit) -> np.ndarray:
    return _segment_grid(segment_tokens(fit)) if fit.kernel_rule in SPLIT_FORM_RULES else _kv_grid(fit.split_tokens)


KV_TAIL_STEP = 1024
"""The decode envelope is computed on the grid from the smallest queried context on, rounded down to a
multiple of this many grid points (a suffix minimum needs only the points after it; rounding keeps the
cache hit rate when contexts vary)."""


@lru_cache(maxsize=4096)
def _kv_suffix_argmin(
    fit: DecodeAttentionFit,
    peak: float,
    bw: float,
    heads,
    kv_heads,
    head_dim,
    batch: float,
    start: int = 0,
    v_head_dim: float | None = None,
):
    """Per point of the context grid from index ``start`` on, the grid context >= it at which the decode
    time is least."""
    kv = _grid(fit)[start:]
    t = decode_time_s(fit, peak, bw, np.full_like(kv, batch), kv, heads, kv_heads, head_dim, v_head_dim=v_head_dim)
    suffix_min = np.minimum.accumulate(t[::-1])[::-1]
    n = len(kv)
    record = np.where(t <= suffix_min, np.arange(n), n)  # points whose time no later point beats
    best = np.minimum.accumulate(record[::-1])[::-1]
    return kv[best]


def decode_kv_padded(
    fit: DecodeAttentionFit,
    peak_flops_per_s: float,
    hbm_bw_bytes_per_s: float,
    heads,
    kv_heads,
    head_dim,
    batch,
    kv,
    v_head_dim: float | None = None,
):
    """Each request's context moved to the context >= it where a decode of ``batch`` requests is least (the
    padding envelope; the fitted time falls over short contexts and just past the split-KV length).

    Contexts off the grid keep their own under the saturating forms; under ``"trtllm_xqa_mb"`` (grid: each
    segment's first context, :func:`segment_tokens`) they take the better of their own and the best grid
    context past them."""
    kv, grid = np.asarray(kv, dtype=float), _grid(fit)
    i = np.minimum(np.searchsorted(grid, kv), len(grid) - 1)
    on_grid = grid[i] == kv
    segments = fit.kernel_rule in SPLIT_FORM_RULES
    if not (segments or np.any(on_grid)):
        return kv
    start = int(np.min(i if segments else i[on_grid])) // KV_TAIL_STEP * KV_TAIL_STEP
    b = float(max(1.0, round(batch)))
    pad = _kv_suffix_argmin(fit, peak_flops_per_s, hbm_bw_bytes_per_s, heads, kv_heads, head_dim, b, start, v_head_dim)
    best = pad[np.maximum(i - start, 0)]
    if not segments:
        return np.where(on_grid, best, kv)
    off = ~on_grid & (best > kv)
    if not np.any(off):
        return np.where(on_grid, best, kv)
    t_own, t_pad = (
        decode_time_s(fit, peak_flops_per_s, hbm_bw_bytes_per_s, b, x, heads, kv_heads, head_dim, v_head_dim=v_head_dim)
        for x in (kv, best)
    )
    return np.where(on_grid | (off & (t_pad < t_own)), best, kv)


def prefill_parts(
    fit: PrefillAttentionFit,
    peak_flops_per_s: float,
    hbm_bw_bytes_per_s: float,
    batch,
    q_len,
    cached,
    heads,
    kv_heads,
    head_dim,
    flops_tiled=None,
    tile=None,
):
    """(compute_s, memory_s) of a prefill attention call (tiles and CTAs as the fit's ``kernel_rule`` lays them
    out, :mod:`simcast.cost.kernels.prefill_rules`; ``flops_tiled``, when given, counted so; ``tile``: the
    launch's query
    tile, by default :func:`rule_tile` of ``q_len``)."""
    q, d = (np.asarray(v, float) for v in (q_len, head_dim))
    pk = tile_kv_heads(fit, heads, kv_heads)
    tl = rule_tile(fit, q_len, heads, kv_heads, head_dim) if tile is None else tile
    fl = prefill_flops(batch, q_len, cached, heads, head_dim, tl, pk) if flops_tiled is None else flops_tiled
    units = prefill_units(batch, q_len, heads, pk, tl)
    eff = (
        fit.matmul
        * saturation(q, fit.half_q_len)
        * saturation(units, fit.half_units)
        * saturation(d, fit.half_head_dim)
        * saturation(np.asarray(tl, float), fit.half_tile)
    )
    t_c = fl / (peak_flops_per_s * eff) + cta_time_s(fit, units)
    nbytes = prefill_bytes(batch, q_len, cached, heads, kv_heads, head_dim, fit.dtype)
    return t_c, prefill_memory_s(fit, hbm_bw_bytes_per_s, nbytes)


def prefill_memory_s(fit: PrefillAttentionFit, hbm_bw_bytes_per_s: float, nbytes):
    """A prefill call's bytes at ``memory`` of the bandwidth, times the L2 speed-up (:func:`l2_factor`) when
    fitted (array-friendly)."""
    nb = np.asarray(nbytes, dtype=float)
    return nb / (hbm_bw_bytes_per_s * fit.memory * l2_factor(fit, nb))


def prefill_time_s(
    fit: PrefillAttentionFit,
    peak_flops_per_s: float,
    hbm_bw_bytes_per_s: float,
    batch,
    q_len,
    cached,
    heads,
    kv_heads,
    head_dim,
    flops_tiled=None,
):
    """Seconds for one prefill attention call over ``batch`` requests of ``q_len`` new tokens each."""
    t_c, t_m = prefill_parts(
        fit, peak_flops_per_s, hbm_bw_bytes_per_s, batch, q_len, cached, heads, kv_heads, head_dim, flops_tiled
    )
    return smooth_max(t_c, t_m, p=fit.smooth_p) + fit.launch_s


def decode_kernel(fit: DecodeAttentionFit, batch, kv_max, heads, kv_heads, head_dim):
    """The kernel family a decode launch runs, as (KV reads, heads per request that make CTAs, per-wave s).

    One kernel (``kernel_rule`` ""): CTAs per KV head, keys read once (``max_group`` fallback: more
    reads). ``"trtllm_xqa"``: :func:`xqa_runs` picks XQA (per KV head, one read, ``wave_s``) or masked
    MHA (per query head, ``group / group_share`` reads, ``fallback_wave_s``). Array-friendly.
    """
    h, hkv = np.asarray(heads, float), np.asarray(kv_heads, float)
    g = h / hkv
    fallback_reads = np.maximum(1.0, g / fit.group_share)
    if fit.kernel_rule == FLASHINFER_TC_RULE:
        tc = tensor_core_runs(fit, h, hkv)
        return np.ones_like(g), hkv * np.ones_like(g), np.where(tc, fit.wave_s, fit.fallback_wave_s)
    if fit.kernel_rule not in XQA_RULES:
        reads = np.where(g > fit.max_group, fallback_reads, 1.0) if fit.max_group else np.ones_like(g)
        return reads, hkv, np.full_like(g, fit.wave_s)
    x = xqa_runs(fit, batch, kv_max, heads, kv_heads, head_dim)
    return np.where(x, 1.0, fallback_reads), np.where(x, hkv, h), np.where(x, fit.wave_s, fit.fallback_wave_s)


def decode_parts(
    fit: DecodeAttentionFit,
    peak_flops_per_s: float,
    hbm_bw_bytes_per_s: float,
    batch,
    kv_len,
    heads,
    kv_heads,
    head_dim,
    v_head_dim=None,
):
    """(compute_s, memory_s, wave-floor_s) of a decode attention call; ``v_head_dim``: the values' head size
    when it differs from the keys' (:mod:`simcast.cost.kernels.diff_kv`: bytes and FLOPs at the mean, kernel rules at
    ``head_dim``)."""
    b, s, h, hkv, d = (np.asarray(v, float) for v in (batch, kv_len, heads, kv_heads, head_dim))
    dm = mean_head_dim(d, v_head_dim)
    reads, cta_heads, wave_s = decode_kernel(fit, b, s, h, hkv, d)
    units = b * cta_heads * np.maximum(1.0, s / fit.split_tokens)
    t_w = np.ceil(b * cta_heads / fit.sm_count) * wave_s
    if fit.kernel_rule == FA2_VARLEN_RULE:  # no split for group 1; CTAs over 2 slots per SM
        units, waves = fa2_launch(fit, b, s, h, hkv, d)
        t_w = waves * wave_s
    nbytes = decode_bytes(batch, kv_len, heads, kv_heads, dm, fit.dtype, reads=reads)
    eff_m = fit.memory * saturation(units, fit.half_units) * saturation(s, fit.half_kv_len) * l2_factor(fit, nbytes)
    t_m = nbytes / (hbm_bw_bytes_per_s * eff_m)
    t_c = 4.0 * b * h * dm * s / (peak_flops_per_s * fit.matmul)
    return xqa_launch_terms(fit, hbm_bw_bytes_per_s, b, s, lambda m: np.ceil(s / m), h, hkv, d, nbytes, (t_c, t_m, t_w))


def decode_time_s(
    fit: DecodeAttentionFit,
    peak_flops_per_s: float,
    hbm_bw_bytes_per_s: float,
    batch,
    kv_len,
    heads,
    kv_heads,
    head_dim,
    v_head_dim=None,
):
    """Seconds for one decode attention call: ``batch`` requests, ``kv_len`` keys each (new token included);
    ``v_head_dim`` as in :func:`decode_parts` (plus the fit's ``diff_kv_launch_s`` when it differs); plus the
    fit's KV-cache write launch (:func:`simcast.cost.kernels.kv_write.kv_write_s`, 0 unless fitted)."""
    t_c, t_m, t_w = decode_parts(
        fit, peak_flops_per_s, hbm_bw_bytes_per_s, batch, kv_len, heads, kv_heads, head_dim, v_head_dim
    )
    copies = fa2_copies_s(fit, hbm_bw_bytes_per_s, batch, heads, kv_heads, head_dim)
    write = kv_write_s(fit, batch, kv_heads, head_dim, v_head_dim)
    return (
        smooth_max(t_c, t_m, t_w, p=fit.smooth_p) + fit.launch_s + copies + diff_kv_s(fit, head_dim, v_head_dim) + write
    )
