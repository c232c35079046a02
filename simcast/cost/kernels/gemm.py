"""GEMM time with an engine's fitted kernel parameters (:class:`~simcast.core.kernel_fits.GemmFit`).

``(M×K) @ (K×N)`` in one dtype family. Assumptions, each a term of the formula:

* compute: ``2MNK`` FLOPs at the dtype's dense peak times an efficiency that
  saturates in M, N and K (``d / (d + half_d)``: small dimensions waste tensor-core
  tiles and pipeline stages), times the useful share of the last *wave*: the
  output is cut into ``tile_m × tile_n`` tiles, one per SM at a time, so 133
  tiles on 132 SMs take two waves (a 129-row GEMM costs about like a 256-row one
  on a 128-row tile grid).
* a declared *tile rule* (the engine's kernel dispatch: a different CTA tile per row count) replaces the
  one tile: waves count that rule's tiles, the compute term counts whole M tiles, and a per-step floor
  ``waves · ceil(K / tile_k) · step_s`` bounds compute from below (a small tile cannot hide the latency of
  each K step's loads; the floor grows with the wave count, so one row past a wave edge costs a wave).
* memory: operands read and the output written once (``A·M·K + B·N·K + 2·M·N``
  bytes, A = B = element bytes; fp8 outputs are bf16), at an HBM fraction that
  drops when too few CTAs run (``tiles · max(1, K / split_k_elems)`` against the
  SM count: split-K spreads a skinny GEMM over more SMs) and rises when the
  operands are small enough to stay in L2 between calls (smoothly, or with ``l2_edge`` over a narrow edge at
  a capacity: :func:`simcast.cost.kernels.curves.l2_multiple`).
* the two overlap imperfectly: a smooth maximum ``(tc^p + tm^p)^(1/p)``;
  then a fixed launch time: a call replayed from a captured CUDA graph.
* run eagerly (``captured=False``), a fit measured without CUDA graphs also has a host floor: the
  call takes at least ``host_floor_s`` (the host's launch path bounds small shapes; the GPU work of
  larger ones hides it), ``max(t, host_floor_s)``.

Array-friendly: the fit evaluates it on numpy arrays of shapes.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simcast.core.dtypes import PEAK_DTYPE, element_bytes
from simcast.core.gemm_tiles import GEMM_TILE_RULES, GEMM_TILE_RULES_BY_N
from simcast.core.kernel_fits import GemmFit
from simcast.cost.kernels.curves import l2_multiple, saturation, smooth_max

__all__ = ["PEAK_DTYPE", "gemm_bytes", "gemm_time_s"]


def gemm_bytes(m, n, k, dtype: str):
    """Bytes a GEMM addresses: inputs once in the family's element size, a 2-byte output once."""
    eb = element_bytes(dtype)
    return eb * (m * k + n * k) + 2 * m * n


def tile_configs(fit: GemmFit, n: int = 0) -> tuple[tuple[int, int, int, int, int], ...]:
    """``(max_rows, tile_m, tile_n, cluster_m, tile_k)`` per kernel config of the fit's tile rule at ``n``
    columns (one config: its own tile)."""
    for max_n, configs in GEMM_TILE_RULES_BY_N.get(fit.tile_rule, ()):
        if not max_n or n <= max_n:
            return configs
    return GEMM_TILE_RULES[fit.tile_rule] or ((0, fit.tile_m, fit.tile_n, 1, fit.tile_k),)


DEEPGEMM_BLOCK_M = (64, 128, 256)
DEEPGEMM_BLOCK_N = (*range(16, 129, 8), 144, 160)


