"""Disaggregated bench-serve (api/bench_disagg.py, serving/disagg/closed_loop.py, serving/disagg/pool_memory.py).

With an infinitely fast link and matched pools a disaggregated deployment is two engines: each request's
prefill-pool time equals an aggregated engine's TTFT for the prompt alone (one output token) and its TPOT equals
the aggregated engine's (the same decode steps). A client cap of one request in flight sends each request when
the previous one has left the decode pool. A pool whose weights do not fit is refused (one line, exit 2) and
reported ``fits: false`` by serve-config. Speculative decoding runs in the decode pool only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from simcast.api.bench import bench_serve
from simcast.core.device import LinkSpec
from simcast.core.errors import SimcastInputError
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.config import ServingConfig, Workload
from simcast.serving.disagg.requests import simulate_disagg_requests
from simcast.serving.disagg.steady import DisaggConfig
from simcast.serving.request_level.scheduler import RequestSpec
from simcast.serving.request_level.simulate import simulate_requests
from simcast.serving.steady.model import coster_for, kv_capacity_tokens

MODEL = "Qwen/Qwen3-0.6B"


def _ideal_cfg() -> ServingConfig:
    dev = load_device("h100_sxm", 1)  # one device per node: the KV crosses the inter-node link
    ideal = LinkSpec(name="ideal", bw_bytes_per_s=1e30, latency_s=0.0, efficiency=1.0)
    dev = replace(dev, links=replace(dev.links, inter_node=ideal))
    return ServingConfig(
        deployment=Deployment(model=load_model(MODEL), device=dev, parallel=ParallelSpec(tp=1), engine="vllm"),
        workload=Workload(input_length=1024, output_length=64),
        batch_size=32,
    )


@pytest.mark.slow
def test_ideal_link_and_matched_pools_reduce_to_two_engines():
    cfg = _ideal_cfg()
    reqs = [RequestSpec(arrival_s=10.0 * i, input_len=1024 - 100 * i, output_len=64) for i in range(3)]
    b = simulate_disagg_requests(reqs, DisaggConfig(prefill=cfg, decode=cfg))
    coster, kv = coster_for(cfg), kv_capacity_tokens(cfg)
    prompt_only = simulate_requests([replace(r, output_len=1) for r in reqs], coster, kv_tokens_per_replica=kv).requests
    agg = simulate_requests(reqs, coster, kv_tokens_per_replica=kv).requests
    for d, p, a in zip(b.requests, prompt_only, agg):
        assert d.transfer_s == pytest.approx(0.0, abs=1e-12)
        # the prefill pool's TTFT = an aggregated engine's TTFT for the prompt alone
        assert d.front_end_s + d.prefill_queue_s + d.prefill_s == pytest.approx(p.ttft_s, rel=1e-12)
        # the decode pool's TPOT = the aggregated engine's (each request alone: the same decode steps)
        assert d.tpot_s == pytest.approx(a.tpot_s, rel=1e-9)


def test_one_request_in_flight_is_sent_when_the_previous_left_the_decode_pool():
    cfg = _ideal_cfg()
    reqs = [RequestSpec(arrival_s=0.0, input_len=512, output_len=16) for _ in range(4)]
    b = simulate_disagg_requests(reqs, DisaggConfig(prefill=cfg, decode=cfg), max_concurrency=1)
    rs = b.requests
    for prev, nxt in zip(rs, rs[1:]):
        # sent when the previous request's last token left (its front end counted once, in its e2e)
        assert nxt.arrival_s == pytest.approx(prev.arrival_s + prev.e2e_s - prev.front_end_s, abs=1e-9)
        assert nxt.prefill_queue_s == pytest.approx(0.0, abs=1e-12)
    # no cap: every request goes at t = 0 and they share steps (one prefill step, batched decodes)
    open_loop = simulate_disagg_requests(reqs, DisaggConfig(prefill=cfg, decode=cfg))
    assert all(r.arrival_s == 0.0 for r in open_loop.requests) and open_loop.duration_s < b.duration_s / 2


KW = dict(
    model=MODEL,
    device="h100_sxm",
    serving_mode="disagg",
    num_prompts=24,
    request_rate=float("inf"),
    max_concurrency=8,
    input_length=512,
    output_length=32,
)


@pytest.mark.slow
def test_bench_serve_disagg_pools_and_mtp_in_the_decode_pool():
    plain = bench_serve(**KW, decode_workers=2, decode_layout="tp=2")
    assert plain.summary.completed == 24 and plain.config.parallel.tp == 2
    assert any("memory, decode pool (TP2" in a for a in plain.assumptions)
    spec = bench_serve(
        **KW,
        decode_workers=2,
        decode_layout={"tp": 2},
        spec_acceptance=0.8,
        speculative_config={"method": "eagle", "num_speculative_tokens": 2},
    )
    assert spec.config.speculative is not None and spec.summary.tpot.mean_ms < plain.summary.tpot.mean_ms
    with pytest.raises(SimcastInputError, match="allowed keys"):
        bench_serve(**KW, decode_layout="tpx=2")


def test_memory_check_refuses_the_over_full_pool():
    # Llama-3.1-70B in bf16 (~131 GiB of weights) on one 80 GB H100: the decode pool does not fit
    kw = {**KW, "model": "meta-llama/Llama-3.1-70B", "prefill_layout": "tp=4"}
    with pytest.raises(SimcastInputError, match="decode pool .* DOES NOT FIT") as e:
        bench_serve(**kw, decode_layout="tp=1")
    assert e.value.field == "--decode-layout"


@pytest.mark.slow
def test_cli_exit_2_and_serve_config_fits_false(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "simcast",
            "bench-serve",
            "--model",
            "meta-llama/Llama-3.1-70B",
            "--device",
            "h100_sxm",
            "--serving-mode",
            "disagg",
            "--prefill-layout",
            "tp=4",
            "--num-prompts",
            "8",
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "DOES NOT FIT" in p.stderr
    y = tmp_path / "svc.yaml"
    y.write_text(
        "model: meta-llama/Llama-3.1-70B\ndevice: h100_sxm\nworkload: {input_length: 1024, output_length: 64}\n"
        "parallel_config: {tp_size: 4}\nserving_mode: disagg\nprefill: {tp_size: 4}\n"
        "decode: {tp_size: 1, kv_cache_dtype: fp8}\n"
    )
    p = subprocess.run(
        [sys.executable, "-m", "simcast", "serve-config", str(y), "--json"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)
    assert row["fits"] is False and row["memory"]["prefill"]["fits"] and not row["memory"]["decode"]["fits"]


def test_pool_layout_takes_vllms_expert_parallel_switch():
    # Dynamo's vLLM recipes run each pool as --data-parallel-size N --enable-expert-parallel
    from simcast.api.bench import BenchOptions
    from simcast.api.bench_disagg import pool_options

    o = BenchOptions(
        model="deepseek-ai/DeepSeek-V3",
        device="h100_sxm",
        serving_mode="disagg",
        decode_layout="tp=1,dp=16,enable_expert_parallel=true",
    )
    po = pool_options(o, "decode")
    assert (po.tp, po.dp, po.enable_expert_parallel) == (1, 16, True)
