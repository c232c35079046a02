"""Op costs of many batches in one pass: the formulas of :mod:`simcast.cost.ops.compute` on numpy arrays.

A layout's concurrency frontier (the optimizer's sweep) or a replay's step shapes ask for the same
stage's ops on many batches. :func:`cost_ops_many` evaluates each op of a stage trace once for all of
them: the symbolic dims ``T, R, S`` become arrays over the batches, the request groups of every batch
are laid end to end (:class:`Batches`), and the per-op formulas, the roofline and the engines' fitted
GEMM and attention kernels (:mod:`simcast.cost.kernels.batched_kernels`) run elementwise. Nothing here is a
new formula: the dims-only formulas of ``OP_FORMULAS`` are called as they are with array dims, the
kernel forms of :mod:`simcast.cost.kernels.gemm` and :mod:`simcast.cost.kernels.attention` are array-friendly, the TP
collectives are costed once per distinct message size with :mod:`simcast.cost.comm.time`'s own functions, and
the ops without an array form (MoE experts and all-to-all, MLA and sliding-window attention) are costed
per batch by :func:`simcast.cost.ops.compute.op_cost` itself. ``tests/cost/test_batched_cost.py`` holds the two
paths equal (to 1e-9 relative) on every shipped model family and engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, cast

import numpy as np

from simcast.core.device import DeviceSpec
from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.specs import Batch
from simcast.cost.comm import time as comm
from simcast.cost.kernels import batched_kernels as bk
from simcast.cost.kernels import engine_cost
from simcast.cost.ops.attention_ops import FA_QUERY_TILE, head_dims
from simcast.cost.ops.batches import Batches
from simcast.cost.ops.compute import _ENGINE_BOUNDS, gemm_family, launch_s, op_cost, roofline_parts
from simcast.cost.ops.formulas import OP_FORMULAS
from simcast.cost.ops.op_work import CostContext, OpCost, OpWork, attention_fit_dtype, io_bytes, nbytes
from simcast.trace.ir import OpRecord, TensorArg, shape_fn


@dataclass(frozen=True, kw_only=True)
class ArrayContext(CostContext):
    """A :class:`CostContext` whose dims are arrays over :attr:`many` (``batch`` is its first batch, which
    the dims-only formulas never read)."""

    many: Batches = field(default=None)  # type: ignore[assignment]
    captured_each: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # per batch (not ``captured``)

    @property
    def dims(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # type: ignore[override]
        return self.many.dims


@dataclass(kw_only=True)
class OpArrays:
    """One op of a stage over ``N`` batches: per-instance FLOPs, bytes, seconds and bound, arrays of ``N``."""

    op: str
    scope: str
    count: int
    flops: np.ndarray
    bytes: np.ndarray
    time_s: np.ndarray
    bound: np.ndarray  # of str: Cube | Vec | Mem | Comm
    _lists: tuple[list, list, list, list] | None = field(default=None, repr=False)

    def cost(self, i: int) -> OpCost:
        """Batch ``i``'s :class:`OpCost` (Python numbers, as the scalar path makes them: ints stay ints)."""
        if self._lists is None:
            self._lists = (self.flops.tolist(), self.bytes.tolist(), self.time_s.tolist(), self.bound.tolist())
        fl, by, t, b = self._lists
        return OpCost(op=self.op, scope=self.scope, count=self.count, flops=fl[i], bytes=by[i], time_s=t[i], bound=b[i])


ARRAY_FORMULA_OPS = frozenset(
    {
        "linear",
        "index_select",
        "simcast::rms_norm",
        "simcast::fused_add_rms_norm",
        "simcast::silu_and_mul",
        "simcast::rope",
        "simcast::kv_cache_write",
        "simcast::vocab_embedding",
        "simcast::sample",
        "simcast::moe_topk",
        "simcast::quant_linear",
        "simcast::mla_cache_write",
    }
)
"""Ops whose ``OP_FORMULAS`` entry reads only the dims ``T, R, S`` (and constants): called with array dims."""
COMM_OPS = frozenset({"simcast::all_reduce", "simcast::all_gather"})
"""Collectives: their time is a function of the message size alone, costed once per distinct size."""


def _vec(x: object, n: int) -> np.ndarray:
    """``x`` (a number or an array of ``n``) as an array of ``n`` (ints stay ints)."""
    if isinstance(x, np.ndarray) and x.shape == (n,):
        return x
    if isinstance(x, np.ndarray):
        return np.broadcast_to(x, (n,))
    return np.full(n, x, dtype=np.int64 if isinstance(x, int) else float)


