"""Routers across DP replicas (:mod:`simcast.serving.request_level.routers`): hand-built replica states, the
random router's uniformity, and multi-turn conversations under a cache-aware router against round-robin."""

import math

import numpy as np
import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.routers import (
    ROUTERS,
    CacheAware,
    CacheAwareSettings,
    KvAware,
    KvAwareSettings,
    PrefixAware,
    PrefixAwareSettings,
    RandomRouter,
    RandomSettings,
    default_settings,
    make_router,
)
from simcast.serving.request_level.scheduler import Prefix, Replica, Req
from simcast.serving.request_level.simulate import RequestSpec, make_conversations, simulate_requests
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, kv_capacity_tokens

BLK = 16


def req(idx, isl=128, prefix_id=0, prefix_len=64):
    return Req(
        idx=idx,
        spec=RequestSpec(arrival_s=0.0, input_len=isl, output_len=8, prefix_id=prefix_id, prefix_len=prefix_len),
    )


def two_replicas(held=4, used=4, kv_blocks=100):
    """Replica 0 holds a 64-token shared prefix (4 blocks of 16, one running request references it)."""
    r0, r1 = Replica(rid=0, kv_blocks=kv_blocks), Replica(rid=1, kv_blocks=kv_blocks)
    r0.prefixes[0] = Prefix(held=held, refs=1)
    r0.used_blocks = used
    return [r0, r1]


def queue(rep, n, isl=128):
    for k in range(n):
        rep.waiting.append(Req(idx=1000 + k, spec=RequestSpec(arrival_s=0.0, input_len=isl, output_len=8)))


def test_cache_aware_follows_its_tree_until_the_load_is_imbalanced():
    """sgl-router defaults: a 128-token prompt whose first 64 tokens went to replica 0 matches 0.5 > 0.3 there.
    With 60 requests queued on replica 0 (60 - 0 <= 64) it still goes there; with 70 (70 - 0 > 64 and
    70 > 1.5 x 0) the router balances: the shortest queue, replica 1."""
    reps = two_replicas()
    router = CacheAware(CacheAwareSettings())
    assert router.choose(req(0), reps, BLK).rid == 0  # empty trees: the smallest, ties to replica 0
    assert router.match(req(1), 0) == 64 and router.match(req(1), 1) == 0
    queue(reps[0], 60)
    assert router.choose(req(1), reps, BLK).rid == 0
    queue(reps[0], 10)
    assert router.choose(req(2), reps, BLK).rid == 1
    # a prompt matching only 25% (32 of 128) is below cache_threshold: the smaller tree (replica 1's is 128)
    reps[0].waiting.clear()
    assert router.choose(req(3, prefix_id=5, prefix_len=32), reps, BLK).rid == 1


def test_cache_aware_conversation_turn_matches_its_parents_prompt():
    """A turn's prompt starts with its parent's: the parent's 100 prompt tokens of 250 (0.4 > 0.3) keep the
    turn on the parent's replica; the router's tree never saw the parent's output."""
    reps = two_replicas(held=0, used=0)
    router = CacheAware(CacheAwareSettings())
    parent = Req(idx=0, spec=RequestSpec(arrival_s=0.0, input_len=100, output_len=20))
    other = Req(idx=1, spec=RequestSpec(arrival_s=0.0, input_len=500, output_len=20))
    assert router.choose(parent, reps, BLK).rid == 0
    assert router.choose(other, reps, BLK).rid == 1  # the smaller tree
    turn = Req(idx=2, spec=RequestSpec(arrival_s=0.0, input_len=250, output_len=20, parent=0, prefix_len=120))
    turn.parent_req = parent
    assert router.match(turn, 0) == 100
    assert router.choose(turn, reps, BLK).rid == 0


def test_prefix_aware_scores_by_hand():
    """llm-d weights 3/1/1. Replica 0 caches 4 of the prompt's 8 blocks: 3 x 0.5 + (1 - 4/100) + 1 = 3.46
    against replica 1's 0 + 1 + 1 = 2. With 10 requests waiting and 80 of 100 blocks in use on replica 0:
    1.5 + 0.2 + 0 = 1.7 < 2, replica 1."""
    reps = two_replicas()
    router = PrefixAware(PrefixAwareSettings())
    assert router.choose(req(0), reps, BLK).rid == 0
    queue(reps[0], 10)
    reps[0].used_blocks = 80
    assert router.choose(req(1), reps, BLK).rid == 1


