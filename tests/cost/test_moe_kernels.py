"""MoE kernels with engine fits: the formulas by hand, a fit that recovers known parameters, the
simulator using them per engine (labelled, fallback to the generic formula), h100/h200 MoE tables
read without touching the reserved folders, and the shipped fits against the database's held-out rows
(skips without the extra)."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from simcast.calib.fitting import from_db_moe as fm
from simcast.calib.readers import aic_db
from simcast.core.assumption import Topic, of_topic
from simcast.core.kernel_fits import AllToAllFit, EngineKernels, MoeFit
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.kernels import moe_kernels as mk
from simcast.inputs.loaders import load_model
from simcast.render.assumption_text import assumption_text
from simcast.sim.simulate import simulate

FIT = MoeFit(dtype="bf16", matmul=0.5, half_rows=0.0, half_n=0.0, half_k=0.0, memory=0.8, smooth_p=200.0, launch_s=2e-5)


def test_moe_time_by_hand(h100):
    pairs, active, i, h = 4096.0, 64.0, 768, 2048  # Qwen3-30B-A3B-like: 128 experts, top-8, 512 tokens, ep 2
    flops = 2 * pairs * h * 3 * i
    nbytes = active * 3 * h * i * 2 + pairs * (2 * h + 3 * i) * 2
    want = max(flops / (h100.matmul_peak("bf16") * 0.5), nbytes / (h100.hbm_bw_bytes_per_s * 0.8)) + 2e-5
    got = mk.moe_time_s(FIT, h100.matmul_peak("bf16"), h100.hbm_bw_bytes_per_s, pairs, active, i, h, routed_pairs=8192)
    assert float(got) == pytest.approx(want, rel=1e-3)  # smooth_p 200: the smooth maximum is the maximum
    # the routing term: every routed pair of the layer input (512 tokens x top-8 = 4096 per rank at ep 2 ->
    # 8192 before the EP filter) at routed_pair_s each, on top of the experts' time
    fit = dataclasses.replace(FIT, routed_pair_s=5e-9)
    got = mk.moe_time_s(fit, h100.matmul_peak("bf16"), h100.hbm_bw_bytes_per_s, pairs, active, i, h, routed_pairs=8192)
    assert float(got) == pytest.approx(want + 8192 * 5e-9, rel=1e-3)


def test_a2a_bytes_by_hand():
    rpt = 8 * (1 - math.comb(224, 8) / math.comb(256, 8))  # distinct ranks among a token's 8 of 256 experts
    assert mk.ranks_per_token(8, 256, 8) == pytest.approx(rpt)
    assert float(mk.a2a_bytes(128, 8, 256, 8, 7168)) == pytest.approx(128 * rpt * 7 / 8 * 7168 * 2)
    fit = AllToAllFit(mode="low_latency", phase="dispatch", latency_s=3e-5, bw_bytes_per_s=2e11, ep=8)
    assert float(mk.a2a_time_s(fit, 4e6)) == pytest.approx(3e-5 + 4e6 / 2e11)


def test_moe_fit_recovers_a_synthetic_kernel(h100):
    truth = MoeFit(
        dtype="fp8", matmul=0.45, half_rows=40.0, half_n=200.0, half_k=0.0, memory=0.85, smooth_p=3.0, launch_s=3e-5,
        routed_pair_s=4e-9,
    )  # fmt: skip
    grid = [(n, k, e, ep, h, i) for n in (1, 8, 64, 512, 4096) for k, e in ((8, 128), (2, 8)) for ep in (1, 4)
            for h, i in ((2048, 768), (4096, 1536))]  # fmt: skip
    rows = pd.DataFrame(
        [
            {"dtype": "fp8", "pairs": n * k / ep, "active": max(1.0, min(e / ep, math.ceil(n * k / ep))), "i": i,
             "hidden": h, "tokens": n, "topk": k}
            for n, k, e, ep, h, i in grid
        ]
    )  # fmt: skip
    rows["time_s"] = fm.predict_moe(truth, rows, h100)
    fit, err = fm.fit_moe(rows, h100, "fp8")
    assert err < 1.0  # median abs % error on the rows it was fitted on
    assert np.allclose(fm.predict_moe(fit, rows, h100), rows["time_s"], rtol=0.03)
    assert fit.routed_pair_s == pytest.approx(4e-9, rel=0.25)  # the routing term is recovered, not absorbed


def _with(dev, **engines):
    return dataclasses.replace(dev, engines={**dev.engines, **engines})


def _no_moe(dev):
    """``dev`` with every engine's MoE and all-to-all fits removed (the generic-formula case)."""
    return dataclasses.replace(
        dev, engines={e: dataclasses.replace(k, moe=(), all_to_all=()) for e, k in dev.engines.items()}
    )


