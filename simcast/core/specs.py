"""Frozen, keyword-only specs: the inputs of :func:`simcast.sim.simulate`.

Units are in the field names. Constructors validate and never touch files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from simcast.core import cuda_graphs
from simcast.core.chunking import ChunkedPrefill
from simcast.core.dtypes import DTYPE_BYTES
from simcast.core.engines import ENGINES
from simcast.core.errors import require
from simcast.core.kernel_fits import EngineKernels
from simcast.core.mla import MLASpec
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE, MoESpec
from simcast.core.quant import QuantSpec

GIB = 2**30
"""Bytes in a GiB (the unit of every memory figure simcast prints)."""


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer (Llama / Qwen2 / Qwen3 / Mistral; MoE: Mixtral, Qwen3-MoE,
    DeepSeek-V3, gpt-oss).

    ``intermediate_size`` is the dense MLP width (DeepSeek's first dense layers); MoE
    layers use ``moe``. ``layer_types``: per layer ``"full_attention"`` or
    ``"sliding_attention"`` (window ``sliding_window`` tokens; empty = all full).
    ``attention_sinks``: one learned sink logit per head (gpt-oss). ``o_proj_bias``:
    o_proj has a bias (gpt-oss). ``num_mtp_layers``: DeepSeek's multi-token-prediction
    modules (weights counted in the checkpoint total, not run by default).
    """

    name: str
    architecture: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    qk_norm: bool = False
    attention_bias: bool = False
    dtype: str = "bf16"
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    quant: QuantSpec | None = None
    layer_types: tuple[str, ...] = ()
    sliding_window: int = 0
    attention_sinks: bool = False
    o_proj_bias: bool = False
    num_mtp_layers: int = 0

    def __post_init__(self) -> None:
        for f in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "vocab_size",
        ):
            v = getattr(self, f)
            require(isinstance(v, int) and v > 0, f"model.{f}", v, "a positive integer is required")
        require(
            self.num_heads % self.num_kv_heads == 0,
            "model.num_key_value_heads",
            self.num_kv_heads,
            f"must divide num_attention_heads={self.num_heads}",
        )
        require(self.dtype in DTYPE_BYTES, "model.dtype", self.dtype, f"allowed: {sorted(DTYPE_BYTES)}")
        require(
            not self.layer_types or len(self.layer_types) == self.num_layers,
            "model.layer_types",
            len(self.layer_types),
            f"needs one entry per layer ({self.num_layers})",
        )
        bad = sorted(set(self.layer_types) - {"full_attention", "sliding_attention"})
        require(not bad, "model.layer_types", bad, "allowed: full_attention, sliding_attention")
        require(
            "sliding_attention" not in self.layer_types or self.sliding_window > 0,
            "model.sliding_window",
            self.sliding_window,
            "must be > 0 when a layer uses sliding_attention",
        )

    def is_sliding(self, layer: int) -> bool:
        return bool(self.layer_types) and self.layer_types[layer] == "sliding_attention"

    def is_moe_layer(self, layer: int) -> bool:
        return self.moe is not None and self.moe.is_moe_layer(layer)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]


COLLECTIVE_KINDS = ("all_reduce", "all_gather")


