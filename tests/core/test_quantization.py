"""``--quantization fp8`` (W8A8 linear layers) and ``--kv-cache-dtype fp8``: hand-counted bytes."""

import pytest

from simcast.cli.main import main
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.inputs.loaders import load_model, with_quantization
from simcast.sim.simulate import simulate


def _ops(report, name):
    return [o for o in report.stages[0].ops if o.op.endswith(name)]


def test_fp8_weights_save_one_byte_per_linear_parameter(h100):
    """Llama-3.1-8B: per layer qkv 4096·(4096+2·1024) + o 4096·4096 + gate/up/down 3·4096·14336
    = 218,103,808 linear weights; 32 layers -> 6,979,321,856 bytes fewer than bf16 (embedding,
    lm_head and norms stay bf16)."""
    bf16 = load_model("meta-llama/Llama-3.1-8B")
    fp8 = load_model("meta-llama/Llama-3.1-8B", quantization="fp8")
    spec = dict(device=h100, parallel=ParallelSpec(tp=1, pp=1), batch=Batch.prefill(1, 128))
    w16 = simulate(SimSpec(model=bf16, **spec)).max_stage_weight_bytes
    w8 = simulate(SimSpec(model=fp8, **spec)).max_stage_weight_bytes
    assert w16 - w8 == 32 * 218_103_808


def test_fp8_gemms_run_at_the_fp8_peak_with_16_bit_activations(h100):
    """A compute-bound prefill: the linear layers' FLOPs are unchanged, their time falls (fp8 peak
    is twice bf16 on H100), and the activations around them stay 2 bytes (norm bytes unchanged)."""
    spec = dict(device=h100, parallel=ParallelSpec(tp=1, pp=1), batch=Batch.prefill(4, 2048))
    r16 = simulate(SimSpec(model=load_model("meta-llama/Llama-3.1-8B"), **spec))
    r8 = simulate(SimSpec(model=load_model("meta-llama/Llama-3.1-8B", quantization="fp8"), **spec))
    lin16 = [o for o in _ops(r16, "linear") if o.scope == "layer1"]
    lin8 = [o for o in _ops(r8, "quant_linear") if o.scope == "layer1"]
    assert len(lin8) == len(lin16) == 4 and sum(o.flops for o in lin8) == pytest.approx(sum(o.flops for o in lin16))
    assert sum(o.time_s for o in lin8) < 0.7 * sum(o.time_s for o in lin16)
    assert [o.bytes for o in _ops(r8, "rms_norm")] == [o.bytes for o in _ops(r16, "rms_norm")]


def test_fp8_kv_cache_halves_the_kv_bytes_decode_attention_reads(h100):
    """Decode, 64 requests at context 4096, Llama-3.1-8B (8 KV heads x 128, GQA group 4 -> one
    query tile per request): KV read = 64·4097·2·8·128 elements; bf16 reads 2 bytes each, fp8 one.
    Q in and O out (64·32·128 elements each, bf16) are the same in both."""
    model = load_model("meta-llama/Llama-3.1-8B")
    base = dict(model=model, device=h100, parallel=ParallelSpec(tp=1, pp=1), batch=Batch.decode(64, 4096))
    a16 = _ops(simulate(SimSpec(**base)), "::attention")[0]
    a8 = _ops(simulate(SimSpec(kv_cache_dtype="fp8", **base)), "::attention")[0]
    kv_elems = 64 * 4097 * 2 * 8 * 128
    io = 2 * 64 * 32 * 128 * 2
    assert a16.bytes == pytest.approx(io + 2 * kv_elems)
    assert a8.bytes == pytest.approx(io + kv_elems)
    assert a8.time_s < 0.6 * a16.time_s  # memory-bound: about half


def test_quantizing_an_already_quantized_checkpoint_is_refused():
    ds = load_model("deepseek-ai/DeepSeek-V3")
    from simcast.core.errors import SimcastInputError

    with pytest.raises(SimcastInputError, match="already quantized"):
        with_quantization(ds, "nvfp4")
    assert with_quantization(ds, "none") is ds
    # naming the checkpoint's own method (fp8 on an FP8 checkpoint, modelopt_fp4 on an NVFP4 one) changes nothing
    assert with_quantization(ds, "fp8") is ds
    fp4 = load_model("nvidia/DeepSeek-R1-0528-FP4")
    assert with_quantization(fp4, "modelopt_fp4") is fp4 and with_quantization(fp4, "nvfp4") is fp4


def test_cli_quantization_flag_one_line_errors(capsys):
    rc = main(
        [
            "simulate",
            "--model",
            "deepseek-ai/DeepSeek-V3",
            "--device",
            "h200_sxm",
            "--quantization",
            "mxfp4",
            "--tp",
            "8",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--quantization" in err and "already quantized" in err


def test_emit_carries_the_precision_flags(capsys):
    argv = ["optimize", "--input-length", "128", "--output-length", "128", "--num-devices", "1", "--tp-sizes", "1"]
    argv += ["--device", "h100_sxm", "--quantization", "fp8", "--kv-cache-dtype", "fp8", "--batch-sizes", "8"]
    for engine, kv in (("vllm", "fp8"), ("sglang", "fp8_e4m3")):
        rc = main(argv + ["--emit", engine, "meta-llama/Llama-3.1-8B"])
        out = capsys.readouterr().out
        assert rc == 0
        server = next(line for line in out.splitlines() if "vllm serve" in line or "sglang.launch_server" in line)
        assert server.endswith(f"--quantization fp8 --kv-cache-dtype {kv}")
        assert "weights from --quantization fp8" in out and "KV cache in fp8" in out
