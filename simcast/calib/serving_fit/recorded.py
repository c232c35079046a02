"""A request-level replay recorded once and re-timed for any CPU overheads (``calibrate-serving``'s fit).

The fit evaluates ~30 trial ``(a, b)`` = (CPU time per step, per request in the step). Replaying every
run for each one cost 30 replays (200 requests at concurrency 1: 172 s). When what each step carries
cannot depend on how long the steps take (:func:`time_invariant`), the replay runs once with a
stand-in coster that records each step's microbatches and takes exactly 1 s per step
(:class:`Recorder`), so every time it reports is a step count; :meth:`Recording.retime` then costs each
distinct step shape once at the trial overheads and rebuilds the clock as the sequential sum of the
step times (``np.cumsum`` adds in order, as the replay's ``clock += dt`` does). The metrics come out of
the same floating-point operations as a full replay's, so the fitted values are the same.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from simcast.core.specs import Batch
from simcast.serving.request_level.bench_result import BenchResult
from simcast.serving.request_level.simulate import RequestSpec
from simcast.serving.step import StepCoster


def time_invariant(reqs: Sequence[RequestSpec], dp: int) -> bool:
    """Whether a replay's steps (which requests each step carries) cannot depend on the step times: one
    replica and every request sent at t = 0 (rate inf), so only counts (in flight, KV blocks, the token
    budget) decide what runs when. (With arrivals over time, or replicas whose steps interleave by
    their clocks, the step times decide which requests a step sees: those runs are replayed in full.)"""
    return dp == 1 and all(r.arrival_s == 0.0 for r in reqs)


@dataclass(kw_only=True)
class Recorder(StepCoster):
    """A :class:`StepCoster` for one replay that costs nothing: it records each step's microbatches and takes
    exactly 1 s per step, so every time the replay reports is a step count."""

    shape_index: dict[tuple[Batch, ...], int] = field(default_factory=dict)
    steps: array = field(default_factory=lambda: array("q"))

    @staticmethod
    def like(coster: StepCoster) -> Recorder:
        """A recorder for ``coster``'s layout and engine policy (what the scheduler reads)."""
        return Recorder(**{f.name: getattr(coster, f.name) for f in fields(StepCoster) if f.name != "_memo"})

    def period_s(self, batches: list[Batch], drafting: Sequence[int] = (), context: int = 0) -> float:
        # drafting follows from the batches (the decodes of each), so the shape key is the batches alone
        self.steps.append(self.shape_index.setdefault(tuple(batches), len(self.shape_index)))
        return 1.0


@dataclass(frozen=True, kw_only=True)
class Retimed:
    """``vllm bench serve``'s metrics of a re-timed replay (seconds, tokens/s)."""

    requests: int
    mean_ttft_s: float
    mean_tpot_s: float  # over requests with 2+ output tokens; 0 when there are none
    output_tokens_per_s: float


@dataclass(frozen=True, kw_only=True)
class Recording:
    """A time-invariant replay's structure: each step's shape (an index into ``shapes``) and, per request
    (in the replay's result order), the step counts at which it was sent, got its first token and finished."""

    shapes: tuple[tuple[Batch, ...], ...]
    steps: np.ndarray
    sent: np.ndarray
    first: np.ndarray
    end: np.ndarray
    output_len: np.ndarray
    input_len: np.ndarray  # each request's prompt tokens (its serving path is re-timed too)

    @staticmethod
    def of(rec: Recorder, res: BenchResult) -> Recording:
        """The recording of ``res``, a replay run with ``rec`` as its coster."""
        reqs = res.requests
        sent = np.array([x.arrival_s for x in reqs], dtype=float)
        fe = np.array([x.front_end_s for x in reqs], dtype=float)
        return Recording(
            shapes=tuple(rec.shape_index),
            steps=np.asarray(rec.steps, dtype=np.int64),
            sent=sent.astype(np.int64),
            first=np.rint(sent + np.array([x.ttft_s for x in reqs], dtype=float) - fe).astype(np.int64),
            end=np.rint(sent + np.array([x.e2e_s for x in reqs], dtype=float) - fe).astype(np.int64),
            output_len=np.array([x.output_len for x in reqs], dtype=np.int64),
            input_len=np.array([x.input_len for x in reqs], dtype=np.int64),
        )

    def retime(self, coster: StepCoster) -> Retimed:
        """The replay's metrics with ``coster``'s step times (its CPU overheads), as the replay computes them."""
        coster.stage_times_many([b for shape in self.shapes for b in shape])  # every step shape in one pass
        dt = np.array([coster.period_s(list(shape)) for shape in self.shapes], dtype=float)[self.steps]
        clock = np.concatenate(([0.0], np.cumsum(dt)))  # the replay's clock after each step
        sent = clock[self.sent]
        pol = coster.policy
        fe = pol.front_end_s + pol.front_end_per_token_s * self.input_len  # the serving path at the trial policy
        ttft = clock[self.first] - sent + fe
        e2e = clock[self.end] - sent + fe
        multi = self.output_len > 1
        tpots = (e2e[multi] - ttft[multi]) / (self.output_len[multi] - 1)
        duration = float(np.max(sent + e2e)) if sent.size else 0.0
        return Retimed(
            requests=int(sent.size),
            mean_ttft_s=float(np.mean(ttft)),
            mean_tpot_s=float(np.mean(tpots)) if tpots.size else 0.0,
            output_tokens_per_s=int(self.output_len.sum()) / (duration or 1.0),
        )
