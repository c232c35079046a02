"""FP4 KV caches (``--kv-cache-dtype nvfp4``): 4-bit values + a 1-byte scale per 16 = 0.5625 bytes per element,
hand-computed per layer and token, and followed through KV memory, admission, attention bytes and KV transfer."""

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.kv import kv_dtype_bytes
from simcast.core.memory import kv_bytes_per_token, stage_kv_cache_bytes
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, ParallelSpec
from simcast.cost.kernels.engine_cost import attention_s, source_label
from simcast.cost.ops.op_work import attention_fit_dtype
from simcast.deploy.deployment import Deployment
from simcast.engines.partition import build_pipeline_stage_plan
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.disagg.kv_transfer import rank_kv_bytes
from simcast.serving.kv_memory import kv_budgets, kv_capacity_tokens, stage_fixed
from simcast.serving.steady.model import ServingConfig, Workload

B200 = load_device("b200")
DSV3 = load_model("deepseek-ai/DeepSeek-V3")
LLAMA8B = load_model("meta-llama/Llama-3.1-8B")


def test_nvfp4_is_half_a_byte_plus_a_byte_per_16():
    assert kv_dtype_bytes(LLAMA8B, "nvfp4") == 0.5 + 1 / 16
    assert kv_dtype_bytes(LLAMA8B, "fp8") == 1 and isinstance(kv_dtype_bytes(LLAMA8B, "fp8"), int)


def test_mla_layer_holds_288_value_and_36_scale_bytes_per_token():
    # DeepSeek-V3's latent: kv_lora_rank 512 + rope 64 = 576 elements, on every TP rank (SGLang's
    # MLATokenToKVPoolFP4: (tokens, 1, 576 // 2) values + (tokens, 576 // 16) scales)
    sd = sharded_dims(DSV3, 8)
    assert kv_bytes_per_token(DSV3, sd, 1, kv_dtype_bytes(DSV3, "nvfp4")) == 576 // 2 + 576 // 16 == 324
    assert kv_bytes_per_token(DSV3, sd, 1, kv_dtype_bytes(DSV3, "fp8")) == 576
    assert kv_bytes_per_token(DSV3, sd, 61, kv_dtype_bytes(DSV3, "nvfp4")) == 61 * 324


@pytest.mark.parametrize("tp, kv_heads", [(1, 8), (2, 4), (8, 1)])
def test_gqa_layer_holds_k_and_v_values_and_their_scales(tp, kv_heads):
    # Llama-3.1-8B: 8 KV heads of 128; K and V each (heads, 128 // 2) values + (heads, 128 // 16) scales
    sd = sharded_dims(LLAMA8B, tp)
    assert kv_bytes_per_token(LLAMA8B, sd, 1, kv_dtype_bytes(LLAMA8B, "nvfp4")) == 2 * kv_heads * (64 + 8)


def test_a_batch_holds_exactly_its_tokens_times_the_fp4_bytes():
    sd = sharded_dims(DSV3, 8)
    info = build_pipeline_stage_plan(DSV3.num_layers, 1).stage_infos[0]
    b = Batch(query_lens=(1, 1), context_lens=(1000, 3000))
    assert stage_kv_cache_bytes(DSV3, sd, info, b, kv_dtype_bytes(DSV3, "nvfp4")) == b.kv_tokens * 61 * 324


def _cfg(model, kv: str, engine: str = "sglang", tp: int = 1) -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(model=model, device=B200, parallel=ParallelSpec(tp=tp), engine=engine, kv_cache_dtype=kv),
        workload=Workload(input_length=1024, output_length=1024),
        batch_size=1,
    )


