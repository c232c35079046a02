"""calibrate-serving's inputs beyond vLLM summaries (SGLang JSON lines, per-request arrays), its kernel-kind
factors (identifiability, recovery on runs simcast generated with known corrections), its leave-one-out
report and the intervals a profile's leave-one-out residuals give."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from simcast.calib.serving_fit.factor_fit import MIN_SIN, _screen, fit_corrections
from simcast.calib.serving_fit.kernel_kinds import KINDS, KindScaledCoster
from simcast.calib.serving_fit.loo import leave_one_out
from simcast.calib.serving_fit.run_model import RunModel
from simcast.calib.uncertainty.figures import figure_intervals
from simcast.calib.uncertainty.intervals import device_class
from simcast.calib.uncertainty.user_residuals import profile_residuals, residuals_from_provenance, user_interval
from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.bench_results import MeasuredRun, read_run_file
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.steady.model import ServingConfig, Workload
from simcast.serving.step import StepCoster

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")
MODEL = "Qwen/Qwen3-0.6B"
A_TRUE, B_TRUE, GEMM_TRUE = 3e-3, 10e-6, 1.3  # s per step, s per request in the step, GEMM time factor


# ------------------------------------------------------------------ inputs
def test_sglang_bench_serving_json_lines_parse():
    """Keys as sglang/bench_serving.py writes them: ``Infinity`` for rate inf, no num_prompts/burstiness,
    per-request arrays with a failed request (output 0, an error) left out, as SGLang's ``completed``."""
    f = read_run_file(str(HERE / "data" / "sglang_bench_serving.jsonl"))
    one, two = f.runs
    assert one.source == "sglang_bench_serving.jsonl line 1"
    assert (one.request_rate_per_s, one.concurrency, one.num_requests) == (math.inf, 4, 8)
    assert (one.input_len, one.output_len, one.burstiness, one.range_ratio) == (512, 32, 1.0, 0.0)
    assert (one.ttft_s, one.tpot_s, one.output_tokens_per_s, one.request_lens) == (10e-3, 4.5e-3, 200.0, ())
    assert (two.request_rate_per_s, two.concurrency, two.range_ratio) == (2.0, 0, 0.5)
    assert (two.input_len, two.output_len) == (150, 3)  # 300 / 2, 6 / 2
    assert two.request_lens == ((120, 2), (180, 4))


GOOD = {
    "num_prompts": 3,
    "request_rate": "inf",
    "max_concurrency": 2,
    "completed": 2,
    "total_input_tokens": 300,
    "total_output_tokens": 6,
    "output_throughput": 50.0,
    "input_lens": [120, 180, 90],
    "output_lens": [2, 4, 0],
    "ttfts": [0.010, 0.014, 0.0],
    "itls": [[0.005], [0.004, 0.006, 0.005], []],
    "errors": ["", "", "timeout"],
}


def test_vllm_save_detailed_arrays_give_lengths_and_missing_means(tmp_path):
    """Per-request TTFT mean (10 + 14) / 2 = 12 ms; TPOT mean of 5/1 and 15/3 = 5 ms (sum(itl)/(out-1))."""
    p = tmp_path / "d.json"
    p.write_text(json.dumps(GOOD))
    (run,) = read_run_file(str(p)).runs
    assert run.request_lens == ((120, 2), (180, 4))
    assert run.ttft_s == pytest.approx(12e-3) and run.tpot_s == pytest.approx(5e-3)
    p.write_text(json.dumps({**GOOD, "mean_ttft_ms": 20.0}))  # the summary wins when present
    assert read_run_file(str(p)).runs[0].ttft_s == 20e-3


