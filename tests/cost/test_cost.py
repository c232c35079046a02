"""Hand-computed costs: GEMM FLOPs and bytes, attention, collectives, p2p."""

import pytest

from simcast.core.layout import Path
from simcast.core.specs import Batch
from simcast.cost.comm import time as comm
from simcast.cost.ops.compute import CostContext, OpWork, matmul_efficiency, op_cost, roofline
from simcast.sim.simulate import pp_message_bytes
from simcast.trace.ir import OpRecord, TensorArg

NV = Path(name="nv", bw_bytes_per_s=100e9, latency_s=2e-6, efficiency=0.5, cross_node=False)


def ctx(dev, batch):
    return CostContext(batch=batch, device=dev, tp_path=NV)


def test_gemm_flops_and_bytes(h100):
    # (T=4096, K=8192) x (N=1280, K)^T in bf16: 2*M*N*K FLOPs; x + w + out bytes
    rec = OpRecord(
        op="linear",
        scope="layer0",
        args=(TensorArg(shape=("T", "8192"), dtype="bf16"), TensorArg(shape=("1280", "8192"), dtype="bf16"), None),
        outputs=(TensorArg(shape=("T", "1280"), dtype="bf16"),),
    )
    c = op_cost(rec, ctx(h100, Batch.prefill(2, 2048)), "bf16", 1)
    assert c.flops == 2 * 4096 * 1280 * 8192
    assert c.bytes == 2 * (4096 * 8192 + 1280 * 8192 + 4096 * 1280)
    e = h100.efficiency
    eff_c = matmul_efficiency(h100, (4096, 1280, 8192), "bf16")  # calibrated shape curves
    expect = max(c.flops / (989.4e12 * eff_c), c.bytes / (3.35e12 * e.memory)) + e.launch_overhead_s
    assert c.time_s == pytest.approx(expect) and c.bound == "Cube"
    # decode: one token, weight-read bound
    d = op_cost(rec, ctx(h100, Batch.decode(1, 100)), "bf16", 1)
    assert d.bound == "Mem" and d.flops == 2 * 1280 * 8192


def test_broadcast_weight_counts_once(h100):
    rec = OpRecord(
        op="mystery_elementwise",
        scope="layer0",
        args=(
            TensorArg(shape=("T", "1024"), dtype="bf16"),
            TensorArg(shape=("T", "1024"), dtype="bf16", broadcast_dims=(0,)),
        ),
        outputs=(TensorArg(shape=("T", "1024"), dtype="bf16"),),
    )
    c = op_cost(rec, ctx(h100, Batch.prefill(1, 64)), "bf16", 1)
    assert c.bytes == 2 * (64 * 1024 + 1024 + 64 * 1024)
    assert "unregistered" in c.op  # labelled, never silent


def test_attention_flops_causal(h100):
    # 2 requests: (q=4, ctx=0) and (q=1, ctx=9); Hq=8, Hkv=2, D=64
    rec = OpRecord(
        op="simcast::attention",
        scope="layer0",
        args=(
            TensorArg(shape=("T", "512"), dtype="bf16"),
            TensorArg(shape=("S", "2", "64"), dtype="bf16"),
            TensorArg(shape=("S", "2", "64"), dtype="bf16"),
            None,
            None,
            True,
            0.125,
        ),
        outputs=(TensorArg(shape=("T", "512"), dtype="bf16"),),
    )
    b = Batch(query_lens=(4, 1), context_lens=(0, 9))
    c = op_cost(rec, ctx(h100, b), "bf16", 1)
    pairs = (4 * 0 + 4 * 5 / 2) + (1 * 9 + 1)  # 10 + 10 query-key pairs
    assert c.flops == pytest.approx(4 * 8 * 64 * pairs)


def test_collective_formulas_by_hand():
    # ring all-reduce of 1 MB over 4 ranks at 50 GB/s effective, 2 us latency
    mb = 1e6
    assert comm.ring_all_reduce_s(mb, 4, NV) == pytest.approx(6 * 2e-6 + 1.5 * mb / 50e9)
    assert comm.tree_all_reduce_s(mb, 4, NV) == pytest.approx(4 * 2e-6 + mb / 50e9)
    assert comm.all_reduce_s(mb, 4, NV) == min(comm.ring_all_reduce_s(mb, 4, NV), comm.tree_all_reduce_s(mb, 4, NV))
    assert comm.all_gather_s(mb, 4, NV) == pytest.approx(3 * 2e-6 + 0.75 * mb / 50e9)
    assert comm.all_reduce_s(mb, 1, NV) == 0.0
    assert comm.p2p_s(0, NV) == 0.0
    assert comm.p2p_s(mb, NV) == pytest.approx(2e-6 + mb / 50e9)


def test_pp_message_bytes(llama70b):
    # 2048 tokens x 8192 hidden x 2 bytes, hidden + residual
    assert pp_message_bytes(2048, llama70b, 2, 1) == 2048 * 8192 * 2 * 2 == 67108864
    assert pp_message_bytes(2048, llama70b, 1, 4) == 2048 * 8192 * 2 // 4


def test_roofline_comm_passthrough(h100):
    assert roofline(OpWork(flops=0, bytes=10, unit="comm", comm_s=1e-3), h100, "bf16") == (1e-3, "Comm")


def test_missing_vector_peak_is_an_error_naming_the_field(qwen06b, h100):
    # a profile with a bf16 vector peak only, used with an fp16 model: never a silent 1 FLOP/s
    import dataclasses

    from simcast.core.errors import SimcastInputError
    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.sim.simulate import simulate

    dev = dataclasses.replace(h100, vector_flops_per_s={"bf16": 133.8e12})
    with pytest.raises(SimcastInputError, match=r"^device\.compute\.vector_flops_per_s\.fp16: got 'missing'; "):
        dev.vector_peak("fp16")
    fp16 = dataclasses.replace(qwen06b, dtype="fp16")
    with pytest.raises(SimcastInputError, match=r"device\.compute\.vector_flops_per_s\.fp16"):
        simulate(SimSpec(model=fp16, device=dev, parallel=ParallelSpec(), batch=Batch.prefill(1, 128)))
    with pytest.raises(SimcastInputError, match=r"device\.compute\.matmul_flops_per_s\.fp8"):
        dataclasses.replace(h100, matmul_flops_per_s={"bf16": 989.4e12}).matmul_peak("fp8")
    assert dev.vector_peak("bf16") == 133.8e12
    # fp8 has no vector arithmetic: elementwise work runs at the fp32 vector rate (labelled in simulate's output)
    assert h100.vector_peak("fp8") == h100.vector_flops_per_s["fp32"]
