"""Engine-aware kernels: the database reader's guard, schema conversion, attention FLOPs, fits that
recover known parameters, engine fallback labels and the profile schema. Runs without the optional
``aiconfigurator-core`` extra (synthetic frames); tests that read the real database skip without it."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from simcast.calib.readers import aic_db
from simcast.core.assumption import Topic, of_topic
from simcast.core.device import CollectiveFit
from simcast.core.errors import SimcastInputError
from simcast.core.kernel_fits import (
    DecodeAttentionFit,
    EngineKernels,
    GemmFit,
)
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels import trtllm_decode as td
from simcast.render.assumption_text import assumption_text


# ------------------------------------------------------------------ reserved-table guard
@pytest.mark.parametrize("key", sorted(aic_db.RESERVED | aic_db.SUSPECT))
def test_guard_refuses_reserved_and_suspect_tables(key):
    with pytest.raises(SimcastInputError, match="never reads it"):
        aic_db.guard(*key)
    table = {"gemm": "gemm_perf", "attention": "context_attention_perf", "comm": "nccl_perf"}[key[1]]
    with pytest.raises(SimcastInputError, match="never reads it"):
        aic_db.read_table(*key, table)  # refused before any file is looked up


def test_reserved_set_is_the_briefed_one():
    assert {(s, k, e, v) for s, k, e, v in aic_db.RESERVED} == {
        (s, k, e, v)
        for s in ("h100_sxm", "h200_sxm")
        for k, e, v in (("gemm", "vllm", "0.24.0"), ("attention", "vllm", "0.24.0"), ("comm", "nccl", "2.29.2"))
    }


def test_guard_follows_symlinks(tmp_path):
    reserved = tmp_path / "h100_sxm" / "gemm" / "vllm" / "0.24.0"
    reserved.mkdir(parents=True)
    (reserved / "gemm_perf.parquet").write_bytes(b"")
    alias = tmp_path / "h100_sxm" / "gemm" / "sglang"
    alias.mkdir(parents=True)
    (alias / "9.9").symlink_to(reserved, target_is_directory=True)
    with pytest.raises(SimcastInputError, match="reserved"):
        aic_db._guard_path(alias / "9.9" / "gemm_perf.parquet", tmp_path)
    aic_db._guard_path(tmp_path / "b200_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet", tmp_path)


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setattr(aic_db.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SimcastInputError, match=r"pip install 'simcast\[measured\]'"):
        aic_db.data_root()


# ------------------------------------------------------------------ schema conversion (synthetic tables)
def _fake_tables(monkeypatch, tables):
    monkeypatch.setattr(aic_db, "read_table", lambda system, kind, engine, version, table: tables[table].copy())


def test_gemm_rows_convert_units_and_dtypes(monkeypatch):
    _fake_tables(
        monkeypatch,
        {
            "gemm_perf": pd.DataFrame(
                {
                    "kernel_source": ["a", "b", "c"],
                    "gemm_dtype": ["bfloat16", "fp8", "int4_wo"],
                    "m": [8, 16, 32],
                    "n": [128, 256, 512],
                    "k": [64, 64, 64],
                    "latency": [0.01, 0.02, 0.03],
                }
            )
        },
    )
    r = aic_db.gemm_rows("b200_sxm", "vllm", "0.24.0", "b200")
    assert list(r["dtype"]) == ["bf16", "fp8"]  # int4 weight-only left out
    assert r["time_s"].tolist() == pytest.approx([1e-5, 2e-5])  # ms -> s
    assert set(r["engine"]) == {"vllm"} and set(r["device"]) == {"b200"}
    assert r["source"].iloc[0] == "aiconfigurator/b200_sxm/gemm/vllm/0.24.0/gemm_perf"


def test_attention_rows_kv_len_follows_each_collector(monkeypatch):
    ctx = pd.DataFrame(
        {
            "kernel_source": "k",
            "batch_size": [2, 2],
            "isl": [128, 128],
            "num_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "beam_width": 1,
            "attn_dtype": "bfloat16",
            "kv_cache_dtype": ["bfloat16", "fp8"],
            "step": 0,
            "window_size": [0, 1024],
            "latency": [0.1, 0.1],
        }
    )
    gen = ctx.assign(isl=1, step=[1023, 1023], window_size=0)
    _fake_tables(monkeypatch, {"context_attention_perf": ctx, "generation_attention_perf": gen})
    for engine, kv in (("vllm", 1023), ("sglang", 1024), ("trtllm", 1024)):
        r = aic_db.attention_rows("x", engine, "v", "d")
        pre = r[r["kind"] == "attention_prefill"]
        dec = r[r["kind"] == "attention_decode"]
        assert len(pre) == 1 and pre["kv_len"].iloc[0] == 128  # the sliding-window row is left out
        assert set(dec["kv_len"]) == {kv} and set(dec["q_len"]) == {1}
        assert list(dec["dtype"]) == ["bf16", "fp8"]


def test_trtllm_prefill_keeps_the_attention_dtype_the_engine_runs(monkeypatch):
    # one shape timed three ways, as TensorRT-LLM's collector does: bf16 cache; fp8 cache with bf16 attention;
    # fp8 cache with fp8 context FMHA (the PyTorch backend's default: block reuse -> paged context FMHA -> FP8)
    ctx = pd.DataFrame(
        {
            "kernel_source": "torch_flow",
            "batch_size": 4,
            "isl": 512,
            "num_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "beam_width": 1,
            "window_size": 0,
            "attn_dtype": ["bfloat16", "bfloat16", "fp8"],
            "kv_cache_dtype": ["bfloat16", "fp8", "fp8"],
            "step": 0,
            "latency": [0.3, 0.2, 0.1],
        }
    )
    gen = ctx.assign(isl=1, step=511, attn_dtype="bfloat16")
    _fake_tables(monkeypatch, {"context_attention_perf": ctx, "generation_attention_perf": gen})
    pre = aic_db.attention_rows("x", "trtllm", "v", "d").query("kind == 'attention_prefill'")
    assert list(pre["dtype"]) == ["bf16", "fp8"]
    assert pre["time_s"].tolist() == pytest.approx([3e-4, 1e-4])  # the fp8 row is the fp8-attention one
    assert aic_db.context_attention_dtype("trtllm", "fp8") == "fp8"
    assert aic_db.context_attention_dtype("trtllm", "bfloat16") == "bfloat16"
    # other engines keep every row (their attn_dtype is not read); decode rows are never filtered
    for engine in ("sglang", "vllm"):
        r = aic_db.attention_rows("x", engine, "v", "d")
        assert (r["kind"] == "attention_prefill").sum() == 3
        assert aic_db.context_attention_dtype(engine, "fp8") is None
    dec = aic_db.attention_rows("x", "trtllm", "v", "d").query("kind == 'attention_decode'")
    assert len(dec) == 3


def test_nccl_rows_count_elements_and_merge_repeats(monkeypatch):
    _fake_tables(
        monkeypatch,
        {
            "nccl_perf": pd.DataFrame(
                {
                    "op_name": ["all_reduce"] * 3 + ["alltoall"],
                    "nccl_dtype": ["half", "half", "int8", "half"],
                    "num_gpus": 8,
                    "message_size": [1024, 1024, 1024, 1024],
                    "latency": [0.010, 0.012, 0.009, 0.5],
                }
            )
        },
    )
    r = aic_db.nccl_rows("b200_sxm", "2.29.2", "b200").sort_values("bytes")
    assert r["bytes"].tolist() == [1024, 2048]  # int8: 1 byte, half: 2 bytes per element
    assert r["time_s"].tolist() == pytest.approx([9e-6, 11e-6])  # the two half repeats -> median
    assert set(r["engine"]) == {"nccl"} and set(r["kind"]) == {"allreduce"}


# ------------------------------------------------------------------ attention FLOPs, hand-computed
def test_exact_causal_flops():
    # 2 requests, 4 heads, head_dim 64, 3 new tokens after 5 cached: pairs 3*5 + 3*4/2 = 21
    assert attn.prefill_flops(2, 3, 5, 4, 64) == pytest.approx(4 * 2 * 4 * 64 * 21)


@pytest.mark.parametrize(
    "q,c,blocks", [(1, 0, 1), (128, 0, 1), (129, 0, 3), (256, 0, 3), (512, 0, 10), (256, 128, 5), (5, 300, 3)]
)
def test_tiled_causal_blocks_by_hand(q, c, blocks):
    # q=129: tile 0 (rows 0-127) sees key tile 0; tile 1 (row 128) sees key tiles 0-1 -> 3 blocks.
    # q=256 after c=128: tile 0 ends at key 256 (2 key tiles), tile 1 at 384 (3) -> 5.
    # q=5 after c=300: one query tile, keys 0-304 -> 3 key tiles.
    assert attn.tiled_causal_pairs(q, c, 128) == blocks * 128 * 128


def test_gqa_packing_pads_query_rows_not_heads():
    # 16 tokens x 8 query heads of one KV head fill one 128-row tile: 1 block per KV head, not 8
    fl = attn.prefill_flops(1, 16, 0, 8, 128, tile=128, kv_heads=1)
    assert fl == pytest.approx(4 * 1 * 1 * 128 * 128 * 128)
    # without GQA (group 1) the packed count equals the per-head count
    assert attn.prefill_flops(3, 300, 40, 4, 64, 128, kv_heads=4) == pytest.approx(
        attn.prefill_flops(3, 300, 40, 4, 64, 128)
    )


def test_tiled_flops_bound_exact_flops():
    q = np.array([1, 7, 128, 1000, 5000])
    assert np.all(attn.tiled_causal_pairs(q, 0, 128) >= attn.causal_pairs(q, 0))
    # long sequences: tiling adds only the diagonal blocks, n*tile^2/2 of n^2*tile^2/2
    assert attn.tiled_causal_pairs(128 * 64, 0, 128) / attn.causal_pairs(128 * 64, 0) == pytest.approx(65 / 64, 1e-3)


# ------------------------------------------------------------------ fits recover known parameters
def test_gemm_fit_recovers_synthetic_device(h100):
    from simcast.calib.fitting.fit_kernels import fit_gemm
    from simcast.cost.kernels.gemm import gemm_time_s

    true = GemmFit(
        dtype="bf16",
        matmul=0.8,
        half_m=60.0,
        half_n=40.0,
        half_k=120.0,
        wave_exp=0.3,
        memory=0.85,
        split_k_elems=1000.0,
        parallel_exp=0.5,
        l2_boost=0.0,
        l2_half_bytes=1e6,
        smooth_p=4.0,
        launch_s=3e-6,
        sm_count=132,
    )
    g = np.array([1, 7, 64, 300, 1024, 4096, 16384])
    m, n, k = (a.ravel() for a in np.meshgrid(g, [256, 1024, 4096, 14336], [512, 4096, 8192]))
    rows = pd.DataFrame({"kind": "gemm", "dtype": "bf16", "m": m, "n": n, "k": k})
    rows["time_s"] = gemm_time_s(true, h100.matmul_peak("bf16"), h100.hbm_bw_bytes_per_s, m, n, k)
    fit, err = fit_gemm(rows, h100, "bf16", 132)
    assert err < 1.0
    assert fit.matmul == pytest.approx(0.8, rel=0.05)
    assert fit.launch_s == pytest.approx(3e-6, rel=0.1)
    assert fit.memory == pytest.approx(0.85, rel=0.05)


def test_decode_fit_recovers_synthetic_kernel(h100):
    from simcast.calib.fitting.fit_decode import fit_decode

    true = DecodeAttentionFit(
        dtype="bf16",
        memory=0.85,
        half_units=50.0,
        split_tokens=300.0,
        half_kv_len=2.0,
        matmul=0.5,
        wave_s=3e-6,
        smooth_p=2.0,
        launch_s=6e-6,
        sm_count=132,
    )
    b, s, hkv = (a.ravel() for a in np.meshgrid([1, 4, 32, 256, 2048], [16, 256, 4096, 65536], [1, 8]))
    rows = pd.DataFrame(
        {
            "kind": "attention_decode",
            "dtype": "bf16",
            "batch": b,
            "q_len": 1,
            "kv_len": s,
            "heads": 4 * hkv,
            "kv_heads": hkv,
            "head_dim": 128,
        }
    )
    rows["time_s"] = attn.decode_time_s(
        true, h100.matmul_peak("bf16"), h100.hbm_bw_bytes_per_s, b, s, 4 * hkv, hkv, 128
    )
    fit, err = fit_decode(rows, h100, "bf16", 132)
    assert err < 2.0
    assert fit.memory == pytest.approx(0.85, rel=0.1)
    assert fit.launch_s + fit.wave_s == pytest.approx(9e-6, rel=0.15)  # the floor of one wave


def test_piecewise_fit_finds_the_switch():
    from simcast.calib.fitting.fit_collectives import fit_piecewise

    b = 2.0 ** np.arange(8, 30)
    fac = 2 * 7 / 8
    t = np.where(b <= 2**18, 5e-6 + fac * b / 80e9, 12e-6 + fac * b / 400e9)
    fits, err = fit_piecewise(b, t, "all_reduce", 8, names=("one_shot", "two_shot", "nccl"))
    assert err < 0.5
    assert [f.algorithm for f in fits] == ["one_shot", "nccl"]
    assert fits[0].max_bytes == 2**18 and fits[-1].max_bytes == 0
    assert fits[0].latency_s == pytest.approx(5e-6, rel=0.02)
    assert fits[-1].bus_bw_bytes_per_s == pytest.approx(400e9, rel=0.02)


# ------------------------------------------------------------------ engines in a device and the cost paths
def _with_engines(dev, **sections):
    return dataclasses.replace(dev, engines=sections)


def _gemm_fit(launch_s):
    return GemmFit(
        dtype="bf16",
        matmul=0.8,
        half_m=0.0,
        half_n=0.0,
        half_k=0.0,
        wave_exp=0.0,
        memory=0.8,
        split_k_elems=1e9,
        parallel_exp=0.0,
        l2_boost=0.0,
        l2_half_bytes=1e6,
        smooth_p=1e3,
        launch_s=launch_s,
        sm_count=132,
    )


def test_engine_gemm_and_labelled_fallback(h100):
    from simcast.cost.kernels import one_kernel as kernels

    dev = _with_engines(h100, sglang=EngineKernels(engine="sglang", gemm=(_gemm_fit(7e-6),), source="synthetic"))
    big = kernels.gemm(dev, 8192, 8192, 8192, engine="sglang")
    # roofline by hand: compute 2MNK / (peak 0.8) + launch (the memory term is far smaller)
    assert big.time_s == pytest.approx(2 * 8192**3 / (h100.matmul_peak("bf16") * 0.8) + 7e-6, rel=1e-3)
    fb = kernels.gemm(dev, 8192, 8192, 8192, engine="vllm")
    assert fb.time_s == big.time_s and "fallback" in fb.kernel_model and "sglang" in fb.kernel_model
    generic = kernels.gemm(dev, 8192, 8192, 8192)
    assert generic.kernel_model == "generic roofline (no --engine)" and generic.time_s != big.time_s
    with pytest.raises(SimcastInputError, match="fp8_block"):
        kernels.gemm(h100, 64, 64, 64, "fp8_block")


def test_engine_all_reduce_regimes(h100):
    from simcast.cost.kernels import one_kernel as kernels

    ar = (
        CollectiveFit(
            kind="all_reduce", gpus=8, latency_s=5e-6, bus_bw_bytes_per_s=80e9, max_bytes=2**18, algorithm="one_shot"
        ),
        CollectiveFit(kind="all_reduce", gpus=8, latency_s=12e-6, bus_bw_bytes_per_s=400e9, algorithm="nccl"),
    )
    dev = _with_engines(h100, vllm=EngineKernels(engine="vllm", all_reduce=ar, source="synthetic"))
    small = kernels.collective(dev, "allreduce", 2**16, 8, engine="vllm")
    assert small.time_s == pytest.approx(5e-6 + 1.75 * 2**16 / 80e9) and small.kernel_model.endswith("one_shot")
    large = kernels.collective(dev, "allreduce", 2**26, 8, engine="vllm")
    assert large.time_s == pytest.approx(12e-6 + 1.75 * 2**26 / 400e9)
    # across nodes the custom kernels do not apply: NCCL's own fits of the link
    cross = kernels.collective(dev, "allreduce", 2**26, 16, nodes=2, engine="vllm")
    assert cross.time_s == kernels.collective(dev, "allreduce", 2**26, 16, nodes=2).time_s


def test_decode_attention_by_hand(h100):
    from simcast.cost.kernels import one_kernel as kernels

    fit = DecodeAttentionFit(
        dtype="bf16",
        memory=0.8,
        half_units=0.0,
        split_tokens=1e9,
        half_kv_len=0.0,
        matmul=1.0,
        wave_s=0.0,
        smooth_p=1e3,
        launch_s=5e-6,
        sm_count=132,
    )
    dev = _with_engines(h100, trtllm=EngineKernels(engine="trtllm", decode=(fit,), source="synthetic"))
    p = kernels.attention(dev, "decode", 64, 1, 4096, 32, 8, 128, engine="trtllm")
    kv_bytes = 64 * (2 * 4096 * 8 * 128 * 2 + 2 * 32 * 128 * 2)
    assert p.time_s == pytest.approx(kv_bytes / (h100.hbm_bw_bytes_per_s * 0.8) + 5e-6, rel=1e-3)


def test_decode_l2_capacity_form_by_hand():
    """``l2_edge`` > 0: a fraction ``1 / (1 + (bytes / L)^edge)`` of the bytes at ``1 + l2_boost`` times the
    bandwidth, the rest at 1: at ``L`` half hit, far below all (factor ``1 + boost``), far above none (1); the
    memory time ``bytes / factor`` still rises with the bytes across the edge."""
    from simcast.cost.kernels.attention import l2_factor

    base = dict(dtype="bf16", memory=0.8, half_units=0.0, split_tokens=1e9, half_kv_len=0.0, matmul=1.0)
    fit = DecodeAttentionFit(
        **base, wave_s=0.0, smooth_p=2.0, launch_s=0.0, sm_count=142, l2_boost=4.0, l2_half_bytes=1e8, l2_edge=15.0
    )
    assert l2_factor(fit, 1e8) == pytest.approx(1.0 / (0.5 / 5.0 + 0.5))
    assert l2_factor(fit, 1e6) == pytest.approx(5.0, rel=1e-9)
    assert l2_factor(fit, 1e12) == pytest.approx(1.0, rel=1e-9)
    nb = np.geomspace(1e6, 1e10, 2001)
    assert np.all(np.diff(nb / l2_factor(fit, nb)) > 0)
    smooth = DecodeAttentionFit(
        **base, wave_s=0.0, smooth_p=2.0, launch_s=0.0, sm_count=142, l2_boost=4.0, l2_half_bytes=1e8
    )
    assert l2_factor(smooth, 1e8) == pytest.approx(1.0 + 4.0 * 0.5)  # l2_edge 0: the smooth form


@pytest.mark.parametrize(
    ("heads", "kv_heads", "dtype", "tc"),
    [
        (32, 32, "bf16", False),
        (32, 16, "bf16", False),
        (24, 8, "bf16", False),
        (32, 8, "bf16", True),
        (40, 8, "bf16", True),
        (64, 1, "bf16", True),
        (32, 32, "fp8", True),
        (28, 8, "bf16", False),
    ],
)
def test_flashinfer_tensor_core_rule_is_sglangs(heads, kv_heads, dtype, tc):
    """SGLang's ``should_use_tensor_core``: group ``heads // kv_heads`` >= 4 with a bf16 KV cache, always with fp8
    (28 / 8 floors to 3: CUDA cores); under the rule each family takes its own per-wave time."""
    from simcast.cost.kernels.attention import decode_kernel
    from simcast.cost.kernels.flashinfer_decode import tensor_core_runs

    fit = DecodeAttentionFit(
        dtype=dtype, memory=0.8, half_units=0.0, split_tokens=1e9, half_kv_len=0.0, matmul=1.0, wave_s=3e-6,
        smooth_p=2.0, launch_s=0.0, sm_count=142, kernel_rule="flashinfer_tc", fallback_wave_s=1e-6,
    )  # fmt: skip
    assert bool(tensor_core_runs(fit, heads, kv_heads)) is tc
    reads, cta_heads, wave = decode_kernel(fit, 8, 4096, heads, kv_heads, 128)
    assert float(reads) == 1.0 and float(cta_heads) == kv_heads  # both read the keys once, one CTA per KV head
    assert float(wave) == (3e-6 if tc else 1e-6)


def test_profile_engines_section_is_strict(tmp_path):
    from simcast.inputs.loaders import load_device, profiles_dir

    text = (profiles_dir() / "ascend_910b.yaml").read_text()
    good = text + (
        "engines:\n  vllm:\n    source: synthetic\n    gemm:\n      - {dtype: bf16, matmul: 0.8, half_m: 1, "
        "half_n: 1, half_k: 1, wave_exp: 0, memory: 0.8, split_k_elems: 512, parallel_exp: 0, "
        "l2_boost: 0, l2_half_bytes: 1.0e+6, smooth_p: 4, launch_s: 3.0e-6, sm_count: 304}\n"
    )
    (tmp_path / "ascend_910b.yaml").write_text(good)
    dev = load_device(str(tmp_path / "ascend_910b.yaml"))
    assert dev.engines["vllm"].gemm[0].sm_count == 304
    (tmp_path / "bad.yaml").write_text(
        good.replace("l2_boost: 0,", "l2_bost: 0,").replace("name: ascend_910b", "name: bad")
    )
    with pytest.raises(SimcastInputError, match="l2_bost"):
        load_device(str(tmp_path / "bad.yaml"))
    (tmp_path / "bad2.yaml").write_text(good.replace("  vllm:", "  tgi:").replace("name: ascend_910b", "name: bad2"))
    with pytest.raises(SimcastInputError, match="tgi"):
        load_device(str(tmp_path / "bad2.yaml"))


# ------------------------------------------------------------------ CLI one-line errors
@pytest.mark.parametrize(
    "args,needle",
    [
        (["--from-db", "nosuchdb", "--system", "h100_sxm", "--engine", "vllm"], "--from-db"),
        (["--from-db", "aiconfigurator", "--system", "tpu_v9", "--engine", "vllm"], "--system"),
        (["--from-db", "aiconfigurator", "--system", "h100_sxm", "--engine", "tgi"], "--engine"),
        (["--from-db", "aiconfigurator", "--system", "h100_sxm"], "--engine"),
    ],
)
def test_calibrate_from_db_bad_input_is_one_line(capsys, tmp_path, args, needle):
    from simcast.cli.main import main

    assert main(["calibrate", *args, "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("simcast: error: ") and err.count("\n") == 1 and needle in err


def test_calibrate_from_db_without_extra_is_one_line(capsys, tmp_path, monkeypatch):
    from simcast.cli.main import main

    monkeypatch.setattr(aic_db.importlib.util, "find_spec", lambda name: None)
    assert (
        main(
            [
                "calibrate",
                "--from-db",
                "aiconfigurator",
                "--system",
                "h100_sxm",
                "--engine",
                "vllm",
                "--out",
                str(tmp_path / "x.yaml"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'simcast[measured]'" in err


# ------------------------------------------------------------------ with the extra installed
@pytest.mark.measured
def test_real_database_listing_never_offers_reserved_folders():
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    for system in ("h100_sxm", "h200_sxm"):
        assert "0.24.0" not in aic_db.versions(system, "gemm", "vllm")
        assert "0.24.0" not in aic_db.versions(system, "attention", "vllm")
        assert not set(aic_db.versions(system, "comm", "nccl")) & {"2.29.2", "2.27.3", "2.26.2"}
    rows = aic_db.gemm_rows("b200_sxm", "vllm", "0.24.0", "b200")
    assert len(rows) > 1000 and rows["time_s"].between(1e-7, 1.0).all()
    assert not math.isnan(rows["m"].sum())


# ------------------------------------------------------------------ simulate with an engine
def test_simulate_with_engine_uses_and_labels_engine_kernels(qwen06b, h100):
    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.inputs.loaders import load_device
    from simcast.sim.simulate import simulate

    base = dict(model=qwen06b, parallel=ParallelSpec(tp=2), batch=Batch.decode(16, 1024))
    generic = simulate(SimSpec(device=h100, **base))
    vllm = simulate(SimSpec(device=h100, engine="vllm", **base))
    assert vllm.latency_s != generic.latency_s
    line = assumption_text(of_topic(vllm.assumptions, Topic.ENGINE_KERNELS)[0])
    assert line.startswith("engine vllm kernels on h100_sxm")
    assert "gemm vllm fit" in line and "all_reduce vllm fit" in line
    assert not of_topic(generic.assumptions, Topic.ENGINE_KERNELS)
    # a device without engine sections: every kind labelled as the generic roofline
    asc = simulate(SimSpec(device=load_device("ascend_910b"), engine="sglang", **base))
    line = assumption_text(of_topic(asc.assumptions, Topic.ENGINE_KERNELS)[0])
    assert line == "engine sglang kernels on ascend_910b: generic roofline (the profile has no engines: section)"


def test_simulate_rejects_unknown_engine(qwen06b, h100):
    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.sim.simulate import simulate

    # core knows no engine names (simcast.engines sits above it): simulate checks the spec's engine first
    spec = SimSpec(model=qwen06b, device=h100, parallel=ParallelSpec(), batch=Batch.decode(1, 8), engine="tgi")
    with pytest.raises(SimcastInputError, match="--engine"):
        simulate(spec, use_disk_cache=False)


def test_shipped_engine_sections_load_with_provenance():
    from simcast.inputs.loaders import load_device

    for name in ("h100_sxm", "h200_sxm", "b200", "b300", "gb200", "a100_sxm_80gb", "l40s"):
        dev = load_device(name)
        assert set(dev.engines) == {"vllm", "sglang", "trtllm"}, name
        for ek in dev.engines.values():
            assert ek.source.startswith("aiconfigurator-core ") and ek.gemm and ek.all_reduce
    for name in ("ascend_910b", "a100_sxm_40gb"):  # priors stay unfitted
        assert not load_device(name).engines
    for name in ("mi300x", "mi325x", "mi355x"):  # vLLM fitted on public AMD data (scripts/fit_amd.py); SGLang and
        ek = load_device(name).engines  # ATOM: aiter GEMMs and fused MoE only (scripts/fit_aiter.py)
        assert set(ek) == {"vllm", "sglang", "atom"} and ek["vllm"].decode and ek["vllm"].all_reduce, name
        for e in ("sglang", "atom"):
            assert ek[e].source.startswith("aiter ") and ek[e].gemm and ek[e].moe, (name, e)
            assert not ek[e].decode and not ek[e].all_reduce, (name, e)  # those stay on vLLM's, labelled


# ------------------------------------------------------------------ shipped profiles vs the database
@pytest.mark.slow
@pytest.mark.measured
@pytest.mark.parametrize("system,profile", [("h100_sxm", "h100_sxm"), ("h200_sxm", "h200_sxm")])
def test_shipped_hopper_profiles_meet_targets_on_held_out_half(system, profile):
    """The targets the docs state (median <= 10 %, p90 <= 25 %) for the vLLM section's bf16 GEMM and
    attention on the held-out half of the tables it was fitted on (proxies: see from_db)."""
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from simcast.calib.fitting.from_db import held_out
    from simcast.calib.validation.db_accuracy import engine_rows
    from simcast.calib.validation.validate import predict_frame
    from simcast.inputs.loaders import load_device

    rows = engine_rows(system, "vllm")
    test = rows[held_out(rows) & (rows["dtype"] == "bf16")]
    pred = predict_frame(test.sample(min(len(test), 6000), random_state=0), load_device(profile))
    for kind in ("gemm", "attention_prefill", "attention_decode"):
        e = pred[pred["kind"] == kind]["abs_err_pct"].dropna()
        assert len(e) > 100
        assert np.median(e) <= 10.0 and np.percentile(e, 90) <= 25.0, (kind, np.median(e), np.percentile(e, 90))


@pytest.mark.slow
@pytest.mark.measured
@pytest.mark.parametrize("system,profile", [("h100_sxm", "h100_sxm"), ("h200_sxm", "h200_sxm")])
def test_shipped_hopper_fp8_gemms_meet_targets_on_held_out_half(system, profile):
    """SGLang's fp8 (CUTLASS, tile rule sgl_fp8_sm90) and fp8-block (DeepGEMM, deepgemm_sm90) GEMMs: median
    <= 10 %, p90 <= 25 % on the held-out half (a sample), through the simulator's own per-row path."""
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from simcast.calib.fitting.from_db import held_out
    from simcast.calib.validation.db_accuracy import engine_rows
    from simcast.calib.validation.validate import predict_frame
    from simcast.inputs.loaders import load_device

    rows = engine_rows(system, "sglang")
    dev = load_device(profile)
    for fam in ("fp8", "fp8_block"):
        assert dev.engines["sglang"].gemm_fit(fam).tile_rule
        test = rows[held_out(rows) & (rows["kind"] == "gemm") & (rows["dtype"] == fam)]
        e = predict_frame(test.sample(min(len(test), 4000), random_state=0), dev)["abs_err_pct"].dropna()
        assert len(e) > 1000
        assert np.median(e) <= 10.0 and np.percentile(e, 90) <= 25.0, (fam, np.median(e), np.percentile(e, 90))


