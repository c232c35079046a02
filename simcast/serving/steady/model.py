"""Steady-state serving estimate for an aggregated (colocated prefill + decode) deployment.

At concurrency ``B`` per replica (closed loop: a finished request is replaced
at once), a request lives ``L = (OSL - 1) + n_pf`` steps: ``n_pf`` steps whose
prefill chunks carry its prompt, then ``OSL - 1`` decode steps (the first
output token comes with the last chunk). So an average step of one of the
``M`` microbatches in flight (``M = pp``: vLLM virtual engines, SGLang PP
micro-batches, TRT-LLM ``num_micro_batches``), each with ``b = B / M``
requests, carries ``D = b·(OSL-1)/L`` decodes and ``P = b·ISL/L`` prompt
tokens. The engine forms steps as :mod:`simcast.engines.policy` says:

- **decode-first** (vLLM V1, TRT-LLM in-flight batching): the decodes plus
  prompt chunks of ``c = min(ISL, budget - D)`` tokens (whole prompts when
  chunked prefill is off) in **one** forward pass. Prompt tokens arrive as
  whole chunks, so a step carries ``k`` or ``k + 1`` chunks with ``P/c = k + f``;
  the mean step mixes the two (convex step cost: costing the mean token count
  would under-estimate). A decoding request sees the *other* requests' chunks,
  ``(b - 1)·ISL/L`` tokens per step.
- **prefill-first** (SGLang's default loop): prompts run in their own prefill
  steps of ``S = clamp(P, one prompt, budget)`` tokens, ``P/S`` of them per
  decode step.

TPOT is the mean step cycle a decoding request sees: its own decode plus the
*other* requests' decodes and prompt chunks, ``(b - 1)·(OSL-1)/L`` and
``(b - 1)·ISL/L`` per step, fractional means costed as the mix of their floor and
ceiling (:mod:`simcast.serving.step`: stage pipeline + engine CPU time as its own
resource). TTFT is the serving path (the engine's front end: API server,
tokenisation, detokenise and stream; :mod:`simcast.engines.policy`), the wait for
the step in flight (half a step at random arrival; one more with an overlap
scheduler, whose next step is already formed) and the prompt's ``n_pf``
chunk-carrying steps (queueing excluded: closed loop); tokens/s from Little's law,
``B · OSL / (TTFT + (OSL - 1) · TPOT)``. ``B`` above the token budget's
sustainable ``budget · L / (ISL + OSL - 1)`` or ``max_num_seqs`` is capped (the
rest would wait in the queue). The idle-system TTFT of one request (serving path +
prefill alone, chunks pipelined through the stages) is kept as ``ttft_idle_s``.

Speculative decoding (:mod:`simcast.serving.speculative.spec`): each decoding request emits ``τ = 1 + E``
tokens per step, so it lives ``(OSL - 1)/τ`` decode steps; its step is the verify step (``k + 1`` query
tokens per decoding request, counted against the token budget as the engines count them) plus the draft's
``k`` passes on the last stage (:mod:`simcast.serving.speculative.draft`), and TPOT = step cycle / τ.

Memory: :mod:`simcast.serving.kv_memory` (each engine's memory rule, and the mean
KV a running request holds under its KV admission policy).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcast.core.assumption import LAYOUT_TOPICS, Assumption, KernelsUsed, KvCacheDtype, Topic, note, of_topic
from simcast.core.chunking import chunk_plan, chunk_runs
from simcast.core.moe_layout import spans_replicas
from simcast.core.specs import Batch, SimSpec
from simcast.core.weights import weight_format
from simcast.engines.partition import Partition
from simcast.engines.policy import EnginePolicy
from simcast.serving.config import ServingConfig, Workload
from simcast.serving.kv_memory import (
    MemoryFit,
    kv_capacity_tokens,
    max_batch_for_memory,
    memory_fit,
    memory_note,
)
from simcast.serving.steady.shape import SteadyShape, steady_cycles, steady_shape
from simcast.serving.step import StepCoster, mixed_batch
from simcast.sim.chunked import chunked_prefill_spec, plan_chunks
from simcast.sim.partition import resolve_partition as resolve_sim_partition
from simcast.sim.simulate import Report, simulate

__all__ = [
    "MemoryFit",
    "ServingConfig",
    "ServingResult",
    "Workload",
    "estimate_serving",
    "kv_capacity_tokens",
    "max_batch_for_memory",
    "memory_fit",
]


@dataclass(frozen=True, kw_only=True)
class ServingResult:
    config: ServingConfig
    ttft_s: float  # under load: serving path + wait for the step in flight + the prompt's own chunk steps
    tpot_s: float  # mean step cycle a decoding request sees
    decode_cycle_s: float  # a step of decodes only (speculative decoding: per emitted token, step / (1 + E))
    prefill_interference_s: float  # what other requests' prompt chunks add to the mean step
    step_overhead_s: float  # engine CPU time of a decode step
    e2e_latency_s: float
    tokens_per_s: float  # output tokens/s, all replicas
    tokens_per_s_per_device: float
    tokens_per_s_per_user: float
    concurrency: int  # served, all replicas (requested concurrency capped by the engine's limits)
    memory: MemoryFit
    prefill: Report  # one prompt alone (idle system)
    decode: Report  # the decode-only step
    assumptions: tuple[Assumption, ...]  # typed records; simcast.render.assumption_text words them
    ttft_idle_s: float = 0.0  # one request on an idle system (serving path included)
    max_concurrency_memory: int = 0  # per replica, from the KV budget
    capped_by: str = ""  # "" | "max_num_seqs" | "token budget"
    front_end_s: float = 0.0  # the serving path's share of every TTFT
    step_wait_s: float = 0.0  # mean wait for the step in flight before a new prompt is scheduled


def prefill_spec(cfg: ServingConfig, *, use_disk_cache: bool = True) -> SimSpec:
    """One prompt alone on an idle system: with chunked prefill, chunks of the engine's token budget flow
    through the PP stages as a chunked pipeline, each attending to the chunks before it
    (:mod:`simcast.sim.chunked`, the engine's overlap rule); without, the prompt in one piece. With SGLang's
    dynamic chunking at PP > 1 the chunks after the first follow its predictor
    (:func:`simcast.core.chunking.chunk_plan`, stage 0's prefill time as the profiled step)."""
    w, pol = cfg.workload, cfg.policy
    hit = cfg.cached_tokens(w.input_length)  # a prefix-cache hit: only the rest is computed, attending to it
    one_rank = {"active_dp_ranks": 1} if spans_replicas(cfg.parallel) else {}  # attention-DP: one rank prefills it
    base = cfg.deployment.sim_spec(
        Batch.prefill(1, w.input_length - hit, hit),
        num_microbatches=1,
        tp_sharded_send=pol.tp_sharded_send,
        **one_rank,
    )
    if not pol.chunked_prefill or w.input_length - hit <= pol.max_num_batched_tokens:
        return base
    todo = w.input_length - hit
    # with a hit, the chunks' attention to the cached prefix is not counted here (an approximation)
    if cfg.dynamic_chunks:
        chunks = plan_chunks(
            base,
            todo,
            pol.max_num_batched_tokens,
            dynamic=True,
            smooth_factor=cfg.dynamic_chunking_smooth_factor,
            use_disk_cache=use_disk_cache,
        )
        chunk_note = (
            f"engine {pol.name}: SGLang dynamic chunking from {pol.max_num_batched_tokens} (smooth factor "
            f"{cfg.dynamic_chunking_smooth_factor:g}): "
            + ", ".join(f"{t} x{n}" if n > 1 else str(t) for t, n in chunk_runs(chunks))
        )
    else:
        chunks = chunk_plan(todo, pol.max_num_batched_tokens)
        chunk_note = f"engine {pol.name}: chunks of max_num_batched_tokens"
    return chunked_prefill_spec(base, chunks, engine=cfg.kernel_engine, note=chunk_note)


def resolve_partition(cfg: ServingConfig, *, use_disk_cache: bool = True) -> ServingConfig:
    """``balanced`` -> explicit layer counts balanced for the decode step at ``cfg``'s batch
    (one partition serves both phases, as in a real deployment)."""
    if not cfg.partition.is_balanced:
        return cfg
    w = cfg.workload
    spec = cfg.deployment.sim_spec(
        Batch.decode(cfg.batch_size, w.input_length + w.output_length // 2), num_microbatches=cfg.microbatches
    )
    return cfg.redeployed(
        partition=Partition.parse(resolve_sim_partition(spec, use_disk_cache=use_disk_cache).partition)
    )


def kernels_note(cfg: ServingConfig, report: Report) -> Assumption:
    """Which kernels cost the steps: the engine's fitted ones (the record of the simulate report, fallbacks
    labelled) or, for ``--engine none``, the device's generic roofline."""
    found = of_topic(report.assumptions, Topic.ENGINE_KERNELS)
    if found:
        return found[0]
    generic = KernelsUsed(
        engine=None,
        device_name=cfg.device.name,
        profile_has_engines=bool(cfg.device.engines),
        kernels=(),
        tables_from=(),
    )
    return Assumption(topic=Topic.ENGINE_KERNELS, facts=generic, approximation=True)


def coster_for(cfg: ServingConfig, use_disk_cache: bool = True) -> StepCoster:
    """The step coster of ``cfg``'s layout and engine (with its speculative draft, if any)."""
    coster = StepCoster(
        deployment=cfg.deployment,
        policy=cfg.policy,
        use_disk_cache=use_disk_cache,
        verify_tokens=cfg.scheme.verify_tokens,
        tokens_per_step=cfg.scheme.tokens_per_step,
    )
    coster.draft_s = cfg.scheme.draft_time(coster)
    return coster


def step_wait_cycles(pol: EnginePolicy) -> float:
    """Mean steps a new prompt waits before its first step, at random arrival on a busy engine: the rest of
    the step in flight (half a step); an overlap scheduler has already formed the next step, so one more."""
    if not pol.engine.schedules or pol.usage == "offline":  # offline: the queue is full, a slot refills at the edge
        return 0.0
    return 1.5 if pol.overlap_cpu else 0.5


def steady_notes(
    cfg: ServingConfig, sh: SteadyShape, pre: Report, *, front: float, wait: float, ttft_idle: float, b_mem: int
) -> tuple[Assumption, ...]:
    """The steady-state estimate's assumptions: the engine, the mean step, TTFT's parts, the serving path,
    memory, kernels, the layout's, speculative decoding's, weights and KV formats."""
    pol, w = cfg.policy, cfg.workload
    hit = w.input_length - sh.isl
    lengths = (
        f"dataset {w.name} (mean ISL {w.input_length}, OSL {w.output_length})"
        if w.length_mix
        else f"ISL {w.input_length}, OSL {w.output_length}"
    )
    if hit:
        lengths += (
            f", prefix hit rate {cfg.hit_rate:.3g}: {hit} prompt tokens from the prefix cache, {sh.isl} computed "
            "(attention over the whole context; the shared prefix's KV held once per replica)"
        )
    steady = (
        f"steady state at {sh.served} requests/replica"
        + (f" (requested {cfg.batch_size}, capped by {sh.capped})" if sh.capped else "")
        + f", {sh.m} microbatch(es) in flight, {lengths}: each step carries {sh.b * sh.dec_steps / sh.life:.1f} "
        f"decodes at context {sh.dec_ctx} and {sh.b * sh.isl / sh.life:.0f} prompt tokens in chunks of {sh.chunk} "
        + ("(one mixed forward pass, decodes first)" if pol.decode_first else "(separate prefill steps, prefill first)")
    )
    ttft_note = (
        f"TTFT: serving path {front * 1e3:.2f} ms + wait for the step in flight {wait * 1e3:.2f} ms "
        f"({step_wait_cycles(pol):g} step{'s' if pol.overlap_cpu else ''} at random arrival) + the prompt's "
        f"{sh.n_pf} chunk step(s) under load, no queueing (closed loop); idle-system TTFT {ttft_idle * 1e3:.2f} ms; "
        "tokens/s = B*OSL/(TTFT + (OSL-1)*TPOT) (Little's law)"
    )
    assumptions = (
        note(Topic.SERVING_ENGINE, pol.describe()),
        note(Topic.STEADY_STATE, steady),
        note(Topic.SERVING_TTFT, ttft_note),
        note(Topic.SERVING_PATH, pol.serving_path_note()),
        note(Topic.SERVING_MEMORY, memory_note(cfg, b_mem)),
        kernels_note(cfg, pre),
        *of_topic(pre.assumptions, Topic.ROOFLINE, Topic.DTYPE_PEAKS),
        *of_topic(pre.assumptions, *LAYOUT_TOPICS),
    )
    assumptions += cfg.scheme.serving_notes()
    wf = weight_format(cfg.model)
    if wf is not None:
        assumptions += (Assumption(topic=Topic.WEIGHT_FORMAT, facts=wf),)
    if cfg.kv_cache_dtype != "auto":
        kv = KvCacheDtype(kv_cache_dtype=cfg.kv_cache_dtype, from_flag=True)
        assumptions += (Assumption(topic=Topic.KV_DTYPE, facts=kv),)
    return assumptions


def estimate_serving(
    cfg: ServingConfig, *, use_disk_cache: bool = True, prefill: Report | None = None, coster: StepCoster | None = None
) -> ServingResult:
    """TTFT, TPOT, throughput and memory of ``cfg`` in steady state (see module docstring)."""
    cfg = resolve_partition(cfg, use_disk_cache=use_disk_cache)
    pol, w, par = cfg.policy, cfg.workload, cfg.parallel
    coster = coster or coster_for(cfg, use_disk_cache)
    osl = w.output_length
    pre = prefill or simulate(prefill_spec(cfg, use_disk_cache=use_disk_cache), use_disk_cache=use_disk_cache)
    front = pol.front_end_time_s(w.input_length)
    n_chunks = len(pre.spec.chunked_prefill.tokens) if pre.spec.chunked_prefill else 1
    ttft_idle = pre.latency_s + n_chunks * pol.step_cpu_s(1) + front
    sh = steady_shape(cfg)
    served, tau = sh.served, sh.tau
    dec_batch = mixed_batch(max(1, round(sh.b)), sh.dec_ctx, 0, 0, 0, sh.vt)
    decode_cycle = coster.cycle_s(dec_batch, sh.m, max(1, round(sh.b)), sh.dec_ctx) / tau
    tpot, ttft_steps = steady_cycles(coster, pol, sh)
    wait = step_wait_cycles(pol) * tpot * tau if served > 1 else 0.0
    ttft = front + wait + ttft_steps
    if served == 1:  # alone on an idle system: chunks pipelined through the stages (as before)
        ttft = ttft_idle
    e2e = ttft + (osl - 1) * tpot
    tps_replica = served * osl / e2e
    mem = memory_fit(replace(cfg, batch_size=served))
    b_mem = max_batch_for_memory(cfg)
    dec_report = coster.report(dec_batch) if dec_batch else pre
    cpu_step = pol.step_cpu_s(dec_batch.num_requests if dec_batch else 0)
    return ServingResult(
        config=replace(cfg, batch_size=served),
        ttft_s=ttft,
        tpot_s=tpot,
        decode_cycle_s=decode_cycle,
        prefill_interference_s=tpot - decode_cycle,
        step_overhead_s=cpu_step,
        e2e_latency_s=e2e,
        tokens_per_s=tps_replica * par.dp,
        tokens_per_s_per_device=tps_replica * par.dp / par.world_size,
        tokens_per_s_per_user=1.0 / tpot if tpot > 0 else 0.0,
        concurrency=served * par.dp,
        memory=mem,
        prefill=pre,
        decode=dec_report,
        assumptions=steady_notes(cfg, sh, pre, front=front, wait=wait, ttft_idle=ttft_idle, b_mem=b_mem),
        ttft_idle_s=ttft_idle,
        max_concurrency_memory=b_mem,
        capped_by=sh.capped,
        front_end_s=front,
        step_wait_s=wait,
    )
