"""TensorRT-LLM's multi-block decode launches (kernel rule ``trtllm_xqa_mb``, simcast.cost.kernels.attention):
the engine's sub-sequence counts by hand, the CTA-wave time by hand, the batch paths equal to the per-call
form, and a fit that recovers the form from rows it generated."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.kernel_fits import DecodeAttentionFit, EngineKernels
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels import trtllm_decode as td
from simcast.cost.kernels.curves import smooth_max
from simcast.cost.kernels.trtllm_decode import xqa_narrow


def _mb_fit(dtype: str = "bf16", **kw) -> DecodeAttentionFit:
    base = dict(
        memory=0.85,
        half_units=0.0,
        split_tokens=1.0,
        half_kv_len=0.0,
        matmul=1.0,
        wave_s=1e-6,
        smooth_p=2.0,
        launch_s=5e-6,
        sm_count=132,
        group_share=2.0,
        kernel_rule="trtllm_xqa_mb",
        fallback_wave_s=3e-6,
        cta_kv_byte_s=1e-12,
        cta_group_s=1e-9,
        token_group_s=1e-12,
        merge_s=1e-7,
        fallback_kv_byte_s=5e-11,
        fallback_merge_s=2e-7,
        mmha_ctas_per_sm=2,
        mmha_block_tokens=256,
    )
    return DecodeAttentionFit(dtype=dtype, **{**base, **kw})


@pytest.mark.parametrize(
    "batch,kv_max,kv_heads,want",
    [
        (1, 128, 8, 1),  # history 127 < 128 tokens per block: one block
        (1, 257, 8, 2),  # history 256: 2 blocks (round(sqrt(16)) = 4 does not bind)
        (1, 16385, 8, 32),  # history 16384: 128 blocks, capped at round(sqrt(8 * 128)) = 32; 256 CTAs < 8 waves
        (8, 16385, 8, 16),  # 8 * 8 * 32 CTAs = 15.5 waves of 132: 32 / (15.5 / 8) = 16.5 -> 16
        (2048, 100000, 8, 1),  # far past 8 waves: 1
    ],
)
def test_xqa_blocks_are_the_engines(batch, kv_max, kv_heads, want):
    assert float(td.xqa_blocks(_mb_fit(), batch, kv_max, kv_heads)) == want


@pytest.mark.parametrize(
    "batch,kv_max,heads,want",
    [
        (1, 16384, 32, 9),  # ceil(132 SMs * 2 / 32 heads) = 9 <= ceil(16384 / 256) = 64
        (16, 16384, 32, 1),  # 512 CTAs already fill 2 per SM
        (1, 300, 32, 2),  # capped by ceil(300 / 256) = 2 KV loops
    ],
)
def test_mmha_blocks_are_the_engines(batch, kv_max, heads, want):
    assert float(td.mmha_blocks(_mb_fit(), batch, kv_max, heads)) == want


def test_split_launch_time_by_hand():
    fit = _mb_fit()
    # XQA: 1 request, 8 KV heads, group 4, head 128, history 16384 -> 32 blocks of ceil(16385 / 32) = 513 tokens
    cta = 1e-6 + 1e-9 * 4 * 128 + 513 * (2 * 128 * 2 * 1e-12 + 1e-12 * 4 * 128)
    want = math.ceil(8 * 32 / 132) * cta + 32 * 1e-7
    assert float(td.split_launch_s(fit, True, 1, 32, 513, 32, 8, 128)) == pytest.approx(want, rel=1e-12)
    # masked MHA: 9 tiles per request (above), 32 * 9 CTAs over 132 SMs x 2, each 3 us + tokens' bytes
    cta = 3e-6 + 1821 * 2 * 128 * 2 * 5e-11
    want = math.ceil(32 * 9 / 264) * cta + 9 * 2e-7
    assert float(td.split_launch_s(fit, False, 1, 9, 1821, 32, 32, 128)) == pytest.approx(want, rel=1e-12)


def test_narrow_head_launch_time_by_hand():
    """XQA launches whose cached head row is under 128 bytes (head 64, fp8) take ``narrow_launch_s`` once per
    launch; wider rows (head 128 fp8, head 64 bf16) and masked MHA do not."""
    fit = _mb_fit("fp8", narrow_launch_s=2e-6)
    assert bool(xqa_narrow(64, "fp8")) and not bool(xqa_narrow(128, "fp8"))
    assert not bool(xqa_narrow(64, "bf16"))
    # 1 request, 8 KV heads, group 4, head 64, fp8: 32 blocks of 513 tokens, one wave
    cta = 1e-6 + 1e-9 * 4 * 64 + 513 * (2 * 64 * 1 * 1e-12 + 1e-12 * 4 * 64)
    want = math.ceil(8 * 32 / 132) * cta + 32 * 1e-7 + 2e-6
    assert float(td.split_launch_s(fit, True, 1, 32, 513, 32, 8, 64)) == pytest.approx(want, rel=1e-12)
    base = dataclasses.replace(fit, narrow_launch_s=0.0)
    for xqa, d in ((True, 128), (False, 64)):
        assert float(td.split_launch_s(fit, xqa, 1, 32, 513, 32, 8, d)) == float(
            td.split_launch_s(base, xqa, 1, 32, 513, 32, 8, d)
        )
    bf16 = _mb_fit("bf16", narrow_launch_s=2e-6)
    assert float(td.split_launch_s(bf16, True, 1, 32, 513, 32, 8, 64)) == float(
        td.split_launch_s(dataclasses.replace(bf16, narrow_launch_s=0.0), True, 1, 32, 513, 32, 8, 64)
    )


def test_split_form_per_call_terms():
    """Under the rule: no compute term, memory at ``memory`` of the bandwidth, the family's CTA waves."""
    fit = _mb_fit()
    t_c, t_m, t_w = attn.decode_parts(fit, 1e15, 3e12, 1, 16385, 32, 8, 128)
    assert float(t_c) == 0.0
    assert float(t_m) == pytest.approx(float(attn.decode_bytes(1, 16385, 32, 8, 128, "bf16")) / (3e12 * 0.85))
    boosted = dataclasses.replace(
        fit, l2_boost=1.0, l2_half_bytes=float(attn.decode_bytes(1, 16385, 32, 8, 128, "bf16"))
    )
    assert float(attn.decode_parts(boosted, 1e15, 3e12, 1, 16385, 32, 8, 128)[1]) == pytest.approx(float(t_m) / 1.5)
    assert float(t_w) == pytest.approx(float(td.split_launch_s(fit, True, 1, 32, 513, 32, 8, 128)))
    # a rule without the split keeps its terms
    old = dataclasses.replace(fit, kernel_rule="trtllm_xqa", half_units=50.0, matmul=0.1)
    assert float(attn.decode_parts(old, 1e15, 3e12, 1, 16385, 32, 8, 128)[0]) > 0.0


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_split_form_batch_paths_equal_the_per_call_form(h100, dtype):
    from simcast.cost.kernels.engine_cost import attention_s

    fit = _mb_fit(dtype)
    dev = dataclasses.replace(h100, engines={"trtllm": EngineKernels(engine="trtllm", decode=(fit,))})
    peak, bw = dev.matmul_peak("fp8" if dtype == "fp8" else "bf16"), dev.hbm_bw_bytes_per_s
    for batch, ctx, heads, kv_heads in ((64, 4095, 32, 8), (2, 99, 32, 8), (1, 16384, 32, 8), (16, 511, 32, 32)):
        got = attention_s(dev, "trtllm", dtype, [1] * batch, [ctx] * batch, heads, kv_heads, 128)
        assert got is not None
        kv = attn.decode_kv_padded(fit, peak, bw, heads, kv_heads, 128, batch, np.array([ctx + 1.0]))
        want = attn.decode_time_s(fit, peak, bw, batch, kv, heads, kv_heads, 128)
        assert got[0] == pytest.approx(float(want[0]), rel=1e-9), (batch, ctx, heads, kv_heads)


