"""The disaggregated deployment search (serving/disagg/deploy_grid.py, search.py, finalists.py): whole allocation
units by hand, the Pareto front by hand, and the search's invariants (its best at a budget is no worse than any
xPyD it enumerates; every deployment fills whole units; the front is exactly the undominated points)."""

from __future__ import annotations

from functools import cache

import pytest

from simcast.inputs.loaders import load_device
from simcast.serving.disagg.deploy_grid import allocation_unit, fills_whole_units, pareto_front, worker_counts
from simcast.serving.disagg.search import _pair_points, _user_tps, evaluate_pools, search_deployments


def test_allocation_unit_is_the_node_or_the_nvl72_tray():
    assert allocation_unit(load_device("h100_sxm"))[0] == 8
    assert allocation_unit(load_device("gb200"))[0] == 4  # a 72-GPU NVLink domain of 4-GPU trays
    assert allocation_unit(load_device("gb300"))[0] == 4


@pytest.mark.parametrize(
    ("p", "d", "unit", "budget", "ok"),
    [
        (4, 4, 8, 8, True),  # 1P1D TP4/TP4 sharing one node exactly
        (4, 3, 8, 8, False),  # one GPU of the node idle
        (8, 16, 8, 32, True),  # one prefill node, two decode nodes
        (4, 12, 8, 32, False),  # pools straddling nodes
        (8, 32, 8, 32, False),  # over the budget
        (2, 2, 8, 4, True),  # a budget under one node: a part of a node, any split of it
        (1, 1, 8, 4, True),
        (4, 8, 4, 72, True),  # GB200: one prefill tray, two decode trays
        (2, 2, 4, 72, True),  # GB200: both pools in one tray
    ],
)
def test_fills_whole_units_by_hand(p, d, unit, budget, ok):
    assert fills_whole_units(p, d, unit, budget) is ok


@pytest.mark.parametrize(("wp", "wd", "unit", "budget"), [(1, 1, 8, 8), (2, 4, 8, 32), (8, 16, 8, 64), (4, 8, 4, 72)])
def test_worker_counts_are_exactly_the_whole_unit_ones(wp, wd, unit, budget):
    got = set(worker_counts(wp, wd, unit, budget))
    brute = {
        (x, y)
        for x in range(1, budget + 1)
        for y in range(1, budget + 1)
        if x * wp + y * wd <= budget and fills_whole_units(x * wp, y * wd, unit, budget)
    }
    assert got == brute and got
    for x, y in got:  # P and D counts fill whole nodes
        t = x * wp + y * wd
        assert ((x * wp) % unit == 0 and (y * wd) % unit == 0) or t == unit or budget < unit


def test_pareto_front_by_hand():
    pts = ["a", "b", "c", "d", "e"]
    gpu = [100.0, 80.0, 90.0, 50.0, 100.0]
    user = [10.0, 30.0, 5.0, 20.0, 12.0]
    # e beats a (same GPU rate, more per user) and c; b beats d; the front is e then b
    assert pareto_front(pts, gpu, user) == ["e", "b"]


@cache
def _searched():
    from simcast.api.optimize import optimize_setup
    from simcast.api.search_inputs import SearchOptions, search_space

    o = SearchOptions(
        model="Qwen/Qwen3-0.6B",
        device="h100_sxm",
        num_devices=8,
        input_length=1024,
        output_length=64,
        tp_sizes=[1, 2],
        ttft_limit_ms=3000.0,
    )
    setup = optimize_setup(o, search_space(o))
    pools = evaluate_pools(setup.config, setup.space, use_disk_cache=True, progress=False)
    return pools, setup.space


@pytest.mark.slow  # the pools' step costs: a few seconds
def test_best_is_no_worse_than_any_enumerated_xpyd_and_fills_whole_nodes():
    pools, space = _searched()
    target = 150.0
    found = search_deployments(pools, space, "whole", target)
    assert found.rows and found.unit == 8
    every = []
    for p in pools:
        for d in pools:
            if p.prefill is not None and d.decode:
                pts = _pair_points(p, d, space, "whole", found.unit)
                every += pts
                at = [r for r in pts if _user_tps(r) >= target]
                row = next((c for c in found.rows if c.prefill_label == p.label and c.decode_label == d.label), None)
                if at:
                    assert row is not None
                    assert row.result.tokens_per_s_per_device >= max(r.tokens_per_s_per_device for r in at) - 1e-9
    assert len(every) == found.points
    best = found.rows[0].result
    assert all(
        best.tokens_per_s_per_device >= r.tokens_per_s_per_device - 1e-9 for r in every if _user_tps(r) >= target
    )
    assert _user_tps(best) >= target
    for c in found.rows:  # whole nodes: 8 GPUs in one node, pools sharing it exactly
        n = c.result.num_devices
        assert n % 8 == 0 and n <= space.num_devices
    # the fewest devices at a rate: whole nodes too (one 8-GPU node here, never 7 GPUs of it)
    from simcast.serving.disagg.search import fewest_disagg

    fd = fewest_disagg(pools, space, 0.25 * best.request_rate_per_s)
    assert fd is not None and fd.num_devices == 8
    # the front: no enumerated point beats a front point in both figures, and every point has a front point
    # at least as good in both
    for f in found.front:
        assert not any(
            r.tokens_per_s_per_device > f.tokens_per_s_per_device and _user_tps(r) > _user_tps(f) for r in every
        )
    for r in every:
        assert any(
            f.tokens_per_s_per_device >= r.tokens_per_s_per_device - 1e-9 and _user_tps(f) >= _user_tps(r) - 1e-9
            for f in found.front
        )


@pytest.mark.slow  # one request-level replay
def test_finalist_replay_runs_at_the_steady_concurrency():
    from simcast.serving.disagg.finalists import finalist_prompts, replay_finalist

    pools, space = _searched()
    found = search_deployments(pools, space)
    r = found.rows[0].result
    f = replay_finalist(r, num_prompts=64)
    c = r.decode.concurrency * r.config.decode_replicas * r.decode.ranks
    assert f.concurrency == c and f.prompts == 64
    assert finalist_prompts(c) == max(64, min(3000, 3 * c))
    # the replay serves the same deployment: its output rate cannot exceed what its decode pool could carry
    assert 0 < f.tokens_per_s_per_device <= r.tokens_per_s_per_device * 1.5
