"""Strict input: shipped models and devices load; bad files give one line naming the field."""

import json

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.shards import param_count
from simcast.inputs.loaders import load_device, load_model, shipped_devices, shipped_models

SHIPPED_MODELS = [
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B",
    "Qwen/Qwen2.5-7B",
    "Qwen/Qwen2.5-32B",
    "Qwen/Qwen2.5-72B",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B",
    "mistralai/Mistral-7B-v0.3",
    # issue 27 families (published counts: tests/core/test_new_model_families.py)
    "moonshotai/Kimi-K2-Instruct",
    "zai-org/GLM-4.5",
    "MiniMaxAI/MiniMax-M2",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
]
SHIPPED_DEVICES = [
    "h100_sxm",
    "h200_sxm",
    "a100_sxm_80gb",
    "a100_sxm_40gb",
    "b200",
    "mi300x",
    "mi325x",
    "mi355x",
    "ascend_910b",
    "h800",
    "gb300",
    "a10",
]


def test_all_required_models_ship_and_load():
    assert set(SHIPPED_MODELS) <= set(shipped_models())
    for name in SHIPPED_MODELS:
        m = load_model(name)
        assert m.num_layers > 0 and param_count(m) > 0


@pytest.mark.parametrize(
    "name,params_b",
    [
        ("meta-llama/Llama-3.1-70B", 70.6),
        ("meta-llama/Llama-3.1-405B", 405.9),
        ("meta-llama/Llama-3.1-8B", 8.03),
        ("meta-llama/Llama-3.2-1B", 1.24),
        ("Qwen/Qwen3-32B", 32.8),
        ("Qwen/Qwen2.5-72B", 72.7),
        ("mistralai/Mistral-7B-v0.3", 7.25),
    ],
)
def test_parameter_counts_match_published(name, params_b):
    assert param_count(load_model(name)) / 1e9 == pytest.approx(params_b, rel=0.01)


def test_family_features():
    assert load_model("Qwen/Qwen3-8B").qk_norm and not load_model("Qwen/Qwen2.5-7B").qk_norm
    assert load_model("Qwen/Qwen2.5-7B").attention_bias
    assert load_model("meta-llama/Llama-3.2-3B").tie_word_embeddings
    assert load_model("Qwen/Qwen3-8B").head_dim == 128


def test_all_devices_load():
    assert set(SHIPPED_DEVICES) <= set(shipped_devices())
    for name in SHIPPED_DEVICES:
        d = load_device(name)
        assert d.name == name and d.hbm_bytes > 0 and d.matmul_peak("bf16") > 1e14


def test_model_from_path_and_unknown_architecture(tmp_path):
    cfg = json.loads(open(load_model.__globals__["resolve_model_path"]("Qwen/Qwen3-0.6B")).read())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).num_layers == 28
    cfg["architectures"], cfg["model_type"] = ["GPT2LMHeadModel"], "gpt2"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SimcastInputError, match="supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM"):
        load_model(str(tmp_path))
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(SimcastInputError, match="not valid JSON"):
        load_model(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": -4}))
    with pytest.raises(SimcastInputError, match="config.json:hidden_size: got -4"):
        load_model(str(tmp_path))


def _profile(tmp_path, text):
    p = tmp_path / "golden_device.yaml"
    p.write_text(text)
    return str(p)


def test_device_profile_schema_errors(tmp_path):
    good = open("tests/data/golden_device.yaml").read()
    assert load_device(_profile(tmp_path, good)).name == "golden_device"
    with pytest.raises(
        SimcastInputError,
        match=r"^memory.hbm_fast: got 'hbm_fast'; unknown key; allowed: hbm_bw_bytes_per_s, hbm_bytes$",
    ):
        load_device(_profile(tmp_path, good.replace("hbm_bytes:", "hbm_fast: 1\n  hbm_bytes:")))
    with pytest.raises(SimcastInputError, match="efficiency.launch_overhead_s: got None; is required"):
        load_device(_profile(tmp_path, good.replace("  launch_overhead_s: 5.0e-6", "")))
    with pytest.raises(SimcastInputError, match="efficiency.matmul: got 1.5; must be in"):
        load_device(_profile(tmp_path, good.replace("matmul: 0.8 ", "matmul: 1.5 ")))
    with pytest.raises(SimcastInputError, match="compute.matmul_flops_per_s.int3: got 'int3'; allowed dtypes"):
        load_device(_profile(tmp_path, good.replace("{bf16: 1.0e+15,", "{int3: 1.0e+15,")))
    with pytest.raises(SimcastInputError, match="is malformed at line"):
        load_device(_profile(tmp_path, good + "\n  : - ]["))