@pytest.mark.parametrize("model, tp", [(LLAMA8B, 1), (DSV3, 8)])
def test_admission_grows_by_16_over_9_versus_fp8(model, tp):
    fp8, fp4 = _cfg(model, "fp8", tp=tp), _cfg(model, "nvfp4", tp=tp)
    # the same budget (weights and activations do not depend on the KV dtype) ...
    assert kv_budgets(fp8, *stage_fixed(fp8)[:2]) == kv_budgets(fp4, *stage_fixed(fp4)[:2])
    # ... holds 1 / 0.5625 = 16/9 times the tokens (floors aside)
    n8, n4 = kv_capacity_tokens(fp8), kv_capacity_tokens(fp4)
    assert n4 / n8 == pytest.approx(16 / 9, rel=1e-4)
    assert stage_fixed(fp4)[2][0] == pytest.approx(stage_fixed(fp8)[2][0] * 9 / 16)  # bytes per running request


def test_disaggregated_transfer_sends_the_fp4_bytes():
    send, total = rank_kv_bytes(_cfg(DSV3, "nvfp4", tp=8), 4096)
    assert send == 4096 * 61 * 324 and total == 8 * send
    send8, _ = rank_kv_bytes(_cfg(DSV3, "fp8", tp=8), 4096)
    assert send / send8 == pytest.approx(0.5625)


def test_fp4_kv_attention_has_no_fit_and_reads_its_bytes_at_the_roofline():
    assert attention_fit_dtype(0.5625, "bf16") == "nvfp4"
    assert attention_fit_dtype(1, "bf16") == "fp8" and attention_fit_dtype(2, "bf16") == "bf16"
    # B200's SGLang profile fits bf16 and fp8 decode, none for an FP4 cache: the caller takes the roofline
    assert attention_s(B200, "sglang", "fp8", (1,), (4096,), 32, 8, 128) is not None
    assert attention_s(B200, "sglang", "nvfp4", (1,), (4096,), 32, 8, 128) is None


def test_fp4_kv_is_refused_off_nvidia_blackwell_and_on_atom():
    with pytest.raises(SimcastInputError, match="NVIDIA Blackwell only"):
        Deployment(model=LLAMA8B, device=load_device("h200_sxm"), engine="sglang", kv_cache_dtype="nvfp4")
    with pytest.raises(SimcastInputError, match="NVIDIA Blackwell only"):
        Deployment(model=LLAMA8B, device=load_device("mi355x"), engine="vllm", kv_cache_dtype="nvfp4")
    with pytest.raises(SimcastInputError, match="no FP4 cache"):
        Deployment(model=LLAMA8B, device=load_device("mi355x"), engine="atom", kv_cache_dtype="nvfp4")
    Deployment(model=LLAMA8B, device=load_device("gb300"), engine="trtllm", kv_cache_dtype="nvfp4")  # runs


def test_unfitted_fp4_gemms_are_labelled_transferred():
    assert "transferred/unfitted" in source_label("vllm", "gemm", "nvfp4", "", "mi355x")
    assert "transferred/unfitted" not in source_label("vllm", "gemm", "bf16", "", "mi355x")


def _attention(kv: str):
    from simcast.sim.simulate import simulate

    spec = Deployment(model=LLAMA8B, device=B200, engine="vllm", kv_cache_dtype=kv).sim_spec(
        Batch(query_lens=(1,) * 8, context_lens=(1024,) * 8)
    )
    rep = simulate(spec)
    op = next(o for o in rep.stages[0].ops if o.op == "simcast::attention")  # every layer's is the same
    return op, rep


def test_decode_attention_reads_the_fp4_bytes():
    fp8, r8 = _attention("fp8")
    fp4, r4 = _attention("nvfp4")
    io = 2 * 8 * 32 * 128 * 2  # q read and o written in bf16: 8 tokens x 32 heads x 128
    assert fp8.bytes - io == 8 * 1025 * 2 * 8 * 128  # K and V of 1025 tokens, 8 KV heads x 128, 1 byte
    assert fp4.bytes - io == 8 * 1025 * 2 * 8 * (64 + 8)  # 64 value bytes + 8 scale bytes per head row
    assert r4.max_stage_kv_cache_bytes == 8 * 1025 * 32 * 1152  # 8 requests x 1025 tokens x 32 layers x 1152 B
