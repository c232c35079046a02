"""Fit an engine's kernel parameters (GEMM, attention) to measured rows (collectives:
:mod:`simcast.calib.fitting.fit_collectives`).

Rows follow the generic measured schema (:mod:`simcast.calib.validation.validate`). Each
kind is fitted by Levenberg–Marquardt on ``log(predicted / measured)``
(:func:`simcast.calib.fitting.fit.least_squares`, robust IRLS towards L1 so a few outliers
do not pull the fit), through the same formulas the simulator uses
(:mod:`simcast.cost.kernels.gemm`, :mod:`simcast.cost.kernels.attention`,
:mod:`simcast.cost.comm.collectives`). All parameters are physical and shared by
every shape of a family: no per-shape lookup.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

from simcast.calib.fitting.fit import least_squares
from simcast.core.device import DeviceSpec
from simcast.core.kernel_fits import GemmFit, PrefillAttentionFit
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels.gemm import PEAK_DTYPE, gemm_time_s
from simcast.cost.kernels.prefill_rules import FLASHINFER_FA2, rule_tile, tile_kv_heads

# name: (initial value, low, high); sm_count and tiles are device facts, not fitted
_GEMM = {
    "matmul": (0.8, 0.2, 1.0),
    "half_m": (100.0, 0.0, 1e5),
    "half_n": (100.0, 0.0, 1e5),
    "half_k": (100.0, 0.0, 1e5),
    "wave_exp": (0.3, 0.0, 1.0),
    "memory": (0.8, 0.2, 1.0),
    "split_k_elems": (512.0, 16.0, 1e5),
    "parallel_exp": (0.5, 0.0, 2.0),
    "l2_boost": (1.0, 0.0, 10.0),
    "l2_half_bytes": (2e7, 1e5, 1e9),
    "smooth_p": (4.0, 1.0, 20.0),
    "launch_s": (4e-6, 0.0, 3e-4),
}
_GEMM_TILED = {"step_s": (2e-7, 0.0, 1e-5)}  # with a declared tile rule only: the per-K-step floor
_GEMM_TILED_HOLD = {"half_m": 0.0}  # with a tile rule the padded M blocks carry the small-M waste instead
_GEMM_L2_CAPACITY = {  # the capacity form of a GEMM's L2 term: per-call operand bytes where half hit (start 16 MiB)
    "l2_half_bytes": (1.6e7, 1e5, 1e9),
    "l2_edge": (8.0, 1.0, 60.0),
    "l2_boost": (1.0, 0.0, 20.0),
}
_L2_CAPACITY = {  # the capacity form: L2 size where half the bytes hit (start: 64 MiB) and its edge's steepness
    "l2_half_bytes": (6.4e7, 1e6, 1e9),
    "l2_edge": (8.0, 1.0, 60.0),
    "l2_boost": (3.0, 0.0, 20.0),
}
_PREFILL = {
    "matmul": (0.6, 0.05, 1.0),
    "half_q_len": (100.0, 0.0, 1e5),
    "half_units": (50.0, 0.0, 1e5),
    "half_head_dim": (30.0, 0.0, 1e4),
    "memory": (0.8, 0.05, 1.0),
    "smooth_p": (4.0, 1.0, 20.0),
    "launch_s": (8e-6, 0.0, 3e-4),
}


def _fit(
    spec: dict[str, tuple[float, float, float]],
    predict: Callable[[dict[str, float]], np.ndarray],
    time_s: np.ndarray,
    starts: list[dict[str, float]] | None = None,
) -> tuple[dict[str, float], float]:
    """Robust LM fit of ``spec``'s parameters; the best of a few starts. Returns (params, median abs % error)."""
    names = list(spec)
    lo = np.array([spec[n][1] for n in names])
    hi = np.array([spec[n][2] for n in names])
    logt = np.log(time_s)

    def resid(x: np.ndarray) -> np.ndarray:
        pred = predict(dict(zip(names, x)))
        return np.log(np.maximum(pred, 1e-12)) - logt

    best, best_cost = None, np.inf
    candidates: list[dict[str, float]] = [{}, *(starts or [])]
    for s in candidates:
        x0 = np.array([s.get(n, spec[n][0]) for n in names])
        x = least_squares(resid, x0, lo, hi, robust=True, iters=80)
        c = float(np.sum(np.abs(resid(x))))
        if c < best_cost:
            best, best_cost = x, c
    assert best is not None
    err = float(np.median(np.abs(np.exp(resid(best)) - 1)) * 100)
    return dict(zip(names, (float(v) for v in best))), err