@pytest.mark.slow
@pytest.mark.measured
def test_shipped_l40s_gemm_medians_meet_target_on_held_out_half():
    """Every L40S GEMM table (the L2 capacity form; the fp8 ones with their kernels' SM89 tile rules): median at
    the 10 % target on the held-out half, through the simulator's own per-row path (the whole halves give
    6.2-9.3 %; 10.5 % allows for the 3000-row sample; the smooth L2 form gave 7.0-11.6 %; p90s still miss:
    24-33 %)."""
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from simcast.calib.fitting.from_db import held_out
    from simcast.calib.validation.db_accuracy import engine_rows
    from simcast.calib.validation.validate import predict_frame
    from simcast.inputs.loaders import load_device

    dev = load_device("l40s")
    assert dev.engines["sglang"].gemm_fit("fp8").tile_rule == "sgl_fp8_sm89"
    for engine in ("sglang", "trtllm", "vllm"):
        rows = engine_rows("l40s", engine)
        for fam in ("bf16", "fp8", "fp8_block"):
            test = rows[held_out(rows) & (rows["kind"] == "gemm") & (rows["dtype"] == fam)]
            if not len(test):
                continue
            assert dev.engines[engine].gemm_fit(fam).l2_edge > 0, (engine, fam)
            e = predict_frame(test.sample(min(len(test), 3000), random_state=0), dev)["abs_err_pct"].dropna()
            assert len(e) > 1000 and np.median(e) <= 10.5, (engine, fam, np.median(e))


