"""The engines' attention-DP / EP spellings on simulate and bench-serve (issue 26): each maps to the layout
simcast costs (hand-worked ParallelSpecs), and a dense model refuses them."""

import pytest

from simcast.api.moe_options import MoELayoutOptions, moe_parallel
from simcast.core.errors import SimcastInputError
from simcast.core.specs import ParallelSpec
from simcast.inputs.loaders import load_model


@pytest.fixture(scope="module")
def ds():
    return load_model("deepseek-ai/DeepSeek-V3")


def test_sglang_dp_attention_ep8(ds):
    """SGLang --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8 = simcast --tp 1 --dp 8 ... --ep 8:
    one MoE group (moe_dp 1) of 8 EP ranks over the 8 attention-DP ranks."""
    par = moe_parallel(MoELayoutOptions(ep=8, dp_attention=True), ds, tp=1, pp=1, dp=8)
    assert par == ParallelSpec(tp=1, dp=8, ep=8, moe_dp=1, dp_attention=True)
    assert par.moe_tp == 1


def test_vllm_enable_expert_parallel(ds):
    """vLLM --tensor-parallel-size 1 --data-parallel-size 16 --enable-expert-parallel: EP16 over 16 ranks,
    attention-DP implied; at dp 1 (TP8 + EP) EP8 inside the one engine, no attention-DP."""
    par = moe_parallel(MoELayoutOptions(enable_expert_parallel=True), ds, tp=1, pp=1, dp=16)
    assert (par.ep, par.moe_dp, par.moe_tp, par.dp_attention) == (16, 1, 1, True)
    par1 = moe_parallel(MoELayoutOptions(enable_expert_parallel=True), ds, tp=8, pp=1, dp=1)
    assert (par1.ep, par1.moe_tp, par1.dp_attention) == (8, 1, False)


def test_replicas_by_default(ds):
    """Without attention-DP, bench-serve's --dp replicas each hold their own experts (moe_dp = dp)."""
    par = moe_parallel(MoELayoutOptions(ep=8), ds, tp=8, pp=1, dp=4)
    assert (par.ep, par.moe_dp, par.moe_tp, par.dp_attention) == (8, 4, 1, False)


def test_refusals(ds):
    with pytest.raises(SimcastInputError, match="enable-dp-attention"):
        moe_parallel(MoELayoutOptions(dp_attention=True), ds, tp=8, pp=1, dp=1)
    with pytest.raises(SimcastInputError, match="--ep"):
        moe_parallel(MoELayoutOptions(ep=16), ds, tp=8, pp=1, dp=2)  # replicas: ep must divide each replica's 8
    with pytest.raises(SimcastInputError, match="no experts"):
        moe_parallel(MoELayoutOptions(ep=2), load_model("Qwen/Qwen3-8B"), tp=2, pp=1, dp=1)
