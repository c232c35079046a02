"""Prediction intervals of the results the API returns (docs/uncertainty.md).

Each result states an 80 % interval for the figures users read: a step's latency (``simulate``), a run's
TTFT / TPOT / ITL and throughput (``bench-serve``), a deployment's steady state (``serve-config``, the
optimizer's layouts). The intervals come from simcast's own held-out residuals
(:mod:`simcast.calib.uncertainty`), grouped by engine, device class, metric and load regime; a device profile
without fitted kernels widens them. The optimizer also says which layouts are within error of the best one.
An ``--engine-profile`` holding ``calibrate-serving``'s leave-one-out residuals (at least 9 for a metric) gives
that metric's interval from them instead (:mod:`simcast.calib.uncertainty.user_residuals`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simcast.calib.uncertainty.figures import FigureInterval, figure_intervals, load_regime, within_error
from simcast.calib.uncertainty.user_residuals import UserResiduals
from simcast.core.device import DeviceSpec
from simcast.core.dtypes import FP4_ACTIVATION_FORMATS

FP4_FAMILIES = frozenset(FP4_ACTIVATION_FORMATS)

BENCH_FIGURES = ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput")


def user_residuals(engine_profile: str | None) -> UserResiduals | None:
    """The leave-one-out residuals in the engine profile at ``engine_profile`` (None: no profile, or a
    profile without them)."""
    if not engine_profile:
        return None
    from simcast.calib.uncertainty.user_residuals import profile_residuals

    return profile_residuals(engine_profile)


def unfitted(device: DeviceSpec) -> bool:
    """A profile with no engine's fitted kernels (its efficiencies are priors or carried over); fits of the
    FP4 weight GEMMs / MoE experts alone (GB300's profile) leave every other kernel on priors: still unfitted."""
    return not any(
        ek.prefill or ek.decode or ek.all_reduce or ek.all_to_all or any(f.dtype not in FP4_FAMILIES for f in ek.gemm)
        for ek in device.engines.values()
    )


def as_dict(figs: Mapping[str, FigureInterval]) -> dict[str, Any]:
    """The ``intervals_80`` block of the JSON outputs."""
    return {k: v.to_dict() for k, v in figs.items()}


def step_intervals(*, latency_s: float, phase: str, engine: str | None, device: DeviceSpec) -> dict[str, Any]:
    """A ``simulate`` step: its latency (ms) as a TTFT (prefill) or a TPOT (decode) of a static batch."""
    key = "ttft" if phase == "prefill" else "tpot"
    figs = figure_intervals(
        {key: latency_s * 1e3},
        engine=engine or "none",
        device=device.name,
        regime=load_regime(static=True),
        unfitted_device=unfitted(device),
    )
    return {"latency_ms": figs[key]} if key in figs else {}


def bench_intervals(
    metrics: Mapping[str, float],
    *,
    engine: str,
    device: DeviceSpec,
    max_concurrency: int,
    request_rate: float,
    user: UserResiduals | None = None,
) -> dict[str, FigureInterval]:
    """A ``bench-serve`` run: median TTFT / TPOT / ITL (ms) and output token/s (``user``: the engine
    profile's leave-one-out residuals, used for each metric with enough of them)."""
    keys = {"median_ttft_ms": "median_ttft", "median_tpot_ms": "median_tpot", "median_itl_ms": "median_itl"}
    keys["output_throughput"] = "output_throughput"
    figs = figure_intervals(
        {keys[k]: float(metrics[k]) for k in BENCH_FIGURES if k in metrics},
        engine=engine,
        device=device.name,
        regime=load_regime(max_concurrency=max_concurrency, request_rate=request_rate),
        unfitted_device=unfitted(device),
        user=user,
    )
    back = {v: k for k, v in keys.items()}
    return {back[k]: v for k, v in figs.items()}


def serving_intervals(
    *,
    ttft_ms: float,
    tpot_ms: float,
    tokens_per_s_per_device: float,
    engine: str,
    device: DeviceSpec,
    saturated: bool,
    user: UserResiduals | None = None,
) -> dict[str, FigureInterval]:
    """A steady state: TTFT, TPOT (ms) and output token/s per device (the optimizer's points are saturated
    ones; a throughput's relative error does not depend on what it is divided by; ``user`` as
    :func:`bench_intervals`)."""
    figs = figure_intervals(
        {"ttft": ttft_ms, "tpot": tpot_ms, "throughput": tokens_per_s_per_device},
        engine=engine,
        device=device.name,
        regime="saturated" if saturated else "loaded",
        unfitted_device=unfitted(device),
        user=user,
    )
    names = {"ttft": "ttft_ms", "tpot": "tpot_ms", "throughput": "tokens_per_s_per_device"}
    return {names[k]: v for k, v in figs.items()}


@dataclass(frozen=True, kw_only=True)
class LayoutChoice:
    """Which ranked layouts simcast cannot tell from the best one: those whose token/s/device is within the
    paired spread of simcast's held-out errors (``within``, 0-based ranks, the best first), and the few of
    them worth benchmarking to settle the choice (``benchmark``)."""

    within: tuple[int, ...]
    benchmark: tuple[int, ...]
    spread_pct: float  # the paired spread as a % difference of token/s/device

    def to_dict(self) -> dict[str, Any]:
        return {
            "within_error_of_best": [i + 1 for i in self.within],
            "worth_benchmarking": [i + 1 for i in self.benchmark],
            "paired_spread_pct": self.spread_pct,
        }


def layout_choice(tokens_per_s_per_device: Sequence[float], *, engine: str, worth: int = 3) -> LayoutChoice:
    """:class:`LayoutChoice` of ranked layouts (their token/s/device, best first)."""
    from simcast.calib.uncertainty.intervals import paired_spread
    from simcast.calib.uncertainty.residuals import shipped_residuals

    spread, _ = paired_spread(shipped_residuals(), engine=engine, metric="throughput")
    if not tokens_per_s_per_device:
        return LayoutChoice(within=(), benchmark=(), spread_pct=100 * math.expm1(spread))
    best = tokens_per_s_per_device[0]
    within = tuple(i for i, x in enumerate(tokens_per_s_per_device) if within_error(best, x, engine=engine))
    return LayoutChoice(within=within, benchmark=within[:worth], spread_pct=100 * math.expm1(spread))
