"""The residual table of ``simcast calibrate-serving``: measured vs predicted per run, and what was fitted."""

from __future__ import annotations

import math

from simcast.calib.serving_fit.overhead_fit import OverheadFit, RunFit
from simcast.render.tables import table
from simcast.render.text import format_number

_METRICS = (("tpot", "TPOT ms", 1e3, 2), ("throughput", "tok/s", 1.0, 1), ("ttft", "TTFT ms", 1e3, 1))


def _cells(r: RunFit, metric: str, unit: float, decimals: int) -> list[str]:
    meas = {"ttft": r.run.ttft_s, "tpot": r.run.tpot_s, "throughput": r.run.output_tokens_per_s}[metric]
    pred = {"ttft": r.predicted.ttft_s, "tpot": r.predicted.tpot_s, "throughput": r.predicted.output_tokens_per_s}
    err = r.error_pct(metric)
    return [
        "-" if meas is None else format_number(meas * unit, decimals),
        format_number(pred[metric] * unit, decimals),
        "-" if err is None else format_number(err, signed=True),
    ]


def _se(se: float, unit: float) -> str:
    return "" if math.isnan(se) else f" ± {se * unit:.2g}"


def format_overhead_fit(fit: OverheadFit, header: str) -> str:
    """Header, one row per run (measured, predicted, error % of TPOT, output tokens/s, TTFT), the fit."""
    heads = ["run", "simulated as", "conc", "ISL", "OSL"]
    for _, name, _, _ in _METRICS:
        heads += [f"{name} meas", "pred", "err %"]
    rows = []
    for r in fit.runs:
        row = [r.run.source, r.predicted.method, str(r.run.concurrency or "-"), str(r.run.input_len)]
        row.append(str(r.run.output_len))
        for metric, _, unit, decimals in _METRICS:
            row += _cells(r, metric, unit, decimals)
        rows.append(row)
    vals = {
        "step_overhead_s": f"step_overhead_s = {fit.step_overhead_s * 1e3:.4g}{_se(fit.step_overhead_se_s, 1e3)} ms",
        "per_request_overhead_s": f"per_request_overhead_s = {fit.per_request_overhead_s * 1e6:.4g}"
        f"{_se(fit.per_request_overhead_se_s, 1e6)} us",
    }
    lines = [header, "", table(heads, rows), ""]
    if fit.fitted:
        lines.append(
            "fitted: "
            + ", ".join(vals[k] for k in fit.fitted)
            + f" (rms error {fit.rms_error_pct:.2f}% over the TPOT and throughput of {len(fit.runs)} run(s); "
            f"{fit.evaluations} evaluations)"
        )
        if not math.isnan(fit.step_overhead_se_s) or not math.isnan(fit.per_request_overhead_se_s):
            lines.append("  ± one standard error from the residual scatter (independent errors assumed)")
    for k, why in fit.not_fitted:
        lines.append(f"not fitted: {vals[k]} kept from the starting profile: {why}")
    lines.append("TTFT is reported, not fitted (it carries queueing the runs do not describe)")
    return "\n".join(lines)
