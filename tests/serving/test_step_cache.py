"""The process-wide step-cost store (:mod:`simcast.serving.step_cache`): a hit is exactly the recomputation, any
change of what determines a step's cost misses, and the store stays within its bound."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.step import StepCoster
from simcast.serving.step_cache import StepCostCache

BATCHES = [
    Batch.decode(8, 1024),
    Batch(query_lens=(1, 512), context_lens=(2048, 0), counts=(16, 1)),
    Batch(query_lens=(4, 256), context_lens=(640, 128), counts=(3, 2)),
]


def _coster(cache: StepCostCache | None, *, engine: str = "vllm", tp: int = 1, **kw) -> StepCoster:
    dev = load_device("h100_sxm")
    dep = Deployment(model=load_model("Qwen/Qwen3-8B"), device=dev, parallel=ParallelSpec(tp=tp), engine=engine)
    return StepCoster(deployment=dep, policy=engine_policy(engine, dev, tp=tp), shared=cache, **kw)


def test_a_hit_is_exactly_the_recomputation():
    cache = StepCostCache()
    first = _coster(cache).stage_times_many(BATCHES)
    assert cache.hits == 0 and cache.misses == len(BATCHES) and len(cache) == len(BATCHES)
    again = _coster(cache).stage_times_many(BATCHES[::-1])  # another coster: every step from the store
    assert cache.hits == len(BATCHES)
    fresh = _coster(None).stage_times_many(BATCHES[::-1])  # no store: recomputed
    assert again == fresh == first[::-1]  # the same floats, not approximately


def test_prefetch_with_reports_stores_the_stage_times_path_only():
    cache = StepCostCache()
    c = _coster(cache)
    c.prefetch(BATCHES[1:], reports=BATCHES[:1])
    assert len(cache) == len(BATCHES) - 1  # a report's stage times stay with the coster that built it
    assert _coster(cache).stage_times_many(BATCHES[1:]) == _coster(None).stage_times_many(BATCHES[1:])


@pytest.mark.parametrize(
    "change",
    [
        {"engine": "sglang"},  # the engine: its kernels and policy
        {"tp": 2},  # the layout
        {"verify_tokens": 3},  # speculative verify rows
        {"use_disk_cache": False},
        {"kv": "fp8"},  # the KV-cache dtype (a deployment field)
        {"imbalance": 1.5},  # a deployment field the layout's repr carries
    ],
)
def test_changing_any_key_field_misses(change):
    cache = StepCostCache()
    _coster(cache).stage_times_many(BATCHES)
    kw = dict(change)
    kv, imb = kw.pop("kv", None), kw.pop("imbalance", None)
    other = _coster(cache, **kw)
    if kv or imb:
        other.deployment = replace(
            other.deployment,
            kv_cache_dtype=kv or other.deployment.kv_cache_dtype,
            expert_imbalance=imb or other.deployment.expert_imbalance,
        )
    other.stage_times_many(BATCHES)
    assert cache.hits == 0 and len(cache) == 2 * len(BATCHES)


def test_the_engine_policy_part_of_a_step_cost_is_in_the_key():
    cache = StepCostCache()
    c = _coster(cache)
    c.stage_times_many(BATCHES)
    sharded = _coster(cache)
    sharded.policy = replace(sharded.policy, tp_sharded_send=not c.policy.tp_sharded_send)
    sharded.stage_times_many(BATCHES)
    assert cache.hits == 0


def test_a_new_step_shape_misses():
    cache = StepCostCache()
    _coster(cache).stage_times_many(BATCHES[:1])
    _coster(cache).stage_times_many([Batch.decode(8, 1088)])  # one more 64-token context round
    assert cache.hits == 0 and cache.misses == 2


def test_bounded_least_recently_used_layout_first():
    cache = StepCostCache(max_entries=4)
    _coster(cache).stage_times_many(BATCHES)  # layout A: 3 steps
    _coster(cache, tp=2).stage_times_many(BATCHES[:2])  # layout B: 2 more, A (older) dropped
    assert len(cache) == 2
    _coster(cache, tp=2).stage_times_many(BATCHES)  # B grows to 3
    assert len(cache) == 3 and cache.hits == 2
    big = StepCostCache(max_entries=2)
    _coster(big).stage_times_many(BATCHES)  # one layout over the bound: its oldest steps go
    assert len(big) == 2
    assert _coster(big).stage_times_many(BATCHES[2:]) and big.hits == 1
    big.clear()
    assert len(big) == 0 and big.hits == 0
