"""How a prefill attention kernel lays out its CTAs, as the engine launches it, and the terms that follow from
that layout: the heads a query tile packs (:func:`tile_kv_heads`), the query tile of a launch (:func:`rule_tile`)
and a fixed time per CTA (:func:`cta_time_s`).
The memory term (with its L2 capacity form) is :func:`simcast.cost.kernels.attention.prefill_memory_s`; the formulas
that use them live in :mod:`simcast.cost.kernels.attention` (``prefill_parts``) and the batch paths
(:mod:`simcast.cost.kernels.attention_launch`).

``"trtllm_ctx"``: TensorRT-LLM's context attention on Blackwell (TRT-LLM-gen FMHA, also what vLLM's FlashInfer
backend runs there, ``trtllm_batch_context_with_kv_cache``) launches one CTA per query tile, *query* head and
request: ``numCtasPerSeqQ = ceil(max_q / stepQ)``, ``numHeadsPerCta = 1`` unless the kernel groups heads
(``mGroupsHeadsQ``, NVIDIA/TensorRT-LLM ``cpp/tensorrt_llm/kernels/trtllmGenKernels/fmha/fmhaKernels.h``@52cd475a
``computeNumCtas``); context kernels do not (an earlier ``hashFromRunnerParams`` of the same file requires
``maxNumHeadsQPerKvInCta == 1`` for them). TensorRT-LLM's SM80-SM90 context FMHA is given the same layout as a
fit candidate; the fitting half keeps it on H100/H200 and not on L40S (``calib/fitting/from_db.py``). The
measured tables agree: on B200 vLLM a 16-token prefill over 256 requests costs in proportion to the query
heads, not the KV heads (64 query heads over 2 KV heads: 308 us; over 1 KV head: 349 us; 32 over 1: 162 us).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simcast.core.kernel_fits import PrefillAttentionFit

PER_HEAD_RULES = ("trtllm_ctx",)
"""Prefill kernel rules whose CTAs hold one query head each (no GQA packing)."""


def tile_kv_heads(fit: PrefillAttentionFit, heads, kv_heads):
    """The "KV heads" the tiled FLOPs and CTA counts are taken over: ``kv_heads`` when a query tile packs the
    GQA group (rule ""), ``heads`` under a per-head rule (each query head its own tiles)."""
    return heads if fit.kernel_rule in PER_HEAD_RULES else kv_heads


def cta_time_s(fit: PrefillAttentionFit, units):
    """The CTAs' fixed time shared over the SMs: ``units · cta_s / sm_count`` (0 when off; array-friendly)."""
    if fit.cta_s <= 0 or fit.sm_count < 1:
        return 0.0
    return np.asarray(units, dtype=float) * fit.cta_s / fit.sm_count


FLASHINFER_FA2 = "flashinfer_fa2"


def rule_tile(fit: PrefillAttentionFit, q_len, heads, kv_heads, head_dim) -> Any:
    """The query tile (rows) a launch runs with: ``fit.tile``, or under ``"flashinfer_fa2"`` FlashInfer's own
    choice from the launch's mean packed query length ``q · heads / kv_heads`` (array-friendly): 128 rows above 64
    packed rows when the head size is below 256, else 64 rows above 16, else 16 (flashinfer-ai/flashinfer
    ``include/flashinfer/utils.cuh``@0d618712 ``FA2DetermineCtaTileQ``, SM80 and newer; called by
    ``PrefillSplitQOKVIndptr`` in ``include/flashinfer/attention/scheduler.cuh``@00b1eec4 with the batch's
    mean packed length), which SGLang's FlashInfer prefill runs on L40S."""
    if fit.kernel_rule != FLASHINFER_FA2:
        return fit.tile
    pq = np.asarray(q_len, float) * np.asarray(heads, float) / np.asarray(kv_heads, float)
    d = np.asarray(head_dim, float)
    return np.where((pq > 64) & (d < 256), 128, np.where(pq > 16, 64, 16))
