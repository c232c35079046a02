"""Refine a layout's steady-state estimate with the request-level simulator: the highest request rate
whose p90 TTFT (and mean TPOT) meets the limits.

The steady state (:mod:`simcast.serving.steady.model`) is a closed loop without queueing; a real service sees
open-loop arrivals, queues and percentiles. For one layout, :func:`refine_layout` runs
:func:`simcast.serving.request_level.simulate.simulate_requests` — ``vllm bench serve``'s random dataset with
Poisson arrivals (gamma shape 1), a fixed seed, the layout's engine scheduler and KV capacity — at a
sequence of request rates and brackets the limit by bisection:

1. start at the steady state's request throughput (its output token/s over OSL);
2. double the rate while it meets the limits, or halve it while it does not, until the two
   neighbouring probes disagree (a bracket ``lo`` meets, ``hi`` misses);
3. bisect the bracket geometrically until ``hi / lo <= 1 + rel_tol``.

Invariant (tested): the reported rate ``lo`` meets the limits and ``hi``, at most ``rel_tol`` above it,
does not. With a fixed seed the arrival times scale exactly as ``1/rate`` (the gaps are drawn once and
rescaled), so successive probes differ only in the rate. p90 TTFT normally grows with the rate; where
it does not (a discrete scheduler can be non-monotone within a few percent), the bracket is still a
pair of measured probes, never an interpolation.

The p90 TTFT is taken over the second half of the requests by send time, so a rate above capacity (a
queue that grows over the run) shows even when the run's first half does not; each probe sends
10 x the steady-state concurrency prompts (1,000-20,000) so that queue has time to build.

Metrics follow ``vllm bench serve``: TTFT from the request's send time, TPOT per request
``(E2E - TTFT) / (output - 1)``, output throughput = generated tokens / duration (first send to last
completion), divided here by the layout's devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from simcast.core.errors import require
from simcast.inputs.limits import MAX_BENCH_TOKENS
from simcast.serving.request_level.bench_result import tpots_s
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.steady.model import ServingConfig, coster_for, kv_capacity_tokens

PERCENTILE = 90
MAX_DOUBLINGS = 8  # 256 x the steady-state rate: past that every request arrives within one step anyway
MAX_HALVINGS = 12  # 1/4096 of the steady-state rate: a near-idle system; missing there, no rate meets
MIN_PROMPTS, MAX_PROMPTS = 1000, 20000


def default_prompts(concurrency: int, input_length: int, output_length: int) -> int:
    """Prompts per probe: 10 x the steady-state concurrency, so a queue that grows (a rate above capacity)
    has time to build for large-batch layouts (a 2,000-prompt window once ended before it did: 348 req/s
    reported sustainable against a steady state of 87), within [1000, 20000] and bench-serve's token cap."""
    n = min(MAX_PROMPTS, max(MIN_PROMPTS, 10 * concurrency))
    return max(1, min(n, MAX_BENCH_TOKENS // (input_length + output_length)))


@dataclass(frozen=True, kw_only=True)
class RatePoint:
    """One request-level run at ``rate_per_s`` requests/s (all replicas)."""

    rate_per_s: float
    p90_ttft_s: float
    mean_tpot_s: float
    output_tokens_per_s_per_device: float
    meets: bool


@dataclass(frozen=True, kw_only=True)
class RefineTask:
    """What a worker needs to refine one layout (picklable: a pool or Ray task)."""

    config: ServingConfig  # the layout, partition resolved (batch_size is not used)
    start_rate_per_s: float  # the steady state's request throughput
    ttft_limit_s: float  # on p90 TTFT
    tpot_limit_s: float = math.inf  # on mean TPOT
    num_prompts: int = MIN_PROMPTS
    seed: int = 0
    rel_tol: float = 0.03  # the bracket's final hi / lo - 1
    use_disk_cache: bool = True

    def __post_init__(self) -> None:
        require(math.isfinite(self.ttft_limit_s) and self.ttft_limit_s > 0, "--ttft-limit", self.ttft_limit_s, "> 0")
        require(
            math.isfinite(self.start_rate_per_s) and self.start_rate_per_s > 0,
            "start rate",
            self.start_rate_per_s,
            "must be a finite number > 0 (requests/s)",
        )
        require(self.num_prompts >= 1, "--refine-prompts", self.num_prompts, "must be >= 1")
        require(0 < self.rel_tol < 1, "rel_tol", self.rel_tol, "must be in (0, 1)")


@dataclass(frozen=True, kw_only=True)
class Refinement:
    """The bracket found for one layout: ``best`` meets the limits, ``above`` (at most ``rel_tol``
    higher) does not. ``best`` None: even the lowest probed rate misses them; ``above`` None: the
    highest probed rate still meets them."""

    task: RefineTask
    best: RatePoint | None
    above: RatePoint | None
    probes: tuple[RatePoint, ...]  # in the order run


def probe(task: RefineTask, rate_per_s: float, coster=None) -> RatePoint:
    """One request-level run of ``task.config`` at ``rate_per_s`` (Poisson arrivals, ``task.seed``)."""
    cfg = task.config
    w, par = cfg.workload, cfg.parallel
    coster = coster or coster_for(cfg, task.use_disk_cache)
    reqs = make_requests(
        num_prompts=task.num_prompts,
        rate=rate_per_s,
        input_len=w.input_length,
        output_len=w.output_length,
        seed=task.seed,
    )
    kv_tokens = kv_capacity_tokens(cfg)  # one replica's KV capacity, as bench-serve
    res = simulate_requests(reqs, coster, kv_tokens_per_replica=kv_tokens, dp=par.dp)
    # the second half of the requests by send time: an overloaded rate shows as TTFT growing over the run
    late = sorted(res.requests, key=lambda r: r.arrival_s)[len(res.requests) // 2 :]
    ttft = np.array([r.ttft_s for r in late])
    tpot = np.array(tpots_s(res.requests))
    p90 = float(np.percentile(ttft, PERCENTILE)) if ttft.size else math.inf
    mean_tpot = float(tpot.mean()) if tpot.size else 0.0
    out_tokens = sum(r.output_len for r in res.requests)
    tps_dev = out_tokens / res.duration_s / par.world_size if res.duration_s > 0 else 0.0
    return RatePoint(
        rate_per_s=rate_per_s,
        p90_ttft_s=p90,
        mean_tpot_s=mean_tpot,
        output_tokens_per_s_per_device=tps_dev,
        meets=p90 <= task.ttft_limit_s and mean_tpot <= task.tpot_limit_s,
    )


def refine_layout(task: RefineTask) -> Refinement:
    """Bracket the highest rate meeting the limits (see the module docstring); one step-cost memo
    serves every probe, so each distinct step shape is simulated once per layout."""
    coster = coster_for(task.config, task.use_disk_cache)
    probes: list[RatePoint] = []

    def run(rate: float) -> RatePoint:
        p = probe(task, rate, coster)
        probes.append(p)
        return p

    lo: RatePoint | None = None
    hi: RatePoint | None = None
    p = run(task.start_rate_per_s)
    if p.meets:
        lo = p
        for _ in range(MAX_DOUBLINGS):
            p = run(lo.rate_per_s * 2)
            if not p.meets:
                hi = p
                break
            lo = p
    else:
        hi = p
        for _ in range(MAX_HALVINGS):
            p = run(hi.rate_per_s / 2)
            if p.meets:
                lo = p
                break
            hi = p
    while lo is not None and hi is not None and hi.rate_per_s / lo.rate_per_s > 1 + task.rel_tol:
        p = run(math.sqrt(lo.rate_per_s * hi.rate_per_s))
        if p.meets:
            lo = p
        else:
            hi = p
    return Refinement(task=task, best=lo, above=hi, probes=tuple(probes))


def refine_task(
    config: ServingConfig,
    *,
    steady_tokens_per_s: float,
    ttft_limit_s: float,
    tpot_limit_s: float = math.inf,
    num_prompts: int = 0,
    steady_concurrency: int = 1,
    use_disk_cache: bool = True,
) -> RefineTask:
    """The task for one ranked layout: start at its steady-state request throughput
    (``steady_tokens_per_s / OSL``); ``num_prompts`` 0 picks :func:`default_prompts`."""
    w = config.workload
    n = num_prompts or default_prompts(steady_concurrency, w.input_length, w.output_length)
    require(
        n * (w.input_length + w.output_length) <= MAX_BENCH_TOKENS,
        "--refine-prompts",
        n,
        f"x (ISL + OSL) tokens must be <= {MAX_BENCH_TOKENS:.0e} per run (bench-serve's bound)",
    )
    return RefineTask(
        config=replace(config, batch_size=1),
        start_rate_per_s=max(steady_tokens_per_s / w.output_length, 1e-6),
        ttft_limit_s=ttft_limit_s,
        tpot_limit_s=tpot_limit_s,
        num_prompts=n,
        use_disk_cache=use_disk_cache,
    )
