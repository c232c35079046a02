"""Fit an efficiency factor per kernel kind on top of the CPU overheads (``calibrate-serving``; pure core).

After :func:`~simcast.calib.serving_fit.overhead_fit.fit_overheads` has fitted the CPU per step ``a`` and
per request ``b``, the runs are predicted with each kernel kind's time scaled by a factor ``f_k``
(:mod:`simcast.calib.serving_fit.kernel_kinds`; 1: simcast's kernels as they are) and the factors the runs
can identify are fitted jointly with ``a`` and ``b`` (same objective: squared relative errors of TPOT and
output throughput; projected Gauss-Newton, factors in [:data:`FACTOR_LO`, :data:`FACTOR_HI`]).

**Identifiability test** (per kind, in the order of :data:`~simcast.calib.serving_fit.kernel_kinds.KINDS`),
on the sensitivities ``s_k = d residuals / d f_k`` at the CPU fit (finite differences):

1. *effect*: ``max |s_k| >= MIN_EFFECT`` — the kind is at least 5 % of some fitted figure's time;
2. *separability*: the part of ``s_k`` orthogonal to the span of the sensitivities of the parameters
   already free (the fitted CPU terms, then the kinds accepted before it) is at least ``MIN_SIN`` of its
   norm (an angle of at least ~5.7 degrees: a factor whose sensitivity is nearly a combination of the
   others would trade off against them and take any value the noise gives it);
3. *residuals*: more residuals than free parameters;
4. *precision* (after the fit): the factor's 1-sigma standard error from the residual scatter is at most
   ``MAX_SE``; else it is dropped, refitted without, and reported with its error.

A kind failing a test keeps factor 1 and is reported as not fitted, with the test it failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simcast.calib.serving_fit.kernel_kinds import KINDS
from simcast.calib.serving_fit.overhead_fit import (
    SCALE,
    OverheadFit,
    RunFit,
    _jacobian,
    _residuals,
    fit_overheads,
)
from simcast.calib.serving_fit.run_model import RunModel, RunPrediction
from simcast.engines.policy import EnginePolicy
from simcast.inputs.bench_results import MeasuredRun

MIN_EFFECT = 0.05
"""Least ``max |d relative error / d factor|``: the kind is >= 5 % of some fitted figure's time."""
MIN_SIN = 0.1
"""Least share of a kind's sensitivity orthogonal to the other free parameters' (angle >= 5.7 degrees)."""
MAX_SE = 0.05
"""Largest 1-sigma standard error of a fitted factor (5 %: a looser factor fits noise; with 2 % noise on
nine synthetic runs a spurious 1.18 +/- 0.095 passed at 10 %)."""
FRONT_ROUNDS = 4
"""Rounds of (steps fitted, serving path refitted to the TTFT residuals' median)."""
MAX_ITER = 30
"""Gauss-Newton iterations of the joint fit."""
FACTOR_LO, FACTOR_HI = 0.25, 4.0
"""Bounds of a factor: a kind 4x faster to 4x slower than simcast's kernel model."""


@dataclass(frozen=True, kw_only=True)
class CorrectionFit:
    """The CPU overheads and the identified kernel-kind factors fitted to a set of runs."""

    overheads: OverheadFit  # the CPU fit alone (every factor 1)
    step_overhead_s: float
    per_request_overhead_s: float
    front_end_s: float  # NaN: no run measured TTFT (the start's serving path is kept)
    factors: dict[str, float]  # fitted kinds only
    factor_se: dict[str, float]  # 1-sigma standard errors of the fitted factors
    not_fitted: tuple[tuple[str, str], ...]  # (kind, the test it failed)
    runs: tuple[RunFit, ...]  # predictions with every fitted correction
    rms_error_pct: float

    @property
    def sources(self) -> tuple[str, ...]:
        """The runs the corrections came from."""
        return tuple(r.run.source for r in self.runs)


