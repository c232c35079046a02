"""MoE / MLA model configs: strict loading and parameter counts against the publishers' figures."""

import json
import math

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.params import active_params, layer_params, total_params
from simcast.inputs.loaders import load_model

MOE_MODELS = [
    "mistralai/Mixtral-8x7B-v0.1",
    "mistralai/Mixtral-8x22B-v0.1",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "Qwen/Qwen3-235B-A22B-FP8",
    "deepseek-ai/DeepSeek-V3",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
]


def test_moe_models_load_with_their_features():
    mix, q30, ds, oss = (
        load_model(n)
        for n in ("mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b")
    )
    assert (mix.moe.num_experts, mix.moe.top_k, mix.moe.expert_intermediate) == (8, 2, 14336)
    assert (q30.moe.num_experts, q30.moe.top_k, q30.moe.expert_intermediate, q30.qk_norm) == (128, 8, 768, True)
    assert (ds.moe.num_experts, ds.moe.num_shared_experts, ds.moe.first_k_dense, ds.num_mtp_layers) == (256, 1, 3, 1)
    assert (ds.mla.kv_lora_rank, ds.mla.qk_rope_head_dim, ds.mla.cache_width) == (512, 64, 576)
    assert ds.quant.expert_format == ds.quant.dense_format == "fp8_block" and ds.quant.block == (128, 128)
    assert not ds.is_moe_layer(2) and ds.is_moe_layer(3)
    assert oss.quant.expert_format == "mxfp4" and oss.quant.dense_format == "bf16"  # attention not converted
    assert oss.attention_sinks and oss.sliding_window == 128 and oss.is_sliding(0) and not oss.is_sliding(1)
    assert load_model("Qwen/Qwen3-235B-A22B-FP8").quant.expert_format == "fp8_block"
    assert load_model("Qwen/Qwen3-235B-A22B").quant is None


# Published totals, each from the publisher. Figures with >= 3 significant digits are
# checked within 1 %; two-digit headline figures ("37B", "22B", "3.3B") are checked by
# the publisher's rounding (Qwen truncates: 3.353B -> "3.3B", 22.19B -> "22B").
#  - Mixtral 8x7B: 46.7B total / 12.9B active (Mistral AI, "Mixtral of experts", mistral.ai/news/mixtral-of-experts;
#    arXiv 2401.04088 rounds to 47B / 13B); counts the embedding as active.
#  - Mixtral 8x22B: 141B / 39B (mistral.ai/news/mixtral-8x22b).
#  - Qwen3-30B-A3B: 30.5B / 3.3B; Qwen3-235B-A22B: 235B / 22B (Qwen model cards, huggingface.co/Qwen/Qwen3-30B-A3B,
#    also docs.vllm.ai/projects/ascend ... Qwen3-30B-A3B: "30.5B total parameters with 3.3B activated").
#  - DeepSeek-V3: 671B main + 14B MTP = 685B, 37B activated (arXiv 2412.19437; huggingface.co/deepseek-ai/DeepSeek-V3).
#  - gpt-oss-120b 116.83B / 5.13B, gpt-oss-20b 20.91B / 3.61B active (OpenAI gpt-oss model card, arXiv 2508.10925,
#    table 1; active excludes the embedding table, includes the unembedding).
@pytest.mark.parametrize(
    "name,total_b,active_b,with_emb",
    [
        ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9, True),
        ("openai/gpt-oss-120b", 116.83, 5.13, False),
        ("openai/gpt-oss-20b", 20.91, 3.61, False),
    ],
)
def test_params_within_one_percent(name, total_b, active_b, with_emb):
    m = load_model(name)
    assert total_params(m) / 1e9 == pytest.approx(total_b, rel=0.01)
    assert active_params(m, include_embedding=with_emb) / 1e9 == pytest.approx(active_b, rel=0.01)