# ------------------------------------------------------------------ GEMM
def fit_gemm(
    rows: pd.DataFrame,
    dev: DeviceSpec,
    dtype: str,
    sm_count: int,
    fixed: dict[str, float | str] | None = None,
    l2_edge: bool = False,
) -> tuple[GemmFit, float]:
    """A :class:`GemmFit` for ``dtype`` on ``gemm`` rows of that dtype; (fit, median abs % error).

    ``fixed``: parameters held at the given values instead of fitted (a small table cannot pin all
    twelve; e.g. no L2 term when no shape is small enough to stay in L2); ``tile_rule`` declares the
    kernel's tile per row count (:data:`simcast.core.gemm_tiles.GEMM_TILE_RULES`) and adds ``step_s``.
    ``l2_edge``: a second candidate with the capacity form of the L2 term (:attr:`GemmFit.l2_edge`), kept
    when it lowers the mean abs log error on these rows by 3 % (as :func:`fit_decode`'s) and keeps an L2
    term (``l2_boost`` > 0).
    """
    hold = {**(_GEMM_TILED_HOLD if (fixed or {}).get("tile_rule") else {}), **(fixed or {})}
    g = rows[(rows["kind"] == "gemm") & (rows["dtype"] == dtype)]
    if not len(g):
        raise ValueError(f"no gemm rows of dtype {dtype}")
    m, n, k = (g[c].to_numpy(float) for c in ("m", "n", "k"))
    t = g["time_s"].to_numpy(float)
    peak, bw = dev.matmul_peak(PEAK_DTYPE[dtype]), dev.hbm_bw_bytes_per_s

    def make(p: dict[str, float]) -> GemmFit:
        return GemmFit(dtype=dtype, sm_count=sm_count, **hold, **p)  # type: ignore[arg-type]  # p: the float fields

    best: tuple[GemmFit, float, float] | None = None
    for edge in (False, True) if l2_edge else (False,):
        spec = {**_GEMM, **(_GEMM_TILED if hold.get("tile_rule") else {}), **(_GEMM_L2_CAPACITY if edge else {})}
        params, err = _fit(
            {name: v for name, v in spec.items() if name not in hold},
            lambda p: gemm_time_s(make(p), peak, bw, m, n, k),
            t,
            starts=[
                {"smooth_p": 10.0, "wave_exp": 0.3, "launch_s": float(np.min(t)) * 0.8},
                {"half_m": 30.0, "l2_boost": 0.1, "parallel_exp": 0.0},
            ],
        )
        fit = make(params)
        if edge and fit.l2_boost <= 0:  # no L2 term left: not the capacity form, whatever else moved
            continue
        cost = float(np.mean(np.abs(np.log(gemm_time_s(fit, peak, bw, m, n, k) / t))))
        if best is None or cost < best[2] * 0.97:  # the capacity form must earn its keep (3 % lower error)
            best = (fit, err, cost)
    assert best is not None
    return best[0], best[1]