def test_split_form_mixed_batch_uses_mean_tokens_and_longest_history(h100):
    """One launch over requests of different contexts: the block count from the longest history, tokens per
    CTA the mean of each request's ``ceil(kv / blocks)``."""
    from simcast.cost.kernels.engine_cost import attention_s

    fit = _mb_fit()
    dev = dataclasses.replace(h100, engines={"trtllm": EngineKernels(engine="trtllm", decode=(fit,))})
    got = attention_s(dev, "trtllm", "bf16", [1, 1], [16384, 1024], 32, 8, 128)
    assert got is not None
    kv = attn.decode_kv_padded(
        fit, dev.matmul_peak("bf16"), dev.hbm_bw_bytes_per_s, 32, 8, 128, 2, np.array([16385.0, 1025.0])
    )
    m = float(td.xqa_blocks(fit, 2, kv.max(), 8))
    tok = float(np.mean(np.ceil(kv / m)))
    t_w = float(td.split_launch_s(fit, True, 2, m, tok, 32, 8, 128))
    nbytes = float(np.sum(attn.decode_bytes(1, kv, 32, 8, 128, "bf16")))
    t_m = nbytes / (dev.hbm_bw_bytes_per_s * fit.memory)
    assert got[0] == pytest.approx(float(smooth_max(0.0, t_m, t_w, p=fit.smooth_p)) + fit.launch_s, rel=1e-9)


