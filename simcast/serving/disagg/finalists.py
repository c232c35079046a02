"""The finalists of a disaggregated search replayed request by request, closed loop.

The search ranks deployments by the steady-state estimate (:mod:`simcast.serving.disagg.steady`: queueing
formulas, fast enough for every ``xPyD``); only the best few are replayed through the request-level
simulator (:func:`~simcast.serving.disagg.requests.simulate_disagg_requests`) as the public benchmarks drive
them: ``vllm bench serve --request-rate inf --max-concurrency C`` with ``C`` = the steady point's decode
concurrency over all decode DP ranks, prompts of exactly ISL / OSL tokens, ``num_prompts`` =
``FINALIST_PROMPTS_PER_SLOT`` x ``C`` (at least ``FINALIST_MIN_PROMPTS``, at most ``FINALIST_MAX_PROMPTS``),
through the engine's own PD router. The replay's token/s/GPU counts ramp-up and drain (the whole run, as the
client reports it); token/s/user = ``1 / mean TPOT``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcast.serving.disagg.requests import simulate_disagg_requests
from simcast.serving.disagg.steady import DisaggResult

FINALIST_PROMPTS_PER_SLOT = 3
"""Prompts per client slot of a finalist's replay (3 x C: every slot sends three requests; the public
benchmark clients send 10 x C, ``--num-prompts 10·C``: fewer here to keep the search fast)."""
FINALIST_MIN_PROMPTS = 64
FINALIST_MAX_PROMPTS = 3000
"""Prompts of one replay at most (a bound on the search's time: ~10-40 s of request-level simulation on
the 2-core development machine for 3000 prompts)."""


@dataclass(frozen=True, kw_only=True)
class Replayed:
    """One finalist: its steady-state figures (``steady``) and its closed-loop replay's (times in s)."""

    steady: DisaggResult
    concurrency: int  # the client's --max-concurrency
    prompts: int
    tokens_per_s_per_device: float  # replay: output token/s over the run / devices
    tokens_per_s_per_user: float  # replay: 1 / mean TPOT
    ttft_mean_s: float
    tpot_mean_s: float


def finalist_prompts(concurrency: int) -> int:
    """Prompts of a replay at ``concurrency`` client slots (module docstring)."""
    return max(FINALIST_MIN_PROMPTS, min(FINALIST_MAX_PROMPTS, FINALIST_PROMPTS_PER_SLOT * concurrency))


def replay_finalist(r: DisaggResult, *, num_prompts: int = 0, use_disk_cache: bool = True, seed: int = 0) -> Replayed:
    """``r``'s deployment replayed closed loop at its steady decode concurrency (module docstring;
    ``num_prompts`` 0: :func:`finalist_prompts`)."""
    from simcast.serving.request_level.simulate import make_requests

    cfg = r.config
    c = r.decode.concurrency * cfg.decode_replicas * r.decode.ranks
    n = num_prompts or finalist_prompts(c)
    w = cfg.decode.workload
    reqs = make_requests(num_prompts=n, rate=math.inf, input_len=w.input_length, output_len=w.output_length, seed=seed)
    b = simulate_disagg_requests(reqs, cfg, use_disk_cache=use_disk_cache, max_concurrency=c, seed=seed)
    tpot = sum(q.tpot_s for q in b.requests) / len(b.requests)
    return Replayed(
        steady=r,
        concurrency=c,
        prompts=n,
        tokens_per_s_per_device=b.output_tokens_per_s / cfg.num_devices,
        tokens_per_s_per_user=1.0 / tpot if tpot > 0 else 0.0,
        ttft_mean_s=sum(q.ttft_s for q in b.requests) / len(b.requests),
        tpot_mean_s=tpot,
    )
