"""Serving estimate for an aggregated (colocated prefill + decode) deployment.

For a workload (ISL, OSL) and concurrency ``B`` per replica on one TP x PP
layout, built from two simulated steps:

- **TTFT**: one request's prompt prefilled alone (no queueing), chunked at
  ``max_batched_tokens``; the chunks are microbatches that flow through the
  pipeline (fill-drain), plus the runtime's per-step overhead per chunk.
- **Decode step**: ``B`` requests at mean context ``ISL + OSL/2``, split into
  ``M`` microbatches in flight (vLLM keeps ``pp``). Each microbatch step costs
  the engine's CPU ``o = step_overhead + per_request · B/M`` before its GPU
  work (the next step needs the sampled tokens). In steady state a microbatch
  returns every ``max(o + Σ_s t_s, M · max_s t_s, M · o)``: its own round trip,
  the bottleneck stage serving all M, or the CPU scheduling all M steps.
- **Prefill interference**: each request's prefill occupies the pipeline's
  bottleneck stage once per request lifetime; amortised over its OSL decode
  steps it adds ``B · prefill_busy / OSL`` to every step (aggregated serving).
- **TPOT** = decode cycle + interference. Output token/s per
  replica = ``B / TPOT``; token/s/user = ``1 / TPOT``.
- **Memory per stage**: weights + KV for ``B · (ISL + OSL)`` tokens on the
  stage's layers + activation peak + reserved margin, against
  ``mem_utilization · HBM``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcast.core.errors import require
from simcast.core.memory import stage_activation_bytes, stage_kv_bytes_for, stage_weight_bytes
from simcast.core.moe_memory import kv_dtype_bytes
from simcast.core.shards import sharded_dims
from simcast.sim.partition import resolve_partition as resolve_sim_partition
from simcast.core.plan import build_pipeline_stage_plan
from simcast.sim.simulate import Report, simulate
from simcast.core.specs import GIB, Batch, DeviceSpec, ModelSpec, ParallelSpec, SimSpec


@dataclass(frozen=True, kw_only=True)
class RuntimeProfile:
    """Per-iteration time an engine spends outside the kernels (scheduling, input
    preparation, sampling bookkeeping, graph launch). Assumed values, labelled as
    such in every result; set them from your own engine's profile."""

    name: str
    step_overhead_s: float
    per_request_overhead_s: float
    note: str


RUNTIME_PROFILES: dict[str, RuntimeProfile] = {
    "vllm": RuntimeProfile(name="vllm", step_overhead_s=2.0e-3, per_request_overhead_s=5e-6,
                           note="assumption: vLLM-like engine, ~2 ms CPU work per step + 5 us per scheduled request"),
    "sglang": RuntimeProfile(name="sglang", step_overhead_s=1.0e-3, per_request_overhead_s=3e-6,
                             note="assumption: SGLang-like overlap scheduler hides most CPU work: ~1 ms + 3 us/request"),
    "none": RuntimeProfile(name="none", step_overhead_s=0.0, per_request_overhead_s=0.0,
                           note="no per-step engine overhead (kernels only)"),
}


@dataclass(frozen=True, kw_only=True)
class Workload:
    input_length: int
    output_length: int
    max_batched_tokens: int = 0  # 0: min(ISL, 8192), an assumed engine default; set your engine's value

    def __post_init__(self) -> None:
        require(self.input_length >= 1, "--input-length", self.input_length, "must be >= 1")
        require(self.output_length >= 1, "--output-length", self.output_length, "must be >= 1")
        require(self.max_batched_tokens >= 0, "--max-batched-tokens", self.max_batched_tokens, "must be >= 0")

    @property
    def chunk_tokens(self) -> int:
        return self.max_batched_tokens or min(self.input_length, 8192)


