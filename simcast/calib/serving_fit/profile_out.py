"""The engine profile ``calibrate-serving`` writes: an :class:`~simcast.engines.policy.EnginePolicy` with the
fitted CPU times and the provenance of the fit (its runs, their errors). Read back by
:mod:`simcast.serving.engine_profile`, which holds the profile's schema.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simcast.calib.serving_fit.factor_fit import CorrectionFit
from simcast.calib.serving_fit.loo import LooReport, loo_residuals
from simcast.calib.serving_fit.overhead_fit import OverheadFit, RunFit
from simcast.engines.policy import EnginePolicy


def calibrated_policy(
    start: EnginePolicy, fit: OverheadFit, files: list[tuple[str, str]], setup: str, date: str
) -> tuple[EnginePolicy, dict[str, Any]]:
    """``start`` with the fitted overheads, its ``overhead_source`` label and the provenance block.

    ``files``: (name, sha256) of the measured files; ``setup``: model, layout and device they were measured
    on; ``date``: when the fit ran. Fields the fit did not determine keep their value and their old label.
    """
    names = [n for n, _ in files]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    values = {
        "step_overhead_s": f"{fit.step_overhead_s * 1e3:.3g} ms",
        "per_request_overhead_s": f"{fit.per_request_overhead_s * 1e6:.3g} us",
    }
    label = (
        "fitted: "
        + ", ".join(f"{k} {values[k]}" for k in fit.fitted)
        + f" by simcast calibrate-serving on {shown} ({setup}; TPOT/throughput rms error "
        f"{fit.rms_error_pct:.2f}% over {len(fit.runs)} run(s), {date})"
    )
    for k, why in fit.not_fitted:
        label += f"; {k} {values[k]} not fitted ({why}), kept: {start.overhead_source}"
    if fit.front_end_s == fit.front_end_s:  # not NaN: some run measured TTFT
        start = replace(
            start,
            front_end_s=_sig4(fit.front_end_s),
            front_end_source=f"fitted: {fit.front_end_s * 1e3:.3g} ms per request, the median TTFT residual of "
            f"{shown} after the step overheads ({setup}, {date}); "
            f"{start.front_end_per_token_s * 1e6:.3g} us per prompt token kept",
        )
    pol = replace(
        start,  # 4 significant digits: the fit is not more precise than that (values not fitted: unchanged)
        step_overhead_s=_sig4(fit.step_overhead_s) if "step_overhead_s" in fit.fitted else fit.step_overhead_s,
        per_request_overhead_s=_sig4(fit.per_request_overhead_s)
        if "per_request_overhead_s" in fit.fitted
        else fit.per_request_overhead_s,
        overhead_source=label,
    )
    prov: dict[str, Any] = {
        "tool": "simcast calibrate-serving",
        "date": date,
        "fitted": list(fit.fitted) + (["front_end_s"] if fit.front_end_s == fit.front_end_s else []),
        "not_fitted": {k: f"{why}; kept: {start.overhead_source}" for k, why in fit.not_fitted},
        "measured_on": setup,
        "files": [{"name": n, "sha256": h} for n, h in files],
        "fit": {
            "objective": "sum of squared relative errors of mean TPOT and output throughput",
            "rms_error_pct": round(fit.rms_error_pct, 4),
            "standard_error_s": {
                k: float(f"{v:.3g}")
                for k, v in (
                    ("step_overhead_s", fit.step_overhead_se_s),
                    ("per_request_overhead_s", fit.per_request_overhead_se_s),
                )
                if k in fit.fitted and v == v  # NaN: no residual left to estimate it
            },
            "evaluations": fit.evaluations,
            "runs": [_run_row(r) for r in fit.runs],
        },
    }
    return pol, prov


def _sig4(x: float) -> float:
    return float(f"{x:.4g}")


def _run_row(r: RunFit) -> dict[str, Any]:
    row: dict[str, Any] = {"source": r.run.source, "method": r.predicted.method}
    for metric, meas, pred, unit in (
        ("tpot_ms", r.run.tpot_s, r.predicted.tpot_s, 1e3),
        ("output_throughput", r.run.output_tokens_per_s, r.predicted.output_tokens_per_s, 1.0),
        ("ttft_ms", r.run.ttft_s, r.predicted.ttft_s, 1e3),
    ):
        if meas is not None:
            row[metric] = {"measured": round(meas * unit, 6), "predicted": round(pred * unit, 6)}
    return row


def correction_provenance(corr: CorrectionFit, loo: LooReport) -> dict[str, Any]:
    """The profile's ``kernel_factors`` block (every fitted factor, its error and the runs it came from; the
    kinds not fitted and why) and ``loo`` block (the leave-one-out summary and residuals per metric)."""
    runs = list(corr.sources)
    factors: dict[str, Any] = {
        "model": "stage time + sum over kinds of (factor - 1) x that kind's time (calib.serving_fit.kernel_kinds)",
        "applied_by": "calibrate-serving's own report; the policy fields above are the CPU-only fit",
        "fitted": {
            k: {"factor": _sig4(f), "standard_error": float(f"{corr.factor_se[k]:.3g}"), "runs": runs}
            for k, f in corr.factors.items()
        },
        "not_fitted": {k: why for k, why in corr.not_fitted},
    }
    if corr.factors:
        factors["joint_step_overhead_s"] = _sig4(corr.step_overhead_s)
        factors["joint_per_request_overhead_s"] = _sig4(corr.per_request_overhead_s)
        factors["rms_error_pct"] = round(corr.rms_error_pct, 4)
    block: dict[str, Any] = {"kernel_factors": factors}
    if loo.rows:
        block["loo"] = {
            "method": "each run predicted by a fit on the others; residual = ln(predicted / measured) of the "
            "CPU-only correction the policy fields apply",
            "rows": len(loo.rows),
            "rows_closer": loo.rows_closer,
            "runs": loo.runs,
            "runs_closer": loo.runs_closer(),
            "residuals": loo_residuals(loo),
        }
    return block
