"""Prediction intervals in words: the lines the commands print under their figures (docs/uncertainty.md)."""

from __future__ import annotations

from collections.abc import Mapping

from simcast.calib.uncertainty.figures import FigureInterval
from simcast.calib.uncertainty.user_residuals import GROUP_PREFIX

HEAD = "80% prediction intervals (from simcast's held-out errors on published runs; docs/uncertainty.md):"
USER_HEAD = (
    "80% prediction intervals (from your own runs: the engine profile's leave-one-out residuals, "
    "calibrate-serving; docs/uncertainty.md):"
)
MIXED_HEAD = (
    "80% prediction intervals (from your own runs' leave-one-out residuals where the engine profile holds "
    "9 or more for the metric, else simcast's held-out errors on published runs; docs/uncertainty.md):"
)


def source_head(figs: Mapping[str, FigureInterval]) -> str:
    """The source line: simcast's residual table, the user's leave-one-out residuals, or both (per figure)."""
    mine = [f.interval.group.startswith(GROUP_PREFIX) for f in figs.values()]
    return USER_HEAD if mine and all(mine) else MIXED_HEAD if any(mine) else HEAD


def interval_lines(figs: Mapping[str, FigureInterval], labels: Mapping[str, tuple[str, str, int]]) -> list[str]:
    """One line per figure: ``labels[key] = (name, unit, decimals)``; figures without a label are left out."""
    rows = [(labels[k], f) for k, f in figs.items() if k in labels]
    if not rows:
        return []
    w = max(len(name) for (name, _, _), _ in rows)
    out = [source_head({k: f for k, f in figs.items() if k in labels})]
    for (name, unit, dec), f in rows:
        iv = f.interval
        why = f"; widened: {iv.widened_for.split(':')[0]}" if iv.widened_for else ""
        out.append(f"  {name:<{w}}  {f.low:.{dec}f} - {f.high:.{dec}f} {unit}  ({iv.rows} residuals: {iv.group}{why})")
    return out
