"""TensorRT-LLM's decisions (simcast/engines/trtllm.py), each checked by hand against its own source."""

from simcast.core.specs import Batch
from simcast.engines import EMIT_ENGINES, get_engine
from simcast.engines.partition import partition_layers
from simcast.engines.policy import MEMORY_FLAGS, engine_policy
from simcast.inputs.loaders import load_device

TRTLLM = get_engine("trtllm")


def test_defaults_are_the_same_on_every_gpu():
    # llm_args.py: max_num_tokens 8192, max_batch_size 2048, free_gpu_memory_fraction 0.9
    for device in ("h100_sxm", "l40s"):
        pol = engine_policy("trtllm", load_device(device))
        assert (pol.max_num_batched_tokens, pol.max_num_seqs, pol.mem_fraction) == (8192, 2048, 0.9)


def test_step_order_admission_and_memory_flag():
    pol = engine_policy("trtllm", load_device("h100_sxm"))
    assert pol.decode_first and not pol.chunked_prefill and pol.kv_block_tokens == 32
    assert pol.kv_admission == "guaranteed_no_evict" and pol.mem_fraction_of == "free"
    assert MEMORY_FLAGS["--kv-cache-free-gpu-memory-fraction"] == "trtllm"
    assert "trtllm" not in EMIT_ENGINES  # no --emit lines yet


def test_cuda_graphs_capture_generation_up_to_128():
    assert TRTLLM.captured(Batch.decode(128, 10), 80, 1) and not TRTLLM.captured(Batch.decode(129, 10), 80, 1)
    assert not TRTLLM.captured(Batch.prefill(1, 2), 80, 1)


def test_partition_gives_the_remainder_to_the_first_stages():
    assert partition_layers(22, 4, "trtllm") == (6, 6, 5, 5)  # Mapping.pp_layers


def test_database_rules_and_kernel_choice():
    assert TRTLLM.context_attention_dtype("fp8") == "fp8"  # FP8 context FMHA over an fp8 cache
    assert TRTLLM.decode_kernel_rules["h100_sxm"] == ("", "trtllm_xqa", "trtllm_xqa_mb")
    assert "l40s" in TRTLLM.decode_fp8_single_block and "h100_sxm" not in TRTLLM.decode_fp8_single_block
