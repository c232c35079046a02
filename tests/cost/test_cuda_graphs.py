"""CUDA-graph-aware launch floors: each engine's capture rule (hand-checked against its documented
defaults), host-bound floors only on eager steps, and engines agreeing on a captured decode step."""

import dataclasses

import pytest

from simcast.core.dtypes import PEAK_DTYPE
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.kernels import engine_cost
from simcast.cost.kernels.gemm import gemm_time_s
from simcast.engines import cuda_graphs as cg
from simcast.engines.sglang import sglang_max_bs
from simcast.inputs.loaders import load_device, load_model, shipped_devices


def test_vllm_captures_steps_up_to_512_tokens_decode_or_not():
    assert cg.captured("vllm", Batch.decode(512, 100))
    assert not cg.captured("vllm", Batch.decode(513, 100))
    assert cg.captured("vllm", Batch.prefill(1, 512))  # piecewise graphs cover mixed/prefill steps
    assert not cg.captured("vllm", Batch.prefill(1, 513))


def test_sglang_and_trtllm_capture_decode_only_up_to_their_batch():
    # SGLang on a 141 GiB H200 with TP 8: cuda_graph_max_bs 512; with TP 1: 256; on 192 GiB B200: 512
    assert sglang_max_bs(141, 8) == 512 and sglang_max_bs(141, 1) == 256 and sglang_max_bs(192, 1) == 512
    assert sglang_max_bs(24, 1) == 24 and sglang_max_bs(48, 4) == 160
    assert cg.captured("sglang", Batch.decode(256, 10), 141, 1)
    assert not cg.captured("sglang", Batch.decode(257, 10), 141, 1)
    assert not cg.captured("sglang", Batch.prefill(1, 16), 141, 8)  # prefill runs eagerly
    assert cg.captured("trtllm", Batch.decode(128, 10)) and not cg.captured("trtllm", Batch.decode(129, 10))
    assert not cg.captured("trtllm", Batch.prefill(1, 2))
    assert not cg.captured(None, Batch.decode(1, 10))


def test_simspec_default_follows_the_rule_and_can_be_forced():
    dev, model = load_device("h200_sxm"), load_model("Qwen/Qwen3-0.6B")
    spec = SimSpec(model=model, device=dev, parallel=ParallelSpec(tp=1), batch=Batch.decode(1, 100), engine="vllm")
    assert cg.step_captured(spec, spec.batch)
    assert not cg.step_captured(dataclasses.replace(spec, cuda_graph=False), spec.batch)
    assert not cg.step_captured(dataclasses.replace(spec, engine="sglang"), Batch.prefill(1, 100))


@pytest.mark.parametrize("device", shipped_devices())
def test_captured_block_fp8_floor_is_a_few_microseconds(device):
    """No block-fp8 GEMM fit carries more than 20 us of fixed floor into a captured step; a host floor
    (timed without CUDA graphs) applies to eager calls only."""
    dev = load_device(device)
    for name, ek in dev.engines.items():
        for g in ek.gemm:
            assert g.launch_s <= 20e-6, (device, name, g.dtype, g.launch_s)
            peak = dev.matmul_peak(PEAK_DTYPE[g.dtype])
            cap = float(gemm_time_s(g, peak, dev.hbm_bw_bytes_per_s, 1, 128, 128))
            eager = float(gemm_time_s(g, peak, dev.hbm_bw_bytes_per_s, 1, 128, 128, captured=False))
            assert eager == pytest.approx(max(cap, g.host_floor_s))


def test_vllm_block_fp8_host_floor_only_when_eager():
    dev = load_device("h200_sxm")
    fit, _ = engine_cost.pick(dev, "vllm", "gemm", "fp8_block")
    assert fit.host_floor_s > 1e-4  # ~180 us: vLLM's rows timed without CUDA graphs
    cap = engine_cost.gemm_s(dev, "vllm", "fp8_block", 1, 7168, 2048)
    eager = engine_cost.gemm_s(dev, "vllm", "fp8_block", 1, 7168, 2048, captured=False)
    assert cap[0] < 30e-6 and eager == (fit.host_floor_s, "latency")


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_deepseek_v3_batch1_decode_engines_agree_on_h200():
    """The same layout's captured decode step differs across engines by no more than their own fitted
    kernels explain (within 30 %), where a host-bound floor once made vLLM's 8x slower."""
    dev, model = load_device("h200_sxm"), load_model("deepseek-ai/DeepSeek-V3")
    from simcast.sim.simulate import simulate

    par = ParallelSpec(tp=8, ep=8)
    times = {
        e: simulate(SimSpec(model=model, device=dev, parallel=par, batch=Batch.decode(1, 1024), engine=e)).latency_s
        for e in ("vllm", "sglang", "trtllm")
    }
    assert max(times.values()) / min(times.values()) < 1.3, times
