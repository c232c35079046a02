"""An aggregated deployment at a target request rate: Poisson arrivals (MLPerf's server scenario,
``vllm bench serve --request-rate R``), open loop.

**Capacity** ``μ`` (requests/s, all replicas): the steady state (:mod:`simcast.serving.steady.model`) at the
largest concurrency the engine serves (``max_num_seqs``, the token budget or the KV memory, whichever binds);
**utilisation** ``ρ = λ / μ``; at ``ρ >= 1`` the queue grows without bound and no TTFT is given.

**Operating point**: the smallest concurrency ``B`` per replica whose steady state carries ``λ / dp``
requests/s (Little's law: ``B = λ · E2E(B)``); TPOT and the mean step ``T`` are that steady state's.

**TTFT** differs from the closed loop's in two places, both from Poisson arrivals meeting an engine that
puts every waiting prompt into its next step (vLLM V1 ``Scheduler.schedule`` @b4622cf: WAITING requests
after RUNNING ones, up to the token budget; SGLang's and TensorRT-LLM's schedulers alike):

- the step in flight is length-biased: a random arrival lands in a step of ``E[S²] / (2·E[S])`` residual
  (the renewal residual), not ``E[S] / 2``, with ``S`` the step carrying ``k ~ Poisson(λ_r·T)`` prompts;
- the request's own first prompt step carries the prompts that arrived with it during the step in flight,
  ``1 + Poisson(λ_r·T)`` prompts (given one arrival, the others of a Poisson stream are still Poisson), not
  its prompt alone.

An overlap scheduler's extra formed step (:func:`~simcast.serving.steady.model.step_wait_cycles`) stays.
**TTFT p99** (approximation, labelled): the 99th percentile ``k99`` of that Poisson count in both steps,
``S(k99) + S(1 + k99)`` for the residual and the own step. The **rate at which p99 passes a limit** is
found by bisection on ``λ`` (p99 grows with ``λ``). Queueing for admission beyond the engine's limits is not
modelled (``ρ < 1`` keeps the mean concurrency under them; near ``ρ = 1`` fluctuations would queue: the
figures there are optimistic).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from simcast.serving.config import ServingConfig
from simcast.serving.steady.model import ServingResult, coster_for, estimate_serving, step_wait_cycles
from simcast.serving.steady.shape import interp_count, steady_shape
from simcast.serving.step import mixed_batch

SATURATED = 10**7
"""A concurrency above every engine limit: the steady state caps it at what the engine serves."""


@dataclass(frozen=True, kw_only=True)
class RateEstimate:
    """One deployment at ``rate_per_s`` requests/s (all replicas); times in s."""

    rate_per_s: float
    capacity_per_s: float  # requests/s at the largest concurrency the engine serves
    utilisation: float  # rate / capacity
    concurrency: int  # per replica: the smallest steady concurrency carrying the rate (0: over capacity)
    step_s: float  # mean step cycle at that concurrency
    prompts_per_step: float  # mean prompts arriving per step, per replica
    ttft_s: float  # mean; inf at utilisation >= 1
    ttft_p99_s: float  # approximation (module docstring); inf at utilisation >= 1
    tpot_s: float
    steady: ServingResult | None  # the steady state at ``concurrency`` (None over capacity)


def poisson_quantile(mean: float, q: float) -> int:
    """The smallest ``k`` with ``P(Poisson(mean) <= k) >= q``."""
    p = math.exp(-mean)
    cdf, k = p, 0
    while cdf < q and k < 10_000:
        k += 1
        p *= mean / k
        cdf += p
    return k


def _poisson_moments(cost: Callable[[int], float], mean: float) -> tuple[float, float]:
    """``E[cost(k)]`` and ``E[cost(k)²]`` over ``k ~ Poisson(mean)`` (the tail past 1e-9 dropped)."""
    top = poisson_quantile(mean, 1 - 1e-9)
    p, m1, m2 = math.exp(-mean), 0.0, 0.0
    for k in range(top + 1):
        c = cost(k)
        m1, m2 = m1 + p * c, m2 + p * c * c
        p *= mean / (k + 1)
    return m1, m2


def capacity_per_s(cfg: ServingConfig, *, use_disk_cache: bool = True) -> tuple[float, ServingResult]:
    """Requests/s (all replicas) at the largest concurrency the engine serves, and that steady state."""
    sat = estimate_serving(replace(cfg, batch_size=SATURATED), use_disk_cache=use_disk_cache)
    return sat.tokens_per_s / cfg.workload.output_length, sat


def _carrying(cfg: ServingConfig, rate_replica: float, top: int, use_disk_cache: bool) -> ServingResult:
    """The steady state at the smallest concurrency in [1, top] whose requests/s per replica reach ``rate_replica``."""
    osl, dp = cfg.workload.output_length, cfg.parallel.dp

    def at(b: int) -> ServingResult:  # ``batch_size`` is the concurrency per replica
        return estimate_serving(replace(cfg, batch_size=b), use_disk_cache=use_disk_cache)

    lo, hi = 1, max(1, top)
    while lo < hi:
        mid = (lo + hi) // 2
        if at(mid).tokens_per_s / dp / osl >= rate_replica:
            hi = mid
        else:
            lo = mid + 1
    return at(lo)


def estimate_at_rate(
    cfg: ServingConfig,
    rate_per_s: float,
    *,
    use_disk_cache: bool = True,
    capacity: tuple[float, ServingResult] | None = None,
) -> RateEstimate:
    """TTFT (mean, p99), TPOT, utilisation and capacity of ``cfg`` at ``rate_per_s`` Poisson requests/s
    (``capacity``: :func:`capacity_per_s`'s answer when already known)."""
    cap, sat = capacity or capacity_per_s(cfg, use_disk_cache=use_disk_cache)
    rho = rate_per_s / cap if cap > 0 else math.inf
    if rho >= 1:
        return RateEstimate(
            rate_per_s=rate_per_s,
            capacity_per_s=cap,
            utilisation=rho,
            concurrency=0,
            step_s=sat.tpot_s,
            prompts_per_step=math.inf,
            ttft_s=math.inf,
            ttft_p99_s=math.inf,
            tpot_s=sat.tpot_s,
            steady=None,
        )
    dp = cfg.parallel.dp
    st = _carrying(cfg, rate_per_s / dp, sat.concurrency // dp, use_disk_cache)
    scfg = st.config
    sh = steady_shape(scfg)
    coster = coster_for(scfg, use_disk_cache)
    pol = scfg.policy
    dec = max(0, round(sh.others_dec)) if pol.decode_first else 0
    ctx, chunk_ctx = sh.dec_ctx, sh.chunk_ctx
    dec_step = coster.cycle_s(mixed_batch(max(1, round(sh.b)), ctx, 0, 0, 0, sh.vt), sh.m, round(sh.b), ctx)

    def step(k: int) -> float:
        """A step carrying ``k`` prompt chunks (decode-first: with the running decodes; prefill-first: a
        prefill step, a decode step when ``k`` is 0)."""
        if k == 0 and not pol.decode_first:
            return dec_step
        batch = mixed_batch(dec, ctx, k, sh.chunk, chunk_ctx, sh.vt)
        return coster.cycle_s(batch, sh.m, dec, ctx)

    t = st.tpot_s * sh.tau  # the mean step a decoding request sees
    k_mean = rate_per_s / dp * t  # prompts arriving per step at one replica
    m1, m2 = _poisson_moments(step, k_mean)
    residual = m2 / (2 * m1) if m1 > 0 else 0.0
    extra_formed = (step_wait_cycles(pol) - 0.5) * t if step_wait_cycles(pol) else 0.0
    own_extra = interp_count(lambda k: step(1 + k), k_mean) - step(1)
    base = st.ttft_s - st.step_wait_s  # serving path + the prompt's chunk steps under load
    ttft = base + residual + extra_formed + own_extra
    k99 = poisson_quantile(k_mean, 0.99)
    p99 = base + step(k99) + extra_formed + (step(1 + k99) - step(1))
    return RateEstimate(
        rate_per_s=rate_per_s,
        capacity_per_s=cap,
        utilisation=rho,
        concurrency=sh.served,
        step_s=t,
        prompts_per_step=k_mean,
        ttft_s=ttft,
        ttft_p99_s=max(p99, ttft),
        tpot_s=st.tpot_s,
        steady=st,
    )


def rate_at_p99_limit(cfg: ServingConfig, ttft_limit_s: float, *, use_disk_cache: bool = True) -> float:
    """The request rate (requests/s, all replicas) at which the TTFT p99 of :func:`estimate_at_rate` reaches
    ``ttft_limit_s`` (bisection to 2% of capacity); 0 when even a light load misses it, the capacity when the
    limit holds up to it."""
    known = capacity_per_s(cfg, use_disk_cache=use_disk_cache)
    cap = known[0]

    def ok(rate: float) -> bool:
        est = estimate_at_rate(cfg, rate, use_disk_cache=use_disk_cache, capacity=known)
        return est.ttft_p99_s <= ttft_limit_s

    if not ok(0.01 * cap):
        return 0.0
    if ok(0.995 * cap):
        return cap
    lo, hi = 0.01 * cap, 0.995 * cap
    while hi - lo > 0.02 * cap:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo
