"""FlashAttention-2's decode launch as vLLM runs it on SM80 (``kernel_rule: "fa2_varlen"``): which launches
split the context, how many CTAs they have, and the copies around a GQA launch.

vLLM's FlashAttention backend calls the varlen entry of its FlashAttention-2 build with a paged KV cache
(vllm-project/flash-attention ``csrc/flash_attn/flash_api.cpp``@04325b67 ``mha_varlen_fwd``). With one query
token and a GQA group > 1 (head size a multiple of 8) it swaps the group into the query rows
(``seqlenq_ngroups_swapped``: ``max_seqlen_q = group``, ``num_heads = kv_heads``, one CTA per 64 query rows) and
only then sizes a split-KV launch ("Only apply split-k for decoding"); vanilla MHA (group 1) is not swapped, so
every (request, head) CTA walks its whole context. The swapped launch's split is the default form's (chunks of
the fitted ``split_tokens``): flash-attn's ``num_splits_heuristic`` itself was tried and fitted worse (vLLM's
A100 table, fitting half: median 6.0 % / p90 21.4 % against 3.8 % / 15.6 %) and its jumps in the split count
make the time fall when a request or a key is added. The swap costs copies outside the kernel
(:func:`fa2_copies_s`). The CTAs are counted over ``2 · SMs`` slots, as flash-attn does ("we're using 128 threads
per block").
"""

from __future__ import annotations

import numpy as np

from simcast.core.kernel_fits import DecodeAttentionFit

FA2_VARLEN_RULE = "fa2_varlen"
FA2_M_BLOCK = 64
FA2_CTAS_PER_SM = 2
"""flash-attn's split-KV kernel (``flash_api.cpp``@04325b67 ``set_params_splitkv``): 64 query rows per CTA; 2 CTAs
counted per SM."""


def fa2_swapped(heads, kv_heads, head_dim):
    """Whether ``mha_varlen_fwd`` folds the GQA group into the query rows: group > 1, head size a multiple of 8."""
    h, hkv, d = (np.asarray(v, float) for v in (heads, kv_heads, head_dim))
    return (h / hkv > 1) & (d % 8 == 0)


def fa2_launch(fit: DecodeAttentionFit, batch, kv_len, heads, kv_heads, head_dim):
    """(CTAs, waves) of a decode launch under ``"fa2_varlen"`` (array-friendly): swapped launches ``batch ·
    kv_heads · ceil(group / 64) · max(1, kv / split_tokens)`` CTAs, vanilla MHA ``batch · heads``; their waves over
    ``2 · SMs`` slots."""
    b, s, h, hkv = (np.asarray(v, float) for v in (batch, kv_len, heads, kv_heads))
    swapped = fa2_swapped(heads, kv_heads, head_dim)
    rows = np.where(swapped, hkv * np.ceil(h / hkv / FA2_M_BLOCK), h)  # CTAs per request before splitting
    units = b * rows * np.where(swapped, np.maximum(1.0, s / fit.split_tokens), 1.0)
    return units, np.ceil(units / (FA2_CTAS_PER_SM * fit.sm_count))


def fa2_copies_s(fit: DecodeAttentionFit, hbm_bw_bytes_per_s: float, batch, heads, kv_heads, head_dim):
    """Seconds of the copies around a swapped (GQA) launch under ``"fa2_varlen"``, 0 otherwise (array-friendly).

    ``mha_varlen_fwd`` reshapes q ``(b, kv_heads, group, d) -> transpose(1, 2) -> (b · group, kv_heads, d)``: a
    view only when ``b == 1`` or ``kv_heads == 1`` (PyTorch's reshape copies when the merged dimensions are not
    contiguous), else a copy (``gqa_copy_s`` + the query's bytes read and written); the output is always copied
    back to the caller's layout (``out_.view(...).copy_(out)``: ``gqa_swap_s`` + its bytes read and written).
    Bytes move at ``memory`` of the bandwidth; 2-byte query and output.
    """
    if fit.kernel_rule != FA2_VARLEN_RULE:
        return 0.0
    b, h, hkv, d = (np.asarray(v, float) for v in (batch, heads, kv_heads, head_dim))
    swapped = fa2_swapped(h, hkv, d)
    move = 2.0 * b * h * d * 2 / (hbm_bw_bytes_per_s * fit.memory)  # one tensor read and written
    q_copy = swapped & (b >= 2) & (hkv >= 2)
    return np.where(swapped, fit.gqa_swap_s + move, 0.0) + np.where(q_copy, fit.gqa_copy_s + move, 0.0)
