"""SGLang's decisions (simcast/engines/sglang.py), each checked by hand against SGLang's own source."""

from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import get_engine
from simcast.engines.partition import partition_layers
from simcast.engines.policy import MEMORY_FLAGS, engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.render.launch import launch_lines
from simcast.serving.steady.model import ServingConfig, Workload

SGLANG = get_engine("sglang")


def test_defaults_on_h100():
    # _handle_gpu_memory_settings on 81559 MiB (79.6 GiB, < 160): chunk 8192, cuda_graph_max_bs 256 (TP 1);
    # reserved 512 + 8192 x 1.5 + 256 x 2 + 1 x 1 / 8 x 1024 = 13440 MiB; (81559 - 13440) / 81559 = 0.835
    pol = engine_policy("sglang", load_device("h100_sxm"))
    assert (pol.max_num_batched_tokens, pol.max_num_seqs, pol.mem_fraction) == (8192, 4096, 0.835)
    assert pol.new_token_ratio == 0.7 * 0.14  # the decayed minimum of new_token_ratio


def test_step_order_admission_and_memory_flag():
    pol = engine_policy("sglang", load_device("h100_sxm"))
    assert not pol.decode_first and pol.kv_block_tokens == 1
    assert pol.kv_admission == "reserve_ratio" and pol.mem_fraction_of == "static"
    assert SGLANG.memory_flag == "--mem-fraction-static" and MEMORY_FLAGS[SGLANG.memory_flag] == "sglang"
    pp = engine_policy("sglang", load_device("h100_sxm"), pp=2)
    assert not pp.overlap_cpu and pp.tp_sharded_send and pp.pp_output_return  # its PP loop
    assert SGLANG.pp_dynamic_chunking and SGLANG.pp_prefill_rule is not None and SGLANG.pp_prefill_rule.overlap


def test_cuda_graphs_capture_decode_up_to_cuda_graph_max_bs():
    # H200 (141 GiB, < 160) at TP 1: 256; prefill runs eagerly
    assert SGLANG.captured(Batch.decode(256, 10), 141, 1) and not SGLANG.captured(Batch.decode(257, 10), 141, 1)
    assert not SGLANG.captured(Batch.prefill(1, 16), 141, 8)


def test_partition_gives_the_remainder_to_the_last_stages():
    assert partition_layers(22, 4, "sglang") == (5, 5, 6, 6)


def test_database_rules_and_kernel_choice():
    assert SGLANG.decode_kv_len(100) == 101  # caches step tokens, attends one more
    assert SGLANG.decode_kernel_rules["l40s"] == ("", "flashinfer_tc")
    assert [t for t, _ in SGLANG.a2a_deepep_tables] == ["wideep_deepep_ll_perf", "wideep_deepep_normal_perf"]


def test_launch_line():
    cfg = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=2),
            engine="sglang",
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=8,
    )
    # TP 2: reserved 13440 + 128 = 13568 MiB; (81559 - 13568) / 81559 = 0.834
    ll = launch_lines(cfg, "sglang", 16)
    assert ll.server == (
        "python -m sglang.launch_server --model-path Qwen/Qwen3-0.6B --tp-size 2 --pp-size 1 --dp-size 1 "
        "--max-running-requests 16 --chunked-prefill-size 8192 --mem-fraction-static 0.834"
    )
    assert " --port 30000 " in ll.bench and ll.problems == ()