# ------------------------------------------------------------------ GEMM tile rules
def _tiled_fit(rule: str, **kw) -> GemmFit:
    base = dict(
        dtype="fp8",
        matmul=0.7,
        half_m=0.0,
        half_n=500.0,
        half_k=300.0,
        wave_exp=0.5,
        memory=0.8,
        split_k_elems=64.0,
        parallel_exp=0.9,
        l2_boost=0.0,
        l2_half_bytes=1e7,
        smooth_p=2.0,
        launch_s=5e-6,
        sm_count=132,
        tile_rule=rule,
        step_s=1.5e-7,
    )
    return GemmFit(**{**base, **kw})


def test_sgl_fp8_sm90_tiles_by_hand():
    """sgl-kernel's SM90 dispatch: swap-AB 16 and 64-row tiles, then 64- and 128-row tiles in 2x1 clusters."""
    from simcast.cost.kernels.gemm import tile_shape

    fit = _tiled_fit("sgl_fp8_sm90")
    block, tile_n, cluster, tile_k = (np.asarray(v).tolist() for v in tile_shape(fit, np.array([16, 17, 65, 129])))
    assert block == [16, 64, 128, 256] and tile_n == [64, 64, 128, 128]
    assert cluster == [1, 1, 2, 2] and tile_k == [256, 256, 128, 128]


