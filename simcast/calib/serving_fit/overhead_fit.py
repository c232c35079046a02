"""Fit an engine's CPU time per step from measured serving runs (the pure core of ``calibrate-serving``).

Model: one step of the engine costs its GPU kernels plus ``step_cpu = a + b · requests_in_step`` of CPU
time; each measured run is predicted for trial ``(a, b)`` by :class:`~simcast.calib.serving_fit.run_model.RunModel`
(a replay of its requests, or the steady-state estimate; see :mod:`simcast.calib.serving_fit.run_model`).

``(a, b) >= 0`` minimise the sum of squared relative errors of TPOT and output throughput over the runs
(TTFT is reported, not fitted: it carries queueing the runs do not describe). Predictions are monotone in
``a`` and ``b`` and nearly linear (exactly, for a serial engine, pp = 1 and fixed step shapes), so a scan
over ``a`` then a bounded Levenberg-Marquardt with finite differences converges in a few dozen
evaluations, each cheap (the run model shares step costs and re-times recorded replays).

``b`` is separable from ``a`` only when the runs' steps carry different numbers of requests; when the
sensitivities of the predictions to ``a`` and ``b`` are parallel (one concurrency level, say), ``b`` keeps
its starting value (labelled as not fitted) and ``a`` alone is fitted. When no prediction moves with a
parameter (an overlap scheduler hides the CPU behind the GPU at every measured point) it is not fitted either.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from simcast.calib.serving_fit.run_model import RunModel, RunPrediction
from simcast.core.errors import require
from simcast.engines.policy import EnginePolicy
from simcast.inputs.bench_results import MeasuredRun

SCALE = np.array([1e-3, 1e-6])
"""Fit units: a in ms, b in us (both of order 1 for real engines: well-conditioned steps)."""
PARALLEL_COS = 0.9995
"""|cos| between the two sensitivity columns above which a and b are not separable (angle < 1.8 degrees)."""
NO_EFFECT = 1e-3
"""A parameter whose whole plausible range moves no prediction by more than 0.1% is not identifiable."""
A_SCAN = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7)
"""Starting values of a, as fractions of the largest plausible step CPU time (the largest measured TPOT)."""


@dataclass(frozen=True, kw_only=True)
class RunFit:
    run: MeasuredRun
    predicted: RunPrediction

    def error_pct(self, metric: str) -> float | None:
        """(predicted - measured) / measured in %, or None when not measured (metric: ttft, tpot, throughput)."""
        meas = {"ttft": self.run.ttft_s, "tpot": self.run.tpot_s, "throughput": self.run.output_tokens_per_s}[metric]
        pred = {
            "ttft": self.predicted.ttft_s,
            "tpot": self.predicted.tpot_s,
            "throughput": self.predicted.output_tokens_per_s,
        }[metric]
        return None if meas is None else (pred / meas - 1.0) * 100.0


@dataclass(frozen=True, kw_only=True)
class OverheadFit:
    step_overhead_s: float
    per_request_overhead_s: float
    fitted: tuple[str, ...]  # fields the data determined
    not_fitted: tuple[tuple[str, str], ...]  # (field, why) for fields kept at their starting value
    runs: tuple[RunFit, ...]
    rms_error_pct: float  # over the fitted metrics (TPOT, throughput) of every run
    evaluations: int  # simulations of the whole run set
    # 1-sigma standard errors of the fitted values from the residual scatter, s^2 (J^T J)^-1 with
    # s^2 = RSS / (residuals - fitted parameters); NaN when not fitted or with no residual left to estimate it
    step_overhead_se_s: float = math.nan
    per_request_overhead_se_s: float = math.nan
    # the serving path (front end) per request: start's value + the median TTFT residual of the runs that
    # measured TTFT (the front end adds to TTFT only, after the steps are fitted); NaN: no TTFT measured
    front_end_s: float = math.nan


def _residuals(runs: Sequence[MeasuredRun], preds: Sequence[RunPrediction]) -> np.ndarray:
    out: list[float] = []
    for run, p in zip(runs, preds):
        if run.tpot_s is not None:
            out.append(p.tpot_s / run.tpot_s - 1.0)
        if run.output_tokens_per_s is not None:
            out.append(p.output_tokens_per_s / run.output_tokens_per_s - 1.0)
    return np.asarray(out)


class _Objective:
    """Residual vector at scaled x = (a ms, b us), memoised by x."""

    def __init__(self, predict: Callable[[float, float], list[RunPrediction]], runs: Sequence[MeasuredRun]):
        self.predict, self.runs = predict, runs
        self.cache: dict[tuple[float, float], tuple[np.ndarray, list[RunPrediction]]] = {}

    def __call__(self, x: np.ndarray) -> np.ndarray:
        key = (float(x[0]), float(x[1]))
        if key not in self.cache:
            a, b = np.asarray(key) * SCALE
            preds = self.predict(float(a), float(b))
            self.cache[key] = (_residuals(self.runs, preds), preds)
        return self.cache[key][0]


def _jacobian(
    f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, r: np.ndarray, hi: np.ndarray, free: np.ndarray
) -> np.ndarray:
    """Finite differences (step 5% of the value, at least 0.1% of the range; backwards at the upper bound)."""
    J = np.zeros((r.size, x.size))
    for i in np.flatnonzero(free):
        h = max(0.05 * x[i], 1e-3 * hi[i])
        if x[i] + h > hi[i]:
            h = -h
        xh = x.copy()
        xh[i] += h
        J[:, i] = (f(xh) - r) / h
    return J


def _levenberg_marquardt(
    f: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    hi: np.ndarray,
    free: np.ndarray,
    max_iter: int = 25,
    lo: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounded (projected onto [lo, hi]) Levenberg-Marquardt on the free coordinates; returns (x, J at x)."""
    x = np.clip(x0, lo, hi)
    r = f(x)
    cost = float(r @ r)
    lam = 1e-2
    J = _jacobian(f, x, r, hi, free)
    for _ in range(max_iter):
        g, H = J.T @ r, J.T @ J
        act = free & (np.diag(H) > 0)  # a column of zeros (no effect) is left alone
        if not act.any():
            break
        accepted = False
        for _ in range(10):
            A = H[np.ix_(act, act)]
            A = A + lam * np.diag(np.diag(A))
            step = np.zeros(x.size)
            step[act] = -np.linalg.solve(A, g[act])
            xn = np.clip(x + step, lo, hi)
            rn = f(xn)
            cn = float(rn @ rn)
            if cn < cost:
                accepted = True
                break
            lam *= 5.0
        if not accepted:
            break
        gain = cost - cn
        x, r, cost, lam = xn, rn, cn, max(lam / 4.0, 1e-7)
        J = _jacobian(f, x, r, hi, free)
        if gain <= 1e-12 + 1e-10 * cost or np.all(np.abs(step) <= 1e-7 * np.maximum(hi, 1.0)):
            break
    return x, J


