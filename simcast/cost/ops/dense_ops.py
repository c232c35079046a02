"""Cost formulas of a dense decoder layer's ops (:mod:`simcast.trace.ops`): linear layers, norms and
activations, gathers and scatters, sampling, and the TP collectives.

Bytes are what a kernel really addresses: each input read once and each output written once
(fused kernels are single ops in the trace), a stride-0 broadcast dim counted once.
"""

from __future__ import annotations

from simcast.core.dtypes import DTYPE_BYTES
from simcast.cost.comm import time as comm
from simcast.cost.kernels import engine_cost
from simcast.cost.ops.op_work import CostContext, OpWork, io_bytes, nbytes, numel
from simcast.trace.ir import OpRecord, TensorArg, shape_fn


def linear(rec: OpRecord, ctx: CostContext) -> OpWork:
    x, w = rec.args[0], rec.args[1]
    dims = ctx.dims
    m = numel(x, dims) // shape_fn(x.shape[-1])(*dims)
    n, k = (shape_fn(e)(*dims) for e in w.shape)
    bias = m * n if len(rec.args) > 2 and isinstance(rec.args[2], TensorArg) else 0
    return OpWork(flops=2.0 * m * n * k + bias, bytes=io_bytes(rec, dims), unit="cube", mnk=(m, n, k))


def elementwise(flops_per_out: float):
    def fn(rec: OpRecord, ctx: CostContext) -> OpWork:
        out = sum(numel(o, ctx.dims) for o in rec.outputs)
        return OpWork(flops=flops_per_out * out, bytes=io_bytes(rec, ctx.dims), unit="vec")

    return fn


rms_norm = elementwise(4.0)  # x², mean, rsqrt·x, ·w
fused_add_rms_norm = elementwise(3.0)  # per output (2 outputs): add + norm
silu_and_mul = elementwise(5.0)  # sigmoid (~3), ·x, ·up
rope = elementwise(3.0)  # 2 mul + add per element, cos/sin cached
gated_rms_norm = elementwise(8.0)  # RMSNorm (4) times SiLU(z) (~4)
sigmoid_mul = elementwise(4.0)  # sigmoid (~3), ·x


def data_movement(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Gathers and scatters: the rows touched are read and written once."""
    dims = ctx.dims
    if rec.op == "simcast::kv_cache_write":  # reads k, v; writes them into the cache in its own element type
        read = sum(nbytes(a, dims) for a in rec.args[:2])
        moved = read + read * ctx.cache_bytes(rec.args[2]) / DTYPE_BYTES[rec.args[0].dtype]
    elif rec.op == "simcast::vocab_embedding":  # ids + gathered rows + output
        moved = nbytes(rec.args[0], dims) + 2 * nbytes(rec.outputs[0], dims)
    else:  # index_select: rows selected + indices + output
        moved = 2 * nbytes(rec.outputs[0], dims) + nbytes(rec.args[2], dims)
    return OpWork(flops=0.0, bytes=moved, unit="vec")


def sample(rec: OpRecord, ctx: CostContext) -> OpWork:
    """Greedy/top-k sampling: logits read once (fp32 softmax ≈ 5 FLOPs/elem)."""
    n = numel(rec.args[0], ctx.dims)
    return OpWork(flops=5.0 * n, bytes=nbytes(rec.args[0], ctx.dims), unit="vec")


def all_reduce(rec: OpRecord, ctx: CostContext) -> OpWork:
    size = nbytes(rec.args[0], ctx.dims)
    n = int(rec.args[1])
    eng = engine_cost.all_reduce_s(ctx.device, ctx.engine, n, size, ctx.tp_path.cross_node)
    return OpWork(
        flops=0.0,
        bytes=size,
        unit="comm",
        comm_s=eng[0] if eng else comm.all_reduce_s(size, n, ctx.tp_path, ctx.collective_algorithm),
    )


def all_gather(rec: OpRecord, ctx: CostContext) -> OpWork:
    size = nbytes(rec.outputs[0], ctx.dims)
    return OpWork(flops=0.0, bytes=size, unit="comm", comm_s=comm.all_gather_s(size, int(rec.args[1]), ctx.tp_path))


def dp_comm(rec: OpRecord, ctx: CostContext) -> OpWork:
    """SGLang's row movements of a dense MLP / LM head outside the attention-TP group
    (:func:`simcast.trace.ops.dp_comm`): over the stage's ranks (``over`` "dp": the MoE group's path, which
    spans them) or the attention-TP group.
    ``scatter_rows`` is a local copy (rows read and written once); ``all_reduce`` as the TP all-reduce's fallback
    formula; a reduce-scatter moves what an all-gather of its input does (ring: ``n-1`` steps of ``bytes/n``);
    the gathers are all-gathers of their output (SGLang's ``dp_gather`` all-gathers the padded buffer, or
    all-reduces it when the DP ranks' token counts are uneven: the all-gather is the cheaper, labelled bound).
    Gathered rows count every DP rank (the batch on each, as the MoE layers assume)."""
    x, kind, n, over = rec.args[0], rec.args[2], int(rec.args[3]), rec.args[5]
    dims = ctx.dims
    out, inp = nbytes(rec.outputs[0], dims), nbytes(x, dims)
    if kind == "scatter_rows":
        return OpWork(flops=0.0, bytes=2 * out, unit="vec")
    path = ctx.moe_path if over == "dp" and ctx.moe_path is not None else ctx.tp_path
    if kind == "all_reduce":
        t = comm.all_reduce_s(inp, n, path, ctx.collective_algorithm)
    else:
        t = comm.all_gather_s(inp if kind == "reduce_scatter_rows" else out, n, path)
    return OpWork(flops=0.0, bytes=max(inp, out), unit="comm", comm_s=t)
