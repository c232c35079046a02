"""The pure core: ``simulate(spec) -> Report``. Touches no files except the trace cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simcast.core.errors import require
from simcast.core.kv import kv_dtype_bytes
from simcast.core.layout import Path, stage_tp_path
from simcast.core.model_spec import ModelSpec
from simcast.core.moe_layout import moe_comm_mode, replica_view, spans_replicas, stage_moe_path
from simcast.core.moe_memory import moe_shard
from simcast.core.moe_placement import rank_imbalance
from simcast.core.plan import PipelineStagePlan
from simcast.core.shards import ShardedDims, sharded_dims
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.ops.compute import op_cost
from simcast.cost.ops.op_work import CostContext, OpCost
from simcast.engines import ENGINES, get_engine
from simcast.engines.cuda_graphs import step_captured
from simcast.engines.partition import build_pipeline_stage_plan
from simcast.sim.report import Report, StageReport, pp_message_bytes, report_from_ops
from simcast.trace.cache import get_trace
from simcast.trace.ir import OpRecord, StageTrace
from simcast.trace.key import StageKey

__all__ = ["Report", "StageReport", "pp_message_bytes", "simulate", "split_batch", "stage_costers", "stage_key"]


def split_batch(batch: Batch, m: int) -> tuple[Batch, ...]:
    """Split one step's batch into (at most) ``m`` microbatches, group by group.

    With at least ``m`` requests, the requests (groups expanded in order) are
    dealt into ``m`` contiguous runs whose sizes differ by at most one; each run
    is a slice of a few groups, so the work is O(groups + m), never O(requests).
    With fewer requests (one long prefill), each request's new tokens are
    chunked into ``m`` pieces (chunked prefill: chunk k sees the earlier chunks
    as context). Fewer microbatches result when the tokens cannot be split
    further (decode of fewer than ``m`` requests).
    """
    r = batch.num_requests
    if m <= 1:
        return (batch,)
    if r >= m or batch.is_decode:
        m = min(m, r)
        base, extra = divmod(r, m)
        out: list[Batch] = []
        groups = list(batch.groups)
        g, left = 0, groups[0][2]  # current group and requests left in it
        for k in range(m):
            need = base + (1 if k < extra else 0)
            qs, cs, ns = [], [], []
            while need:
                take = min(need, left)
                qs.append(groups[g][0])
                cs.append(groups[g][1])
                ns.append(take)
                need -= take
                left -= take
                if left == 0 and g + 1 < len(groups):
                    g += 1
                    left = groups[g][2]
            out.append(Batch(query_lens=tuple(qs), context_lens=tuple(cs), counts=tuple(ns)))
        return tuple(out)
    chunks: list[tuple[list[int], list[int], list[int]]] = [([], [], []) for _ in range(m)]
    for q, c, n in batch.groups:
        base, extra = divmod(q, m)
        done = 0
        for k in range(m):
            size = base + (1 if k < extra else 0)
            if size:
                chunks[k][0].append(size)
                chunks[k][1].append(c + done)
                chunks[k][2].append(n)
                done += size
    return tuple(Batch(query_lens=tuple(q), context_lens=tuple(c), counts=tuple(n)) for q, c, n in chunks if q)


def layer_kind(model: ModelSpec, layer: int) -> str:
    """Structural kind of a decoder layer: ``dense`` / ``moe``, ``+sliding`` for a sliding-window layer,
    ``+chunked`` for a chunked-local-attention layer, ``+linear`` for a linear-attention (Gated DeltaNet) one."""
    attn = (
        "+sliding"
        if model.is_sliding(layer)
        else "+chunked"
        if model.is_chunked(layer)
        else "+linear"
        if model.is_linear(layer)
        else ""
    )
    return ("moe" if model.is_moe_layer(layer) else "dense") + attn


def stage_layers(model: ModelSpec, start: int, num_layers: int, first: bool) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Traced layer kinds of a stage and how many of its layers each one stands for.

    Stage 0 traces the model's first layer on its own (it starts the residual stream);
    then one representative layer per kind, in order of first appearance.
    """
    kinds = [layer_kind(model, i) for i in range(start, start + num_layers)]
    head, rest = (kinds[:1], kinds[1:]) if first and num_layers >= 2 else ([], kinds)
    uniq = list(dict.fromkeys(rest))
    return tuple(head + uniq), tuple([1] * len(head) + [rest.count(k) for k in uniq])