def _identifiable(J: np.ndarray, hi: np.ndarray, start: EnginePolicy) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Which of (a, b) the runs determine, from the sensitivities ``J`` (d residual / d scaled parameter)."""
    effect = np.abs(J).max(axis=0) * hi  # largest relative change over each parameter's plausible range
    free = effect > NO_EFFECT
    why: list[tuple[str, str]] = []
    if not free[0]:
        hidden = ": the engine's CPU time is hidden behind the GPU in every run" if start.overlap_cpu else ""
        why.append(("step_overhead_s", "no measured value moves with it" + hidden))
    if not free[1]:
        why.append(("per_request_overhead_s", "no measured value moves with it"))
    elif free[0]:
        na, nb = np.linalg.norm(J, axis=0)
        if abs(float(J[:, 0] @ J[:, 1])) / (na * nb) > PARALLEL_COS:
            free[1] = False
            why.append(
                (
                    "per_request_overhead_s",
                    "cannot be separated from step_overhead_s: every run's steps carry about the same number "
                    "of requests (measure two or more concurrencies)",
                )
            )
    return free, why


def fit_overheads(model: RunModel, runs: Sequence[MeasuredRun], *, start: EnginePolicy) -> OverheadFit:
    """Fit ``step_overhead_s`` and ``per_request_overhead_s`` of ``start`` to ``runs`` (see module docstring),
    then the serving path ``front_end_s`` from the runs' TTFT: it adds to every request's TTFT and E2E, so the
    steps are refitted once with it (two passes: the front end moves throughput by a few percent at most)."""
    require(bool(runs), "RESULT", None, "at least one measured run is needed")
    fit = _fit_steps(model, runs, start=start)
    if fit.front_end_s != fit.front_end_s:  # NaN: no run measured TTFT
        return fit
    model.front_end_s = fit.front_end_s
    try:
        second = _fit_steps(model, runs, start=replace(start, front_end_s=fit.front_end_s))
    finally:
        model.front_end_s = None
    return replace(second, evaluations=second.evaluations + fit.evaluations)


def _fit_steps(model: RunModel, runs: Sequence[MeasuredRun], *, start: EnginePolicy) -> OverheadFit:
    f = _Objective(lambda a, b: [model.predict(run, a, b) for run in runs], runs)
    # the CPU time of a step is at most a step: the largest measured TPOT (or 1 s without one)
    t_max = max((r.tpot_s for r in runs if r.tpot_s is not None), default=1.0)
    hi = np.array([t_max, t_max]) / SCALE
    b0 = min(start.per_request_overhead_s / SCALE[1], hi[1])
    scan = [np.array([s * hi[0], b0]) for s in A_SCAN]
    x = min(scan, key=lambda v: float(f(v) @ f(v)))
    free, not_fitted = _identifiable(_jacobian(f, x, f(x), hi, np.array([True, True])), hi, start)
    if free.any():  # the sensitivities at the best start decide what to fit; checked again at the optimum
        x, J = _levenberg_marquardt(f, x, hi, free)
        if free.all():
            free, not_fitted = _identifiable(J, hi, start)
            if not free.all():
                x, _ = _levenberg_marquardt(f, np.where(free, x, [start.step_overhead_s / SCALE[0], b0]), hi, free)
    x = np.where(free, x, [start.step_overhead_s / SCALE[0], b0])
    r = f(x)
    preds = f.cache[(float(x[0]), float(x[1]))][1]
    a, b = (x * SCALE).tolist()
    se = np.full(2, math.nan)
    k = int(free.sum())
    if k and r.size > k:
        J = _jacobian(f, x, r, hi, free)[:, free]
        with np.errstate(all="ignore"):
            cov = np.linalg.pinv(J.T @ J) * float(r @ r) / (r.size - k)
        se[free] = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * SCALE[free]
    ttft_res = [run.ttft_s - p.ttft_s for run, p in zip(runs, preds) if run.ttft_s is not None]
    front = max(0.0, start.front_end_s + float(np.median(ttft_res))) if ttft_res else math.nan
    if ttft_res:  # the predictions now carry the fitted front end
        preds = [replace(p, ttft_s=p.ttft_s + front - start.front_end_s) for p in preds]
    return OverheadFit(
        front_end_s=front,
        step_overhead_s=a if free[0] else start.step_overhead_s,
        per_request_overhead_s=b if free[1] else start.per_request_overhead_s,
        fitted=tuple(n for n, k in zip(("step_overhead_s", "per_request_overhead_s"), free) if k),
        not_fitted=tuple(not_fitted),
        runs=tuple(RunFit(run=run, predicted=p) for run, p in zip(runs, preds)),
        rms_error_pct=float(np.sqrt(np.mean(r**2)) * 100.0) if r.size else 0.0,
        evaluations=len(f.cache),
        step_overhead_se_s=float(se[0]),
        per_request_overhead_se_s=float(se[1]),
    )
