"""End-to-end invariants of simulate(): the RFC's test plan plus physics checks."""

import pytest

from simcast.core.assumption import Topic, of_topic
from simcast.core.shards import param_count, sharded_dims
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.inputs.loaders import load_model
from simcast.render.assumption_text import assumption_text
from simcast.render.breakdown import breakdown_line
from simcast.sim.simulate import simulate, split_batch


def run(model, dev, tp=1, pp=1, batch=None, m=None, **kw):
    batch = batch or Batch.prefill(4, 512)
    return simulate(
        SimSpec(
            model=model, device=dev, parallel=ParallelSpec(tp=tp, pp=pp), batch=batch, num_microbatches=m or pp, **kw
        )
    )


def test_pp1_has_no_pp_comm_or_bubble(qwen06b, h100):
    r = run(qwen06b, h100, tp=2, pp=1)
    assert r.runtime.send_recv_events == ()
    assert r.breakdown["communication"] == 0.0 and r.breakdown["bubble"] == 0.0
    assert r.latency_s == pytest.approx(r.stages[0].compute_s)
    assert "PP Compute" not in breakdown_line(r)


@pytest.mark.parametrize("pp,partition", [(2, "vllm"), (4, "uniform"), (3, "vllm"), (4, "10,6,6,6")])
def test_stage_layers_sum_to_model(qwen06b, h100, pp, partition):
    r = run(qwen06b, h100, pp=pp, partition=partition)
    assert sum(s.num_layers for s in r.stages) == qwen06b.num_layers
    assert r.stages[0].start_layer == 0 and r.stages[-1].end_layer == qwen06b.num_layers
    assert r.breakdown["bubble"] >= 0.0


def test_send_recv_directions_and_bytes(qwen06b, h100):
    r = run(qwen06b, h100, pp=3, batch=Batch.prefill(3, 100), m=3)
    ev = r.runtime.send_recv_events
    assert {(e.src_stage, e.dst_stage) for e in ev} == {(0, 1), (1, 2)}
    # each microbatch is one request of 100 tokens: hidden + residual in bf16
    assert all(e.message_bytes == 100 * qwen06b.hidden_size * 2 * 2 for e in ev)
    s0, s1, s2 = r.stages
    one_way = ev[0].latency_s
    # the receiver pays (it waits in irecv before computing); the sender's isend does not hold it
    assert s0.comm_s == 0.0  # sends only
    assert s1.comm_s == pytest.approx(one_way)  # incoming only, its outgoing send is free
    assert s2.comm_s == pytest.approx(one_way)  # incoming only


def test_one_microbatch_latency_counts_each_hop_once(qwen06b, h100):
    # M = 1: the critical path is compute0 -> hop -> compute1 -> hop -> compute2, each hop once
    r = run(qwen06b, h100, pp=3, batch=Batch.prefill(1, 100), m=1)
    hops = [e.latency_s for e in r.runtime.send_recv_events]
    assert len(hops) == 2
    assert r.latency_s == pytest.approx(sum(s.compute_s for s in r.stages) + sum(hops), rel=1e-12)
    assert r.breakdown["communication"] == pytest.approx(sum(hops), rel=1e-12)


@pytest.mark.parametrize(
    "devices_per_node,link_s",
    [
        # hand-computed on tests/data/golden_device.yaml (no collective fits: formulas), Qwen3-0.6B hidden 1024,
        # one 512-token request, bf16, hidden + residual: 2 tensors of 512*1024*2 = 1,048,576 B, TP 2 shards each.
        # TP-sharded send: 1,048,576 B over the PP hop;
        # test-nvlink: 3e-6 + 1048576 / (4e11*0.8) = 6.2768e-6 s; test-ib: 8e-6 + 1048576 / (5e10*0.8) = 34.2144e-6 s
        (8, 6.2768e-6),
        (2, 34.2144e-6),
    ],
)
def test_tp_sharded_send_costs_the_receivers_all_gather(qwen06b, devices_per_node, link_s):
    from pathlib import Path

    from simcast.inputs.loaders import load_device

    dev = load_device(str(Path(__file__).parents[1] / "data" / "golden_device.yaml"), devices_per_node=devices_per_node)
    kw = dict(parallel=ParallelSpec(tp=2, pp=2), batch=Batch.prefill(1, 512), num_microbatches=1)
    r = simulate(SimSpec(model=qwen06b, device=dev, tp_sharded_send=True, **kw))
    (ev,) = r.runtime.send_recv_events
    assert ev.message_bytes == 1_048_576
    assert ev.latency_s == pytest.approx(link_s, rel=1e-12)
    # the receiving stage's TP group (ranks 2, 3: one node in both cases) all-gathers each tensor over test-nvlink:
    # ring (n-1)*3e-6 + (n-1)/n * 1048576 / (4e11*0.8) = 4.6384e-6 s per tensor, 2 tensors
    assert ev.all_gather_s == pytest.approx(2 * 4.6384e-6, rel=1e-12)
    assert r.stages[0].comm_s == 0.0
    assert r.stages[1].comm_s == pytest.approx(link_s + 9.2768e-6, rel=1e-12)
    (sharded,) = of_topic(r.assumptions, Topic.TP_SHARDED_SEND)
    assert "all-gather" in assumption_text(sharded) and "TP group" in assumption_text(sharded)
    full = simulate(SimSpec(model=qwen06b, device=dev, **kw))
    assert full.runtime.send_recv_events[0].all_gather_s == 0.0
    assert not of_topic(full.assumptions, Topic.TP_SHARDED_SEND)