@pytest.mark.slow
def test_simulate_costs_experts_and_all_to_all_with_the_engine_fits(h100):
    model = load_model("Qwen/Qwen3-30B-A3B")
    a2a = (
        AllToAllFit(mode="low_latency", phase="dispatch", latency_s=2e-5, bw_bytes_per_s=1e11, ep=8),
        AllToAllFit(mode="low_latency", phase="combine", latency_s=3e-5, bw_bytes_per_s=1e11, ep=8),
    )
    bare = _no_moe(h100)
    dev = _with(bare, vllm=dataclasses.replace(bare.engines["vllm"], moe=(FIT,), all_to_all=a2a))
    par = ParallelSpec(tp=1, dp=4, ep=4)
    spec = SimSpec(model=model, device=dev, parallel=par, batch=Batch.decode(32, 1024), engine="vllm")
    r = simulate(spec)
    ops = {o.op: o for o in r.stages[0].ops}
    disp, comb = ops["simcast::moe_dispatch"], ops["simcast::moe_combine"]
    assert disp.time_s == pytest.approx(2e-5 + disp.bytes / 1e11)  # decode step: the low-latency fit
    assert comb.time_s == pytest.approx(3e-5 + comb.bytes / 1e11)
    line = assumption_text(of_topic(r.assumptions, Topic.ENGINE_KERNELS)[0])
    assert "moe experts (bf16) vllm fit" in line and "all-to-all low_latency vllm fit" in line
    assert "all-to-all normal link formula (no engine fit" in line  # a prefill step would fall back
    generic = simulate(dataclasses.replace(spec, device=bare))  # no engine has a MoE fit
    g_ops = {o.op: o for o in generic.stages[0].ops}
    assert g_ops["simcast::moe_experts"].time_s != ops["simcast::moe_experts"].time_s
    g_line = assumption_text(of_topic(generic.assumptions, Topic.ENGINE_KERNELS)[0])
    assert "moe experts (bf16) generic roofline (no engine fit for moe bf16 on h100_sxm)" in g_line


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_experts_fallback_to_the_nearest_engine(h100):
    model = load_model("Qwen/Qwen3-30B-A3B")
    bare = _no_moe(h100)
    dev = _with(bare, sglang=dataclasses.replace(bare.engines["sglang"], moe=(FIT,)))
    spec = SimSpec(model=model, device=dev, parallel=ParallelSpec(), batch=Batch.decode(8, 512), engine="vllm")
    line = assumption_text(of_topic(simulate(spec).assumptions, Topic.ENGINE_KERNELS)[0])
    assert "moe experts (bf16) sglang fit (fallback: no vllm fit on h100_sxm)" in line


@pytest.mark.measured
@pytest.mark.parametrize("system", ["h100_sxm", "h200_sxm"])
def test_h100_h200_moe_reads_only_unreserved_tables(system, monkeypatch):
    """Their MoE and DeepEP tables are read; every read is outside the reserved folders, which still raise."""
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from simcast.core.errors import SimcastInputError

    real, reads = aic_db.read_table, []

    def spy(system, kind, engine, version, table):
        reads.append((system, kind, engine, version))
        return real(system, kind, engine, version, table)

    monkeypatch.setattr(aic_db, "read_table", spy)
    for engine in ("vllm", "sglang", "trtllm"):
        moe, a2a, tables = fm.moe_engine_data(system, engine)
        assert len(moe) and len(a2a) and len(tables) == 2  # experts and all-to-all of every engine
    assert {k for k in reads} and not {k for k in reads} & (aic_db.RESERVED | aic_db.SUSPECT)
    assert {(k, e) for _, k, e, _ in reads} >= {("moe", "vllm"), ("comm", "vllm"), ("moe", "sglang")}
    for key in sorted(k for k in aic_db.RESERVED | aic_db.SUSPECT if k[0] == system):
        with pytest.raises(SimcastInputError, match="never reads it"):
            real(*key, "gemm_perf")


