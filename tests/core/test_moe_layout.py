"""MoE rank groups (stage-local, equal to the RFC's global ones at pp = 1) and the RFC's filter rules."""

import itertools

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.layout import parallel_label, rank_coords, rank_groups
from simcast.core.moe_layout import moe_groups, moe_layout_rule, stage_ranks
from simcast.core.specs import ParallelSpec
from simcast.serving.search.layouts import SearchSpace, check_space


def test_rfc_example_unchanged_by_moe_sizes():
    """RFC §2.3: world 8, tp 2, pp 4 -> rank 4's pp_group is [0, 2, 4, 6], rank_in_group 2."""
    par = ParallelSpec(tp=2, pp=4, dp=1, ep=2)
    g = rank_groups(4, par)
    assert g.pp_group.rank_group == (0, 2, 4, 6) and g.pp_group.rank_in_group == 2
    assert par.moe_tp == 1  # ep 2 x moe_tp 1 x moe_dp 1 = the 2 ranks of a stage


def test_hand_worked_global_pp1():
    """8 ranks, tp 8, ep 4 -> moe_tp 2: [moe_dp=1, ep=4, moe_tp=2] over ranks 0..7.
    Rank 5 = (e 2, t 1): EP group {1, 3, 5, 7}, MoE-TP group {4, 5}."""
    par = ParallelSpec(tp=8, ep=4)
    assert par.moe_tp == 2
    g = moe_groups(5, par)
    assert g.ep_group.rank_group == (1, 3, 5, 7) and g.ep_group.rank_in_group == 2
    assert g.moe_tp_group.rank_group == (4, 5) and g.moe_dp_group.rank_group == (5,)


def test_hand_worked_stage_local():
    """16 ranks, tp 2, pp 2, dp 4, ep 4, moe_dp 2 -> moe_tp 1. Stage 1 runs on ranks
    (d·2 + 1)·2 + t = 2, 3, 6, 7, 10, 11, 14, 15; EP groups {2,3,6,7}, {10,11,14,15}; MoE-DP {2,10} ..."""
    par = ParallelSpec(tp=2, pp=2, dp=4, ep=4, moe_dp=2)
    assert par.moe_tp == 1 and stage_ranks(1, par) == (2, 3, 6, 7, 10, 11, 14, 15)
    assert moe_groups(6, par).ep_group.rank_group == (2, 3, 6, 7)
    assert moe_groups(14, par).ep_group.rank_group == (10, 11, 14, 15)
    assert moe_groups(3, par).moe_dp_group.rank_group == (3, 11)
    assert moe_groups(0, par).ep_group.rank_group == (0, 1, 4, 5)  # stage 0


@pytest.mark.parametrize("tp,dp,ep,moe_dp", [(8, 1, 8, 1), (2, 4, 4, 1), (1, 8, 2, 2), (4, 2, 2, 1), (2, 2, 1, 2)])
def test_pp1_equals_global_reshape(tp, dp, ep, moe_dp):
    """At pp = 1 the stage is the whole world: groups equal the RFC's global [moe_dp, ep, moe_tp] reshape."""
    par = ParallelSpec(tp=tp, dp=dp, ep=ep, moe_dp=moe_dp)
    n, mtp = par.world_size, par.moe_tp
    assert ep * mtp * moe_dp == n
    for r in range(n):
        t, e, d = r % mtp, (r // mtp) % ep, r // (mtp * ep)
        g = moe_groups(r, par)
        assert g.ep_group.rank_group == tuple((d * ep + i) * mtp + t for i in range(ep))
        assert g.moe_tp_group.rank_group == tuple((d * ep + e) * mtp + i for i in range(mtp))
        assert g.moe_dp_group.rank_group == tuple((i * ep + e) * mtp + t for i in range(moe_dp))


@pytest.mark.parametrize("tp,pp,dp,ep,moe_dp", [(2, 2, 4, 4, 2), (1, 4, 4, 4, 1), (4, 2, 2, 8, 1), (2, 4, 2, 2, 2)])
def test_pp_groups_are_stage_local_partitions(tp, pp, dp, ep, moe_dp):
    par = ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, moe_dp=moe_dp)
    for stage in range(pp):
        ranks = set(stage_ranks(stage, par))
        assert len(ranks) == tp * dp
        groups = {moe_groups(r, par).ep_group.rank_group for r in ranks}
        assert all(rank_coords(x, par)[1] == stage for g in groups for x in g)  # never crosses a stage
        assert sorted(x for g in groups for x in g) == sorted(ranks)  # a partition of the stage
        assert len(groups) == moe_dp * par.moe_tp


def test_filter_rules_generate_exactly_the_legal_space():
    n, tps, pps, eps, mdps = 16, (1, 2, 4, 8, 16), (1, 2, 4), (1, 2, 4, 8, 16), (1, 2, 4)
    sp = SearchSpace(tp_sizes=tps, pp_sizes=pps, num_devices=n, ep_sizes=eps, moe_dp_sizes=mdps)
    got = {(p.tp, p.pp, p.dp, p.ep, p.moe_dp, p.moe_tp) for p in sp.parallel_specs()}
    want = set()
    for tp, pp, ep, mdp in itertools.product(tps, pps, eps, mdps):
        if n % (tp * pp) or n % ep or n % (ep * mdp):  # the RFC's rules
            continue
        stage = n // pp
        if stage % (ep * mdp):  # stage-local MoE groups
            continue
        want.add((tp, pp, n // (tp * pp), ep, mdp, stage // (ep * mdp)))
    assert got == want
    assert (8, 2, 1, 8, 1, 1) in got and (16, 1, 1, 16, 1, 1) in got and (2, 1, 8, 4, 2, 2) in got
    assert not any(p[1] == 2 and p[3] == 16 for p in got)  # 8 ranks per stage cannot hold ep 16


def test_rejections_name_the_rule():
    assert moe_layout_rule(16, 3, 1, 1, 1)[1] == "16 devices not divisible by tp*pp=3"
    assert "devices % ep == 0" in moe_layout_rule(12, 1, 1, 8, 1)[1]
    assert "devices % (ep*moe_dp) == 0" in moe_layout_rule(16, 1, 1, 16, 2)[1]
    assert "stage-local" in moe_layout_rule(16, 8, 2, 16, 1)[1]
    assert moe_layout_rule(16, 8, 2, 8, 1) == (1, "")
    assert moe_layout_rule(16, 4, 1, 4, 2) == (2, "")  # RFC: moe_tp = 16 / (4*2)
    with pytest.raises(SimcastInputError, match="ep"):
        check_space(SearchSpace(tp_sizes=(8,), pp_sizes=(2,), num_devices=16, ep_sizes=(16,), moe_dp_sizes=(1,)))


def test_parallel_spec_checks_and_label():
    with pytest.raises(SimcastInputError, match="ep_size\\*moe_dp_size"):
        ParallelSpec(tp=2, pp=2, dp=2, ep=8)  # 4 ranks per stage
    with pytest.raises(SimcastInputError, match="enable_dp_attention"):
        ParallelSpec(tp=8, ep=8, dp_attention=True)
    par = ParallelSpec(tp=1, dp=8, ep=8, dp_attention=True)
    assert parallel_label(par, True) == "TP=1 | PP=1 | DP=8 | EP=8 | MoE-TP=1 | MoE-DP=1"
    assert parallel_label(par, False) == "TP=1 | PP=1 | DP=8"
