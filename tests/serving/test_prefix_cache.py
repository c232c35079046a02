"""Prefix caching in the request-level simulator and the steady state: hand-computed hits, KV held once,
eviction, conversation turns, engine flags, and the steady state against bench-serve."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.simulate import RequestSpec, make_conversations, make_requests, simulate_requests
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving, kv_capacity_tokens

MODEL = "meta-llama/Llama-3.1-8B"


def config(engine="vllm", **kw):
    return ServingConfig(
        deployment=Deployment(
            model=load_model(MODEL), device=load_device("h100_sxm"), parallel=ParallelSpec(), engine=engine
        ),
        workload=Workload(input_length=128, output_length=8),
        batch_size=1,
        **kw,
    )


def run(cfg, reqs, kv_tokens=None, **kw):
    cap = kv_capacity_tokens(cfg) if kv_tokens is None else kv_tokens
    return simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=cap, **kw)


def shared(n=4, prefix=64, isl=128, osl=8, gap_s=0.0):
    return [
        RequestSpec(arrival_s=i * gap_s, input_len=isl, output_len=osl, prefix_id=0, prefix_len=prefix)
        for i in range(n)
    ]


@pytest.mark.parametrize("engine,peak_blocks", [("vllm", 4 + 4 * 5), ("trtllm", 2 + 4 * 3)])
def test_four_requests_share_a_64_token_prefix(engine, peak_blocks):
    """4 prompts of 128 tokens (8 output) sent at once, the first 64 shared. vLLM (16-token blocks): the first
    request allocates the prefix's 4 blocks when it is scheduled, the other three, admitted in the same step,
    hit them: 3 x 64 tokens of 512 looked up. KV: 136 tokens need 9 blocks, 4 of them the prefix held once,
    so 4 + 4 x 5 = 24 blocks at the peak (not 36). TensorRT-LLM (32-token blocks, whole request reserved):
    5 blocks each, 2 of them the prefix: 2 + 4 x 3 = 14."""
    r = run(config(engine), shared())
    assert r.prefix_hit_tokens == 3 * 64
    assert r.prefix_query_tokens == 4 * 128
    assert r.prefix_hit_rate == pytest.approx(192 / 512)
    assert sorted(x.cached_tokens for x in r.requests) == [0, 64, 64, 64]
    assert max(s.kv_used_blocks for s in r.samples) == peak_blocks


def test_partial_block_prefix_hits_full_blocks_only():
    """A 70-token prefix holds 4 full 16-token blocks (64 tokens) in vLLM; SGLang (page 1) hits all 70."""
    assert run(config("vllm"), shared(prefix=70)).prefix_hit_tokens == 3 * 64
    assert run(config("sglang"), shared(prefix=70)).prefix_hit_tokens == 3 * 70


def test_a_hit_never_covers_the_whole_prompt():
    """A prompt that is all prefix still computes its last token: 64-token prompts, all shared, hit 48."""
    r = run(config("vllm"), shared(prefix=64, isl=64))
    assert sorted(x.cached_tokens for x in r.requests) == [0, 48, 48, 48]


def test_without_prefix_caching_a_shared_prefix_changes_nothing():
    plain = [RequestSpec(arrival_s=0.0, input_len=128, output_len=8) for _ in range(4)]
    off = config(prefix_caching=False)
    a, b = run(off, shared()), run(off, plain)
    assert a.prefix_hit_tokens == 0 and a.prefix_query_tokens == b.prefix_query_tokens
    assert [(x.ttft_s, x.e2e_s) for x in a.requests] == [(x.ttft_s, x.e2e_s) for x in b.requests]


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_no_shared_prefix_same_result_with_and_without_caching():
    """Without shared prefixes (and without preemption) the prefix cache never hits: identical runs."""
    reqs = make_requests(num_prompts=64, rate=20.0, input_len=256, output_len=16, range_ratio=0.5, seed=5)
    a, b = run(config(), reqs), run(config(prefix_caching=False), reqs)
    assert a.prefix_hit_tokens == 0
    assert [(x.ttft_s, x.e2e_s) for x in a.requests] == [(x.ttft_s, x.e2e_s) for x in b.requests]


def test_hits_cut_ttft_at_long_prompts():
    reqs = make_requests(num_prompts=32, rate=2.0, input_len=512, output_len=8, seed=1, prefix_len=3584)
    on, off = run(config(), reqs), run(config(prefix_caching=False), reqs)
    assert on.prefix_hit_rate > 0.8
    assert np.median([x.ttft_s for x in on.requests]) < 0.6 * np.median([x.ttft_s for x in off.requests])


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_unreferenced_prefix_is_evicted_when_the_pool_is_short():
    """A prefix whose last user finished sits in the free queue; in a 20-block pool the unique requests sent
    after it (9 blocks each) reallocate its blocks, so a later request with the same prefix misses; in a
    large pool it hits."""
    reqs = (
        [RequestSpec(arrival_s=0.0, input_len=128, output_len=8, prefix_id=7, prefix_len=64)]
        + [RequestSpec(arrival_s=1.0 + k, input_len=128, output_len=8) for k in range(4)]
        + [RequestSpec(arrival_s=10.0, input_len=128, output_len=8, prefix_id=7, prefix_len=64)]
    )
    small, large = run(config(), reqs, kv_tokens=20 * 16), run(config(), reqs)
    assert small.requests[-1].cached_tokens == 0
    assert large.requests[-1].cached_tokens == 64
    assert all(s.kv_used_blocks <= s.kv_total_blocks for s in small.samples)


def test_eviction_under_a_tiny_pool_loses_no_request():
    reqs = make_requests(num_prompts=120, rate=math.inf, input_len=256, output_len=64, seed=3, prefix_len=256)
    r = run(config(), reqs, kv_tokens=30 * (512 + 64))
    assert len(r.requests) == 120 and sum(x.preemptions for x in r.requests) > 0
    assert sorted(x.output_len for x in r.requests) == sorted(q.output_len for q in reqs)
    assert all(s.kv_used_blocks <= s.kv_total_blocks for s in r.samples)
    assert 0 < r.prefix_hit_rate < 1


def test_conversation_turn_hits_its_history():
    """Turn 2's prompt (150 tokens) starts with turn 1's 100 + 20 tokens; turn 1 computed KV for 119 of them
    (its last token is sampled, never fed back): 7 full 16-token blocks = 112 cached tokens in vLLM, 119 in
    SGLang. Turn 2 is sent when turn 1's answer has arrived."""
    reqs = [
        RequestSpec(arrival_s=0.0, input_len=100, output_len=20),
        RequestSpec(arrival_s=0.0, input_len=150, output_len=20, parent=0, prefix_len=120),
    ]
    for engine, hit in (("vllm", 112), ("sglang", 119)):
        r = run(config(engine), reqs)
        first, second = r.requests
        assert second.cached_tokens == hit
        assert second.arrival_s == pytest.approx(first.arrival_s + first.e2e_s)


