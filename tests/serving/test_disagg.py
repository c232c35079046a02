"""Disaggregated prefill/decode (serving/disagg/steady.py, kv_transfer.py, disagg_search.py): consistency checks.

Hand-computed expectations: the M/D/1 wait, the KV bytes of a request, the transfer times; invariants:
an infinitely fast link with matched pools is two independent engines, TTFT is its decomposition, the
verdict's ``g x s`` is the per-device ratio and names the side that wins.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from simcast.core.device import LinkSpec
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.config import ServingConfig, Workload
from simcast.serving.disagg.search import evaluate_pools, fewest_agg, fewest_disagg, mechanism, search_disagg
from simcast.serving.disagg.steady import DisaggConfig, estimate_disagg, md1_wait_s
from simcast.serving.search.layouts import SearchSpace, search
from simcast.serving.steady.model import coster_for, estimate_serving, step_wait_cycles
from simcast.serving.step import mixed_batch

MODEL = "Qwen/Qwen3-0.6B"  # 28 layers, 8 KV heads x head_dim 128, bf16


def _cfg(isl=1024, osl=128, batch=32, device="h100_sxm", tp=1, per_node=None, runtime="vllm") -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(
            model=load_model(MODEL), device=load_device(device, per_node), parallel=ParallelSpec(tp=tp), engine=runtime
        ),
        workload=Workload(input_length=isl, output_length=osl),
        batch_size=batch,
    )


def _infinite_link(cfg: ServingConfig) -> ServingConfig:
    fast = LinkSpec(name="ideal", bw_bytes_per_s=1e30, latency_s=0.0, efficiency=1.0)
    links = replace(cfg.device.links, intra_node=fast, inter_node=fast)
    return cfg.redeployed(device=replace(cfg.device, links=links))


def test_md1_wait_hand_computed():
    assert md1_wait_s(5.0, 10.0) == pytest.approx(0.5 / (2 * 10 * 0.5))  # rho 0.5: 50 ms
    assert md1_wait_s(0.0, 10.0) == 0.0
    assert math.isinf(md1_wait_s(10.0, 10.0))


def test_infinite_link_matched_pools_are_two_independent_engines():
    base = _infinite_link(_cfg())
    r = estimate_disagg(DisaggConfig(prefill=base, decode=base))
    assert r.transfer.exposed_s == pytest.approx(0.0, abs=1e-12)
    # the prefill pool is a prompt-only engine: budget 8192 // ISL 1024 = 8 prompts per step
    coster = coster_for(base)
    cycle = coster.cycle_s(mixed_batch(0, 0, 8, 1024, 0), 1)
    assert r.prefill.prompts_per_step == 8
    assert r.prefill.prompts_per_s == pytest.approx(8 / cycle)
    assert r.prefill.prefill_s == pytest.approx(cycle)
    # the decode pool is the aggregated engine's decode-only step at the same concurrency
    agg = estimate_serving(base)
    assert agg.config.batch_size == 32
    assert r.tpot_s == pytest.approx(agg.decode_cycle_s)
    assert r.decode.requests_per_s == pytest.approx(32 / (127 * r.tpot_s))
    # matched: the pools' rates meet at the balanced ratio; 1P1D carries the slower one
    mu_p, mu_d = r.prefill.prompts_per_s, r.decode.requests_per_s
    assert r.balanced_decode_per_prefill == pytest.approx(mu_p / mu_d)
    assert r.tokens_per_s == pytest.approx(min(mu_p, mu_d) * 128)
    assert r.tokens_per_s_per_device == pytest.approx(r.tokens_per_s / 2)
    # a decode pool of y replicas at the balanced ratio keeps the prefill pool at utilisation 1 - 0
    y = math.floor(r.balanced_decode_per_prefill)
    if y >= 1:
        ry = estimate_disagg(DisaggConfig(prefill=base, decode=base, decode_replicas=y))
        assert ry.prefill_utilisation == pytest.approx(y * mu_d / mu_p)
        assert ry.prefill_utilisation <= 1


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_ttft_decomposition_and_transfer_by_hand():
    # one device per node: the pools sit on separate nodes, the KV crosses the profile's inter-node link
    pre = _cfg(per_node=1)
    dec = replace(pre, batch_size=16)
    cfg = DisaggConfig(prefill=pre, decode=dec, prefill_replicas=1, decode_replicas=2, request_rate_per_s=3.0)
    r = estimate_disagg(cfg)
    assert r.ttft_s == pytest.approx(r.front_end_s + r.queue_s + r.prefill_s + r.transfer.exposed_s + r.admission_s)
    # 3 prompts/s on a rank that serves a one-prompt step in a few ms: steps of one prompt (M/D/1 at 1 / prefill)
    assert r.prefill_step_prompts == 1 and r.prefill_s < r.prefill.prefill_s
    # queue = the prefill rank's M/D/1 wait + its NICs' (3 transfers/s of data_s each: rho = 3 data_s)
    d = r.transfer.data_s
    nic = 3.0 * d * d / (2 * (1 - 3.0 * d))
    assert r.queue_s == pytest.approx(md1_wait_s(3.0, 1 / r.prefill_s) + nic)
    assert r.admission_s == pytest.approx((step_wait_cycles(dec.policy) + 1) * r.tpot_s)
    assert r.e2e_latency_s == pytest.approx(r.ttft_s + 127 * r.tpot_s)
    # KV of 1024 tokens: 28 layers x 2 (K, V) x 8 heads x 128 x 2 B = 114688 B per token, all on one rank at tp 1
    kv = 1024 * 28 * 2 * 8 * 128 * 2
    assert r.transfer.bytes_per_request == kv and r.transfer.bytes_per_rank == kv
    link = pre.device.links.inter_node
    whole = link.latency_s + kv / (link.bw_bytes_per_s * link.efficiency)
    assert r.transfer.whole_s == pytest.approx(whole) and r.transfer.exposed_s == pytest.approx(whole)
    # at a rate below its capacity the decode pool runs at the least concurrency that carries it
    assert r.decode.concurrency <= 16 and 2 * r.decode.requests_per_s >= 3.0
    lay = estimate_disagg(replace(cfg, kv_transfer="per-layer"))
    data = kv / (link.bw_bytes_per_s * link.efficiency)
    p = lay.prefill_s
    assert lay.transfer.exposed_s == pytest.approx(link.latency_s + max(data / 28, data - p * 27 / 28))
    assert lay.transfer.exposed_s < r.transfer.exposed_s
    # tp 2 on the decode side halves what each decode rank receives; the tp 1 sender still sends it all
    r2 = estimate_disagg(replace(cfg, decode=dec.redeployed(parallel=ParallelSpec(tp=2))))
    assert r2.transfer.bytes_per_request == kv and r2.transfer.bytes_per_rank == kv


def test_prefill_saturation_is_reported_not_hidden():
    base = _cfg()
    r = estimate_disagg(DisaggConfig(prefill=base, decode=base, request_rate_per_s=1e4))
    assert r.saturated == "decode"
    slow = replace(base, workload=Workload(input_length=8000, output_length=2))
    r2 = estimate_disagg(DisaggConfig(prefill=slow, decode=replace(slow, batch_size=256), decode_replicas=4))
    assert r2.saturated == "prefill" and math.isinf(r2.ttft_s)
    assert r2.tokens_per_s == pytest.approx(r2.prefill.prompts_per_s * 2)  # served at the prefill pool's rate


@pytest.mark.parametrize(("isl", "osl"), [(4096, 64), (256, 1024)])
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_agg_disagg_ranking_is_explained_by_the_mechanism_line(isl, osl):
    """A small MoE (Qwen3-30B-A3B on 8 x H200): the verdict's g x s is the per-device ratio, and the line
    names the mechanism of the side that wins."""
    base = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-30B-A3B"),
            device=load_device("h200_sxm"),
            parallel=ParallelSpec(),
            engine="sglang",
        ),
        workload=Workload(input_length=isl, output_length=osl),
        batch_size=1,
    )
    space = SearchSpace(tp_sizes=(1, 2), pp_sizes=(1,), num_devices=8, ep_sizes=(1, 2))
    agg, _ = search(base, space)
    pools = evaluate_pools(base, space)
    dis, _ = search_disagg(pools, space)
    a, d = agg[0].result, dis[0].result
    line, g, s = mechanism(a, d)
    assert g * s == pytest.approx(d.tokens_per_s_per_device / a.tokens_per_s_per_device)
    if d.tokens_per_s_per_device > a.tokens_per_s_per_device:
        assert line.startswith("disaggregated wins: prefill interference removed") and g > 1
    else:
        assert line.startswith("aggregated wins: transfer cost and pool imbalance")
    # the decode pool never sees prompt chunks: its TPOT is below the aggregated one at the same layout's load
    assert d.tpot_s < a.tpot_s or a.prefill_interference_s == pytest.approx(0.0, abs=1e-9)
    # fewest devices for a rate: monotone in the rate, and the deployment carries it under no limits
    rate = 0.5 * a.tokens_per_s / osl
    fa = fewest_agg(agg, rate, 8)
    fd = fewest_disagg(pools, space, rate)
    assert fa is not None and fd is not None
    assert fd.tokens_per_s >= rate * osl * (1 - 1e-9) and not fd.saturated
    fa2 = fewest_agg(agg, 2 * rate, 8)
    assert fa2 is None or fa2[1] >= fa[1]
