"""Intervals from the user's own held-out residuals: the leave-one-out residuals ``calibrate-serving``
writes into an engine profile (``provenance.loo.residuals``: metric -> list of ``ln(predicted / measured)``).

A profile with at least :func:`~simcast.calib.uncertainty.intervals.min_rows` (9 at 80 %) residuals for a
metric gives that metric's interval from them (the same split-conformal order statistics as the shipped
table) instead of the shipped table's group: they are held-out errors of this very deployment, engine
and workload family, usually narrower than the pooled published rows. The interval's group names them.
Assumption: the runs the user predicts next are exchangeable with the runs they calibrated on (same
deployment, similar lengths and loads); a prediction far outside them should not use these intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcast.calib.uncertainty.intervals import LEVEL, Interval, conformal_quantiles, min_rows
from simcast.core.errors import require
from simcast.inputs.files import load_yaml

METRICS = ("ttft", "tpot", "throughput")
GROUP_PREFIX = "your leave-one-out residuals"
"""How an interval from the user's residuals names its group (the renderers' source line looks for it)."""
MAX_ABS_LOG = 5.0
"""Largest |ln(predicted / measured)| read (a factor of ~150 either way)."""


@dataclass(frozen=True, kw_only=True)
class UserResiduals:
    """Leave-one-out residuals of one calibrated deployment, per metric."""

    source: str  # the profile's file name
    residuals: dict[str, tuple[float, ...]]


def residuals_from_provenance(prov: Any, source: str) -> UserResiduals | None:
    """The residuals in a profile's ``provenance`` (None when it has none); bad values: one line."""
    loo = prov.get("loo") if isinstance(prov, dict) else None
    res = loo.get("residuals") if isinstance(loo, dict) else None
    if res is None:
        return None
    where = f"engine profile {source}: provenance.loo.residuals"
    require(isinstance(res, dict), where, type(res).__name__, "must map a metric to a list of log ratios")
    out: dict[str, tuple[float, ...]] = {}
    for metric, vals in res.items():
        require(metric in METRICS, where, metric, f"allowed: {', '.join(METRICS)}")
        ok = isinstance(vals, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= MAX_ABS_LOG
            for v in vals
        )
        require(ok, f"{where}.{metric}", None, f"must be a list of numbers in [-{MAX_ABS_LOG:g}, {MAX_ABS_LOG:g}]")
        out[metric] = tuple(float(v) for v in vals)
    return UserResiduals(source=source, residuals=out)


def profile_residuals(path: str) -> UserResiduals | None:
    """The leave-one-out residuals of the engine profile YAML at ``path`` (None: it carries none)."""
    doc = load_yaml(Path(path), "engine profile")
    return residuals_from_provenance(doc.get("provenance") if isinstance(doc, dict) else None, Path(path).name)


def user_interval(user: UserResiduals | None, metric: str, level: float = LEVEL) -> Interval | None:
    """The interval of ``metric`` from the user's residuals, or None with fewer than ``min_rows(level)``."""
    vals = user.residuals.get(metric, ()) if user else ()
    if user is None or len(vals) < min_rows(level):
        return None
    q_lo, q_hi = conformal_quantiles(vals, level)
    return Interval(
        level=level,
        low_factor=math.exp(-q_hi),
        high_factor=math.exp(-q_lo),
        group=f"{GROUP_PREFIX} (calibrate-serving, {user.source})",
        rows=len(vals),
    )
