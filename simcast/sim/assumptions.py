"""The assumption records of a :func:`simcast.sim.simulate.simulate` report: what each number rests on
(roofline, peaks, traces, schedule, MoE/quantisation/KV notes, the layout's links). Records only
(:mod:`simcast.core.assumption`); :mod:`simcast.render.assumption_text` words them."""

from __future__ import annotations

from collections.abc import Sequence

from simcast.core import assumption as A
from simcast.core.assumption import Assumption, Topic
from simcast.core.kv import linear_state_bytes
from simcast.core.layout import Path, pp_hop_cross_pairs
from simcast.core.linear_attention import SSM_STATE_BYTES
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE, ROUTING_GINI
from simcast.core.moe_layout import moe_comm_mode
from simcast.core.plan import SendRecvEdge
from simcast.core.specs import GIB, Batch, SimSpec
from simcast.core.weights import weight_format
from simcast.cost.comm.time import hierarchical
from simcast.cost.kernels import engine_cost
from simcast.engines.cuda_graphs import graph_facts


def _rec(topic: Topic, facts: object, approximation: bool = False) -> Assumption:
    return Assumption(topic=topic, facts=facts, approximation=approximation)


def _step(spec: SimSpec, micro: Sequence[Batch]) -> list[Assumption]:
    """Roofline, peaks, traces, microbatches or chunks, schedule."""
    dev, e = spec.device, spec.device.efficiency
    roof = A.Roofline(
        launch_overhead_s=e.launch_overhead_s,
        matmul_efficiency=e.matmul,
        vector_efficiency=e.vector,
        memory_efficiency=e.memory,
        matmul_half_m_ridge=e.matmul_half_m_ridge,
        matmul_half_n=e.matmul_half_n,
        matmul_half_k=e.matmul_half_k,
    )
    cp = spec.chunked_prefill
    return [
        _rec(Topic.ROOFLINE, roof, approximation=not roof.saturating),
        _rec(
            Topic.DTYPE_PEAKS,
            A.DtypePeaks(
                dtype=spec.model.dtype,
                matmul_peak_flops_per_s=dev.matmul_peak(spec.model.dtype),
                hbm_bw_bytes_per_s=dev.hbm_bw_bytes_per_s,
                device_name=dev.name,
            ),
        ),
        _rec(Topic.TRACES, A.StageTraces()),
        (
            _rec(Topic.MICROBATCHES, A.Microbatches(count=len(micro), requested=spec.num_microbatches))
            if cp is None
            else _rec(
                Topic.CHUNKED_PREFILL,
                A.ChunkedPipeline(
                    chunk_tokens=cp.tokens, max_in_flight=cp.max_in_flight, engine_rule=cp.engine_rule, note=cp.note
                ),
            )
        ),
        _rec(Topic.SCHEDULE, A.Schedule()),
    ]


