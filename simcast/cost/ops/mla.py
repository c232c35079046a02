"""Cost formulas of the multi-head latent attention ops (DeepSeek MLA, :mod:`simcast.trace.moe`):
the latent cache write and the attention over the compressed cache."""

from __future__ import annotations

import math

from simcast.core.dtypes import DTYPE_BYTES
from simcast.cost.ops.attention_ops import FA_QUERY_TILE, attention_sums
from simcast.cost.ops.op_work import CostContext, OpWork, nbytes
from simcast.trace.ir import OpRecord, shape_fn


def mla_cache_write(rec: OpRecord, ctx: CostContext) -> OpWork:
    read = nbytes(rec.args[0], ctx.dims) + nbytes(rec.args[1], ctx.dims)
    moved = read + read * ctx.cache_bytes(rec.args[2]) / DTYPE_BYTES[rec.args[0].dtype]
    return OpWork(flops=0.0, bytes=moved, unit="vec")


def mla_attention(rec: OpRecord, ctx: CostContext) -> OpWork:
    """MLA as vLLM/SGLang run it.

    Prefill rows (q > 1): the latent of context + new tokens is decompressed by kv_b
    (``2·tokens·kv_lora·heads·(nope+v)``), then causal attention with qk dim ``nope+rope``
    and v dim ``v``. Decode rows (q = 1): weight absorption — q_nope·W_UK per head
    (``2·heads·nope·kv_lora``), attention over the latent as one shared KV head of width
    ``kv_lora + rope`` (scores) and ``kv_lora`` (values), then ·W_UV (``2·heads·kv_lora·v``).
    """
    q, cache = rec.args[0], rec.args[1]
    heads, nope, rope, v = (int(a) for a in rec.args[5:9])
    dims = ctx.dims
    lat = shape_fn(cache.shape[-1])(*dims) - rope
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(cache)
    flops = bytes_ = 0.0
    bt = ctx.batch
    dq = ctx.decode_query_len  # speculative verify rows (q <= k + 1) run the absorbed decode kernel too
    pre = [(ql, cl, n) for ql, cl, n in zip(bt.query_lens, bt.context_lens, bt.counts) if ql > dq]
    dec = [(ql, cl, n) for ql, cl, n in zip(bt.query_lens, bt.context_lens, bt.counts) if ql <= dq]
    if pre:
        qs, cs, ns = (tuple(p[i] for p in pre) for i in range(3))
        pairs, tile_tokens = attention_sums(qs, cs, ns, 1)
        q_tok = sum(ql * n for ql, n in zip(qs, ns))
        kv_tokens = q_tok + sum(cl * n for cl, n in zip(cs, ns))
        flops += 2.0 * kv_tokens * lat * heads * (nope + v) + 2.0 * heads * (nope + rope + v) * pairs
        bytes_ += (
            kv_tokens * (lat + rope) * kvb
            + kv_tokens * heads * (nope + v + nope + rope) * b * 2
            + q_tok * heads * (nope + rope + v) * b
            + heads * (nope + v) * lat * b
        )
    if dec:  # per request: q rows absorbed, query i attends to cl + i keys; the latent read once per head tile
        r = sum(ql * n for ql, _, n in dec)
        pairs_d = sum(n * (ql * cl + ql * (ql + 1) / 2) for ql, cl, n in dec)
        flops += 2.0 * r * heads * (nope * lat + lat * v) + 2.0 * heads * pairs_d * ((lat + rope) + lat)
        reads = sum(n * math.ceil(heads * ql / FA_QUERY_TILE) * (cl + ql) for ql, cl, n in dec)  # FlashMLA tiles
        bytes_ += reads * (lat + rope) * kvb + r * heads * (nope + rope + v) * b + heads * (nope + v) * lat * b
    return OpWork(flops=flops, bytes=bytes_, unit="cube")