def roofline_many(work: OpWork, dev: DeviceSpec, dtype: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`simcast.cost.ops.compute.roofline` over arrays: ``(time_s, bound)``."""
    flops = _vec(work.flops, n).astype(float)
    nb = _vec(work.bytes, n).astype(float)
    t_c, t_m = roofline_parts(
        np.where(flops != 0, flops, 1.0), np.where(nb != 0, nb, 1.0), work.unit, dev, dtype, work.mnk
    )
    t_c = np.where(flops != 0, t_c, 0.0)
    t_m = np.where(nb != 0, t_m, 0.0)
    bound = np.where(t_c >= t_m, "Cube" if work.unit == "cube" else "Vec", "Mem")
    return np.maximum(t_c, t_m) + work.launches * launch_s(dev, work.unit), bound


def _engine_bounds(kind: np.ndarray) -> np.ndarray:
    out = np.empty(kind.shape, dtype="<U4")
    for k, v in _ENGINE_BOUNDS.items():
        out[kind == k] = v
    return out


def _attention_work(rec: OpRecord, ctx: ArrayContext) -> OpWork:
    """``simcast::attention``'s formula (:func:`simcast.cost.ops.attention_ops.attention`) over the batches."""
    q, kc = rec.args[0], rec.args[1]
    bs = ctx.many
    d, dv = head_dims(rec, (0, 0, 0))
    hkv = shape_fn(kc.shape[-2])(0, 0, 0)
    hq = shape_fn(q.shape[-1])(0, 0, 0) // d
    b, kvb = DTYPE_BYTES[q.dtype], ctx.cache_bytes(kc)
    group = hq // max(hkv, 1)
    ql, cl, n = bs.q.astype(float), bs.c.astype(float), bs.n.astype(float)
    pairs = bs.per_batch(n * (ql * cl + ql * (ql + 1) / 2))
    tiles = np.ceil(bs.q * group / FA_QUERY_TILE)
    tile_tokens = bs.per_batch(n * tiles * np.where(bs.q > 1, cl + (ql + 1) / 2, cl + 1))
    dm = (d + dv) / 2  # the mean of the key and value head sizes (simcast.cost.kernels.diff_kv)
    io = 2 * bs.tokens * hq * dm * b
    flops, nbytes_ = 4.0 * hq * dm * pairs, io + tile_tokens * 2 * hkv * dm * kvb
    return OpWork(flops=cast(float, flops), bytes=cast(float, nbytes_), unit="cube", attn=(hq, hkv, d, dv))


def _static_dims(rec: OpRecord) -> bool:
    """The attention op's head dims are constants (a traced KV cache is ``(S, kv_heads, head_dim)``)."""
    q, kc = rec.args[0], rec.args[1]
    return all(isinstance(t, TensorArg) for t in (q, kc)) and all(
        e.isdigit() for e in (kc.shape[-1], kc.shape[-2], q.shape[-1])
    )


def _per_size(fn: Callable[[float], float], sizes: np.ndarray) -> np.ndarray:
    """``fn`` of each size, evaluated once per distinct size."""
    uniq, inv = np.unique(sizes, return_inverse=True)
    return np.array([fn(float(s)) for s in uniq], dtype=float)[inv.reshape(-1)]


def _comm_arrays(rec: OpRecord, ctx: ArrayContext) -> tuple[np.ndarray, np.ndarray]:
    """(message bytes, seconds) of a TP collective over the batches (the formulas of ``_all_reduce`` and
    ``_all_gather`` in :mod:`simcast.cost.ops.compute`)."""
    dims = cast(Any, ctx.dims)  # arrays: the formula helpers are elementwise
    n = int(rec.args[1])
    if rec.op == "simcast::all_reduce":
        size = _vec(nbytes(rec.args[0], dims), len(ctx.many))

        def one(s: float) -> float:
            eng = engine_cost.all_reduce_s(ctx.device, ctx.engine, n, s, ctx.tp_path.cross_node)
            return eng[0] if eng else comm.all_reduce_s(s, n, ctx.tp_path, ctx.collective_algorithm)

    else:
        size = _vec(nbytes(rec.outputs[0], dims), len(ctx.many))

        def one(s: float) -> float:
            return comm.all_gather_s(s, n, ctx.tp_path)

    return size, _per_size(one, size)


def _one_op(rec: OpRecord, ctx: ArrayContext, dtype: str, count: int) -> OpArrays | None:
    """One op over the batches with its array formula; None when it has none (cost it per batch)."""
    nb = len(ctx.many)
    if rec.op in COMM_OPS:
        size, t = _comm_arrays(rec, ctx)
        return OpArrays(
            op=rec.op,
            scope=rec.scope,
            count=count,
            flops=_vec(0.0, nb),
            bytes=size,
            time_s=t,
            bound=np.full(nb, "Comm"),
        )
    if rec.op == "simcast::attention" and _static_dims(rec):
        work = _attention_work(rec, ctx)
    elif rec.op in ARRAY_FORMULA_OPS:
        work = OP_FORMULAS[rec.op](rec, ctx)
    elif rec.op not in OP_FORMULAS:  # unregistered: the memory-bound estimate op_cost makes
        work = OpWork(flops=0.0, bytes=io_bytes(rec, ctx.dims), unit="vec")
    else:
        return None
    dt = work.dtype or dtype
    t, bound = _engine_time(rec, work, ctx, dt) if ctx.engine is not None else roofline_many(work, ctx.device, dt, nb)
    flops = _vec(work.flops, nb)
    byts = _vec(work.bytes, nb)
    return OpArrays(
        op=rec.op if rec.op in OP_FORMULAS else f"{rec.op} (unregistered: memory-bound estimate)",
        scope=rec.scope,
        count=count,
        flops=flops,
        bytes=byts,
        time_s=t,
        bound=bound,
    )


def _engine_time(rec: OpRecord, work: OpWork, ctx: ArrayContext, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`simcast.cost.ops.compute.engine_roofline` over the batches."""
    nb = len(ctx.many)
    family = gemm_family(rec, dtype) if work.mnk is not None else None
    if family is not None and work.mnk is not None:
        m, n, k = work.mnk
        got = bk.gemm_many(ctx.device, ctx.engine, family, _vec(m, nb), int(n), int(k), ctx.captured_each)
        if got is not None:
            return got[0], _engine_bounds(got[1])
    elif work.attn is not None:
        b = ctx.many
        got2 = bk.attention_many(
            ctx.device,
            ctx.engine,
            attention_fit_dtype(ctx.kv_bytes, dtype),
            b,
            *work.attn,
            phase=ctx.attention_phase,
        )
        t, kind, ok = got2
        if ok.all():
            return t, _engine_bounds(kind)
        t_r, bound_r = roofline_many(work, ctx.device, dtype, nb)
        return np.where(ok, t, t_r), np.where(ok, _engine_bounds(kind), bound_r)
    return roofline_many(work, ctx.device, dtype, nb)


def cost_ops_many(
    ops: Sequence[tuple[OpRecord, int]],
    base: CostContext,
    batches: Batches,
    captured: np.ndarray,
    dtype: str,
    memo: dict | None = None,
) -> list[OpArrays]:
    """Every op of ``ops`` (records with their replay counts) over ``batches``; ``base`` holds the
    stage's device, paths and engine (its ``batch`` is ignored), ``captured`` each batch's CUDA-graph flag.

    Ops without an array form are costed per batch with :func:`simcast.cost.ops.compute.op_cost`. ``memo``
    (shared by the stages of one pass over the same batches) costs an op that recurs with the same shapes
    and paths once: a stage's first layer and its representative one, the same layer on other stages.
    """
    memo = {} if memo is None else memo
    ctx = ArrayContext(**_shared_fields(base), batch=batches.batches[0], many=batches, captured_each=captured)
    per_batch: list[CostContext] | None = None
    out: list[OpArrays] = []
    for rec, count in ops:
        key = (rec.op, rec.args, rec.outputs, base.tp_path, base.moe_path)
        got = memo.get(key)
        if got is None:
            got = _one_op(rec, ctx, dtype, count)
            if got is None:
                if per_batch is None:
                    per_batch = [_scalar_ctx(base, b, bool(cap)) for b, cap in zip(batches.batches, captured)]
                got = _per_batch_op(rec, per_batch, dtype, count)
            memo[key] = got
        elif got.scope != rec.scope or got.count != count:
            got = replace(got, scope=rec.scope, count=count, _lists=got._lists)
        out.append(got)
    return out


def _shared_fields(base: CostContext) -> dict:
    """``base``'s fields but its batch and CUDA-graph flag: what every batch's context shares."""
    return {f.name: getattr(base, f.name) for f in fields(CostContext) if f.name not in ("batch", "captured")}


def _scalar_ctx(base: CostContext, batch: Batch, captured: bool) -> CostContext:
    return CostContext(**_shared_fields(base), batch=batch, captured=captured)


def _per_batch_op(rec: OpRecord, ctxs: list[CostContext], dtype: str, count: int) -> OpArrays:
    costs = [op_cost(rec, c, dtype, count) for c in ctxs]
    first = costs[0]
    return OpArrays(
        op=first.op,
        scope=first.scope,
        count=count,
        flops=np.array([c.flops for c in costs], dtype=object),
        bytes=np.array([c.bytes for c in costs], dtype=object),
        time_s=np.array([c.time_s for c in costs], dtype=float),
        bound=np.array([c.bound for c in costs]),
    )
