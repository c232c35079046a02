"""The 2026 model families (issue 27): one layer's parameters by hand, and published totals within 1 %."""

import pytest

from simcast.core.params import active_params, layer_params, total_params
from simcast.inputs.loaders import load_model


def test_glm45_moe_layer_by_hand():
    m = load_model("zai-org/GLM-4.5")
    lp = layer_params(m, 3)  # layers 0-2 are dense (first_k_dense_replace 3)
    h, d = 5120, 128
    qkv = (96 + 2 * 8) * d
    assert lp.attention == h * qkv + 96 * d * h + qkv + 2 * d  # q/k/v/o, q/k/v bias, per-head q/k norm
    assert lp.router == h * 160 + 160  # router + e_score_correction_bias
    assert lp.expert == 3 * h * 1536 and lp.num_experts == 160 and lp.top_k == 8
    assert lp.shared == 3 * h * 1536
    assert layer_params(m, 2).dense_mlp == 3 * h * 12288 and layer_params(m, 2).num_experts == 0


def test_minimax_m2_layer_by_hand():
    m = load_model("MiniMaxAI/MiniMax-M2")
    lp = layer_params(m, 0)
    h, d = 3072, 128
    assert lp.attention == h * (48 + 16) * d + 48 * d * h + 2 * d
    assert lp.expert == 3 * h * 1536 and lp.num_experts == 256 and lp.top_k == 8 and lp.shared == 0
    assert m.quant is not None and m.quant.expert_format == "fp8_block" and m.num_mtp_layers == 3


def test_llama4_maverick_layers_by_hand():
    m = load_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    h = 5120
    dense, moe = layer_params(m, 0), layer_params(m, 1)
    assert dense.dense_mlp == 3 * h * 16384 and dense.num_experts == 0  # intermediate_size_mlp
    assert moe.expert == 3 * h * 8192 and moe.num_experts == 128 and moe.top_k == 1
    assert moe.shared == 3 * h * 8192 and moe.router == h * 128
    assert moe.attention == h * (40 + 16) * 128 + 40 * 128 * h


@pytest.mark.parametrize(
    "name,total_b,active_b",
    [
        # zai-org/GLM-4.5 README model table: 355B total / 32B active (the MTP layer not counted here)
        ("zai-org/GLM-4.5", 355, 32),
        # MiniMax-M2 model card (transformers docs/source/en/model_doc/minimax_m2.md): 230B total / 10B active
        ("MiniMaxAI/MiniMax-M2", 230, 10),
        # meta-llama/llama-models models/llama4/MODEL_CARD.md: 109B / 17B (Scout), 400B / 17B (Maverick); Scout's
        # count includes its vision tower (from vision_config); the trimmed Maverick file has none
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", 109, 17),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400, 17),
        # MoonshotAI/Kimi-K2 README "Model Summary": 1T total (the hub's safetensors count: 1026.5B) / 32B active
        ("moonshotai/Kimi-K2-Instruct", 1026.5, 32),
    ],
)
def test_published_total_and_active(name, total_b, active_b):
    m = load_model(name)
    assert total_params(m) / 1e9 == pytest.approx(total_b, rel=0.01)
    # publishers round active to 1-2 digits: within 6 %
    assert active_params(m) / 1e9 == pytest.approx(active_b, rel=0.06)