def _orthogonal_share(col: np.ndarray, basis: np.ndarray) -> float:
    """|component of ``col`` orthogonal to the columns of ``basis``| / |col| (1 with an empty basis)."""
    norm = float(np.linalg.norm(col))
    if norm == 0.0:
        return 0.0
    if basis.shape[1] == 0:
        return 1.0
    coef, *_ = np.linalg.lstsq(basis, col, rcond=None)
    return float(np.linalg.norm(col - basis @ coef)) / norm


def _screen(J: np.ndarray, cpu_free: np.ndarray, n_res: int) -> tuple[list[int], list[tuple[str, str]]]:
    """Kinds (column index into J, after the two CPU columns) passing tests 1-3 of the module docstring."""
    accepted: list[int] = []
    why: list[tuple[str, str]] = []
    for k, kind in enumerate(KINDS):
        col = J[:, 2 + k]
        effect = float(np.abs(col).max()) if col.size else 0.0
        if effect < MIN_EFFECT:
            why.append((kind, f"too small to show: at most {effect:.1%} of a fitted figure per unit factor"))
            continue
        basis = J[:, [i for i in (0, 1) if cpu_free[i]] + [2 + j for j in accepted]]
        share = _orthogonal_share(col, basis)
        if share < MIN_SIN:
            why.append(
                (
                    kind,
                    f"not separable from the CPU terms and the kinds before it ({share:.3f} of its effect is "
                    "independent; runs at more lengths and concurrencies separate it)",
                )
            )
            continue
        if n_res <= int(cpu_free.sum()) + len(accepted) + 1:
            why.append((kind, f"too few measured figures ({n_res}) for another parameter"))
            continue
        accepted.append(k)
    return accepted, why


def _key(x: np.ndarray, front: float | None) -> tuple[float, ...]:
    """The memo key of trial ``x`` with serving path ``front`` (None: the start's)."""
    return tuple(float(v) for v in x) + (front if front is not None else -1.0,)


def _gauss_newton(
    f: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, free: np.ndarray
) -> np.ndarray:
    """Projected Gauss-Newton with step halving on the free coordinates. (Levenberg-Marquardt's diagonal
    damping stalls in the long valley the kinds' close sensitivities make; the predictions are nearly
    linear in every parameter, so the undamped step converges in a few iterations.)"""
    x = np.clip(x0, lo, hi)
    r = f(x)
    cost = float(r @ r)
    for _ in range(MAX_ITER):
        J = _jacobian(f, x, r, hi, free)[:, free]
        step = np.zeros(x.size)
        step[free] = -np.linalg.lstsq(J, r, rcond=None)[0]
        t, better = 1.0, False
        while t > 1e-3:
            xn = np.clip(x + t * step, lo, hi)
            rn = f(xn)
            if float(rn @ rn) < cost:
                better = True
                break
            t /= 2.0
        if not better:
            break
        gain = cost - float(rn @ rn)
        x, r, cost = xn, rn, float(rn @ rn)
        if gain <= 1e-14 + 1e-9 * cost:
            break
    return x


def _cpu_only(ov: OverheadFit, not_fitted: list[tuple[str, str]]) -> CorrectionFit:
    """The CPU fit alone, every kind reported as not fitted."""
    return CorrectionFit(
        overheads=ov,
        step_overhead_s=ov.step_overhead_s,
        per_request_overhead_s=ov.per_request_overhead_s,
        front_end_s=ov.front_end_s,
        factors={},
        factor_se={},
        not_fitted=tuple(sorted(not_fitted, key=lambda w: KINDS.index(w[0]))),
        runs=ov.runs,
        rms_error_pct=ov.rms_error_pct,
    )


