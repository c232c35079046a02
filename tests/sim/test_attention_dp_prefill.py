"""One prompt on an idle attention-DP layout is prefilled by one DP rank (issue 26): its expert GEMMs see that
prompt's tokens, not ``dp`` prompts' worth, and its TTFT does not grow with the attention-DP replicas."""

from dataclasses import replace

import pytest

from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.ops.moe import busiest_rank_pairs, moe_group_tokens
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.steady.model import ServingConfig, Workload, estimate_serving, prefill_spec
from simcast.sim.simulate import simulate

PROMPT = 2048


def test_group_tokens_hand_worked():
    """8 replicas feed 2 MoE-DP groups (4 each): all busy -> 4 x 100 per group; one busy -> 100; five -> 400."""
    assert moe_group_tokens(100, 8, 2) == 400
    assert moe_group_tokens(100, 8, 2, active_dp_ranks=1) == 100
    assert moe_group_tokens(100, 8, 2, active_dp_ranks=5) == 400
    assert moe_group_tokens(100, 8, 1, active_dp_ranks=8) == moe_group_tokens(100, 8, 1) == 800


@pytest.fixture(scope="module")
def qwen():
    return load_model("Qwen/Qwen3-30B-A3B"), load_device("h100_sxm")


def _spec(qwen, par: ParallelSpec, active: int) -> SimSpec:
    m, d = qwen
    return SimSpec(model=m, device=d, parallel=par, batch=Batch.prefill(1, PROMPT), active_dp_ranks=active)


def _ops(report, name):
    return [o for st in report.stages for mb in st.microbatch_ops for o in mb if o.op == name]


@pytest.mark.slow
def test_one_rank_prefill_expert_work(qwen):
    """Attention-DP8 + EP8 (TP1): the busy rank's expert GEMM FLOPs are those of the prompt's own 2048 tokens
    over 8 expert ranks (hand formula 2 x pairs x H x 3 x I); with every DP rank busy, 8 x 2048 tokens."""
    m = qwen[0]
    moe = m.moe
    assert moe is not None
    par = ParallelSpec(tp=1, dp=8, ep=8)
    one = simulate(_spec(qwen, par, 1))
    all_ = simulate(_spec(qwen, par, 0))
    for report, tokens in ((one, PROMPT), (all_, 8 * PROMPT)):
        pairs = busiest_rank_pairs(tokens, moe.top_k, moe.num_experts, 8, report.spec.expert_imbalance)
        expect = 2.0 * pairs * m.hidden_size * 3 * moe.expert_intermediate
        got = _ops(report, "simcast::moe_experts")
        assert got and all(o.flops == pytest.approx(expect, rel=1e-12) for o in got)
    # the rest of the step (attention, dense, dispatch from the busy rank) is the same rank's work
    others = lambda r: sorted(o.time_s for o in r.stages[0].microbatch_ops[0] if o.op != "simcast::moe_experts")  # noqa: E731
    assert others(one) == others(all_)
    assert one.latency_s < all_.latency_s


@pytest.mark.slow
def test_ttft_does_not_grow_with_attention_dp_replicas(qwen):
    """One prompt on attention-DP8/EP8 and on attention-DP16/EP8 (two MoE-DP groups of 8): the same rank's
    prefill and the same MoE traffic, so the same 1-prompt latency (before: 16 prompts' expert work)."""
    a = simulate(_spec(qwen, ParallelSpec(tp=1, dp=8, ep=8), 1))
    b = simulate(_spec(qwen, ParallelSpec(tp=1, dp=16, ep=8, moe_dp=2), 1))
    assert b.latency_s == pytest.approx(a.latency_s, rel=1e-12)


def test_serving_idle_ttft_is_one_rank_prefill(qwen):
    """The serving model's 1-prompt TTFT on attention-DP uses one busy DP rank; replicas that share nothing
    and dp = 1 layouts keep every rank busy (active_dp_ranks 0)."""
    m, d = qwen
    cfg = ServingConfig(
        deployment=Deployment(model=m, device=d, parallel=ParallelSpec(tp=1, dp=8, ep=8), engine="sglang"),
        workload=Workload(input_length=PROMPT, output_length=64),
        batch_size=1,
    )
    assert prefill_spec(cfg).active_dp_ranks == 1
    r = estimate_serving(cfg)
    assert r.prefill.latency_s == pytest.approx(simulate(replace(prefill_spec(cfg))).latency_s, rel=1e-12)
    rep = cfg.redeployed(parallel=ParallelSpec(tp=1, dp=8, ep=1, moe_dp=8))
    assert prefill_spec(rep).active_dp_ranks == 0
