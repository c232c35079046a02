"""The records a request-level serving run returns (:func:`simcast.serving.request_level.simulate.simulate_requests`):
each request's times, the queue and KV samples, and the run's step gaps and totals. Times in s, lengths in tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, kw_only=True)
class RequestResult:
    arrival_s: float  # when the client sent it (TTFT and E2E count from here, as vllm bench serve does)
    input_len: int
    output_len: int
    ttft_s: float
    e2e_s: float
    preemptions: int
    replica: int
    front_end_s: float = 0.0  # the serving path's share of ttft_s and e2e_s (API server, tokenise, stream)
    admitted_s: float = -1.0  # when the engine first admitted it (its replica's clock)
    cached_tokens: int = 0  # prompt tokens found in the prefix cache at its first admission (not computed)

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (s): ``(E2E - TTFT) / (output - 1)``, as ``vllm bench serve``
        counts it; None for a one-token output."""
        return (self.e2e_s - self.ttft_s) / (self.output_len - 1) if self.output_len > 1 else None


def tpots_s(requests: Iterable[RequestResult]) -> list[float]:
    """Each request's TPOT (s), requests with outputs > 1 only (as ``vllm bench serve`` averages it)."""
    return [t for t in (x.tpot_s for x in requests) if t is not None]


@dataclass(frozen=True, kw_only=True)
class Sample:
    time_s: float
    replica: int
    running: int
    waiting: int
    kv_used_blocks: int
    kv_total_blocks: int


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    requests: tuple[RequestResult, ...]
    itl_s: np.ndarray  # step gaps seen by decoding requests (values)
    itl_weight: np.ndarray  # how many requests saw each gap
    samples: tuple[Sample, ...]
    duration_s: float
    steps: int
    distinct_batches: int
    step_end_s: np.ndarray = field(default_factory=lambda: np.zeros(0))  # when each step ended (its replica's clock)
    step_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # output tokens it made
    prefix_hit_tokens: int = 0  # prompt tokens served from the prefix cache, all admissions (preemptions too)
    prefix_query_tokens: int = 0  # prompt tokens looked up in it, all admissions

    @property
    def prefix_hit_rate(self) -> float:
        """Share of looked-up prompt tokens found in the prefix cache (vLLM's prefix cache hit rate)."""
        return self.prefix_hit_tokens / self.prefix_query_tokens if self.prefix_query_tokens else 0.0
