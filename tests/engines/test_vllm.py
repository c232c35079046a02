"""vLLM's decisions (simcast/engines/vllm.py), each checked by hand against vLLM's own source."""

from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import get_engine
from simcast.engines.partition import partition_layers
from simcast.engines.policy import MEMORY_FLAGS, engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.render.launch import launch_lines
from simcast.serving.steady.model import ServingConfig, Workload

VLLM = get_engine("vllm")


def test_defaults_by_gpu_size_and_reported_name():
    # _set_default_args: H100 (85.5e9 B >= 70 GiB, not an A100): 8192 tokens / 1024 seqs as a server, 16384 offline
    pol = engine_policy("vllm", load_device("h100_sxm"))
    assert (pol.max_num_batched_tokens, pol.max_num_seqs, pol.mem_fraction) == (8192, 1024, 0.9)
    assert engine_policy("vllm", load_device("h100_sxm"), usage="offline").max_num_batched_tokens == 16384
    # an A100 80GB is as large, but vLLM tests the reported name for "a100": 2048 / 256
    pol = engine_policy("vllm", load_device("a100_sxm_80gb"))
    assert (pol.max_num_batched_tokens, pol.max_num_seqs) == (2048, 256)


def test_step_order_admission_and_memory_flag():
    pol = engine_policy("vllm", load_device("h100_sxm"))
    assert pol.decode_first and pol.chunked_prefill and pol.kv_block_tokens == 16
    assert pol.kv_admission == "on_demand" and pol.mem_fraction_of == "total"
    assert VLLM.memory_flag == "--gpu-memory-utilization" and MEMORY_FLAGS[VLLM.memory_flag] == "vllm"
    assert VLLM.schedules and VLLM.kernel_engine == "vllm" and VLLM.emits


def test_cuda_graphs_capture_steps_up_to_512_tokens():
    assert VLLM.captured(Batch.prefill(1, 512), 80, 1) and not VLLM.captured(Batch.prefill(1, 513), 80, 1)
    assert VLLM.graph_limit_counts == "tokens"


def test_partition_gives_the_remainder_to_the_stages_before_the_last():
    assert partition_layers(22, 4, "vllm") == (5, 6, 6, 5)  # get_pp_indices
    assert VLLM.partition_env_var == "VLLM_PP_LAYER_PARTITION"


def test_database_rules_and_kernel_choice():
    assert VLLM.decode_kv_len(100) == 100  # collector: seq_lens = step
    assert VLLM.decode_kernel_rules["l40s"] == ("", "fa2_varlen")
    assert VLLM.prefill_kernel_rules["b200_sxm"] == ("", "trtllm_ctx")  # FlashInfer runs TRT-LLM-gen there


def test_launch_line():
    cfg = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=2),
            engine="vllm",
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=8,
    )
    ll = launch_lines(cfg, "vllm", 16)
    assert ll.server == (
        "vllm serve Qwen/Qwen3-0.6B --tensor-parallel-size 2 --pipeline-parallel-size 1 --data-parallel-size 1 "
        "--max-num-seqs 16 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9"
    )
    assert "--port" not in ll.bench and ll.problems == ()
