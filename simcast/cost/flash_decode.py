"""FlashAttention-2's decode launch as vLLM runs it on SM80 (``kernel_rule: "fa2_splitkv"``): how many CTAs a
decode call has and how many keys each one streams, from flash-attn's own split-KV rule.

vLLM's FlashAttention backend calls the varlen entry of its FlashAttention-2 build with a paged KV cache
(vllm-project/flash-attention ``csrc/flash_attn/flash_api.cpp``@04325b67 ``mha_varlen_fwd``). With one query
token and a GQA group > 1 it swaps the group into the query rows (``seqlenq_ngroups_swapped``: ``max_seqlen_q =
group``, ``num_heads = kv_heads``) and only then sizes a split-KV launch (``set_params_splitkv``, "Only apply
split-k for decoding"); vanilla MHA (group 1) is not swapped and every (request, head) CTA walks its whole
context. The split count is ``num_splits_heuristic`` (:func:`fa2_num_splits`) over ``batch · heads ·
ceil(max_seqlen_q / 64)`` CTAs, ``2 · SMs`` slots ("we're using 128 threads per block") and ``ceil(kv /
block_n)`` key blocks, ``block_n`` 256 / 128 / 64 for head sizes <= 64 / <= 128 / larger. The per-CTA fixed and
per-byte times are fitted (:class:`simcast.core.kernel_fits.DecodeAttentionFit` ``wave_s``, ``cta_kv_byte_s``).
"""

from __future__ import annotations

import numpy as np

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.kernel_fits import DecodeAttentionFit

FA2_SPLITKV_RULE = "fa2_splitkv"
FA2_MAX_SPLITS = 128
FA2_FILL = 0.8
FA2_EFFICIENCY = 0.85
FA2_M_BLOCK = 64
FA2_CTAS_PER_SM = 2
"""flash-attn's split-KV constants (``flash_api.cpp``@04325b67): at most 128 splits; no split once the CTAs fill
80 % of the slots; the fewest splits within 85 % of the best wave efficiency; 64 query rows per CTA in the
split-KV kernel; 2 CTAs counted per SM."""


def fa2_block_n(head_dim):
    """Keys per block of the split-KV kernel: 256 for head size <= 64, 128 for <= 128, else 64 (array-friendly)."""
    d = np.asarray(head_dim, float)
    return np.where(d <= 64, 256.0, np.where(d <= 128, 128.0, 64.0))


def fa2_num_splits(ctas, slots: int, n_blocks):
    """flash-attn's ``num_splits_heuristic`` (array-friendly): 1 when ``ctas >= 0.8 · slots``; else, over
    ``s = 1..min(128, slots, n_blocks)`` splits that change the blocks per split (``ceil(n / s) != ceil(n / (s -
    1))``), the wave efficiency ``w / ceil(w)`` with ``w = ctas · s / slots``; the fewest splits within 85 % of
    the best."""
    c, n = np.broadcast_arrays(np.asarray(ctas, float), np.asarray(n_blocks, float))
    s = np.arange(1.0, FA2_MAX_SPLITS + 1.0)
    cc, nn = c[..., None], n[..., None]
    ok = (s <= np.minimum(min(FA2_MAX_SPLITS, slots), nn)) & (
        (s == 1) | (np.ceil(nn / s) != np.ceil(nn / np.maximum(s - 1, 1)))
    )
    w = cc * s / slots
    eff = np.where(ok, w / np.ceil(w), 0.0)
    good = ok & (eff >= FA2_EFFICIENCY * eff.max(axis=-1, keepdims=True))
    first = np.where(good.any(axis=-1), np.argmax(good, axis=-1) + 1.0, 1.0)
    return np.where(c >= FA2_FILL * slots, 1.0, first)


def fa2_launch(fit: DecodeAttentionFit, batch, kv_len, heads, kv_heads, head_dim):
    """(CTAs, keys per CTA) of a decode launch under ``"fa2_splitkv"`` (array-friendly)."""
    b, s, h, hkv, d = (np.asarray(v, float) for v in (batch, kv_len, heads, kv_heads, head_dim))
    g = h / hkv
    swapped = (g > 1) & (d % 8 == 0)
    rows = np.where(swapped, hkv * np.ceil(g / FA2_M_BLOCK), h)  # CTAs per request before splitting
    n_blocks = np.ceil(s / fa2_block_n(d))
    splits = np.where(swapped, fa2_num_splits(b * rows, FA2_CTAS_PER_SM * fit.sm_count, n_blocks), 1.0)
    return b * rows * splits, np.minimum(s, np.ceil(n_blocks / splits) * fa2_block_n(d))


def fa2_waves_s(fit: DecodeAttentionFit, batch, kv_len, heads, kv_heads, head_dim):
    """(CTAs, seconds of their waves): ``ceil(CTAs / (2 · SMs)) · (wave_s + keys per CTA · 2 · head_dim · KV bytes ·
    cta_kv_byte_s)``: one CTA streams its keys at a bounded rate (a single request's long context on one CTA
    per head runs at ~20 GB/s per CTA in vLLM's A100 table)."""
    units, tokens = fa2_launch(fit, batch, kv_len, heads, kv_heads, head_dim)
    row = 2 * np.asarray(head_dim, float) * DTYPE_BYTES[fit.dtype]
    waves = np.ceil(units / (FA2_CTAS_PER_SM * fit.sm_count))
    return units, waves * (fit.wave_s + tokens * row * fit.cta_kv_byte_s)
