"""Finite runs (every prompt queued at t = 0) beside the steady state, the steady window of a run,
standard workloads in optimize, and MoE replicas as the default layout."""

import math

import pytest

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.bench_window import steady_window
from simcast.serving.request_level.finite import finite_run
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.search.layouts import SearchSpace
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, estimate_serving, kv_capacity_tokens


@pytest.fixture(scope="module")
def cfg():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"), device=load_device("h100_sxm"), parallel=ParallelSpec(), engine="vllm"
        ),
        workload=Workload(input_length=256, output_length=64),
        batch_size=1,
        max_num_seqs=32,
    )


def test_long_burst_reaches_the_closed_loop_steady_state(cfg):
    """All prompts at once with max_num_seqs 32: the engine runs 32 at a time, so the window's throughput
    is the steady state's at concurrency 32 (within 5%), and the whole run's is below it (ramp and drain)."""
    run = finite_run(cfg, 1200)
    st = estimate_serving(ServingConfig(**{**cfg.__dict__, "batch_size": 32}))
    assert run.steady.reached
    assert run.steady.output_tokens_per_s == pytest.approx(st.tokens_per_s, rel=0.05)
    assert run.output_tokens_per_s < run.steady.output_tokens_per_s * 1.02
    assert run.max_running == 32 and run.preemptions == 0


def test_a_short_run_says_it_reached_no_steady_state(cfg):
    run = finite_run(cfg, 40)
    assert not run.steady.reached and "steady state not reached" in run.steady.describe()


def test_window_is_first_completion_to_last_admission(cfg):
    reqs = make_requests(num_prompts=300, rate=math.inf, input_len=256, output_len=64, seed=5)
    res = simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=kv_capacity_tokens(cfg))
    w = steady_window(res)
    first_done = min(r.arrival_s + r.e2e_s - r.front_end_s for r in res.requests)
    assert w.start_s == pytest.approx(first_done)
    assert w.end_s == pytest.approx(max(r.admitted_s for r in res.requests))
    # tokens made in the window are the steps ending in it: at most one per running request per step
    assert 0 < w.output_tokens_per_s < float("inf")


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_optimize_with_a_dataset_and_a_finite_run(capsys):
    rc = main(
        [
            "optimize",
            "--device",
            "h100_sxm",
            "--num-devices",
            "2",
            "--tp-sizes",
            "1",
            "2",
            "--dataset-name",
            "sharegpt",
            "--num-prompts",
            "200",
            "--top",
            "2",
            "Qwen/Qwen3-0.6B",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "dataset sharegpt (mean ISL 221 / OSL 199)" in out
    assert "finite runs: 200 prompts sent at once" in out and "whole-run token/s includes ramp-up and drain" in out
    rc = main(["optimize", "--device", "h100_sxm", "--num-devices", "1", "--dataset-name", "nope", "Qwen/Qwen3-0.6B"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "nope" in err[0]
    rc = main(["optimize", "--device", "h100_sxm", "--num-devices", "1", "--input-length", "8", "Qwen/Qwen3-0.6B"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--input-length/--output-length" in err[0]


def test_moe_tp_sizes_on_more_devices_mean_replicas():
    space = SearchSpace(tp_sizes=(2, 4), pp_sizes=(1,), num_devices=8, moe_replicas=True)
    pars = {(p.tp, p.dp, p.ep, p.moe_tp, p.moe_dp) for p in space.parallel_specs()}
    # each TP group is a replica with its own experts: MoE-TP = TP, MoE-DP = DP
    assert pars == {(2, 4, 1, 2, 4), (4, 2, 1, 4, 2)}
    shared = SearchSpace(tp_sizes=(2,), pp_sizes=(1,), num_devices=8)  # the RFC's rule with moe_dp 1
    assert {(p.moe_tp, p.moe_dp) for p in shared.parallel_specs()} == {(8, 1)}


def test_a_ttft_limit_on_a_long_prompt_picks_pp(capsys):
    """One 32K-token prompt: chunks pipelined through 4 stages bring TTFT under a limit PP1 misses."""
    args = ["optimize", "--device", "h100_sxm", "--num-devices", "4", "--tp-sizes", "1", "--pp-sizes", "1", "4"]
    args += ["--input-length", "32768", "--output-length", "16", "--batch-sizes", "1", "--json"]
    assert main([*args, "meta-llama/Llama-3.1-8B"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["rows"]
    idle = {r["pp"]: r["ttft_idle_ms"] for r in rows}
    assert idle[4] < 0.6 * idle[1]  # 4 chunks of 8192 pipelined through 4 stages
    limit = (idle[1] + idle[4]) / 2
    assert main([*args[:-1], "--ttft-limit", f"{limit:.1f}", "--json", "meta-llama/Llama-3.1-8B"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["pp"] for r in doc["rows"] if r["meets_limits"]} == {4}
