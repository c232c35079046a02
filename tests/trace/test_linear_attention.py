"""Gated DeltaNet linear attention (Qwen3-Next): a constant state instead of KV, costs by hand."""

import pytest

from simcast.core.kv import linear_state_bytes
from simcast.core.memory import stage_kv_bytes_for
from simcast.core.params import layer_params, total_params
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.engines.partition import build_pipeline_stage_plan
from simcast.inputs.loaders import load_device, load_model
from simcast.sim.simulate import simulate

NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"


def test_linear_state_by_hand_and_constant_in_context():
    m = load_model(NEXT)
    # conv window (4 - 1) x (2·16·128 + 32·128)/tp in bf16 + (32/tp) heads x 128 x 128 fp32
    assert linear_state_bytes(m, 0, 4) == 3 * (8192 // 4) * 2 + (32 // 4) * 128 * 128 * 4
    assert linear_state_bytes(m, 3, 4) == 0  # layer 3 is full attention
    sd = sharded_dims(m, 4)
    info = build_pipeline_stage_plan(48, 1, "uniform", False).stage_infos[0]
    full_per_token = 12 * 2 * sd.kv_heads * 256 * 2  # 12 full-attention layers, K and V, bf16
    state = 36 * linear_state_bytes(m, 0, 4)
    for tokens in (1, 1000, 100_000):
        assert stage_kv_bytes_for(m, sd, info, 1, tokens) == full_per_token * tokens + state
    assert stage_kv_bytes_for(m, sd, info, 3, 1000) == 3 * stage_kv_bytes_for(m, sd, info, 1, 1000)


def test_qwen3_next_layers_by_hand():
    m = load_model(NEXT)
    h = 2048
    lin, full = layer_params(m, 0), layer_params(m, 3)
    # in_proj_qkvz, in_proj_ba, conv1d, dt_bias + A_log, gated norm, out_proj
    assert lin.attention == h * (2 * 2048 + 2 * 4096) + h * 64 + 8192 * 4 + 64 + 128 + 4096 * h
    # q (+ its gate), k, v, o, q/k norms
    assert full.attention == h * (2 * 16 * 256 + 2 * 2 * 256) + 16 * 256 * h + 2 * 256
    assert lin.expert == 3 * h * 512 and lin.num_experts == 512 and lin.top_k == 10 and lin.shared == 3 * h * 512
    # Qwen3-Next model card (transformers docs/source/en/model_doc/qwen3_next.md): 80B total, 3B activated
    assert total_params(m) / 1e9 == pytest.approx(80, rel=0.01)


@pytest.mark.slow  # traces Qwen3-Next (~10 s)
def test_decode_cost_of_linear_layers_is_independent_of_context():
    m = load_model(NEXT)
    dev = load_device("h100_sxm")

    def ops(ctx):
        spec = SimSpec(model=m, device=dev, parallel=ParallelSpec(tp=4), batch=Batch.decode(2, ctx))
        return {o.op: o for o in simulate(spec).stages[0].ops if o.op.startswith("simcast::")}

    short, long = ops(1000), ops(64000)
    gdn = short["simcast::gated_delta_rule"]
    assert gdn.flops == long["simcast::gated_delta_rule"].flops == pytest.approx(2 * 8 * 7 * 128 * 128)
    assert gdn.bytes == long["simcast::gated_delta_rule"].bytes
    assert long["simcast::attention"].flops > 60 * short["simcast::attention"].flops


@pytest.mark.slow  # traces Qwen3-Next (~10 s)
def test_prefill_gated_delta_rule_by_hand():
    """A 128-token prefill: per token and value head 6·dk·dv + 64·(6·dk + 4·dv) FLOPs (fla's 64-token chunks)."""
    m = load_model(NEXT)
    spec = SimSpec(model=m, device=load_device("h100_sxm"), parallel=ParallelSpec(tp=4), batch=Batch.prefill(1, 128))
    gdn = next(o for o in simulate(spec).stages[0].ops if o.op == "simcast::gated_delta_rule")
    assert gdn.flops == pytest.approx(8 * 128 * (6 * 128 * 128 + 64 * (6 * 128 + 4 * 128)))
