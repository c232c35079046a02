"""Chunked local attention (Llama-4) and local-attention KV memory, by hand."""

import pytest

from simcast.core.memory import stage_kv_bytes_for
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.cost.ops.attention_ops import chunk_pieces
from simcast.engines.partition import build_pipeline_stage_plan
from simcast.inputs.loaders import load_device, load_model
from simcast.sim.simulate import simulate

SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def test_chunk_pieces_split_at_chunk_boundaries():
    assert chunk_pieces(1, 20000, 8192) == [(1, 20000 - 2 * 8192)]  # decode: only its own chunk's keys
    assert chunk_pieces(10, 8190, 8192) == [(2, 8190), (8, 0)]  # a prefill crossing a boundary
    assert chunk_pieces(20000, 0, 8192) == [(8192, 0), (8192, 0), (3616, 0)]


def _stage_kv(model, tokens):
    sd = sharded_dims(model, 1)
    info = build_pipeline_stage_plan(model.num_layers, 1, "uniform", model.tie_word_embeddings).stage_infos[0]
    return stage_kv_bytes_for(model, sd, info, 1, tokens)


@pytest.mark.parametrize("name,local,window", [(SCOUT, 36, 8192), ("openai/gpt-oss-20b", 12, 128)])
def test_local_layers_kv_stops_growing_at_the_window(name, local, window):
    """Past the window (chunk), a request's KV grows by the full-attention layers' share only."""
    m = load_model(name)
    per_layer_token = 2 * m.num_kv_heads * m.head_dim * m.dtype_bytes
    full = m.num_layers - local
    assert _stage_kv(m, window) == per_layer_token * m.num_layers * window
    for extra in (1, 1000, 50_000):
        grown = _stage_kv(m, window + extra) - _stage_kv(m, window)
        assert grown == per_layer_token * full * extra


def test_llama4_layer_pattern():
    scout, mav = load_model(SCOUT), load_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    # NoPE (global) layers: every 4th (HF's default no_rope_layer_interval 4); the others chunked
    assert [i for i in range(48) if not scout.is_chunked(i)] == list(range(3, 48, 4))
    assert all(scout.is_moe_layer(i) for i in range(48))
    assert [i for i in range(6) if mav.is_moe_layer(i)] == [1, 3, 5]  # interleave_moe_layer_step 2


@pytest.mark.slow  # traces Scout (~10 s)
def test_chunked_decode_reads_one_chunk_by_hand():
    """Decode at context 20000: a chunked layer attends to 20000 - 2·8192 + 1 = 3617 keys, a NoPE layer 20001."""
    m = load_model(SCOUT)
    spec = SimSpec(model=m, device=load_device("h100_sxm"), parallel=ParallelSpec(tp=4), batch=Batch.decode(2, 20000))
    ops = simulate(spec).stages[0].ops
    ch = [o for o in ops if o.op == "simcast::attention_chunked"]
    full = [o for o in ops if o.op == "simcast::attention"]
    hq, d = 40 // 4, 128
    assert ch[0].flops == pytest.approx(4.0 * hq * d * 2 * 3617)
    assert full[0].flops == pytest.approx(4.0 * hq * d * 2 * 20001)
