"""TensorRT-LLM's XQA decode with an fp8 KV cache below Hopper (Ada, SM89: L40S): one CTA per request and KV
head over the whole context, no multi-block split (``kernel_rule: "trtllm_xqa_sb"``).

The engine turns XQA's multi-block mode off for an fp8 (E4M3) KV cache on SM < 90
(NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/common/attentionOp.cpp``@00dbe288 ``convertMMHAParamsToXQAParams``:
``kv_cache_data_type == DATA_TYPE_E4M3 && (mSM < kSM_90 || mSM >= kSM_120)`` sets
``xqaParams.multi_block_mode = false``; the JIT launch, ``decoderXQAImplJIT.cpp`` ``runImpl``, then keeps
``multi_block = 1``). The rest of the launch is ``"trtllm_xqa_mb"``'s (:mod:`simcast.cost.kernels.trtllm_decode`):
the same family choice and the same CTA-wave form, with one sub-sequence per request under XQA. Masked MHA
(groups above 32, vanilla MHA) keeps its own split (:func:`simcast.cost.kernels.trtllm_decode.mmha_blocks`).
"""

from __future__ import annotations

import numpy as np

from simcast.core.kernel_fits import DecodeAttentionFit
from simcast.cost.kernels.trtllm_decode import mmha_blocks, xqa_blocks

XQA_SINGLE_BLOCK_RULE = "trtllm_xqa_sb"
"""XQA without its multi-block split: TensorRT-LLM's launch for an fp8 KV cache on SM < 90."""
SPLIT_FORM_RULES = ("trtllm_xqa_mb", XQA_SINGLE_BLOCK_RULE)
"""Rules evaluated as CTA waves of the launch the engine sizes (:func:`launch_blocks`)."""


def xqa_launch_blocks(fit: DecodeAttentionFit, batch, kv_max, kv_heads):
    """Sub-sequences per request of an XQA launch: 1 under ``"trtllm_xqa_sb"`` (multi-block mode off), else
    :func:`simcast.cost.kernels.trtllm_decode.xqa_blocks` (array-friendly)."""
    if fit.kernel_rule == XQA_SINGLE_BLOCK_RULE:
        return np.ones(np.broadcast(np.asarray(batch), np.asarray(kv_max), np.asarray(kv_heads)).shape)
    return xqa_blocks(fit, batch, kv_max, kv_heads)


def launch_blocks(fit: DecodeAttentionFit, xqa, batch, kv_max, heads, kv_heads):
    """Sub-sequences per request of a decode launch: XQA's (:func:`xqa_launch_blocks`) where ``xqa``, else
    masked MHA's (array-friendly)."""
    return np.where(xqa, xqa_launch_blocks(fit, batch, kv_max, kv_heads), mmha_blocks(fit, batch, kv_max, heads))
