"""Disaggregated serving request by request (serving/disagg/requests.py, the scheduler's transferred KV).

Hand-computed expectations on an idle deployment (one request: its prefill is one idle prompt step, its
transfer the link formula, its decode admission one decode step), the TTFT decomposition for every request,
the decode pool's admission of transferred KV, and agreement with the steady state in TPOT and throughput.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest

from simcast.core.device import LinkSpec
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.config import ServingConfig, Workload
from simcast.serving.disagg.kv_transfer import kv_transfer
from simcast.serving.disagg.requests import simulate_disagg_requests
from simcast.serving.disagg.steady import DisaggConfig, estimate_disagg
from simcast.serving.request_level.scheduler import Replica, Req, RequestSpec, form_step
from simcast.serving.request_level.simulate import make_requests
from simcast.serving.steady.model import coster_for
from simcast.serving.step import mixed_batch

MODEL = "Qwen/Qwen3-0.6B"


def _cfg(isl=1024, osl=64, batch=32, per_node=None, runtime="vllm") -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(
            model=load_model(MODEL),
            device=load_device("h100_sxm", per_node),
            parallel=ParallelSpec(tp=1),
            engine=runtime,
        ),
        workload=Workload(input_length=isl, output_length=osl),
        batch_size=batch,
    )


def test_decode_pool_admits_transferred_kv_without_computing_it():
    pol = _cfg().policy
    blk = pol.kv_block_tokens
    rep = Replica(rid=0, kv_blocks=1000)
    q = Req(idx=0, spec=RequestSpec(arrival_s=0.0, input_len=1000, output_len=8, kv_ready_tokens=999))
    rep.waiting.append(q)
    decodes, chunks = form_step(rep, pol, blk, 8192, 256, prefill_first=False, cutoff_s=0.0)
    # one token (the last prompt position) is scheduled; blocks for the whole 1000-token prompt are taken
    assert decodes == [] and chunks == [(q, 1)]
    assert q.computed == 999 and q.blocks == -(-1000 // blk) and rep.used_blocks == q.blocks
    # after a preemption the request recomputes its prompt locally (the transfer happened once)
    q.preemptions, q.computed, q.blocks, rep.used_blocks = 1, 0, 0, 0
    rep.running.clear()
    rep.waiting.append(q)
    _, chunks = form_step(rep, pol, blk, 8192, 256, prefill_first=False, cutoff_s=0.0)
    assert chunks == [(q, 1000)]


def test_one_request_on_an_idle_deployment_by_hand():
    pre = _cfg(per_node=1)  # pools on separate nodes: the KV crosses the inter-node link
    cfg = DisaggConfig(prefill=pre, decode=pre, request_rate_per_s=1.0)
    b = simulate_disagg_requests([RequestSpec(arrival_s=0.0, input_len=1024, output_len=64)], cfg)
    (r,) = b.requests
    cp = coster_for(pre)
    assert r.prefill_queue_s == 0.0
    assert r.prefill_s == pytest.approx(cp.period_s([mixed_batch(0, 0, 1, 1024, 0)]))
    assert r.transfer_s == pytest.approx(kv_transfer(pre, pre, "whole", r.prefill_s, together=2).exposed_s)
    # the decode engine runs the last prompt position at context 1023 (a one-token chunk; the step-cost key
    # rounds contexts to CTX_ROUND = 64 tokens: 1024), then 62 decodes
    first = cp.period_s([mixed_batch(0, 0, 1, 1, 1024)])
    assert r.decode_admission_s == pytest.approx(first, rel=1e-6)
    assert r.front_end_s == pytest.approx(pre.policy.front_end_time_s(1024))
    assert r.ttft_s == pytest.approx(r.front_end_s + r.prefill_s + r.transfer_s + first)
    assert 0 < r.tpot_s < 2 * first and r.e2e_s == pytest.approx(r.ttft_s + r.decode_s)


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_ttft_is_its_decomposition_and_agrees_with_the_steady_state():
    base = _cfg(isl=1024, osl=128, batch=64)
    cfg = DisaggConfig(prefill=base, decode=base, request_rate_per_s=8.0)
    steady = estimate_disagg(cfg)
    reqs = make_requests(num_prompts=800, rate=8.0, input_len=1024, output_len=128, seed=1)
    b = simulate_disagg_requests(reqs, cfg)
    assert len(b.requests) == 800
    for r in b.requests:
        assert r.ttft_s == pytest.approx(
            r.front_end_s + r.prefill_queue_s + r.prefill_s + r.transfer_s + r.decode_admission_s
        )
        assert min(r.prefill_queue_s, r.prefill_s, r.transfer_s, r.decode_admission_s) >= 0
    # open loop below both pools' capacity: everything offered is served, at the steady state's TPOT
    assert b.output_tokens_per_s == pytest.approx(steady.tokens_per_s, rel=0.05)
    assert b.percentile_ms("tpot_s", 50) == pytest.approx(steady.tpot_s * 1e3, rel=0.05)


def test_an_infinitely_fast_link_exposes_no_transfer():
    base = _cfg()
    fast = LinkSpec(name="ideal", bw_bytes_per_s=1e30, latency_s=0.0, efficiency=1.0)
    dev = replace(base.device, links=replace(base.device.links, intra_node=fast, inter_node=fast))
    ideal = base.redeployed(device=dev)
    cfg = DisaggConfig(prefill=ideal, decode=ideal)
    reqs = make_requests(num_prompts=50, rate=4.0, input_len=1024, output_len=32, seed=0)
    b = simulate_disagg_requests(reqs, cfg)
    assert max(r.transfer_s for r in b.requests) == pytest.approx(0.0, abs=1e-12)
    slow = simulate_disagg_requests(reqs, DisaggConfig(prefill=_cfg(per_node=1), decode=_cfg(per_node=1)))
    assert min(r.transfer_s for r in slow.requests) > 0


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simcast", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_serve_config_replays_a_disaggregated_service(tmp_path):
    y = tmp_path / "svc.yaml"
    y.write_text(
        "model: Qwen/Qwen3-0.6B\ndevice: h100_sxm\nruntime: vllm\n"
        "workload: {input_length: 1024, output_length: 64, batch_size: 32}\n"
        "parallel_config: {tp_size: 1}\nserving_mode: disagg\nrequest_rate: 5\n"
        "prefill: {replicas: 1, tp_size: 1}\ndecode: {replicas: 1, tp_size: 1}\n"
    )
    p = _run("serve-config", str(y), "--num-prompts", "100")
    assert p.returncode == 0, p.stderr
    assert "request level (100 requests, 1P1D)" in p.stdout and "decode_admission" in p.stdout
    agg = tmp_path / "agg.yaml"
    agg.write_text(
        "model: Qwen/Qwen3-0.6B\ndevice: h100_sxm\nparallel_config: {tp_size: 1}\n"
        "workload: {input_length: 128, output_length: 8, batch_size: 4}\n"
    )
    p = _run("serve-config", str(agg), "--num-prompts", "10")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--num-prompts" in p.stderr


@pytest.mark.slow
@pytest.mark.parametrize("rate", [8.0, 40.0, 120.0])
def test_steady_ttft_follows_the_request_level_step_size(rate):
    """The steady state's prefill steps carry what has arrived (one prompt at light load), as the engine's
    scheduler does: its mean TTFT and each term agree with the request-level simulator's means within 10 %
    below saturation (Qwen3-0.6B 1024/128, 1P1D vLLM; measured 0.5 %, 0.0 %, 6 %)."""
    base = _cfg(isl=1024, osl=128, batch=1)
    cfg = DisaggConfig(prefill=base, decode=replace(base, batch_size=128), request_rate_per_s=rate)
    steady = estimate_disagg(cfg)
    b = simulate_disagg_requests(make_requests(num_prompts=800, rate=rate, input_len=1024, output_len=128, seed=1), cfg)

    def mean_ms(field: str) -> float:
        return sum(getattr(r, field) for r in b.requests) / len(b.requests) * 1e3

    assert steady.ttft_s * 1e3 == pytest.approx(mean_ms("ttft_s"), rel=0.10)
    assert (steady.queue_s + steady.prefill_s) * 1e3 == pytest.approx(
        mean_ms("prefill_queue_s") + mean_ms("prefill_s"), rel=0.15
    )
    # the step size grows with the rate, never past a full step
    assert 1 <= steady.prefill_step_prompts <= steady.prefill.prompts_per_step
    if rate <= 40:
        assert steady.prefill_step_prompts == 1


def test_prefill_step_size_by_hand():
    """``PrefillPool.at_rate``: the step size with the lowest M/D/1 wait + prefill (hand-made grid)."""
    from simcast.serving.disagg.steady import PrefillPool, md1_wait_s

    grid = ((1, 100.0, 0.010), (2, 160.0, 0.0125), (4, 200.0, 0.020))  # (k, prompts/s, own prefill s)
    pool = PrefillPool(
        prompts_per_step=4,
        chunks=1,
        chunk_tokens=512,
        step_s=0.02,
        prefill_s=0.02,
        prompts_per_s=200.0,
        memory=None,
        ranks=1,
        step_grid=grid,  # type: ignore[arg-type]
    )
    assert pool.at_rate(10.0) == (1, 0.010, md1_wait_s(10.0, 100.0))  # 10.6 ms vs 12.8 and 20.3
    k, own, wait = pool.at_rate(150.0)  # k=1 saturates (inf); k=2: 12.5 + 46.9 ms; k=4: 20 + 7.5 ms
    assert (k, own) == (4, 0.020) and wait == pytest.approx(0.75 / (2 * 200 * 0.25))
    assert math.isinf(pool.at_rate(250.0)[2])  # above the capacity: full steps, unbounded wait


def test_pd_router_is_the_engines_and_routes_both_pools():
    from simcast.serving.disagg.requests import pd_router_name

    sg = DisaggConfig(prefill=_cfg(runtime="sglang"), decode=_cfg(runtime="sglang"), decode_replicas=2)
    vl = DisaggConfig(prefill=_cfg(), decode=_cfg(), decode_replicas=2)
    assert pd_router_name(sg) == "cache_aware" and pd_router_name(vl) == "round_robin"
    assert pd_router_name(sg, "least_loaded") == "least_loaded"
    # 4 requests at once to 2 decode workers: round-robin alternates them, whatever their timing
    reqs = make_requests(num_prompts=4, rate=math.inf, input_len=256, output_len=8, seed=0)
    b = simulate_disagg_requests(reqs, vl, use_disk_cache=False)
    assert [r.replica for r in b.decode_run.requests] == [0, 1, 0, 1]
    assert any("router round_robin" in str(a.facts) for a in b.assumptions)
    # the same requests behind a router that sends everything to the least loaded decode worker still split them
    b2 = simulate_disagg_requests(reqs, vl, use_disk_cache=False, router="least_loaded")
    assert sorted(r.replica for r in b2.decode_run.requests) == [0, 0, 1, 1]
