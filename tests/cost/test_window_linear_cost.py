"""Sliding-window attention on the engine's kernels and the chunked gated delta rule's pipeline, by hand."""

import pytest

from simcast.core.specs import Batch
from simcast.cost.ops import attention_ops, linear_attention
from simcast.cost.ops.compute import engine_roofline, roofline
from simcast.cost.ops.op_work import CostContext, OpWork
from simcast.inputs.loaders import load_device
from simcast.trace.ir import OpRecord, TensorArg

LENS = TensorArg(shape=("R",), dtype="int32")


def _sliding(heads=64, kv_heads=8, d=64, window=128) -> OpRecord:
    q = TensorArg(shape=("T", str(heads * d)), dtype="bf16")
    kc = TensorArg(shape=("S", str(kv_heads), str(d)), dtype="bf16")
    return OpRecord(op="simcast::attention_sliding", args=(q, kc, kc, LENS, LENS, 1.0, window), outputs=(q,), scope="l")


def _groups(b: Batch) -> set[tuple[int, int, int]]:
    return set(zip(b.query_lens, b.context_lens, b.counts))


def test_window_batch_decode_reads_at_most_the_window():
    b = attention_ops.window_batch(Batch(query_lens=(1, 1), context_lens=(50, 5000), counts=(3, 2)), 128)
    # 50 + 1 keys (under the window); 5000 + 1 capped at 128 keys = context 127
    assert _groups(b) == {(1, 50, 3), (1, 127, 2)}


def test_window_batch_prefill_pieces_by_hand():
    # 300 fresh tokens, window 128: 128 plain causal queries, then 172 = 128 + 44 queries seeing 128 keys each:
    # a full piece (128, 128 - 64) and a part (44, 128 - 22)
    b = attention_ops.window_batch(Batch(query_lens=(300,), context_lens=(0,), counts=(2,)), 128)
    assert _groups(b) == {(128, 0, 2), (128, 64, 2), (44, 106, 2)}
    # mean visible keys of a piece (context + (q + 1) / 2) is the window, to half a token
    assert 64 + (128 + 1) / 2 == pytest.approx(128, abs=0.5) and 106 + 45 / 2 == pytest.approx(128, abs=0.5)
    # a prompt inside the window is ordinary causal attention
    assert _groups(attention_ops.window_batch(Batch(query_lens=(100,), context_lens=(20,)), 128)) == {(100, 20, 1)}
    # a chunk after a long context: every query sees the window
    assert _groups(attention_ops.window_batch(Batch(query_lens=(64,), context_lens=(1000,)), 128)) == {(64, 96, 1)}


def test_sliding_op_uses_the_engine_kernel_on_the_capped_requests():
    dev = load_device("b200")
    rec = _sliding()
    long = Batch(query_lens=(1,), context_lens=(20_000,), counts=(32,))
    capped = Batch(query_lens=(1,), context_lens=(127,), counts=(32,))
    t_long = engine_roofline(
        rec, attention_ops.attention_sliding(rec, _ctx(dev, long, "vllm")), _ctx(dev, long), "bf16"
    )
    t_cap = engine_roofline(rec, attention_ops.attention_sliding(rec, _ctx(dev, capped)), _ctx(dev, capped), "bf16")
    assert t_long == t_cap  # the window caps what the kernel reads: the context beyond it costs nothing
    # without an engine the roofline formula is unchanged
    w = attention_ops.attention_sliding(rec, CostContext(batch=long, device=dev, tp_path=None))
    assert roofline(w, dev, "bf16")[0] == roofline(OpWork(flops=w.flops, bytes=w.bytes, unit="cube"), dev, "bf16")[0]


def _ctx(dev, batch, engine="vllm") -> CostContext:
    return CostContext(batch=batch, device=dev, tp_path=None, engine=engine)


def _gdn(hk=4, hv=8, d=128) -> OpRecord:
    qk = TensorArg(shape=("T", str(hk * d)), dtype="bf16")
    v = TensorArg(shape=("T", str(hv * d)), dtype="bf16")
    return OpRecord(op="simcast::gated_delta_rule", args=(qk, qk, v, LENS, LENS, d, d), outputs=(v,), scope="l")


def test_chunk_pipeline_bytes_by_hand():
    # dk = dv = 128, bf16, C = 64: k x3 + w x2 (5·128), u x2 + v_new x2 (4·128) in bf16; A fp32 written and
    # read (8·64) + its inverse bf16 written and read (4·64)
    assert linear_attention.chunk_bytes_per_token_head(128, 128, 2) == 9 * 128 * 2 + 12 * 64


def test_gated_delta_rule_prefill_and_decode_by_hand():
    dev = load_device("h100_sxm")
    rec = _gdn()
    pre = linear_attention.gated_delta_rule(rec, CostContext(batch=Batch.prefill(2, 100), device=dev, tp_path=None))
    io = 200 * (4 * 128 * 2 + 8 * 128 * 2) * 2 + 2 * 4 * 2  # q, k (4 heads), v, o (8 heads) bf16; the two lens
    state = 2 * 8 * 2 * 128 * 128 * 4  # per request and value head: read and write, fp32
    chunk_states = 2 * 2 * 8 * 2 * 128 * 128 * 2  # 2 requests x ceil(100 / 64) chunks x 8 heads, written + read
    assert pre.bytes == pytest.approx(io + state + 200 * 8 * (9 * 128 * 2 + 12 * 64) + chunk_states)
    assert pre.launches == 6
    dec = linear_attention.gated_delta_rule(rec, CostContext(batch=Batch.decode(3, 500), device=dev, tp_path=None))
    assert dec.launches == 1 and dec.flops == 3 * 8 * 7 * 128 * 128
    mixed = Batch(query_lens=(1, 100), context_lens=(500, 0))
    assert linear_attention.gated_delta_rule(rec, CostContext(batch=mixed, device=dev, tp_path=None)).launches == 7


def test_roofline_charges_each_launch():
    dev = load_device("h100_sxm")
    one = roofline(OpWork(flops=0.0, bytes=1e6, unit="cube"), dev, "bf16")[0]
    six = roofline(OpWork(flops=0.0, bytes=1e6, unit="cube", launches=6.0), dev, "bf16")[0]
    assert six - one == pytest.approx(5 * dev.efficiency.launch_overhead_s)
