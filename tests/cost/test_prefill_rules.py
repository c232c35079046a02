"""Prefill attention's declared CTA layout (``kernel_rule``), per-CTA time and L2 capacity term
(:mod:`simcast.cost.kernels.prefill_rules`, :func:`simcast.cost.kernels.attention.prefill_parts`): hand-computed times,
the profile checks, and the batch path agreeing with the per-call form."""

import math

import numpy as np
import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.kernel_fits import PrefillAttentionFit
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels.prefill_rules import cta_time_s, tile_kv_heads

PEAK, BW = 1e15, 1e12


def _fit(**kw) -> PrefillAttentionFit:
    base = dict(dtype="bf16", matmul=1.0, half_q_len=0.0, half_units=0.0, half_head_dim=0.0, memory=1.0)
    return PrefillAttentionFit(**{**base, "smooth_p": 1.0, "launch_s": 0.0, **kw})


def test_per_head_rule_counts_query_heads():
    """32 query heads over 8 KV heads, 16 tokens, tile 128: packed, one CTA per KV head (4 x 16 = 64 rows of
    one tile); per head (trtllm_ctx), one CTA per query head, each a full 128 x 128 block."""
    packed, per_head = _fit(), _fit(kernel_rule="trtllm_ctx")
    assert tile_kv_heads(packed, 32, 8) == 8 and tile_kv_heads(per_head, 32, 8) == 32
    # compute only (bytes ~ 0 at this bandwidth): FLOPs / peak; per KV head 1 block, per query head 1 block
    t_packed, _ = attn.prefill_parts(packed, PEAK, 1e30, 1, 16, 0, 32, 8, 128)
    t_head, _ = attn.prefill_parts(per_head, PEAK, 1e30, 1, 16, 0, 32, 8, 128)
    assert float(t_packed) == pytest.approx(4 * 8 * 128 * 128 * 128 / PEAK)
    assert float(t_head) == pytest.approx(4 * 32 * 128 * 128 * 128 / PEAK)


def test_cta_time_by_hand():
    """4 requests x 32 query heads x ceil(300 / 128) = 3 tiles = 384 CTAs at 2 us each over 128 SMs: 6 us."""
    fit = _fit(kernel_rule="trtllm_ctx", cta_s=2e-6, sm_count=128)
    units = attn.prefill_units(4, 300, 32, tile_kv_heads(fit, 32, 8), fit.tile)
    assert float(units) == 384
    assert float(cta_time_s(fit, units)) == pytest.approx(6e-6)
    t_c, _ = attn.prefill_parts(fit, PEAK, 1e30, 4, 300, 0, 32, 8, 128)
    t0, _ = attn.prefill_parts(_fit(kernel_rule="trtllm_ctx"), PEAK, 1e30, 4, 300, 0, 32, 8, 128)
    assert float(t_c - t0) == pytest.approx(6e-6)
    assert cta_time_s(_fit(), 384) == 0.0  # off without cta_s


def test_l2_capacity_memory_term():
    """Below the capacity the bytes move at (1 + boost) x the bandwidth, far above it at the bandwidth; the
    memory time never falls as the bytes grow."""
    fit = _fit(l2_boost=4.0, l2_half_bytes=1e8, l2_edge=8.0)
    small, big = 1e6, 1e10
    assert float(attn.prefill_memory_s(fit, BW, small)) == pytest.approx(small / (5 * BW), rel=1e-6)
    assert float(attn.prefill_memory_s(fit, BW, big)) == pytest.approx(big / BW, rel=1e-6)
    nb = np.geomspace(1e5, 1e11, 400)
    t = attn.prefill_memory_s(fit, BW, nb)
    assert np.all(np.diff(t) >= 0)
    assert float(attn.prefill_memory_s(_fit(), BW, big)) == pytest.approx(big / BW)  # off: plain bandwidth


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"kernel_rule": "fa4"}, "kernel_rule"), ({"cta_s": 1e-6}, "sm_count")],
)
def test_bad_prefill_fit_fields(kw, field):
    with pytest.raises(SimcastInputError, match=field):
        _fit(**kw)


