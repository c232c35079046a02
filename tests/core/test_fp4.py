"""FP4 weights (NVFP4, MXFP4): bytes with their scales, checkpoint reading, the fp4 peak on Blackwell only."""

import pytest

from simcast.core.dtypes import WEIGHT_FORMAT_BYTES, gemm_compute_dtype
from simcast.core.shards import sharded_dims
from simcast.core.specs import ParallelSpec
from simcast.core.weights import layer_weight_bytes_at
from simcast.cost.ops.op_work import CostContext
from simcast.cost.ops.quant_linear import quant_linear
from simcast.inputs.loaders import load_device, load_model
from simcast.trace.ir import OpRecord, TensorArg


def _linear_work(fmt: str, device: str, m: int = 4096, n: int = 7168, k: int = 2048):
    from simcast.core.specs import Batch

    rec = OpRecord(
        op="simcast::quant_linear",
        scope="layer1",
        outputs=(),
        args=(TensorArg(shape=(str(m), str(k)), dtype="bf16"), TensorArg(shape=(str(n), str(k)), dtype="bf16"), fmt),
    )
    ctx = CostContext(batch=Batch.prefill(1, m), device=load_device(device), tp_path=None)  # type: ignore[arg-type]
    return quant_linear(rec, ctx)


def test_an_nvfp4_linear_reads_half_the_fp8_weight_bytes_plus_one_fp8_scale_per_16():
    """7168 x 2048 weights: fp8 = 14,680,064 bytes; nvfp4 = 4 bits each (7,340,032) + one 1-byte e4m3
    scale per 16 values (917,504) = 8,257,536; the 4096 x (2048 + 7168) bf16 activations are the same."""
    n, k, m = 7168, 2048, 4096
    act = m * (k + n) * 2
    fp8 = _linear_work("fp8", "b200")
    fp4 = _linear_work("nvfp4", "b200")
    assert fp8.bytes == act + n * k
    assert fp4.bytes == pytest.approx(act + n * k / 2 + n * k / 16)
    assert fp4.bytes - act == pytest.approx(8_257_536)
    assert WEIGHT_FORMAT_BYTES["mxfp4"] == pytest.approx(0.5 + 1 / 32)  # one e8m0 scale per 32
    assert fp4.flops == fp8.flops == 2 * m * n * k


def test_fp4_gemms_use_the_fp4_peak_on_blackwell_and_run_weight_only_on_hopper():
    """B200 has FP4 tensor cores (9 PFLOP/s dense, twice fp8): nvfp4 runs W4A4 there. H100/H200 and MI300X
    have none: the engines' Marlin-style weight-only kernels run at the 16-bit peak."""
    assert _linear_work("nvfp4", "b200").dtype == "fp4"
    assert _linear_work("nvfp4", "h100_sxm").dtype == "bf16"
    assert _linear_work("mxfp4_w4a4", "mi355x").dtype == "fp4"
    assert _linear_work("mxfp4_w4a4", "mi300x").dtype == "bf16"
    assert gemm_compute_dtype("mxfp4", "bf16", has_fp4=True) == "bf16"  # gpt-oss experts: w4a16 as before
    b200, h100 = load_device("b200"), load_device("h100_sxm")
    assert b200.matmul_peak("fp4") == 2 * b200.matmul_peak("fp8") and not h100.has_fp4
    for d in ("b200", "gb200", "b300", "gb300", "mi355x"):
        assert load_device(d).has_fp4, d
    for d in ("h100_sxm", "h200_sxm", "mi300x", "mi325x", "a100_sxm_80gb"):
        assert not load_device(d).has_fp4, d


def test_nvfp4_gemm_time_on_b200_beats_fp8_when_compute_bound():
    from simcast.cost.ops.compute import roofline

    b200 = load_device("b200")
    t8, _ = roofline(_linear_work("fp8", "b200", m=16384), b200, "fp8")
    w4 = _linear_work("nvfp4", "b200", m=16384)
    t4, _ = roofline(w4, b200, w4.dtype or "bf16")
    assert t4 < 0.75 * t8


