"""Prediction intervals (simcast.calib.uncertainty.intervals): the order statistics by hand, the fallback from
thin groups, the widening for unfitted devices, the shipped residual table being the pages' tables, and its measured
two-fold coverage inside the 70-90 % band the 80 % level promises."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from simcast.calib.uncertainty.intervals import (
    Residual,
    conformal_quantiles,
    device_class,
    interval_for,
    min_rows,
    paired_spread,
    two_fold_coverage,
)
from simcast.calib.uncertainty.residuals import shipped_residuals

ROOT = Path(__file__).resolve().parents[2]


def _res(i: int, ratio: float, **kw: str) -> Residual:
    base = dict(
        row_id=f"r{i}",
        source="t",
        engine="vllm",
        model="m",
        device="h100_sxm",
        device_class="nvidia-hopper",
        metric="tpot",
        regime="light",
    )
    base.update(kw)
    return Residual(measured=100.0, predicted=100.0 * ratio, **base)  # type: ignore[arg-type]


def test_min_rows_at_80_percent_is_nine() -> None:
    # ceil((n+1)*0.9) <= n  <=>  n >= 9
    assert min_rows(0.8) == 9
    assert min_rows(0.9) == 19


def test_conformal_quantiles_by_hand() -> None:
    vals = [float(v) for v in range(1, 10)]  # n = 9: floor(10*0.1) = 1st, ceil(10*0.9) = 9th
    assert conformal_quantiles(vals, 0.8) == (1.0, 9.0)
    vals = [float(v) for v in range(1, 20)]  # n = 19: 2nd and 18th
    assert conformal_quantiles(vals, 0.8) == (2.0, 18.0)
    with pytest.raises(ValueError):
        conformal_quantiles([1.0] * 8, 0.8)


def test_interval_bounds_follow_the_log_ratios() -> None:
    # predicted/measured ratios e^-0.4 .. e^0.4 in 9 steps: the 80 % interval spans the extremes
    rows = [_res(i, math.exp(-0.4 + 0.1 * i)) for i in range(9)]
    iv = interval_for(rows, engine="vllm", device_class="nvidia-hopper", metric="tpot", regime="light")
    assert iv.rows == 9 and iv.group.startswith("engine=vllm device_class=nvidia-hopper")
    lo, hi = iv.bounds(10.0)
    assert lo == pytest.approx(10.0 * math.exp(-0.4)) and hi == pytest.approx(10.0 * math.exp(0.4))


def test_a_thin_group_falls_back_to_a_coarser_one() -> None:
    rows = [_res(i, 1.0 + 0.01 * i, engine="sglang") for i in range(9)] + [_res(99, 2.0, engine="vllm")]
    iv = interval_for(rows, engine="vllm", device_class="nvidia-hopper", metric="tpot", regime="light")
    # one vllm row only: the engine-free group (metric x regime) with all 10 rows
    assert iv.group == "metric=tpot regime=light" and iv.rows == 10


def test_unfitted_device_widens_around_the_same_centre() -> None:
    rows = [_res(i, math.exp(-0.2 + 0.05 * i)) for i in range(9)]
    kw = dict(engine="vllm", device_class="nvidia-hopper", metric="tpot", regime="light")
    a = interval_for(rows, **kw)  # type: ignore[arg-type]
    b = interval_for(rows, unfitted_device=True, **kw)  # type: ignore[arg-type]
    assert b.low_factor < a.low_factor and b.high_factor > a.high_factor and b.widened_for
    assert math.log(b.low_factor) + math.log(b.high_factor) == pytest.approx(math.log(a.low_factor * a.high_factor))


def test_device_classes() -> None:
    assert device_class("h100_sxm") == device_class("h20") == "nvidia-hopper"
    assert device_class("gb200") == device_class("b300") == "nvidia-blackwell"
    assert device_class("mi355x") == "amd-cdna3" and device_class("a100_sxm_80gb") == "nvidia-ampere"
    assert device_class("tpu_v5") == "other"


def test_paired_spread_counts_only_same_model_device_pairs() -> None:
    rows = [_res(i, 1.0 + 0.1 * i) for i in range(5)] + [_res(10 + i, 3.0, model="other") for i in range(5)]
    spread, pairs = paired_spread(rows, engine="vllm", metric="tpot")
    assert pairs == 10 + 10  # C(5,2) in each model, none across
    # 20 |differences|: model "other"'s ten are 0, model "m"'s are |ln(1+0.1j) - ln(1+0.1i)|; the
    # ceil(21 * 0.8) = 17th smallest is the 7th smallest of model m's
    m_diffs = sorted(abs(math.log(1 + 0.1 * j) - math.log(1 + 0.1 * i)) for i in range(5) for j in range(i + 1, 5))
    assert spread == pytest.approx(m_diffs[6], rel=1e-12)


def test_shipped_table_is_the_accuracy_pages() -> None:
    spec = importlib.util.spec_from_file_location("intervals_script", ROOT / "scripts" / "intervals.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--check"]) == 0, "run python scripts/intervals.py after regenerating an accuracy page"


def test_two_fold_coverage_of_the_shipped_residuals_is_in_the_promised_band() -> None:
    rows = shipped_residuals()
    assert len(rows) >= 100
    cov = two_fold_coverage(rows)
    # the 80 % intervals, built on one half of the configurations, hold 70-90 % of the other half
    assert 0.70 <= cov.fraction <= 0.90, cov


def test_load_regime_rules() -> None:
    from simcast.calib.uncertainty.figures import load_regime

    assert load_regime(static=True) == "static"
    assert load_regime(max_concurrency=8) == "light"
    assert load_regime(max_concurrency=9) == "loaded"
    assert load_regime() == "saturated"  # rate inf, no cap
    assert load_regime(request_rate=4.0) == "loaded"


def test_figure_intervals_cover_known_figures_and_contain_the_value_band() -> None:
    from simcast.calib.uncertainty.figures import figure_intervals

    figs = figure_intervals(
        {"mean_ttft": 100.0, "median_tpot": 20.0, "output_throughput": 5000.0, "request_count": 7.0},
        engine="vllm",
        device="h100_sxm",
        regime="saturated",
    )
    assert set(figs) == {"mean_ttft", "median_tpot", "output_throughput"}  # request_count has no residuals
    for f in figs.values():
        assert 0 < f.low < f.high and f.interval.rows >= 9
        d = f.to_dict()
        assert d["level"] == 0.8 and d["residual_rows"] == f.interval.rows
    wide = figure_intervals(
        {"output_throughput": 5000.0}, engine="vllm", device="h100_sxm", regime="saturated", unfitted_device=True
    )["output_throughput"]
    assert wide.low < figs["output_throughput"].low and wide.high > figs["output_throughput"].high
