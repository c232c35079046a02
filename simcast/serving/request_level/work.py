"""The work a request-level run implies, bounded before it starts (``bench-serve``, ``calibrate-serving``).

A run of the request-level simulator (:mod:`simcast.serving.request_level.simulate`) costs two things:

- per engine step, forming and costing it: ~4e4 steps/s on one core (measured: 1e5 steps of Qwen3-0.6B
  at concurrency 1 in 2.5 s, 2-core development machine);
- per request in a step, scheduling it: ~5e5 request-steps/s (1e7 output tokens at 10k requests in
  flight in 21 s, same machine).

Request-steps are the output tokens plus the prompt chunks (:func:`token_steps`; the number of steps at
concurrency 1), bounded by :data:`~simcast.inputs.limits.MAX_BENCH_TOKENS`. Engine steps are those over
the requests in flight per replica (:func:`in_flight_per_replica`, an estimate), bounded by
:data:`~simcast.inputs.limits.MAX_BENCH_STEPS`: each bound is ~100 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from simcast.core.errors import require
from simcast.inputs.limits import MAX_BENCH_STEPS, MAX_BENCH_TOKENS


def token_steps(lengths: Iterable[tuple[int, int]], chunk_tokens: int) -> int:
    """Output tokens plus prompt chunks of ``chunk_tokens`` over ``(input_len, output_len)`` pairs: the engine
    steps the requests take one at a time."""
    return sum(o + -(-i // max(1, chunk_tokens)) for i, o in lengths)


MIN_STEP_S = 1e-3
"""A lower estimate of one engine step (s), for how deeply requests that arrive over time overlap: a decode
step reads every weight and costs the engine's CPU time (simcast's smallest shipped model on H100 with
vLLM's assumed 2 ms CPU: 3.7 ms). Only the work estimate uses it."""


def in_flight_per_replica(
    num_requests: int,
    *,
    rate_per_s: float,
    mean_output_len: float,
    max_concurrency: int,
    dp: int,
    max_num_seqs: int,
    kv_requests: float,
) -> float:
    """Requests a replica's steps carry, an estimate of the steady state: every request at once (rate inf) or,
    for arrivals at ``rate_per_s``, Little's law with each request lasting at least ``mean_output_len`` steps
    of :data:`MIN_STEP_S`; capped by the client's limit, the replicas' share, the engine's ``max_num_seqs``
    and how many requests its KV cache holds (``kv_requests``)."""
    arriving = num_requests if math.isinf(rate_per_s) else rate_per_s * mean_output_len * MIN_STEP_S
    c = min(arriving, max_concurrency or num_requests, num_requests)
    return max(1.0, min(c / max(1, dp), max_num_seqs, kv_requests))


def require_bench_work(
    field: str, value: object, steps_at_one: int, in_flight: float, chunk_tokens: int, *, remedy: str = ""
) -> None:
    """One error line naming ``field`` when the run would take more than ~100 s (see the module docstring).
    ``remedy``: what else lowers the work, in the flags of the command that runs it (default: fewer requests)."""
    require(
        steps_at_one <= MAX_BENCH_TOKENS,
        field,
        value,
        f"implies {steps_at_one} request-steps (output tokens + prompt chunks of {chunk_tokens}); at most "
        f"{MAX_BENCH_TOKENS:.0e} are simulated (~100 s)",
    )
    steps = steps_at_one / max(1.0, in_flight)
    require(
        steps <= MAX_BENCH_STEPS,
        field,
        value,
        f"implies ~{steps:.2g} engine steps ({steps_at_one} output tokens + prompt chunks of {chunk_tokens} at "
        f"~{in_flight:.4g} requests in flight per replica); at most {MAX_BENCH_STEPS:.0e} are simulated (~100 s): "
        + (remedy or f"simulate fewer requests ({field})"),
    )
