"""What one traced op does and costs: :class:`CostContext` (the concrete dims it runs at),
:class:`OpWork` (FLOPs, bytes, unit), :class:`OpCost` (its time), and the byte counts every
formula shares (:func:`numel`, :func:`nbytes`, :func:`io_bytes`)."""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.device import DeviceSpec
from simcast.core.dtypes import DTYPE_BYTES, FP4_KV_CACHE_DTYPES, KV_CACHE_BYTES
from simcast.core.layout import Path
from simcast.core.moe_comm import MoECommPlan
from simcast.core.specs import Batch
from simcast.trace.ir import OpRecord, TensorArg, shape_fn

FP4_KV_BYTES = frozenset(KV_CACHE_BYTES[k] for k in FP4_KV_CACHE_DTYPES)
"""Bytes per element of the FP4 KV caches (0.5625)."""


def attention_fit_dtype(kv_bytes: float, dtype: str) -> str:
    """The KV dtype whose fitted attention kernels cost a launch over a cache of ``kv_bytes`` per element: fp8
    for an fp8 cache, ``nvfp4`` for an FP4 one (the measured-kernel database times no FP4-KV attention, so no
    profile has such a fit: the launch falls to the roofline on the cache's 0.5625 bytes per element, labelled
    by the KV-dtype assumption), else the model dtype."""
    if kv_bytes == 1:
        return "fp8"
    return "nvfp4" if kv_bytes in FP4_KV_BYTES else dtype


@dataclass(frozen=True, kw_only=True)
class CostContext:
    """Concrete dims for one microbatch on one stage."""

    batch: Batch
    device: DeviceSpec
    tp_path: Path
    collective_algorithm: str = "auto"
    engine: str | None = None  # vllm | sglang | trtllm: the profile's fitted kernels for that engine
    attention_phase: str = "auto"  # "prefill": cost 1-token prompts with the prefill fit (kernel benchmarks)
    moe_path: Path | None = None  # MoE dispatch/combine group (None: the TP path)
    expert_imbalance: float = 1.0  # busiest expert rank's load / the uniform-routing expectation
    kv_bytes: float = 0.0  # bytes per KV-cache element (--kv-cache-dtype); 0: the traced cache tensor's dtype
    captured: bool = True  # the step replays a captured CUDA graph (engines.cuda_graphs); False: host floors apply
    active_dp_ranks: int = 0  # attention-DP: DP ranks carrying ``batch`` (0: all); the rest send no tokens
    decode_query_len: int = 1  # rows of up to this many query tokens run as decode rows (speculative verify: k + 1)
    moe_comm: MoECommPlan | None = None  # what the engine runs for the MoE all-to-all (None: its default path)
    routing_groups: tuple[int, int] = (1, 1)  # node-limited routing (n_group, topk_group); (1, 1): none
    fp8_dispatch: bool = False  # the experts run FP8, so DeepEP dispatches FP8 (combine stays BF16)

    def cache_bytes(self, cache: TensorArg) -> float:
        """Bytes per element of the KV cache ``cache`` as stored (an fp8 cache halves a bf16 one)."""
        return self.kv_bytes or DTYPE_BYTES[cache.dtype]

    @property
    def dims(self) -> tuple[int, int, int]:
        return self.batch.num_tokens, self.batch.num_requests, self.batch.kv_tokens


@dataclass(frozen=True, kw_only=True)
class OpWork:
    """What an op does: FLOPs, HBM bytes, which unit it runs on; comm ops carry their time."""

    flops: float
    bytes: float
    unit: str  # "cube" | "vec" | "comm"
    comm_s: float = 0.0
    mnk: tuple[int, int, int] | None = None  # GEMM shape (rows M, cols N, reduction K) for the shape curves
    attn: tuple[int, int, int, int] | None = None  # attention (query heads, KV heads, K head_dim, V head_dim) per rank
    dtype: str | None = None  # compute dtype when it differs from the model's (fp8 GEMMs)
    # routed experts: (pairs, active experts, i per rank, h, routed pairs = layer tokens · top_k)
    moe: tuple[float, float, int, int, float] | None = None
    attn_batch: Batch | None = None  # the requests an attention kernel sees when not the step's (sliding window)
    launches: float = 1.0  # kernels the op launches (each pays the launch time): a multi-kernel pipeline > 1


@dataclass(frozen=True, kw_only=True)
class OpCost:
    op: str
    scope: str
    count: int  # times this op runs in the stage (layer replay)
    flops: float
    bytes: float
    time_s: float  # one instance
    bound: str  # Cube | Vec | Mem | Comm


def numel(t: TensorArg, dims: tuple[int, int, int], addressed: bool = False) -> int:
    n = 1
    for i, e in enumerate(t.shape):
        if addressed and i in t.broadcast_dims:
            continue
        n *= shape_fn(e)(*dims)
    return n


def nbytes(t: TensorArg | None, dims: tuple[int, int, int]) -> float:
    """Bytes a kernel addresses for ``t`` (stride-0 dims counted once)."""
    if not isinstance(t, TensorArg):
        return 0.0
    return numel(t, dims, addressed=True) * DTYPE_BYTES.get(t.dtype, 8 if t.dtype == "int64" else 4)


def io_bytes(rec: OpRecord, dims) -> float:
    return sum(nbytes(a, dims) for a in rec.args if isinstance(a, TensorArg)) + sum(
        nbytes(o, dims) for o in rec.outputs
    )
