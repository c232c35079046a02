"""The words of the assumption records (:mod:`simcast.core.assumption`): one formatter per topic, listed
in :data:`FORMATTERS` (``tests/core/test_assumption_records.py`` fails on a topic without one)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from simcast.core import assumption as A
from simcast.core.assumption import Assumption, Topic
from simcast.core.chunking import chunk_runs
from simcast.core.device import InterNodeOrigin
from simcast.core.kv import is_fp4_kv
from simcast.cost.kernels.engine_cost import source_label
from simcast.engines import PP_PREFILL_RULES as RULES
from simcast.engines.partition import PARTITION_RULES, canonical_partition
from simcast.render.assumption_moe_text import _layer_groups as _layer_groups
from simcast.render.assumption_moe_text import _moe as _moe
from simcast.render.assumption_moe_text import _moe_comm as _moe_comm
from simcast.render.assumption_moe_text import _moe_layout as _moe_layout
from simcast.serving.speculative.draft import FC_NOTE


def chunk_sizes_text(tokens: Sequence[int]) -> str:
    """Chunk sizes run-length encoded: ``8192 x15, 8000``."""
    return ", ".join(f"{t} x{n}" if n > 1 else str(t) for t, n in chunk_runs(tokens))


def _roofline(f: A.Roofline) -> str:
    return (
        f"roofline per op: max(flops/(peak*eff), bytes/(hbm_bw*eff)) + {f.launch_overhead_s * 1e6:.1f} us launch; "
        f"eff matmul {f.matmul_efficiency:.3g}, vector {f.vector_efficiency:.3g}, memory {f.memory_efficiency:.3g}"
        + (
            f"; GEMM efficiency saturates in M, N, K (half points {f.matmul_half_m_ridge:.3g} x ridge, "
            f"{f.matmul_half_n:.0f}, {f.matmul_half_k:.0f}; fitted)"
            if f.saturating
            else " (constants)"
        )
    )


def _dtype_peaks(f: A.DtypePeaks) -> str:
    return (
        f"dtype {f.dtype}: matmul peak {f.matmul_peak_flops_per_s / 1e12:.1f} TFLOP/s, "
        f"HBM {f.hbm_bw_bytes_per_s / 1e12:.2f} TB/s ({f.device_name})"
    )


def _traces(f: A.StageTraces) -> str:
    return "stage traces: torch.compile of stage-local modules, one representative decoder layer replayed per stage"


def _microbatches(f: A.Microbatches) -> str:
    return f"microbatches: {f.count} (requested {f.requested}); stage times are per microbatch"


def _chunked(f: A.ChunkedPipeline) -> str:
    cap = "no cap" if f.max_in_flight is None else f"at most {f.max_in_flight} in flight"
    return (
        f"chunked pipeline prefill: {len(f.chunk_tokens)} chunks of one prompt ({chunk_sizes_text(f.chunk_tokens)} "
        f"tokens) flow through the stages as microbatches, {cap}; chunk k attends to the KV of the chunks before "
        "it; latency = TTFT (the last chunk leaving the last stage); stage times are the mean over chunks"
        + "; "
        + "; ".join(x for x in (f.note, _overlap_rule(f.engine_rule)) if x)
    )


def _overlap_rule(engine: str) -> str:
    rule = RULES.get(engine)
    if rule is None:
        return "no engine rule: chunks overlap across stages, no in-flight cap"
    return (
        f"{rule.engine}: the next chunk starts on stage 0 while earlier chunks are on later stages"
        if rule.overlap
        else f"{rule.engine}: a chunk waits until the previous chunk has left the last stage"
    ) + f" ({rule.cite})"


def _microbatch_limit(f: A.MicrobatchLimit) -> str:
    return f"only {f.count} microbatches possible: the batch cannot be split further"


def _schedule(f: A.Schedule) -> str:
    return (
        "latency: fill-drain over stage time = compute + incoming send/recv (the receiver waits for the data, "
        "the sender's isend does not block it); bubble = latency - sum(stage times)"
    )


def _kernel_name(k: A.KernelSource) -> str:
    if k.kind == "moe":
        return f"moe experts ({k.dtype})"
    if k.kind == "dispatch":
        return f"all-to-all {k.dtype}"
    return f"gemm ({k.dtype} weights)" if k.quantised_weights else k.kind


def _engine_kernels(f: A.KernelsUsed) -> str:
    if f.engine is None:
        return f"kernels: {f.device_name}'s generic roofline (--engine none: no engine kernel fits)"
    head = f"engine {f.engine} kernels on {f.device_name}: "
    if not f.profile_has_engines:
        return head + "generic roofline (the profile has no engines: section)"
    parts = [
        f"{_kernel_name(k)} {source_label(f.engine, k.kind, k.dtype, k.fitted_by, f.device_name)}" for k in f.kernels
    ]
    where = (
        f" (tables: the profile's {', '.join(f'engines.{u}.source' for u in f.tables_from)})" if f.tables_from else ""
    )
    return head + "; ".join(parts) + where


def _cuda_graphs(f: A.CudaGraphs) -> str:
    why = (
        "set by the caller"
        if f.set_by_caller
        else (
            f"{f.engine} default: steps of <= {f.capture_limit} tokens"
            if f.limit_counts == "tokens"
            else f"{f.engine} default: decode steps of <= {f.capture_limit} requests"
        )
    )
    if f.captured:
        return (
            f"CUDA graphs: the step is replayed from a captured graph ({why}); fixed per-kernel floors are "
            "the fits' graph-captured launch times, host-bound floors measured without graphs are not applied"
        )
    return (
        f"CUDA graphs: the step runs eagerly ({why}); kernels whose fits carry a host-bound floor measured "
        "without graphs take at least that floor"
    )


def _mla(f: A.Mla) -> str:
    return (
        f"MLA: latent cache {f.cache_width_elements} elements/token/layer on every TP rank; prefill "
        "decompresses K/V, decode absorbs W_UK/W_UV (FlashMLA-style)"
    )


def _sliding_window(f: A.SlidingWindow) -> str:
    return (
        f"sliding-window layers: attention and KV cache capped at {f.window_tokens} tokens; "
        "attention sinks cost one logit per head (not counted)"
    )


def _chunked_attention(f: A.ChunkedAttention) -> str:
    return (
        f"chunked local attention on {f.chunked_layers} of {f.num_layers} layers: a query sees its own "
        f"{f.chunk_tokens}-token chunk (vLLM's virtual batches); their KV cache charged at most one chunk "
        "per request (vLLM frees earlier chunks' blocks, SGLang keeps them in its SWA pool's window)"
    )


def _linear_attention(f: A.LinearAttention) -> str:
    return (
        f"linear attention (Gated DeltaNet) on {f.linear_layers} of {f.num_layers} layers: no KV cache, a constant "
        f"state of {f.state_bytes_per_request / 2**20:.2f} MiB per request per rank (recurrent state at "
        f"{f.state_elem_bytes} B/elem, SGLang's default; vLLM 'auto' stores the model dtype); decode cost "
        "independent of context, prefill by fla's 64-token chunked kernel"
    )


def _weight_format(f: A.WeightFormat) -> str:
    return (
        f"weights from {f.source} ({f.method}): "
        + (f"experts {f.expert_format} ({f.expert_bytes_per_elem:.4g} B/elem), " if f.moe else "")
        + f"{'other' if f.moe else 'linear-layer'} GEMMs {f.dense_format} "
        f"({f.dense_bytes_per_elem:.4g} B/elem); fp8 GEMMs run W8A8 "
        f"at the fp8 matmul peak, activations quantised on entry; embedding, lm_head, norms, "
        f"{'router, ' if f.moe else ''}activations in {f.activation_dtype}"
        + (
            "; fp4 GEMMs (nvfp4, mxfp4_w4a4) run W4A4 at the fp4 peak where the device has fp4 tensor cores, "
            "weight-only (W4A16) at the 16-bit peak elsewhere; attention projections in the checkpoint's own "
            "format (its exclude list; a dense-MLP layer's GEMMs are costed in that format too, its memory in its own)"
            if f.method in ("nvfp4", "mxfp4")
            else ""
        )
    )


def _kv_dtype(f: A.KvCacheDtype) -> str:
    head = f"KV cache in {f.kv_cache_dtype} (--kv-cache-dtype)" if f.from_flag else f"KV cache dtype {f.kv_cache_dtype}"
    if not is_fp4_kv(f.kv_cache_dtype):
        return head
    return head + (
        ": 0.5625 bytes per element (FP4 values + a 1-byte scale per 16) in memory, admission and KV transfer; "
        "attention reads those bytes at the roofline (transferred/unfitted: no FP4-KV attention table is measured)"
    )


def _fp8(f: A.Fp8) -> str:
    return (
        "fp8: weights, activations and KV cache all 1 byte"
        + ("; GEMMs from the engine's fitted fp8 kernels" if f.engine_fitted_gemm else " and GEMMs at the fp8 peak")
        + " (approximation: real fp8 serving keeps some activations in bf16)"
        + ("" if f.fp8_vector_peak else "; elementwise ops at the fp32 vector peak")
    )


def _inter_node(f: A.InterNodeLink) -> str:
    head = (
        f"inter-node link: {f.bw_bytes_per_s / 1e9:g} GB/s per GPU per direction, {f.latency_s * 1e6:.3g} us, "
        f"efficiency {f.efficiency:.3g}"
    )
    return (
        f"{head}: {inter_node_origin_text(f.origin)}" if f.origin else f"{head} from the device profile ({f.link_name})"
    )


def inter_node_origin_text(o: InterNodeOrigin) -> str:
    """Where a replaced inter-node link's numbers come from, each value with the field that gave it."""
    origin = f"named fabric {o.fabric}" if o.fabric else "profile"
    parts = [f"{origin} ({o.base_link})"]
    if o.bandwidth_gbps is not None:
        parts.append(f"bandwidth {o.bandwidth_gbps:g} GB/s from {o.bandwidth_field}")
    if o.latency_us is not None:
        parts.append(f"latency {o.latency_us:g} us from {o.latency_field}")
    text = "; ".join(parts) + f"; efficiency {o.efficiency:.3g} from {origin}"
    if o.fabric_sources:
        bw, lat, eff = o.fabric_sources
        text += f" [{o.fabric} sources: bandwidth {bw}; latency {lat}; efficiency {eff}]"
    return text


