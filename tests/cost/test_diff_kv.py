"""Attention with distinct key and value head sizes (simcast.cost.kernels.diff_kv): hand-computed bytes and FLOPs,
the declared launch time, and the per-row / batch / simulator paths agreeing."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simcast.core.kernel_fits import DecodeAttentionFit
from simcast.core.specs import Batch
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels import batched_kernels as bk
from simcast.cost.kernels import engine_cost
from simcast.cost.kernels import one_kernel as kernels
from simcast.cost.kernels.diff_kv import diff_kv_s, mean_head_dim
from simcast.cost.ops.batches import Batches

FIT = DecodeAttentionFit(
    dtype="bf16",
    memory=0.9,
    half_units=0.0,
    split_tokens=256.0,
    half_kv_len=0.0,
    matmul=1.0,
    wave_s=0.0,
    smooth_p=1.0,
    launch_s=0.0,
    sm_count=132,
)


def test_mean_head_dim():
    assert mean_head_dim(192, 128) == pytest.approx(160.0)
    assert mean_head_dim(128) == 128
    assert float(mean_head_dim(128, 0)) == 128.0


def test_decode_bytes_and_flops_by_hand():
    """One request, 1000 keys, 8 KV heads, 32 query heads, keys 192 / values 128, 2-byte cache:
    K 1000·8·192·2 + V 1000·8·128·2 bytes, q 32·192·2 read, o 32·128·2 written; FLOPs 2·32·1000·(192 + 128)."""
    b, s, h, hkv = 1, 1000, 32, 8
    want_bytes = s * hkv * 192 * 2 + s * hkv * 128 * 2 + h * 192 * 2 + h * 128 * 2
    got = attn.decode_bytes(b, s, h, hkv, mean_head_dim(192, 128), "bf16")
    assert float(got) == pytest.approx(want_bytes)
    peak, bw = 1e15, 3e12
    t_c, t_m, _ = attn.decode_parts(FIT, peak, bw, b, s, h, hkv, 192, 128)
    assert float(t_c) == pytest.approx(2.0 * h * s * (192 + 128) / peak)
    assert float(t_m) == pytest.approx(want_bytes / (bw * FIT.memory))


def test_launch_time_only_for_distinct_sizes():
    fit = dataclasses.replace(FIT, diff_kv_launch_s=5e-6)
    base = attn.decode_time_s(fit, 1e15, 3e12, 4, 2000, 16, 2, 192, 192)
    diff = attn.decode_time_s(fit, 1e15, 3e12, 4, 2000, 16, 2, 192, 128)
    same_bytes = attn.decode_time_s(fit, 1e15, 3e12, 4, 2000, 16, 2, 160, 160)
    assert float(diff) == pytest.approx(float(same_bytes) + 5e-6)
    assert float(diff) < float(base) + 5e-6  # fewer value bytes
    assert diff_kv_s(FIT, 192, 128) == 0.0  # default 0
    assert float(diff_kv_s(fit, 128, 128)) == 0.0


def test_paths_agree():
    """The per-row path (kernels.attention with v_head_dim), the one-launch path and the batch path give the
    per-call form's time for a decode batch of equal requests."""
    from simcast.inputs.loaders import load_device, shipped_profile_path

    dev = load_device(str(shipped_profile_path("h100_sxm", "device")))
    fit = dataclasses.replace(engine_cost.pick(dev, "sglang", "decode", "bf16")[0], diff_kv_launch_s=7e-6)
    ek = dataclasses.replace(dev.engines["sglang"], decode=(fit,))
    dev = dataclasses.replace(dev, engines={**dev.engines, "sglang": ek})
    peak = dev.matmul_peak("bf16")
    for batch, ctx in ((1, 100), (8, 4095), (64, 20000)):
        kv = attn.decode_kv_padded(
            fit, peak, dev.hbm_bw_bytes_per_s, 16, 1, 192, float(batch), np.array([ctx + 1.0]), 128.0
        )
        want = float(attn.decode_time_s(fit, peak, dev.hbm_bw_bytes_per_s, batch, float(kv[0]), 16, 1, 192, 128))
        one = engine_cost.attention_s(dev, "sglang", "bf16", [1], [ctx], 16, 1, 192, 128, counts=[batch])
        assert one is not None and one[0] == pytest.approx(want, rel=1e-9)
        row = kernels.attention(dev, "decode", batch, 1, ctx + 1, 16, 1, 192, "bf16", engine="sglang", v_head_dim=128)
        assert row.time_s == pytest.approx(want, rel=1e-9)
        bs = Batches.of([Batch(query_lens=[1], context_lens=[ctx], counts=[batch])])
        many = bk.attention_many(dev, "sglang", "bf16", bs, 16, 1, 192, 128)
        assert float(many[0][0]) == pytest.approx(want, rel=1e-9)
