"""An ``--engine-profile`` holding ``calibrate-serving``'s leave-one-out residuals (9 or more per metric) gives
the 80 % intervals of bench-serve, serve-config, optimize and the API, and their source line says so."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from simcast.cli.main import main
from simcast.render.interval_text import HEAD, MIXED_HEAD, USER_HEAD

MODEL = "Qwen/Qwen3-0.6B"
# ten residuals ln(predicted / measured) per metric: at 80 % the split-conformal order statistics are the
# floor(11 x 0.1) = 1st and ceil(11 x 0.9) = 10th smallest, so the interval is [x exp(-max), x exp(-min)]
RES = [-0.08, -0.05, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.04, 0.06]
LOW, HIGH = math.exp(-0.06), math.exp(0.08)


def _profile(tmp_path, metrics=("ttft", "tpot", "throughput")):
    doc = {
        "engine": "vllm",
        "step_overhead_s": 0.003,
        "per_request_overhead_s": 1.0e-5,
        "overhead_source": "fitted: test",
        "provenance": {"loo": {"residuals": {m: list(RES) for m in metrics}}},
    }
    p = tmp_path / "engine.yaml"
    p.write_text(yaml.safe_dump(doc))
    return str(p)


def _check(block, keys):
    """Every figure in ``keys`` takes the user's interval: [x exp(-0.06), x exp(0.08)] of its value."""
    for k in keys:
        assert "your leave-one-out residuals (calibrate-serving, engine.yaml)" in block[k]["residual_group"]
        assert block[k]["residual_rows"] == len(RES)
        assert block[k]["high"] / block[k]["low"] == pytest.approx(HIGH / LOW)


def _run(args, capsys):
    assert main(args) == 0
    return capsys.readouterr().out


BENCH = ["bench-serve", "--model", MODEL, "--device", "h100_sxm", "--num-prompts", "40"]
BENCH += ["--random-input-len", "256", "--random-output-len", "32"]


@pytest.mark.slow
def test_bench_serve_text_and_api_take_the_profiles_residuals(tmp_path, capsys):
    from simcast import bench_serve

    prof = _profile(tmp_path)
    out = _run([*BENCH, "--engine-profile", prof], capsys)
    assert USER_HEAD in out and HEAD not in out
    assert out.count("your leave-one-out residuals (calibrate-serving, engine.yaml)") == 4
    r = bench_serve(
        model=MODEL, device="h100_sxm", num_prompts=40, input_length=256, output_length=32, engine_profile=prof
    )
    figs = r.intervals
    ttft = r.summary.ttft.median_ms
    assert figs["median_ttft_ms"].low == pytest.approx(ttft * LOW)
    assert figs["median_ttft_ms"].high == pytest.approx(ttft * HIGH)
    _check(r.to_dict()["intervals_80"], ["median_ttft_ms", "median_tpot_ms", "median_itl_ms", "output_throughput"])
    plain = bench_serve(model=MODEL, device="h100_sxm", num_prompts=40, input_length=256, output_length=32)
    assert "your" not in plain.intervals["median_ttft_ms"].interval.group


@pytest.mark.slow
def test_a_metric_with_too_few_residuals_keeps_the_shipped_table_and_the_head_says_both(tmp_path, capsys):
    prof = _profile(tmp_path, metrics=("tpot",))
    out = _run([*BENCH, "--engine-profile", prof], capsys)
    assert MIXED_HEAD in out
    assert out.count("your leave-one-out residuals") == 2  # median TPOT and ITL (ITL takes TPOT's residuals)


@pytest.mark.slow
def test_serve_config_takes_the_profiles_residuals(tmp_path, capsys):
    svc = tmp_path / "svc.yaml"
    svc.write_text(
        f"model: {MODEL}\ndevice: h100_sxm\nworkload:\n  input_length: 512\n  output_length: 64\n  batch_size: 8\n"
        "parallel_config:\n  world_size: 1\n  tp_size: 1\n"
    )
    prof = _profile(tmp_path)
    out = _run(["serve-config", str(svc), "--engine-profile", prof], capsys)
    assert USER_HEAD in out
    row = json.loads(_run(["serve-config", str(svc), "--engine-profile", prof, "--json"], capsys))
    _check(row["intervals_80"], ["ttft_ms", "tpot_ms", "tokens_per_s_per_device"])
    assert HEAD in _run(["serve-config", str(svc)], capsys)


def test_source_line_names_the_users_residuals_only_where_they_gave_the_interval(tmp_path):
    """bench_intervals / serving_intervals with the profile's residuals: hand-computed bounds, per metric."""
    from simcast.api.uncertainty import bench_intervals, serving_intervals, user_residuals
    from simcast.inputs.loaders import load_device
    from simcast.render.interval_text import interval_lines, source_head

    dev = load_device("h100_sxm")
    user = user_residuals(_profile(tmp_path, metrics=("tpot",)))
    assert user_residuals(None) is None
    figs = bench_intervals(
        {"median_ttft_ms": 50.0, "median_tpot_ms": 10.0, "output_throughput": 900.0},
        engine="vllm",
        device=dev,
        max_concurrency=0,
        request_rate=math.inf,
        user=user,
    )
    assert (figs["median_tpot_ms"].low, figs["median_tpot_ms"].high) == (
        pytest.approx(10 * LOW),
        pytest.approx(10 * HIGH),
    )
    assert "your" not in figs["median_ttft_ms"].interval.group
    assert source_head(figs) == MIXED_HEAD
    assert source_head({"median_tpot_ms": figs["median_tpot_ms"]}) == USER_HEAD
    assert source_head({"median_ttft_ms": figs["median_ttft_ms"]}) == HEAD
    assert interval_lines(figs, {"median_ttft_ms": ("TTFT", "ms", 1)})[0] == HEAD  # the head follows the lines shown
    steady = serving_intervals(
        ttft_ms=50.0, tpot_ms=10.0, tokens_per_s_per_device=900.0, engine="vllm", device=dev, saturated=True, user=user
    )
    assert steady["tpot_ms"].interval.group == figs["median_tpot_ms"].interval.group


@pytest.mark.slow
def test_optimize_and_its_api_take_the_profiles_residuals(tmp_path, capsys):
    from simcast import optimize

    prof = _profile(tmp_path)
    args = ["optimize", MODEL, "--device", "h100_sxm", "--num-devices", "1"]
    args += ["--input-length", "512", "--output-length", "64", "--engine-profile", prof]
    out = _run(args, capsys)
    assert USER_HEAD.replace("intervals", "intervals of the best layout", 1) in out
    doc = json.loads(_run([*args, "--json"], capsys))
    _check(doc["uncertainty"]["best_intervals_80"], ["ttft_ms", "tpot_ms", "tokens_per_s_per_device"])
    r = optimize(model=MODEL, device="h100_sxm", num_devices=1, input_length=512, output_length=64, engine_profile=prof)
    assert r.user_residuals is not None and len(r.user_residuals.residuals["ttft"]) == len(RES)
    _check(r.uncertainty()["best_intervals_80"], ["ttft_ms", "tpot_ms", "tokens_per_s_per_device"])
    assert r.uncertainty(top=doc_top(doc)) == doc["uncertainty"]  # the API's block is the CLI's


def doc_top(doc):
    """The CLI's default --top (the JSON's rows hold every point; its uncertainty block ranks the top)."""
    from simcast.cli.main import make_parser

    return make_parser("optimize").parse_args(["optimize", MODEL, "--device", "h100_sxm", "--num-devices", "1"]).top