@pytest.mark.parametrize(
    "patch, expect",
    [
        ({"output_lens": [2, 4]}, "output_lens: got 2; entries; input_lens has 3"),
        ({"input_lens": [120, -1, 90]}, "input_lens[1]: got -1; must be a number"),
        ({"itls": [[0.005], "x", []]}, "itls[1]: got 'x'; must be a list of gaps"),
        ({"completed": 3}, "completed requests in the per-request arrays; completed is 3"),
    ],
)
def test_bad_per_request_arrays_exit_2_with_one_line(tmp_path, capsys, patch, expect):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({**GOOD, **patch}))
    code = main(["calibrate-serving", str(p), "--model", MODEL, "--device", DEV, "--out", str(tmp_path / "e.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expect in err, err


# ------------------------------------------------------------------ kernel kinds
def _base() -> ServingConfig:
    dep = Deployment(model=load_model(MODEL), device=load_device(DEV), parallel=ParallelSpec(), engine="vllm")
    return ServingConfig(deployment=dep, workload=Workload(input_length=1, output_length=1), batch_size=1)


@pytest.mark.slow
def test_kind_scaled_coster_adds_exactly_the_scaled_kinds():
    base = _base()
    plain = StepCoster(deployment=base.deployment, policy=base.policy)
    mixed = Batch(query_lens=(1, 300), context_lens=(700, 0), counts=(8, 1))
    dec = Batch.decode(8, 700)
    scaled = KindScaledCoster(deployment=base.deployment, policy=base.policy)
    assert scaled.stage_times_many([mixed, dec]) == plain.stage_times_many([mixed, dec])  # factors 1: same bits
    (kt,) = scaled.kind_times([mixed])[0:1]
    scaled.factors = {"gemm": 2.0, "attention_prefill": 1.5}
    (t,) = scaled.stage_times_many([mixed])
    want = plain.stage_times_many([mixed])[0][0] + kt[0]["gemm"] + 0.5 * kt[0]["attention_prefill"]
    assert t[0] == pytest.approx(want, rel=1e-12)
    assert kt[0]["gemm"] > 0 and kt[0]["attention_decode"] > 0 and kt[0]["attention_prefill"] > 0
    (kd,) = scaled.kind_times([dec])
    assert kd[0]["attention_prefill"] == 0.0  # a decode-only step has no prompt attention


def test_identifiability_screen_on_hand_made_sensitivities():
    """Columns: a, b, then the kinds. gemm independent of a -> fitted; attention_decode = 2 x a + tiny ->
    not separable; attention_prefill too small; collectives independent but no residual left."""
    a = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    b = np.array([0.0, 0.2, 0.4, 0.6, 0.8])
    gemm = np.array([0.5, 0.1, 0.9, 0.3, 0.0])
    attn_dec = 2.0 * a + 0.01 * np.array([1.0, -1.0, 0.0, 0.0, 0.0])
    attn_pre = np.full(5, 0.01)
    coll = np.array([0.0, 1.0, 0.0, -1.0, 0.3])
    J = np.column_stack([a, b, gemm, attn_dec, attn_pre, coll])
    accepted, why = _screen(J, np.array([True, True]), n_res=4)
    assert [KINDS[k] for k in accepted] == ["gemm"]
    reasons = dict(why)
    assert "not separable" in reasons["attention_decode"] and MIN_SIN > 0.005
    assert "too small to show" in reasons["attention_prefill"]
    assert "too few measured figures (4)" in reasons["collectives"]


def _synthetic_runs(model: RunModel, shapes) -> list[MeasuredRun]:
    """Runs simcast itself predicts with CPU A_TRUE + B_TRUE x requests and GEMM time x GEMM_TRUE."""
    out = []
    for c, i, o in shapes:
        r = MeasuredRun(
            source=f"c{c}_i{i}",
            concurrency=c,
            request_rate_per_s=math.inf,
            burstiness=1.0,
            num_requests=max(2 * c, 4),
            input_len=i,
            output_len=o,
            ttft_s=None,
            tpot_s=1.0,
            output_tokens_per_s=1.0,
        )
        p = model.predict(r, A_TRUE, B_TRUE, {"gemm": GEMM_TRUE})
        out.append(replace(r, tpot_s=p.tpot_s, output_tokens_per_s=p.output_tokens_per_s, ttft_s=p.ttft_s))
    return out


SHAPES = [(1, 128, 32), (8, 128, 32), (32, 128, 32), (1, 2048, 16), (8, 2048, 16), (32, 1024, 32), (64, 256, 32)]
SHAPES += [(4, 4096, 8), (16, 512, 16)]


@pytest.mark.slow
def test_known_cpu_overhead_and_gemm_factor_are_recovered_and_loo_gets_closer():
    """Tolerances: a and b within 2 %, the GEMM factor within 1 %, the other fitted kinds within 1 % of 1
    (noise-free runs: what is left is the serving path's median refit and finite differences)."""
    base = _base()
    runs = _synthetic_runs(RunModel(base), SHAPES)
    model = RunModel(base)
    fit = fit_corrections(model, runs, start=base.policy)
    assert fit.step_overhead_s == pytest.approx(A_TRUE, rel=0.02)
    assert fit.per_request_overhead_s == pytest.approx(B_TRUE, rel=0.02)
    assert fit.factors["gemm"] == pytest.approx(GEMM_TRUE, rel=0.01)
    for kind, f in fit.factors.items():
        if kind != "gemm":
            assert f == pytest.approx(1.0, abs=0.01), kind
    assert "collectives" in dict(fit.not_fitted)  # TP=1: no collective in any step
    assert fit.rms_error_pct < 0.1 < fit.overheads.rms_error_pct
    rep = leave_one_out(model, runs, start=base.policy)
    assert len(rep.rows) == 3 * len(runs)
    assert rep.rows_closer > len(rep.rows) / 2 and rep.runs_closer() > len(runs) / 2


@pytest.mark.slow
def test_one_shape_leaves_every_factor_unfitted_and_the_cli_says_so(tmp_path, capsys):
    """Runs at one length and two concurrencies: the kinds' sensitivities are combinations of the CPU
    terms', so no factor is identified; the profile records them as not fitted."""
    base = _base()
    runs = _synthetic_runs(RunModel(base), [(1, 256, 32), (8, 256, 32)])
    paths = []
    for r in runs:
        n = r.num_requests
        doc = {
            "num_prompts": n,
            "request_rate": "inf",
            "max_concurrency": r.concurrency,
            "completed": n,
            "total_input_tokens": r.input_len * n,
            "total_output_tokens": r.output_len * n,
            "output_throughput": r.output_tokens_per_s,
            "mean_ttft_ms": r.ttft_s * 1e3,
            "mean_tpot_ms": r.tpot_s * 1e3,
        }
        paths.append(tmp_path / f"{r.source}.json")
        paths[-1].write_text(json.dumps(doc))
    out = tmp_path / "e.yaml"
    assert main(["calibrate-serving", *map(str, paths), "--model", MODEL, "--device", DEV, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for kind in KINDS:
        assert f"{kind}: kept at 1, not identified:" in text
    assert "leave-one-out: each run predicted by a fit on the other 1" in text
    prov = yaml.safe_load(out.read_text())["provenance"]
    assert prov["kernel_factors"]["fitted"] == {} and set(prov["kernel_factors"]["not_fitted"]) == set(KINDS)
    assert sorted(prov["loo"]["residuals"]) == ["throughput", "tpot", "ttft"]
    assert len(prov["loo"]["residuals"]["tpot"]) == 2
    assert "fewer than 9: shipped table" in text


# ------------------------------------------------------------------ intervals from the user's residuals
def test_nine_loo_residuals_give_the_interval_and_eight_do_not(tmp_path):
    """n = 9 at 80 %: the split-conformal order statistics are the 1st and 9th smallest (floor(10 x 0.1) = 1,
    ceil(10 x 0.9) = 9), so the factors are exp(-max) and exp(-min)."""
    res = [-0.05, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.04, 0.06]
    p = tmp_path / "engine.yaml"
    p.write_text(yaml.safe_dump({"engine": "vllm", "provenance": {"loo": {"residuals": {"tpot": res}}}}))
    user = profile_residuals(str(p))
    iv = user_interval(user, "tpot")
    assert iv is not None and iv.rows == 9
    assert (iv.low_factor, iv.high_factor) == (pytest.approx(math.exp(-0.06)), pytest.approx(math.exp(0.05)))
    assert "your leave-one-out residuals (calibrate-serving, engine.yaml)" in iv.group
    figs = figure_intervals(
        {"mean_tpot": 10.0, "mean_ttft": 50.0}, engine="vllm", device="h100_sxm", regime="loaded", user=user
    )
    assert figs["mean_tpot"].interval.group == iv.group
    assert figs["mean_tpot"].low == pytest.approx(10.0 * math.exp(-0.06))
    assert "your" not in figs["mean_ttft"].interval.group  # no TTFT residuals: the shipped table's
    shipped = figure_intervals({"mean_tpot": 10.0}, engine="vllm", device="h100_sxm", regime="loaded")
    assert shipped["mean_tpot"].interval.half_width_pct > iv.half_width_pct
    eight = residuals_from_provenance({"loo": {"residuals": {"tpot": res[:8]}}}, "e.yaml")
    assert user_interval(eight, "tpot") is None
    assert device_class("h100_sxm") == "nvidia-hopper"


def test_bad_loo_residuals_are_one_line():
    with pytest.raises(SimcastInputError, match=r"provenance.loo.residuals.tpot: .*must be a list of numbers"):
        residuals_from_provenance({"loo": {"residuals": {"tpot": [0.1, "x"]}}}, "e.yaml")
    with pytest.raises(SimcastInputError, match="allowed: ttft, tpot, throughput"):
        residuals_from_provenance({"loo": {"residuals": {"latency": [0.1]}}}, "e.yaml")
