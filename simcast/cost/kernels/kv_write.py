"""The new token's KV-cache write as a launch of its own, next to the decode attention kernel.

vLLM writes each layer's new keys and values into the paged cache with ``reshape_and_cache_flash`` (one
launch; with an fp8 cache it also quantises), and since vllm-project/vllm PR 25954 (merged for the
FlashAttention backend, 2025-10) that write is no longer inside ``FlashAttentionImpl.forward`` but a separate
``do_kv_cache_update`` call the attention layer makes every step (``forward_includes_kv_cache_update =
False``). So the engine pays it on every layer and step, and a measured-kernel table shows it or not by how its
collector timed the call: ai-dynamo/aiconfigurator's vLLM collector times ``impl.forward`` alone up to its
0.19 tables (``collector/vllm/collect_attn.py``@7a4ca384 ``run``) and ``do_kv_cache_update`` + ``forward``
from its 0.24 upgrade on (@d5bad971 ``run``); its 0.14 tables predate the split (the write inside
``forward``). The fit's ``kv_write_s`` / ``kv_write_elem_s`` (:class:`simcast.core.kernel_fits.DecodeAttentionFit`)
carry that launch where the kernel's own rows lack it (:data:`simcast.engines.vllm.KV_CACHE_WRITE`).

Form: a fixed time per launch plus a time per element written, ``batch · kv_heads · (head_dim + v_head_dim)``
(keys and values of one new token per request): the launch dominates below ~1 MB (H100: ~1.8 us bf16,
~2.8 us fp8), the scattered block writes above it.
"""

from __future__ import annotations

import numpy as np

from simcast.core.kernel_fits import DecodeAttentionFit


def kv_write_elements(batch, kv_heads, head_dim, v_head_dim=None):
    """Elements of the new keys and values a decode step writes (array-friendly): ``batch · kv_heads · (d + dv)``."""
    d = np.asarray(head_dim, float)
    dv = d if v_head_dim is None else np.asarray(v_head_dim, float)
    return np.asarray(batch, float) * np.asarray(kv_heads, float) * (d + dv)


def kv_write_s(fit: DecodeAttentionFit, batch, kv_heads, head_dim, v_head_dim=None):
    """Seconds of the write launch: ``kv_write_s + kv_write_elem_s · elements`` (0 when the fit has none)."""
    if not (fit.kv_write_s or fit.kv_write_elem_s):
        return 0.0
    return fit.kv_write_s + fit.kv_write_elem_s * kv_write_elements(batch, kv_heads, head_dim, v_head_dim)
