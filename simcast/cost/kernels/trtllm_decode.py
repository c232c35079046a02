"""TensorRT-LLM's decode kernels on SM80-SM90 as the engine launches them: which family runs (XQA or
masked MHA, :func:`xqa_runs`), how many sub-sequences each request's context is cut into in multi-block
mode (:func:`xqa_blocks`, :func:`mmha_blocks`) and the time of the launch's CTA waves
(:func:`split_launch_s`). The launch's memory term and padding envelope live in
:mod:`simcast.cost.kernels.xqa_launch` (``xqa_launch_terms``); the rules and constants cite TensorRT-LLM's code.
"""

from __future__ import annotations

import numpy as np

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.kernel_fits import DecodeAttentionFit

XQA_RULES = ("trtllm_xqa", "trtllm_xqa_mb", "trtllm_xqa_sb")
"""Decode kernel rules that choose between TensorRT-LLM's XQA and masked-MHA kernels (:func:`xqa_runs`;
``"trtllm_xqa_sb"``: :mod:`simcast.cost.kernels.trtllm_decode_sm89`)."""
XQA_MAX_GROUP = 32
XQA_MAX_HEAD_DIM = 256
XQA_MIN_HISTORY_TOKENS_PER_BLOCK = 128
XQA_MIN_BLOCK_FACTOR = 4
XQA_TARGET_WAVE_FACTOR = 8
XQA_MAX_SUB_SEQ = 6000
"""TensorRT-LLM's XQA dispatch constants (NVIDIA/TensorRT-LLM
``cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderXQAConstants.h``@12453212:
``kMinHistoryTokensPerBlock = 128``, ``kEnableMinBlockFactor = 4``, ``kTargetWaveFactor = 8``,
``getXqaMaxNumSubSeq`` = 6000 (non-MLA); group and head-size limits from
``decoderXQAImplJIT/kernelUtils.cpp`` ``supportConfigHMMA``/``supportConfigQGMMA``)."""


def xqa_runs(fit: DecodeAttentionFit, batch, kv_max, heads, kv_heads, head_dim):
    """Whether TensorRT-LLM launches its XQA decode kernel (else masked MHA), as the engine decides
    (array-friendly).

    XQA is supported for a GQA group of 2..32 query heads per KV head (vanilla MHA, group 1, is left to
    MMHA "for performance reasons"), head sizes that are multiples of 16 up to 256
    (``kernelUtils.cpp`` ``supportConfigCommon``/``supportConfigHMMA``); it is used when it may gain
    (``decoderXQAImplJIT.cpp`` ``mayHavePerfGain``: ``4 · kv_heads · batch · max(1, history / 128) >=
    SMs``, history = the longest cached context) or when the KV cache is fp8, which MMHA does not take
    with bf16 queries (``decoderXQARunner.cpp`` ``shouldUse``).
    """
    b, s, hkv = (np.asarray(v, float) for v in (batch, kv_max, kv_heads))
    gain = b >= xqa_min_batch(fit, s, hkv)
    return xqa_supported(heads, kv_heads, head_dim) & (gain | (fit.dtype == "fp8"))


def xqa_supported(heads, kv_heads, head_dim):
    """Whether XQA takes the shape: GQA group 2..32, head size a multiple of 16 up to 256 (array-friendly)."""
    h, hkv, d = (np.asarray(v, float) for v in (heads, kv_heads, head_dim))
    g = h / hkv
    return (g > 1) & (g <= XQA_MAX_GROUP) & (d % 16 == 0) & (d <= XQA_MAX_HEAD_DIM)


def xqa_min_batch(fit: DecodeAttentionFit, kv_max, kv_heads):
    """The fewest requests with which ``mayHavePerfGain`` holds: ``4 · kv_heads · batch · max(1, history /
    128) >= SMs`` (array-friendly)."""
    blocks = np.asarray(kv_heads, float) * np.maximum(
        1.0, np.floor((np.asarray(kv_max, float) - 1) / XQA_MIN_HISTORY_TOKENS_PER_BLOCK)
    )
    return np.ceil(fit.sm_count / (XQA_MIN_BLOCK_FACTOR * blocks))


def xqa_blocks(fit: DecodeAttentionFit, batch, kv_max, kv_heads):
    """Sub-sequences per request of an XQA launch (its multi-block count), as TensorRT-LLM sizes it
    (array-friendly).

    ``decoderXQAImplCommon.h`` ``computeMultiBlockCount``@12453212 (the JIT path's launch,
    ``decoderXQAImplJIT.cpp`` ``runImpl``, calls it with multi-block mode on): ``m = history / 128``
    (history = the longest cached context, ``kv_max - 1``), at most ``round(sqrt(8 m))`` (the merge of many
    partial results would dominate), at least 1; if the launch's CTAs ``batch · kv_heads · m`` exceed
    ``kTargetWaveFactor = 8`` waves over the SMs, ``m`` is divided by the excess (floor, at least 1); and
    ``batch · m`` stays within the 6000 sub-sequences of the reserved workspace.
    """
    b, hkv = np.asarray(batch, float), np.asarray(kv_heads, float)
    m0 = np.floor(np.maximum(np.asarray(kv_max, float) - 1.0, 0.0) / XQA_MIN_HISTORY_TOKENS_PER_BLOCK)
    m = np.maximum(np.minimum(m0, np.round(np.sqrt(m0 * 8.0))), 1.0)
    excess = b * hkv * m / fit.sm_count / XQA_TARGET_WAVE_FACTOR
    m = np.maximum(np.where(excess > 1.0, np.floor(m / np.maximum(excess, 1.0)), m), 1.0)
    return np.maximum(np.minimum(m, np.floor(XQA_MAX_SUB_SEQ / np.maximum(b, 1.0))), 1.0)


