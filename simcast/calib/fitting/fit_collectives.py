"""Fit collective times to measured rows: ``t = α + factor · bytes / β`` per message-size regime, the
regime breakpoints (NCCL's protocol switches, an engine's one-shot / two-shot / NCCL switch) found by the
fit (:mod:`simcast.cost.comm.collectives` prices them). Robust least squares on ``log(predicted / measured)``
(:func:`simcast.calib.fitting.fit.least_squares`)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from simcast.calib.fitting.fit import least_squares
from simcast.core.device import CollectiveFit
from simcast.cost.comm.collectives import factor, piecewise_array_s


def fit_line(nbytes: np.ndarray, time_s: np.ndarray, fac: float) -> tuple[float, float]:
    """Robust fit of ``t = α + fac · bytes / β`` on one segment: (α, β)."""
    bmax = float(np.max(nbytes))
    x0 = np.array([float(np.min(time_s)) * 0.8, max(fac * bmax / max(float(np.max(time_s)), 1e-9), 1e6)])

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log((x[0] + fac * nbytes / x[1]) / time_s)

    x = least_squares(resid, x0, np.array([0.0, 1e6]), np.array([1e-2, 1e14]), robust=True, iters=60)
    return float(x[0]), float(x[1])


MIN_SIZES = 3
"""Measured message sizes per piecewise segment (fewer lets a single noisy point make a segment)."""


def fit_piecewise(
    nbytes: np.ndarray,
    time_s: np.ndarray,
    kind: str,
    gpus: int,
    max_segments: int = 3,
    names: tuple[str, ...] = ("small", "medium", "large"),
    penalty_pct: float = 2.0,
) -> tuple[tuple[CollectiveFit, ...], float]:
    """Piecewise ``α + factor·bytes/β`` over message sizes: the breakpoints (between measured sizes)
    that minimise the summed abs log error, each extra segment paying ``penalty_pct`` per row.

    Returns the regimes (``max_bytes`` of the last is 0 = unbounded) and their median abs % error.
    """
    order = np.argsort(nbytes)
    b, t = np.asarray(nbytes, float)[order], np.asarray(time_s, float)[order]
    sizes = np.unique(b)
    fac = factor(kind, gpus)
    best: tuple[float, tuple[CollectiveFit, ...], float] | None = None
    for nseg in range(1, max_segments + 1):
        for cuts in itertools.combinations(range(MIN_SIZES, len(sizes) - MIN_SIZES + 1), nseg - 1):
            if any(c2 - c1 < MIN_SIZES for c1, c2 in zip(cuts, cuts[1:])):
                continue
            edges = [sizes[0] - 1] + [float(sizes[c - 1]) for c in cuts] + [np.inf]
            fits, pred = [], np.empty_like(t)
            for i, (lo_, hi_) in enumerate(zip(edges, edges[1:])):
                sel = (b > lo_) & (b <= hi_)
                a_, beta = fit_line(b[sel], t[sel], fac)
                pred[sel] = a_ + fac * b[sel] / beta
                label = (names[: nseg - 1] + names[-1:])[i]  # the last segment keeps the last name
                fits.append(
                    CollectiveFit(
                        kind=kind,
                        gpus=gpus,
                        latency_s=float(a_),
                        bus_bw_bytes_per_s=float(beta),
                        max_bytes=0.0 if np.isinf(hi_) else float(hi_),
                        algorithm=label,
                    )
                )
            err = np.abs(np.log(pred / t))
            score = float(np.sum(err)) + penalty_pct / 100 * len(t) * (nseg - 1)
            if best is None or score < best[0]:
                best = (score, tuple(fits), float(np.median(np.abs(pred / t - 1)) * 100))
    assert best is not None
    return best[1], best[2]


def fit_all_reduce(
    rows: pd.DataFrame, names: tuple[str, ...] = ("small", "medium", "large"), max_segments: int = 3
) -> tuple[tuple[CollectiveFit, ...], dict[int, float]]:
    """Piecewise all-reduce fits per group size on ``allreduce`` rows (one node)."""
    r = rows[rows["kind"] == "allreduce"]
    out: list[CollectiveFit] = []
    errs: dict[int, float] = {}
    for gpus, grp in r.groupby("gpus"):
        fits, err = fit_piecewise(
            grp["bytes"].to_numpy(float), grp["time_s"].to_numpy(float), "all_reduce", int(gpus), max_segments, names
        )
        out += fits
        errs[int(gpus)] = err
    return tuple(out), errs


def predict_all_reduce(fits: tuple[CollectiveFit, ...], rows: pd.DataFrame) -> np.ndarray:
    """Vectorised piecewise prediction for ``allreduce`` rows (nearest group size's regimes)."""
    from simcast.cost.comm.collectives import regimes

    out = np.full(len(rows), np.nan)
    for gpus in rows["gpus"].unique():
        sel = (rows["gpus"] == gpus).to_numpy()
        regs = regimes(fits, "all_reduce", int(gpus))
        if regs:
            out[sel] = piecewise_array_s(regs, "all_reduce", int(gpus), rows.loc[sel, "bytes"].to_numpy(float))
    return out
