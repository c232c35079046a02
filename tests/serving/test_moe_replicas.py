"""Replicas that share nothing cost nothing extra (issue 26): an MoE model's independent replicas (each with
its own experts, ``moe_dp == dp``) give the per-device numbers of one replica at every replica count; only a
layout whose MoE group spans replicas (attention-DP) issues a cross-replica collective."""

import pytest

from simcast.core.moe_layout import moe_comm_mode, replicas_share_nothing, spans_replicas
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.steady.model import ServingConfig, Workload, estimate_serving


@pytest.mark.parametrize(
    "par,mode",
    [
        (ParallelSpec(tp=8), "all_reduce"),
        (ParallelSpec(tp=8, dp=4, moe_dp=4), "all_reduce"),  # replicas: each its own TP8 MoE
        (ParallelSpec(tp=8, dp=4, ep=8, moe_dp=4), "all_reduce"),  # replicas with EP inside each (vLLM EP = TP)
        (ParallelSpec(tp=1, dp=2, moe_dp=2), ""),  # TP1 replicas: nothing to reduce or exchange
        (ParallelSpec(tp=1, dp=8, ep=8), "all_to_all"),  # attention-DP + EP: the EP group spans the replicas
        (ParallelSpec(tp=8, dp=2), "all_gather"),  # MoE-TP16 over both replicas' tokens
        (ParallelSpec(tp=1, dp=8, ep=8, dp_attention=True), "all_to_all"),
    ],
)
def test_comm_mode_by_layout(par, mode):
    assert moe_comm_mode(par) == mode
    assert replicas_share_nothing(par) == (par.dp > 1 and par.moe_dp == par.dp)
    assert spans_replicas(par) == (par.dp > 1 and par.moe_dp < par.dp)


@pytest.fixture(scope="module")
def qwen_tp2():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-30B-A3B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=2),
            engine="sglang",
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=32,
    )


@pytest.mark.slow
@pytest.mark.parametrize("ep", [1, 2])
def test_per_device_numbers_invariant_under_replica_count(qwen_tp2, ep):
    """TP2 replicas (EP inside each or not) on 2, 4, 8 and 16 GPUs: token/s/device, TPOT and both TTFTs equal
    the single replica's; the total throughput scales with the replicas."""
    one = estimate_serving(qwen_tp2.redeployed(parallel=ParallelSpec(tp=2, ep=ep)))
    for dp in (2, 4, 8):
        par = ParallelSpec(tp=2, dp=dp, ep=ep, moe_dp=dp)
        r = estimate_serving(qwen_tp2.redeployed(parallel=par))
        assert r.tokens_per_s_per_device == pytest.approx(one.tokens_per_s_per_device, rel=1e-12)
        assert r.tpot_s == pytest.approx(one.tpot_s, rel=1e-12)
        assert r.ttft_idle_s == pytest.approx(one.ttft_idle_s, rel=1e-12)
        assert r.tokens_per_s == pytest.approx(dp * one.tokens_per_s, rel=1e-12)
