"""What a result's numbers rest on, as typed records: one :class:`Assumption` per fact a report states.

A record is a :class:`Topic` and the facts of that topic (a frozen dataclass of numbers with units in
their names, names and flags), never a sentence: ``sim/`` and ``core/`` produce records and
:mod:`simcast.render.assumption_text` words them (one formatter per topic). A caller that shows only
some of them selects by topic (:data:`LAYOUT_TOPICS`), never by the text. Serving-layer notes are
records too (a serving topic whose facts are a :class:`Note`: text built in ``serving/``), so a
result's assumptions are one typed tuple. ``approximation`` marks a record that labels an
approximation or a fallback.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from simcast.core.assumption_moe import MoeComm as MoeComm
from simcast.core.assumption_moe import MoeLayout as MoeLayout
from simcast.core.device import InterNodeOrigin


class Topic(enum.Enum):
    """What an assumption is about (its value is the name the JSON output gives it)."""

    ROOFLINE = "roofline"
    DTYPE_PEAKS = "dtype peaks"
    TRACES = "traces"
    MICROBATCHES = "microbatches"
    CHUNKED_PREFILL = "chunked prefill"
    MICROBATCH_LIMIT = "microbatch limit"
    SCHEDULE = "schedule"
    ENGINE_KERNELS = "engine kernels"
    CUDA_GRAPHS = "cuda graphs"
    MOE = "moe"
    MOE_COMM = "moe comm"
    MOE_LAYOUT = "moe layout"
    MLA = "mla"
    SLIDING_WINDOW = "sliding window"
    CHUNKED_ATTENTION = "chunked attention"
    LINEAR_ATTENTION = "linear attention"
    WEIGHT_FORMAT = "weight format"
    KV_DTYPE = "kv dtype"
    FP8 = "fp8"
    INTER_NODE = "inter-node fabric"
    PP_SEND = "pp send"
    PP_HOP = "pp hop"
    TP_SHARDED_SEND = "tp-sharded send"
    PARTITION = "partition"
    PARTITION_RESOLVED = "partition resolved"
    TP_COLLECTIVES = "tp collectives"
    TP_ACROSS_NODES = "tp across nodes"
    LAYER_GROUPS = "layer groups"
    SPECULATIVE_STEP = "speculative step"
    # serving-layer notes (facts: a Note whose text serving/ builds)
    SERVING_ENGINE = "serving engine"
    STEADY_STATE = "steady state"
    SERVING_TTFT = "serving ttft"
    SERVING_PATH = "serving path"
    SERVING_MEMORY = "serving memory"
    SPECULATIVE = "speculative"
    SPECULATIVE_TPOT = "speculative tpot"
    DISAGG_LAYOUT = "disagg layout"
    DISAGG_PREFILL_POOL = "disagg prefill pool"
    DISAGG_QUEUE = "disagg queue"
    DISAGG_DECODE_POOL = "disagg decode pool"
    KV_TRANSFER = "kv transfer"
    DISAGG_TTFT = "disagg ttft"
    DISAGG_BALANCE = "disagg balance"
    DISAGG_SATURATION = "disagg saturation"
    DISAGG_REQUESTS = "disagg requests"
    DISAGG_KV_CAPACITY = "disagg kv capacity"
    DISAGG_NOT_MODELLED = "disagg not modelled"


LAYOUT_TOPICS = frozenset(
    {
        Topic.INTER_NODE,
        Topic.PP_HOP,
        Topic.PARTITION,
        Topic.PARTITION_RESOLVED,
        Topic.TP_ACROSS_NODES,
        Topic.MOE_COMM,
    }
)
"""The records about the fabric, the PP hops, the layer partition, cross-node TP groups and the MoE
all-to-all with its overlaps (the ones the serving estimate repeats from its prefill report)."""


@dataclass(frozen=True, kw_only=True)
class Note:
    """A serving-layer note: its text is built in ``serving/`` (or ``api/``), above the step simulator."""

    text: str


@dataclass(frozen=True, kw_only=True)
class Roofline:
    """The per-op roofline and its efficiencies (fractions of peak); GEMM half points 0 when not fitted."""

    launch_overhead_s: float
    matmul_efficiency: float
    vector_efficiency: float
    memory_efficiency: float
    matmul_half_m_ridge: float  # M at half efficiency, in multiples of the ridge point
    matmul_half_n: float
    matmul_half_k: float

    @property
    def saturating(self) -> bool:
        """Whether GEMM efficiency is a fitted curve in M, N, K (else constants)."""
        return bool(self.matmul_half_m_ridge or self.matmul_half_n or self.matmul_half_k)


@dataclass(frozen=True, kw_only=True)
class DtypePeaks:
    dtype: str
    matmul_peak_flops_per_s: float
    hbm_bw_bytes_per_s: float
    device_name: str


@dataclass(frozen=True, kw_only=True)
class StageTraces:
    """Stage-local modules traced by torch.compile, one representative decoder layer replayed per stage."""


@dataclass(frozen=True, kw_only=True)
class Microbatches:
    count: int
    requested: int


@dataclass(frozen=True, kw_only=True)
class ChunkedPipeline:
    """One prompt's chunks flowing through the stages as microbatches."""

    chunk_tokens: tuple[int, ...]
    max_in_flight: int | None  # None: no cap
    engine_rule: str  # the engine whose pipelined-prefill rule applies ("" none: chunks overlap, no cap)
    note: str  # what chose the chunks (the caller's words)


