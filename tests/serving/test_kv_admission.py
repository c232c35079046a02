"""KV admission as each engine runs it: hand-computed capacities per policy, the memory flags with the
engines' names, and the steady state against bench-serve run long enough to reach it, per engine."""

import math
from dataclasses import replace

import numpy as np
import pytest

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines.policy import engine_policy
from simcast.engines.sglang import SGLANG_RATIO
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.kv_memory import kv_budgets, mean_request_kv_tokens, request_kv_tokens, stage_fixed
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving, kv_capacity_tokens

H100 = load_device("h100_sxm")


def test_guaranteed_no_evict_reserves_the_full_request_in_blocks():
    pol = engine_policy("trtllm", H100)
    assert (pol.kv_admission, pol.kv_block_tokens) == ("guaranteed_no_evict", 32)
    assert request_kv_tokens(pol, 1000, 500) == 47 * 32  # ceil(1500 / 32) blocks of 32


def test_on_demand_holds_the_live_tokens_on_average():
    pol = engine_policy("vllm", H100)
    assert pol.kv_admission == "on_demand"
    # prompt + half the output on average over the decode life, plus half a 16-token block of rounding
    assert request_kv_tokens(pol, 1000, 500) == pytest.approx(1000 + 250 + 7.5)


def test_sglang_reserves_its_decayed_ratio_of_the_remaining_output():
    pol = engine_policy("sglang", H100)
    assert pol.kv_admission == "reserve_ratio" and pol.kv_block_tokens == 1
    ratio = 0.7 * 0.14  # global_config: init 0.7, min factor 0.14
    assert pol.new_token_ratio == pytest.approx(ratio)
    assert request_kv_tokens(pol, 1000, 500) == pytest.approx(1000 + 250 + ratio * 250)
    # above the 4096-token clip the remaining output counts at most 4096: mean of min(r, 4096) for r in 0..10000
    clip = SGLANG_RATIO["clip_max_new_tokens"]
    assert clip == 4096
    assert request_kv_tokens(pol, 0, 10000) == pytest.approx(5000 + ratio * (4096 - 4096**2 / 20000))


def test_mixed_lengths_are_weighted_by_their_life():
    pol = replace(engine_policy("vllm", H100), kv_block_tokens=1)
    # two requests types in equal numbers: the longer-lived one is 3x as often in the running set
    got = mean_request_kv_tokens(pol, ((1.0, 100, 100), (1.0, 100, 300)))
    assert got == pytest.approx((100 * 150 + 300 * 250) / 400)


def _cfg(engine: str, **kw) -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"), device=H100, parallel=ParallelSpec(), engine=engine
        ),
        workload=Workload(input_length=1024, output_length=1024),
        batch_size=1,
        **kw,
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_memory_capacity_is_the_engine_budget_over_the_mean_request(engine):
    cfg = _cfg(engine)
    weights, act, per_req = stage_fixed(cfg)
    budget = kv_budgets(cfg, weights, act)[0]
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 131072 bytes per token
    per_token = 32 * 8 * 128 * 2 * 2
    tokens = mean_request_kv_tokens(cfg.policy, ((1.0, 1024, 1024),))
    assert per_req[0] == pytest.approx(tokens * per_token)
    from simcast.serving.kv_memory import max_batch_for_memory

    assert max_batch_for_memory(cfg) == budget // (tokens * per_token)


def test_sglang_budget_is_its_static_fraction_minus_weights():
    cfg = _cfg("sglang", mem_fraction=0.8, mem_flag="--mem-fraction-static")
    weights, act, _ = stage_fixed(cfg)
    assert kv_budgets(cfg, weights, act) == [int(0.8 * H100.hbm_bytes - weights[0])]


def test_memory_flags_move_capacity_and_belong_to_their_engine(capsys):
    lo = _cfg("vllm", mem_fraction=0.5, mem_flag="--gpu-memory-utilization")
    from simcast.serving.kv_memory import max_batch_for_memory

    assert max_batch_for_memory(lo) < max_batch_for_memory(_cfg("vllm"))
    args = ["optimize", "--device", "h100_sxm", "--num-devices", "1", "--input-length", "128", "--output-length", "16"]
    rc = main([*args, "--engine", "vllm", "--mem-fraction-static", "0.8", "Qwen/Qwen3-0.6B"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "--mem-fraction-static" in err[0] and "use --gpu-memory-utilization" in err[0]
    rc = main([*args, "--max-model-len", "100", "Qwen/Qwen3-0.6B"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--max-model-len" in err[0] and "144 tokens" in err[0]


def test_tiny_outputs_do_not_give_a_zero_tpot():
    """OSL 2 at batch 1: the one decode step is the request's own (it was costed as 0 decodes before)."""
    cfg = replace(_cfg("vllm"), workload=Workload(input_length=128, output_length=2))
    r = estimate_serving(cfg)
    assert r.tpot_s > 0 and r.tokens_per_s < 2 / r.ttft_s


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_steady_state_matches_a_long_closed_loop_bench_serve(engine):
    """Same concurrency, a run long enough that ramp-up and drain are small: throughput within 5%."""
    cfg = replace(_cfg(engine), workload=Workload(input_length=512, output_length=128))
    b = 32
    reqs = make_requests(num_prompts=16 * b, rate=math.inf, input_len=512, output_len=128, range_ratio=0.5, seed=3)
    res = simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg), max_concurrency=b)
    st = estimate_serving(replace(cfg, batch_size=b))
    tps = sum(x.output_len for x in res.requests) / res.duration_s
    tpot = np.mean([(x.e2e_s - x.ttft_s) / (x.output_len - 1) for x in res.requests])
    assert tpot == pytest.approx(st.tpot_s, rel=0.05)
    assert tps == pytest.approx(st.tokens_per_s, rel=0.05)


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_guaranteed_no_evict_never_preempts_and_on_demand_does_when_memory_is_short():
    cfg = replace(_cfg("trtllm"), workload=Workload(input_length=512, output_length=256))
    reqs = make_requests(num_prompts=200, rate=math.inf, input_len=512, output_len=256, seed=2)
    small = 20 * (512 + 256)
    res = simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=small)
    assert sum(x.preemptions for x in res.requests) == 0
    assert max(s.running for s in res.samples) <= small // 768  # full reservations only (768 = 24 blocks of 32)
    vcfg = cfg.redeployed(engine="vllm")
    res = simulate_requests(reqs, coster_for(vcfg), kv_tokens_per_replica=small)
    assert sum(x.preemptions for x in res.requests) > 0
    assert max(s.running for s in res.samples) > small // 768  # on demand admits more than full reservations


def test_docs_engines_page_names_every_engine_policy_and_memory_flag():
    from pathlib import Path

    from simcast.engines import get_engine
    from simcast.engines.policy import MEMORY_FLAGS
    from simcast.engines.records import KV_ADMISSION

    text = (Path(__file__).resolve().parents[2] / "docs" / "engines.md").read_text()
    assert all(p in text for p in KV_ADMISSION)
    assert all(f in text for f in MEMORY_FLAGS)
    for name in ("vllm", "sglang", "trtllm"):
        r = get_engine(name).record
        assert f"{r.kv_block_tokens} token" in text and r.kv_admission in text
