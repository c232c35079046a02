"""The prompt-chunk setting as a searched dimension (optimize --chunked-prefill-sizes) and SGLang's dynamic
chunking in bench-serve (issue 16 item 5)."""

from __future__ import annotations

import json

import pytest

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.simulate import RequestSpec, simulate_requests
from simcast.serving.search.chunk_search import chunk_settings, next_chunk_fn, pick
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, kv_capacity_tokens

LLAMA8 = "meta-llama/Llama-3.1-8B"
LONG = 131072 - 64  # a 128K prompt that leaves room for its output in Llama 3.1's context


def _cfg(pp: int, engine: str = "sglang", dynamic: bool = False, isl: int = LONG) -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(
            model=load_model(LLAMA8),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=1, pp=pp, dp=1),
            engine=engine,
        ),
        workload=Workload(input_length=isl, output_length=8),
        batch_size=1,
        dynamic_chunking=dynamic,
    )


def test_pick_is_lowest_ttft_then_throughput_within_one_percent():
    # hand-made (1-prompt TTFT s, token/s/device): 1.0 is lowest; 1.009 is within 1% and has more throughput
    assert pick([(1.2, 50.0), (1.0, 10.0), (1.009, 20.0), (1.02, 99.0)]) == 2
    assert pick([(2.0, 1.0), (3.0, 5.0)]) == 0
    assert pick([(1.0, 3.0), (1.0, 4.0)]) == 1  # equal TTFT (a prompt shorter than every chunk): throughput


def test_settings_add_dynamic_chunking_only_for_sglang_at_pp_over_one():
    own = _cfg(8).policy.max_num_batched_tokens  # SGLang's default for the GPU (and the engine's own is tried)
    assert chunk_settings(_cfg(8), (4096,)) == [(4096, False), (own, False), (4096, True), (own, True)]
    own1 = _cfg(1).policy.max_num_batched_tokens
    assert chunk_settings(_cfg(1), (4096,)) == [(4096, False), (own1, False)]  # SGLang's predictor is PP-only
    assert all(not d for _, d in chunk_settings(_cfg(8, "vllm"), (4096,)))
    with pytest.raises(ValueError, match="--enable-dynamic-chunking"):
        _cfg(8, "vllm", dynamic=True)


def test_dynamic_chunks_shrink_as_the_prefix_grows():
    nxt = next_chunk_fn(_cfg(8, dynamic=True), use_disk_cache=True)
    assert nxt is not None and next_chunk_fn(_cfg(1, dynamic=True)) is None  # PP1: static chunks
    own = _cfg(8).policy.max_num_batched_tokens
    sizes = [nxt(p) for p in (0, own, 65536, 120000)]
    assert sizes[0] == own  # the first chunk is --chunked-prefill-size
    assert sizes[1] > sizes[2] > sizes[3] >= own // 4  # equal-time chunks shrink; floored at C // 4


@pytest.mark.slow
def test_search_picks_a_faster_chunk_setting_at_pp8_and_hardly_matters_at_pp1(capsys):
    args = ["optimize", "--device", "h100_sxm", "--num-devices", "8", "--tp-sizes", "1", "--pp-sizes", "1", "8"]
    args += ["--input-length", str(LONG), "--output-length", "8", "--batch-sizes", "1", "--engine", "sglang"]
    assert main([*args, "--json", LLAMA8]) == 0
    fixed = {r["pp"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert main([*args, "--chunked-prefill-sizes", "4096", "8192", "--json", LLAMA8]) == 0
    got = {r["pp"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    own = fixed[8]["chunk_tokens"]  # SGLang's default for the GPU
    assert not fixed[8]["dynamic_chunking"]
    # PP8: the last chunk's trip through the other 7 stages (and the first's fill) grows with the chunk;
    # equal-time chunks also stop the late, long-context chunks from holding stage 0 longer than the rest
    assert got[8]["ttft_idle_ms"] < 0.9 * fixed[8]["ttft_idle_ms"]  # measured 0.79 (4096 dyn vs 8192)
    assert (got[8]["chunk_tokens"], got[8]["dynamic_chunking"]) != (own, False)
    # PP1: no pipeline to fill; the chunk only changes per-chunk efficiency: 4096 within 5% of the default
    assert got[1]["ttft_idle_ms"] <= fixed[1]["ttft_idle_ms"]
    pp1 = args[:9] + args[10:] + ["--max-num-batched-tokens", "4096", "--json", LLAMA8]  # --pp-sizes 1
    assert main(pp1) == 0
    small = json.loads(capsys.readouterr().out)["rows"][0]
    assert small["pp"] == 1 and small["chunk_tokens"] == 4096
    assert abs(small["ttft_idle_ms"] / fixed[1]["ttft_idle_ms"] - 1) < 0.05  # measured 3.4%
    assert main([*args, "--chunked-prefill-sizes", "4096", "8192", "--emit", "sglang", LLAMA8]) == 0
    out = capsys.readouterr().out
    assert "chunk settings tried" in out and f"--chunked-prefill-size {got[8]['chunk_tokens']}" in out
    assert ("--enable-dynamic-chunking" in out) == got[8]["dynamic_chunking"]


@pytest.mark.slow
def test_bench_serve_follows_the_dynamic_plan_at_pp_over_one():
    """One 128K prompt alone: its pieces follow SGLang's predictor at PP8 (a different TTFT from static chunks);
    at PP1 the flag changes nothing, as in SGLang."""

    def ttft(pp: int, dynamic: bool) -> tuple[float, int]:
        cfg = _cfg(pp, dynamic=dynamic)
        res = simulate_requests(
            [RequestSpec(arrival_s=0.0, input_len=LONG, output_len=8)],
            coster_for(cfg, True),
            kv_tokens_per_replica=kv_capacity_tokens(cfg),
            next_chunk=next_chunk_fn(cfg),
        )
        return res.requests[0].ttft_s, res.steps

    (s8, n8), (d8, m8) = ttft(8, False), ttft(8, True)
    assert d8 != pytest.approx(s8, rel=0.02)
    assert m8 > n8  # equal-time chunks are smaller than the first: 8 of them hold fewer tokens
    assert ttft(1, True) == ttft(1, False)