def test_sgl_fp8_sm89_tiles_by_m_and_n_bands():
    """sgl-kernel's SM89 dispatch picks the tile by M and N bands: at N = 4096, 16 x 64 tiles (K step 128) up to
    16 rows, 32 x 64 up to 64, 64 x 64 up to 128, 128 x 64 (K step 64) up to 256, 128 x 128 above; at N = 12288
    (8192 < N <= 16384) 64 x 128 tiles for 129-256 rows; past N = 16384 one row runs 32-row tiles and 2-16 rows
    16-row ones."""
    from simcast.cost.kernels.gemm import tile_shape

    fit = _tiled_fit("sgl_fp8_sm89")
    m = np.array([1, 16, 17, 65, 129, 257])
    block, tile_n, cluster, tile_k = (np.asarray(v).tolist() for v in tile_shape(fit, m, np.full(6, 4096)))
    assert block == [16, 16, 32, 64, 128, 128] and tile_n == [64, 64, 64, 64, 64, 128]
    assert cluster == [1] * 6 and tile_k == [128, 128, 128, 128, 64, 64]
    block, tile_n, _, _ = (np.asarray(v).tolist() for v in tile_shape(fit, m, np.full(6, 12288)))
    assert block == [32, 32, 32, 64, 64, 128] and tile_n == [64, 64, 64, 64, 128, 128]
    block, _, _, tile_k = (np.asarray(v).tolist() for v in tile_shape(fit, np.array([1, 2, 65, 129]), 32768))
    assert block == [32, 16, 32, 128] and tile_k == [128, 128, 128, 128]


