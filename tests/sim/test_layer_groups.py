"""SGLang's dense MLP layers and LM head with DP attention (issue 26 item 1; simcast.engines.sglang_layers):
``--moe-dense-tp-size 1`` and ``--enable-dp-lm-head`` against SGLang's default (FULL mode), each checked by hand
on DeepSeek-V3 (hidden 7168, dense intermediate 18432, vocab 129280) at attention DP 2 x attention TP 4."""

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.layout import Path
from simcast.core.specs import Batch, ParallelSpec
from simcast.cost.comm import time as comm
from simcast.cost.ops.dense_ops import dp_comm
from simcast.cost.ops.op_work import CostContext
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.sim.simulate import stage_keys
from simcast.trace.ir import OpRecord, TensorArg, shape_fn

H, I_DENSE, VOCAB = 7168, 18432, 129280
PAR = ParallelSpec(tp=4, dp=2, ep=8, dp_attention=True)  # SGLang --tp-size 8 --dp-size 2 --enable-dp-attention


@pytest.fixture(scope="module")
def ds():
    return load_model("deepseek-ai/DeepSeek-V3")


def _par(ds, engine="sglang", **flags):
    dev = load_device("h200_sxm")
    return Deployment.build(model=ds, device=dev, parallel=PAR, engine=engine, **flags).parallel


def test_sglang_rule(ds):
    """SGLang by default gathers (FULL mode) both; the flags move each back; other engines keep both in the
    attention-TP group and refuse SGLang's flags; --moe-dense-tp-size takes 1 only (server_args.py)."""
    assert (_par(ds).dense_ffn, _par(ds).lm_head) == ("gathered", "gathered")
    p = _par(ds, moe_dense_tp_size=1, enable_dp_lm_head=True)
    assert (p.dense_ffn, p.lm_head) == ("scattered", "attention")
    assert (_par(ds, engine="vllm").dense_ffn, _par(ds, engine="vllm").lm_head) == ("", "")
    with pytest.raises(SimcastInputError, match="SGLang's"):
        _par(ds, engine="vllm", moe_dense_tp_size=1)
    with pytest.raises(SimcastInputError, match="1 only"):
        _par(ds, moe_dense_tp_size=2)
    # replicas without DP attention: no gather, SGLang runs each replica's dense layers in its own TP group
    dev = load_device("h200_sxm")
    rep = Deployment.build(model=ds, device=dev, parallel=ParallelSpec(tp=8, dp=2, ep=8, moe_dp=2), engine="sglang")
    assert (rep.parallel.dense_ffn, rep.parallel.lm_head) == ("", "")