def _model(spec: SimSpec, micro: Sequence[Batch]) -> list[Assumption]:
    """Engine kernels, CUDA graphs, MoE, MLA, sliding window, weight format, KV dtype, fp8, microbatch limit."""
    dev, par, m = spec.device, spec.parallel, spec.model
    out = []
    if spec.engine is not None:
        dense = m.quant.dense_format if m.quant is not None and m.quant.dense_format != m.dtype else None
        experts = "" if m.moe is None else (m.quant.expert_format if m.quant is not None else m.dtype)
        used = engine_cost.kernel_sources(dev, spec.engine, m.dtype, gemm_dtype=dense, moe=experts)
        generic = not used.profile_has_engines or any(not k.fitted_by for k in used.kernels)
        out.append(_rec(Topic.ENGINE_KERNELS, used, approximation=generic))
        out.append(
            _rec(
                Topic.CUDA_GRAPHS,
                graph_facts(
                    spec.engine, micro[0], dev.hbm_bytes / GIB, par.tp, spec.cuda_graph, dict(spec.engine_settings)
                ),
            )
        )
    if m.moe is not None:
        routing = A.MoeRouting(
            num_experts=m.moe.num_experts,
            top_k=m.moe.top_k,
            ep=par.ep,
            moe_tp=par.moe_tp,
            moe_dp=par.moe_dp,
            expert_imbalance=spec.expert_imbalance,
            default_imbalance=spec.expert_imbalance == DEFAULT_EXPERT_IMBALANCE,
            routing_gini=ROUTING_GINI,
            comm_mode=moe_comm_mode(par) or "",
        )
        out.append(_rec(Topic.MOE, routing))
        if not spec.moe_comm.is_default:
            out.append(_rec(Topic.MOE_COMM, moe_comm_facts(spec), approximation=True))
        layout = _moe_layout(spec)
        if layout is not None:
            out.append(_rec(Topic.MOE_LAYOUT, layout, approximation=layout.eplb or layout.active_dp_ranks > 0))
    if m.mla is not None:
        out.append(_rec(Topic.MLA, A.Mla(cache_width_elements=m.mla.cache_width)))
    if m.layer_types and m.sliding_window:
        out.append(_rec(Topic.SLIDING_WINDOW, A.SlidingWindow(window_tokens=m.sliding_window), approximation=True))
    if m.layer_types and m.attention_chunk_size:
        chunked = A.ChunkedAttention(
            chunk_tokens=m.attention_chunk_size,
            chunked_layers=sum(m.is_chunked(i) for i in range(m.num_layers)),
            num_layers=m.num_layers,
        )
        out.append(_rec(Topic.CHUNKED_ATTENTION, chunked, approximation=True))
    if m.linear is not None:
        tp = spec.parallel.tp
        lin = A.LinearAttention(
            linear_layers=sum(m.is_linear(i) for i in range(m.num_layers)),
            num_layers=m.num_layers,
            state_bytes_per_request=sum(linear_state_bytes(m, i, tp) for i in range(m.num_layers)),
            state_elem_bytes=SSM_STATE_BYTES,
        )
        out.append(_rec(Topic.LINEAR_ATTENTION, lin, approximation=True))
    wf = weight_format(m)
    if wf is not None:
        out.append(_rec(Topic.WEIGHT_FORMAT, wf))
    if spec.kv_cache_dtype != "auto":
        out.append(_rec(Topic.KV_DTYPE, A.KvCacheDtype(kv_cache_dtype=spec.kv_cache_dtype, from_flag=False)))
    if m.dtype == "fp8":
        fitted = spec.engine is not None and engine_cost.pick(dev, spec.engine, "gemm", "fp8")[0] is not None
        fp8 = A.Fp8(engine_fitted_gemm=fitted, fp8_vector_peak="fp8" in dev.vector_flops_per_s)
        out.append(_rec(Topic.FP8, fp8, approximation=True))
    if spec.chunked_prefill is None and len(micro) < spec.num_microbatches:
        out.append(_rec(Topic.MICROBATCH_LIMIT, A.MicrobatchLimit(count=len(micro)), approximation=True))
    return out


def _moe_layout(spec: SimSpec) -> A.MoeLayout | None:
    """The MoE layout record when one of its rules acts (replicas, one busy DP rank, redundant experts, EPLB)."""
    from simcast.core.moe_layout import replicas_share_nothing
    from simcast.core.moe_placement import expert_slots, rank_imbalance

    par, m = spec.parallel, spec.model.moe
    assert m is not None
    share = replicas_share_nothing(par)
    if not (share or spec.active_dp_ranks or par.redundant_experts or par.eplb):
        return None
    return A.MoeLayout(
        replicas_share_nothing=share,
        active_dp_ranks=spec.active_dp_ranks,
        dp=par.dp,
        ep=par.ep,
        expert_slots=expert_slots(m.num_experts, par.redundant_experts, par.ep),
        redundant_experts=par.redundant_experts,
        eplb=par.eplb,
        rank_imbalance=rank_imbalance(spec),
    )


def _pipeline(
    spec: SimSpec, hops: Sequence[Sequence[Path]], tp_paths: Sequence[Path], layer_counts: Sequence[int]
) -> list[Assumption]:
    """PP send, PP hop, TP-sharded send, partition."""
    par, links = spec.parallel, spec.device.links
    pairs = sorted({(h.name, h.cross_node) for hop in hops for h in hop})
    out = [
        _rec(
            Topic.PP_SEND,
            A.PpSend(
                send_residual=spec.send_residual, tp_sharded_send=spec.tp_sharded_send, tp=par.tp, links=tuple(pairs)
            ),
        )
    ]
    if par.tp > 1 or par.dp > 1:
        mixed = tuple(
            A.MixedHop(
                src_stage=s,
                dst_stage=s + 1,
                cross_node_pairs=pp_hop_cross_pairs(SendRecvEdge(src_stage=s, dst_stage=s + 1), par, links),
                pairs=par.tp * par.dp,
            )
            for s, hop in enumerate(hops)
            if len(hop) > 1
        )
        out.append(_rec(Topic.PP_HOP, A.PpHop(tp_sharded_send=spec.tp_sharded_send, mixed_hops=mixed)))
    if spec.tp_sharded_send and par.tp > 1:
        tp_links = tuple(sorted({p.name for p in tp_paths[1:]}))
        sharded = A.TpShardedSend(boundary_tensors=spec.boundary_tensors, tp_links=tp_links)
        out.append(_rec(Topic.TP_SHARDED_SEND, sharded))
    if layer_counts:
        out.append(_rec(Topic.PARTITION, A.Partition(partition=spec.partition, layer_counts=tuple(layer_counts))))
    return out