def test_make_conversations_builds_the_history():
    reqs = make_conversations(num_prompts=5, rate=math.inf, turns=2, input_len=100, output_len=10)
    assert [r.parent for r in reqs] == [-1, 0, -1, 2, -1]
    assert [r.input_len for r in reqs] == [100, 210, 100, 210, 100]
    assert [r.prefix_len for r in reqs] == [0, 110, 0, 110, 0]


def test_random_prefix_len_as_vllm():
    """vllm bench serve --random-prefix-len P: prompt = P shared tokens + the random input length."""
    reqs = make_requests(num_prompts=50, rate=math.inf, input_len=100, output_len=8, range_ratio=0.5, prefix_len=64)
    assert all(r.prefix_id == 0 and r.prefix_len == 64 and 64 + 50 <= r.input_len <= 64 + 150 for r in reqs)


def test_steady_state_prefix_hit_rate():
    """h = 0.5 of 1024 prompt tokens: the idle prefill computes 512 tokens (faster than 1024), the per-request
    KV drops by 512 tokens (the shared prefix held once), and off with --no-enable-prefix-caching."""
    base = replace(config(), workload=Workload(input_length=1024, output_length=128), batch_size=32)
    hit = replace(base, workload=Workload(input_length=1024, output_length=128, prefix_hit_rate=0.5))
    a, b = estimate_serving(base), estimate_serving(hit)
    assert b.ttft_idle_s < a.ttft_idle_s and b.tokens_per_s > a.tokens_per_s
    assert a.memory.kv_tokens_per_request - b.memory.kv_tokens_per_request == pytest.approx(512)
    assert b.max_concurrency_memory > a.max_concurrency_memory
    off = estimate_serving(replace(hit, prefix_caching=False))
    assert off.tokens_per_s == pytest.approx(a.tokens_per_s)


