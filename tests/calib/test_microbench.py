"""Onboarding a new accelerator: ``simcast microbench`` -> measured CSV -> ``simcast calibrate --device-template``
-> a profile ``simulate`` loads. End to end on the CPU with the quick sweep; the fit on synthetic rows of a
known device; the plan's shapes by hand; bad input in one line."""

from __future__ import annotations

import dataclasses
import hashlib
import math

import pandas as pd
import pytest
import yaml
from conftest import time_limit

from simcast.calib.fitting.template import HEADROOM
from simcast.calib.ondevice import bench_plan as bp
from simcast.calib.readers.measured_schema import GENERIC_COLUMNS, META_COLUMNS
from simcast.calib.validation.validate import check_fit_columns, read_measured
from simcast.cli.main import main
from simcast.cost.kernels import one_kernel as kernels
from simcast.inputs.loaders import load_device, load_model

FIT = "fit by simcast calibrate"


def _run(args, capsys):
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def _bad(args, capsys, *needles):
    rc, _, err = _run(args, capsys)
    assert rc == 2, err
    assert err.startswith("simcast: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def _lines(text):
    """``{key: comment}`` of a profile's ``key: value  # comment`` lines (a key's first line: matmul peaks before
    vector peaks, efficiency before links)."""
    out: dict[str, str] = {}
    for ln in text.splitlines():
        if "#" in ln and ":" in ln.split("#", 1)[0] and not ln.lstrip().startswith(("-", "#")):
            out.setdefault(ln.split(":", 1)[0].strip(), ln.split("#", 1)[1].strip())
    return out


# ------------------------------------------------------------------ end to end on the CPU
@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_quick_microbench_calibrate_and_simulate_on_cpu(tmp_path, capsys):
    csv, prof = tmp_path / "my_gpu.csv", tmp_path / "my_gpu.yaml"
    with time_limit(120):
        rc, out, err = _run(["microbench", "--out", csv, "--device", "cpu", "--quick"], capsys)
    assert rc == 0, err
    assert "estimate:" in out and f"wrote {csv}" in out and "allreduce: skipped, 1 device visible" in out
    df = check_fit_columns(read_measured(csv), "measured")  # the generic schema's checks, as calibrate reads it
    assert list(df.columns) == [*GENERIC_COLUMNS, *META_COLUMNS]
    assert set(df["kind"]) == {"gemm", "attention_prefill", "attention_decode", "add"}
    assert set(df["device"]) == {"my_gpu"} and set(df["backend"]) == {"cpu"} and (df["time_s"] > 0).all()
    assert df["torch"].iloc[0] and int(df["gpu_count"].iloc[0]) == 1 and int(df["memory_bytes"].iloc[0]) > 2**20
    # Qwen3-0.6B at TP 8 per rank (hidden 1024, 2 q / 1 kv heads of 128, intermediate 384): see test_quick_plan
    g = df[df["kind"] == "gemm"]
    assert set(zip(g["n"].astype(int), g["k"].astype(int))) == {(512, 1024), (1024, 256), (768, 1024), (1024, 384)}

    with time_limit(60):
        rc, out, err = _run(["calibrate", csv, "--device-template", "l40s", "--out", prof], capsys)
    assert rc == 0, err
    assert "held out" in out and "attention_prefill" in out and f"wrote {prof}" in out
    text = prof.read_text()
    sha = hashlib.sha256(csv.read_bytes()).hexdigest()
    dev = load_device(str(prof))
    assert dev.name == "my_gpu" and dev.engines == {} and dev.links.devices_per_node == 1
    lines = _lines(text)
    assert lines["matmul"].startswith(f"{FIT} on my_gpu.csv (sha256 {sha})")
    assert lines["vector"].startswith("carried over from l40s (not measured on my_gpu)")
    assert lines["bf16"].startswith("measured by simcast microbench: best 2MNK/time of 12 bf16 GEMMs")
    assert lines["fp8"].startswith("carried over from l40s") and "733" in lines["fp8"]
    assert "\nengines:" not in text and "\ncalibration:" in text
    block = yaml.safe_load(text)["calibration"]
    assert block["template"] == "l40s" and block["csv_sha256"] == sha
    assert block["measured_on"]["backend"] == "cpu" and set(block["held_out_median_abs_err_pct"]) == {
        "attention_prefill",
        "attention_decode",
    }
    # every value line says where it came from: measured, fitted here, or carried over from the template
    for ln in text.split("calibration:")[0].splitlines():
        body = ln.split("#", 1)[0]
        if ":" in body and body.split(":", 1)[1].strip() and not ln.startswith(("name:", "description:")):
            note = ln.split("#", 1)[1].strip()
            assert note.startswith((FIT, "carried over from l40s", "measured by simcast microbench")), ln

    with time_limit(120):
        rc, out, err = _run(
            ["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", prof, "--batch", "1", "--input-length", "64"],
            capsys,
        )
    assert rc == 0, err
    assert "on 1 x my_gpu" in out and "latency:" in out


def test_dry_run_prints_the_plan_and_estimate_and_writes_nothing(tmp_path, capsys):
    csv = tmp_path / "x.csv"
    rc, out, err = _run(["microbench", "--out", csv, "--device", "cpu", "--dry-run"], capsys)
    assert rc == 0, err
    assert "plan (full sweep" in out and "estimate:" in out and "(assumption)" in out and "dry run" in out
    assert not csv.exists()
    rc, out, _ = _run(["microbench", "--help"], capsys)
    assert "--dry-run" in out and "estimate" in out


def test_help_states_the_full_sweep_estimate():
    """The minutes ``--help`` quotes are the plan's own estimate on one accelerator at the stated rates."""
    from simcast.cli.microbench import FULL_SWEEP_MINUTES

    models = tuple(load_model(m) for m in bp.FULL_MODELS)
    plan = bp.make_plan(models, quick=False, dtypes=("bf16", "fp16", "fp8"), devices=1)
    assert round(bp.estimate_s(plan, bp.ASSUMED_RATES["accelerator"]) / 60) == FULL_SWEEP_MINUTES


# ------------------------------------------------------------------ the plan
def test_quick_plan_takes_the_smallest_model_s_tp8_shapes():
    plan = bp.make_plan((load_model(bp.QUICK_MODEL),), quick=True, dtypes=("bf16",), devices=1)
    # Qwen3-0.6B: hidden 1024, 16 q / 8 kv heads of 128, intermediate 3072; TP 8 -> 2 q, 1 kv head, 384 per rank
    shapes = {(c.n, c.k) for c in plan.cases if c.kind == "gemm"}
    assert shapes == {(4 * 128, 1024), (1024, 2 * 128), (2 * 384, 1024), (1024, 384)}
    att = {(c.heads, c.kv_heads, c.head_dim) for c in plan.cases if c.kind.startswith("attention")}
    assert att == {(2, 1, 128)}
    assert all(c.q_len == 1 for c in plan.cases if c.kind == "attention_decode")
    assert all(c.q_len == c.kv_len for c in plan.cases if c.kind == "attention_prefill")
    assert plan.allreduce_gpus == () and any("allreduce: skipped" in n for n in plan.notes)


def test_full_plan_sweeps_tokens_tp_sizes_and_message_sizes():
    models = tuple(load_model(m) for m in bp.FULL_MODELS)
    plan = bp.make_plan(models, quick=False, dtypes=("bf16",), devices=8)
    ms = {c.m for c in plan.cases if c.kind == "gemm"}
    assert min(ms) == 1 and max(ms) == 16384
    # Llama-3.1-70B at TP 8: QKV (64 + 2*8)/8 heads of 128 over hidden 8192; lm_head 128256/8 rows
    shapes = {(c.n, c.k) for c in plan.cases if c.kind == "gemm"}
    assert (10 * 128, 8192) in shapes and (128256 // 8, 8192) in shapes
    assert plan.allreduce_gpus == (2, 4, 8)
    ar = [c.bytes for c in plan.cases if c.kind == "allreduce" and c.gpus == 8]
    assert min(ar) == 1024 and max(ar) == 2**30 and len(ar) == 21
    assert all((c.batch or 0) * (c.kv_len or 0) <= 2**19 for c in plan.cases if c.kind == "attention_decode")


def test_timing_repeats_fill_the_target_within_bounds():
    t = bp.Timing(warmup=1, min_reps=5, max_reps=100, target_s=0.05)
    assert t.reps(1.0) == 5 and t.reps(1e-6) == 100 and t.reps(0.002) == 25


def test_case_flops_by_hand():
    assert bp.Case(kind="gemm", m=2, n=3, k=4).flops == 48
    # causal prefill: 4 * heads * head_dim * q(q+1)/2 = 4 * 2 * 64 * 10 for q = 4
    assert bp.Case(kind="attention_prefill", batch=1, q_len=4, kv_len=4, heads=2, kv_heads=1, head_dim=64).flops == 5120


@pytest.mark.parametrize(
    "name, profile",
    [("NVIDIA H100 80GB HBM3", "h100_sxm"), ("AMD Instinct MI300X", "mi300x"), ("NVIDIA L40S", "l40s"), ("x", None)],
)
def test_suggested_template(name, profile):
    assert bp.suggest_template(name) == profile


# ------------------------------------------------------------------ the fit with a template, on a known device
def test_template_fit_recovers_a_known_device(tmp_path, capsys):
    """Rows timed by the simulator itself on a 'truth' device (l40s's peaks, other efficiencies) fitted from the
    h100_sxm template: the measured peak is the best 2MNK/t, the fitted profile predicts the rows."""
    base = load_device("l40s")
    truth = dataclasses.replace(
        base,
        efficiency=dataclasses.replace(base.efficiency, matmul=0.6, memory=0.8, launch_overhead_s=6e-6),
    )
    rows = []
    for m in (1, 16, 128, 1024, 4096):
        for n, k in ((1280, 8192), (8192, 1024), (28672, 8192), (6144, 4096)):
            t = kernels.gemm(truth, m, n, k, "bf16").time_s
            rows.append({"kind": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k, "time_s": t})
    for m in (1, 1024, 16384):
        t = kernels.elementwise(truth, "add", m, 8192, "bf16").time_s
        rows.append({"kind": "add", "dtype": "bf16", "m": m, "n": 8192, "time_s": t})
    df = pd.DataFrame(rows).assign(device="newdev", gpu_name="Some GPU", gpu_count=4, memory_bytes=48 * 2**30)
    csv, prof = tmp_path / "newdev.csv", tmp_path / "newdev.yaml"
    df.to_csv(csv, index=False)
    rc, out, err = _run(["calibrate", csv, "--device-template", "h100_sxm", "--out", prof], capsys)
    assert rc == 0, err
    dev = load_device(str(prof))
    g = df[df["kind"] == "gemm"]
    best = max(2.0 * m * n * k / t for m, n, k, t in zip(g["m"], g["n"], g["k"], g["time_s"]))
    assert math.isclose(dev.matmul_flops_per_s["bf16"], best / HEADROOM, rel_tol=1e-4)
    assert dev.matmul_flops_per_s["fp8"] == load_device("h100_sxm").matmul_flops_per_s["fp8"]  # carried over
    assert dev.hbm_bytes == 48 * 2**30 and dev.links.devices_per_node == 4
    errs = [
        abs(kernels.gemm(dev, int(m), int(n), int(k), "bf16").time_s / t - 1)
        for m, n, k, t in zip(g["m"], g["n"], g["k"], g["time_s"])
    ]
    assert max(errs) < 0.01, errs  # the same model family: the fit reproduces every time within 1%
    block = yaml.safe_load(prof.read_text())["calibration"]
    assert block["fitted_in_this_run"] >= 6 and block["template"] == "h100_sxm"


# ------------------------------------------------------------------ all-reduce through torch.distributed (gloo)
@pytest.mark.slow
def test_allreduce_over_two_cpu_processes():
    from simcast.calib.ondevice import microbench as mb

    with time_limit(120):
        times = mb.measure_allreduce(mb.Backend(name="cpu"), 2, (1024, 65536), bp.QUICK_TIMING)
    assert len(times) == 2 and all(0 < t < 10 for t in times)


# ------------------------------------------------------------------ bad input: one line, exit 2
def test_unknown_device(tmp_path, capsys):
    _bad(["microbench", "--out", tmp_path / "x.csv", "--device", "tpu9"], capsys, "--device", "allowed: auto, cpu")


def test_unavailable_device(tmp_path, capsys):
    from simcast.calib.ondevice.microbench import Backend

    if Backend(name="npu").available():
        pytest.skip("an NPU is available here")
    _bad(["microbench", "--out", tmp_path / "x.csv", "--device", "npu"], capsys, "--device", "not available")
    assert not (tmp_path / "x.csv").exists()


def test_unwritable_out(tmp_path, capsys):
    _bad(["microbench", "--out", tmp_path / "missing" / "x.csv", "--quick"], capsys, "--out", "does not exist")
    _bad(["microbench", "--out", tmp_path / "x.txt", "--quick"], capsys, "--out", ".csv")


def test_bad_name(tmp_path, capsys):
    _bad(["microbench", "--out", tmp_path / "x.csv", "--name", "a b/c", "--dry-run"], capsys, "--name")


def _csv(tmp_path, devices):
    rows = [{"kind": "gemm", "device": d, "dtype": "bf16", "m": 16, "n": 64, "k": 64, "time_s": 1e-5} for d in devices]
    p = tmp_path / "m.csv"
    pd.DataFrame(rows).to_csv(p, index=False)
    return p


def test_template_needs_one_device_name(tmp_path, capsys):
    _bad(
        ["calibrate", _csv(tmp_path, ["a", "b"]), "--device-template", "l40s", "--out", tmp_path / "o.yaml"],
        capsys,
        "column device",
    )
    assert not (tmp_path / "o.yaml").exists()


def test_template_and_device_together(tmp_path, capsys):
    args = ["calibrate", _csv(tmp_path, ["a"]), "--device-template", "l40s", "--device", "l40s"]
    _bad([*args, "--out", tmp_path / "o.yaml"], capsys, "--device")


def test_unknown_template(tmp_path, capsys):
    args = ["calibrate", _csv(tmp_path, ["a"]), "--device-template", "nope", "--out", tmp_path / "o.yaml"]
    _bad(args, capsys, "--device")


# ------------------------------------------------------------------ on public measurements (skips without them)
@pytest.mark.measured
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_onboarding_an_h100_from_vidur_rows(tmp_path, capsys):
    """Vidur's H100 Llama-2-70B GEMMs and adds as the microbench CSV, an A100 template (no H100 number in it):
    the profile predicts the Llama-2-7B H100 GEMMs, which it never saw, about as well as the shipped h100_sxm
    (docs/onboarding.md quotes the figures)."""
    from conftest import CALIBRATION

    from simcast.calib.validation.validate import predict_frame

    vidur = CALIBRATION / "vidur" / "compute" / "h100"
    if not (vidur / "Llama-2-70b-hf_mlp.csv").is_file():
        pytest.skip("../shared/calibration/vidur is not here")
    fit = read_measured(vidur / "Llama-2-70b-hf_mlp.csv")
    fit = fit[fit["kind"].isin(["gemm", "add"])][list(GENERIC_COLUMNS)].assign(device="h100_onboard")
    csv, prof = tmp_path / "h100_onboard.csv", tmp_path / "h100_onboard.yaml"
    fit.to_csv(csv, index=False)
    rc, _, err = _run(["calibrate", csv, "--device-template", "a100_sxm_80gb", "--out", prof], capsys)
    assert rc == 0, err
    held = read_measured(vidur / "Llama-2-7b-hf_mlp.csv")
    held = held[held["kind"] == "gemm"]
    err_new = predict_frame(held, load_device(str(prof)))["abs_err_pct"]
    err_shipped = predict_frame(held, load_device("h100_sxm"))["abs_err_pct"]
    assert err_new.median() < 8.0 and err_new.quantile(0.9) < 22.0, (err_new.median(), err_new.quantile(0.9))
    assert err_new.median() < 1.25 * err_shipped.median()