def test_vllm_fp8_sm89_tiles_by_m_and_n_bands():
    """vLLM's SM89 dispatch (M rounded up to a power of 2, at least 32): at N = 4096, 32 x 64 tiles up to 32
    rows, 64 x 64 to 64, 64 x 128 to 256, 128 x 128 (K step 64) above; at N = 6144 (next power of 2: 8192)
    256 x 128 above 256 rows; at N = 12288, 32 x 128 tiles for one row."""
    from simcast.cost.kernels.gemm import tile_shape

    fit = _tiled_fit("vllm_fp8_sm89", sm_count=142)
    m = np.array([1, 32, 33, 65, 129, 257])
    block, tile_n, _, tile_k = (np.asarray(v).tolist() for v in tile_shape(fit, m, np.full(6, 4096)))
    assert block == [32, 32, 64, 64, 64, 128] and tile_n == [64, 64, 64, 128, 128, 128]
    assert tile_k == [128, 128, 128, 128, 128, 64]
    block, tile_n, _, _ = (np.asarray(v).tolist() for v in tile_shape(fit, m, np.full(6, 6144)))
    assert block == [32, 32, 64, 64, 128, 256] and tile_n == [64, 64, 64, 128, 128, 128]
    block, tile_n, _, _ = (np.asarray(v).tolist() for v in tile_shape(fit, np.array([1]), 12288))
    assert block == [32] and tile_n == [128]


