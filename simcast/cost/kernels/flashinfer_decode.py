"""SGLang's FlashInfer decode on SM80-SM89 as the engine picks it: FlashInfer's CUDA-core decode kernel or its
tensor-core (prefill-style) kernel, chosen per model from the GQA group and the KV dtype
(:func:`tensor_core_runs`). The rule cites SGLang's code; the two kernels' per-wave times are fitted
(:class:`simcast.core.kernel_fits.DecodeAttentionFit`, ``kernel_rule: "flashinfer_tc"``); the TensorRT-LLM
rules live in :mod:`simcast.cost.kernels.trtllm_decode`.
"""

from __future__ import annotations

import numpy as np

from simcast.core.kernel_fits import DecodeAttentionFit

FLASHINFER_TC_RULE = "flashinfer_tc"
FLASHINFER_TC_MIN_GROUP = 4
"""SGLang runs FlashInfer's decode with tensor cores for a GQA group of at least 4 query heads per KV head
(bf16/fp16 KV) and always with an fp8 KV cache (sgl-project/sglang
``python/sglang/srt/layers/attention/flashinfer_backend.py``@0005834c ``should_use_tensor_core``: "a GQA group
size of at least 4 is needed to efficiently use Tensor Cores, as it fuses the head group with the token
dimension in MMA"); below it FlashInfer's CUDA-core decode kernel runs."""


def tensor_core_runs(fit: DecodeAttentionFit, heads, kv_heads):
    """Whether SGLang launches FlashInfer's tensor-core decode for this shape (array-friendly)."""
    g = np.floor(np.asarray(heads, float) / np.asarray(kv_heads, float))
    return (g >= FLASHINFER_TC_MIN_GROUP) | (fit.dtype == "fp8")