def test_profile_moe_fits_are_checked(tmp_path):
    from simcast.core.errors import SimcastInputError
    from simcast.inputs.loaders import load_device, profiles_dir

    text = (profiles_dir() / "ascend_910b.yaml").read_text().replace("name: ascend_910b", "name: p")
    moe = "{dtype: bf16, matmul: 0.5, half_rows: 16, half_n: 0, half_k: 0, memory: 0.8, smooth_p: 3, launch_s: 2.0e-5}"
    a2a = "{mode: normal, phase: dispatch, latency_s: 1.0e-4, bw_bytes_per_s: 2.0e+11, ep: 8}"
    good = text + f"engines:\n  vllm:\n    source: synthetic\n    moe:\n      - {moe}\n    all_to_all:\n      - {a2a}\n"
    (tmp_path / "p.yaml").write_text(good)
    ek = load_device(str(tmp_path / "p.yaml")).engines["vllm"]
    assert isinstance(ek, EngineKernels) and ek.moe_fit("bf16") and ek.a2a_fit("normal", "dispatch")
    for old, new, where in (
        ("dtype: bf16", "dtype: int4", "engines.vllm.moe[0].dtype"),
        ("memory: 0.8", "memory: 1.8", "engines.vllm.moe[0].memory"),
        ("mode: normal", "mode: fast", "engines.vllm.all_to_all[0].mode"),
        ("ep: 8", "ep: 1", "engines.vllm.all_to_all[0].ep"),
    ):
        (tmp_path / "p.yaml").write_text(good.replace(old, new))
        with pytest.raises(SimcastInputError, match=where.replace("[", r"\[").replace("]", r"\]")):
            load_device(str(tmp_path / "p.yaml"))


# ------------------------------------------------------------------ with the extra installed
@pytest.mark.parametrize(
    "system,profile",
    [("h100_sxm", "h100_sxm"), ("h200_sxm", "h200_sxm"), ("b200_sxm", "b200"), ("b300_sxm", "b300")]
    + [("gb200", "gb200")],
)
@pytest.mark.slow
@pytest.mark.measured
def test_shipped_moe_fits_meet_the_held_out_median_target(system, profile):
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from simcast.calib.validation.db_accuracy_moe import held_out_table
    from simcast.inputs.loaders import load_device

    t = held_out_table([(system, load_device(profile))], ("vllm", "sglang", "trtllm"))
    assert len(t) >= 8
    assert float(np.median(t["median_abs_err_pct"])) <= 20.0  # the target, over every engine and kind


def test_tile_wave_form_by_hand(h100):
    """200 tokens per expert on 8 active experts and a 64-row tile: 8 * (200 + 32) padded rows = 29 tiles of
    rows; gate_up (N = 2i = 28672 -> 224 column tiles) and down (N = h = 4096 -> 32) in waves over 132 SMs."""
    fit = MoeFit(
        dtype="bf16", matmul=0.5, half_rows=0.0, half_n=0.0, half_k=0.0, memory=0.8, smooth_p=200.0,
        launch_s=2e-5, block_m=64, sm_count=132,
    )  # fmt: skip
    pairs, active, i, h = 1600.0, 8.0, 14336, 4096
    assert float(mk.padded_rows(pairs, active, 64)) == 8 * (200 + 32)
    blocks = 8 * 232 / 64
    waves_up, waves_dn = math.ceil(blocks * 224 / 132), math.ceil(blocks * 32 / 132)
    t_c = 2 * 64 * 128 * 132 * (waves_up * h + waves_dn * i) / (h100.matmul_peak("bf16") * 0.5)
    t_m = (active * 3 * h * i * 2 + pairs * (2 * h + 3 * i) * 2) / (h100.hbm_bw_bytes_per_s * 0.8)
    got = mk.moe_time_s(fit, h100.matmul_peak("bf16"), h100.hbm_bw_bytes_per_s, pairs, active, i, h, routed_pairs=1)
    assert float(got) == pytest.approx(max(t_c, t_m) + 2e-5, rel=1e-3)
    # the padding and wave waste against the unpadded work
    assert t_c > 2 * pairs * h * 3 * i / (h100.matmul_peak("bf16") * 0.5) * 1.1


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_moe_fit_picks_the_tile_form_on_tile_quantised_rows(h100):
    truth = MoeFit(
        dtype="fp8", matmul=0.6, half_rows=0.0, half_n=100.0, half_k=0.0, memory=0.8, smooth_p=4.0,
        launch_s=3e-5, block_m=64, sm_count=132,
    )  # fmt: skip
    grid = [(n, k, e, h, i) for n in (1, 16, 64, 200, 512, 1024, 4096) for k, e in ((2, 8), (8, 128))
            for h, i in ((4096, 14336), (2048, 768))]  # fmt: skip
    rows = pd.DataFrame(
        [{"dtype": "fp8", "pairs": n * k, "active": max(1.0, min(e, math.ceil(n * k))), "i": i, "hidden": h,
          "tokens": n, "topk": k} for n, k, e, h, i in grid]
    )  # fmt: skip
    rows["time_s"] = fm.predict_moe(truth, rows, h100)
    fit, err = fm.fit_moe(rows, h100, "fp8", sm_count=132)
    assert fit.block_m == 64 and err < 2.0