@dataclass(frozen=True, kw_only=True)
class MicrobatchLimit:
    """Fewer microbatches than requested: the batch cannot be split further."""

    count: int


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """Fill-drain over stage time = compute + incoming send/recv."""


@dataclass(frozen=True, kw_only=True)
class KernelSource:
    """How one kernel kind is costed: ``fitted_by`` the engine whose fit is used ("" none: generic)."""

    kind: str  # gemm | prefill | decode | all_reduce | moe | dispatch
    dtype: str  # the fit's family (for dispatch: the DeepEP mode)
    fitted_by: str
    quantised_weights: bool = False  # a GEMM whose weights' format differs from the model dtype


@dataclass(frozen=True, kw_only=True)
class KernelsUsed:
    """The kernels of ``engine`` on ``device_name`` (``engine`` None: the generic roofline, no engine)."""

    engine: str | None
    device_name: str
    profile_has_engines: bool
    kernels: tuple[KernelSource, ...]
    tables_from: tuple[str, ...]  # engines whose fit tables are used (their ``engines.<e>.source``)


@dataclass(frozen=True, kw_only=True)
class CudaGraphs:
    engine: str
    captured: bool
    set_by_caller: bool
    capture_limit: int  # the engine's default largest captured step
    limit_counts: str  # "tokens" | "requests": what capture_limit counts


@dataclass(frozen=True, kw_only=True)
class MoeRouting:
    num_experts: int
    top_k: int
    ep: int
    moe_tp: int
    moe_dp: int
    expert_imbalance: float
    default_imbalance: bool  # the published routing-skew default
    routing_gini: float
    comm_mode: str  # "" when no MoE communication


@dataclass(frozen=True, kw_only=True)
class Mla:
    cache_width_elements: int  # latent cache per token per layer


@dataclass(frozen=True, kw_only=True)
class SlidingWindow:
    window_tokens: int


@dataclass(frozen=True, kw_only=True)
class ChunkedAttention:
    """Llama-4's chunked local attention: ``chunked_layers`` of ``num_layers`` see only their own chunk."""

    chunk_tokens: int
    chunked_layers: int
    num_layers: int


@dataclass(frozen=True, kw_only=True)
class LinearAttention:
    """Gated DeltaNet layers: ``linear_layers`` of ``num_layers``, each request's constant state on one rank."""

    linear_layers: int
    num_layers: int
    state_bytes_per_request: int
    state_elem_bytes: int


@dataclass(frozen=True, kw_only=True)
class WeightFormat:
    """Each layer role's weight format from a config's ``quantization_config``."""

    source: str
    method: str
    moe: bool
    expert_format: str
    expert_bytes_per_elem: float
    dense_format: str
    dense_bytes_per_elem: float
    activation_dtype: str


@dataclass(frozen=True, kw_only=True)
class KvCacheDtype:
    kv_cache_dtype: str
    from_flag: bool  # named as the ``--kv-cache-dtype`` flag (serving outputs)


@dataclass(frozen=True, kw_only=True)
class Fp8:
    engine_fitted_gemm: bool  # GEMMs from the engine's fitted fp8 kernels (else the fp8 peak)
    fp8_vector_peak: bool  # the profile has an fp8 vector peak (else fp32's)


@dataclass(frozen=True, kw_only=True)
class InterNodeLink:
    bw_bytes_per_s: float  # per GPU per direction
    latency_s: float
    efficiency: float
    link_name: str
    origin: InterNodeOrigin | None  # where its numbers come from (None: the device profile)


@dataclass(frozen=True, kw_only=True)
class PpSend:
    send_residual: bool
    tp_sharded_send: bool
    tp: int
    links: tuple[tuple[str, bool], ...]  # (link name, crosses nodes) of the hops' pairs


@dataclass(frozen=True, kw_only=True)
class MixedHop:
    """A PP hop some of whose rank pairs cross nodes."""

    src_stage: int
    dst_stage: int
    cross_node_pairs: int
    pairs: int