def test_vllm_fp8_sm100_tiles_by_hand():
    """vLLM's SM100 CUTLASS fp8 dispatch: 64x64 tiles (K step 256) up to 64 rows; 128-row MMA tiles over 2-CTA
    pairs (64 rows a CTA, 128-row blocks) up to 128; 256-row ones (128 a CTA) above. 65 rows on N = 4096: one
    128-row block of 2 CTAs x 32 tile columns = 64 CTAs."""
    from simcast.cost.kernels.gemm import gemm_parts, tile_shape

    fit = _tiled_fit("vllm_fp8_sm100", sm_count=148, step_s=1e-3)
    block, tile_n, cluster, tile_k = (np.asarray(v).tolist() for v in tile_shape(fit, np.array([64, 65, 128, 129])))
    assert block == [64, 128, 128, 256] and tile_n == [64, 128, 128, 128]
    assert cluster == [1, 2, 2, 2] and tile_k == [256, 64, 64, 64]
    t_c, _ = gemm_parts(fit, 1e15, 8e12, 65, 4096, 4096)  # the floor: 1 wave x 4096 / 64 K steps
    assert float(t_c) == pytest.approx(64 * 1e-3, rel=1e-3)


def test_gemm_l2_capacity_form_by_hand():
    """``l2_edge`` > 0: half the operand bytes hit L2 at ``l2_half_bytes`` (bandwidth ``1 / (0.5 / (1 + boost) +
    0.5)`` times HBM's), all of them far below it, none far above; 0 keeps the smooth form."""
    from simcast.cost.kernels.gemm import gemm_bytes, gemm_parts

    nb = float(gemm_bytes(1, 4096, 4096, "bf16"))
    fit = _tiled_fit("", dtype="bf16", l2_boost=3.0, l2_half_bytes=nb, l2_edge=20.0)
    nbytes = nb
    bw = 1e12 * fit.memory  # par = 1: 32 tiles x K / split_k_elems >= 132 SMs
    _, t_m = gemm_parts(fit, 1e15, 1e12, 1, 4096, 4096)
    assert float(t_m) == pytest.approx(nbytes / (bw / (0.5 / 4.0 + 0.5)), rel=1e-9)
    _, t_small = gemm_parts(fit, 1e15, 1e12, 1, 512, 4096)
    assert float(t_small) == pytest.approx(float(gemm_bytes(1, 512, 4096, "bf16")) / (bw * 4.0), rel=1e-6)
    _, t_big = gemm_parts(fit, 1e15, 1e12, 1, 65536, 4096)
    assert float(t_big) == pytest.approx(float(gemm_bytes(1, 65536, 4096, "bf16")) / bw, rel=1e-6)
    smooth = _tiled_fit("", dtype="bf16", l2_boost=3.0, l2_half_bytes=nbytes)
    _, t_s = gemm_parts(smooth, 1e15, 1e12, 1, 4096, 4096)
    assert float(t_s) == pytest.approx(nbytes / (bw * (1.0 + 3.0 * 0.5)), rel=1e-9)


