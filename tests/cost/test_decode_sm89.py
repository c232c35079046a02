"""TensorRT-LLM's fp8-KV decode below Hopper (kernel rule ``trtllm_xqa_sb``, simcast.cost.kernels.trtllm_decode_sm89):
XQA without its multi-block split, one CTA per request and KV head over the whole context. Sub-sequence counts
and launch times by hand, the batch paths equal to the per-call form, the rule limited to fp8 fits, and the
rule the database fit declares per KV dtype."""

import dataclasses
import math

import numpy as np
import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.kernel_fits import DecodeAttentionFit, EngineKernels
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels import trtllm_decode as td
from simcast.cost.kernels import trtllm_decode_sm89 as sm89
from simcast.cost.kernels.curves import smooth_max


@pytest.fixture(scope="module")
def l40s():
    from simcast.inputs.loaders import load_device

    return load_device("l40s")


def _sb_fit(**kw) -> DecodeAttentionFit:
    base = dict(
        memory=0.8,
        half_units=0.0,
        split_tokens=1.0,
        half_kv_len=0.0,
        matmul=1.0,
        wave_s=3e-6,
        smooth_p=4.0,
        launch_s=6e-6,
        sm_count=142,
        group_share=2.0,
        kernel_rule="trtllm_xqa_sb",
        fallback_wave_s=3e-6,
        cta_kv_byte_s=6e-11,
        cta_group_s=6e-10,
        token_group_s=1e-13,
        merge_s=1e-7,
        fallback_kv_byte_s=2e-10,
        fallback_merge_s=2e-7,
        mmha_ctas_per_sm=1,
        mmha_block_tokens=128,
    )
    return DecodeAttentionFit(dtype="fp8", **{**base, **kw})


@pytest.mark.parametrize("batch,kv_max", [(1, 128), (1, 16385), (8, 16385), (2048, 100000)])
def test_xqa_runs_one_block_per_request(batch, kv_max):
    fit = _sb_fit()
    assert float(sm89.xqa_launch_blocks(fit, batch, kv_max, 8)) == 1.0
    # the multi-block rule splits the same launch as TensorRT-LLM sizes it (16385 tokens, 1 request: 32)
    mb = dataclasses.replace(fit, kernel_rule="trtllm_xqa_mb")
    assert float(sm89.xqa_launch_blocks(mb, batch, kv_max, 8)) == float(td.xqa_blocks(mb, batch, kv_max, 8))
    assert float(sm89.xqa_launch_blocks(mb, 1, 16385, 8)) == 32.0


def test_masked_mha_keeps_its_split():
    """Groups above 32 run masked MHA, whose multi-block mode the fp8 switch does not touch."""
    fit = _sb_fit()
    assert not bool(td.xqa_runs(fit, 1, 16384, 64, 1, 128))
    got = sm89.launch_blocks(fit, False, 1, 16384, 64, 1)
    assert float(got) == float(td.mmha_blocks(fit, 1, 16384, 64)) == math.ceil(142 / 64)


def test_single_block_launch_time_by_hand():
    """1-4 requests of 8 KV heads (8-32 CTAs, one wave of 142 SMs): the XQA waves are one CTA's time over the
    whole context, the same for every batch in the wave, and grow linearly in the context."""
    fit = _sb_fit(memory=1.0)
    g, d, kv = 4, 128, 16385
    cta = 3e-6 + 6e-10 * g * d + kv * (2 * d * 1 * 6e-11 + 1e-13 * g * d)  # fp8: 1 byte per element
    for batch in (1, 2, 4):
        t_c, t_m, t_w = attn.decode_parts(fit, 7.33e14, 8.64e11, batch, kv, 32, 8, d)
        assert float(t_c) == 0.0
        assert float(t_w) == pytest.approx(cta, rel=1e-12)
        assert float(t_m) == pytest.approx(float(attn.decode_bytes(batch, kv, 32, 8, d, "fp8")) / 8.64e11)
    # 20 requests: 160 CTAs, two waves
    assert float(attn.decode_parts(fit, 7.33e14, 8.64e11, 20, kv, 32, 8, d)[2]) == pytest.approx(2 * cta)
    w = [float(attn.decode_parts(fit, 7.33e14, 8.64e11, 1, k, 32, 8, d)[2]) for k in (1025, 2049, 4097)]
    assert w[2] - w[1] == pytest.approx(2 * (w[1] - w[0]), rel=1e-9)


def test_rule_is_fp8_only():
    with pytest.raises(SimcastInputError):
        dataclasses.replace(_sb_fit(), dtype="bf16")
    assert _sb_fit().kernel_rule in attn.XQA_RULES


