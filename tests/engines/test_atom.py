"""ATOM's decisions (simcast/engines/atom.py), each checked by hand against its source (ROCm/ATOM@ffdf3bb5)."""

from __future__ import annotations

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch
from simcast.engines import get_engine
from simcast.engines.partition import partition_layers
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device
from simcast.serving.step import step_cycle_s

ENGINE = get_engine("atom")


@pytest.mark.parametrize("device", ["mi300x", "mi325x", "mi355x"])
def test_scheduler_defaults_from_arg_utils(device: str) -> None:
    pol = engine_policy("atom", load_device(device))
    # arg_utils.py: max_num_batched_tokens 16384, max_num_seqs 512, block 16, gpu_memory_utilization 0.9 of total
    assert (pol.max_num_batched_tokens, pol.max_num_seqs, pol.kv_block_tokens) == (16384, 512, 16)
    assert (pol.mem_fraction, pol.mem_fraction_of) == (0.9, "total")
    # scheduler.py Scheduler.schedule: prefill first, chunked prefill, preemption (on-demand blocks)
    assert not pol.decode_first and pol.chunked_prefill and pol.kv_admission == "on_demand"


def test_nvidia_devices_are_refused() -> None:
    with pytest.raises(SimcastInputError, match="AMD Instinct"):
        engine_policy("atom", load_device("h100_sxm"))


def test_decode_graphs_up_to_512_requests_prefill_eager() -> None:
    def decode(n: int) -> Batch:
        return Batch(query_lens=(1,), context_lens=(100,), counts=(n,))

    assert ENGINE.captured(decode(512), 192.0, 1) and not ENGINE.captured(decode(513), 192.0, 1)
    assert not ENGINE.captured(Batch(query_lens=(64,), context_lens=(0,), counts=(1,)), 192.0, 1)


def test_memory_flag_is_vllms_spelling_and_partition_is_vllms() -> None:
    assert ENGINE.accepts_memory_flag("vllm") and not ENGINE.accepts_memory_flag("sglang")
    assert ENGINE.memory_flag == ""  # declared once, by vLLM
    assert partition_layers(22, 4, ENGINE.partition_name) == (5, 6, 6, 5)


def test_kernels_borrow_vllms_rocm_fits_labelled() -> None:
    from simcast.cost.kernels.engine_cost import label

    assert ENGINE.kernel_fallback[0] == "vllm"
    assert label(load_device("mi300x"), "atom", "gemm") == "vllm fit (fallback: no atom fit on mi300x)"  # bf16
    for dev in ("mi300x", "mi325x", "mi355x"):  # aiter's own tables (scripts/fit_aiter.py): no fallback label
        assert label(load_device(dev), "atom", "gemm", "fp8_block") == "atom fit"
        assert label(load_device(dev), "atom", "moe", "fp8_block") == "atom fit"
        assert label(load_device(dev), "atom", "decode") == f"vllm fit (fallback: no atom fit on {dev})"


def test_rocm_kernel_choices_are_declared_by_each_engine() -> None:
    for name in ("atom", "sglang", "vllm"):
        kinds = get_engine(name).rocm_kernels
        assert set(kinds) == {"gemm", "attention", "moe"} and all("aiter" in v for v in kinds.values())
    assert "default False" in get_engine("vllm").rocm_kernels["gemm"]  # vLLM's aiter switch is opt-in
    assert get_engine("trtllm").rocm_kernels == {}  # TensorRT-LLM does not run on ROCm


def test_cpu_per_step_hidden_behind_the_gpu() -> None:
    """model_runner.py: is_deferred_out at PP 1, so step n+1 is prepared and launched while step n runs: a decode
    step of 4 requests costs max(CPU, GPU), here the GPU's 10 ms, not 10 ms + 2.02 ms (ROCm/ATOM@58c8a2d1)."""
    pol = engine_policy("atom", load_device("mi355x"))
    cpu_s = pol.step_overhead_s + 4 * pol.per_request_overhead_s  # 2 ms + 4 x 5 us
    assert pol.overlap_cpu and cpu_s == pytest.approx(2.02e-3)
    assert step_cycle_s((10e-3,), cpu_s, 1, pol.overlap_cpu) == pytest.approx(10e-3)
    assert step_cycle_s((1e-3,), cpu_s, 1, pol.overlap_cpu) == pytest.approx(2.02e-3)  # a CPU-bound step