def test_checkpoint_formats_are_read_from_the_quantization_config():
    nv = load_model("nvidia/DeepSeek-R1-0528-FP4").quant
    assert nv is not None and (nv.expert_format, nv.dense_format, nv.qkv, nv.o) == ("nvfp4", "nvfp4", "bf16", "bf16")
    amd = load_model("amd/DeepSeek-R1-0528-MXFP4").quant
    assert amd is not None and (amd.expert_format, amd.dense_format, amd.qkv) == ("mxfp4_w4a4", "mxfp4_w4a4", "bf16")
    flag = load_model("Qwen/Qwen3-30B-A3B", quantization="modelopt_fp4").quant
    assert flag is not None and flag.method == "nvfp4" and flag.dense_format == "nvfp4"
    mx = load_model("Qwen/Qwen3-30B-A3B", quantization="mxfp4").quant
    assert mx is not None and (mx.expert_format, mx.dense_format) == ("mxfp4", "bf16")


def test_deepseek_r1_fp4_weights_match_the_published_checkpoint():
    """nvidia/DeepSeek-R1-0528-FP4 (and nvidia/DeepSeek-R1-FP4, same recipe): the hub lists 396.8B
    safetensors parameters (llmrun.dev/model/nvidia-deepseek-r1-nvfp4, from the hub's safetensors metadata),
    counting a uint8 pair of fp4 values, an fp8 scale, a bf16 value each as one parameter. By hand: 657.7B
    fp4 weights (58 MoE layers x (256 + 1 shared) experts x 3 x 7168 x 2048 + 3 dense MLPs x 3 x 7168 x 18432)
    -> 657.7B x (1/2 + 1/16) = 369.96B; bf16: attention, norms, routers, embedding and lm_head 13.37B and the
    bf16 MTP layer 11.61B (simcast does not hold it in the main model) -> 394.9B, 0.5% below 396.8B.
    The bytes simcast holds on one rank (TP=1, EP=1) are those same weights without the MTP layer:
    657.7B x 0.5625 + 2 x 13.37B = 396.7 GB."""
    m = load_model("nvidia/DeepSeek-R1-0528-FP4")
    sd, par = sharded_dims(m, 1), ParallelSpec(tp=1)
    layers = sum(layer_weight_bytes_at(m, sd, par, i) for i in range(m.num_layers))
    total = layers + 2 * m.vocab_size * m.hidden_size * 2 + m.hidden_size * 2
    n4 = 58 * 257 * 3 * 7168 * 2048 + 3 * 3 * 7168 * 18432
    assert total == pytest.approx(396.7e9, rel=0.005)
    hub_params = n4 * (1 / 2 + 1 / 16) + (total - n4 * 0.5625) / 2 + 11.61e9
    assert hub_params == pytest.approx(396.8e9, rel=0.01)


@pytest.mark.slow  # an optimize search per engine
def test_emit_carries_the_engines_fp4_quantization_flag(capsys):
    """vLLM and SGLang name ModelOpt NVFP4 ``modelopt_fp4``; ``--quantization nvfp4`` emits that spelling."""
    from simcast.cli.main import main

    argv = ["optimize", "--input-length", "128", "--output-length", "128", "--num-devices", "1", "--tp-sizes", "1"]
    argv += ["--device", "b200", "--quantization", "nvfp4", "--batch-sizes", "8"]
    for engine in ("vllm", "sglang"):
        rc = main([*argv, "--emit", engine, "meta-llama/Llama-3.1-8B"])
        out = capsys.readouterr().out
        assert rc == 0
        server = next(line for line in out.splitlines() if "vllm serve" in line or "sglang.launch_server" in line)
        assert server.endswith("--quantization modelopt_fp4")
        assert "weights from --quantization nvfp4" in out


def test_a_modelopt_hf_quant_config_beside_config_json_is_read(tmp_path):
    """Older ModelOpt exports keep the formats in hf_quant_config.json, not in config.json."""
    import json

    from simcast.core.errors import SimcastInputError
    from simcast.inputs.loaders import models_dir

    cfg = json.loads((models_dir() / "deepseek-ai/DeepSeek-V3/config.json").read_text())
    del cfg["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    hq = {"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(hq))
    q = load_model(str(tmp_path)).quant
    assert q is not None and (q.method, q.qkv, q.o) == ("nvfp4", "nvfp4", "nvfp4")
    hq["quantization"]["quant_algo"] = "W4A8_AWQ"
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(hq))
    with pytest.raises(SimcastInputError, match="quant_algo"):
        load_model(str(tmp_path))