def test_batch_path_matches_per_call_form():
    """One prefill group through the simulator's batch path equals the per-call form (per-head rule, CTA
    time and L2 term all on), up to the padding envelope, which can only lower it."""
    import dataclasses

    from simcast.cost.kernels import engine_cost
    from simcast.inputs.loaders import load_device

    dev = load_device("b200")
    fit = _fit(kernel_rule="trtllm_ctx", cta_s=2e-6, sm_count=148, l2_boost=2.0, l2_half_bytes=1e8, l2_edge=4.0)
    fit = dataclasses.replace(fit, matmul=0.7, half_q_len=20.0, half_units=100.0, half_head_dim=50.0, memory=0.5)
    ek = dataclasses.replace(dev.engines["vllm"], prefill=(fit,))
    dev = dataclasses.replace(dev, engines={**dev.engines, "vllm": ek})
    peak = dev.matmul_peak("bf16")
    for q, n in ((256, 4), (1000, 2), (4096, 1)):
        got = engine_cost.attention_s(dev, "vllm", "bf16", (q,), (0,), 32, 8, 128, phase="prefill", counts=(n,))
        assert got is not None
        want = float(attn.prefill_time_s(fit, peak, dev.hbm_bw_bytes_per_s, n, q, 0, 32, 8, 128))
        assert got[0] <= want * (1 + 1e-9)
        assert got[0] >= want * 0.8, (q, n, got[0], want)
        assert math.isfinite(got[0])


def test_flashinfer_tile_rule_by_hand():
    """FlashInfer's FA2DetermineCtaTileQ on the packed query length q * heads / kv_heads: 16 rows up to 16, 64 up
    to 64, 128 above (64 at head size 256)."""
    from simcast.cost.kernels.prefill_rules import rule_tile

    fit = _fit(kernel_rule="flashinfer_fa2")
    q = np.array([1, 2, 3, 8, 9, 64, 65, 4096])
    assert list(rule_tile(fit, q, 8, 1, 128)) == [16, 16, 64, 64, 128, 128, 128, 128]
    assert list(rule_tile(fit, q, 8, 1, 256)) == [16, 16, 64, 64, 64, 64, 64, 64]
    assert rule_tile(_fit(), q, 8, 1, 128) == 128  # other rules: the fit's tile
    # a 16-row tile at half_tile = 48 runs at a quarter of the efficiency: four times the compute time
    slow = _fit(kernel_rule="flashinfer_fa2", half_tile=48.0)
    t16, _ = attn.prefill_parts(slow, PEAK, 1e30, 1, 2, 0, 8, 1, 128)
    t16_off, _ = attn.prefill_parts(_fit(kernel_rule="flashinfer_fa2"), PEAK, 1e30, 1, 2, 0, 8, 1, 128)
    assert float(t16) == pytest.approx(4 * float(t16_off))
    assert float(t16_off) == pytest.approx(4 * 1 * 128 * 16 * 16 / PEAK)  # one 16 x 16 block of one KV head


@pytest.mark.parametrize("qs", [(2,), (10,), (40,), (300,), (2, 300), (10, 5000)])
def test_flashinfer_batch_path_matches_per_call_form(qs):
    """Under "flashinfer_fa2" the batch path (engine_cost) and the vectorised batch path (batched_kernels) agree,
    and for one group match the per-call form up to the padding envelope."""
    import dataclasses

    from simcast.cost.kernels import engine_cost
    from simcast.inputs.loaders import load_device

    dev = load_device("l40s")
    fit = dev.engines["sglang"].prefill_fit("bf16")
    assert fit is not None and fit.kernel_rule == "flashinfer_fa2"
    fit2 = dataclasses.replace(fit, half_tile=60.0)
    ek = dataclasses.replace(dev.engines["sglang"], prefill=(fit2,))
    dev = dataclasses.replace(dev, engines={**dev.engines, "sglang": ek})
    cs, ns = (0,) * len(qs), (3,) * len(qs)
    got = engine_cost.attention_s(dev, "sglang", "bf16", qs, cs, 32, 8, 128, phase="prefill", counts=ns)
    assert got is not None and math.isfinite(got[0])
    if len(qs) == 1:
        peak, bw = dev.matmul_peak("bf16"), dev.hbm_bw_bytes_per_s
        want = float(attn.prefill_time_s(fit2, peak, bw, 3, qs[0], 0, 32, 8, 128))
        assert want * 0.8 <= got[0] <= want * (1 + 1e-9)