def mmha_blocks(fit: DecodeAttentionFit, batch, kv_max, heads):
    """Sequence tiles per request of a masked-MHA launch in multi-block mode, as TensorRT-LLM sizes them
    (array-friendly): ``decoderMaskedMultiheadAttentionLaunch.h`` ``multi_block_grid_setup``@14e801da,
    ``clamp(ceil(SMs · blocks_per_sm / (batch · heads)), 1, ceil(kv_max / seq_len_per_kv_loop))``. The
    kernel's resident CTAs per SM (``mmha_ctas_per_sm``, from its occupancy query) and its tokens per KV
    loop (``mmha_block_tokens``, from its dynamic block size) are not fixed by the code: both are chosen by
    the fit (:func:`simcast.calib.fitting.fit_decode.fit_decode`)."""
    b, h = np.asarray(batch, float), np.asarray(heads, float)
    most = np.ceil(np.asarray(kv_max, float) / max(fit.mmha_block_tokens, 1))
    return np.clip(np.ceil(fit.sm_count * fit.mmha_ctas_per_sm / np.maximum(b * h, 1.0)), 1.0, np.maximum(most, 1.0))


XQA_PART_BYTES = 128
"""The widest K/V row part Hopper's XQA kernel loads (``cpp/kernels/xqa/mha_sm90.cu``@fbbc05dd
``cacheHeadPartBytes``)."""


def xqa_narrow(head_dim, dtype: str):
    """Whether a cached K/V head row is narrower than XQA's 128-byte part (array-friendly): head 64 with an fp8
    cache (64 bytes). Hopper's XQA kernel then loads its K/V tiles in 64-byte swizzled parts
    (``cpp/kernels/xqa/mha_sm90.cu``@fbbc05dd: ``cacheHeadPartBytes = min(paddedCacheHeadBytes, 128)``,
    ``swizzleBytes = cacheHeadPartBytes``). aiconfigurator's collector also times every head-64 row with
    attention sinks (``collector/trtllm/collect_attn.py``@05656140); which of the two costs the fixed time the
    rows show per launch (``narrow_launch_s``, :func:`split_launch_s`) is not resolved (docs/model.md)."""
    return np.asarray(head_dim, float) * DTYPE_BYTES[dtype] < XQA_PART_BYTES


def split_launch_s(fit: DecodeAttentionFit, xqa, batch, blocks, tokens, heads, kv_heads, head_dim):
    """Seconds of a decode launch's CTA waves under ``"trtllm_xqa_mb"`` (array-friendly; ``blocks``: the
    family's sub-sequences per request, ``tokens``: the mean over requests of ``ceil(kv_len / blocks)``).

    XQA (``xqa`` true): ``batch · kv_heads · blocks`` CTAs, one resident per SM (assumed: XQA keeps its KV
    tiles in shared memory; the per-CTA time is fitted), each ``wave_s + cta_group_s · group · head_dim``
    plus per token ``2 · head_dim · kv_bytes · cta_kv_byte_s + token_group_s · group · head_dim``; plus
    ``merge_s`` per sub-sequence when ``blocks > 1``; plus ``narrow_launch_s`` once per launch when the cached
    head row is under 128 bytes (:func:`xqa_narrow`). Masked MHA: ``batch · heads · blocks`` CTAs,
    ``mmha_ctas_per_sm`` resident per SM, each ``fallback_wave_s + tokens · 2 · head_dim · kv_bytes ·
    fallback_kv_byte_s``; plus ``fallback_merge_s`` per tile when ``blocks > 1``.
    """
    b, m, tok, h, hkv, d = (np.asarray(v, float) for v in (batch, blocks, tokens, heads, kv_heads, head_dim))
    row = 2 * d * DTYPE_BYTES[fit.dtype]
    gd = h / hkv * d
    x_cta = fit.wave_s + fit.cta_group_s * gd + tok * (row * fit.cta_kv_byte_s + fit.token_group_s * gd)
    x_t = np.ceil(b * hkv * m / fit.sm_count) * x_cta + np.where(m > 1, fit.merge_s * m, 0.0)
    x_t = x_t + np.where(xqa_narrow(d, fit.dtype), fit.narrow_launch_s, 0.0)
    f_cta = fit.fallback_wave_s + tok * row * fit.fallback_kv_byte_s
    f_t = np.ceil(b * h * m / (fit.sm_count * max(fit.mmha_ctas_per_sm, 1))) * f_cta
    return np.where(xqa, x_t, f_t + np.where(m > 1, fit.fallback_merge_s * m, 0.0))
