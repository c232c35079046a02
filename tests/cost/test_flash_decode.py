"""FlashAttention-2's decode launch as vLLM runs it on SM80 (kernel rule ``fa2_varlen``,
simcast.cost.kernels.flash_decode): which launches split, their CTAs and waves by hand, the copies around a GQA launch,
the time non-decreasing in the work, and the batch paths equal to the per-call form."""

import dataclasses

import numpy as np
import pytest

from simcast.core.kernel_fits import DecodeAttentionFit, EngineKernels
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels import flash_decode as fd
from simcast.cost.kernels.curves import smooth_max


def _fa2_fit(**kw) -> DecodeAttentionFit:
    base = dict(
        memory=0.8,
        half_units=60.0,
        split_tokens=600.0,
        half_kv_len=0.3,
        matmul=0.25,
        wave_s=7e-6,
        smooth_p=2.0,
        launch_s=4e-6,
        sm_count=108,
        kernel_rule="fa2_varlen",
        gqa_swap_s=2e-6,
        gqa_copy_s=6e-6,
    )
    return DecodeAttentionFit(dtype="bf16", **{**base, **kw})


def test_launch_by_hand():
    fit = _fa2_fit()
    # vanilla MHA is not swapped: one CTA per (request, head) over the whole context, however long
    units, waves = fd.fa2_launch(fit, 2, 60000, 8, 8, 128)
    assert (float(units), float(waves)) == (16.0, 1.0)
    # GQA 32/8 is swapped: 8 CTAs per request (4 query rows fit one 64-row tile), split in 600-token chunks
    units, waves = fd.fa2_launch(fit, 64, 6000, 32, 8, 128)
    assert float(units) == 64 * 8 * 10 and float(waves) == np.ceil(5120 / 216)
    # a group of 128 takes two 64-row tiles; a short context is not split
    assert float(fd.fa2_launch(fit, 1, 100, 128, 1, 128)[0]) == 2.0
    # a head size not a multiple of 8 is not swapped
    assert not bool(fd.fa2_swapped(32, 8, 100)) and bool(fd.fa2_swapped(32, 8, 128))


def test_copies_follow_the_reshape():
    fit = _fa2_fit()
    bw = 2.0e12
    assert float(fd.fa2_copies_s(fit, bw, 4, 8, 8, 128)) == 0.0  # MHA: no swap, no copy
    move1 = 2.0 * 1 * 8 * 128 * 2 / (bw * fit.memory)  # one request's 8 x 128 2-byte rows read and written
    assert float(fd.fa2_copies_s(fit, bw, 1, 8, 2, 128)) == pytest.approx(fit.gqa_swap_s + move1)  # b = 1: q a view
    assert float(fd.fa2_copies_s(fit, bw, 4, 8, 1, 128)) == pytest.approx(fit.gqa_swap_s + 4 * move1)  # 1 KV head
    both = fit.gqa_swap_s + fit.gqa_copy_s + 8 * move1
    assert float(fd.fa2_copies_s(fit, bw, 4, 8, 2, 128)) == pytest.approx(both)  # q copied too
    assert fd.fa2_copies_s(dataclasses.replace(fit, kernel_rule=""), bw, 4, 8, 2, 128) == 0.0


def test_per_call_terms_by_hand():
    fit = _fa2_fit()
    peak, bw = 312e12, 2.039e12
    b, kv, h, hkv, d = 3, 5000, 32, 8, 128
    t_c, t_m, t_w = attn.decode_parts(fit, peak, bw, b, kv, h, hkv, d)
    units = b * hkv * (kv / 600.0)
    nbytes = b * (2 * kv * hkv * d * 2 + 2 * h * d * 2)
    eff = fit.memory * units / (units + 60.0) * kv / (kv + 0.3)
    assert float(t_m) == pytest.approx(nbytes / (bw * eff))
    assert float(t_w) == pytest.approx(np.ceil(units / 216) * fit.wave_s)
    want = smooth_max(t_c, t_m, t_w, p=fit.smooth_p) + fit.launch_s + fd.fa2_copies_s(fit, bw, b, h, hkv, d)
    assert float(attn.decode_time_s(fit, peak, bw, b, kv, h, hkv, d)) == pytest.approx(float(want))


