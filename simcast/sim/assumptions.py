"""The human-readable assumption lines of a :func:`simcast.sim.simulate.simulate` report: what
each number rests on (roofline, peaks, traces, schedule, MoE/quantisation/KV notes)."""

from __future__ import annotations

from collections.abc import Sequence

from simcast.core import cuda_graphs
from simcast.core.chunking import ChunkedPrefill, describe_chunks
from simcast.core.fabrics import describe_inter_node
from simcast.core.layout import Path, pp_hop_cross_pairs
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE, ROUTING_GINI
from simcast.core.moe_layout import moe_comm_mode
from simcast.core.plan import SendRecvEdge, describe_partition
from simcast.core.specs import GIB, Batch, SimSpec
from simcast.core.weights import weight_format_note
from simcast.cost import engine_cost
from simcast.cost.comm import hierarchical


def _chunk_line(cp: ChunkedPrefill) -> str:
    cap = "no cap" if cp.max_in_flight is None else f"at most {cp.max_in_flight} in flight"
    return (
        f"chunked pipeline prefill: {len(cp.tokens)} chunks of one prompt ({describe_chunks(cp.tokens)} tokens) "
        f"flow through the stages as microbatches, {cap}; chunk k attends to the KV of the chunks before it; "
        "latency = TTFT (the last chunk leaving the last stage); stage times are the mean over chunks"
        + (f"; {cp.rule}" if cp.rule else "")
    )