def test_params_headline_figures():
    ds = load_model("deepseek-ai/DeepSeek-V3")
    assert total_params(ds) / 1e9 == pytest.approx(671, rel=0.01)
    assert total_params(ds, include_mtp=True) / 1e9 == pytest.approx(685, rel=0.01)
    # "14B" MTP is 685 - 671 of two rounded figures; counted: 13.46B (a layer + norms + eh_proj + embedding/head copies)
    assert round(active_params(ds) / 1e9) == 37
    q30, q235 = load_model("Qwen/Qwen3-30B-A3B"), load_model("Qwen/Qwen3-235B-A22B")
    assert total_params(q30) / 1e9 == pytest.approx(30.5, rel=0.01)
    assert math.floor(active_params(q30, include_embedding=True) / 1e8) / 10 == 3.3
    assert total_params(q235) / 1e9 == pytest.approx(235, rel=0.01)
    assert math.floor(active_params(q235, include_embedding=True) / 1e9) == 22
    m22 = load_model("mistralai/Mixtral-8x22B-v0.1")
    assert total_params(m22) / 1e9 == pytest.approx(141, rel=0.01)
    assert active_params(m22, include_embedding=True) / 1e9 == pytest.approx(39, rel=0.01)


def test_hand_counted_mixtral_layer():
    """Mixtral-8x7B layer by hand: attention 4096·(4096+2·1024) + 4096·4096; expert 3·4096·14336; router 4096·8."""
    lp = layer_params(load_model("mistralai/Mixtral-8x7B-v0.1"), 0)
    assert lp.attention == 4096 * 6144 + 4096 * 4096
    assert lp.expert == 3 * 4096 * 14336 and lp.router == 4096 * 8 and lp.num_experts == 8 and lp.top_k == 2
    assert lp.total - lp.active == 6 * 3 * 4096 * 14336


def test_hand_counted_deepseek_mla_layer():
    """MLA: q_a 7168·1536 + norm 1536 + q_b 1536·128·192; kv_a 7168·576 + norm 512 + kv_b 512·128·256;
    o 128·128·7168."""
    ds = load_model("deepseek-ai/DeepSeek-V3")
    lp = layer_params(ds, 5)
    assert lp.attention == (
        7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    )
    assert lp.shared == 3 * 7168 * 2048 and lp.router == 7168 * 256 + 256
    assert layer_params(ds, 0).dense_mlp == 3 * 7168 * 18432 and layer_params(ds, 0).num_experts == 0


def _write(tmp_path, cfg):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def test_bad_moe_keys_are_one_line_errors(tmp_path):
    cfg = json.loads(open("models/Qwen/Qwen3-30B-A3B/config.json").read())
    cfg["num_experts_per_tok"] = 200
    with pytest.raises(SimcastInputError, match="top_k"):
        load_model(_write(tmp_path, cfg))
    cfg = json.loads(open("models/deepseek-ai/DeepSeek-V3/config.json").read())
    cfg["quantization_config"]["quant_method"] = "awq"
    with pytest.raises(SimcastInputError, match="quant_method.*supported: fp8"):
        load_model(_write(tmp_path, cfg))
    cfg = json.loads(open("models/deepseek-ai/DeepSeek-V3/config.json").read())
    del cfg["kv_lora_rank"]
    with pytest.raises(SimcastInputError, match="kv_lora_rank"):
        load_model(_write(tmp_path, cfg))
    cfg = json.loads(open("models/openai/gpt-oss-20b/config.json").read())
    cfg["layer_types"] = cfg["layer_types"][:-1]
    with pytest.raises(SimcastInputError, match="layer_types"):
        load_model(_write(tmp_path, cfg))
    cfg["architectures"], cfg["model_type"] = ["JambaForCausalLM"], "jamba"
    with pytest.raises(SimcastInputError, match="supported: .*GptOssForCausalLM"):
        load_model(_write(tmp_path, cfg))


def test_h20_profile_datasheet_peaks():
    from simcast.inputs.loaders import load_device

    d = load_device("h20")
    assert d.matmul_peak("bf16") == 148e12 and d.matmul_peak("fp8") == 296e12  # Tom's Hardware spec table
    assert d.hbm_bw_bytes_per_s == 4.0e12 and d.hbm_bytes == 96 * 2**30