@dataclass(frozen=True, kw_only=True)
class CollectiveFit:
    """A fitted collective on one link for one group size: ``t = latency_s + factor · bytes / bus_bw``.

    ``latency_s`` (α) is the fixed cost of one call (launch, handshake, sync),
    ``bus_bw_bytes_per_s`` (β) the achieved NCCL bus bandwidth; ``factor`` is
    ``2(n-1)/n`` for all-reduce and ``(n-1)/n`` for all-gather (nccl-tests' busbw).

    Optional piecewise regimes: several fits of one kind and group size with
    ``max_bytes`` form a piecewise-linear curve (each applies up to its
    ``max_bytes``; 0 = no upper bound), e.g. an engine's one-shot kernel, its
    two-shot kernel, then NCCL, or NCCL's own protocol switches; ``algorithm``
    names the regime (``one_shot``, ``two_shot``, ``nccl``...).
    """

    kind: str
    gpus: int
    latency_s: float
    bus_bw_bytes_per_s: float
    max_bytes: float = 0.0
    algorithm: str = ""

    def __post_init__(self) -> None:
        require(self.kind in COLLECTIVE_KINDS, "collectives.kind", self.kind, f"allowed: {', '.join(COLLECTIVE_KINDS)}")
        require(self.gpus >= 2, "collectives.gpus", self.gpus, "must be >= 2")
        require(self.latency_s >= 0, "collectives.latency_s", self.latency_s, "must be >= 0")
        require(self.bus_bw_bytes_per_s > 0, "collectives.bus_bw_bytes_per_s", self.bus_bw_bytes_per_s, "must be > 0")
        require(self.max_bytes >= 0, "collectives.max_bytes", self.max_bytes, "must be >= 0 (0: no upper bound)")


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    """One kind of link: per-GPU unidirectional bandwidth, per-message latency.

    ``latency_s`` and ``efficiency`` give a point-to-point message
    ``latency_s + bytes / (bw · efficiency)``; ``collectives`` (optional,
    fitted by ``simcast calibrate``) hold per-collective, per-group-size fits.
    ``mesh_links`` (optional): 0 for a switched fabric, where every pair sees
    ``bw_bytes_per_s``; n > 0 for a full mesh of n equal peer links sharing it
    (e.g. MI300X xGMI), where one pair sees ``bw/n`` and a collective over k
    ranks drives ``min(k-1, n)`` links.
    """

    name: str
    bw_bytes_per_s: float
    latency_s: float
    efficiency: float
    collectives: tuple[CollectiveFit, ...] = ()
    mesh_links: int = 0

    def __post_init__(self) -> None:
        require(self.bw_bytes_per_s > 0, f"link {self.name}.bw_bytes_per_s", self.bw_bytes_per_s, "must be > 0")
        require(self.latency_s >= 0, f"link {self.name}.latency_s", self.latency_s, "must be >= 0")
        require(0 < self.efficiency <= 1, f"link {self.name}.efficiency", self.efficiency, "must be in (0, 1]")
        require(self.mesh_links >= 0, f"link {self.name}.mesh_links", self.mesh_links, "must be >= 0 (0: switched)")
        object.__setattr__(
            self,
            "collectives",
            tuple(c if isinstance(c, CollectiveFit) else CollectiveFit(**c) for c in self.collectives),
        )

    @property
    def effective_bw_bytes_per_s(self) -> float:
        return self.bw_bytes_per_s * self.efficiency


@dataclass(frozen=True, kw_only=True)
class LinkTable:
    """Cluster topology: nodes of ``devices_per_node`` devices, an intra- and an inter-node link.

    ``inter_node_origin``: empty when ``inter_node`` is the device profile's; else where it came from
    (a named fabric, flags or service-YAML keys: :func:`simcast.core.fabrics.fabric_links`).
    """

    devices_per_node: int
    intra_node: LinkSpec
    inter_node: LinkSpec
    inter_node_origin: str = ""

    def __post_init__(self) -> None:
        require(self.devices_per_node >= 1, "links.devices_per_node", self.devices_per_node, "must be >= 1")


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """Achieved fractions of peak, and fixed per-kernel overhead.

    ``matmul``/``vector``/``memory`` are fractions of the matmul peak, vector
    peak and HBM bandwidth.

    GEMM shape curves (optional, fitted by ``simcast calibrate``): the matmul
    efficiency of an ``M×K @ K×N`` GEMM is multiplied by
    ``d / (d + d_half)`` for d in M, N, K. ``matmul_half_m_ridge`` gives M's
    half point in units of the device's ridge intensity (tokens at which a
    GEMM turns compute-bound, ``peak / hbm_bw`` for 2-byte dtypes), so the
    curve carries over to a device with other peaks; ``matmul_half_n`` and
    ``matmul_half_k`` are in elements. ``vector_memory`` is the HBM fraction
    reached by non-GEMM kernels (norms, activations, RoPE, adds); 0 = ``memory``.
    ``vector_launch_overhead_s`` is their fixed cost per kernel; None = ``launch_overhead_s``.
    """

    matmul: float
    vector: float
    memory: float
    launch_overhead_s: float
    matmul_half_m_ridge: float = 0.0
    matmul_half_n: float = 0.0
    matmul_half_k: float = 0.0
    vector_memory: float = 0.0
    vector_launch_overhead_s: float | None = None

    def __post_init__(self) -> None:
        for f in ("matmul", "vector", "memory"):
            v = getattr(self, f)
            require(0 < v <= 1, f"efficiency.{f}", v, "must be in (0, 1]")
        require(self.launch_overhead_s >= 0, "efficiency.launch_overhead_s", self.launch_overhead_s, "must be >= 0")
        for f in ("matmul_half_m_ridge", "matmul_half_n", "matmul_half_k"):
            require(getattr(self, f) >= 0, f"efficiency.{f}", getattr(self, f), "must be >= 0 (0 disables)")
        require(
            self.vector_launch_overhead_s is None or self.vector_launch_overhead_s >= 0,
            "efficiency.vector_launch_overhead_s",
            self.vector_launch_overhead_s,
            "must be >= 0",
        )
        require(0 <= self.vector_memory <= 1, "efficiency.vector_memory", self.vector_memory, "must be in [0, 1]")


