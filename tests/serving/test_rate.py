"""The open-loop estimate at a target request rate (simcast/serving/steady/rate.py) against the request-level
simulator (bench-serve) at the same Poisson rate, and its own invariants."""

import math
from dataclasses import replace

import numpy as np
import pytest

from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving, kv_capacity_tokens
from simcast.serving.steady.rate import capacity_per_s, estimate_at_rate, poisson_quantile

TOLERANCE = 0.15
"""Mean TTFT of the open-loop estimate vs bench-serve's at 50/80/95% of capacity (measured on Qwen3-8B, H100,
vLLM, 1024/128: -5%, -11%, 0%)."""


@pytest.fixture(scope="module")
def cfg():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-8B"), device=load_device("h100_sxm"), parallel=ParallelSpec(), engine="vllm"
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=1,
    )


def test_poisson_quantile_by_hand():
    # Poisson(2): P(k<=0)=.135, P(k<=1)=.406, P(k<=2)=.677, P(k<=3)=.857, P(k<=4)=.947, P(k<=5)=.983, P(k<=6)=.9955
    assert [poisson_quantile(2.0, q) for q in (0.1, 0.5, 0.9, 0.99)] == [0, 2, 4, 6]
    assert poisson_quantile(0.0, 0.99) == 0


@pytest.mark.slow  # steady states at many concurrencies: seconds on 2 cores
def test_capacity_is_the_saturated_steady_state_and_over_it_ttft_diverges(cfg):
    cap, sat = capacity_per_s(cfg)
    assert cap == pytest.approx(sat.tokens_per_s / 128)
    assert sat.capped_by  # an engine limit binds at the saturated concurrency
    over = estimate_at_rate(cfg, 1.01 * cap)
    assert over.utilisation > 1 and math.isinf(over.ttft_s) and over.steady is None


@pytest.mark.slow
def test_ttft_grows_with_rate_and_exceeds_the_closed_loop_s(cfg):
    cap, _ = capacity_per_s(cfg)
    ests = [estimate_at_rate(cfg, f * cap) for f in (0.3, 0.6, 0.9)]
    assert [e.utilisation for e in ests] == pytest.approx([0.3, 0.6, 0.9])
    assert ests[0].ttft_s < ests[1].ttft_s < ests[2].ttft_s
    assert all(e.ttft_s <= e.ttft_p99_s for e in ests)
    for e in ests:  # Poisson arrivals only add to the closed loop's TTFT at the same concurrency
        closed = estimate_serving(replace(cfg, batch_size=e.concurrency))
        assert e.ttft_s >= closed.ttft_s
        assert e.tpot_s == pytest.approx(closed.tpot_s)
        assert closed.tokens_per_s / 128 >= e.rate_per_s  # the operating point carries the rate


@pytest.mark.slow
@pytest.mark.parametrize("frac", [0.5, 0.8, 0.95])
def test_mean_ttft_agrees_with_bench_serve_at_the_same_rate(cfg, frac):
    cap, _ = capacity_per_s(cfg)
    est = estimate_at_rate(cfg, frac * cap)
    reqs = make_requests(num_prompts=1500, rate=frac * cap, input_len=1024, output_len=128, seed=1)
    r = simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg))
    steady = [x for x in r.requests if x.arrival_s > 5.0]  # past the ramp-up from an idle engine
    ttft = float(np.mean([x.ttft_s for x in steady]))
    assert est.ttft_s == pytest.approx(ttft, rel=TOLERANCE)


@pytest.mark.slow
def test_replicas_split_the_rate_evenly(cfg):
    """dp = 4 replicas at 4λ are four replicas at λ each (``batch_size`` is the concurrency per replica): the
    same operating point, TTFT and TPOT, four times the capacity."""
    one = estimate_at_rate(cfg, 10.0)
    four = estimate_at_rate(cfg.redeployed(parallel=ParallelSpec(dp=4)), 40.0)
    assert four.concurrency == one.concurrency
    assert four.utilisation == pytest.approx(one.utilisation, rel=1e-9)
    assert (four.ttft_s, four.tpot_s) == (pytest.approx(one.ttft_s, rel=1e-9), pytest.approx(one.tpot_s, rel=1e-9))
    assert four.capacity_per_s == pytest.approx(4 * one.capacity_per_s, rel=1e-9)
