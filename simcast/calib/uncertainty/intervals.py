"""Prediction intervals from simcast's own held-out residuals (pure; the residual table is read at the edge).

Every figure simcast prints is a point estimate. This module turns the residuals of the checks simcast
owns — predictions of rows it never fitted: the public vLLM/SGLang development set, the pipeline-parallel
rows, the published TensorRT-LLM figures (``docs/serving_accuracy*.md``, ``docs/pp_accuracy.md``; extracted
by ``scripts/intervals.py`` into ``simcast/data/intervals/residuals.csv``) — into an interval per metric.

Method (split-conformal quantiles of the log ratio):

* a residual is ``r = ln(predicted / measured)``; for a new prediction ``p`` the measured value lies in
  ``[p·exp(-q_hi), p·exp(-q_lo)]`` where ``q_lo`` / ``q_hi`` are the lower / upper quantiles of ``r``;
* for a central ``level`` (0.8: an 80 % interval) each tail takes ``alpha = (1 - level) / 2``; with ``n``
  residuals the upper quantile is the ``ceil((n + 1)(1 - alpha))``-th smallest and the lower the
  ``floor((n + 1) alpha)``-th (the split-conformal order statistics: for exchangeable residuals the
  interval covers a new value with probability at least ``level``); they exist only for
  ``n >= MIN_ROWS`` (9 at 80 %), so a group with fewer rows falls back to a coarser one;
* groups, finest first: engine × device class × metric × load regime → engine × metric × regime →
  metric × regime → metric → every residual. The interval names the group it used and its row count.

**Widening where the prediction leans on data that was not fitted** (an unfitted device profile: kernel
efficiencies carried over from another device): the log half-widths are combined in quadrature with the
kernel transfer error measured in ``docs/accuracy.md``'s transfer checks (fit on H100, predict H200 / B200
from their own peaks), the median over kernel kinds of the per-kind 90th-percentile absolute error
(:data:`TRANSFER_P90`). Assumption: the serving residuals and the kernel transfer error are independent.

Coverage is measured, not assumed: :func:`two_fold_coverage` builds the intervals on half the rows (split by
row id, every metric of one configuration in the same half) and counts how many of the other half's
measurements they contain.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LEVEL = 0.8  # the central level simcast states (80 % intervals)
METRICS = ("ttft", "tpot", "throughput", "latency")
REGIMES = ("static", "light", "loaded", "saturated")

# docs/accuracy.md "Transfer checks" (fit on h100_sxm, predict from the target's own peaks; kernel kinds gemm,
# attention prefill/decode, all-reduce in bf16/fp8): median over the kinds of each row's p90 |error| in %.
# Same generation (-> h200_sxm, 16 rows): p90s from 9.2 to 27.8, median 23.0; next generation (-> b200_sxm,
# 16 rows): p90s from 25.2 to 85.4, median 42.3. simcast uses the next-generation figure for any unfitted
# device: it is what a carried-over fit meets when the kernels change.
TRANSFER_P90 = {"same_generation": 0.230, "next_generation": 0.423}
TRANSFER_SOURCE = "docs/accuracy.md transfer checks (h100_sxm fit -> b200_sxm, median of per-kind p90 |error|)"

# Device classes the residuals are grouped by: one GPU generation of one vendor shares its kernels' behaviour
# (an approximation: the residual groups are too thin to split further). Matched on the profile name's prefix.
DEVICE_CLASSES = (
    ("gb3", "nvidia-blackwell"),
    ("gb2", "nvidia-blackwell"),
    ("b3", "nvidia-blackwell"),
    ("b2", "nvidia-blackwell"),
    ("h", "nvidia-hopper"),
    ("a100", "nvidia-ampere"),
    ("a10", "nvidia-ampere"),
    ("l40", "nvidia-ada"),
    ("mi", "amd-cdna3"),
    ("ascend", "ascend"),
)


def device_class(device: str) -> str:
    """The residual group of a device profile name (``h100_sxm`` -> ``nvidia-hopper``; unknown: ``other``)."""
    return next((c for prefix, c in DEVICE_CLASSES if device.startswith(prefix)), "other")


@dataclass(frozen=True, kw_only=True)
class Residual:
    """One held-out comparison: a measured figure and simcast's prediction of it (same unit)."""

    row_id: str
    source: str  # the page the comparison is published on (docs/...)
    engine: str
    model: str
    device: str
    device_class: str
    metric: str  # one of METRICS
    regime: str  # one of REGIMES
    measured: float
    predicted: float

    @property
    def log_ratio(self) -> float:
        """``ln(predicted / measured)``: positive when simcast over-predicts."""
        return math.log(self.predicted / self.measured)


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A central interval for a predicted value, as factors: measured in ``[value·low_factor,
    value·high_factor]`` with the stated level (coverage measured two-fold on the residuals: see docs)."""

    level: float
    low_factor: float
    high_factor: float
    group: str  # the residual group used, e.g. "engine=vllm metric=ttft regime=light"
    rows: int  # residuals in that group
    widened_for: str = ""  # why it was widened ("" when not): e.g. "unfitted device profile"

    def bounds(self, value: float) -> tuple[float, float]:
        """``(low, high)`` for a predicted ``value`` (any unit)."""
        return value * self.low_factor, value * self.high_factor

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width relative to the prediction, in % (a ± figure)."""
        return 50.0 * (self.high_factor - self.low_factor)