@dataclass(frozen=True, kw_only=True)
class DeviceSpec:
    """One accelerator and the cluster it sits in (hardware as data)."""

    name: str
    description: str
    matmul_flops_per_s: Mapping[str, float]
    vector_flops_per_s: Mapping[str, float]
    hbm_bytes: int
    hbm_bw_bytes_per_s: float
    efficiency: Efficiency
    links: LinkTable
    engines: Mapping[str, EngineKernels] = field(default_factory=dict)
    """Per-engine fitted kernels (optional, see :mod:`simcast.core.kernel_fits`)."""
    reported_name: str = ""
    """The name the driver reports (``nvidia-smi``, ``torch.cuda.get_device_name()``): an engine that picks
    defaults by device name reads this, never the profile's ``name``; empty when the profile does not say."""

    def matmul_peak(self, dtype: str) -> float:
        """Dense matmul peak for ``dtype`` in FLOP/s; a dtype the profile lacks is an error naming the field."""
        require(
            self.matmul_flops_per_s.get(dtype, 0) > 0,
            f"device.compute.matmul_flops_per_s.{dtype}",
            "missing",
            f"device {self.name} has matmul peaks for {sorted(self.matmul_flops_per_s)}; "
            f"add the {dtype} peak (FLOP/s) to its profile or pick another --dtype",
        )
        return self.matmul_flops_per_s[dtype]

    def vector_peak(self, dtype: str) -> float:
        """Vector-unit (non-matmul) peak for ``dtype`` in FLOP/s.

        fp8 has no vector arithmetic (norms and activations upcast), so an fp8
        model's elementwise work runs at the fp32 peak unless the profile gives
        an fp8 one. Any other missing dtype is an error naming the field.
        """
        key = "fp32" if dtype == "fp8" and "fp8" not in self.vector_flops_per_s else dtype
        require(
            self.vector_flops_per_s.get(key, 0) > 0,
            f"device.compute.vector_flops_per_s.{key}",
            "missing",
            f"device {self.name} has vector peaks for {sorted(self.vector_flops_per_s)}; "
            f"add the {key} peak (FLOP/s) to its profile or pick another --dtype",
        )
        return self.vector_flops_per_s[key]


