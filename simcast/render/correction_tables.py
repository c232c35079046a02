"""``simcast calibrate-serving``'s kernel-factor block and leave-one-out report (text)."""

from __future__ import annotations

from simcast.calib.serving_fit.factor_fit import CorrectionFit
from simcast.calib.serving_fit.loo import METRICS, LooReport
from simcast.calib.uncertainty.intervals import min_rows
from simcast.calib.uncertainty.user_residuals import UserResiduals, user_interval
from simcast.render.tables import table
from simcast.render.text import format_number

_UNITS = {"ttft": ("TTFT ms", 1e3, 1), "tpot": ("TPOT ms", 1e3, 2), "throughput": ("tok/s", 1.0, 1)}


def format_factors(fit: CorrectionFit) -> str:
    """The kernel-kind factors fitted (with the CPU terms refitted jointly) and the kinds not fitted."""
    lines = ["kernel efficiency factors (time of each kind x factor; 1: simcast's kernels as they are):"]
    for kind, f in fit.factors.items():
        lines.append(f"  {kind}: x {f:.4g} ± {fit.factor_se[kind]:.2g} (fitted, one standard error)")
    for kind, why in fit.not_fitted:
        lines.append(f"  {kind}: kept at 1, not identified: {why}")
    if fit.factors:
        lines.append(
            f"  with them: step_overhead_s = {fit.step_overhead_s * 1e3:.4g} ms, per_request_overhead_s = "
            f"{fit.per_request_overhead_s * 1e6:.4g} us, rms error {fit.rms_error_pct:.2f}% "
            f"(CPU terms alone: {fit.overheads.rms_error_pct:.2f}%)"
        )
    return "\n".join(lines)


def format_loo(rep: LooReport) -> str:
    """One row per left-out run and metric: measured, uncorrected and corrected predictions, errors."""
    if not rep.rows:
        return "leave-one-out: needs 2 or more runs (each is predicted from a fit on the others); not run"
    heads = ["left out", "metric", "measured", "uncorrected", "err %", "corrected", "err %", "closer"]
    rows = []
    for r in rep.rows:
        name, unit, dec = _UNITS[r.metric]
        rows.append(
            [
                r.source,
                name,
                format_number(r.measured * unit, dec),
                format_number(r.uncorrected * unit, dec),
                format_number(r.error_before_pct, signed=True),
                format_number(r.corrected * unit, dec),
                format_number(r.error_after_pct, signed=True),
                "yes" if r.closer else "no",
            ]
        )
    n = len(rep.rows)
    return "\n".join(
        [
            f"leave-one-out: each run predicted by a fit on the other {rep.runs - 1} (uncorrected: the starting "
            "profile, every kernel factor 1)",
            "",
            table(heads, rows),
            "",
            f"closer on {rep.rows_closer} of {n} rows ({rep.rows_closer / n:.0%}); "
            f"{rep.runs_closer()} of {rep.runs} runs closer on their mean |error|",
        ]
    )


def format_user_intervals(user: UserResiduals | None, engine: str, device: str) -> str:
    """Which of the profile's metrics now take their 80 % interval from the user's residuals (with the
    shipped table's loaded-regime interval beside it), and which keep the shipped table's."""
    from simcast.calib.uncertainty.intervals import device_class, interval_for
    from simcast.calib.uncertainty.residuals import shipped_residuals

    lines = ["intervals with this profile:"]
    for metric in METRICS:
        mine = user_interval(user, metric)
        n = len(user.residuals.get(metric, ())) if user else 0
        ship = interval_for(
            shipped_residuals(), engine=engine, device_class=device_class(device), metric=metric, regime="loaded"
        )
        shipped = f"shipped table {ship.group}: x{ship.low_factor:.3g}..x{ship.high_factor:.3g}"
        if mine is None:
            lines.append(f"  {metric}: {n} leave-one-out residual(s), fewer than {min_rows()}: {shipped} stays")
        else:
            lines.append(
                f"  {metric}: from your {mine.rows} leave-one-out residuals: x{mine.low_factor:.3g}.."
                f"x{mine.high_factor:.3g} (80%; was {shipped})"
            )
    return "\n".join(lines)