def _ceil(x: float) -> int:
    """``ceil`` of a product of decimals, immune to their binary rounding (``11 * 0.9`` is 9.9000000001)."""
    return math.ceil(round(x, 9))


def _floor(x: float) -> int:
    return math.floor(round(x, 9))


def min_rows(level: float = LEVEL) -> int:
    """Fewest residuals whose split-conformal order statistics exist at ``level`` (9 at 0.8, 19 at 0.9):
    the least ``n`` with ``ceil((n + 1)(1 - alpha)) <= n``."""
    alpha = (1.0 - level) / 2.0
    n = 2
    while _ceil((n + 1) * (1.0 - alpha)) > n:
        n += 1
    return n


def conformal_quantiles(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """``(q_lo, q_hi)``: the ``floor((n+1)·alpha)``-th and ``ceil((n+1)(1-alpha))``-th smallest of ``values``
    (1-based), ``alpha = (1 - level)/2``; raises ValueError when ``n < min_rows(level)``."""
    n = len(values)
    if n < min_rows(level):
        raise ValueError(f"{n} residuals: at least {min_rows(level)} needed for a {level:.0%} interval")
    alpha = (1.0 - level) / 2.0
    s = sorted(values)
    lo_k = max(1, _floor((n + 1) * alpha))
    hi_k = min(n, _ceil((n + 1) * (1.0 - alpha)))
    return s[lo_k - 1], s[hi_k - 1]


def _groups(engine: str, device_class: str, metric: str, regime: str) -> list[tuple[str, dict[str, str]]]:
    """The residual groups to try, finest first: (label, the fields a residual must match)."""
    keys = [
        {"engine": engine, "device_class": device_class, "metric": metric, "regime": regime},
        {"engine": engine, "metric": metric, "regime": regime},
        {"metric": metric, "regime": regime},
        {"metric": metric},
        {},
    ]
    return [(" ".join(f"{k}={v}" for k, v in d.items()) or "all residuals", d) for d in keys]


def interval_for(
    residuals: Iterable[Residual],
    *,
    engine: str,
    device_class: str,
    metric: str,
    regime: str,
    unfitted_device: bool = False,
    level: float = LEVEL,
) -> Interval:
    """The interval of a prediction of ``metric`` by ``engine`` on a device of ``device_class`` in a load
    ``regime``, from the finest residual group with at least :func:`min_rows` rows (module docstring)."""
    rows = list(residuals)
    need = min_rows(level)
    for label, match in _groups(engine, device_class, metric, regime):
        got = [r.log_ratio for r in rows if all(getattr(r, k) == v for k, v in match.items())]
        if len(got) >= need:
            q_lo, q_hi = conformal_quantiles(got, level)
            widened = ""
            if unfitted_device:
                extra = math.log1p(TRANSFER_P90["next_generation"])
                mid = (q_lo + q_hi) / 2.0
                half = math.hypot((q_hi - q_lo) / 2.0, extra)
                q_lo, q_hi = mid - half, mid + half
                widened = f"unfitted device profile: + {TRANSFER_SOURCE} in quadrature"
            return Interval(
                level=level,
                low_factor=math.exp(-q_hi),
                high_factor=math.exp(-q_lo),
                group=label,
                rows=len(got),
                widened_for=widened,
            )
    raise ValueError(f"{len(rows)} residuals in all: at least {need} needed for a {level:.0%} interval")


def fold_of(row_id: str) -> int:
    """0 or 1: the half a configuration falls in for :func:`two_fold_coverage` (stable hash of its id)."""
    return hashlib.sha1(row_id.encode()).digest()[0] & 1


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """Two-fold check of the intervals: how many held-out measurements fell inside."""

    level: float
    rows: int
    inside: int
    median_half_width_pct: float

    @property
    def fraction(self) -> float:
        return self.inside / self.rows if self.rows else float("nan")


def two_fold_coverage(
    residuals: Sequence[Residual], level: float = LEVEL, metric: str | None = None, regime: str | None = None
) -> Coverage:
    """Intervals built on one half of the rows (:func:`fold_of`) judged on the other, both ways round;
    ``metric`` / ``regime`` restrict the judged rows (the intervals still use every row of the other half)."""
    inside, widths, judged = 0, [], 0
    for fold in (0, 1):
        train = [r for r in residuals if fold_of(r.row_id) != fold]
        for r in residuals:
            if fold_of(r.row_id) != fold or (metric and r.metric != metric) or (regime and r.regime != regime):
                continue
            iv = interval_for(
                train, engine=r.engine, device_class=r.device_class, metric=r.metric, regime=r.regime, level=level
            )
            lo, hi = iv.bounds(r.predicted)
            inside += lo <= r.measured <= hi
            widths.append(iv.half_width_pct)
            judged += 1
    med = statistics.median(widths) if widths else float("nan")
    return Coverage(level=level, rows=judged, inside=inside, median_half_width_pct=med)


def paired_spread(
    residuals: Iterable[Residual], *, engine: str, metric: str, level: float = LEVEL
) -> tuple[float, int]:
    """How far apart two predictions must be before simcast can tell them apart: the split-conformal
    ``level`` quantile of ``|r_i - r_j|`` over pairs of residuals of the same engine, model, device and metric
    from different configurations (two layouts of one model on one device share most of their error, so the
    spread of the differences is what a comparison faces, not the sum of two intervals). Falls back to every
    engine's pairs of ``metric`` when the engine has fewer than :func:`min_rows` pairs. Returns ``(spread, pairs)``: the
    log-ratio ``ln(a / b)`` two predictions need to differ by."""
    rows = [r for r in residuals if r.metric == metric]
    for eng in (engine, None):
        diffs = [
            abs(a.log_ratio - b.log_ratio)
            for i, a in enumerate(rows)
            for b in rows[i + 1 :]
            if a.row_id != b.row_id
            and a.device == b.device
            and a.engine == b.engine
            and a.model == b.model
            and (eng is None or a.engine == eng)
        ]
        if len(diffs) >= min_rows(level):
            n = len(diffs)
            k = min(n, _ceil((n + 1) * level))
            return sorted(diffs)[k - 1], n
    raise ValueError(f"fewer than {min_rows(level)} pairs of {metric} residuals")