@dataclass(frozen=True, kw_only=True)
class ParallelSpec:
    """TP x PP x DP layout; ``world_size == tp * pp * dp``; MoE layers as EP x MoE-TP x MoE-DP.

    The MoE groups are stage-local (the RFC's §4.3): the ``tp * dp`` ranks of one
    pipeline stage (all replicas) split that stage's experts, so
    ``ep * moe_tp * moe_dp == tp * dp``. At ``pp == 1`` that is the RFC's global
    rule ``moe_tp = world_size / (ep * moe_dp)``. ``moe_tp`` 0 derives it.
    ``dp_attention``: the ``dp`` replicas are attention-DP groups feeding one
    MoE layer (SGLang ``--enable-dp-attention``; vLLM DP+EP); needs ``dp > 1``.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    world_size: int = 0
    ep: int = 1
    moe_dp: int = 1
    moe_tp: int = 0
    dp_attention: bool = False

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "dp", "ep", "moe_dp"):
            v = getattr(self, f)
            require(isinstance(v, int) and v >= 1, f"{f}_size", v, "must be an integer >= 1")
        if self.world_size == 0:
            object.__setattr__(self, "world_size", self.tp * self.pp * self.dp)
        require(
            self.world_size == self.tp * self.pp * self.dp,
            "world_size",
            self.world_size,
            f"must equal tp*pp*dp = {self.tp}*{self.pp}*{self.dp} = {self.tp * self.pp * self.dp}",
        )
        stage = self.tp * self.dp
        require(
            stage % (self.ep * self.moe_dp) == 0,
            "ep_size*moe_dp_size",
            self.ep * self.moe_dp,
            f"must divide the ranks of one stage, tp*dp = {stage} (world_size/pp; RFC: devices % (ep*moe_dp) == 0)",
        )
        if self.moe_tp == 0:
            object.__setattr__(self, "moe_tp", stage // (self.ep * self.moe_dp))
        require(
            self.ep * self.moe_tp * self.moe_dp == stage,
            "moe_tp_size",
            self.moe_tp,
            f"ep*moe_tp*moe_dp must equal tp*dp = {stage} (moe_tp = world_size/(pp*ep*moe_dp))",
        )
        require(
            not self.dp_attention or self.dp > 1,
            "enable_dp_attention",
            self.dp_attention,
            "needs dp_size > 1 (attention data-parallel groups)",
        )


@dataclass(frozen=True, kw_only=True)
class Batch:
    """One engine step as groups of identical requests.

    Group ``i`` holds ``counts[i]`` requests, each with ``query_lens[i]`` new
    tokens and ``context_lens[i]`` tokens already in the KV cache. A step of
    100,000 decodes at one context is one group, so costing it is O(groups),
    not O(requests). ``counts`` may be omitted (one request per entry).
    Identical (query, context) entries are merged in order of first
    appearance, so two batches holding the same requests compare equal.
    """

    query_lens: tuple[int, ...]
    context_lens: tuple[int, ...]
    counts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        q, c = tuple(self.query_lens), tuple(self.context_lens)
        n = tuple(self.counts) or (1,) * len(q)
        require(
            len(q) == len(c) == len(n) and len(q) > 0,
            "batch",
            len(q),
            "needs >= 1 request group with matching query/context/count lists",
        )
        require(all(x >= 1 for x in q), "query_len", min(q), "must be >= 1")
        require(all(x >= 0 for x in c), "context_len", min(c), "must be >= 0")
        require(all(isinstance(x, int) and x >= 1 for x in n), "count", min(n), "must be an integer >= 1")
        merged: dict[tuple[int, int], int] = {}
        for qi, ci, ni in zip(q, c, n):
            merged[(qi, ci)] = merged.get((qi, ci), 0) + ni
        object.__setattr__(self, "query_lens", tuple(k[0] for k in merged))
        object.__setattr__(self, "context_lens", tuple(k[1] for k in merged))
        object.__setattr__(self, "counts", tuple(merged.values()))

    @classmethod
    def prefill(cls, batch_size: int, input_len: int, context_len: int = 0) -> Batch:
        require(batch_size >= 1, "--batch", batch_size, "must be >= 1")
        require(input_len >= 1, "--input-length", input_len, "must be >= 1")
        return cls(query_lens=(input_len,), context_lens=(context_len,), counts=(batch_size,))

    @classmethod
    def decode(cls, batch_size: int, context_len: int) -> Batch:
        require(batch_size >= 1, "--batch", batch_size, "must be >= 1")
        require(context_len >= 1, "--context-length", context_len, "must be >= 1")
        return cls(query_lens=(1,), context_lens=(context_len,), counts=(batch_size,))

    @property
    def groups(self) -> tuple[tuple[int, int, int], ...]:
        """``(query_len, context_len, count)`` per group."""
        return tuple(zip(self.query_lens, self.context_lens, self.counts))

    @property
    def num_requests(self) -> int:
        return sum(self.counts)

    @property
    def num_tokens(self) -> int:
        return sum(q * n for q, n in zip(self.query_lens, self.counts))

    @property
    def kv_tokens(self) -> int:
        """Cache slots the step touches: context plus the new tokens, all requests."""
        return sum(c * n for c, n in zip(self.context_lens, self.counts)) + self.num_tokens

    @property
    def is_decode(self) -> bool:
        """Every request adds one token (a pure decode step)."""
        return all(q == 1 for q in self.query_lens)

    @property
    def phase(self) -> str:
        """``decode`` | ``prefill`` (no cached context) | ``mixed``."""
        return "decode" if self.is_decode else ("prefill" if not any(self.context_lens) else "mixed")


@dataclass(frozen=True, kw_only=True)
class SimSpec:
    """Everything :func:`simcast.sim.simulate` needs for one forward step."""

    model: ModelSpec
    device: DeviceSpec
    parallel: ParallelSpec
    batch: Batch
    num_microbatches: int = 1
    partition: str = "vllm"
    send_residual: bool = True
    tp_sharded_send: bool = False
    collective_algorithm: str = "auto"
    engine: str | None = None  # vllm | sglang | trtllm: cost GEMM/attention/all-reduce with the profile's engine fits
    expert_imbalance: float = DEFAULT_EXPERT_IMBALANCE  # busiest expert rank's load / the uniform-routing expectation
    kv_cache_dtype: str = "auto"  # auto (model dtype) | bf16 | fp8
    chunked_prefill: ChunkedPrefill | None = None  # one prompt's chunks as the microbatches (replaces the split)
    cuda_graph: bool | None = None  # the step replays a captured CUDA graph; None: the engine's default rule
    # (simcast.core.cuda_graphs.captured: vLLM <= 512 tokens, SGLang/TRT-LLM decode up to their capture batch)
    decode_query_len: int = 1  # query tokens per request still run as a decode row: 1, or k + 1 in a
    # speculative verify step (vLLM's MLA reorder_batch_threshold = 1 + k; SGLang's TARGET_VERIFY graphs)

    def __post_init__(self) -> None:
        if self.chunked_prefill is not None:
            b = self.batch
            require(
                b.num_requests == 1 and b.context_lens == (0,),
                "chunked prefill",
                f"{b.num_requests} requests",
                "needs a prefill of one prompt (--batch 1, --phase prefill)",
            )
            require(
                sum(self.chunked_prefill.tokens) == b.num_tokens,
                "chunks",
                sum(self.chunked_prefill.tokens),
                f"must sum to the prompt's {b.num_tokens} tokens",
            )
        require(
            self.engine is None or self.engine in ENGINES, "--engine", self.engine, f"allowed: {', '.join(ENGINES)}"
        )
        require(
            self.expert_imbalance >= 1.0,
            "--expert-imbalance",
            self.expert_imbalance,
            "must be >= 1 (1 = uniform routing)",
        )
        require(
            self.kv_cache_dtype in ("auto", "bf16", "fp8"),
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            "allowed: auto, bf16, fp8",
        )
        require(self.num_microbatches >= 1, "--microbatches", self.num_microbatches, "must be >= 1")
        require(self.decode_query_len >= 1, "decode_query_len", self.decode_query_len, "must be >= 1")
        require(
            self.collective_algorithm in ("auto", "ring", "tree"),
            "collective_algorithm",
            self.collective_algorithm,
            "allowed: auto, ring, tree",
        )

    def captured(self, batch: Batch) -> bool:
        """Whether a step (microbatch) on ``batch`` runs from a captured CUDA graph: ``cuda_graph`` when
        given, else the engine's default (:func:`simcast.core.cuda_graphs.captured`)."""
        if self.cuda_graph is not None:
            return self.cuda_graph
        return cuda_graphs.captured(
            self.engine, batch, self.device.hbm_bytes / GIB, self.parallel.tp, self.decode_query_len
        )

    @property
    def boundary_tensors(self) -> int:
        """Tensors crossing a stage boundary: hidden states, plus the residual unless ``send_residual`` is off."""
        return 2 if self.send_residual else 1
