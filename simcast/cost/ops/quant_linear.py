"""Cost formula of ``simcast::quant_linear``: a GEMM with fp8 (block-scaled), mxfp4 or nvfp4 weights.

Bytes: the weights in their format (scales included, :data:`simcast.core.dtypes.WEIGHT_FORMAT_BYTES`)
plus the activations in and out (16-bit: fp8/fp4 kernels quantise them inside); FLOPs ``2·M·N·K`` at the
peak of the GEMM's compute dtype (:func:`simcast.core.dtypes.gemm_compute_dtype`: fp4 formats run W4A4 at
the fp4 peak on a device with fp4 tensor cores, weight-only at the model dtype's elsewhere).
"""

from __future__ import annotations

from simcast.core.dtypes import DTYPE_BYTES, WEIGHT_FORMAT_BYTES, gemm_compute_dtype
from simcast.cost.ops.op_work import CostContext, OpWork, numel
from simcast.trace.ir import OpRecord, shape_fn


def quant_linear(rec: OpRecord, ctx: CostContext) -> OpWork:
    x, w, fmt = rec.args[0], rec.args[1], rec.args[2]
    dims = ctx.dims
    m = numel(x, dims) // shape_fn(x.shape[-1])(*dims)
    n, k = (shape_fn(e)(*dims) for e in w.shape)
    ab = DTYPE_BYTES[x.dtype]
    bytes_ = n * k * WEIGHT_FORMAT_BYTES[fmt] + m * (k + n) * ab
    dtype = gemm_compute_dtype(fmt, x.dtype, ctx.device.has_fp4)
    return OpWork(flops=2.0 * m * n * k, bytes=bytes_, unit="cube", mnk=(m, n, k), dtype=dtype)