# ------------------------------------------------------------------ attention
def _attn_arrays(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    q = rows["q_len"].to_numpy(float)
    kv = rows["kv_len"].to_numpy(float)
    return {
        "b": rows["batch"].to_numpy(float),
        "q": q,
        "c": kv - q,
        "kv": kv,
        "h": rows["heads"].to_numpy(float),
        "hkv": rows["kv_heads"].to_numpy(float),
        "d": rows["head_dim"].to_numpy(float),
        # the values' head size where the rows state one (0: the keys' size, :mod:`simcast.cost.kernels.diff_kv`)
        "dv": rows["v_head_dim"].fillna(0).to_numpy(float) if "v_head_dim" in rows else np.zeros(len(rows)),
        "t": rows["time_s"].to_numpy(float),
    }


def fit_prefill(
    rows: pd.DataFrame,
    dev: DeviceSpec,
    dtype: str,
    tile: int = 128,
    sm_count: int = 0,
    kernel_rules: tuple[str, ...] = ("",),
    l2_edge: bool = False,
) -> tuple[PrefillAttentionFit, float]:
    """A :class:`PrefillAttentionFit` on ``attention_prefill`` rows of KV dtype ``dtype``.

    Candidates: the GQA-packed form without a per-CTA time; with ``sm_count`` each of ``kernel_rules`` (the
    engine's CTA layout, :data:`simcast.core.kernel_fits.PREFILL_KERNEL_RULES`) with a fitted per-CTA time
    ``cta_s``, and with ``l2_edge`` also the L2 capacity form of the memory term. A candidate replaces the
    simpler one only when it lowers the mean abs log error on these rows by 3 %.
    """
    r = rows[(rows["kind"] == "attention_prefill") & (rows["dtype"] == dtype)]
    if not len(r):
        raise ValueError(f"no attention_prefill rows of dtype {dtype}")
    a = _attn_arrays(r)
    peak = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16")
    bw = dev.hbm_bw_bytes_per_s
    candidates = [("", False, False)]
    if sm_count:
        candidates += [(rule, True, e) for rule in kernel_rules for e in ((False, True) if l2_edge else (False,))]
    best: tuple[PrefillAttentionFit, float, float] | None = None
    for rule, cta, edge in candidates:
        hold = {"kernel_rule": rule, "sm_count": sm_count if cta else 0}
        probe = make_probe(dtype, tile, rule)
        pk = tile_kv_heads(probe, a["h"], a["hkv"])
        tl = rule_tile(probe, a["q"], a["h"], a["hkv"], a["d"])
        fl = attn.prefill_flops(a["b"], a["q"], a["c"], a["h"], a["d"], tl, pk)
        spec = dict(_PREFILL)
        if cta:
            spec["cta_s"] = (1e-6, 0.0, 1e-4)
        if rule == FLASHINFER_FA2:  # the tile changes per launch: its efficiency
            spec["half_tile"] = (50.0, 0.0, 1e4)
        if edge:
            spec.update(_L2_CAPACITY)

        def make(p: dict[str, float], h: dict = hold) -> PrefillAttentionFit:
            return PrefillAttentionFit(dtype=dtype, tile=tile, **h, **p)  # type: ignore[arg-type]  # p: the float fields

        def pred(p: dict[str, float], fl: np.ndarray = fl, mk: Callable = make) -> np.ndarray:
            f = mk(p)
            return attn.prefill_time_s(f, peak, bw, a["b"], a["q"], a["c"], a["h"], a["hkv"], a["d"], flops_tiled=fl)

        params, err = _fit(spec, pred, a["t"], starts=[{"smooth_p": 10.0, "launch_s": float(np.min(a["t"])) * 0.8}])
        cost = float(np.mean(np.abs(np.log(pred(params) / a["t"]))))
        if best is None or cost < best[2] * 0.97:  # a richer form must earn its keep (3 % lower mean abs log error)
            best = (make(params), err, cost)
    assert best is not None
    return best[0], best[1]


def make_probe(dtype: str, tile: int, rule: str) -> PrefillAttentionFit:
    """A prefill fit that only carries its layout (``tile``, ``kernel_rule``): for the rule's tiles and heads."""
    return PrefillAttentionFit(
        dtype=dtype,
        tile=tile,
        kernel_rule=rule,
        matmul=1.0,
        half_q_len=0.0,
        half_units=0.0,
        half_head_dim=0.0,
        memory=1.0,
        smooth_p=1.0,
        launch_s=0.0,
    )


def transfer_engines(src: DeviceSpec, dst: DeviceSpec, sm_count: int | None = None) -> DeviceSpec:
    """Carry ``src``'s engine sections to ``dst``'s peaks: the fitted fractions, half points and fixed
    times are kept (same kernels), the SM count becomes ``dst``'s (``sm_count``), and all-reduce bus
    bandwidths scale with the ratio of the intra-node link bandwidths.
    """
    ratio = dst.links.intra_node.bw_bytes_per_s / src.links.intra_node.bw_bytes_per_s
    out = {}
    for name, ek in src.engines.items():
        out[name] = dataclasses.replace(
            ek,
            gemm=tuple(dataclasses.replace(g, sm_count=sm_count or g.sm_count) for g in ek.gemm),
            decode=tuple(dataclasses.replace(d, sm_count=sm_count or d.sm_count) for d in ek.decode),
            all_reduce=tuple(
                dataclasses.replace(c, bus_bw_bytes_per_s=c.bus_bw_bytes_per_s * ratio) for c in ek.all_reduce
            ),
            source=f"transferred from {src.name}: {ek.source}",
        )
    return dataclasses.replace(dst, engines=out)
