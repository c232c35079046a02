"""Predict one kernel on one device with the simulator's own cost functions.

Each function builds the :class:`~simcast.trace.ir.OpRecord` the tracer would
record (concrete shapes) and costs it with :func:`simcast.cost.ops.compute.op_cost`
— the same formulas and roofline as :func:`simcast.sim.simulate` — or resolves the
link path with :mod:`simcast.core.layout` and costs it with :mod:`simcast.cost.comm.time`.
Nothing here re-states a FLOP, byte or time formula.

Bounds: ``compute`` and ``memory`` (roofline side), ``latency`` and
``bandwidth`` (which term of ``α + bytes/β`` dominates a message).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simcast.core.device import DeviceSpec, LinkTable
from simcast.core.errors import require
from simcast.core.layout import Path, group_path, path_between
from simcast.core.model_spec import ModelSpec
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch
from simcast.cost.comm import time as comm
from simcast.cost.kernels import engine_cost
from simcast.cost.ops.compute import op_cost
from simcast.cost.ops.op_work import CostContext
from simcast.trace.ir import OpRecord, TensorArg

_NO_PATH = Path(name="local", bw_bytes_per_s=float("inf"), latency_s=0.0, efficiency=1.0, cross_node=False)
_BOUNDS = {"Cube": "compute", "Vec": "compute", "Mem": "memory"}
ELEMENTWISE_OPS = ("rms_norm", "add", "silu_and_mul", "rope")


@dataclass(frozen=True, kw_only=True)
class KernelPrediction:
    """One kernel's predicted time (seconds) and what bounds it."""

    kernel: str
    time_s: float
    bound: str  # compute | memory | latency | bandwidth
    flops: float = 0.0
    bytes: float = 0.0
    link: str = ""
    kernel_model: str = ""  # which kernel parameters produced it (engine fit, fallback, generic roofline)


def _t(*dims: int) -> tuple[str, ...]:
    return tuple(str(int(d)) for d in dims)


def _cost(
    kernel: str,
    rec: OpRecord,
    dev: DeviceSpec,
    dtype: str,
    batch: Batch | None = None,
    engine: str | None = None,
    kind: str = "",
    phase: str = "auto",
) -> KernelPrediction:
    ctx = CostContext(
        batch=batch or Batch.prefill(1, 1),
        device=dev,
        tp_path=_NO_PATH,
        engine=engine_cost.check_engine(engine),
        attention_phase=phase,
    )
    c = op_cost(rec, ctx, dtype, 1)
    return KernelPrediction(
        kernel=kernel,
        time_s=c.time_s,
        bound=_BOUNDS[c.bound],
        flops=c.flops,
        bytes=c.bytes,
        kernel_model=engine_cost.label(dev, engine, kind, dtype) if kind else "",
    )


def _positive(**dims: int) -> None:
    for k, v in dims.items():
        require(isinstance(v, int) and v >= 1, f"--{k.replace('_', '-')}", v, "must be an integer >= 1")


def gemm(dev: DeviceSpec, m: int, n: int, k: int, dtype: str = "bf16", engine: str | None = None) -> KernelPrediction:
    """``(M×K) @ (K×N)`` as the tracer records a linear layer: x (M, K), weight (N, K).

    ``dtype`` ``fp8_block`` (fp8 with 128x128 block scales) needs an engine fit of that family.
    """
    _positive(m=m, n=n, k=k)
    if dtype == "fp8_block":
        got = engine_cost.gemm_s(dev, engine_cost.check_engine(engine), dtype, m, n, k)
        require(got is not None, "dtype", dtype, f"fp8_block GEMMs need an engine fit (--engine) on {dev.name}")
        assert got is not None
        return KernelPrediction(
            kernel="gemm",
            time_s=got[0],
            bound=got[1],
            flops=2.0 * m * n * k,
            bytes=float(m * k + n * k + 2 * m * n),
            kernel_model=engine_cost.label(dev, engine, "gemm", dtype),
        )
    rec = OpRecord(
        op="linear",
        scope="kernel",
        args=(TensorArg(shape=_t(m, k), dtype=dtype), TensorArg(shape=_t(n, k), dtype=dtype), None),
        outputs=(TensorArg(shape=_t(m, n), dtype=dtype),),
    )
    return _cost("gemm", rec, dev, dtype, engine=engine, kind="gemm")