@dataclass(frozen=True, kw_only=True)
class ServingConfig:
    model: ModelSpec
    device: DeviceSpec
    parallel: ParallelSpec
    workload: Workload
    batch_size: int  # concurrency per replica
    partition: str = "vllm"
    decode_microbatches: int = 0  # 0: pp
    runtime: str = "vllm"
    mem_utilization: float = 0.90
    reserved_bytes: int = 2 * GIB
    expert_imbalance: float = 1.0  # MoE: busiest expert rank's load / the uniform-routing expectation
    kv_cache_dtype: str = "auto"  # auto (model dtype) | bf16 | fp8

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, "batch_size", self.batch_size, "must be >= 1")
        require(self.runtime in RUNTIME_PROFILES, "runtime", self.runtime, f"allowed: {', '.join(RUNTIME_PROFILES)}")
        require(0 < self.mem_utilization <= 1, "mem_utilization", self.mem_utilization, "must be in (0, 1]")

    @property
    def microbatches(self) -> int:
        return self.decode_microbatches or self.parallel.pp


@dataclass(frozen=True, kw_only=True)
class MemoryFit:
    stage_weight_bytes: tuple[int, ...]
    stage_kv_bytes: tuple[int, ...]
    stage_activation_bytes: tuple[int, ...]
    reserved_bytes: int
    budget_bytes: int

    @property
    def stage_total_bytes(self) -> tuple[int, ...]:
        return tuple(w + k + a + self.reserved_bytes for w, k, a in
                     zip(self.stage_weight_bytes, self.stage_kv_bytes, self.stage_activation_bytes))

    @property
    def fits(self) -> bool:
        return max(self.stage_total_bytes) <= self.budget_bytes


@dataclass(frozen=True, kw_only=True)
class ServingResult:
    config: ServingConfig
    ttft_s: float
    tpot_s: float
    decode_cycle_s: float
    prefill_interference_s: float
    step_overhead_s: float  # engine CPU time per microbatch step (inside decode_cycle_s)
    e2e_latency_s: float
    tokens_per_s: float  # output tokens/s, all replicas
    tokens_per_s_per_device: float
    tokens_per_s_per_user: float
    concurrency: int  # all replicas
    memory: MemoryFit
    prefill: Report
    decode: Report
    assumptions: tuple[str, ...]


def memory_fit(cfg: ServingConfig) -> MemoryFit:
    """Per-stage memory for ``B · (ISL + OSL)`` tokens of KV; pure arithmetic (no trace)."""
    m, par, w = cfg.model, cfg.parallel, cfg.workload
    sd = sharded_dims(m, par.tp)
    plan = build_pipeline_stage_plan(m.num_layers, par.pp, cfg.partition, m.tie_word_embeddings)
    kvb = kv_dtype_bytes(m, cfg.kv_cache_dtype)
    chunk = Batch.prefill(1, min(w.chunk_tokens, w.input_length))
    dec = Batch.decode(max(1, math.ceil(cfg.batch_size / cfg.microbatches)), w.input_length)
    return MemoryFit(
        stage_weight_bytes=tuple(stage_weight_bytes(m, sd, i, s, par)
                                 for i, s in zip(plan.stage_infos, plan.stage_module_specs)),
        stage_kv_bytes=tuple(stage_kv_bytes_for(m, sd, i, cfg.batch_size, w.input_length + w.output_length, kvb)
                             for i in plan.stage_infos),
        stage_activation_bytes=tuple(max(stage_activation_bytes(m, sd, s, chunk), stage_activation_bytes(m, sd, s, dec))
                                     for s in plan.stage_module_specs),
        reserved_bytes=cfg.reserved_bytes, budget_bytes=int(cfg.device.hbm_bytes * cfg.mem_utilization))


def prefill_spec(cfg: ServingConfig) -> SimSpec:
    w = cfg.workload
    chunks = math.ceil(w.input_length / w.chunk_tokens)
    return SimSpec(model=cfg.model, device=cfg.device, parallel=cfg.parallel,
                   batch=Batch.prefill(1, w.input_length), num_microbatches=chunks, partition=cfg.partition,
                   expert_imbalance=cfg.expert_imbalance, kv_cache_dtype=cfg.kv_cache_dtype)


