"""What a finite offline run measures: every prompt queued at t = 0, ramp-up and drain included.

``vllm bench throughput``, MLPerf Offline and ``vllm bench serve --request-rate inf`` with a few thousand
prompts start with the whole queue waiting and end with a draining tail; the steady state
(:mod:`simcast.serving.steady.model`) is a closed loop such a run never reaches at its start or end. This runs
the run itself through the request-level simulator (:mod:`simcast.serving.request_level.simulate`: the engine's
scheduler, KV admission and limits, the engine choosing its own batch) and reports the whole run's
throughput beside its steady window (:mod:`simcast.serving.request_level.bench_window`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcast.core.lengths import LengthDistribution
from simcast.serving.config import ServingConfig
from simcast.serving.kv_memory import kv_capacity_tokens
from simcast.serving.request_level.bench_window import SteadyWindow, steady_window
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.steady.model import coster_for


@dataclass(frozen=True, kw_only=True)
class FiniteRun:
    """One finite run of ``num_prompts`` prompts sent at once (tokens/s over all replicas)."""

    config: ServingConfig
    num_prompts: int
    duration_s: float
    output_tokens_per_s: float  # whole run: all output tokens over the run's duration
    output_tokens_per_s_per_device: float
    steady: SteadyWindow
    preemptions: int
    max_running: int  # the most requests the engine ran at once (all replicas)


def finite_run(
    cfg: ServingConfig,
    num_prompts: int,
    *,
    lengths: LengthDistribution | None = None,
    seed: int = 0,
    use_disk_cache: bool = True,
) -> FiniteRun:
    """Simulate ``num_prompts`` prompts of ``cfg``'s workload (or drawn from ``lengths``) all sent at t = 0.
    With a prefix hit rate (fixed lengths only) every prompt starts with the same ``floor(h·ISL)`` tokens,
    which the engine's prefix cache then serves in its own block granularity."""
    w = cfg.workload
    shared = cfg.cached_tokens(w.input_length) if lengths is None else 0
    reqs = make_requests(
        num_prompts=num_prompts,
        rate=math.inf,
        input_len=w.input_length - shared,
        output_len=w.output_length,
        seed=seed,
        lengths=lengths,
        prefix_len=shared,
    )
    cfg = replace(cfg, batch_size=1)
    res = simulate_requests(
        reqs, coster_for(cfg, use_disk_cache), kv_tokens_per_replica=kv_capacity_tokens(cfg), dp=cfg.parallel.dp
    )
    out = sum(r.output_len for r in res.requests)
    tps = out / res.duration_s if res.duration_s > 0 else 0.0
    return FiniteRun(
        config=cfg,
        num_prompts=num_prompts,
        duration_s=res.duration_s,
        output_tokens_per_s=tps,
        output_tokens_per_s_per_device=tps / cfg.parallel.world_size,
        steady=steady_window(res),
        preemptions=sum(r.preemptions for r in res.requests),
        max_running=max((s.running for s in res.samples), default=0) * cfg.parallel.dp,
    )