@dataclass(frozen=True, kw_only=True)
class PpHop:
    tp_sharded_send: bool
    mixed_hops: tuple[MixedHop, ...]


@dataclass(frozen=True, kw_only=True)
class TpShardedSend:
    boundary_tensors: int
    tp_links: tuple[str, ...]  # the receiving stages' TP links


@dataclass(frozen=True, kw_only=True)
class Partition:
    partition: str  # a rule name or explicit counts
    layer_counts: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class PartitionResolved:
    policy: str  # e.g. balanced
    layer_counts: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class TpCollectives:
    fitted: bool  # calibrated alpha + bytes/beta fits on every TP path
    piecewise: bool  # per message-size regime
    algorithm: str  # the formula's algorithm when not fitted
    engine_all_reduce: str  # the engine whose all-reduce fit is used inside a node ("" none)
    links: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TpAcrossNodes:
    spans: tuple[tuple[int, int], ...]  # (nodes, ranks per node) of the TP groups that span nodes


@dataclass(frozen=True, kw_only=True)
class SpeculativeStep:
    verify_tokens: int  # per request
    verify_s: float
    draft_passes: int
    draft_s: float
    tokens_per_step: float
    feature_draft: bool  # a draft fed the target's features (not n-gram)


@dataclass(frozen=True, kw_only=True)
class LayerGroups:
    """Where the dense MLP layers and the LM head run when not in the attention-TP group (the engine's rule:
    :mod:`simcast.engines.sglang_layers`): ``dense_ffn``/``lm_head`` as ``ParallelSpec`` names them, over
    ``group_ranks`` ranks (the stage's), attention TP ``attention_tp``, ``dp_ranks`` DP ranks."""

    dense_ffn: str
    lm_head: str
    group_ranks: int
    attention_tp: int
    dp_ranks: int


FACTS: dict[Topic, type] = {
    Topic.ROOFLINE: Roofline,
    Topic.LAYER_GROUPS: LayerGroups,
    Topic.DTYPE_PEAKS: DtypePeaks,
    Topic.TRACES: StageTraces,
    Topic.MICROBATCHES: Microbatches,
    Topic.CHUNKED_PREFILL: ChunkedPipeline,
    Topic.MICROBATCH_LIMIT: MicrobatchLimit,
    Topic.SCHEDULE: Schedule,
    Topic.ENGINE_KERNELS: KernelsUsed,
    Topic.CUDA_GRAPHS: CudaGraphs,
    Topic.MOE: MoeRouting,
    Topic.MOE_COMM: MoeComm,
    Topic.MOE_LAYOUT: MoeLayout,
    Topic.MLA: Mla,
    Topic.SLIDING_WINDOW: SlidingWindow,
    Topic.CHUNKED_ATTENTION: ChunkedAttention,
    Topic.LINEAR_ATTENTION: LinearAttention,
    Topic.WEIGHT_FORMAT: WeightFormat,
    Topic.KV_DTYPE: KvCacheDtype,
    Topic.FP8: Fp8,
    Topic.INTER_NODE: InterNodeLink,
    Topic.PP_SEND: PpSend,
    Topic.PP_HOP: PpHop,
    Topic.TP_SHARDED_SEND: TpShardedSend,
    Topic.PARTITION: Partition,
    Topic.PARTITION_RESOLVED: PartitionResolved,
    Topic.TP_COLLECTIVES: TpCollectives,
    Topic.TP_ACROSS_NODES: TpAcrossNodes,
    Topic.SPECULATIVE_STEP: SpeculativeStep,
}
"""The facts type of each topic; a topic not listed is a serving note (:class:`Note`)."""


@dataclass(frozen=True, kw_only=True)
class Assumption:
    """One thing a result's numbers rest on: its topic and the facts it states."""

    topic: Topic
    facts: object  # an instance of FACTS[topic] (Note for a serving topic)
    approximation: bool = False  # the record labels an approximation or a fallback

    def __post_init__(self) -> None:
        want = FACTS.get(self.topic, Note)
        if not isinstance(self.facts, want):  # a programming error, not user input
            raise TypeError(f"{self.topic}: facts must be {want.__name__}, got {type(self.facts).__name__}")


def note(topic: Topic, text: str, *, approximation: bool = False) -> Assumption:
    """A serving-layer record: ``topic`` with ``text`` built above the step simulator."""
    return Assumption(topic=topic, facts=Note(text=text), approximation=approximation)


def of_topic(records: tuple[Assumption, ...], *topics: Topic) -> tuple[Assumption, ...]:
    """The records of ``records`` whose topic is one of ``topics``, in their order."""
    return tuple(a for a in records if a.topic in topics)
