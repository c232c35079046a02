"""``vllm bench serve``'s metrics of a request-level run, typed: counts, throughputs, and the mean, median,
spread and tail of TTFT, TPOT, ITL and end-to-end latency (ms, as ``vllm bench serve`` reports them).

Computed here from a :class:`~simcast.serving.request_level.bench_result.BenchResult`;
:mod:`simcast.render.bench_tables`
only words them (the printed block, the ``--save-result`` JSON keys). TPOT per request is
:attr:`RequestResult.tpot_s <simcast.serving.request_level.bench_result.RequestResult.tpot_s>`:
``(E2E - TTFT) / (output - 1)``
for outputs > 1, as vLLM counts it; ITL from the step gaps each decoding request saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcast.serving.request_level.bench_result import BenchResult, tpots_s
from simcast.serving.request_level.bench_window import SteadyWindow, steady_window


@dataclass(frozen=True, kw_only=True)
class LatencyStats:
    """Mean, median, standard deviation, 90th and 99th percentile of one latency over the run (ms)."""

    mean_ms: float
    median_ms: float
    std_ms: float
    p90_ms: float
    p99_ms: float

    @staticmethod
    def of(values_ms: np.ndarray) -> LatencyStats:
        """The statistics of ``values_ms`` (each request once; none: zeros)."""
        v = values_ms if values_ms.size else np.zeros(1)
        return LatencyStats(
            mean_ms=float(v.mean()),
            median_ms=float(np.median(v)),
            std_ms=float(v.std()),
            p90_ms=float(np.percentile(v, 90)),
            p99_ms=float(np.percentile(v, 99)),
        )

    @staticmethod
    def weighted(values_ms: np.ndarray, weights: np.ndarray) -> LatencyStats:
        """The statistics of ``values_ms``, each counted ``weights`` times (the step gaps: once per decoding
        request that saw it; none: zeros)."""
        iv, iw = values_ms, weights.astype(float)
        mean = float((iv * iw).sum() / iw.sum()) if iw.size else 0.0
        return LatencyStats(
            mean_ms=mean,
            median_ms=_weighted_percentile(iv, iw, 50),
            std_ms=float(np.sqrt((iw * (iv - mean) ** 2).sum() / iw.sum())) if iw.size else 0.0,
            p90_ms=_weighted_percentile(iv, iw, 90),
            p99_ms=_weighted_percentile(iv, iw, 99),
        )


def _weighted_percentile(v: np.ndarray, w: np.ndarray, p: float) -> float:
    if v.size == 0:
        return 0.0
    o = np.argsort(v)
    cw = np.cumsum(w[o])
    return float(v[o][min(np.searchsorted(cw, p / 100 * cw[-1]), v.size - 1)])


@dataclass(frozen=True, kw_only=True)
class BenchMetrics:
    """One run's ``vllm bench serve`` metrics: the client's settings (``request_rate_per_s``: inf sends all
    at t = 0; ``max_concurrency`` None: no limit), counts (requests, tokens), throughputs over the run's
    ``duration_s`` (s; 1 s for an empty run, as the throughputs divide by it), the peak of requests running
    or waiting, the prefix cache's hits, the four latencies, and the run's steady-state window."""

    num_prompts: int
    request_rate_per_s: float
    burstiness: float
    max_concurrency: int | None
    duration_s: float
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput_req_s: float
    output_throughput_tok_s: float
    total_token_throughput_tok_s: float
    max_concurrent_requests: int
    prefix_cache_hit_rate: float
    prefix_cache_hit_tokens: int
    prefix_cache_query_tokens: int
    ttft: LatencyStats
    tpot: LatencyStats
    itl: LatencyStats
    e2el: LatencyStats
    steady: SteadyWindow


def bench_metrics(
    r: BenchResult, *, request_rate_per_s: float, burstiness: float, max_concurrency: int | None, num_prompts: int
) -> BenchMetrics:
    """The metrics of run ``r``, sent by a client at ``request_rate_per_s`` (gamma gaps of shape
    ``burstiness``) with at most ``max_concurrency`` requests in flight, of ``num_prompts`` requests."""
    reqs = r.requests
    dur = r.duration_s or 1.0
    tin = sum(x.input_len for x in reqs)
    tout = sum(x.output_len for x in reqs)
    return BenchMetrics(
        num_prompts=num_prompts,
        request_rate_per_s=request_rate_per_s,
        burstiness=burstiness,
        max_concurrency=max_concurrency,
        duration_s=dur,
        completed=len(reqs),
        failed=num_prompts - len(reqs),
        total_input_tokens=tin,
        total_output_tokens=tout,
        request_throughput_req_s=len(reqs) / dur,
        output_throughput_tok_s=tout / dur,
        total_token_throughput_tok_s=(tin + tout) / dur,
        max_concurrent_requests=max((s.running + s.waiting for s in r.samples), default=0),
        prefix_cache_hit_rate=r.prefix_hit_rate,
        prefix_cache_hit_tokens=r.prefix_hit_tokens,
        prefix_cache_query_tokens=r.prefix_query_tokens,
        ttft=LatencyStats.of(np.array([x.ttft_s for x in reqs]) * 1e3),
        tpot=LatencyStats.of(np.array(tpots_s(reqs)) * 1e3),
        itl=LatencyStats.weighted(r.itl_s * 1e3, r.itl_weight),
        e2el=LatencyStats.of(np.array([x.e2e_s for x in reqs]) * 1e3),
        steady=steady_window(r),
    )
