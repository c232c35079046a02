"""The engines' fitted GEMM and attention kernels over many batches at once (numpy arrays).

:func:`gemm_many` and :func:`attention_many` pick ``engine``'s fit (:func:`simcast.cost.kernels.engine_cost.pick`) and
evaluate the one implementation of each kernel's time for ``N`` batches in one pass:
:func:`simcast.cost.kernels.gemm.gemm_envelope` (the padding envelope in M included) and
:func:`simcast.cost.kernels.attention_launch.attention_launch` (decode and prefill parts, the decode context envelope
and the prefill query-tile lookahead). :func:`simcast.cost.kernels.engine_cost.gemm_s` and
:func:`simcast.cost.kernels.engine_cost.attention_s` call the same two functions with one row.
"""

from __future__ import annotations

import numpy as np

from simcast.core.device import DeviceSpec
from simcast.cost.kernels.attention_launch import attention_launch
from simcast.cost.kernels.engine_cost import pick
from simcast.cost.kernels.gemm import PEAK_DTYPE, gemm_envelope
from simcast.cost.ops.batches import Batches


def gemm_many(
    dev: DeviceSpec, engine: str | None, dtype: str, m: np.ndarray, n: int, k: int, captured: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(seconds, compute|memory|latency) of a GEMM on ``m[i]`` rows for each ``i``; None without a fit.

    :func:`simcast.cost.kernels.gemm.gemm_envelope` for every row count: the least time over ``m`` and the first row
    of every later M tile up to the end of the wave after ``m``'s; the bound at ``m`` itself.
    """
    fit, _ = pick(dev, engine, "gemm", dtype)
    if fit is None:
        return None
    return gemm_envelope(fit, dev.matmul_peak(PEAK_DTYPE[fit.dtype]), dev.hbm_bw_bytes_per_s, m, n, k, captured)


def attention_many(
    dev: DeviceSpec,
    engine: str | None,
    dtype: str,
    bs: Batches,
    heads: int,
    kv_heads: int,
    head_dim: int,
    v_head_dim: int = 0,
    phase: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seconds, bound, has a fit) of one attention launch per batch with ``engine``'s fits for KV dtype ``dtype``
    (:func:`simcast.cost.kernels.attention_launch.attention_launch`).

    Where ``has a fit`` is False (a part of that batch has no engine fit) the caller uses the roofline.
    """
    dec_fit, _ = pick(dev, engine, "decode", dtype)
    pre_fit, _ = pick(dev, engine, "prefill", dtype)
    return attention_launch(dev, dec_fit, pre_fit, dtype, bs, heads, kv_heads, head_dim, v_head_dim, phase)
