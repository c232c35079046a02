"""Frozen, keyword-only specs: the layout, the batch and the run (:class:`SimSpec`, the input of
:func:`simcast.sim.simulate`, which holds a :class:`~simcast.core.model_spec.ModelSpec` and a
:class:`~simcast.core.device.DeviceSpec`).

Units are in the field names. Constructors validate and never touch files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcast.core.chunking import ChunkedPrefill
from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.core.kv import KV_CACHE_DTYPES, is_fp4_kv
from simcast.core.model_spec import ModelSpec
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE
from simcast.core.moe_comm import MoECommFlags

GIB = 2**30
"""Bytes in a GiB (the unit of every memory figure simcast prints)."""


LAYER_GROUPS = ("", "attention", "gathered", "scattered")
"""Where a dense MLP layer or the LM head runs (:attr:`ParallelSpec.dense_ffn`, :attr:`ParallelSpec.lm_head`)."""


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
    redundant_experts: int = 0  # redundant expert replicas over the EP group (SGLang --ep-num-redundant-experts)
    eplb: bool = False  # experts placed by load (EPLB: SGLang --enable-eplb, vLLM --enable-eplb)
    # where the dense MLP layers and the LM head run, as the engine resolves them (Engine.layer_groups):
    # "" the attention-TP group on its own tokens; "gathered" every DP rank's tokens over the tp*dp ranks of a stage;
    # "scattered" unsharded on 1/tp of the tokens (dense MLP only); "attention" the attention-TP group, as asked for
    dense_ffn: str = ""
    lm_head: str = ""

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
        require(self.dense_ffn in LAYER_GROUPS, "dense_ffn", self.dense_ffn, f"allowed: {LAYER_GROUPS}")
        require(self.lm_head in LAYER_GROUPS, "lm_head", self.lm_head, f"allowed: {LAYER_GROUPS}")
        require(
            isinstance(self.redundant_experts, int) and self.redundant_experts >= 0,
            "ep_num_redundant_experts",
            self.redundant_experts,
            "must be an integer >= 0",
        )
        require(
            not self.dp_attention or self.moe_dp < self.dp,
            "enable_dp_attention",
            self.dp_attention,
            f"needs moe_dp_size < dp_size = {self.dp} (the MoE layer spans the attention-DP groups; "
            "moe_dp = dp is independent replicas)",
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
    # (checked by simcast.sim.simulate.stage_setups against simcast.engines.ENGINES)
    expert_imbalance: float = DEFAULT_EXPERT_IMBALANCE  # busiest expert rank's load / the uniform-routing expectation
    kv_cache_dtype: str = "auto"  # auto (model dtype) | bf16 | fp8
    chunked_prefill: ChunkedPrefill | None = None  # one prompt's chunks as the microbatches (replaces the split)
    cuda_graph: bool | None = None  # the step replays a captured CUDA graph; None: the engine's default rule
    # (simcast.engines.cuda_graphs.step_captured: vLLM <= 512 tokens, SGLang/TRT-LLM decode up to their capture batch)
    moe_comm: MoECommFlags = MoECommFlags()  # MoE all-to-all backend and overlaps as given (the engine
    # resolves what it runs: simcast.engines.<engine>.moe_comm_plan)
    engine_settings: tuple[tuple[str, Any], ...] = ()  # the engine's own settings given (keyword, value), e.g.
    # SGLang's cuda_graph_max_bs (simcast.engines.flags; the engine's defaults for the others)
    active_dp_ranks: int = 0  # attention-DP: how many of the dp ranks carry ``batch`` this step (0: all of them);
    # one prompt on an idle attention-DP layout is prefilled by one DP rank (the others run idle MoE steps)
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
            self.expert_imbalance >= 1.0,
            "--expert-imbalance",
            self.expert_imbalance,
            "must be >= 1 (1 = uniform routing)",
        )
        require(
            self.kv_cache_dtype in KV_CACHE_DTYPES,
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            f"allowed: {', '.join(KV_CACHE_DTYPES)}",
        )
        require(
            not is_fp4_kv(self.kv_cache_dtype) or self.device.has_fp4,
            "--kv-cache-dtype",
            self.kv_cache_dtype,
            f"an FP4 KV cache needs FP4 tensor cores (Blackwell); {self.device.name} has none: use fp8",
        )
        require(self.num_microbatches >= 1, "--microbatches", self.num_microbatches, "must be >= 1")
        require(
            0 <= self.active_dp_ranks <= self.parallel.dp,
            "active_dp_ranks",
            self.active_dp_ranks,
            f"must be in 0..dp={self.parallel.dp} (0: every DP rank)",
        )
        require(self.decode_query_len >= 1, "decode_query_len", self.decode_query_len, "must be >= 1")
        require(
            self.collective_algorithm in ("auto", "ring", "tree"),
            "collective_algorithm",
            self.collective_algorithm,
            "allowed: auto, ring, tree",
        )

    @property
    def boundary_tensors(self) -> int:
        """Tensors crossing a stage boundary: hidden states, plus the residual unless ``send_residual`` is off."""
        return 2 if self.send_residual else 1
