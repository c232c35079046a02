"""Prediction intervals in words: the lines the commands print under their figures (docs/uncertainty.md)."""

from __future__ import annotations

from collections.abc import Mapping

from simcast.calib.uncertainty.figures import FigureInterval

HEAD = "80% prediction intervals (from simcast's held-out errors on published runs; docs/uncertainty.md):"


def interval_lines(figs: Mapping[str, FigureInterval], labels: Mapping[str, tuple[str, str, int]]) -> list[str]:
    """One line per figure: ``labels[key] = (name, unit, decimals)``; figures without a label are left out."""
    rows = [(labels[k], f) for k, f in figs.items() if k in labels]
    if not rows:
        return []
    w = max(len(name) for (name, _, _), _ in rows)
    out = [HEAD]
    for (name, unit, dec), f in rows:
        iv = f.interval
        why = f"; widened: {iv.widened_for.split(':')[0]}" if iv.widened_for else ""
        out.append(f"  {name:<{w}}  {f.low:.{dec}f} - {f.high:.{dec}f} {unit}  ({iv.rows} residuals: {iv.group}{why})")
    return out
