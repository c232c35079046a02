"""The bytes an attention call moves and the share of them L2 serves (shared by the decode forms).

:func:`decode_bytes` counts K and V of every request (KV dtype) plus q read and o written; :func:`l2_factor`
turns a working set into a bandwidth multiple (:func:`simcast.cost.kernels.curves.l2_multiple`).
"""

from __future__ import annotations

import numpy as np

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.kernel_fits import DecodeAttentionFit, PrefillAttentionFit
from simcast.cost.kernels.curves import l2_multiple


def decode_bytes(
    batch, kv_len, heads, kv_heads, head_dim, dtype: str, max_group: int = 0, group_share: float = 1.0, reads=None
):
    """K and V of every request read once (KV dtype) + q read and o written (2 bytes).

    With ``max_group`` > 0 and a GQA group larger than it, K and V are read
    ``max(1, group / group_share)`` times; ``reads`` (array-friendly) overrides that count
    (:func:`decode_kernel` gives it per launch).
    """
    b, s, h, hkv, d = (np.asarray(v, float) for v in (batch, kv_len, heads, kv_heads, head_dim))
    if reads is None:
        reads = np.where(h / hkv > max_group, np.maximum(1.0, h / hkv / group_share), 1.0) if max_group else 1.0
    return b * (2 * s * hkv * d * DTYPE_BYTES[dtype] * reads + 2 * h * d * 2)


def l2_factor(fit: DecodeAttentionFit | PrefillAttentionFit, nbytes):
    """The bandwidth multiple of a decode or prefill call's working set served from L2 (1 when off): the smooth or, with
    ``l2_edge`` > 0, the capacity form of :func:`simcast.cost.kernels.curves.l2_multiple`."""
    return l2_multiple(nbytes, fit.l2_boost, fit.l2_half_bytes, fit.l2_edge)