def test_kv_aware_cost_by_hand():
    """Dynamo, weight 1: replica 0 (4 cached blocks, 4 in use) costs (128 - 64)/16 + 4 + (8 - 4) = 12, replica 1
    128/16 + 0 + 8 = 16. One 128-token prompt waiting on replica 0 adds 128/16 = 8 prefill blocks: 20 > 16."""
    reps = two_replicas()
    router = KvAware(KvAwareSettings())
    assert router.cost(req(0), reps[0], BLK) == pytest.approx(12.0)
    assert router.cost(req(0), reps[1], BLK) == pytest.approx(16.0)
    assert router.choose(req(0), reps, BLK).rid == 0
    queue(reps[0], 1)
    assert router.choose(req(1), reps, BLK).rid == 1


def test_kv_aware_temperature_samples_both():
    reps = two_replicas()
    router = KvAware(KvAwareSettings(router_temperature=1.0, seed=3))
    got = {router.choose(req(i), reps, BLK).rid for i in range(200)}
    assert got == {0, 1}


def test_random_is_reproducible_and_uniform():
    """Same seed, same draws; 8000 requests over 4 replicas pass a chi-square test of uniformity (statistic
    below 16.27, the 0.999 quantile of chi-square with 3 degrees of freedom)."""
    reps = [Replica(rid=i, kv_blocks=10) for i in range(4)]
    q = req(0)
    a = [RandomRouter(RandomSettings(seed=7)).choose(q, reps, BLK).rid for _ in range(1)]
    r1, r2, r3 = (RandomRouter(RandomSettings(seed=s)) for s in (7, 7, 8))
    d1 = [r1.choose(q, reps, BLK).rid for _ in range(8000)]
    d2 = [r2.choose(q, reps, BLK).rid for _ in range(8000)]
    d3 = [r3.choose(q, reps, BLK).rid for _ in range(8000)]
    assert d1 == d2 and d1 != d3 and a[0] == d1[0]
    counts = np.bincount(d1, minlength=4)
    chi2 = float(((counts - 2000) ** 2 / 2000).sum())
    assert chi2 < 16.27


def test_settings_defaults_and_names():
    assert ROUTERS == ("round_robin", "least_loaded", "random", "cache_aware", "prefix_aware", "kv_aware")
    s = default_settings("cache_aware")
    assert (s.cache_threshold, s.balance_abs_threshold, s.balance_rel_threshold) == (0.3, 64, 1.5)
    assert default_settings("random", seed=5) == RandomSettings(seed=5)
    assert default_settings("kv_aware") == KvAwareSettings(overlap_score_weight=1.0, router_temperature=0.0)
    assert all(make_router(default_settings(n)) is not None for n in ROUTERS)
    with pytest.raises(SimcastInputError):
        default_settings("sticky")


def config():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(),
            engine="vllm",
        ),
        workload=Workload(input_length=128, output_length=8),
        batch_size=1,
    )


def run(reqs, **kw):
    cfg = config()
    return simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg), **kw)


def test_turn_on_another_replica_gets_no_hit_from_its_parent():
    """Round-robin sends turn 2 to replica 1: turn 1's 7 cached blocks are on replica 0, so no hit (the
    same turn on one replica hits 112 tokens, tests/serving/test_prefix_cache.py)."""
    reqs = [
        RequestSpec(arrival_s=0.0, input_len=100, output_len=20),
        RequestSpec(arrival_s=0.0, input_len=150, output_len=20, parent=0, prefix_len=120),
    ]
    first, second = run(reqs, dp=2, router="round_robin").requests
    assert (first.replica, second.replica) == (0, 1) and second.cached_tokens == 0
    first, second = run(reqs, dp=2, router="cache_aware").requests
    assert first.replica == second.replica and second.cached_tokens == 112


def test_cache_aware_beats_round_robin_on_conversations():
    """8 conversations of 4 turns (lengths within +-50%, so turns end out of step) on two replicas: round-robin
    sends turns away from their history (hit rate 0.32), cache_aware keeps them with it (0.60), so the mean
    TTFT is lower (35.5 against 43.3 ms when written)."""
    reqs = make_conversations(
        num_prompts=32, rate=math.inf, turns=4, input_len=512, output_len=32, range_ratio=0.5, seed=1
    )
    rr = run(reqs, dp=2, router="round_robin")
    ca = run(reqs, dp=2, router="cache_aware")
    assert ca.prefix_hit_rate > rr.prefix_hit_rate + 0.1
    assert np.mean([x.ttft_s for x in ca.requests]) < np.mean([x.ttft_s for x in rr.requests])
    for name in ("prefix_aware", "kv_aware"):
        assert run(reqs, dp=2, router=name).prefix_hit_rate > rr.prefix_hit_rate
