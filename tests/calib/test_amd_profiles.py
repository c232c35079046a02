"""AMD profiles (mi300x, mi325x, mi355x): datasheet peaks, the fits against the public points they were
fitted on (benchmarks/data/amd, scripts/fit_amd.py), and decode-step invariants on mi300x."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcast.calib.fitting import fit_collectives as fc
from simcast.calib.fitting import fit_kernels as fk
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels.gemm import PEAK_DTYPE, gemm_bytes, gemm_time_s
from simcast.inputs.loaders import load_device

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "amd"


@pytest.mark.parametrize(
    "name,bf16,fp8,hbm_bw,intra_bw",
    [
        # AMD Instinct MI300X / MI325X datasheets: 1307.4 / 2614.9 TFLOPs dense, 5.3 / 6.0 TB/s; 7 xGMI x 64 GB/s
        ("mi300x", 1307.4e12, 2614.9e12, 5.3e12, 7 * 64e9),
        ("mi325x", 1307.4e12, 2614.9e12, 6.0e12, 7 * 64e9),
        # MI355X: 256 CU x 4096 (BF16) / 8192 (FP8) FLOP/clk x 2.4 GHz; 8 TB/s; 7 xGMI x 76.8 GB/s
        ("mi355x", 256 * 4096 * 2.4e9, 256 * 8192 * 2.4e9, 8.0e12, 7 * 76.8e9),
    ],
)
def test_peaks_match_datasheets(name, bf16, fp8, hbm_bw, intra_bw):
    dev = load_device(name)
    assert dev.matmul_peak("bf16") == pytest.approx(bf16, rel=1e-4)
    assert dev.matmul_peak("fp8") == pytest.approx(fp8, rel=1e-4)
    assert dev.hbm_bw_bytes_per_s == pytest.approx(hbm_bw)
    assert dev.links.intra_node.bw_bytes_per_s == pytest.approx(intra_bw)
    assert dev.links.intra_node.mesh_links == 7 and dev.links.devices_per_node == 8


def _median_err(pred, meas) -> float:
    return float(np.median(np.abs(np.asarray(pred, float) / np.asarray(meas, float) - 1)) * 100)


# in-sample median errors of the written fits on every transcribed row (docs/accuracy.md, "AMD")
@pytest.mark.parametrize(
    "device,csv,dtype,median_pct",
    [
        ("mi325x", "mi325x_hipblaslt_gemm.csv", "bf16", 4.9),
        ("mi325x", "mi325x_hipblaslt_gemm.csv", "fp8", 11.8),
        ("mi300x", "mi300x_aiter_fp8_blockscale_gemm.csv", "fp8_block", 4.2),
    ],
)
def test_gemm_fits_reproduce_public_points(device, csv, dtype, median_pct):
    dev = load_device(device)
    rows = pd.read_csv(DATA / csv)
    rows = rows[(rows["dtype"] == dtype) & (rows["n"] >= 512)]
    fit = dev.engines["vllm"].gemm_fit(dtype)
    pred = gemm_time_s(fit, dev.matmul_peak(PEAK_DTYPE[dtype]), dev.hbm_bw_bytes_per_s, rows["m"], rows["n"], rows["k"])
    assert _median_err(pred, rows["time_s"]) <= median_pct + 0.5  # the profile holds 5 significant digits


def test_decode_fit_reproduces_public_points():
    dev = load_device("mi355x")
    a = fk._attn_arrays(pd.read_csv(DATA / "mi355x_aiter_paged_decode.csv"))
    fit = dev.engines["vllm"].decode_fit("bf16")
    pred = attn.decode_time_s(
        fit, dev.matmul_peak("bf16"), dev.hbm_bw_bytes_per_s, a["b"], a["kv"], a["h"], a["hkv"], a["d"]
    )
    assert _median_err(pred, a["t"]) <= 6.6 + 0.5


@pytest.mark.parametrize(
    "device,csv,gpus,median_pct",
    [
        ("mi300x", "mi300x_rccl_allreduce.csv", 8, 0.8),
        ("mi300x", "custom_allreduce.csv", 4, 1.8),
        ("mi355x", "custom_allreduce.csv", 8, 0.4),
    ],
)
def test_all_reduce_fits_reproduce_public_points(device, csv, gpus, median_pct):
    dev = load_device(device)
    rows = pd.read_csv(DATA / csv)
    rows = rows[(rows["device"] == device) & (rows["gpus"] == gpus)]
    pred = fc.predict_all_reduce(dev.engines["vllm"].all_reduce, rows)
    assert _median_err(pred, rows["time_s"]) <= median_pct + 0.5  # the profile holds 5 significant digits


def test_small_tp8_all_reduce_costs_what_rccl_measures():
    """16 KB all-reduce over 8 MI300X: rccl-tests with graphs measure 8.71 us (ROCm RCCL/xGMI blog); the old
    unfitted ring/tree formula charged ~30 us."""
    from simcast.cost.kernels import one_kernel as kernels

    p = kernels.collective(load_device("mi300x"), "allreduce", 16384, 8, 1, engine="vllm")
    assert p.time_s == pytest.approx(8.71e-6, rel=0.15)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_gemm_never_beats_max_achievable_flops(dtype):
    """At AMD's MAF shape the fitted GEMM is no faster than the measured Max-Achievable FLOPs."""
    maf = pd.read_csv(DATA / "mi3xx_maf_gemm.csv")
    for _, r in maf[maf["dtype"] == dtype].iterrows():
        dev = load_device(r["device"])
        fit = dev.engines["vllm"].gemm_fit(dtype)
        t = float(gemm_time_s(fit, dev.matmul_peak(PEAK_DTYPE[dtype]), dev.hbm_bw_bytes_per_s, r["m"], r["n"], r["k"]))
        assert t >= r["time_s"] * 0.999, (r["device"], dtype)


