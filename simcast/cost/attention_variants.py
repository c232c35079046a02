"""Cost formulas of attention variants beside the causal ``simcast::attention`` of
:mod:`simcast.cost.compute`: sliding-window attention (gpt-oss sliding layers)."""

from __future__ import annotations

import math

from simcast.core.specs import DTYPE_BYTES
from simcast.cost.compute import FA_QUERY_TILE, CostContext, OpWork, formula
from simcast.trace.ir import OpRecord, shape_fn


@formula("simcast::attention_sliding")
def _attention_sliding(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Causal attention with each query seeing at most ``window`` keys: context capped at the window."""
    q, kc, window = rec.args[0], rec.args[1], int(rec.args[6])
    dims = ctx.dims
    d = shape_fn(kc.shape[-1])(*dims)
    hkv = shape_fn(kc.shape[-2])(*dims)
    hq = shape_fn(q.shape[-1])(*dims) // d
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(kc)
    pairs = tile_tokens = 0.0
    for ql, c0, n in zip(ctx.batch.query_lens, ctx.batch.context_lens, ctx.batch.counts):  # O(groups)
        cl = min(c0, window)
        vis = min(ql, window)  # a long prefill: each query sees <= window keys
        pairs += n * (ql * min(cl + (ql + 1) / 2, window) if ql > 1 else min(cl + 1, window))
        tiles = math.ceil(ql * (hq // max(hkv, 1)) / FA_QUERY_TILE)
        tile_tokens += n * (tiles * min(cl + vis, window + FA_QUERY_TILE) if ql > 1 else min(cl + 1, window))
    io = 2 * ctx.batch.num_tokens * hq * d * b
    return OpWork(flops=4.0 * hq * d * pairs, bytes=io + tile_tokens * 2 * hkv * d * kvb, unit="cube")