def deepgemm_blocks(m, n, sm_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(block_m, block_n) DeepGEMM picks per shape (array-friendly): fewest waves over ``sm_count`` SMs, then
    the fullest last wave, then on a tie the less wasteful block (deep_gemm/jit_kernels/gemm.py@c4a7116e).
    Each distinct finite (m, n) is picked once by :func:`deepgemm_block` (memoised); others by the array rule."""
    m, n = np.broadcast_arrays(np.asarray(m, dtype=float), np.asarray(n, dtype=float))
    if not (np.isfinite(m).all() and np.isfinite(n).all()):
        return _deepgemm_blocks_arrays(m, n, sm_count)
    picks = [deepgemm_block(a, b, sm_count) for a, b in zip(m.ravel().tolist(), n.ravel().tolist())]
    out = np.asarray(picks, dtype=float).reshape(*m.shape, 2)
    return out[..., 0], out[..., 1]


@lru_cache(maxsize=1 << 16)  # bounded module-level memo of a pure function: (m, n, SMs) -> (block_m, block_n)
def deepgemm_block(m: float, n: float, sm_count: int) -> tuple[float, float]:
    """:func:`deepgemm_blocks` for one finite shape, in scalar arithmetic (the same comparisons in the same
    order; integer block counts, exact in floats)."""
    best_m = best_n = 0.0
    best_w, best_u = math.inf, 0.0
    for bm in DEEPGEMM_BLOCK_M:
        for bn in DEEPGEMM_BLOCK_N:
            if bm > 128 and bn > 128:  # at least one side of a block stays <= 128
                continue
            blocks = float(math.ceil(m / bm) * math.ceil(n / bn))
            w = float(math.ceil(blocks / sm_count))
            u = float(sm_count) if blocks % sm_count == 0 else blocks % sm_count
            tie = w == best_w and u == best_u
            win = w < best_w or (w == best_w and u > best_u)
            win = win or (tie and ((bm == best_m and bn < best_n) or (bn == best_n and bm < best_m)))
            win = win or (tie and bm != best_m and bn > best_n)
            if win:
                best_m, best_n, best_w, best_u = float(bm), float(bn), w, u
    return best_m, best_n


def _deepgemm_blocks_arrays(m: np.ndarray, n: np.ndarray, sm_count: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`deepgemm_blocks` on whole arrays (any values, NaN included)."""
    best_m, best_n = np.zeros_like(m), np.zeros_like(m)
    best_w, best_u = np.full_like(m, np.inf), np.zeros_like(m)
    for bm in DEEPGEMM_BLOCK_M:
        for bn in DEEPGEMM_BLOCK_N:
            if bm > 128 and bn > 128:  # at least one side of a block stays <= 128
                continue
            blocks = np.ceil(m / bm) * np.ceil(n / bn)
            w = np.ceil(blocks / sm_count)
            u = np.where(blocks % sm_count == 0, sm_count, blocks % sm_count)
            tie = (w == best_w) & (u == best_u)
            win = (w < best_w) | ((w == best_w) & (u > best_u))
            win |= tie & (((bm == best_m) & (bn < best_n)) | ((bn == best_n) & (bm < best_m)))
            win |= tie & (bm != best_m) & (bn > best_n)
            best_m, best_n = np.where(win, bm, best_m), np.where(win, bn, best_n)
            best_w, best_u = np.where(win, w, best_w), np.where(win, u, best_u)
    return best_m, best_n


def tile_shape(fit: GemmFit, m, n=None) -> tuple[np.ndarray, ...]:
    """(rows per M block, tile_n, cluster_m, tile_k) the kernel runs ``m`` rows with (array-friendly): the first
    config covering ``m``; an M block is a cluster's ``tile_m · cluster_m`` rows."""
    m = np.asarray(m, dtype=float)
    if fit.tile_rule == "deepgemm_sm90":
        bm, bn = deepgemm_blocks(m, n, fit.sm_count)
        return bm, bn, np.ones_like(bm), np.full_like(bm, 128.0)
    bands = GEMM_TILE_RULES_BY_N.get(fit.tile_rule) or ((0, tile_configs(fit)),)
    m, n = np.broadcast_arrays(m, np.zeros_like(m) if n is None else np.asarray(n, dtype=float))
    out = [np.zeros_like(m) for _ in range(4)]
    for max_n, configs in reversed(bands):
        in_band = n <= max_n if max_n else np.ones_like(m, dtype=bool)
        for rows, tm, tn, cm, tk in reversed(configs):
            hit = in_band & (m <= rows if rows else True)
            out = [np.where(hit, v, o) for v, o in zip((tm * cm, tn, cm, tk), out)]
    return tuple(out)


def gemm_parts(fit: GemmFit, peak_flops_per_s: float, hbm_bw_bytes_per_s: float, m, n, k):
    """(compute_s, memory_s) of the GEMM, before the smooth maximum and the launch time."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    block_m, tile_n, cluster_m, tile_k = tile_shape(fit, m, n)
    tiles = np.ceil(m / block_m) * cluster_m * np.ceil(n / tile_n)  # CTAs
    waves = np.ceil(tiles / fit.sm_count)
    wave_eff = tiles / (waves * fit.sm_count)
    eff = (
        fit.matmul
        * saturation(m, fit.half_m)
        * saturation(n, fit.half_n)
        * saturation(k, fit.half_k)
        * wave_eff**fit.wave_exp
    )
    rows = np.ceil(m / block_m) * block_m if fit.tile_rule else m  # a tile rule: tensor cores run whole blocks
    t_c = 2.0 * rows * n * k / (peak_flops_per_s * eff)
    if fit.step_s > 0:  # each wave walks K in tile_k steps, each at least step_s (pipeline latency)
        t_c = smooth_max(t_c, waves * np.ceil(k / tile_k) * fit.step_s, p=fit.smooth_p)
    nbytes = gemm_bytes(m, n, k, fit.dtype)
    par = np.minimum(1.0, tiles * np.maximum(k / fit.split_k_elems, 1.0) / fit.sm_count)
    l2 = l2_multiple(nbytes, fit.l2_boost, fit.l2_half_bytes, fit.l2_edge)
    t_m = nbytes / (hbm_bw_bytes_per_s * fit.memory * par**fit.parallel_exp * l2)
    return t_c, t_m


def gemm_time_s(fit: GemmFit, peak_flops_per_s: float, hbm_bw_bytes_per_s: float, m, n, k, captured: bool = True):
    """Seconds for one GEMM call (array-friendly); ``captured=False``: run eagerly (host floor applies)."""
    t_c, t_m = gemm_parts(fit, peak_flops_per_s, hbm_bw_bytes_per_s, m, n, k)
    t = smooth_max(t_c, t_m, p=fit.smooth_p) + fit.launch_s
    return t if captured or fit.host_floor_s <= 0 else np.maximum(t, fit.host_floor_s)


def m_candidates(fit: GemmFit, m: int, n: int) -> np.ndarray:
    """``m`` and, per kernel config of the tile rule that covers rows from ``m`` on, its first row at or after
    ``m`` and the first row of every later M block (tile times cluster) of that config up to the end of the
    wave after that row's."""
    out, lo = [float(m)], 0
    configs = tile_configs(fit, n)
    if fit.tile_rule == "deepgemm_sm90":  # per-shape blocks: every 64-row edge of the smallest block
        bm, bn = (int(v) for v in deepgemm_blocks(m, n, fit.sm_count))
        configs = ((0, 64, bn, 1, 128),)
    for rows, tile_m, tile_n, cluster_m, _ in configs:
        start, block = max(m, lo + 1), tile_m * cluster_m
        if not rows or start <= rows:
            tiles_n = -(-n // tile_n) * cluster_m  # CTAs per M block
            first = -(-start // block)  # M blocks ``start`` already uses
            wave = -(-(first * tiles_n) // fit.sm_count)
            last_tile = -(-((wave + 1) * fit.sm_count) // tiles_n)  # M blocks that fill the next wave
            starts = np.arange(first, max(first, last_tile) + 1, dtype=float) * block + 1
            keep = (starts > start) & ((starts <= rows) if rows else True)
            out += [float(start), *starts[keep]]
        lo = rows
        if not rows:
            break
    return np.unique(np.asarray(out))


def gemm_envelope(
    fit: GemmFit, peak_flops_per_s: float, hbm_bw_bytes_per_s: float, m: np.ndarray, n: int, k: int, captured
) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, compute|memory|latency) of one GEMM call on ``m[i]`` rows for each ``i``, as the simulator costs
    it: :func:`gemm_time_s`, never more than a call on more rows (the *padding envelope* in M, the dimension that
    grows with the step's tokens); ``captured[i]`` (a bool or an array like ``m``): replayed from a CUDA graph.

    A GEMM on ``m`` rows can always run as one on ``m' > m`` rows (padded), so its time is at most
    ``min_{m' >= m} t(m')``. The fitted form breaks this at M-tile edges: one more row adds a tile,
    and the wave and parallelism factors credit the extra CTAs with more speed than the row costs
    (e.g. 128 -> 129 rows on a 128-row tile). Between tile edges it rises with M, and from one wave
    to the next it rises, so the minimum over ``m' >= m`` is at ``m`` or at the first row of a later
    tile up to the end of the next wave: those are evaluated and the least is taken. Exactly
    non-decreasing in M (tests/cost/test_monotone.py). Model dimensions N and K are fixed by the weights.
    With a tile rule, each kernel config from ``m`` on contributes its own tile edges (:func:`m_candidates`).
    The bound is the larger term at ``m`` itself; ``latency`` when an eager call sits on its host floor.
    """
    mi = np.asarray(m, dtype=np.int64)
    cap = np.broadcast_to(np.asarray(captured, dtype=bool), mi.shape)
    if fit.tile_rule:  # several kernel configs: each row count's candidates from the scalar rule
        per = [m_candidates(fit, int(x), n) for x in mi.ravel()]
        lens = np.array([len(c) for c in per], dtype=np.int64)
        cand = np.concatenate(per) if per else np.zeros(0)
        offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
        owner = np.repeat(np.arange(mi.size), lens)
    else:  # one tile: m_candidates' tile starts, for every row count at once
        tiles_n = -(-n // fit.tile_n)
        first = -(-mi // fit.tile_m)  # M tiles m already uses
        wave = -(-(first * tiles_n) // fit.sm_count)
        last_tile = -(-((wave + 1) * fit.sm_count) // tiles_n)
        lens = 2 + np.maximum(first, last_tile) - first  # m itself, then the tile starts first..max(first, last)
        offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
        owner = np.repeat(np.arange(mi.size), lens)
        pos = np.arange(int(lens.sum())) - offsets[owner]
        cand = np.where(pos == 0, mi[owner].astype(float), (first[owner] + pos - 1).astype(float) * fit.tile_m + 1)
    t = gemm_time_s(fit, peak_flops_per_s, hbm_bw_bytes_per_s, cand, n, k, True)
    if fit.host_floor_s > 0:
        t = np.where(cap[owner], t, np.maximum(t, fit.host_floor_s))
    best = np.minimum.reduceat(t, offsets)
    t_c, t_m = gemm_parts(fit, peak_flops_per_s, hbm_bw_bytes_per_s, mi, n, k)
    own = smooth_max(t_c, t_m, p=fit.smooth_p) + fit.launch_s
    kind = np.where(t_c >= t_m, "compute", "memory").astype("<U7")
    kind[~cap & (fit.host_floor_s > own)] = "latency"
    return best, kind