def decode_spec(cfg: ServingConfig) -> SimSpec:
    w = cfg.workload
    ctx = w.input_length + w.output_length // 2
    return SimSpec(model=cfg.model, device=cfg.device, parallel=cfg.parallel,
                   batch=Batch.decode(cfg.batch_size, ctx), num_microbatches=cfg.microbatches, partition=cfg.partition,
                   expert_imbalance=cfg.expert_imbalance, kv_cache_dtype=cfg.kv_cache_dtype)


def resolve_partition(cfg: ServingConfig, *, use_disk_cache: bool = True) -> ServingConfig:
    """``balanced`` -> explicit layer counts balanced for the decode step at ``cfg``'s batch
    (one partition serves both phases, as in a real deployment)."""
    if cfg.partition != "balanced":
        return cfg
    return replace(cfg, partition=resolve_sim_partition(decode_spec(cfg), use_disk_cache=use_disk_cache).partition)


def estimate_serving(cfg: ServingConfig, *, use_disk_cache: bool = True,
                     prefill: Report | None = None) -> ServingResult:
    """TTFT, TPOT, throughput and memory of ``cfg`` (see module docstring)."""
    cfg = resolve_partition(cfg, use_disk_cache=use_disk_cache)
    rt = RUNTIME_PROFILES[cfg.runtime]
    w, par = cfg.workload, cfg.parallel
    pre = prefill or simulate(prefill_spec(cfg), use_disk_cache=use_disk_cache)
    dec = simulate(decode_spec(cfg), use_disk_cache=use_disk_cache)
    n_chunks = pre.runtime.num_microbatches
    ttft = pre.latency_s + n_chunks * (rt.step_overhead_s + rt.per_request_overhead_s)
    st = dec.runtime.stage_times_s
    m = dec.runtime.num_microbatches
    overhead = rt.step_overhead_s + rt.per_request_overhead_s * cfg.batch_size / m  # per microbatch step
    cycle = max(overhead + sum(st), m * max(st), m * overhead)
    prefill_busy = n_chunks * max(pre.runtime.stage_times_s)
    interference = cfg.batch_size * prefill_busy / w.output_length
    tpot = cycle + interference
    tps_replica = cfg.batch_size / tpot
    assumptions = (
        f"runtime {rt.name}: {rt.note}",
        f"TTFT: one request alone, {n_chunks} chunk(s) of <= {w.chunk_tokens} tokens pipelined through {par.pp} stage(s)",
        f"decode: {cfg.batch_size} requests/replica at context {w.input_length + w.output_length // 2}, "
        f"{m} microbatch(es) in flight; cycle = max(step overhead + sum stage times, M * max stage time, "
        f"M * step overhead) = {cycle * 1e3:.3f} ms",
        f"prefill interference: B * prefill bottleneck-stage time / OSL = {interference * 1e3:.3f} ms per step",
        f"memory: weights + KV(B*(ISL+OSL)) + activations + {cfg.reserved_bytes / GIB:.1f} GiB reserved "
        f"<= {cfg.mem_utilization:.2f} * HBM",
    ) + pre.assumptions[:2]
    return ServingResult(
        config=cfg, ttft_s=ttft, tpot_s=tpot, decode_cycle_s=cycle, prefill_interference_s=interference,
        step_overhead_s=overhead, e2e_latency_s=ttft + (w.output_length - 1) * tpot,
        tokens_per_s=tps_replica * par.dp, tokens_per_s_per_device=tps_replica * par.dp / par.world_size,
        tokens_per_s_per_user=1.0 / tpot, concurrency=cfg.batch_size * par.dp, memory=memory_fit(cfg),
        prefill=pre, decode=dec, assumptions=assumptions)
