"""A step's :class:`Report` from its op costs: PP send/recv at the stage boundaries, the fill-drain
schedule, memory per stage and the assumptions (shared by :func:`simcast.sim.simulate.simulate` and the
many-batch costing of :mod:`simcast.sim.batched`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcast.core.assumption import Assumption
from simcast.core.kv import kv_dtype_bytes
from simcast.core.layout import Path, pp_hop_paths
from simcast.core.memory import stage_activation_bytes, stage_kv_cache_bytes, stage_weight_bytes
from simcast.core.model_spec import ModelSpec
from simcast.core.plan import PipelineStagePlan
from simcast.core.schedule import (
    PipelineRuntimeEstimate,
    PipelineSendRecvEvent,
    estimate_pipeline_runtime,
)
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, SimSpec
from simcast.cost.comm.time import all_gather_s, p2p_s
from simcast.cost.ops.op_work import OpCost
from simcast.sim.assumptions import assumptions


@dataclass(frozen=True, kw_only=True)
class StageReport:
    """One pipeline stage on one rank; times per microbatch (mean), bytes per rank."""

    stage_id: int
    start_layer: int
    end_layer: int
    num_layers: int
    compute_s: float  # traced ops incl. TP collectives
    tp_comm_s: float  # the TP-collective part of compute_s
    comm_s: float  # PP recv: the incoming hop (+ the TP all-gather of a sharded send); sends are not charged
    stage_s: float
    weight_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    tp_link: str
    ops: tuple[OpCost, ...]  # of the first microbatch, with replay counts
    microbatch_ops: tuple[tuple[OpCost, ...], ...] = ()  # per microbatch (identical ones share the tuple)


@dataclass(frozen=True, kw_only=True)
class Report:
    spec: SimSpec
    plan: PipelineStagePlan
    stages: tuple[StageReport, ...]
    runtime: PipelineRuntimeEstimate
    microbatches: tuple[Batch, ...]
    op_bound_s: dict[str, float]  # Mem / Comm / Cube / Vec seconds summed over stages (one microbatch each)
    assumptions: tuple[Assumption, ...]  # typed records; simcast.render.assumption_text words them
    traces_compiled: int  # stage traces compiled in this call (0 = all from cache)

    @property
    def latency_s(self) -> float:
        return self.runtime.latency_s

    @property
    def breakdown(self) -> dict[str, float]:
        return self.runtime.breakdown

    @property
    def moe_share(self) -> dict[str, float]:
        """Shares of the summed op time (all stages, mean microbatch): grouped expert GEMMs and
        dispatch/combine (all-to-all or all-gather/reduce-scatter)."""
        tot = sum(self.op_bound_s.values()) or 1.0

        def part(names: tuple[str, ...]) -> float:
            return (
                sum(o.time_s * o.count for st in self.stages for mb in st.microbatch_ops for o in mb if o.op in names)
                / max(1, len(self.microbatches))
                / tot
            )

        return {
            "grouped_gemm": part(("simcast::moe_experts",)),
            "dispatch_combine": part(("simcast::moe_dispatch", "simcast::moe_combine")),
        }

    @property
    def max_stage_weight_bytes(self) -> int:
        return max(s.weight_bytes for s in self.stages)

    @property
    def max_stage_kv_cache_bytes(self) -> int:
        return max(s.kv_cache_bytes for s in self.stages)

    @property
    def max_stage_memory_bytes(self) -> int:
        return max(s.weight_bytes + s.kv_cache_bytes + s.activation_bytes for s in self.stages)


def pp_message_bytes(num_tokens: int, model: ModelSpec, n_tensors: int, tp_shards: int) -> int:
    """Hidden states crossing a stage boundary: ``tokens · hidden · dtype_bytes · n_tensors / tp_shards``."""
    return num_tokens * model.hidden_size * model.dtype_bytes * n_tensors // tp_shards


def pp_hops(spec: SimSpec, plan: PipelineStagePlan) -> list[tuple[Path, ...]]:
    """The pair paths of each PP hop (every TP rank pair sends at once)."""
    return [tuple(pp_hop_paths(e, spec.parallel, spec.device.links)) for e in plan.send_recv_edges]


def recv_times(
    spec: SimSpec,
    plan: PipelineStagePlan,
    hops: Sequence[Sequence[Path]],
    tp_paths: Sequence[Path],
    num_tokens: int,
    microbatch: int = 0,
) -> tuple[list[float], list[PipelineSendRecvEvent]]:
    """Each stage's incoming PP time for a microbatch of ``num_tokens`` tokens, and the send/recv events.

    The receiver pays: like vLLM's irecv it waits for the data before computing. The sender's isend
    returns at once (its wait sits at the start of its next step, long done), so the send is free.
    """
    model, par = spec.model, spec.parallel
    n_tensors = spec.boundary_tensors
    shards = par.tp if spec.tp_sharded_send else 1
    comm = [0.0] * par.pp
    events: list[PipelineSendRecvEvent] = []
    for edge, pair_paths in zip(plan.send_recv_edges, hops):
        nbytes = pp_message_bytes(num_tokens, model, n_tensors, shards)  # what each TP rank sends
        t, hop = max(((p2p_s(nbytes, p), p) for p in pair_paths), key=lambda x: x[0])  # the slowest pair
        dst = edge.dst_stage
        gather = 0.0
        if shards > 1:  # vLLM: each received tensor is all-gathered over the receiver's TP group before use
            gather = n_tensors * all_gather_s(pp_message_bytes(num_tokens, model, 1, 1), par.tp, tp_paths[dst])
        events.append(
            PipelineSendRecvEvent(
                src_stage=edge.src_stage,
                dst_stage=dst,
                message_bytes=nbytes,
                latency_s=t,
                link=hop.name,
                microbatch=microbatch,
                all_gather_s=gather,
            )
        )
        comm[dst] += t + gather
    return comm, events


def report_from_ops(
    spec: SimSpec,
    plan: PipelineStagePlan,
    tp_paths: Sequence[Path],
    micro: Sequence[Batch],
    stage_ops: Sequence[Sequence[tuple[OpCost, ...]]],
    compiled: int,
) -> Report:
    """The :class:`Report` of ``spec`` from its op costs ``stage_ops[stage][microbatch]``: PP send/recv at
    the stage boundaries, the fill-drain schedule, memory per stage and the assumptions."""
    model, par = spec.model, spec.parallel
    sd = sharded_dims(model, par.tp)
    hops = pp_hops(spec, plan)
    events: list[PipelineSendRecvEvent] = []
    compute = [[0.0] * par.pp for _ in micro]
    comm: list[list[float]] = []
    for m, mb in enumerate(micro):
        for s in range(par.pp):
            compute[m][s] = sum(o.time_s * o.count for o in stage_ops[s][m])
        recv, evs = recv_times(spec, plan, hops, tp_paths, mb.num_tokens, m)
        comm.append(recv)
        events += evs
    cap = spec.chunked_prefill.max_in_flight if spec.chunked_prefill is not None else None
    runtime = estimate_pipeline_runtime(compute, comm, events, cap)

    stages, op_bound = [], {"Mem": 0.0, "Comm": 0.0, "Cube": 0.0, "Vec": 0.0}
    for s, (info, mods) in enumerate(zip(plan.stage_infos, plan.stage_module_specs)):
        tp_comm = sum(o.time_s * o.count for mb_ops in stage_ops[s] for o in mb_ops if o.bound == "Comm") / len(micro)
        for mb_ops in stage_ops[s]:
            for o in mb_ops:
                op_bound[o.bound] += o.time_s * o.count / len(micro)
        stages.append(
            StageReport(
                stage_id=s,
                start_layer=info.start_layer,
                end_layer=info.end_layer,
                num_layers=info.num_layers,
                compute_s=runtime.stage_compute_times_s[s],
                tp_comm_s=tp_comm,
                comm_s=runtime.stage_comm_times_s[s],
                stage_s=runtime.stage_times_s[s],
                weight_bytes=stage_weight_bytes(model, sd, info, mods, par),
                kv_cache_bytes=stage_kv_cache_bytes(
                    model, sd, info, spec.batch, kv_dtype_bytes(model, spec.kv_cache_dtype)
                ),
                activation_bytes=max(stage_activation_bytes(model, sd, mods, mb) for mb in micro),
                tp_link=tp_paths[s].name if par.tp > 1 else "-",
                ops=tuple(stage_ops[s][0]),
                microbatch_ops=tuple(tuple(x) for x in stage_ops[s]),
            )
        )

    return Report(
        spec=spec,
        plan=plan,
        stages=tuple(stages),
        runtime=runtime,
        microbatches=tuple(micro),
        op_bound_s=op_bound,
        assumptions=assumptions(spec, micro, hops, tp_paths, plan.layer_counts),
        traces_compiled=compiled,
    )