def _achievable_bw() -> float:
    """The fastest HBM rate any transcribed MI300X GEMM row implies (bytes / time): the bound a step must respect."""
    rows = pd.read_csv(DATA / "mi300x_aiter_fp8_blockscale_gemm.csv")
    return float(np.max(gemm_bytes(rows["m"], rows["n"], rows["k"], "fp8_block") / rows["time_s"]))


@pytest.fixture(scope="module")
def llama70b():
    from simcast.inputs.loaders import load_model

    return load_model("meta-llama/Llama-3.1-70B")


def _step(model, engine, batch, context):
    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.sim.simulate import simulate

    spec = SimSpec(
        model=model,
        device=load_device("mi300x"),
        parallel=ParallelSpec(tp=8),
        batch=Batch.decode(batch, context),
        engine=engine,
    )
    return simulate(spec)


@pytest.mark.slow
@pytest.mark.parametrize("engine", [None, "vllm"])
def test_llama70b_tp8_decode_respects_achievable_bandwidth_and_is_monotone(llama70b, engine):
    bw = _achievable_bw()
    assert 0.5 * 5.3e12 < bw < 5.3e12  # the data's best streaming rate sits well under the 5.3 TB/s peak
    prev = 0.0
    for batch in (1, 16, 64, 256):
        rep = _step(llama70b, engine, batch, 1024)
        st = rep.stages[0]
        hbm = st.weight_bytes + st.kv_cache_bytes  # every weight and every cached key/value is read once
        assert rep.latency_s >= hbm / bw, batch  # no step faster than its HBM bytes at the achievable bandwidth
        assert rep.latency_s > prev, batch  # more requests never make the step faster
        prev = rep.latency_s
    longer = _step(llama70b, engine, 256, 4096)
    assert longer.latency_s > prev  # nor does a longer context


@pytest.mark.slow
def test_llama70b_tp8_large_batch_generic_step_is_memory_bound(llama70b):
    rep = _step(llama70b, None, 256, 1024)
    assert rep.op_bound_s["Mem"] > rep.op_bound_s["Cube"]


# aiter's tuned tables (ROCm/aiter@e4048607a5 aiter/configs, column us; scripts/fit_aiter.py fitted on them, so
# these are in-sample checks of what the profile holds, not held-out errors: those are in docs/accuracy.md)
AITER_GEMM_POINTS = [  # (m, n, k, us) of model_configs/a8w8_blockscale_tuned_gemm_ds_v3.csv, gfx942 cu_num 304
    (64, 7168, 2048, 11.0504),
    (64, 1536, 7168, 15.6829),
    (64, 4608, 7168, 23.5499),
    (64, 3072, 1536, 6.6606),
]
AITER_MOE_POINTS = [  # (tokens, hidden, inter, experts, topk, us) of a8w8_blockscale_tuned_fmoe_glm5_1.csv, cu_num 304
    (1, 6144, 256, 257, 9, 67.3825),
    (64, 6144, 256, 257, 9, 288.4137),
    (256, 6144, 256, 257, 9, 340.6476),
    (4096, 6144, 256, 257, 9, 809.3871),
]


@pytest.mark.parametrize("device", ["mi300x", "mi325x"])
@pytest.mark.parametrize("engine", ["sglang", "atom"])
def test_aiter_fp8_block_gemm_fit_reproduces_aiter_points(device, engine):
    dev = load_device(device)
    fit = dev.engines[engine].gemm_fit("fp8_block")
    m, n, k, us = (np.array(c, float) for c in zip(*AITER_GEMM_POINTS))
    pred = gemm_time_s(fit, dev.matmul_peak("fp8"), dev.hbm_bw_bytes_per_s, m, n, k) * 1e6
    # mi300x: the fit's own device; mi325x keeps its fractions at 6.0 TB/s, so memory-bound shapes run faster
    assert _median_err(pred, us) <= (15.0 if device == "mi300x" else 25.0)
    if device == "mi325x":
        ref = load_device("mi300x")
        base = gemm_time_s(fit, ref.matmul_peak("fp8"), ref.hbm_bw_bytes_per_s, m, n, k) * 1e6
        assert np.all(pred <= base + 1e-9)  # same fractions, more bandwidth: never slower


def test_aiter_moe_fit_reproduces_deepseek_shaped_points():
    from simcast.cost.kernels import moe_kernels as mk
    from simcast.cost.ops.moe import active_experts

    dev = load_device("mi300x")
    fit = dev.engines["sglang"].moe_fit("fp8_block")
    t, h, i, e, k, us = (np.array(c, float) for c in zip(*AITER_MOE_POINTS))
    act = np.array([active_experts(a, int(b), int(c), 1) for a, b, c in zip(t, k, e)])
    pred = mk.moe_time_s(fit, dev.matmul_peak("fp8"), dev.hbm_bw_bytes_per_s, t * k, act, i, h, routed_pairs=t * k)
    assert _median_err(pred * 1e6, us) <= 12.0
    assert np.all(np.diff(pred) > 0)  # more tokens never cost less


def test_mi355x_fp4_peak_is_twice_fp8():
    # AMD Instinct MI355X: ~10 PF dense MXFP4 = 2 x the 5.0 PF FP8 (256 CU x 16384 FP4 FLOP/clk x 2.4 GHz)
    dev = load_device("mi355x")
    assert dev.matmul_peak("fp4") == pytest.approx(2 * dev.matmul_peak("fp8"), rel=1e-4)
    assert dev.matmul_peak("fp4") == pytest.approx(256 * 16384 * 2.4e9, rel=1e-4)
