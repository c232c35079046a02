"""Pipeline stage plan: which decoder layers and edge modules each stage owns (the records).

Built by :func:`simcast.engines.partition.build_pipeline_stage_plan`, a pure function of (layer count, pp size,
partition) whose named partitions are the engines' rules; errors are one line.
"""

from __future__ import annotations

from dataclasses import dataclass


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