def fit_corrections(model: RunModel, runs: Sequence[MeasuredRun], *, start: EnginePolicy) -> CorrectionFit:
    """The CPU overheads, then the kernel-kind factors the runs identify (module docstring)."""
    ov = fit_overheads(model, runs, start=start)
    state = {"front": ov.front_end_s if ov.front_end_s == ov.front_end_s else None}
    cpu_free = np.array([n in ov.fitted for n in ("step_overhead_s", "per_request_overhead_s")])
    t_max = max((r.tpot_s for r in runs if r.tpot_s is not None), default=1.0)
    hi = np.concatenate([np.array([t_max, t_max]) / SCALE, np.full(len(KINDS), FACTOR_HI)])
    lo = np.concatenate([np.zeros(2), np.full(len(KINDS), FACTOR_LO)])
    cache: dict[tuple[float, ...], tuple[np.ndarray, list[RunPrediction]]] = {}

    def f(x: np.ndarray) -> np.ndarray:
        key = _key(x, state["front"])
        if key not in cache:
            a, b = (np.asarray(key[:2]) * SCALE).tolist()
            fac = {kd: v for kd, v in zip(KINDS, key[2:-1]) if v != 1.0}
            model.front_end_s = state["front"]
            try:
                preds = [model.predict(run, a, b, fac) for run in runs]
            finally:
                model.front_end_s = None
            cache[key] = (_residuals(runs, preds), preds)
        return cache[key][0]

    x0 = np.concatenate([np.array([ov.step_overhead_s, ov.per_request_overhead_s]) / SCALE, np.ones(len(KINDS))])
    r0 = f(x0)
    J = _jacobian(f, x0, r0, hi, np.ones(x0.size, dtype=bool))
    accepted, not_fitted = _screen(J, cpu_free, r0.size)
    x, se = x0, np.full(x0.size, math.nan)
    while accepted:
        free = np.concatenate([cpu_free, [k in accepted for k in range(len(KINDS))]])
        x = x0
        for _ in range(FRONT_ROUNDS):  # the serving path (TTFT) and the steps (TPOT, throughput) in turn
            x = _gauss_newton(f, x, lo, hi, free)
            front = state["front"]
            if front is None:
                break
            f(x)
            preds = cache[_key(x, front)][1]
            res = [run.ttft_s - p.ttft_s for run, p in zip(runs, preds) if run.ttft_s is not None]
            new = max(0.0, front + float(np.median(res)))
            state["front"] = new
            if abs(new - front) <= 1e-3 * max(front, 1e-6):
                break
        r = f(x)
        Jf = _jacobian(f, x, r, hi, free)[:, free]
        with np.errstate(all="ignore"):
            cov = np.linalg.pinv(Jf.T @ Jf) * float(r @ r) / max(r.size - int(free.sum()), 1)
        se = np.full(x0.size, math.nan)
        se[free] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        worst = max(accepted, key=lambda k: se[2 + k])
        if not se[2 + worst] > MAX_SE:
            break
        not_fitted.append(
            (KINDS[worst], f"fitted {x[2 + worst]:.3g} +/- {se[2 + worst]:.2g} (1 sigma): not determined")
        )
        accepted = [k for k in accepted if k != worst]
        x = x0
    if not accepted:
        return _cpu_only(ov, not_fitted)
    r = f(x)
    preds = cache[_key(x, state["front"])][1]
    new_front = ov.front_end_s if state["front"] is None else state["front"]
    return CorrectionFit(
        overheads=ov,
        step_overhead_s=float(x[0] * SCALE[0]),
        per_request_overhead_s=float(x[1] * SCALE[1]),
        front_end_s=new_front,
        factors={KINDS[k]: float(x[2 + k]) for k in sorted(accepted)},
        factor_se={KINDS[k]: float(se[2 + k]) for k in sorted(accepted)},
        not_fitted=tuple(sorted(not_fitted, key=lambda w: KINDS.index(w[0]))),
        runs=tuple(RunFit(run=run, predicted=p) for run, p in zip(runs, preds)),
        rms_error_pct=float(np.sqrt(np.mean(r**2)) * 100.0) if r.size else 0.0,
    )