def _pp_send(f: A.PpSend) -> str:
    kind = "hidden+residual" if f.send_residual else "hidden only"
    shard = f", TP-sharded send (/{f.tp})" if f.tp_sharded_send else ""
    names = sorted({name + (" (inter-node)" if cross else "") for name, cross in f.links})
    return f"PP send/recv: latency + bytes/(bw*eff), {kind}{shard}; links: {', '.join(names)}"


def _pp_hop(f: A.PpHop) -> str:
    what = "its 1/tp slice" if f.tp_sharded_send else "the full tensor"
    mixed = [
        f"{h.src_stage}->{h.dst_stage} ({h.cross_node_pairs} of {h.pairs} pairs cross nodes)" for h in f.mixed_hops
    ]
    return (
        f"PP hop: every TP rank of a stage sends {what} to its peer on the next stage at once; a hop "
        "costs its slowest pair (inter-node bandwidth is per GPU, so pairs sharing a NIC each see their "
        "share)" + (f"; hops mixing intra- and inter-node pairs: {', '.join(mixed)}" if mixed else "")
    )


def _tp_sharded_send(f: A.TpShardedSend) -> str:
    return (
        f"TP-sharded send: the receiving stage all-gathers each of the {f.boundary_tensors} tensor(s) "
        f"over its TP group ({', '.join(f.tp_links)}) before computing "
        "(vLLM's irecv post-processing); charged to the receiver"
    )