@pytest.mark.slow
@pytest.mark.parametrize("b", [16, 64])
def test_steady_state_with_hit_rate_matches_bench_serve_within_5pct(b):
    """bench-serve with a 512-token shared prefix + 512 +- 50% own tokens (hit rate ~0.5, the first request
    misses) at closed-loop concurrency b against the steady state at prefix hit rate 0.5."""
    cfg = replace(config(), workload=Workload(input_length=1024, output_length=128, prefix_hit_rate=0.5), batch_size=b)
    reqs = make_requests(
        num_prompts=12 * b, rate=math.inf, input_len=512, output_len=128, range_ratio=0.5, seed=1, prefix_len=512
    )
    r = run(cfg, reqs, max_concurrency=b)
    assert r.prefix_hit_rate == pytest.approx(0.5, abs=0.01)
    st = estimate_serving(cfg)
    tps = sum(x.output_len for x in r.requests) / r.duration_s
    assert tps == pytest.approx(st.tokens_per_s, rel=0.05)


def test_cli_reports_hits_and_flags(tmp_path, capsys):
    base = ["bench-serve", "--model", MODEL, "--device", "h100_sxm", "--num-prompts", "8", "--random-output-len", "4"]
    out = tmp_path / "r.json"
    args = base + ["--random-input-len", "64", "--random-prefix-len", "256", "--save-result", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Prefix cache hit rate (%):" in text and "Prefill tokens skipped (cache hits):" in text
    d = json.loads(out.read_text())
    assert d["prefix_cache_hit_tokens"] == 7 * 256 and d["total_input_tokens"] == 8 * (256 + 64)
    assert d["prefix_caching"] is True and any("prefix caching on" in a for a in d["assumptions"])
    assert "cached_tokens" in out.with_suffix(".requests.csv").read_text().splitlines()[0]
    for off in (["--no-enable-prefix-caching"], ["--engine", "sglang", "--disable-radix-cache"]):
        assert main(args + off) == 0
        assert "Prefix cache hit rate" not in capsys.readouterr().out
        assert json.loads(out.read_text())["prefix_cache_hit_tokens"] == 0
    assert main(base + ["--random-input-len", "64"]) == 0  # no shared prefix: the block prints as before
    assert "Prefix cache" not in capsys.readouterr().out


def test_cli_trace_prefix_columns_and_multiturn(tmp_path, capsys):
    base = ["bench-serve", "--model", MODEL, "--device", "h100_sxm", "--save-result", str(tmp_path / "r.json")]
    trace = tmp_path / "t.csv"
    trace.write_text("input_len,output_len,prefix_id,prefix_len\n300,4,1,256\n300,4,1,256\n300,4,2,256\n")
    assert main(base + ["--dataset-path", str(trace), "--num-prompts", "3"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "r.json").read_text())["prefix_cache_hit_tokens"] == 256
    args = ["--dataset-name", "multiturn", "--multiturn-turns", "3", "--num-prompts", "6"]
    assert main(base + args + ["--random-input-len", "64", "--random-output-len", "16"]) == 0
    capsys.readouterr()
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["completed"] == 6 and d["prefix_cache_hit_tokens"] > 0


def test_finite_run_gives_the_prompts_the_shared_prefix():
    from simcast.serving.request_level.finite import finite_run

    cfg = replace(config(), workload=Workload(input_length=256, output_length=8, prefix_hit_rate=0.5))
    run_ = finite_run(cfg, 16)
    plain = finite_run(replace(cfg, prefix_caching=False), 16)
    assert run_.duration_s < plain.duration_s  # 15 of 16 prompts prefill 128 tokens instead of 256