def test_fill_drain_with_per_microbatch_costs(qwen06b, h100):
    r = run(qwen06b, h100, pp=2, batch=Batch.prefill(4, 256), m=4)
    st = r.runtime.stage_times_s
    assert r.latency_s == pytest.approx(sum(st) + 3 * max(st))
    one = run(qwen06b, h100, pp=2, batch=Batch.prefill(1, 256), m=1)
    # a microbatch here is exactly one request of the 4-request batch: same stage cost
    assert st == pytest.approx(one.runtime.stage_times_s)
    assert one.breakdown["bubble"] == 0.0


def test_microbatch_edge_cases():
    b = Batch.prefill(5, 10)
    assert [m.num_requests for m in split_batch(b, 2)] == [3, 2]
    assert split_batch(b, 1) == (b,)
    chunks = split_batch(Batch.prefill(1, 10), 4)  # one long prompt: chunked prefill
    assert [c.query_lens for c in chunks] == [(3,), (3,), (2,), (2,)]
    assert [c.counts for c in chunks] == [(1,), (1,), (1,), (1,)]
    assert [c.context_lens for c in chunks] == [(0,), (3,), (6,), (8,)]
    assert len(split_batch(Batch.decode(2, 50), 4)) == 2  # cannot split 2 decode tokens 4 ways


def test_kv_cache_counts_active_layers_only(qwen06b, h100):
    b = Batch.decode(8, 1000)
    r1, r4 = run(qwen06b, h100, pp=1, batch=b), run(qwen06b, h100, pp=4, batch=b)
    per_layer = 2 * qwen06b.num_kv_heads * qwen06b.head_dim * 2 * b.kv_tokens
    assert r1.stages[0].kv_cache_bytes == per_layer * qwen06b.num_layers
    assert [s.kv_cache_bytes for s in r4.stages] == [per_layer * s.num_layers for s in r4.stages]
    assert r4.max_stage_kv_cache_bytes < r1.max_stage_kv_cache_bytes


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,tp",
    [("meta-llama/Llama-3.1-70B", 4), ("Qwen/Qwen3-32B", 8), ("meta-llama/Llama-3.2-1B", 2), ("Qwen/Qwen2.5-7B", 4)],
)
def test_weights_over_stages_times_tp_equal_model_bytes(name, tp, h100):
    m = load_model(name)
    r = run(m, h100, tp=tp, pp=4)
    total = sum(s.weight_bytes for s in r.stages) * tp
    if m.tie_word_embeddings:  # vLLM keeps the tied embedding on the first and the last stage
        total -= m.vocab_size * m.hidden_size * m.dtype_bytes
    assert total == pytest.approx(param_count(m) * m.dtype_bytes, rel=0.01)


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-8B"])
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_traced_flops_match_analytic(name, h100):
    m = load_model(name)
    tp, pp = 2, 2
    b = Batch(query_lens=(300, 1, 57), context_lens=(0, 900, 20))
    r = run(m, h100, tp=tp, pp=pp, batch=b, m=1)
    lin = sum(o.flops * o.count for s in r.stages for o in s.ops if o.op == "linear") * tp
    attn = sum(o.flops * o.count for s in r.stages for o in s.ops if o.op == "simcast::attention") * tp
    h, d = m.hidden_size, m.head_dim
    layer_linear = h * (m.num_heads + 2 * m.num_kv_heads) * d + m.num_heads * d * h + 3 * h * m.intermediate_size
    bias = (m.num_heads + 2 * m.num_kv_heads) * d if m.attention_bias else 0
    expect_lin = (
        2 * b.num_tokens * layer_linear * m.num_layers
        + b.num_tokens * bias * m.num_layers
        + 2 * b.num_requests * h * m.vocab_size
    )
    pairs = sum(q * c + q * (q + 1) / 2 for q, c in zip(b.query_lens, b.context_lens))
    expect_attn = 4 * m.num_heads * d * pairs * m.num_layers
    assert lin == pytest.approx(expect_lin, rel=0.01)
    assert attn == pytest.approx(expect_attn, rel=0.01)


def test_memory_falls_with_pp_and_tp_sharded_send(llama70b, h100):
    b = Batch.prefill(8, 2048)
    mem = [run(llama70b, h100, tp=4, pp=pp, batch=b).max_stage_weight_bytes for pp in (1, 2, 4)]
    assert mem[0] > mem[1] > mem[2]
    full = run(llama70b, h100, tp=4, pp=2, batch=b)
    sharded = run(llama70b, h100, tp=4, pp=2, batch=b, tp_sharded_send=True)
    assert sharded.runtime.send_recv_events[0].message_bytes * 4 == full.runtime.send_recv_events[0].message_bytes


def test_cross_node_pp_hop_uses_inter_node_link(llama70b, h100):
    from simcast.inputs.loaders import load_device

    dev4 = load_device("h100_sxm", devices_per_node=4)
    r = simulate(
        SimSpec(
            model=llama70b,
            device=dev4,
            parallel=ParallelSpec(tp=4, pp=2),
            batch=Batch.prefill(2, 1024),
            num_microbatches=2,
        )
    )
    ev = r.runtime.send_recv_events[0]
    assert ev.link == dev4.links.inter_node.name
    intra = run(llama70b, h100, tp=4, pp=2, batch=Batch.prefill(2, 1024))
    assert ev.latency_s > 5 * intra.runtime.send_recv_events[0].latency_s


def test_tp_shards_checked(llama70b):
    from simcast.core.errors import SimcastInputError

    with pytest.raises(SimcastInputError, match="num_attention_heads=64"):
        sharded_dims(llama70b, 3)
    assert sharded_dims(llama70b, 16).kv_heads == 1  # kv heads replicated beyond 8
