"""Cost formulas of the attention ops over a paged KV cache: causal attention (``simcast::attention``),
sliding-window attention (``simcast::attention_sliding``, gpt-oss sliding layers) and chunked local
attention (``simcast::attention_chunked``, Llama-4's RoPE layers).

The engine-fitted attention kernels that replace these with ``--engine`` are :mod:`simcast.cost.kernels.attention`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.specs import Batch
from simcast.cost.ops.op_work import CostContext, OpWork
from simcast.trace.ir import OpRecord, TensorArg, shape_fn

FA_QUERY_TILE = 128  # FlashAttention-2/3 query-block rows; KV is re-read once per query block


def attention(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Causal attention over each request's context + new tokens.

    FLOPs: ``4 · Hq · D · Σ_r (q_r·c_r + q_r(q_r+1)/2)`` (QK^T and PV).
    Bytes: Q read and O written once (activation dtype); K and V read, in the cache's own
    element type (``--kv-cache-dtype``), once per query tile of
    ``FA_QUERY_TILE`` rows (GQA group heads packed into the tile), the causal
    mask skipping blocks past the diagonal (mean visible length ``c + (q+1)/2``).
    ``D`` is the mean of the key and value head sizes when they differ (:mod:`simcast.cost.kernels.diff_kv`).
    """
    q, kc = rec.args[0], rec.args[1]
    dims = ctx.dims
    d, dv = head_dims(rec, dims)
    dm = (d + dv) / 2
    hkv = shape_fn(kc.shape[-2])(*dims)
    hq = shape_fn(q.shape[-1])(*dims) // d
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(kc)
    b_ = ctx.batch
    pairs, tile_tokens = attention_sums(b_.query_lens, b_.context_lens, b_.counts, hq // max(hkv, 1))
    io = 2 * ctx.batch.num_tokens * hq * dm * b
    return OpWork(
        flops=4.0 * hq * dm * pairs, bytes=io + tile_tokens * 2 * hkv * dm * kvb, unit="cube", attn=(hq, hkv, d, dv)
    )


def head_dims(rec: OpRecord, dims) -> tuple[int, int]:
    """(key, value) head sizes of an attention op: its key and value caches' last dimensions (equal unless
    the op states distinct ones, :mod:`simcast.cost.kernels.diff_kv`)."""
    d = shape_fn(rec.args[1].shape[-1])(*dims)
    v = rec.args[2]
    return d, (shape_fn(v.shape[-1])(*dims) if isinstance(v, TensorArg) else d)


VECTORISE_GROUPS = 64  # above this many request groups numpy beats a Python loop


@lru_cache(maxsize=4096)
def attention_sums(
    query_lens: tuple[int, ...], context_lens: tuple[int, ...], counts: tuple[int, ...], group: int
) -> tuple[float, float]:
    """(query-key pairs, KV tokens read summed over query tiles) of a batch, weighted by group counts.

    Per request: pairs ``q·c + q(q+1)/2``; KV tokens ``ceil(q·group/128) · (c + (q+1)/2)``
    (``c + 1`` for a decode). O(groups); vectorised with numpy for many groups.
    """
    if len(query_lens) > VECTORISE_GROUPS:
        qa = np.asarray(query_lens, dtype=np.float64)
        ca = np.asarray(context_lens, dtype=np.float64)
        na = np.asarray(counts, dtype=np.float64)
        tiles_a = np.ceil(qa * group / FA_QUERY_TILE)
        seen = np.where(qa > 1, ca + (qa + 1) / 2, ca + 1)
        return float(np.sum(na * (qa * ca + qa * (qa + 1) / 2))), float(np.sum(na * tiles_a * seen))
    pairs = kv_tokens = 0.0
    for ql, cl, n in zip(query_lens, context_lens, counts):
        pairs += n * (ql * cl + ql * (ql + 1) / 2)
        tiles = math.ceil(ql * group / FA_QUERY_TILE)
        kv_tokens += n * tiles * (cl + (ql + 1) / 2 if ql > 1 else cl + 1)
    return pairs, kv_tokens


def attention_sliding(rec: OpRecord, ctx: CostContext) -> OpWork:
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
    return OpWork(
        flops=4.0 * hq * d * pairs,
        bytes=io + tile_tokens * 2 * hkv * d * kvb,
        unit="cube",
        attn=(hq, hkv, d, d),
        attn_batch=window_batch(ctx.batch, window),
    )


def window_batch(batch: Batch, window: int) -> Batch:
    """The requests a full-attention kernel would run to do ``batch``'s sliding-window attention (tokens).

    With an engine, a sliding layer is timed by the engine's fitted full-attention kernel (the same
    FlashAttention / FlashInfer / TensorRT-LLM kernels run windowed layers, skipping the key tiles left of the
    window) on requests whose keys are capped at the window:

    - a decode reads ``min(c + 1, window)`` keys: ``(1, min(c, window - 1))``;
    - a prefill's first ``max(0, window - c)`` queries are plain causal attention: ``(q1, c)``;
    - each later query sees exactly ``window`` keys: those queries run as pieces of at most ``window``
      queries with context ``window - ceil(q_piece / 2)``, so a piece's mean visible keys
      ``context + (q_piece + 1) / 2`` is the window (to half a token) and its query-key pairs
      ``q_piece · window``.
    """
    q_out: list[int] = []
    c_out: list[int] = []
    n_out: list[int] = []

    def add(q: int, c: int, n: int) -> None:
        q_out.append(q)
        c_out.append(c)
        n_out.append(n)

    for ql, c0, n in zip(batch.query_lens, batch.context_lens, batch.counts):
        if ql == 1:
            add(1, min(c0, window - 1), n)
            continue
        head = min(ql, max(0, window - c0))
        if head:
            add(head, c0, n)
        rest = ql - head
        full, part = divmod(rest, window)
        if full:
            add(window, window - (window + 1) // 2, n * full)
        if part:
            add(part, window - (part + 1) // 2, n)
    return Batch(query_lens=tuple(q_out), context_lens=tuple(c_out), counts=tuple(n_out))


def chunk_pieces(query_len: int, context_len: int, chunk: int) -> list[tuple[int, int]]:
    """A request's new tokens split at chunk boundaries: ``(piece queries, keys of its chunk before it)``.

    vLLM runs chunked local attention as ordinary causal attention over these "virtual requests"
    (``make_local_attention_virtual_batches`` in ``vllm/v1/attention/backends/utils.py``): a query at
    position ``p`` sees the keys ``[chunk·floor(p/chunk), p]``.
    """
    out, pos, end = [], context_len, context_len + query_len
    while pos < end:
        start = pos - pos % chunk
        stop = min(end, start + chunk)
        out.append((stop - pos, pos - start))
        pos = stop
    return out


def attention_chunked(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Chunked local attention: :func:`attention`'s FLOPs and bytes over the batch's chunk pieces
    (:func:`chunk_pieces`); a decode reads at most the chunk, whatever the context."""
    q, kc, chunk = rec.args[0], rec.args[1], int(rec.args[6])
    dims = ctx.dims
    d = shape_fn(kc.shape[-1])(*dims)
    hkv = shape_fn(kc.shape[-2])(*dims)
    hq = shape_fn(q.shape[-1])(*dims) // d
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(kc)
    ql, cl, n = [], [], []
    for q0, c0, k in zip(ctx.batch.query_lens, ctx.batch.context_lens, ctx.batch.counts):  # O(groups)
        for pq, pc in chunk_pieces(q0, c0, chunk):
            ql.append(pq)
            cl.append(pc)
            n.append(k)
    pairs, tile_tokens = attention_sums(tuple(ql), tuple(cl), tuple(n), hq // max(hkv, 1))
    io = 2 * ctx.batch.num_tokens * hq * d * b
    return OpWork(flops=4.0 * hq * d * pairs, bytes=io + tile_tokens * 2 * hkv * d * kvb, unit="cube")
