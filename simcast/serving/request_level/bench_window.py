"""Warm-up, steady state and drain of one request-level run (``bench-serve``, ``--refine-top``, finite runs).

A finite benchmark starts from an empty engine and ends with a draining tail; what it measures over the
whole run is not its steady state. The window used here: **warm-up** lasts until the first request
completes (every slot the engine filled at the start has turned over once only after that, but before it
no output rate is representative), **drain** starts when the engine admits its last request (after that
no new work enters and the batch shrinks). Between the two the run is in steady state; its output
throughput is the tokens the steps made in the window over the window's length (all replicas).
A window shorter than a fifth of the run, or one in which fewer than 20 requests complete, is reported
as not reached: the run was too short (or too bursty) for a steady state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcast.serving.request_level.bench_result import BenchResult

MIN_SHARE = 0.2  # of the run's duration
MIN_COMPLETIONS = 20


@dataclass(frozen=True, kw_only=True)
class SteadyWindow:
    """The steady part of a run: ``[start_s, end_s]`` (engine time from the first send), its output
    throughput (tokens/s, all replicas) and the requests that completed in it."""

    start_s: float
    end_s: float
    reached: bool
    output_tokens_per_s: float
    completed: int
    reason: str  # why it was not reached ("" when it was)

    def describe(self) -> str:
        span = f"{self.start_s:.2f}-{self.end_s:.2f} s"
        if not self.reached:
            return f"steady state not reached ({self.reason}; window {span})"
        return (
            f"steady state {span} (warm-up until the first completion, drain after the last admission): "
            f"{self.output_tokens_per_s:.2f} output tok/s, {self.completed} requests completed in it"
        )


def steady_window(res: BenchResult) -> SteadyWindow:
    """The steady window of ``res`` (module docstring)."""
    reqs = res.requests
    if not reqs or res.step_end_s.size == 0:
        return SteadyWindow(start_s=0, end_s=0, reached=False, output_tokens_per_s=0, completed=0, reason="no steps")
    t0 = min(r.arrival_s + r.e2e_s - r.front_end_s for r in reqs)  # the first completion (engine time)
    t1 = max(r.admitted_s for r in reqs)  # the last admission
    done = sum(1 for r in reqs if t0 < r.arrival_s + r.e2e_s - r.front_end_s <= t1)
    span = t1 - t0
    sel = (res.step_end_s > t0) & (res.step_end_s <= t1)
    rate = float(res.step_tokens[sel].sum()) / span if span > 0 else 0.0
    reason = ""
    if span <= MIN_SHARE * res.duration_s:
        reason = f"the window is {max(span, 0) / max(res.duration_s, 1e-12):.0%} of the run (< {MIN_SHARE:.0%})"
    elif done < MIN_COMPLETIONS:
        reason = f"{done} requests completed in it (< {MIN_COMPLETIONS})"
    return SteadyWindow(
        start_s=float(t0),
        end_s=float(max(t1, t0)),
        reached=not reason,
        output_tokens_per_s=rate if not reason else float(np.nan),
        completed=done,
        reason=reason,
    )
