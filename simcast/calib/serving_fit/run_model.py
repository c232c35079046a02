"""Predict measured serving runs for trial CPU overheads: the model :mod:`simcast.calib.serving_fit.overhead_fit` fits.

One step of the engine costs its GPU kernels (simcast's stage pipeline, unchanged by the fit) plus
``step_cpu = a + b · requests_in_step`` of CPU time (:meth:`EnginePolicy.step_cpu_s`), serial with the GPU
or overlapped with it as the engine's policy says. :class:`RunModel` simulates each measured run with trial
``(a, b)``:

- **replay** (a ``vllm bench serve`` JSON: the request count, rate, burstiness and client concurrency are
  known): the run's requests through the request-level simulator (:mod:`simcast.serving.request_level.simulate`) at the
  run's mean lengths, seed 0, metrics as ``vllm bench serve`` computes them (mean TPOT over requests with
  2+ output tokens, mean TTFT, output tokens / duration);
- **steady state** (a CSV row, or a closed-loop JSON run with ``replay=False``): the steady-state estimate
  (:mod:`simcast.serving.steady.model`) at the run's concurrency per replica; ramp-up and drain are ignored.

Every step cost is simulated once and shared by all evaluations, and a replay whose steps cannot depend on
their times (rate inf, one replica) runs once and is re-timed for each evaluation
(:mod:`simcast.calib.serving_fit.recorded`: the same values as replaying it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from simcast.calib.serving_fit.kernel_kinds import KindMemo, KindScaledCoster
from simcast.calib.serving_fit.recorded import Recorder, Recording, time_invariant
from simcast.core.errors import require
from simcast.engines.policy import EnginePolicy
from simcast.inputs.bench_results import MeasuredRun
from simcast.inputs.limits import MAX_BENCH_PROMPTS, MAX_BENCH_STEPS, MAX_BENCH_TOKENS
from simcast.serving.request_level.bench_result import tpots_s
from simcast.serving.request_level.simulate import RequestSpec, make_requests, simulate_requests
from simcast.serving.request_level.work import in_flight_per_replica, require_bench_work, token_steps
from simcast.serving.steady.model import (
    ServingConfig,
    Workload,
    coster_for,
    estimate_serving,
    kv_capacity_tokens,
    prefill_spec,
)
from simcast.serving.step import StepCoster, StepMemo
from simcast.sim.simulate import Report, simulate


@dataclass(frozen=True, kw_only=True)
class RunPrediction:
    method: str  # how the run was simulated
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float


class RunModel:
    """Predicts measured runs for trial CPU overheads on one layout; GPU step costs are shared (memoised)."""

    def __init__(
        self, base: ServingConfig, *, replay: bool = True, range_ratio: float = 0.0, use_disk_cache: bool = True
    ) -> None:
        self.base = base
        self.replay = replay
        self.range_ratio = range_ratio  # the runs' --random-range-ratio (vllm bench serve does not save it)
        self.use_disk_cache = use_disk_cache
        self.front_end_s: float | None = None  # None: the base policy's serving path
        self._memo = StepMemo()  # step costs per batch: they do not depend on the CPU overheads
        self._prefill: dict[int, Report] = {}
        self._requests: dict[MeasuredRun, list[RequestSpec]] = {}
        self._kv: dict[int, int] = {}
        self._recorded: dict[MeasuredRun, Recording] = {}  # time-invariant replays, re-timed per (a, b)
        self._kinds = KindMemo()  # step time per kernel kind per batch (independent of the factors)

    def method(self, run: MeasuredRun) -> str:
        """``replay`` or ``steady`` for ``run`` (see the module docstring); bad combinations raise."""
        pol = self.base.policy
        steps_at_one = run.num_requests * token_steps([(run.input_len, run.output_len)], pol.max_num_batched_tokens)
        in_flight = in_flight_per_replica(
            run.num_requests,
            rate_per_s=run.request_rate_per_s,
            mean_output_len=run.output_len,
            max_concurrency=run.concurrency,
            dp=self.base.parallel.dp,
            max_num_seqs=pol.max_num_seqs,
            kv_requests=math.inf,
        )
        fits = (
            run.num_requests <= MAX_BENCH_PROMPTS
            and run.num_requests * (run.input_len + run.output_len) <= MAX_BENCH_TOKENS
            and steps_at_one / in_flight <= MAX_BENCH_STEPS
        )
        if run.num_requests and math.isfinite(run.request_rate_per_s):
            require(
                run.num_requests <= MAX_BENCH_PROMPTS
                and run.num_requests * (run.input_len + run.output_len) <= MAX_BENCH_TOKENS,
                run.source,
                run.num_requests,
                f"requests at a finite rate must be replayed; at most {MAX_BENCH_PROMPTS} requests and "
                f"{MAX_BENCH_TOKENS:.0e} tokens are",
            )
            require_bench_work(run.source, run.num_requests, steps_at_one, in_flight, pol.max_num_batched_tokens)
            return "replay"
        if run.num_requests and fits and (self.replay or not run.concurrency):
            return "replay"
        return "steady"

    def _config(self, run: MeasuredRun, policy: EnginePolicy, concurrency: int) -> ServingConfig:
        b = self.base
        per_replica = max(1, math.ceil(concurrency / b.parallel.dp))
        return replace(
            b,
            workload=Workload(
                input_length=run.input_len,
                output_length=run.output_len,
                max_batched_tokens=b.workload.max_batched_tokens,
            ),
            batch_size=per_replica,
            engine_profile=policy,
        )

    def _coster(self, cfg: ServingConfig, factors: Mapping[str, float] | None = None) -> StepCoster:
        c = coster_for(cfg, self.use_disk_cache)
        c._memo = self._memo
        if not factors:
            return c
        return KindScaledCoster(
            **{f.name: getattr(c, f.name) for f in fields(StepCoster)}, factors=dict(factors), kinds=self._kinds
        )

    def predict(
        self, run: MeasuredRun, a_s: float, b_s: float, factors: Mapping[str, float] | None = None
    ) -> RunPrediction:
        """``run``'s metrics with CPU ``a_s`` per step + ``b_s`` per request in the step and the kernel
        kinds' time scaled by ``factors`` (:mod:`simcast.calib.serving_fit.kernel_kinds`; None: unscaled)."""
        policy = replace(self.base.policy, step_overhead_s=a_s, per_request_overhead_s=b_s)
        if self.front_end_s is not None:  # the serving path being fitted (fit_overheads' outer loop)
            policy = replace(policy, front_end_s=self.front_end_s)
        if self.method(run) == "steady":
            conc = run.concurrency or run.num_requests
            cfg = self._config(run, policy, conc)
            if run.input_len not in self._prefill:
                self._prefill[run.input_len] = simulate(prefill_spec(cfg), use_disk_cache=self.use_disk_cache)
            r = estimate_serving(
                cfg,
                use_disk_cache=self.use_disk_cache,
                prefill=self._prefill[run.input_len],
                coster=self._coster(cfg, factors),
            )
            return RunPrediction(
                method=f"steady state, {r.config.batch_size}/replica",
                ttft_s=r.ttft_s,
                tpot_s=r.tpot_s,
                output_tokens_per_s=r.tokens_per_s,
            )
        cfg = self._config(run, policy, 1)
        if run in self._recorded:
            return self._from_recording(run, self._recorded[run], self._coster(cfg, factors))
        if run not in self._requests:
            self._requests[run] = self._make_requests(run)
        if run.input_len + run.output_len not in self._kv:
            kv = kv_capacity_tokens(cfg)
            require(
                kv > 0,
                run.source,
                f"ISL {run.input_len} / OSL {run.output_len}",
                f"one request's KV cache does not fit next to the weights of {cfg.model.name} on "
                f"TP={cfg.parallel.tp} PP={cfg.parallel.pp} x {cfg.device.name}",
            )
            self._kv[run.input_len + run.output_len] = kv
        kv = self._kv[run.input_len + run.output_len]
        if time_invariant(self._requests[run], cfg.parallel.dp):
            rec = Recorder.like(self._coster(cfg))
            res = simulate_requests(self._requests[run], rec, kv_tokens_per_replica=kv, max_concurrency=run.concurrency)
            self._recorded[run] = Recording.of(rec, res)
            return self._from_recording(run, self._recorded[run], self._coster(cfg, factors))
        res = simulate_requests(
            self._requests[run],
            self._coster(cfg, factors),
            kv_tokens_per_replica=kv,
            dp=cfg.parallel.dp,
            max_concurrency=run.concurrency,
        )
        reqs = res.requests
        tpots = tpots_s(reqs)
        return RunPrediction(
            method=_replay_label(run, len(reqs)),
            ttft_s=float(np.mean([x.ttft_s for x in reqs])),
            tpot_s=float(np.mean(tpots)) if tpots else 0.0,
            output_tokens_per_s=sum(x.output_len for x in reqs) / (res.duration_s or 1.0),
        )

    def _make_requests(self, run: MeasuredRun) -> list[RequestSpec]:
        """The run's requests: ``vllm bench serve``'s arrivals (seed 0) at the run's range ratio (its own when
        the file saves one, else the command's); each request's measured lengths when the file lists them."""
        reqs = make_requests(
            num_prompts=run.num_requests,
            rate=run.request_rate_per_s,
            input_len=run.input_len,
            output_len=run.output_len,
            burstiness=run.burstiness,
            range_ratio=self.range_ratio if run.range_ratio is None else run.range_ratio,
        )
        if len(run.request_lens) != len(reqs):
            return reqs
        return [replace(r, input_len=i, output_len=o) for r, (i, o) in zip(reqs, run.request_lens)]

    def _from_recording(self, run: MeasuredRun, rec: Recording, coster: StepCoster) -> RunPrediction:
        """The replay's metrics at ``coster``'s CPU overheads from its recorded steps."""
        t = rec.retime(coster)
        return RunPrediction(
            method=_replay_label(run, t.requests),
            ttft_s=t.mean_ttft_s,
            tpot_s=t.mean_tpot_s,
            output_tokens_per_s=t.output_tokens_per_s,
        )


def _replay_label(run: MeasuredRun, n: int) -> str:
    rate = "inf" if math.isinf(run.request_rate_per_s) else f"{run.request_rate_per_s:g}/s"
    return f"replay {n} req, rate {rate}" + (f", max conc. {run.concurrency}" if run.concurrency else "")
