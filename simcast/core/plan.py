"""Pipeline stage plan: which decoder layers and edge modules each stage owns.

A pure function of (layer count, pp size, partition); errors are one line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from simcast.core.errors import SimcastInputError, require


@dataclass(frozen=True, kw_only=True)
class PipelineStageInfo:
    """Layers ``[start_layer, end_layer)`` of ``total_layers`` run on stage ``stage_id``."""

    stage_id: int
    num_stages: int
    start_layer: int
    end_layer: int
    total_layers: int

    @property
    def enabled(self) -> bool:
        return self.num_stages > 1

    @property
    def is_first_stage(self) -> bool:
        return self.stage_id == 0

    @property
    def is_last_stage(self) -> bool:
        return self.stage_id == self.num_stages - 1

    @property
    def active_layer_indices(self) -> range:
        return range(self.start_layer, self.end_layer)

    @property
    def num_layers(self) -> int:
        return self.end_layer - self.start_layer

    def owns_layer(self, layer_idx: int) -> bool:
        return self.start_layer <= layer_idx < self.end_layer


@dataclass(frozen=True, kw_only=True)
class StageModuleSpec:
    """Edge modules a stage holds besides its decoder layers."""

    stage_id: int
    embedding: bool
    final_norm: bool
    lm_head: bool
    embedding_weights: bool  # True on stage 0, and on the last stage when embeddings are tied (vLLM)
    input_kind: str  # "input_ids" on stage 0, "inputs_embeds" elsewhere


@dataclass(frozen=True, kw_only=True)
class SendRecvEdge:
    """Hidden states (+ residual) flow ``src_stage -> dst_stage``."""

    src_stage: int
    dst_stage: int


@dataclass(frozen=True, kw_only=True)
class PipelineStagePlan:
    stage_infos: tuple[PipelineStageInfo, ...]
    stage_module_specs: tuple[StageModuleSpec, ...]
    send_recv_edges: tuple[SendRecvEdge, ...]
    partition: str

    def get_stage(self, stage_id: int) -> PipelineStageInfo:
        return self.stage_infos[stage_id]

    @property
    def layer_counts(self) -> tuple[int, ...]:
        return tuple(s.num_layers for s in self.stage_infos)


PARTITION_ENV_VARS = ("VLLM_PP_LAYER_PARTITION", "SGLANG_PP_LAYER_PARTITION")
"""The engines' environment variables for explicit layer counts; ``--partition`` takes their values as
written (``8,8,8,8``) or the whole assignment (``SGLANG_PP_LAYER_PARTITION=8,8,8,8``)."""

PARTITION_RULES: dict[str, str] = {
    "uniform": "ceil(L/P) layers per stage, the last stage truncated (the RFC's rule)",
    "vllm": "vLLM get_pp_indices: L//P per stage, the remainder one each to the stages before the last, "
    "from the back (vllm/distributed/utils.py@5a6541db; 22/4 -> 5,6,6,5)",
    "sglang": "SGLang get_pp_indices: L//P per stage, the remainder one each to the last stages "
    "(python/sglang/srt/distributed/utils.py@1107be11; 22/4 -> 5,5,6,6)",
    "trtllm": "TensorRT-LLM Mapping.pp_layers: torch.tensor_split, the remainder one each to the first stages "
    "(tensorrt_llm/mapping.py@b35ac1b6; 22/4 -> 6,6,5,5)",
    "balanced": "layer counts minimising the slowest stage (simcast.sim.partition)",
}
"""Named partition rules and where each comes from."""

_ENGINE_PARTITION = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}


def default_partition(engine: str | None) -> str:
    """The layer partition an engine applies when no explicit one is given (``vllm`` for none/unknown)."""
    return _ENGINE_PARTITION.get(engine or "", "vllm")


_MAX_PARTITION_CHARS = 8 * 1024
"""Longest explicit partition string read (a count of up to 6 digits and a comma per stage, PP <= 1024)."""

_PARTITION_ALLOWED = (
    "allowed: uniform, vllm, sglang, trtllm, balanced, or comma-separated layer counts (ASCII digits) like "
    "4,6,6,4 (also as VLLM_PP_LAYER_PARTITION=4,6,6,4 or SGLANG_PP_LAYER_PARTITION=4,6,6,4)"
)


def canonical_partition(partition: str) -> str:
    """``partition`` as simcast names it: a rule name, or explicit counts ``"8,8,8,8"`` (an engine env-var
    assignment ``VLLM_PP_LAYER_PARTITION=8,8,8,8``, quotes and spaces accepted); anything else (other
    digits than ASCII, ``_``, signs) is a one-line :class:`SimcastInputError`."""
    s = partition.strip()
    name, eq, value = s.partition("=")
    if eq and name.strip() in PARTITION_ENV_VARS:
        s = value.strip()
    s = s.strip("\"'").strip()
    if s in PARTITION_RULES:
        return s
    # ASCII digits only: int() also reads "1_4" and Arabic-Indic or full-width digits
    items = s.split(",")
    require(
        len(s) <= _MAX_PARTITION_CHARS and all(re.fullmatch(r" *[0-9]{1,6} *", x) for x in items),
        "--partition",
        partition,
        _PARTITION_ALLOWED,
    )
    return ",".join(x.strip() for x in items)


def _spread(total_layers: int, pp: int, order: list[int]) -> tuple[int, ...]:
    base, rem = divmod(total_layers, pp)
    counts = [base] * pp
    for i in order[:rem]:
        counts[i] += 1
    return tuple(counts)


def partition_layers(total_layers: int, pp: int, partition: str) -> tuple[int, ...]:
    """Layer count per stage.

    - ``uniform``: the RFC's ``ceil(L/P)`` per stage, the last one truncated.
    - ``vllm``: ``L // P`` each, the remainder spread over the stages before the
      last, as vLLM's ``get_pp_indices`` does (22/4 -> 5, 6, 6, 5).
    - ``sglang``: the remainder on the last stages, as SGLang's ``get_pp_indices`` (22/4 -> 5, 5, 6, 6).
    - ``trtllm``: the remainder on the first stages, as TensorRT-LLM's ``pp_layers`` (22/4 -> 6, 6, 5, 5).
    - explicit: ``"4,6,6,4"`` (or ``VLLM_PP_LAYER_PARTITION=4,6,6,4``), which must sum to ``total_layers``.
    - ``balanced`` depends on stage costs and is resolved by :mod:`simcast.sim.partition` first.
    """
    require(total_layers >= 1, "model.num_hidden_layers", total_layers, "must be >= 1")
    require(pp >= 1, "pp_size", pp, "must be >= 1")
    require(pp <= total_layers, "pp_size", pp, f"must be <= the model's {total_layers} layers")
    given, partition = partition, canonical_partition(partition)
    if partition == "uniform":
        per = math.ceil(total_layers / pp)
        counts = tuple(max(0, min((i + 1) * per, total_layers) - min(i * per, total_layers)) for i in range(pp))
    elif partition == "vllm":
        # remainder layers go to the stages before the last, starting from the back
        counts = _spread(total_layers, pp, [(pp - 2 - k) % pp for k in range(pp)] if pp > 1 else [0])
    elif partition == "sglang":
        counts = _spread(total_layers, pp, list(range(pp - 1, -1, -1)))
    elif partition == "trtllm":
        counts = _spread(total_layers, pp, list(range(pp)))
    elif partition == "balanced":
        raise SimcastInputError(
            "--partition",
            given,
            "balanced needs stage costs: resolve it with "
            "simcast.sim.partition.resolve_partition (simulate/serving do) before building "
            "the plan",
        )
    else:
        items = partition.split(",")  # ASCII digit counts: checked by canonical_partition
        require(len(partition) <= 8 * pp, "--partition", given, f"needs exactly pp_size={pp} layer counts")
        counts = tuple(int(x) for x in items)
        require(len(counts) == pp, "--partition", given, f"needs exactly pp_size={pp} layer counts")
        require(
            sum(counts) == total_layers,
            "--partition",
            given,
            f"layer counts must sum to the model's {total_layers} layers (got {sum(counts)})",
        )
    empty = [i for i, c in enumerate(counts) if c <= 0]
    require(
        not empty,
        "--partition",
        given,
        f"stage(s) {empty} would get no decoder layer ({list(counts)}); every stage needs >= 1 layer",
    )
    return counts


@lru_cache(maxsize=256)
def build_pipeline_stage_plan(
    total_layers: int, pp: int, partition: str = "vllm", tie_word_embeddings: bool = False
) -> PipelineStagePlan:
    """Stage infos, edge-module ownership and send/recv edges for ``pp`` stages (a frozen plan, built once
    per argument set: the demo search asks for the same few plans ~300 times)."""
    counts = partition_layers(total_layers, pp, partition)
    infos, specs, start = [], [], 0
    for i, c in enumerate(counts):
        infos.append(
            PipelineStageInfo(
                stage_id=i, num_stages=pp, start_layer=start, end_layer=start + c, total_layers=total_layers
            )
        )
        last = i == pp - 1
        specs.append(
            StageModuleSpec(
                stage_id=i,
                embedding=i == 0,
                final_norm=last,
                lm_head=last,
                embedding_weights=i == 0 or (last and tie_word_embeddings),
                input_kind="input_ids" if i == 0 else "inputs_embeds",
            )
        )
        start += c
    edges = tuple(SendRecvEdge(src_stage=i, dst_stage=i + 1) for i in range(pp - 1))
    return PipelineStagePlan(
        stage_infos=tuple(infos), stage_module_specs=tuple(specs), send_recv_edges=edges, partition=partition
    )