def attention(
    dev: DeviceSpec,
    phase: str,
    batch: int,
    q_len: int,
    kv_len: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    dtype: str = "bf16",
    engine: str | None = None,
    v_head_dim: int = 0,
) -> KernelPrediction:
    """Paged/flash attention for ``batch`` requests of ``q_len`` new tokens each.

    ``kv_len`` is the total keys per request including the new tokens (so the
    cached context is ``kv_len - q_len``); decode means ``q_len = 1``. ``v_head_dim`` (0: ``head_dim``): the
    values' head size when it differs from the keys' (:mod:`simcast.cost.kernels.diff_kv`).
    """
    _positive(batch=batch, q_len=q_len, kv_len=kv_len, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    require(phase in ("prefill", "decode"), "--phase", phase, "allowed: prefill, decode")
    require(phase == "prefill" or q_len == 1, "--q-len", q_len, "decode attends one new token per request: use 1")
    require(kv_len >= q_len, "--kv-len", kv_len, f"must be >= --q-len={q_len} (it counts the new tokens too)")
    require(heads % kv_heads == 0, "--kv-heads", kv_heads, f"must divide --heads={heads}")
    b = Batch(query_lens=(q_len,), context_lens=(kv_len - q_len,), counts=(batch,))
    kv = TensorArg(shape=_t(batch * kv_len, kv_heads, head_dim), dtype=dtype)
    v = TensorArg(shape=_t(batch * kv_len, kv_heads, v_head_dim or head_dim), dtype=dtype)
    q = TensorArg(shape=_t(batch * q_len, heads * head_dim), dtype=dtype)
    o = TensorArg(shape=_t(batch * q_len, heads * (v_head_dim or head_dim)), dtype=dtype)
    rec = OpRecord(
        op="simcast::attention", scope="kernel", args=(q, kv, v, None, None, True, head_dim**-0.5), outputs=(o,)
    )
    return _cost(f"attention_{phase}", rec, dev, dtype, b, engine=engine, kind=phase, phase=phase)


def elementwise(
    dev: DeviceSpec, op: str, tokens: int, width: int, dtype: str = "bf16", k_width: int = 0
) -> KernelPrediction:
    """A non-GEMM kernel on ``tokens`` rows: ``rms_norm``/``add`` of ``width``, ``silu_and_mul``
    of input width ``width`` (= 2·intermediate), ``rope`` on q of ``width`` and k of ``k_width``."""
    _positive(tokens=tokens, width=width)
    require(op in ELEMENTWISE_OPS, "elementwise op", op, f"allowed: {', '.join(ELEMENTWISE_OPS)}")
    x = TensorArg(shape=_t(tokens, width), dtype=dtype)
    if op == "rms_norm":
        rec = OpRecord(
            op="simcast::rms_norm",
            scope="kernel",
            args=(x, TensorArg(shape=_t(width), dtype=dtype), 1e-6),
            outputs=(x,),
        )
    elif op == "add":  # no registered formula: the generic memory-bound estimate (inputs + output once)
        rec = OpRecord(op="add", scope="kernel", args=(x, x), outputs=(x,))
    elif op == "silu_and_mul":
        rec = OpRecord(
            op="simcast::silu_and_mul",
            scope="kernel",
            args=(x,),
            outputs=(TensorArg(shape=_t(tokens, width // 2), dtype=dtype),),
        )
    else:
        k = TensorArg(shape=_t(tokens, k_width or width), dtype=dtype)
        rec = OpRecord(
            op="simcast::rope",
            scope="kernel",
            args=(TensorArg(shape=_t(tokens), dtype="int64"), x, k, 128, 10000.0),
            outputs=(x, k),
        )
    return _cost(op, rec, dev, dtype)


def _message(kernel: str, time_s: float, latency_s: float, nbytes: float, path: Path) -> KernelPrediction:
    bound = "latency" if latency_s >= time_s - latency_s else "bandwidth"
    return KernelPrediction(kernel=kernel, time_s=time_s, bound=bound, bytes=nbytes, link=path.name)


def collective_path(dev: DeviceSpec, gpus: int, nodes: int = 1) -> Path:
    """The ring path of ``gpus`` ranks spread evenly over ``nodes`` nodes, with the link's fits."""
    _positive(gpus=gpus, nodes=nodes)
    require(gpus % nodes == 0, "--gpus", gpus, f"must be a multiple of --nodes={nodes}")
    links = LinkTable(devices_per_node=gpus // nodes, intra_node=dev.links.intra_node, inter_node=dev.links.inter_node)
    return group_path(tuple(range(gpus)), links, gpus)


def collective(
    dev: DeviceSpec, kind: str, nbytes: float, gpus: int, nodes: int = 1, engine: str | None = None
) -> KernelPrediction:
    """All-reduce (``nbytes`` per rank) or all-gather (``nbytes`` output per rank) over ``gpus`` ranks.

    With ``engine`` (vllm, sglang, trtllm) an all-reduce inside one node is the engine's own
    (custom one-/two-shot kernels, NCCL past its cutoff); ``nccl`` or None: NCCL's own (link fits).
    """
    require(kind in ("allreduce", "allgather"), "collective", kind, "allowed: allreduce, allgather")
    require(nbytes > 0, "--bytes", nbytes, "must be > 0")
    engine_cost.check_engine(engine)
    path = collective_path(dev, gpus, nodes)
    eng = engine_cost.all_reduce_s(dev, engine, gpus, nbytes, path.cross_node) if kind == "allreduce" else None
    if eng is not None:
        one_byte = engine_cost.all_reduce_s(dev, engine, gpus, 1.0, path.cross_node)
        p = _message(kind, eng[0], one_byte[0] if one_byte else 0.0, nbytes, path)
        return dataclasses.replace(p, kernel_model=f"{engine_cost.label(dev, engine, 'all_reduce')}, {eng[1]}")
    if kind == "allreduce":
        t = comm.all_reduce_s(nbytes, gpus, path)
        t0 = comm.all_reduce_s(1.0, gpus, path)
    else:
        t = comm.all_gather_s(nbytes, gpus, path)
        t0 = comm.all_gather_s(1.0, gpus, path)
    fit = comm.collective_fit(path, "all_reduce" if kind == "allreduce" else "all_gather", gpus, nbytes)
    how = ("NCCL link fit" + (f", {fit.algorithm}" if fit.algorithm else "")) if fit else "ring/tree formula"
    if comm.hierarchical(path, "all_reduce" if kind == "allreduce" else "all_gather", gpus):
        h = path.hierarchy
        assert h is not None
        how = (
            f"hierarchical over {h.nodes} nodes x {h.ranks_per_node} ranks: intra-node "
            + ("NCCL link fit" if h.intra.collectives else "ring/tree formula")
            + ", then across nodes "
            + ("NCCL link fit" if h.inter.collectives else "ring/tree formula")
        )
    return dataclasses.replace(_message(kind, t, t0, nbytes, path), kernel_model=how)


def p2p(dev: DeviceSpec, nbytes: float, cross_node: bool = False) -> KernelPrediction:
    """One-way send/recv between two GPUs in one node or on two nodes."""
    require(nbytes > 0, "--bytes", nbytes, "must be > 0")
    links = LinkTable(
        devices_per_node=1 if cross_node else 2, intra_node=dev.links.intra_node, inter_node=dev.links.inter_node
    )
    path = path_between(0, 1, links, 2)
    return _message("p2p", comm.p2p_s(nbytes, path), path.latency_s, nbytes, path)


def layer_ops(
    dev: DeviceSpec, model: ModelSpec, tokens: int, tp: int, dtype: str | None = None
) -> dict[str, KernelPrediction]:
    """The linear and elementwise kernels of one decoder layer on one TP rank.

    Keys follow Vidur's per-op profile (``attn_pre_proj`` = fused QKV, ``attn_post_proj`` = o_proj,
    ``mlp_up_proj`` = fused gate+up, ``mlp_down_proj``, the two norms, RoPE, SiLU-and-mul and the
    residual add). Attention itself and the TP collectives are separate kernels.
    """
    _positive(tokens=tokens, tp=tp)
    dt = dtype or model.dtype
    sd = sharded_dims(model, tp)
    h = sd.hidden
    g = {op: gemm(dev, m, n, k, dt) for op, (m, n, k) in sd.gemm_shapes(tokens).items()}
    return {
        "input_layernorm": elementwise(dev, "rms_norm", tokens, h, dt),
        "attn_pre_proj": g["attn_pre_proj"],
        "attn_rope": elementwise(dev, "rope", tokens, sd.q_width, dt, k_width=sd.kv_width),
        "attn_post_proj": g["attn_post_proj"],
        "post_attention_layernorm": elementwise(dev, "rms_norm", tokens, h, dt),
        "mlp_up_proj": g["mlp_up_proj"],
        "mlp_act": elementwise(dev, "silu_and_mul", tokens, 2 * sd.intermediate, dt),
        "mlp_down_proj": g["mlp_down_proj"],
        "add": elementwise(dev, "add", tokens, h, dt),
    }


def layer(dev: DeviceSpec, model: ModelSpec, tokens: int, tp: int, dtype: str | None = None) -> KernelPrediction:
    """Sum of :func:`layer_ops` (one decoder layer without attention and collectives)."""
    ops = layer_ops(dev, model, tokens, tp, dtype)
    bound = max(("compute", "memory"), key=lambda b: sum(o.time_s for o in ops.values() if o.bound == b))
    return KernelPrediction(
        kernel="layer",
        time_s=sum(o.time_s for o in ops.values()),
        bound=bound,
        flops=sum(o.flops for o in ops.values()),
        bytes=sum(o.bytes for o in ops.values()),
    )