def _tensor_parallel(spec: SimSpec, tp_paths: Sequence[Path]) -> list[Assumption]:
    """TP collectives and TP groups across nodes."""
    dev, par = spec.device, spec.parallel
    fitted = all(p.collectives for p in tp_paths)
    engine_ar = spec.engine is not None and engine_cost.pick(dev, spec.engine, "all_reduce")[0] is not None
    coll = A.TpCollectives(
        fitted=fitted,
        piecewise=fitted and any(f.max_bytes for p in tp_paths for f in p.collectives),
        algorithm=spec.collective_algorithm,
        engine_all_reduce=spec.engine if engine_ar and spec.engine is not None else "",
        links=tuple(sorted({p.name for p in tp_paths})),
    )
    out = [_rec(Topic.TP_COLLECTIVES, coll, approximation=not fitted)]
    spans = sorted(
        {
            (h.nodes, h.ranks_per_node)
            for p in tp_paths
            if (h := p.hierarchy) is not None and hierarchical(p, "all_reduce", par.tp)
        }
    )
    if spans:
        out.append(_rec(Topic.TP_ACROSS_NODES, A.TpAcrossNodes(spans=tuple(spans))))
    return out


def assumptions(
    spec: SimSpec,
    micro: Sequence[Batch],
    hops: Sequence[Sequence[Path]],
    tp_paths: Sequence[Path],
    layer_counts: Sequence[int] = (),
) -> tuple[Assumption, ...]:
    """What the numbers assume, as records (``hops``: the distinct pair paths of each PP hop)."""
    par, links = spec.parallel, spec.device.links
    out = _step(spec, micro) + _model(spec, micro)
    if par.world_size > links.devices_per_node or links.inter_node_origin:
        ln = links.inter_node
        fabric = A.InterNodeLink(
            bw_bytes_per_s=ln.bw_bytes_per_s,
            latency_s=ln.latency_s,
            efficiency=ln.efficiency,
            link_name=ln.name,
            origin=links.inter_node_origin,
        )
        out.append(_rec(Topic.INTER_NODE, fabric))
    if par.pp > 1:
        out += _pipeline(spec, hops, tp_paths, layer_counts)
    if par.tp > 1:
        out += _tensor_parallel(spec, tp_paths)
    if par.dense_ffn or par.lm_head:  # the engine's dense-MLP / LM-head groups (simcast.engines.sglang_layers)
        groups = A.LayerGroups(
            dense_ffn=par.dense_ffn
            if any(not spec.model.is_moe_layer(i) for i in range(spec.model.num_layers))
            else "",
            lm_head=par.lm_head,
            group_ranks=par.tp * par.dp,
            attention_tp=par.tp,
            dp_ranks=par.dp,
        )
        out.append(_rec(Topic.LAYER_GROUPS, groups, approximation=True))
    return tuple(out)


def moe_comm_facts(spec: SimSpec) -> A.MoeComm:
    """The MoE communication record of ``spec`` (non-default flags, an MoE model)."""
    from simcast.cost.comm.deepep import nodes_per_token
    from simcast.engines import get_engine

    moe, par = spec.model.moe, spec.parallel
    assert moe is not None
    plan = get_engine(spec.engine).moe_comm_plan(spec.moe_comm)
    g = min(par.ep, spec.device.links.devices_per_node)
    nodes = max(1, par.ep // max(1, g))
    n, grouped = nodes_per_token(moe.num_experts, moe.top_k, nodes, moe.expert_groups, moe.topk_groups)
    return A.MoeComm(
        deepep=plan.deepep,
        prefill_mode=plan.mode_for(False),
        decode_mode=plan.mode_for(True),
        nodes=nodes,
        nodes_per_token=n,
        grouped_routing=grouped,
        expert_groups=moe.expert_groups,
        topk_groups=moe.topk_groups,
        two_batch_overlap=plan.two_batch_overlap,
        single_batch_overlap=plan.single_batch_overlap,
        source=plan.source,
    )
