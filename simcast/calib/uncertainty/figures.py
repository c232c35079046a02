"""Intervals for the figures a command prints (pure, over the shipped residual table).

A command knows its engine, device, load and figures; :func:`figure_intervals` names each figure's metric
family and load regime (:func:`load_regime`), asks :func:`~simcast.calib.uncertainty.intervals.interval_for`
and returns one :class:`FigureInterval` per figure, which the renderers print and ``--json`` carries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simcast.calib.uncertainty.intervals import LEVEL, Interval, device_class, interval_for, paired_spread
from simcast.calib.uncertainty.residuals import shipped_residuals
from simcast.calib.uncertainty.user_residuals import UserResiduals, user_interval

SOURCE = "docs/uncertainty.md: split-conformal quantiles of simcast's held-out residuals"
LIGHT_CONCURRENCY = 8  # at or below: light load (the residual table's regimes, scripts/intervals.py)

# A figure's key (as the JSON names it) -> the metric family its residuals come from
FIGURE_METRICS = {
    "ttft": "ttft",
    "mean_ttft": "ttft",
    "median_ttft": "ttft",
    "tpot": "tpot",
    "mean_tpot": "tpot",
    "median_tpot": "tpot",
    "mean_itl": "tpot",
    "median_itl": "tpot",
    "step_time": "latency",
    "e2e_latency": "latency",
    "median_e2el": "latency",
    "output_throughput": "throughput",
    "total_token_throughput": "throughput",
    "throughput": "throughput",
    "tokens_per_s": "throughput",
    "tokens_per_s_per_device": "throughput",
}


def load_regime(*, static: bool = False, max_concurrency: int = 0, request_rate: float = math.inf) -> str:
    """The residual table's load regime of a run: ``static`` (one batch, ``simcast simulate``), ``light``
    (a client concurrency of at most 8), ``saturated`` (every request at once with no cap: ``--request-rate
    inf``, or the optimizer's maximum-throughput point), else ``loaded``."""
    if static:
        return "static"
    if max_concurrency and max_concurrency <= LIGHT_CONCURRENCY:
        return "light"
    if not max_concurrency and math.isinf(request_rate):
        return "saturated"
    return "loaded"


@dataclass(frozen=True, kw_only=True)
class FigureInterval:
    """One printed figure with its interval (same unit as the figure)."""

    figure: str
    value: float
    low: float
    high: float
    interval: Interval

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {
            "low": self.low,
            "high": self.high,
            "level": iv.level,
            "residual_group": iv.group,
            "residual_rows": iv.rows,
            **({"widened_for": iv.widened_for} if iv.widened_for else {}),
        }


def figure_intervals(
    figures: Mapping[str, float],
    *,
    engine: str,
    device: str,
    regime: str,
    unfitted_device: bool = False,
    user: UserResiduals | None = None,
) -> dict[str, FigureInterval]:
    """An interval per figure whose key :data:`FIGURE_METRICS` knows (others are left out); ``engine``
    ``"none"`` takes the engine-free residual groups. ``user``: the leave-one-out residuals of a calibrated
    engine profile; a metric with enough of them takes its interval from them (their group says so)."""
    rows = shipped_residuals()
    out: dict[str, FigureInterval] = {}
    for key, value in figures.items():
        metric = FIGURE_METRICS.get(key)
        if metric is None or not math.isfinite(value) or value <= 0:
            continue
        iv = user_interval(user, metric) or interval_for(
            rows,
            engine=engine,
            device_class=device_class(device),
            metric=metric,
            regime=regime,
            unfitted_device=unfitted_device,
            level=LEVEL,
        )
        lo, hi = iv.bounds(value)
        out[key] = FigureInterval(figure=key, value=value, low=lo, high=hi, interval=iv)
    return out


def within_error(best: float, other: float, *, engine: str, metric: str = "throughput") -> bool:
    """True when ``other`` is within the paired spread of ``best`` (same metric, same deployment family):
    simcast cannot tell the two apart at the stated level (:func:`paired_spread`)."""
    if best <= 0 or other <= 0:
        return False
    spread, _ = paired_spread(shipped_residuals(), engine=engine, metric=metric)
    return abs(math.log(best / other)) <= spread