def test_split_fit_fields_are_checked():
    with pytest.raises(SimcastInputError):
        _mb_fit(mmha_ctas_per_sm=0)
    with pytest.raises(SimcastInputError):
        _mb_fit(kernel_rule="xqa_multi")


@pytest.mark.slow
def test_fit_recovers_the_split_form(h100):
    """Rows generated by a known multi-block fit: the fitter declares the rule and reproduces the times."""
    from simcast.calib.fitting.fit_decode import fit_decode

    true = _mb_fit("fp8")
    rng = np.random.default_rng(0)
    n = 400
    shapes = pd.DataFrame(
        {
            "batch": rng.choice([1, 4, 16, 64, 256], n),
            "kv_len": rng.choice([16, 256, 2048, 16384], n),
            "heads": 32,
            "kv_heads": rng.choice([1, 4, 8, 32], n),
            "head_dim": 128,
        }
    )
    shapes["time_s"] = attn.decode_time_s(
        true,
        h100.matmul_peak("fp8"),
        h100.hbm_bw_bytes_per_s,
        shapes.batch,
        shapes.kv_len,
        shapes.heads,
        shapes.kv_heads,
        shapes.head_dim,
    )
    rows = shapes.assign(kind="attention_decode", dtype="fp8", q_len=1)
    fit, err = fit_decode(rows, h100, "fp8", 132, ("", "trtllm_xqa_mb"))
    assert fit.kernel_rule == "trtllm_xqa_mb"
    assert (fit.mmha_ctas_per_sm, fit.mmha_block_tokens) == (2, 256)
    assert err < 2.0


def test_batch_envelope_never_lets_a_request_speed_up_the_launch():
    """A launch the rule leaves to masked MHA (too few requests for XQA to gain) costs at most XQA on the
    launch padded to the fewest requests XQA is chosen for, so one more request never makes it faster."""
    fit = _mb_fit(fallback_wave_s=2e-5)  # a slow masked-MHA CTA: without the envelope batch 1 > batch 3
    # history 256: 4 * 8 KV heads * b * 2 >= 132 SMs from b = 3 on
    assert not bool(td.xqa_runs(fit, 2, 257, 32, 8, 128)) and bool(td.xqa_runs(fit, 3, 257, 32, 8, 128))
    assert float(td.xqa_min_batch(fit, 257, 8)) == 3
    times = [float(attn.decode_time_s(fit, 1e15, 3e12, b, 257, 32, 8, 128)) for b in range(1, 9)]
    assert all(a <= b * (1 + 1e-12) for a, b in zip(times, times[1:])), times
    mmha = float(td.split_launch_s(fit, False, 1, td.mmha_blocks(fit, 1, 257, 32), 129, 32, 8, 128))
    assert times[0] < mmha  # the envelope, not the masked-MHA waves, set batch 1's time


@pytest.mark.slow  # ~1 s or more: out of make test-fast
def test_envelope_is_non_decreasing_in_context_off_the_grid(h100):
    """The multi-block form's envelope grid holds only each segment's first context past 4096 tokens; a
    context between grid points takes the better of its own time and the best grid context past it, so
    the served time never falls as the context grows (scanned at odd steps across segment starts)."""
    from simcast.cost.kernels.engine_cost import attention_s

    fit = _mb_fit()
    assert attn.segment_tokens(fit) == 128 and attn.segment_tokens(_mb_fit(mmha_block_tokens=64)) == 64
    dev = dataclasses.replace(h100, engines={"trtllm": EngineKernels(engine="trtllm", decode=(fit,))})
    for batch, heads, kv_heads in ((1, 32, 8), (3, 32, 8), (40, 32, 32)):
        got = [
            attention_s(dev, "trtllm", "bf16", [1] * batch, [c] * batch, heads, kv_heads, 128)
            for c in range(4000, 21000, 37)
        ]
        times = [g[0] for g in got if g is not None]
        assert all(a <= b * (1 + 1e-12) for a, b in zip(times, times[1:])), (batch, heads, kv_heads)
