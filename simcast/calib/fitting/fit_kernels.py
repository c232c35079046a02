"""Fit an engine's kernel parameters (GEMM, attention) to measured rows (collectives:
:mod:`simcast.calib.fitting.fit_collectives`).

Rows follow the generic measured schema (:mod:`simcast.calib.validation.validate`). Each
kind is fitted by Levenberg–Marquardt on ``log(predicted / measured)``
(:func:`simcast.calib.fitting.fit.least_squares`, robust IRLS towards L1 so a few outliers
do not pull the fit), through the same formulas the simulator uses
(:mod:`simcast.cost.gemm`, :mod:`simcast.cost.attention`,
:mod:`simcast.cost.collectives`). All parameters are physical and shared by
every shape of a family: no per-shape lookup.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd

from simcast.calib.fitting.fit import least_squares
from simcast.core.device import DeviceSpec
from simcast.core.kernel_fits import DecodeAttentionFit, GemmFit, PrefillAttentionFit
from simcast.cost import attention as attn
from simcast.cost import trtllm_decode as td
from simcast.cost.flash_decode import FA2_VARLEN_RULE
from simcast.cost.gemm import PEAK_DTYPE, gemm_time_s
from simcast.cost.prefill_rules import FLASHINFER_FA2, rule_tile, tile_kv_heads
from simcast.cost.trtllm_decode import xqa_narrow

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
_PREFILL = {
    "matmul": (0.6, 0.05, 1.0),
    "half_q_len": (100.0, 0.0, 1e5),
    "half_units": (50.0, 0.0, 1e5),
    "half_head_dim": (30.0, 0.0, 1e4),
    "memory": (0.8, 0.05, 1.0),
    "smooth_p": (4.0, 1.0, 20.0),
    "launch_s": (8e-6, 0.0, 3e-4),
}
_DECODE = {
    "memory": (0.8, 0.05, 1.0),
    "half_units": (100.0, 0.0, 1e6),
    "split_tokens": (512.0, 16.0, 1e6),
    "half_kv_len": (100.0, 0.0, 1e6),
    "matmul": (0.3, 0.01, 1.0),
    "wave_s": (2e-6, 0.0, 1e-4),
    "smooth_p": (4.0, 1.0, 20.0),
    "launch_s": (8e-6, 0.0, 3e-4),
}

_XQA_SPLIT = {  # the multi-block launches' per-CTA times (trtllm_xqa_mb)
    "cta_kv_byte_s": (5e-11, 0.0, 1e-9),
    "cta_group_s": (1e-9, 0.0, 1e-7),
    "token_group_s": (1e-12, 0.0, 1e-10),
    "merge_s": (1e-7, 0.0, 1e-5),
    "fallback_kv_byte_s": (1e-11, 0.0, 1e-9),
    "fallback_merge_s": (1e-7, 0.0, 1e-5),
}
_L2_CAPACITY = {  # the capacity form: L2 size where half the bytes hit (start: 64 MiB) and its edge's steepness
    "l2_half_bytes": (6.4e7, 1e6, 1e9),
    "l2_edge": (8.0, 1.0, 60.0),
    "l2_boost": (3.0, 0.0, 20.0),
}
_SPLIT_UNUSED = {"half_units": 0.0, "split_tokens": 1.0, "half_kv_len": 0.0, "matmul": 1.0}
"""Terms the multi-block form does not read (its waves carry the small-launch inefficiency): held, not fitted."""
MMHA_CTAS_PER_SM = (1, 2, 3, 4)
MMHA_BLOCK_TOKENS = (64, 128, 256, 512)
"""Masked MHA's resident CTAs per SM and tokens per KV loop: set at run time by its occupancy query and its
dynamic block size (``decoderMaskedMultiheadAttentionLaunch.h``), so chosen by the fit among these."""


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
        # the values' head size where the rows state one (0: the keys' size, :mod:`simcast.cost.diff_kv`)
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


def fit_decode(
    rows: pd.DataFrame,
    dev: DeviceSpec,
    dtype: str,
    sm_count: int,
    kernel_rules: tuple[str, ...] = ("",),
    l2_edge: bool = False,
) -> tuple[DecodeAttentionFit, float]:
    """A :class:`DecodeAttentionFit` on ``attention_decode`` rows of KV dtype ``dtype``.

    Candidates: one kernel; then either each of ``kernel_rules`` beyond "" (a declared pair of kernel
    families chosen by the engine's rule, e.g. ``"trtllm_xqa_mb"``, each family with its own fitted
    per-wave time) or, without a declared rule, one kernel with a large-group fallback at each
    ``max_group``; a candidate replaces the simpler one only when it lowers the mean abs log error on these
    rows by 3 %. ``l2_edge``: more candidates, one kernel and each declared rule but the saturating
    ``"trtllm_xqa"`` with the capacity form of the L2 term (:attr:`DecodeAttentionFit.l2_edge`).
    """
    r = rows[(rows["kind"] == "attention_decode") & (rows["dtype"] == dtype)]
    if not len(r):
        raise ValueError(f"no attention_decode rows of dtype {dtype}")
    a = _attn_arrays(r)
    peak = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16")

    best: tuple[DecodeAttentionFit, float, float] | None = None
    groups = sorted(set((a["h"] / a["hkv"]).astype(int)))
    narrow = xqa_narrow(a["d"], dtype)
    rules = [rule for rule in kernel_rules if rule]
    # a declared kernel rule already sends large groups to the engine's fallback kernel: no max_group search
    groups_at = [0] + ([] if rules else [g for g in (8, 16, 32, 64) if g < max(groups)])
    candidates = [(mg, "", False) for mg in groups_at] + [(0, rule, False) for rule in rules]
    if l2_edge:  # the capacity form of the L2 term, with one kernel or each declared rule but saturating XQA
        candidates += [(0, rule, True) for rule in ["", *rules] if rule != "trtllm_xqa"]
    for max_group, rule, edge in candidates:  # a kernel switch (or the L2 capacity form), chosen by error
        hold: dict[str, float] = {}
        if rule in attn.SPLIT_FORM_RULES:
            hold = {**_SPLIT_UNUSED, **_mmha_occupancy(a, dev, dtype, sm_count, rule)}

        def make(p: dict[str, float], mg: int = max_group, kr: str = rule, h: dict = hold) -> DecodeAttentionFit:
            return DecodeAttentionFit(dtype=dtype, sm_count=sm_count, max_group=mg, kernel_rule=kr, **h, **p)  # type: ignore[arg-type]  # the float fields

        spec = {**_DECODE, "l2_boost": (0.5, 0.0, 20.0), "l2_half_bytes": (2e7, 1e5, 1e9)}
        if edge:
            spec.update(_L2_CAPACITY)
        if max_group or rule in attn.XQA_RULES:  # a fallback that reads the keys per query head
            spec["group_share"] = (4.0, 1.0, 128.0)
        if rule and rule != FA2_VARLEN_RULE:
            spec["fallback_wave_s"] = (2e-6, 0.0, 1e-4)
        if rule == FA2_VARLEN_RULE:  # the copies around a GQA launch
            spec |= {"gqa_swap_s": (2e-6, 0.0, 1e-4), "gqa_copy_s": (4e-6, 0.0, 1e-4)}
        if np.any((a["dv"] > 0) & (a["dv"] != a["d"])):  # launches with distinct K/V head sizes among the rows
            spec["diff_kv_launch_s"] = (2e-6, 0.0, 1e-4)
        if rule in attn.SPLIT_FORM_RULES:
            spec.update(_XQA_SPLIT)
            if np.any(narrow):  # XQA's narrow-head launches (:data:`simcast.cost.trtllm_decode.XQA_PART_BYTES`)
                spec["narrow_launch_s"] = (1e-6, 0.0, 1e-4)
            spec = {k: v for k, v in spec.items() if k not in hold}
        params, err = _fit(
            spec,
            lambda p: attn.decode_time_s(
                make(p), peak, dev.hbm_bw_bytes_per_s, a["b"], a["kv"], a["h"], a["hkv"], a["d"], a["dv"]
            ),
            a["t"],
            starts=[{"smooth_p": 1.5, "launch_s": float(np.min(a["t"])) * 0.6, "split_tokens": 256.0, "wave_s": 4e-6}],
        )
        fit = make(params)
        cost = float(
            np.mean(
                np.abs(
                    np.log(
                        attn.decode_time_s(
                            fit, peak, dev.hbm_bw_bytes_per_s, a["b"], a["kv"], a["h"], a["hkv"], a["d"], a["dv"]
                        )
                        / a["t"]
                    )
                )
            )
        )
        if best is None or cost < best[2] * 0.97:  # a switch must earn its keep (3 % lower mean abs log error)
            best = (fit, err, cost)
    assert best is not None
    return best[0], best[1]


def _mmha_occupancy(
    a: dict[str, np.ndarray], dev: DeviceSpec, dtype: str, sm_count: int, rule: str = "trtllm_xqa_mb"
) -> dict[str, int]:
    """``mmha_ctas_per_sm`` and ``mmha_block_tokens`` of the multi-block form: the pair among
    :data:`MMHA_CTAS_PER_SM` x :data:`MMHA_BLOCK_TOKENS` whose fit to the masked-MHA rows alone (those
    :func:`simcast.cost.trtllm_decode.xqa_runs` sends there) has the least mean abs log error."""
    probe = DecodeAttentionFit(
        dtype=dtype,
        sm_count=sm_count,
        kernel_rule=rule,
        memory=1.0,
        matmul=1.0,
        half_units=0.0,
        split_tokens=1.0,
        half_kv_len=0.0,
        wave_s=0.0,
        smooth_p=1.0,
        launch_s=0.0,
    )
    mm = ~np.asarray(td.xqa_runs(probe, a["b"], a["kv"], a["h"], a["hkv"], a["d"]), dtype=bool)
    if mm.sum() < 20:
        return {}
    sub = {k: v[mm] for k, v in a.items()}
    spec = {k: _DECODE[k] for k in ("memory", "smooth_p", "launch_s")}
    spec |= {"group_share": (4.0, 1.0, 128.0), "fallback_wave_s": (2e-6, 0.0, 1e-4)}
    spec |= {k: _XQA_SPLIT[k] for k in ("fallback_kv_byte_s", "fallback_merge_s")}
    best: tuple[float, dict[str, int]] | None = None
    peak = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16")
    for occ, tok in itertools.product(MMHA_CTAS_PER_SM, MMHA_BLOCK_TOKENS):
        pair = {"mmha_ctas_per_sm": occ, "mmha_block_tokens": tok}
        base = dataclasses.replace(probe, mmha_ctas_per_sm=occ, mmha_block_tokens=tok)

        def pred(p: dict[str, float], base: DecodeAttentionFit = base) -> np.ndarray:
            f = dataclasses.replace(base, **p)  # type: ignore[arg-type]  # the float fields
            return attn.decode_time_s(
                f, peak, dev.hbm_bw_bytes_per_s, sub["b"], sub["kv"], sub["h"], sub["hkv"], sub["d"]
            )

        p, _ = _fit(spec, pred, sub["t"])
        cost = float(np.mean(np.abs(np.log(pred(p) / sub["t"]))))
        if best is None or cost < best[0]:
            best = (cost, pair)
    assert best is not None
    return best[1]


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
