"""The work a bench-serve run implies, bounded before its simulation (one line naming the flag when too large)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from simcast.serving.request_level.simulate import RequestSpec
    from simcast.serving.steady.model import ServingConfig


class BenchRunLike(Protocol):
    """The options of a run this module reads (:class:`simcast.api.bench.BenchOptions` has them)."""

    @property
    def dataset_path(self) -> str | None: ...

    @property
    def num_prompts(self) -> int: ...

    @property
    def max_concurrency(self) -> int | None: ...

    @property
    def dp(self) -> int: ...

    @property
    def use_cache(self) -> bool: ...


def bounded_run(o: BenchRunLike, cfg: ServingConfig, reqs: list[RequestSpec]) -> tuple[ServingConfig, int]:
    """The work the run implies, bounded before the simulation (:mod:`simcast.serving.request_level.work`), and the
    configuration with its partition resolved and one replica's KV capacity (tokens)."""
    from simcast.serving.request_level.work import in_flight_per_replica, require_bench_work, token_steps
    from simcast.serving.steady.model import kv_capacity_tokens, resolve_partition

    budget = cfg.policy.max_num_batched_tokens
    field, value = ("--dataset-path", o.dataset_path) if o.dataset_path else ("--num-prompts", o.num_prompts)
    steps_at_one = token_steps(((r.input_len, r.output_len) for r in reqs), budget)
    more_clients = "raise --max-concurrency or simulate fewer requests"  # the hint names bench-serve's own flags
    require_bench_work(
        field, value, steps_at_one, 1.0 if o.max_concurrency == 1 else math.inf, budget, remedy=more_clients
    )
    cfg = resolve_partition(cfg, use_disk_cache=o.use_cache)
    kv_tokens = kv_capacity_tokens(cfg)  # KV capacity of one replica, tokens
    mean_len = sum(r.input_len + r.output_len for r in reqs) / len(reqs)
    span_s = max(r.arrival_s for r in reqs) - min(r.arrival_s for r in reqs)
    in_flight = in_flight_per_replica(
        len(reqs),
        rate_per_s=len(reqs) / span_s if span_s > 0 else math.inf,
        mean_output_len=sum(r.output_len for r in reqs) / len(reqs),
        max_concurrency=o.max_concurrency or 0,
        dp=o.dp,
        max_num_seqs=cfg.policy.max_num_seqs,
        kv_requests=kv_tokens / mean_len,
    )
    require_bench_work(field, value, steps_at_one, in_flight, budget, remedy=more_clients)
    return cfg, kv_tokens