def test_tile_rule_pads_m_blocks_and_counts_waves():
    """129 rows run a whole 256-row cluster block (same compute as 256 rows); 257 add a second block. On
    N = 8448 (66 tile columns): 256 rows = 2 CTAs x 66 = 132 CTAs, one wave; 257 rows = 264 CTAs, two waves,
    so the per-K-step floor doubles."""
    from simcast.cost.kernels.gemm import gemm_parts

    fit = _tiled_fit("sgl_fp8_sm90", step_s=1e-3)  # a floor far above the FLOP term: compute = floor
    t129, _ = gemm_parts(fit, 1e15, 3e12, 129, 8448, 4096)
    t256, _ = gemm_parts(fit, 1e15, 3e12, 256, 8448, 4096)
    t257, _ = gemm_parts(fit, 1e15, 3e12, 257, 8448, 4096)
    assert float(t129) == pytest.approx(float(t256))
    assert float(t256) == pytest.approx(32 * 1e-3, rel=1e-3)  # 1 wave x 4096 / 128 steps
    assert float(t257) == pytest.approx(2 * 32 * 1e-3, rel=1e-3)  # 2 waves


def test_deepgemm_blocks_by_hand():
    """DeepGEMM's choice: (1024, 4096) fits one wave only as 256 x 128 blocks (4 x 32 = 128 <= 132 SMs; a
    256-row block may not be wider than 128); (8, 7168): one wave of 64-row blocks, the fullest last wave at
    block_n 56 (128 blocks)."""
    from simcast.cost.kernels.gemm import deepgemm_blocks

    bm, bn = deepgemm_blocks(np.array([1024, 8]), np.array([4096, 7168]), 132)
    assert bm.tolist() == [256, 64] and bn.tolist() == [128, 56]


