"""The KV-cache write launch of a decode fit (:mod:`simcast.cost.kernels.kv_write`) and the reader's data-folder
override (:func:`simcast.calib.readers.aic_db.use_data_root`) that the vLLM Hopper decode script reads through."""

import dataclasses

import numpy as np
import pytest

from simcast.calib.readers import aic_db
from simcast.core.errors import SimcastInputError
from simcast.core.kernel_fits import DecodeAttentionFit
from simcast.cost.kernels import attention as attn
from simcast.cost.kernels.kv_write import kv_write_elements, kv_write_s
from simcast.engines import vllm
from simcast.inputs.loaders import load_device

FIT = DecodeAttentionFit(
    dtype="bf16",
    memory=0.9,
    half_units=20.0,
    split_tokens=512.0,
    half_kv_len=4.0,
    matmul=0.6,
    wave_s=3e-6,
    smooth_p=1.2,
    launch_s=6e-6,
    sm_count=132,
)


def test_write_elements_by_hand():
    # 4 requests x 8 KV heads x (128 keys + 128 values) = 8192; MiMo-V2's 192 / 128: 4 x 4 x 320 = 5120
    assert kv_write_elements(4, 8, 128) == 8192
    assert kv_write_elements(4, 4, 192, 128) == 5120


def test_write_time_by_hand_and_zero_without_fit():
    assert kv_write_s(FIT, 4, 8, 128) == 0.0
    w = dataclasses.replace(FIT, kv_write_s=2e-6, kv_write_elem_s=3e-12)
    assert kv_write_s(w, 4, 8, 128) == pytest.approx(2e-6 + 3e-12 * 8192)


def test_decode_time_adds_exactly_the_write():
    w = dataclasses.replace(FIT, kv_write_s=2e-6, kv_write_elem_s=3e-12)
    b, kv = np.array([1, 64, 256]), np.array([128, 4096, 32768])
    args = (989e12, 3.35e12, b, kv, 32, 8, 128)
    extra = attn.decode_time_s(w, *args) - attn.decode_time_s(FIT, *args)
    assert extra == pytest.approx(2e-6 + 3e-12 * b * 8 * 256)


@pytest.mark.parametrize("profile", ["h100_sxm", "h200_sxm"])
def test_hopper_vllm_decode_carries_the_write_and_sglang_does_not(profile):
    """vLLM's fits come from tables that time FlashAttention's forward alone, so they add the separate write
    (vllm.KV_CACHE_WRITE); SGLang's collector times the layer with its own cache write inside."""
    dev = load_device(profile)
    for dt in ("bf16", "fp8"):
        v = dev.engines["vllm"].decode_fit(dt)
        assert v is not None and 1e-6 < v.kv_write_s < 5e-6 and v.kv_write_elem_s > 0
        s = dev.engines["sglang"].decode_fit(dt)
        assert s is not None and s.kv_write_s == 0 and s.kv_write_elem_s == 0
    assert "reshape_and_cache_flash" in vllm.KV_CACHE_WRITE


def test_hopper_decode_kernel_has_one_family_across_versions():
    """On SM90 vLLM keeps FlashAttention-3 for dense decode (so no version switch); on SM100 0.24 switches."""
    assert len(vllm.DECODE_KERNEL_BY_VERSION["sm90"]) == 1
    assert [v for v, _ in vllm.DECODE_KERNEL_BY_VERSION["sm100"]] == ["0.14", "0.24"]


def test_data_root_override_keeps_the_guard(tmp_path):
    for key in sorted(aic_db.RESERVED | aic_db.SUSPECT):
        d = tmp_path.joinpath(*key)
        d.mkdir(parents=True)
        (d / "generation_attention_perf.parquet").write_bytes(b"")
    aic_db.use_data_root(tmp_path)
    try:
        assert aic_db.data_root() == tmp_path
        for system in ("h100_sxm", "h200_sxm"):
            assert aic_db.versions(system, "attention", "vllm") == []
            with pytest.raises(SimcastInputError, match="never reads it"):
                aic_db.read_table(system, "attention", "vllm", "0.22.0", "generation_attention_perf")
    finally:
        aic_db.use_data_root(None)
    assert not aic_db._ROOT_OVERRIDE


def test_hopper_vllm_0_22_folders_are_suspect():
    for system in ("h100_sxm", "h200_sxm"):
        for kind in ("gemm", "attention"):
            assert (system, kind, "vllm", "0.22.0") in aic_db.SUSPECT