def test_stage_key_shapes_by_hand(ds):
    """The dense MLP's per-rank intermediate and the LM head's vocab rows in each group: FULL over the 8 GPUs
    18432/8 = 2304 and ceil(129280/8) = 16160; --moe-dense-tp-size 1 the whole 18432; the attention-TP group
    (vLLM, --enable-dp-lm-head) 18432/4 = 4608 and 129280/4 = 32320 (the key's default fields)."""
    (full,) = stage_keys(ds, _par(ds), "uniform")
    assert (full.dense_mode, full.dense_group, full.dense_intermediate) == ("gathered", 8, I_DENSE // 8)
    assert (full.head_mode, full.head_group, full.head_vocab) == ("gathered", 8, -(-VOCAB // 8))
    (flags,) = stage_keys(ds, _par(ds, moe_dense_tp_size=1, enable_dp_lm_head=True), "uniform")
    assert (flags.dense_mode, flags.dense_intermediate, flags.head_mode) == ("scattered", I_DENSE, "")
    (plain,) = stage_keys(ds, _par(ds, engine="vllm"), "uniform")
    assert (plain.dense_mode, plain.head_mode, plain.intermediate, plain.vocab_shard) == ("", "", 4608, 32320)


def _ctx(path):
    return CostContext(batch=Batch.decode(8, 1024), device=load_device("h200_sxm"), tp_path=path, moe_path=path)


def test_dp_comm_costs_by_hand():
    """The LM head's logits all-gather without --enable-dp-lm-head: (2 DP ranks x R rows, 16160 x 8 columns) bf16
    all-gathered over 8 ranks; the gather of the last tokens: 2R x 7168 bf16; the scatter a local copy."""
    path = Path(name="nvlink", bw_bytes_per_s=450e9, latency_s=2e-6, efficiency=1.0, cross_node=False)
    ctx, r = _ctx(path), 8  # 8 decode requests: R = 8 rows per DP rank
    logits = TensorArg(shape=("2*R", "16160"), dtype="bf16")
    rec = OpRecord(
        op="simcast::dp_comm",
        args=(logits, logits, "all_gather_cols", 8, 8, "dp"),
        outputs=(TensorArg(shape=("2*R", "129280"), dtype="bf16"),),
        scope="post",
    )
    w = dp_comm(rec, ctx)
    out_bytes = 2 * r * 16160 * 8 * 2
    assert w.bytes == out_bytes and w.comm_s == pytest.approx(comm.all_gather_s(out_bytes, 8, path))
    assert w.comm_s == pytest.approx(7 * 2e-6 + 7 / 8 * out_bytes / 450e9)  # ring: 7 steps of 1/8 of the bytes
    last = TensorArg(shape=("R", str(H)), dtype="bf16")
    gather = OpRecord(
        op="simcast::dp_comm",
        args=(last, last, "gather_rows", 8, 2, "dp"),
        outputs=(TensorArg(shape=("2*R", str(H)), dtype="bf16"),),
        scope="post",
    )
    assert dp_comm(gather, ctx).comm_s == pytest.approx(7 * 2e-6 + 7 / 8 * (2 * r * H * 2) / 450e9)
    scatter = OpRecord(
        op="simcast::dp_comm",
        args=(logits, logits, "scatter_rows", 1, 2, "dp"),
        outputs=(TensorArg(shape=("R", "16160"), dtype="bf16"),),
        scope="post",
    )
    ws = dp_comm(scatter, ctx)
    assert (ws.unit, ws.bytes, ws.comm_s) == ("vec", 2 * r * 16160 * 2, 0.0)


def _layer_ops(trace, scope):
    return [o for o in trace.ops if o.scope == scope]


def _mnk(rec, t):
    x, w = rec.args[0], rec.args[1]
    m = shape_fn(x.shape[0])(t, 1, 1)
    n, k = (shape_fn(e)(t, 1, 1) for e in w.shape)
    return m, n, k


@pytest.mark.slow
def test_dense_layer_trace_by_hand(ds):
    """DeepSeek-V3's first (dense) layer at T = 64 tokens per rank, attention DP 2 x TP 4:
    the attention-TP group (vLLM): gate_up (64, 9216, 7168), down (64, 7168, 4608), an all-reduce over 4 after it;
    SGLang FULL: gate_up (128, 4608, 7168) on both DP ranks' rows, one all-reduce over 8 ranks, no TP-4 one;
    --moe-dense-tp-size 1: gate_up (16, 36864, 7168) on 64/4 rows, down (16, 7168, 18432), no all-reduce at all.
    The LM head: N = 32320 (attention TP), 16160 on 2 x R gathered rows (SGLang default)."""
    from simcast.trace.cache import get_trace

    t = 64
    for engine, flags, up, down, reduces in (
        ("vllm", {}, (t, 9216, H), (t, H, 4608), [("simcast::all_reduce", 4), ("simcast::all_reduce", 4)]),
        ("sglang", {}, (2 * t, 2 * 2304, H), (2 * t, H, 2304), [("simcast::dp_comm", 8)]),
        ("sglang", {"moe_dense_tp_size": 1}, (t // 4, 2 * I_DENSE, H), (t // 4, H, I_DENSE), []),
    ):
        (key,) = stage_keys(ds, _par(ds, engine=engine, **flags), "uniform")
        ops = _layer_ops(get_trace(key), "layer0")
        lin = [o for o in ops if o.op in ("linear", "simcast::quant_linear")][-2:]  # the MLP's two GEMMs
        assert [_mnk(o, t) for o in lin] == [up, down]
        reduces_got = [(o.op, o.args[1]) for o in ops if o.op == "simcast::all_reduce"]
        reduces_got += [(o.op, o.args[3]) for o in ops if o.op == "simcast::dp_comm" and o.args[2] == "all_reduce"]
        assert reduces_got == reduces
    # SGLang FULL: the attention's TP-4 all-reduce is folded into the gather over the 8 GPUs
    assert [
        o.args[2]
        for o in _layer_ops(get_trace(stage_keys(ds, _par(ds), "uniform")[0]), "layer0")
        if o.op == "simcast::dp_comm"
    ] == ["gather_rows", "all_reduce", "scatter_rows"]
