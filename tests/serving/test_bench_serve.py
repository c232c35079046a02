"""Request-level simulator: invariants and consistency with the steady-state estimate."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from simcast.cli.main import main
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.simulate import make_requests, simulate_requests
from simcast.serving.steady.model import (
    ServingConfig,
    Workload,
    coster_for,
    estimate_serving,
    kv_capacity_tokens,
)


@pytest.fixture(scope="module")
def cfg():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(),
            engine="vllm",
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=1,
    )


def run(cfg, reqs, **kw):
    cap = kw.pop("kv_tokens", kv_capacity_tokens(cfg))
    return simulate_requests(reqs, coster_for(cfg), kv_tokens_per_replica=cap, **kw), cap


@pytest.mark.slow
@pytest.mark.parametrize("b", [16, 64])
def test_closed_loop_matches_steady_state_within_5pct(cfg, b):
    reqs = make_requests(num_prompts=12 * b, rate=math.inf, input_len=1024, output_len=128, range_ratio=0.5, seed=1)
    r, _ = run(cfg, reqs, max_concurrency=b)
    st = estimate_serving(replace(cfg, batch_size=b))
    tpot = np.mean([(x.e2e_s - x.ttft_s) / (x.output_len - 1) for x in r.requests])
    tps = sum(x.output_len for x in r.requests) / r.duration_s
    assert tpot == pytest.approx(st.tpot_s, rel=0.05)
    assert tps == pytest.approx(st.tokens_per_s, rel=0.05)


def test_max_concurrency_sends_when_a_slot_frees(cfg):
    """Fixed lengths, rate inf, --max-concurrency 4: requests go in waves of 4; wave k is sent when
    wave k-1 finishes (all replicas idle at once), so every TTFT is the first wave's (no client-side
    wait counted, as vllm bench serve times from the send) and wave k is sent at k x one wave's engine
    time (E2E less the serving path, which is added to each request's TTFT and E2E)."""
    reqs = make_requests(num_prompts=12, rate=math.inf, input_len=512, output_len=16)
    r, _ = run(cfg, reqs, max_concurrency=4)
    first = r.requests[0]
    assert all(x.ttft_s == pytest.approx(first.ttft_s) for x in r.requests)
    sent = sorted(x.arrival_s for x in r.requests)
    engine_e2e = first.e2e_s - first.front_end_s  # the serving path is added to E2E, not to the engine's time
    assert first.front_end_s > 0
    assert sent == pytest.approx([k * engine_e2e for k in (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2)])


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_invariants_under_overload_with_preemption(cfg):
    reqs = make_requests(num_prompts=300, rate=math.inf, input_len=1024, output_len=128, range_ratio=0.5, seed=2)
    kv = 40 * (cfg.workload.input_length + cfg.workload.output_length)  # a small cache: forces preemption by recompute
    r, cap = run(cfg, reqs, kv_tokens=kv)
    assert len(r.requests) == len(reqs)  # no request lost
    assert sorted(x.output_len for x in r.requests) == sorted(q.output_len for q in reqs)  # generated == requested
    assert all(s.kv_used_blocks <= s.kv_total_blocks for s in r.samples)
    assert sum(x.preemptions for x in r.requests) > 0
    lone = estimate_serving(
        replace(cfg, workload=Workload(input_length=min(q.input_len for q in reqs), output_length=1))
    )
    assert min(x.ttft_s for x in r.requests) >= 0.99 * lone.ttft_idle_s  # TTFT >= the prompt's own prefill


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_throughput_never_exceeds_offered_load(cfg):
    reqs = make_requests(num_prompts=400, rate=5.0, input_len=512, output_len=64, seed=3)
    r, _ = run(cfg, reqs)
    assert len(r.requests) / r.duration_s <= 5.0 * 1.001
    assert max(q.arrival_s for q in reqs) == pytest.approx(399 / 400 * 400 / 5.0, rel=0.02)


def test_dp_router_spreads_requests(cfg):
    reqs = make_requests(num_prompts=200, rate=50.0, input_len=256, output_len=32, seed=4)
    for router in ("round_robin", "least_loaded"):
        r, _ = run(cfg, reqs, dp=2, router=router)
        counts = np.bincount([x.replica for x in r.requests], minlength=2)
        assert counts.sum() == 200 and min(counts) >= 80


def test_cli_prints_vllm_labels_and_saves_keys(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(
        [
            "bench-serve",
            "--model",
            "Qwen/Qwen3-0.6B",
            "--device",
            "h100_sxm",
            "--num-prompts",
            "50",
            "--request-rate",
            "10",
            "--random-input-len",
            "256",
            "--random-output-len",
            "32",
            "--save-result",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0
    for label in (
        "Successful requests:",
        "Request throughput (req/s):",
        "Output token throughput (tok/s):",
        "Mean TTFT (ms):",
        "P99 TPOT (ms):",
        "Median ITL (ms):",
        "Mean E2EL (ms):",
    ):
        assert label in text
    d = json.loads(out.read_text())
    for k in (
        "duration",
        "completed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "mean_ttft_ms",
        "median_tpot_ms",
        "p99_itl_ms",
    ):
        assert k in d
    assert d["completed"] == 50 and d["total_output_tokens"] == 50 * 32
    assert (tmp_path / "r.requests.csv").read_text().count("\n") == 51
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_len,output_len\n0,100,5\n0.5,200,7\n")
    assert main(["bench-serve", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--dataset", str(trace)]) == 0
    assert "Total generated tokens:                 12" in capsys.readouterr().out


def test_plot_series_and_figure(cfg, tmp_path):
    """--plot: the state series sums replicas and stays within capacity; the figure has the four panels."""
    from simcast.render.bench_plots import per_request_ms, plot_bench, state_series

    reqs = make_requests(num_prompts=200, rate=math.inf, input_len=512, output_len=64, seed=4)
    small = 30 * (cfg.workload.input_length + cfg.workload.output_length)  # small cache: a queue forms
    r, _ = run(cfg, reqs, dp=2, kv_tokens=small)
    s = state_series(r)
    assert np.all(np.diff(s.time_s) > 0) and s.time_s[-1] == pytest.approx(max(x.time_s for x in r.samples))
    assert s.waiting.max() > 0 and s.running[-1] == 0 and s.waiting[-1] == 0  # a queue formed, then drained
    assert np.all(s.kv_used_frac <= 1.0) and s.kv_used_frac.max() > 0.5
    assert s.running.max() <= 2 * max(x.running for x in r.samples)
    ttft, tpot = per_request_ms(r)
    assert ttft.size == 200 and tpot.size == 200
    fig = plot_bench(r, title="t")
    labels = sorted((ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes)
    assert labels == [
        ("TPOT (ms)", "fraction of requests"),
        ("TTFT (ms)", "fraction of requests"),
        ("time (s)", "KV cache used (%)"),
        ("time (s)", "requests"),
    ]
    assert all(ax.get_title() and ax.get_legend() for ax in fig.axes)


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_cli_plot(tmp_path):
    out = tmp_path / "bench.png"  # the folder must exist: output paths are checked before the run
    assert (
        main(
            [
                "bench-serve",
                "--model",
                "Qwen/Qwen3-0.6B",
                "--device",
                "h100_sxm",
                "--num-prompts",
                "50",
                "--random-input-len",
                "128",
                "--random-output-len",
                "16",
                "--plot",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    with pytest.raises(SystemExit) as e:
        main(["bench-serve", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--plot", str(tmp_path / "b.jpg")])
    assert e.value.code == 2


@pytest.mark.slow
@pytest.mark.parametrize("b", [16, 64])
def test_pp2_closed_loop_matches_steady_state_within_5pct(cfg, b):
    """PP = 2: the step's requests form two microbatches in flight (prompt chunks spread over
    them, not repeated in both), so the request simulator agrees with the steady state."""
    pp = cfg.redeployed(parallel=ParallelSpec(tp=1, pp=2))
    reqs = make_requests(num_prompts=12 * b, rate=math.inf, input_len=1024, output_len=128, range_ratio=0.5, seed=1)
    r, _ = run(pp, reqs, max_concurrency=b)
    st = estimate_serving(replace(pp, batch_size=b))
    tpot = np.mean([(x.e2e_s - x.ttft_s) / (x.output_len - 1) for x in r.requests])
    tps = sum(x.output_len for x in r.requests) / r.duration_s
    assert tpot == pytest.approx(st.tpot_s, rel=0.05)
    assert tps == pytest.approx(st.tokens_per_s, rel=0.05)


def test_microbatch_period_hand_computed():
    """Two different microbatches on two stages, CPU 1 ms each, not overlapped: trips 1+3+1 = 5 and
    1+1+2 = 4 ms (mean 4.5); stage sums 3+1 = 4 and 1+2 = 3 ms; CPU 2 ms -> 4.5 ms. Equal ones
    reduce to step_cycle_s."""
    from simcast.serving.step import microbatch_period_s, step_cycle_s

    ms = 1e-3
    got = microbatch_period_s([(3 * ms, 1 * ms), (1 * ms, 2 * ms)], [1 * ms, 1 * ms], False)
    assert got == pytest.approx(4.5 * ms)
    same = microbatch_period_s([(3 * ms, 1 * ms)] * 2, [1 * ms] * 2, False)
    assert same == pytest.approx(step_cycle_s((3 * ms, 1 * ms), 1 * ms, 2, False))


@pytest.mark.parametrize("pp", [2, 4])
def test_pp_ttft_at_light_load_is_never_below_the_idle_pass(pp):
    """With PP, a prompt's first token leaves the last stage no earlier than its own pass through every
    stage (its chunks pipelined): at 1 req/s no TTFT is below the idle single-prompt TTFT."""
    cfg = ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(pp=pp),
            engine="vllm",
        ),
        workload=Workload(input_length=2048, output_length=64),
        batch_size=1,
    )
    idle = estimate_serving(cfg).ttft_idle_s
    reqs = make_requests(num_prompts=60, rate=20.0, input_len=2048, output_len=64, seed=2)
    r, _ = run(cfg, reqs)
    assert min(x.ttft_s for x in r.requests) >= idle * 0.999