def test_batch_paths_equal_the_per_call_form(l40s):
    from simcast.cost.kernels.engine_cost import attention_s

    fit = _sb_fit()
    dev = dataclasses.replace(l40s, engines={"trtllm": EngineKernels(engine="trtllm", decode=(fit,))})
    peak, bw = dev.matmul_peak("fp8"), dev.hbm_bw_bytes_per_s
    for batch, ctx, heads, kv_heads in ((64, 4095, 32, 8), (2, 99, 32, 8), (1, 16384, 32, 8), (16, 511, 32, 32)):
        got = attention_s(dev, "trtllm", "fp8", [1] * batch, [ctx] * batch, heads, kv_heads, 128)
        assert got is not None
        kv = attn.decode_kv_padded(fit, peak, bw, heads, kv_heads, 128, batch, np.array([ctx + 1.0]))
        want = attn.decode_time_s(fit, peak, bw, batch, kv, heads, kv_heads, 128)
        assert got[0] == pytest.approx(float(want[0]), rel=1e-9), (batch, ctx, heads, kv_heads)


def test_mixed_batch_reads_each_request_whole(l40s):
    """One launch over requests of different contexts: each CTA runs its request's whole context; the wave
    takes the requests' mean tokens, as the multi-block form does with one block."""
    from simcast.cost.kernels.engine_cost import attention_s

    fit = _sb_fit()
    dev = dataclasses.replace(l40s, engines={"trtllm": EngineKernels(engine="trtllm", decode=(fit,))})
    got = attention_s(dev, "trtllm", "fp8", [1, 1], [16384, 1024], 32, 8, 128)
    assert got is not None
    kv = attn.decode_kv_padded(fit, dev.matmul_peak("fp8"), dev.hbm_bw_bytes_per_s, 32, 8, 128, 2, [16385.0, 1025.0])
    t_w = float(td.split_launch_s(fit, True, 2, 1, float(np.mean(kv)), 32, 8, 128))
    t_m = float(np.sum(attn.decode_bytes(1, kv, 32, 8, 128, "fp8"))) / (dev.hbm_bw_bytes_per_s * fit.memory)
    assert got[0] == pytest.approx(float(smooth_max(0.0, t_m, t_w, p=fit.smooth_p)) + fit.launch_s, rel=1e-9)


@pytest.mark.slow  # imports the database fitting stack (~0.7 s)
def test_database_fit_declares_the_rule_per_kv_dtype():
    """TensorRT-LLM on SM < 90: fp8 KV offers the single-block launch in place of the multi-block one; bf16 and
    Hopper keep the multi-block rule."""
    from simcast.engines import get_engine

    trtllm = get_engine("trtllm")
    assert "l40s" in trtllm.decode_fp8_single_block
    assert "h100_sxm" not in trtllm.decode_fp8_single_block
    assert "trtllm_xqa_mb" in trtllm.decode_kernel_rules["l40s"]


@pytest.mark.slow
def test_fit_recovers_the_single_block_form_with_the_l2_edge(l40s):
    """Rows generated by a known single-block fit with the L2 capacity form: offered the rule and the L2
    candidates (as the database fit does for TensorRT-LLM on L40S), the fitter declares both and reproduces
    the times."""
    import pandas as pd

    from simcast.calib.fitting.fit_decode import fit_decode

    true = _sb_fit(l2_boost=3.0, l2_half_bytes=1e8, l2_edge=20.0)
    rng = np.random.default_rng(1)
    n = 400
    shapes = pd.DataFrame(
        {
            "batch": rng.choice([1, 4, 16, 64, 256], n),
            "kv_len": rng.choice([16, 256, 2048, 16384, 65536], n),
            "heads": 32,
            "kv_heads": rng.choice([1, 4, 8, 32], n),
            "head_dim": 128,
        }
    )
    peak, bw = l40s.matmul_peak("fp8"), l40s.hbm_bw_bytes_per_s
    shapes["time_s"] = attn.decode_time_s(
        true, peak, bw, shapes.batch, shapes.kv_len, shapes.heads, shapes.kv_heads, shapes.head_dim
    )
    rows = shapes.assign(kind="attention_decode", dtype="fp8", q_len=1)
    fit, err = fit_decode(rows, l40s, "fp8", 142, ("", "trtllm_xqa", "trtllm_xqa_sb"), l2_edge=True)
    assert fit.kernel_rule == "trtllm_xqa_sb" and fit.l2_edge > 0
    assert err < 2.0
