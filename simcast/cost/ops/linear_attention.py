"""Cost formulas of Gated DeltaNet linear attention (:mod:`simcast.trace.linear_attention`, Qwen3-Next).

The gated delta rule, per value head of state ``S`` (``dk x dv``), kernels of fla as vLLM vendors them
(``vllm/model_executor/layers/fla/ops/``):

- **decode** (``fused_recurrent.py``, ``fused_recurrent_gated_delta_rule_fwd_kernel``): per token
  ``S *= exp(g)`` (``dk·dv``), ``v -= S^T k`` (``2·dk·dv``), ``S += k ⊗ β v`` (``2·dk·dv``), ``o = S^T q``
  (``2·dk·dv``): ``7·dk·dv`` FLOPs; the state is loaded once per request and stored once
  (``2·dk·dv`` fp32 elements), whatever the context: a decode's cost does not grow with context.
- **prefill** (``chunk.py`` ``chunk_gated_delta_rule_fwd``, chunk ``C`` = 64): per chunk ``K Kᵀ`` and the
  WY form ``w = A·K``, ``u = A·V`` (``2C²dk + 2C²dk + 2C²dv``), the state recurrence ``chunk_delta_h.py``
  (``v_new = u - w S``, ``S = S + Kᵀ v_new``: ``4C·dk·dv``) and the output ``chunk_o.py``
  (``o = Q S + (Q Kᵀ ⊙ M) v_new``: ``2C·dk·dv + 2C²dk + 2C²dv``): per token ``6·dk·dv + C·(6·dk + 4·dv)``
  FLOPs (the triangular solve, ``O(C²)`` per chunk and head, is left out). The forward is a pipeline of
  :data:`GDN_CHUNK_KERNELS` launches, each reading its inputs from HBM (:func:`chunk_bytes_per_token_head`):
  ``chunk_local_cumsum`` (g), ``chunk_scaled_dot_kkt_fwd`` (reads k, writes ``A``: ``C`` fp32 per token),
  ``solve_tril`` (reads ``A``, writes its inverse in the activation dtype), ``recompute_w_u_fwd`` (reads k, v
  and ``A⁻¹``, writes w and u), ``chunk_gated_delta_rule_fwd_h`` (reads k, w, u; writes ``v_new`` and each
  chunk's state ``h = k.new_empty(B, NT, H, K, V)``) and ``chunk_fwd_o`` (reads q, k, ``v_new`` and h; writes
  o); the request's state is read and written in fp32 once. Per token and value head that is q once, k four
  times, v once, w, u and ``v_new`` twice each, o once (``(7·dk + 6·dv)`` elements), ``A`` written and read in
  fp32 and its inverse in the activation dtype (``C·(8 + 2·b)`` bytes), and per chunk its state h written and
  read (``2·dk·dv`` elements, a request's last chunk counted whole); q, k and v's reads beyond the op's own
  inputs are counted per value head (vLLM repeats q and k to the value heads before the kernel when ``Hv > Hk``).

Not modelled (docs/accuracy.md, "New kernel kinds"): the state recurrence ``chunk_delta_h.py`` walks each request's
chunks in order with one CTA per request, value head and value block, so a prefill of few requests and heads leaves
SMs idle; and the kernels' intermediates (``A``, w, u, ``v_new``, h) may stay in L2 between launches.

Which path runs is the request's: a query of one token is a decode, more is a prefill (a mixed batch sums).
"""

from __future__ import annotations

import math

from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.linear_attention import SSM_STATE_BYTES
from simcast.cost.ops.op_work import CostContext, OpWork, io_bytes, numel
from simcast.trace.ir import OpRecord, shape_fn

GDN_CHUNK = 64
"""fla's chunk length for the chunked gated delta rule (``chunk_local_cumsum(g, chunk_size=64)``)."""


GDN_CHUNK_KERNELS = 6
"""Kernels of fla's chunked forward (``chunk.py`` ``chunk_gated_delta_rule_fwd``): cumsum, kkt, solve_tril,
recompute_w_u, fwd_h, fwd_o."""


def chunk_bytes_per_token_head(dk: int, dv: int, b: float) -> float:
    """HBM bytes the chunked pipeline moves per token and value head beyond the op's inputs and output and the
    chunk states (module docstring): k re-read three times, w, u and ``v_new`` written and read
    (``(3·dk + 2·dk + 4·dv)·b``), ``A`` in fp32 and its inverse (``C·(8 + 2·b)``)."""
    return (5.0 * dk + 4.0 * dv) * b + GDN_CHUNK * (8.0 + 2.0 * b)


def gated_delta_rule(rec: OpRecord, ctx: CostContext) -> OpWork:
    """FLOPs, bytes and launches of the gated delta rule over the batch (module docstring): the chunked
    pipeline's :data:`GDN_CHUNK_KERNELS` launches when the batch holds a prefill, one recurrent launch when it
    holds a decode."""
    v = rec.args[2]
    dk, dv = int(rec.args[5]), int(rec.args[6])
    dims = ctx.dims
    hv = shape_fn(v.shape[-1])(*dims) // dv
    b = DTYPE_BYTES[v.dtype]
    decode_tokens = prefill_tokens = chunks = 0.0
    for ql, n in zip(ctx.batch.query_lens, ctx.batch.counts):
        if ql == 1:
            decode_tokens += n
        else:
            prefill_tokens += n * ql
            chunks += n * math.ceil(ql / GDN_CHUNK)
    per_decode = 7.0 * dk * dv
    per_prefill = 6.0 * dk * dv + GDN_CHUNK * (6.0 * dk + 4.0 * dv)
    flops = hv * (decode_tokens * per_decode + prefill_tokens * per_prefill)
    state = ctx.batch.num_requests * hv * 2 * dk * dv * SSM_STATE_BYTES  # read at start, written at end
    pipeline = prefill_tokens * hv * chunk_bytes_per_token_head(dk, dv, b)
    chunk_states = chunks * hv * 2 * dk * dv * b  # each chunk's state written by fwd_h, read by fwd_o
    launches = (GDN_CHUNK_KERNELS if prefill_tokens else 0) + (1 if decode_tokens else 0)
    return OpWork(
        flops=flops,
        bytes=io_bytes(rec, dims) + state + pipeline + chunk_states,
        unit="cube",
        launches=float(max(launches, 1)),
    )


def causal_conv1d(rec: OpRecord, ctx: CostContext) -> OpWork:
    """``2 · taps`` FLOPs per output element; x read, out written, weights and each request's conv window
    (``(taps - 1) x C``) read and written once."""
    x, w = rec.args[0], rec.args[1]
    dims = ctx.dims
    c, taps = (shape_fn(e)(*dims) for e in w.shape)
    window = ctx.batch.num_requests * 2 * (taps - 1) * c * DTYPE_BYTES[x.dtype]
    return OpWork(flops=2.0 * taps * numel(x, dims), bytes=io_bytes(rec, dims) + window, unit="vec")
