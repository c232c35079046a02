"""Engine policies (cited defaults) and the steady-state mixed-step serving model."""

from dataclasses import replace

import pytest

from simcast.core.assumption import Topic, of_topic
from simcast.core.errors import SimcastInputError
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.render.assumption_text import assumption_text
from simcast.serving.steady.model import ServingConfig, Workload, estimate_serving, max_batch_for_memory, memory_fit
from simcast.serving.step import step_cycle_s


def test_engine_defaults_follow_each_engines_own_rules():
    h100, a100 = load_device("h100_sxm"), load_device("a100_sxm_80gb")
    v = engine_policy("vllm", h100)
    assert (v.max_num_batched_tokens, v.max_num_seqs, v.kv_block_tokens, v.chunked_prefill, v.decode_first) == (
        8192,
        1024,
        16,
        True,
        True,
    )
    a = engine_policy("vllm", a100)  # vLLM's table: A100 (even 80 GB) gets 2048 / 256
    assert (a.max_num_batched_tokens, a.max_num_seqs) == (2048, 256)
    s = engine_policy("sglang", h100)  # reserved 512 + 8192*1.5 + 256*2 + 128 = 13440 MB of 81559 MiB
    assert s.max_num_batched_tokens == 8192 and not s.decode_first
    assert s.mem_fraction == pytest.approx(round(1 - 13440 / 81559, 3))
    t = engine_policy("trtllm", h100)
    assert (t.max_num_batched_tokens, t.max_num_seqs, t.kv_block_tokens, t.chunked_prefill, t.mem_fraction_of) == (
        8192,
        2048,
        32,
        False,
        "free",
    )
    assert engine_policy("vllm", h100, max_num_seqs=64).max_num_seqs == 64
    with pytest.raises(SimcastInputError):
        engine_policy("vllm", h100, max_num_sequences=64)
    with pytest.raises(SimcastInputError):
        engine_policy("tgi", h100)


def test_cycle_formula():
    assert step_cycle_s((0.01,), 0.002, 1, overlap_cpu=False) == pytest.approx(0.012)
    assert step_cycle_s((0.01,), 0.002, 1, overlap_cpu=True) == pytest.approx(0.010)
    assert step_cycle_s((0.01, 0.02), 0.001, 2, overlap_cpu=False) == pytest.approx(0.04)  # M * slowest stage
    assert step_cycle_s((0.001, 0.001), 0.005, 2, overlap_cpu=True) == pytest.approx(0.010)  # M * cpu


@pytest.fixture(scope="module")
def cfg8b():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=1),
            engine="vllm",
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=1,
    )


def test_lone_request_keeps_idle_ttft_and_littles_law(cfg8b):
    r = estimate_serving(cfg8b)
    assert r.ttft_s == r.ttft_idle_s
    assert r.tpot_s == pytest.approx(r.decode_cycle_s)  # no other prompts ride along
    for b in (1, 64):
        x = estimate_serving(replace(cfg8b, batch_size=b))
        assert x.e2e_latency_s == pytest.approx(x.ttft_s + 127 * x.tpot_s)
        assert x.tokens_per_s == pytest.approx(b * 128 / x.e2e_latency_s)


def test_mixed_steps_read_weights_once(cfg8b):
    """64 requests share each step's weight read: far cheaper than 64 lone requests, dearer than one."""
    one, many = estimate_serving(cfg8b), estimate_serving(replace(cfg8b, batch_size=64))
    assert one.tpot_s < many.tpot_s < 4 * one.tpot_s
    assert many.tokens_per_s > 16 * one.tokens_per_s
    tps = [estimate_serving(replace(cfg8b, batch_size=b)).tokens_per_s for b in (1, 8, 64, 256)]
    assert tps == sorted(tps)


def test_engine_limits_cap_the_served_concurrency(cfg8b):
    r = estimate_serving(replace(cfg8b, batch_size=300, max_num_seqs=100))
    assert r.concurrency == 100 and r.capped_by == "max_num_seqs"
    # token budget: decodes + prompt tokens per step <= 512 -> b <= 512 * L / (ISL + OSL - 1)
    r = estimate_serving(
        replace(cfg8b, batch_size=1000, workload=Workload(input_length=1024, output_length=128, max_batched_tokens=512))
    )
    assert r.capped_by == "token budget"
    life = 127 + 2  # 1024-token prompts in 2 chunks of <= 512 - decodes
    assert r.concurrency <= 512 * life / (1024 + 127) + 1


def test_memory_limit_is_tight(cfg8b):
    b = max_batch_for_memory(cfg8b)
    assert b > 100
    assert memory_fit(replace(cfg8b, batch_size=b)).fits and not memory_fit(replace(cfg8b, batch_size=b + 1)).fits


def test_pp_microbatches_in_flight(cfg8b):
    """PP 2: two microbatches of b/2 each in flight; at high load the throughput is at least TP1 PP1's
    on twice the devices' worth of memory - checked loosely: PP must not lose more than the bubble."""
    pp1 = estimate_serving(replace(cfg8b, batch_size=128))
    pp2 = estimate_serving(replace(cfg8b.redeployed(parallel=ParallelSpec(pp=2)), batch_size=128))
    assert pp2.tokens_per_s > 0.8 * pp1.tokens_per_s
    (steady,) = of_topic(pp2.assumptions, Topic.STEADY_STATE)
    assert "2 microbatch(es) in flight" in assumption_text(steady)
