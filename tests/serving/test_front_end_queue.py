"""The serving path as a serial resource (EngineRecord.front_end_processes): a burst queues at the front end."""

import math

import pytest

from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, kv_capacity_tokens


@pytest.fixture(scope="module")
def cfg():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"), device=load_device("h100_sxm"), parallel=ParallelSpec(), engine="vllm"
        ),
        workload=Workload(input_length=64, output_length=2),
        batch_size=1,
    )


def _run(cfg, n, processes, rate=math.inf):
    reqs = make_requests(num_prompts=n, rate=rate, input_len=64, output_len=2, seed=1)
    return simulate_requests(
        reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg), front_end_processes=processes
    )


def test_the_records_say_how_many_processes_run_the_serving_path():
    h100 = load_device("h100_sxm")
    assert engine_policy("vllm", h100).front_end_count(4) == 4  # one API server per DP rank
    assert engine_policy("sglang", h100).front_end_count(4) == 1  # one TokenizerManager
    assert engine_policy("trtllm", h100).front_end_count(4) == 0  # not modelled: a latency only
    assert engine_policy("vllm", h100, usage="offline").front_end_count(1) == 0  # no API server offline


@pytest.mark.slow  # ~5 s on 2 cores
def test_a_burst_passes_the_front_end_one_request_at_a_time(cfg):
    """200 tiny requests at t = 0: request k reaches the engine after k serving paths, so the last TTFT is at
    least 200 serving paths and the run lasts at least that long; two processes halve the queue."""
    fe = cfg.policy.front_end_time_s(64)
    one = _run(cfg, 200, 1)
    free = _run(cfg, 200, 0)
    two = _run(cfg, 200, 2)
    assert max(r.ttft_s for r in one.requests) >= 200 * fe
    assert one.duration_s >= 199 * fe > free.duration_s
    assert 99 * fe <= max(r.ttft_s for r in two.requests) - fe < 0.75 * max(r.ttft_s for r in one.requests)


def test_light_load_is_unchanged(cfg):
    """Arrivals further apart than a serving path never queue: the same run with or without the resource."""
    fe = cfg.policy.front_end_time_s(64)
    a, b = _run(cfg, 20, 1, rate=0.01 / fe), _run(cfg, 20, 0, rate=0.01 / fe)
    sent = sorted(r.arrival_s for r in a.requests)
    assert min(y - x for x, y in zip(sent, sent[1:])) > fe  # seed 1: every gap longer than a serving path
    assert [r.ttft_s for r in a.requests] == [r.ttft_s for r in b.requests]