def assumptions(
    spec: SimSpec,
    micro: Sequence[Batch],
    hops: Sequence[Sequence[Path]],
    tp_paths: Sequence[Path],
    layer_counts: Sequence[int] = (),
) -> tuple[str, ...]:
    """Human-readable list of what the numbers assume (``hops``: the distinct pair paths of each PP hop)."""
    dev, par = spec.device, spec.parallel
    e = dev.efficiency
    out = [
        f"roofline per op: max(flops/(peak*eff), bytes/(hbm_bw*eff)) + {e.launch_overhead_s * 1e6:.1f} us launch; "
        f"eff matmul {e.matmul:.3g}, vector {e.vector:.3g}, memory {e.memory:.3g}"
        + (
            f"; GEMM efficiency saturates in M, N, K (half points {e.matmul_half_m_ridge:.3g} x ridge, "
            f"{e.matmul_half_n:.0f}, {e.matmul_half_k:.0f}; fitted)"
            if e.matmul_half_m_ridge or e.matmul_half_n or e.matmul_half_k
            else ""
        )
        + (" (constants)" if not (e.matmul_half_m_ridge or e.matmul_half_n or e.matmul_half_k) else ""),
        f"dtype {spec.model.dtype}: matmul peak {dev.matmul_peak(spec.model.dtype) / 1e12:.1f} TFLOP/s, "
        f"HBM {dev.hbm_bw_bytes_per_s / 1e12:.2f} TB/s ({dev.name})",
        "stage traces: torch.compile of stage-local modules, one representative decoder layer replayed per stage",
        (
            f"microbatches: {len(micro)} (requested {spec.num_microbatches}); stage times are per microbatch"
            if spec.chunked_prefill is None
            else _chunk_line(spec.chunked_prefill)
        ),
        "latency: fill-drain over stage time = compute + incoming send/recv (the receiver waits for the data, "
        "the sender's isend does not block it); bubble = latency - sum(stage times)",
    ]
    m = spec.model
    if spec.engine is not None:
        dense = m.quant.dense_format if m.quant is not None and m.quant.dense_format != m.dtype else None
        experts = "" if m.moe is None else (m.quant.expert_format if m.quant is not None else m.dtype)
        out.append(engine_cost.describe(dev, spec.engine, m.dtype, gemm_dtype=dense, moe=experts))
        out.append(cuda_graphs.describe(spec.engine, micro[0], dev.hbm_bytes / GIB, par.tp, spec.cuda_graph))
    if m.moe is not None:
        out.append(
            f"MoE: {m.moe.num_experts} experts top-{m.moe.top_k}, EP={par.ep} MoE-TP={par.moe_tp} "
            f"MoE-DP={par.moe_dp} (stage-local groups); busiest expert rank under uniform top-k routing "
            f"(mean + sigma*sqrt(2 ln ep)) x expert imbalance {spec.expert_imbalance:g}"
            + (
                f" (default: published routing skew, Gini {ROUTING_GINI} -> max/mean 1 + 3 Gini; arXiv:2605.20982)"
                if spec.expert_imbalance == DEFAULT_EXPERT_IMBALANCE
                else ""
            )
            + "; "
            f"{moe_comm_mode(par) or 'no'} MoE communication"
        )
    if m.mla is not None:
        out.append(
            f"MLA: latent cache {m.mla.cache_width} elements/token/layer on every TP rank; prefill "
            "decompresses K/V, decode absorbs W_UK/W_UV (FlashMLA-style)"
        )
    if m.layer_types:
        out.append(
            f"sliding-window layers: attention and KV cache capped at {m.sliding_window} tokens; "
            "attention sinks cost one logit per head (not counted)"
        )
    if weight_format_note(m):
        out.append(weight_format_note(m))
    if spec.kv_cache_dtype != "auto":
        out.append(f"KV cache dtype {spec.kv_cache_dtype}")
    if spec.model.dtype == "fp8":
        fp8_fitted = spec.engine is not None and engine_cost.pick(dev, spec.engine, "gemm", "fp8")[0] is not None
        out.append(
            "fp8: weights, activations and KV cache all 1 byte"
            + ("; GEMMs from the engine's fitted fp8 kernels" if fp8_fitted else " and GEMMs at the fp8 peak")
            + " (approximation: real fp8 serving keeps some activations in bf16)"
            + ("" if "fp8" in dev.vector_flops_per_s else "; elementwise ops at the fp32 vector peak")
        )
    if spec.chunked_prefill is None and len(micro) < spec.num_microbatches:
        out.append(f"only {len(micro)} microbatches possible: the batch cannot be split further")
    links_t = dev.links
    if par.world_size > links_t.devices_per_node or links_t.inter_node_origin:
        out.append(describe_inter_node(links_t))
    if par.pp > 1:
        kind = "hidden+residual" if spec.send_residual else "hidden only"
        shard = f", TP-sharded send (/{par.tp})" if spec.tp_sharded_send else ""
        names = sorted({h.name + (" (inter-node)" if h.cross_node else "") for hop in hops for h in hop})
        out.append(f"PP send/recv: latency + bytes/(bw*eff), {kind}{shard}; links: {', '.join(names)}")
        if par.tp > 1 or par.dp > 1:
            what = "its 1/tp slice" if spec.tp_sharded_send else "the full tensor"
            mixed = []
            for s, hop in enumerate(hops):
                if len(hop) > 1:
                    n = pp_hop_cross_pairs(SendRecvEdge(src_stage=s, dst_stage=s + 1), par, links_t)
                    mixed.append(f"{s}->{s + 1} ({n} of {par.tp * par.dp} pairs cross nodes)")
            out.append(
                f"PP hop: every TP rank of a stage sends {what} to its peer on the next stage at once; a hop "
                "costs its slowest pair (inter-node bandwidth is per GPU, so pairs sharing a NIC each see their "
                "share)" + (f"; hops mixing intra- and inter-node pairs: {', '.join(mixed)}" if mixed else "")
            )
        if spec.tp_sharded_send and par.tp > 1:
            out.append(
                f"TP-sharded send: the receiving stage all-gathers each of the {spec.boundary_tensors} tensor(s) "
                f"over its TP group ({', '.join(sorted({p.name for p in tp_paths[1:]}))}) before computing "
                "(vLLM's irecv post-processing); charged to the receiver"
            )
        if layer_counts:
            out.append(describe_partition(spec.partition, layer_counts))
    if par.tp > 1:
        fitted = all(p.collectives for p in tp_paths)
        how = (
            "calibrated alpha + bytes/beta fit (nearest group size)"
            if fitted
            else f"{spec.collective_algorithm} ring/tree formula"
        )
        if fitted and any(f.max_bytes for p in tp_paths for f in p.collectives):
            how = "calibrated piecewise alpha + bytes/beta fits per message-size regime (nearest group size)"
        if spec.engine is not None and engine_cost.pick(dev, spec.engine, "all_reduce")[0] is not None:
            how += f"; inside a node the {spec.engine} all-reduce as the engine issues it (one-shot/two-shot/NCCL)"
        out.append(f"TP collectives: {how} over {', '.join(sorted({p.name for p in tp_paths}))}")
        spans = sorted(
            {
                (h.nodes, h.ranks_per_node)
                for p in tp_paths
                if (h := p.hierarchy) is not None and hierarchical(p, "all_reduce", par.tp)
            }
        )
        if spans:
            out.append(
                "TP group across nodes ("
                + ", ".join(f"{m} nodes x {g} ranks" for m, g in spans)
                + "): hierarchical all-reduce = intra-node reduce-scatter + all-gather over the node's ranks, "
                "and an all-reduce of the 1/g shard across nodes over the fabric (each GPU through its own NIC "
                "share; ring or tree, the faster), as NCCL's tree algorithm chains ranks inside a node and links "
                "nodes by a tree (NCCL docs NCCL_ALGO; NVIDIA/nccl issue #545); engine custom all-reduce off"
            )
    return tuple(out)


LAYOUT_LINE_PREFIXES = ("inter-node link:", "PP hop:", "partition", "TP group across nodes")
"""The assumption lines about the fabric, the PP hops, the layer partition and cross-node TP groups."""


def layout_lines(report_assumptions: Sequence[str]) -> tuple[str, ...]:
    """The fabric / PP-hop / partition / cross-node-TP lines of a simulate report's assumptions, for a
    caller (the serving estimate) that shows only some of them."""
    return tuple(a for a in report_assumptions if a.startswith(LAYOUT_LINE_PREFIXES))