def _partition(f: A.Partition) -> str:
    p = canonical_partition(f.partition)
    layers = ",".join(map(str, f.layer_counts))
    if p in PARTITION_RULES:
        return f"partition {p}: {PARTITION_RULES[p]}; layer counts {layers}"
    return f"partition: explicit layer counts {layers} (as VLLM_PP_LAYER_PARTITION / SGLANG_PP_LAYER_PARTITION)"


def _partition_resolved(f: A.PartitionResolved) -> str:
    layers = ",".join(map(str, f.layer_counts))
    return f"partition {f.policy}: layer counts {layers} minimise the slowest stage for this batch"


def _tp_collectives(f: A.TpCollectives) -> str:
    if f.piecewise:
        how = "calibrated piecewise alpha + bytes/beta fits per message-size regime (nearest group size)"
    elif f.fitted:
        how = "calibrated alpha + bytes/beta fit (nearest group size)"
    else:
        how = f"{f.algorithm} ring/tree formula"
    if f.engine_all_reduce:
        how += f"; inside a node the {f.engine_all_reduce} all-reduce as the engine issues it (one-shot/two-shot/NCCL)"
    return f"TP collectives: {how} over {', '.join(f.links)}"


def _tp_across_nodes(f: A.TpAcrossNodes) -> str:
    return (
        "TP group across nodes ("
        + ", ".join(f"{m} nodes x {g} ranks" for m, g in f.spans)
        + "): hierarchical all-reduce = intra-node reduce-scatter + all-gather over the node's ranks, "
        "and an all-reduce of the 1/g shard across nodes over the fabric (each GPU through its own NIC "
        "share; ring or tree, the faster), as NCCL's tree algorithm chains ranks inside a node and links "
        "nodes by a tree (NCCL docs NCCL_ALGO; NVIDIA/nccl issue #545); engine custom all-reduce off"
    )