def test_unknown_tile_rule_is_refused():
    with pytest.raises(SimcastInputError, match="tile_rule"):
        _tiled_fit("cublas_magic")


# ------------------------------------------------------------------ TensorRT-LLM decode kernel families
def _xqa_fit(dtype: str = "bf16", **kw) -> DecodeAttentionFit:
    base = dict(
        memory=0.9,
        half_units=50.0,
        split_tokens=600.0,
        half_kv_len=10.0,
        matmul=0.1,
        wave_s=4e-6,
        smooth_p=1.5,
        launch_s=7e-6,
        sm_count=132,
        group_share=2.0,
        kernel_rule="trtllm_xqa",
        fallback_wave_s=1e-6,
    )
    return DecodeAttentionFit(dtype=dtype, **{**base, **kw})


@pytest.mark.parametrize(
    "batch,kv,heads,kv_heads,head_dim,dtype,xqa",
    [
        (64, 1000, 32, 8, 128, "bf16", True),  # group 4, 4·8·64·7 blocks >= 132 SMs
        (64, 1000, 32, 32, 128, "bf16", False),  # vanilla MHA: never XQA
        (64, 1000, 64, 1, 128, "bf16", False),  # group 64 > 32: MMHA
        (64, 1000, 32, 8, 192, "bf16", True),  # 192 % 16 == 0 and <= 256
        (64, 1000, 32, 8, 320, "bf16", False),  # head size > 256
        (4, 100, 32, 8, 128, "bf16", False),  # 4 · 8 KV heads · 4 requests · 1 block = 128 < 132 SMs: MMHA
        (5, 100, 32, 8, 128, "bf16", True),  # 4 · 8 · 5 · 1 = 160 >= 132: XQA
        (1, 100, 32, 8, 128, "bf16", False),  # 4·8·1·1 = 32 < 132: no gain, MMHA
        (1, 100, 32, 8, 128, "fp8", True),  # fp8 KV with bf16 queries: MMHA cannot, XQA forced
        (1, 2049, 32, 8, 128, "bf16", True),  # history 2048 -> 16 blocks: 4·8·16 = 512 >= 132
    ],
)
def test_xqa_rule_is_the_engines(batch, kv, heads, kv_heads, head_dim, dtype, xqa):
    fit = _xqa_fit(dtype)
    assert bool(td.xqa_runs(fit, batch, kv, heads, kv_heads, head_dim)) is xqa


def test_decode_families_split_ctas_reads_and_wave_time():
    fit = _xqa_fit()
    # XQA: one CTA per request and KV head, keys read once, wave_s per wave
    reads, cta_heads, wave_s = (float(v) for v in attn.decode_kernel(fit, 64, 1000, 32, 8, 128))
    assert (reads, cta_heads, wave_s) == (1.0, 8.0, 4e-6)
    # MMHA (group 64): one CTA per query head, keys read 64 / group_share = 32 times, fallback_wave_s
    reads, cta_heads, wave_s = (float(v) for v in attn.decode_kernel(fit, 64, 1000, 64, 1, 128))
    assert (reads, cta_heads, wave_s) == (32.0, 64.0, 1e-6)
    t_c, t_m, t_w = attn.decode_parts(fit, 1e15, 3e12, 64, 1000, 64, 1, 128)
    assert float(t_w) == pytest.approx(math.ceil(64 * 64 / 132) * 1e-6)
    kv_bytes = 64 * 2 * 1000 * 1 * 128 * 2 * 32 + 64 * 2 * 64 * 128 * 2
    assert float(attn.decode_bytes(64, 1000, 64, 1, 128, "bf16", reads=32.0)) == kv_bytes
    # one-kernel fits keep their old form: CTAs per KV head, one read below max_group
    plain = dataclasses.replace(fit, kernel_rule="", max_group=0)
    assert [float(v) for v in attn.decode_kernel(plain, 64, 1000, 64, 1, 128)] == [1.0, 1.0, 4e-6]


def test_decode_rule_on_a_batch_equals_the_per_call_form(h100):
    """The serving path (engine_cost.attention_s, one launch over a batch) picks the same family as the
    per-call form for equal requests, so both give one time."""
    from simcast.cost.kernels.engine_cost import attention_s

    fit = _xqa_fit()
    ek = EngineKernels(engine="trtllm", decode=(fit,))
    dev = dataclasses.replace(h100, engines={"trtllm": ek})
    peak, bw = dev.matmul_peak("bf16"), dev.hbm_bw_bytes_per_s
    for batch, ctx, heads, kv_heads in ((64, 4095, 32, 8), (2, 99, 32, 8), (16, 511, 64, 1), (8, 2047, 32, 32)):
        got = attention_s(dev, "trtllm", "bf16", [1] * batch, [ctx] * batch, heads, kv_heads, 128)
        assert got is not None
        kv = attn.decode_kv_padded(fit, peak, bw, heads, kv_heads, 128, batch, np.array([ctx + 1.0]))
        want = attn.decode_time_s(fit, peak, bw, batch, kv, heads, kv_heads, 128)
        assert got[0] == pytest.approx(float(want[0]), rel=1e-9), (batch, ctx, heads, kv_heads)
