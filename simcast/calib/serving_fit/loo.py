"""Leave-one-out check of ``calibrate-serving``'s corrections (pure core).

For each run: fit the corrections (:func:`~simcast.calib.serving_fit.factor_fit.fit_corrections`) on the
other runs and predict the one left out, with the fitted corrections and without them (the starting
engine policy, every kernel factor 1). A row (run x metric: TTFT, TPOT, output throughput) got *closer*
when ``|corrected error| < |uncorrected error|``; a run got closer when its mean ``|error|`` over its
measured metrics fell. The corrected predictions' log ratios ``ln(predicted / measured)`` are held-out
residuals of the user's own deployment: the profile carries them and :mod:`simcast.calib.uncertainty`
builds intervals from them (:func:`loo_residuals`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simcast.calib.serving_fit.factor_fit import fit_corrections
from simcast.calib.serving_fit.run_model import RunModel, RunPrediction
from simcast.engines.policy import EnginePolicy
from simcast.inputs.bench_results import MeasuredRun

METRICS = ("ttft", "tpot", "throughput")
"""The metrics compared (the residual table's metric families)."""


@dataclass(frozen=True, kw_only=True)
class LooRow:
    """One left-out run and metric (seconds or tokens/s)."""

    source: str
    metric: str  # one of METRICS
    measured: float
    uncorrected: float
    corrected: float  # CPU overheads, serving path and kernel factors fitted on the other runs
    cpu_only: float  # the CPU overheads and serving path alone (what the written profile applies)

    @property
    def error_before_pct(self) -> float:
        return (self.uncorrected / self.measured - 1.0) * 100.0

    @property
    def error_after_pct(self) -> float:
        return (self.corrected / self.measured - 1.0) * 100.0

    @property
    def closer(self) -> bool:
        return abs(self.error_after_pct) < abs(self.error_before_pct)


@dataclass(frozen=True, kw_only=True)
class LooReport:
    rows: tuple[LooRow, ...]
    runs: int

    @property
    def rows_closer(self) -> int:
        return sum(r.closer for r in self.rows)

    def runs_closer(self) -> int:
        """Runs whose mean |error| over their metrics fell."""
        n = 0
        for src in dict.fromkeys(r.source for r in self.rows):
            mine = [r for r in self.rows if r.source == src]
            n += sum(abs(r.error_after_pct) for r in mine) < sum(abs(r.error_before_pct) for r in mine)
        return n


def _metric(run: MeasuredRun, p: RunPrediction, metric: str) -> tuple[float | None, float]:
    return {
        "ttft": (run.ttft_s, p.ttft_s),
        "tpot": (run.tpot_s, p.tpot_s),
        "throughput": (run.output_tokens_per_s, p.output_tokens_per_s),
    }[metric]


def leave_one_out(model: RunModel, runs: Sequence[MeasuredRun], *, start: EnginePolicy) -> LooReport:
    """The leave-one-out report of ``runs`` (module docstring); needs 2 or more runs (else no rows)."""
    rows: list[LooRow] = []
    if len(runs) < 2:
        return LooReport(rows=(), runs=len(runs))
    for i, held in enumerate(runs):
        fit = fit_corrections(model, [r for j, r in enumerate(runs) if j != i], start=start)
        before = model.predict(held, start.step_overhead_s, start.per_request_overhead_s)
        ov = fit.overheads
        try:
            model.front_end_s = fit.front_end_s if fit.front_end_s == fit.front_end_s else None
            after = model.predict(held, fit.step_overhead_s, fit.per_request_overhead_s, fit.factors)
            model.front_end_s = ov.front_end_s if ov.front_end_s == ov.front_end_s else None
            cpu = model.predict(held, ov.step_overhead_s, ov.per_request_overhead_s) if fit.factors else after
        finally:
            model.front_end_s = None
        for m in METRICS:
            meas, b = _metric(held, before, m)
            a, c = _metric(held, after, m)[1], _metric(held, cpu, m)[1]
            if meas is not None and b > 0 and a > 0 and c > 0:
                rows.append(LooRow(source=held.source, metric=m, measured=meas, uncorrected=b, corrected=a, cpu_only=c))
    return LooReport(rows=tuple(rows), runs=len(runs))


def loo_residuals(report: LooReport) -> dict[str, list[float]]:
    """Per metric, ``ln(predicted / measured)`` of every left-out row (6 decimals), the prediction being what
    the written profile applies elsewhere: the CPU overheads and serving path (``cpu_only``; the kernel
    factors are recorded in the profile, applied by ``calibrate-serving``'s own report only)."""
    out: dict[str, list[float]] = {}
    for r in report.rows:
        out.setdefault(r.metric, []).append(round(math.log(r.cpu_only / r.measured), 6))
    return out