@pytest.mark.parametrize("heads,kv_heads", [(8, 8), (32, 8), (8, 1), (64, 8)])
def test_time_non_decreasing_in_batch_and_context(heads, kv_heads):
    fit = _fa2_fit()
    peak, bw = 312e12, 2.039e12
    b = np.arange(1, 1025, dtype=float)
    for kv in (2.0, 300.0, 5000.0, 70000.0):
        t = attn.decode_time_s(fit, peak, bw, b, np.full_like(b, kv), heads, kv_heads, 128)
        assert np.all(np.diff(t) >= -1e-12 * t[1:]), kv
    kvs = np.arange(64.0, 140000.0, 7.0)  # past the short-context dip the padding envelope covers
    for n in (1.0, 2.0, 64.0):
        t = attn.decode_time_s(fit, peak, bw, np.full_like(kvs, n), kvs, heads, kv_heads, 128)
        assert np.all(np.diff(t) >= -1e-12 * t[1:]), n


def test_batch_paths_equal_the_per_call_form(h100):
    """engine_cost.attention_s (one launch) and batched_kernels.attention_many (many) equal the per-call form
    for equal requests, the copies included."""
    from simcast.core.specs import Batch
    from simcast.cost.kernels.batched_kernels import attention_many
    from simcast.cost.kernels.engine_cost import attention_s
    from simcast.cost.ops.batches import Batches

    fit = _fa2_fit(sm_count=132)
    dev = dataclasses.replace(h100, engines={"vllm": EngineKernels(engine="vllm", decode=(fit,))})
    peak, bw = dev.matmul_peak("bf16"), dev.hbm_bw_bytes_per_s
    cases = ((64, 4095), (2, 99), (1, 16384), (16, 511), (3, 70000))
    for heads, kv_heads in ((32, 8), (8, 8), (8, 1)):
        many = attention_many(
            dev,
            "vllm",
            "bf16",
            Batches.of([Batch(query_lens=[1], context_lens=[c], counts=[b]) for b, c in cases]),
            heads,
            kv_heads,
            128,
        )
        for i, (batch, ctx) in enumerate(cases):
            got = attention_s(dev, "vllm", "bf16", [1] * batch, [ctx] * batch, heads, kv_heads, 128)
            assert got is not None
            kv = attn.decode_kv_padded(fit, peak, bw, heads, kv_heads, 128, batch, np.array([ctx + 1.0]))
            want = float(attn.decode_time_s(fit, peak, bw, batch, kv, heads, kv_heads, 128)[0])
            assert got[0] == pytest.approx(want, rel=1e-9), (batch, ctx, heads, kv_heads)
            assert float(many[0][i]) == pytest.approx(want, rel=1e-9), (batch, ctx, heads, kv_heads)


@pytest.mark.slow
def test_fa3_head192_decode_rows_costed_as_diff_kv():
    """The FlashAttention-3 tables' head-192 decode rows (MiMo-V2: keys 192, values 128) are fitted and scored
    with ``v_head_dim`` 128; their prefill rows and every other head size keep one head size; the provenance
    counts them; TensorRT-LLM's head-192 rows are not given the rule."""
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from simcast.calib.fitting.from_db import engine_data
    from simcast.calib.fitting.kernel_choices import DIFF_KV_HEAD_DIM, DIFF_KV_V_HEAD_DIM

    for engine in ("sglang", "vllm"):  # SGLang's own table, and vLLM's proxy of it
        d = engine_data("h100_sxm", engine)
        a = d.attention
        diff = (a["kind"] == "attention_decode") & (a["head_dim"] == DIFF_KV_HEAD_DIM)
        assert diff.any()
        assert (a.loc[diff, "v_head_dim"] == DIFF_KV_V_HEAD_DIM).all()
        assert (a.loc[~diff, "v_head_dim"] == a.loc[~diff, "head_dim"]).all()
        assert (a[a["kind"] == "attention_prefill"]["head_dim"] == DIFF_KV_HEAD_DIM).any()
        assert any("decode rows of head size 192 costed as keys 192 / values 128" in t for t in d.tables + d.proxies)
    t = engine_data("h100_sxm", "trtllm").attention
    dec = t[t["kind"] == "attention_decode"]
    assert (dec["head_dim"] == DIFF_KV_HEAD_DIM).any()
    assert (dec["v_head_dim"] == dec["head_dim"]).all()
