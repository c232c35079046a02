"""``bench_serve(serving_mode="disagg")``: a simulated ``vllm bench serve`` run against a disaggregated
deployment (``--prefill-workers`` P and ``--decode-workers`` D engines, each pool's layout from
:mod:`simcast.api.disagg_options`), with the aggregated run's client options (``--max-concurrency``,
``--request-rate inf``, ``--random-range-ratio``, ``--num-prompts``). The requests go through
:func:`simcast.serving.disagg.requests.simulate_disagg_requests`; the result is the aggregated run's
:class:`~simcast.api.bench.BenchResult` (its ``config`` the decode pool's), its metrics those the client sees
through the proxy, its assumptions the pools', the KV transfer's and each pool's memory check."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from simcast.api.disagg_options import POOL_KEYS, PoolLayout
from simcast.core.errors import SimcastInputError, require
from simcast.inputs import limits

if TYPE_CHECKING:
    from simcast.serving.config import ServingConfig
    from simcast.serving.request_level.bench_metrics import BenchMetrics
    from simcast.serving.request_level.bench_result import BenchResult
    from simcast.serving.request_level.simulate import RequestSpec

BenchOptions = Any
"""``simcast.api.bench.BenchOptions`` (named here without importing it: that module calls this one)."""
ConfigFn = Callable[[Any, list[Any], str, dict[str, Any]], "ServingConfig"]
"""``simcast.api.bench``'s configuration of a run: (options, requests, source, memory limits) -> config."""
NotesFn = Callable[[Any, "ServingConfig", int, bool, str], list[str]]
"""``simcast.api.bench``'s assumption lines of a run: (options, config, KV tokens, prefix?, lengths note)."""
Parts = tuple["BenchMetrics", "BenchResult", "ServingConfig", str, tuple[str, ...]]
"""(client metrics, the request-level run, the decode pool's config, the requests' source, assumption lines)."""

_FLAG = {"prefill": "--prefill-layout", "decode": "--decode-layout"}


def _value(text: str) -> Any:
    """A layout value as text -> int, bool (true/false) or the text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(low)
    except ValueError:
        return text.strip()


def pool_overrides(o: BenchOptions, role: str) -> dict[str, Any]:
    """The ``role`` pool's overrides of ``o`` (:mod:`simcast.api.disagg_options`); one error naming the flag
    for an unknown key or a malformed pair."""
    layout: PoolLayout = o.prefill_layout if role == "prefill" else o.decode_layout
    flag = _FLAG[role]
    names = {f.name for f in dataclasses.fields(o)}
    allowed = [k for k in POOL_KEYS if k in names]
    if isinstance(layout, str):
        pairs: dict[str, Any] = {}
        for item in filter(None, (x.strip() for x in layout.split(","))):
            key, eq, val = item.partition("=")
            require(bool(eq) and bool(key.strip()), flag, item, "KEY=VALUE pairs separated by commas")
            pairs[key.strip().replace("-", "_")] = _value(val)
    else:
        pairs = dict(layout)
    for k in pairs:
        require(k in allowed, flag, k, f"allowed keys: {', '.join(allowed)}")
    return pairs


def pool_options(o: BenchOptions, role: str) -> BenchOptions:
    """``o`` with the ``role`` pool's overrides, its types checked (an error names the pool's flag)."""
    from simcast.api.option_types import check_option_types

    over = pool_overrides(o, role)
    try:
        return check_option_types(replace(o, **over))
    except SimcastInputError as e:
        raise SimcastInputError(_FLAG[role], over, str(e)) from None


def _pool_config(o: BenchOptions, reqs: list[RequestSpec], source: str, role: str, config: ConfigFn) -> ServingConfig:
    """The ``role`` pool's serving configuration (the prefill pool never drafts)."""
    from simcast.api.common import engine_limits

    po = pool_options(o, role)
    cfg = config(po, reqs, source, engine_limits(po))
    return cfg if role == "decode" else replace(cfg, speculative=None)


def _check(o: BenchOptions, reqs: list[RequestSpec]) -> None:
    """The disaggregated run's own bounds and what it does not model (one error naming the flag)."""
    from simcast.serving.request_level.work import require_bench_work, token_steps

    for flag, v in (("--prefill-workers", o.prefill_workers), ("--decode-workers", o.decode_workers)):
        require(isinstance(v, int) and 1 <= v <= limits.MAX_DEVICES, flag, v, f"in [1, {limits.MAX_DEVICES}]")
    why = "disagg: the router in front of the pools is --disagg-router"
    require(o.router == "round_robin", "--router", o.router, why)
    require(
        all(r.prefix_id < 0 and r.parent < 0 for r in reqs),
        "--dataset-name",
        o.dataset_name,
        "disagg: shared prefixes and multi-turn conversations (the prefix cache across pools) are not modelled",
    )
    require(o.output_length >= 2 or o.dataset_name != "random", "--random-output-len", o.output_length, ">= 2")
    steps = token_steps(((r.input_len, r.output_len) for r in reqs), o.max_num_batched_tokens or 8192)
    in_flight = min(o.max_concurrency or len(reqs), len(reqs)) / max(1, o.decode_workers)
    require_bench_work("--num-prompts", o.num_prompts, steps, in_flight, o.max_num_batched_tokens or 8192)


def run_disagg_bench(o: BenchOptions, *, config: ConfigFn, notes_of: NotesFn) -> Parts:
    """The run of ``o`` (its ranges checked) against its disaggregated deployment (module docstring);
    ``config``/``notes_of``: the aggregated run's configuration and assumption lines, applied per pool."""
    from simcast.api.bench_requests import build_requests
    from simcast.render.assumption_text import assumption_lines
    from simcast.serving.disagg.pool_memory import pool_fit, require_fits
    from simcast.serving.disagg.requests import client_run, simulate_disagg_requests
    from simcast.serving.disagg.steady import DisaggConfig
    from simcast.serving.request_level.bench_metrics import bench_metrics
    from simcast.serving.steady.model import kv_capacity_tokens, resolve_partition

    reqs, source, lengths_note = build_requests(o)
    _check(o, reqs)
    pc = resolve_partition(_pool_config(o, reqs, source, "prefill", config), use_disk_cache=o.use_cache)
    dc = resolve_partition(_pool_config(o, reqs, source, "decode", config), use_disk_cache=o.use_cache)
    fits = (pool_fit(pc, "prefill", 1), pool_fit(dc, "decode", 1))
    for fit, role in zip(fits, ("prefill", "decode")):
        require_fits(fit, _FLAG[role], getattr(o, f"{role}_layout") or "the run's layout")
    dis = DisaggConfig(
        prefill=pc,
        decode=dc,
        prefill_replicas=o.prefill_workers,
        decode_replicas=o.decode_workers,
        kv_transfer=o.kv_transfer,
    )
    bench = simulate_disagg_requests(
        reqs,
        dis,
        use_disk_cache=o.use_cache,
        max_concurrency=o.max_concurrency or 0,
        router="" if o.disagg_router == "engine" else o.disagg_router,
        seed=o.seed,
    )
    run = client_run(bench)
    summary = bench_metrics(
        run,
        request_rate_per_s=o.request_rate,
        burstiness=o.burstiness,
        max_concurrency=o.max_concurrency,
        num_prompts=len(reqs),
    )
    notes = notes_of(pool_options(o, "decode"), dc, kv_capacity_tokens(dc), False, lengths_note)
    notes = [f"decode pool: {x}" for x in notes[:1]] + notes[1:]
    notes += assumption_lines(bench.assumptions) + [f.line for f in fits]
    return summary, run, dc, source, tuple(notes)