def _speculative_step(f: A.SpeculativeStep) -> str:
    step_s = f.verify_s + f.draft_s
    return (
        f"speculative step: the verify step above ({f.verify_tokens} tokens per request) "
        f"{f.verify_s * 1e3:.3f} ms + the draft's {f.draft_passes} pass(es) on the last stage {f.draft_s * 1e3:.3f} ms "
        f"= {step_s * 1e3:.3f} ms per step, {step_s / f.tokens_per_step * 1e3:.3f} ms per emitted token "
        f"({f.tokens_per_step:.3f} tokens per request per step, the expected value); not in the stage times above: "
        "the draft" + (f"; {FC_NOTE}" if f.feature_draft else "")
    )


def _note(f: A.Note) -> str:
    return f.text


_SERVING_TOPICS = (
    Topic.SERVING_ENGINE,
    Topic.STEADY_STATE,
    Topic.SERVING_TTFT,
    Topic.SERVING_PATH,
    Topic.SERVING_MEMORY,
    Topic.SPECULATIVE,
    Topic.SPECULATIVE_TPOT,
    Topic.DISAGG_LAYOUT,
    Topic.DISAGG_PREFILL_POOL,
    Topic.DISAGG_QUEUE,
    Topic.DISAGG_DECODE_POOL,
    Topic.KV_TRANSFER,
    Topic.DISAGG_TTFT,
    Topic.DISAGG_BALANCE,
    Topic.DISAGG_SATURATION,
    Topic.DISAGG_REQUESTS,
    Topic.DISAGG_KV_CAPACITY,
    Topic.DISAGG_NOT_MODELLED,
)

FORMATTERS: dict[Topic, Callable[[Any], str]] = {
    Topic.ROOFLINE: _roofline,
    Topic.DTYPE_PEAKS: _dtype_peaks,
    Topic.TRACES: _traces,
    Topic.MICROBATCHES: _microbatches,
    Topic.CHUNKED_PREFILL: _chunked,
    Topic.MICROBATCH_LIMIT: _microbatch_limit,
    Topic.SCHEDULE: _schedule,
    Topic.ENGINE_KERNELS: _engine_kernels,
    Topic.CUDA_GRAPHS: _cuda_graphs,
    Topic.MOE: _moe,
    Topic.MOE_COMM: _moe_comm,
    Topic.MOE_LAYOUT: _moe_layout,
    Topic.MLA: _mla,
    Topic.SLIDING_WINDOW: _sliding_window,
    Topic.CHUNKED_ATTENTION: _chunked_attention,
    Topic.LINEAR_ATTENTION: _linear_attention,
    Topic.WEIGHT_FORMAT: _weight_format,
    Topic.KV_DTYPE: _kv_dtype,
    Topic.FP8: _fp8,
    Topic.INTER_NODE: _inter_node,
    Topic.PP_SEND: _pp_send,
    Topic.PP_HOP: _pp_hop,
    Topic.TP_SHARDED_SEND: _tp_sharded_send,
    Topic.PARTITION: _partition,
    Topic.PARTITION_RESOLVED: _partition_resolved,
    Topic.TP_COLLECTIVES: _tp_collectives,
    Topic.TP_ACROSS_NODES: _tp_across_nodes,
    Topic.LAYER_GROUPS: _layer_groups,
    Topic.SPECULATIVE_STEP: _speculative_step,
    **{t: _note for t in _SERVING_TOPICS},
}
"""The formatter of each topic: its facts (``simcast.core.assumption.FACTS[topic]``, or a Note) -> one line."""


def assumption_text(a: Assumption) -> str:
    """One record in words."""
    return FORMATTERS[a.topic](a.facts)


def assumption_lines(records: Iterable[Assumption]) -> list[str]:
    """The records in words, in their order (the ``assumptions`` list of the JSON outputs)."""
    return [assumption_text(a) for a in records]