def _linear_fields(model: ModelSpec, sd: ShardedDims) -> dict:
    """A stage key's linear-attention fields (Gated DeltaNet heads per TP rank); none without such layers."""
    la = model.linear
    if la is None:
        return {}
    require(
        la.num_k_heads % sd.tp == 0,
        "tp_size",
        sd.tp,
        f"must divide the linear-attention key heads ({la.num_k_heads}) of {model.name}",
    )
    return dict(
        linear_k_heads=la.num_k_heads // sd.tp,
        linear_v_heads=la.num_v_heads // sd.tp,
        linear_k_dim=la.k_head_dim,
        linear_v_dim=la.v_head_dim,
        linear_conv_kernel=la.conv_kernel,
    )


def _layer_groups(model: ModelSpec, sd: ShardedDims, par: ParallelSpec | None, kinds: tuple, last: bool) -> dict:
    """A stage key's dense-MLP and LM-head fields when they run outside the attention-TP group
    (``par.dense_ffn`` / ``par.lm_head``, resolved by the engine: :mod:`simcast.engines.sglang_layers`)."""
    if par is None or not (par.dense_ffn or par.lm_head):
        return {}
    out: dict = {}
    group, spans = par.tp * par.dp, spans_replicas(par)
    if any(not k.startswith("moe") for k in kinds):  # the stage holds dense MLP layers
        if par.dense_ffn == "gathered" and spans:
            inter = -(-model.intermediate_size // group)
            out.update(dense_mode="gathered", dense_group=group, dense_intermediate=inter)
        elif par.dense_ffn == "scattered" and sd.tp > 1:  # at attention TP 1 the rank's own rows, unsharded, as ""
            out.update(dense_mode="scattered", dense_group=1, dense_intermediate=model.intermediate_size)
    if last and par.lm_head == "gathered" and spans:
        out.update(head_mode="gathered", head_group=group, head_vocab=-(-model.vocab_size // group))
    return out


def stage_key(
    model: ModelSpec,
    sd: ShardedDims,
    first: bool,
    last: bool,
    num_layers: int,
    par: ParallelSpec | None = None,
    start_layer: int = 0,
) -> StageKey:
    kinds, _ = stage_layers(model, start_layer, num_layers, first)
    extra: dict = {}
    if any(k.startswith("moe") for k in kinds):
        p = replica_view(par or ParallelSpec(tp=sd.tp))
        ms, m = moe_shard(model, p), model.moe
        assert m is not None
        extra.update(
            num_experts=m.num_experts,
            experts_local=ms.experts_local,
            top_k=m.top_k,
            expert_intermediate=ms.expert_intermediate,
            shared_intermediate=ms.shared_intermediate,
            ep=p.ep,
            moe_dp=p.moe_dp,
            dp=p.dp,
            moe_comm=moe_comm_mode(p),
            router_bias=m.router_bias,
        )
    extra.update(_linear_fields(model, sd))
    extra.update(_layer_groups(model, sd, par, kinds, last))
    if model.attn_output_gate:
        extra.update(attn_output_gate=True)
    if model.quant is not None:
        q = model.quant
        # one format for the attention and dense-MLP GEMMs in the trace: the attention's when the checkpoint keeps
        # it apart (NVFP4 / MXFP4 DeepSeek: bf16 q/kv/o, while its 3 dense-MLP layers are fp4: costed in bf16)
        dense = q.qkv if q.qkv_format else q.dense_format
        extra.update(expert_format=q.expert_format, dense_format="" if dense == model.dtype else dense)
    q_heads, kv_heads, head_dim = sd.q_heads, sd.kv_heads, model.head_dim
    if model.mla is not None:
        a = model.mla
        kv_heads, head_dim = 1, a.cache_width  # the cache input is the latent (S, 1, kv_lora + rope)
        extra.update(
            q_lora_rank=a.q_lora_rank,
            kv_lora_rank=a.kv_lora_rank,
            qk_nope_head_dim=a.qk_nope_head_dim,
            qk_rope_head_dim=a.qk_rope_head_dim,
            v_head_dim=a.v_head_dim,
        )
    return StageKey(
        hidden_size=model.hidden_size,
        q_heads=q_heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=sd.intermediate,
        vocab_shard=sd.vocab_shard,
        tp=sd.tp,
        qk_norm=model.qk_norm,
        attention_bias=model.attention_bias,
        rms_norm_eps=model.rms_norm_eps,
        rope_theta=model.rope_theta,
        dtype=model.dtype,
        has_embedding=first,
        has_head=last,
        traced_layers=len(kinds),
        layer_kinds=kinds,
        sliding_window=model.sliding_window,
        attention_chunk_size=model.attention_chunk_size,
        o_proj_bias=model.o_proj_bias,
        **extra,
    )


def stage_keys(model: ModelSpec, par: ParallelSpec, partition: str) -> list[StageKey]:
    """The trace key of each stage of a layout (``partition`` resolved: uniform, vllm or counts)."""
    sd = sharded_dims(model, par.tp)
    plan = build_pipeline_stage_plan(model.num_layers, par.pp, partition, model.tie_word_embeddings)
    return [
        stage_key(model, sd, i.is_first_stage, i.is_last_stage, i.num_layers, par, i.start_layer)
        for i in plan.stage_infos
    ]


def replay_counts(layer_counts: Sequence[int]) -> dict[str, int]:
    """How many times each traced scope runs: edges once, each traced layer for the layers it stands for."""
    return {"pre": 1, "post": 1, **{f"layer{i}": c for i, c in enumerate(layer_counts)}}


def running_ops(trace: StageTrace, layer_counts: Sequence[int]) -> list[tuple[OpRecord, int]]:
    """The trace's ops that run, with their replay counts, in trace order (one list for both cost paths:
    :func:`cost_stage` per batch and :func:`simcast.cost.ops.batched.cost_ops_many` over many batches)."""
    counts = replay_counts(layer_counts)
    return [(rec, counts[rec.scope]) for rec in trace.ops if counts.get(rec.scope, 0) > 0]


def cost_stage(trace: StageTrace, layer_counts: Sequence[int], ctx: CostContext, dtype: str) -> tuple[OpCost, ...]:
    return tuple(op_cost(rec, ctx, dtype, count) for rec, count in running_ops(trace, layer_counts))


StageCoster = Callable[[Batch], tuple[OpCost, ...]]
"""Op costs (with replay counts) of one stage's forward for a batch."""


@dataclass(frozen=True, kw_only=True)
class StageSetup:
    """What costing one stage needs: its trace, how many layers each traced layer stands for, its paths."""

    key: StageKey
    trace: StageTrace
    layer_counts: tuple[int, ...]
    tp_path: Path
    moe_path: Path | None

    def ops(self) -> list[tuple[OpRecord, int]]:
        """The trace's ops that run, with their replay counts (the order :func:`cost_stage` costs them in)."""
        return running_ops(self.trace, self.layer_counts)


def stage_setups(spec: SimSpec, *, use_disk_cache: bool = True) -> tuple[PipelineStagePlan, list[StageSetup], int]:
    """``(plan, setup per stage, traces compiled)`` of ``spec``'s layout."""
    require(spec.engine is None or spec.engine in ENGINES, "--engine", spec.engine, f"allowed: {', '.join(ENGINES)}")
    model, dev, par = spec.model, spec.device, spec.parallel
    dev.matmul_peak(model.dtype), dev.vector_peak(model.dtype)  # a missing peak fails before any tracing
    sd = sharded_dims(model, par.tp)
    plan = build_pipeline_stage_plan(model.num_layers, par.pp, spec.partition, model.tie_word_embeddings)
    links = dev.links
    out: list[StageSetup] = []
    compiled = 0
    for info in plan.stage_infos:
        key = stage_key(model, sd, info.is_first_stage, info.is_last_stage, info.num_layers, par, info.start_layer)
        _, layer_counts = stage_layers(model, info.start_layer, info.num_layers, info.is_first_stage)
        tr = get_trace(key, use_disk_cache=use_disk_cache)
        compiled += tr.compiled
        out.append(
            StageSetup(
                key=key,
                trace=tr,
                layer_counts=layer_counts,
                tp_path=stage_tp_path(info.stage_id, par, links),
                moe_path=stage_moe_path(info.stage_id, par, links) if model.moe is not None else None,
            )
        )
    return plan, out, compiled


def cost_context(spec: SimSpec, setup: StageSetup, mb: Batch) -> CostContext:
    """The context one stage's ops are costed in for microbatch ``mb``."""
    kv_bytes = 0.0 if spec.kv_cache_dtype == "auto" else float(kv_dtype_bytes(spec.model, spec.kv_cache_dtype))
    return CostContext(
        batch=mb,
        device=spec.device,
        tp_path=setup.tp_path,
        collective_algorithm=spec.collective_algorithm,
        engine=spec.engine,
        moe_path=setup.moe_path,
        expert_imbalance=rank_imbalance(spec),
        kv_bytes=kv_bytes,
        captured=step_captured(spec, mb),
        decode_query_len=spec.decode_query_len,
        **moe_comm_fields(spec, setup.key.expert_format),
        active_dp_ranks=spec.active_dp_ranks,
    )


def moe_comm_fields(spec: SimSpec, expert_format: str) -> dict:
    """The :class:`CostContext` fields of the engine's MoE communication plan (none with the default flags:
    the context as before)."""
    if spec.moe_comm.is_default or spec.model.moe is None:
        return {}
    moe = spec.model.moe
    return {
        "moe_comm": get_engine(spec.engine).moe_comm_plan(spec.moe_comm),
        "routing_groups": (moe.expert_groups, moe.topk_groups),
        "fp8_dispatch": expert_format.startswith("fp8"),
    }


def stage_costers(
    spec: SimSpec, *, use_disk_cache: bool = True
) -> tuple[PipelineStagePlan, list[StageCoster], list[Path], int]:
    """``(plan, coster per stage, TP path per stage, traces compiled)`` of ``spec``'s layout.

    Each coster costs a batch on its stage with the roofline model; identical batches on
    identical stages are costed once (a memo shared by the stages).
    """
    from simcast.sim.overlap_costs import overlap_plan, overlapped

    plan, setups, compiled = stage_setups(spec, use_disk_cache=use_disk_cache)
    memo: dict[tuple, tuple[OpCost, ...]] = {}
    costers: list[StageCoster] = []
    ov = overlap_plan(spec)
    for st in setups:

        def cost(mb: Batch, st: StageSetup = st) -> tuple[OpCost, ...]:
            k = (st.key, st.layer_counts, mb, st.tp_path, st.moe_path)
            if k not in memo:
                memo[k] = cost_stage(st.trace, st.layer_counts, cost_context(spec, st, mb), spec.model.dtype)
            return memo[k]

        if ov is not None:  # MoE communication overlapped with compute (two-batch / single-batch overlap)

            def cost_ov(mb: Batch, cost: StageCoster = cost) -> tuple[OpCost, ...]:
                return overlapped(spec, ov, mb, cost, split_batch)

            costers.append(cost_ov)
        else:
            costers.append(cost)
    return plan, costers, [st.tp_path for st in setups], compiled


def microbatches_of(spec: SimSpec) -> tuple[Batch, ...]:
    """The microbatches of ``spec``: its prefill chunks (chunk k's context = the tokens before it)
    when ``spec.chunked_prefill`` is set, else :func:`split_batch` into ``spec.num_microbatches``."""
    if spec.chunked_prefill is None:
        return split_batch(spec.batch, spec.num_microbatches)
    cp = spec.chunked_prefill
    return tuple(Batch.prefill(1, t, prefix) for t, prefix in zip(cp.tokens, cp.prefix_tokens))


def simulate(spec: SimSpec, *, use_disk_cache: bool = True) -> Report:
    """Simulate one forward step of ``spec.batch`` under ``spec.parallel``.

    Per stage: build the stage-local module's key, get its trace (compiled once,
    then cached), cost every op per microbatch with the roofline model, add PP
    send/recv at the stage boundaries, and combine with the fill-drain scheduler.
    ``spec.partition`` must be resolved (uniform, vllm or explicit counts): cost-driven
    policies such as ``balanced`` are resolved first by :func:`simcast.sim.partition.resolve_partition`.
    With ``spec.chunked_prefill`` the microbatches are one prompt's chunks, capped at
    ``chunked_prefill.max_in_flight`` in the pipeline (the latency is then the prompt's TTFT).
    """
    plan, costers, tp_paths, compiled = stage_costers(spec, use_disk_cache=use_disk_cache)
    micro = microbatches_of(spec)
    stage_ops = [[cost(mb) for mb in micro] for cost in costers]  # [stage][microbatch]
    return report_from_ops(spec, plan, tp_paths, micro, stage_ops, compiled)
