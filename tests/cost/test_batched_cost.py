"""The many-batch costing path (cost/ops/batched.py, sim/batched.py, StepCoster.stage_times_many / reports)
equals the scalar path (simulate, one op_cost per op and batch) on every shipped model family and engine."""

import math

import pytest

from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.steady.model import ServingConfig, Workload, coster_for, prefill_spec
from simcast.sim.simulate import simulate

REL = 1e-9

BATCHES = [
    Batch.decode(1, 1),
    Batch.decode(3, 700),
    Batch.decode(64, 2304),
    Batch.decode(600, 5000),
    Batch.prefill(1, 1),
    Batch.prefill(1, 129),
    Batch.prefill(2, 2048),
    Batch(query_lens=(1, 2048), context_lens=(2304, 0), counts=(7, 1)),
    Batch(query_lens=(1, 512), context_lens=(2304, 1536), counts=(150, 3)),
    Batch(query_lens=(1, 700, 33), context_lens=(100, 5000, 17), counts=(5, 1, 3)),
    Batch(query_lens=tuple(range(1, 80)), context_lens=tuple(range(0, 790, 10)), counts=(2,) * 79),  # > 64 groups
]

CASES = [
    ("Qwen/Qwen3-0.6B", ParallelSpec(tp=2, pp=2), "auto"),  # dense, q/k-norm, tied embeddings
    ("meta-llama/Llama-3.1-8B", ParallelSpec(tp=2, pp=2), "fp8"),  # dense, fp8 KV cache
    ("Qwen/Qwen3-30B-A3B", ParallelSpec(tp=2, pp=1, dp=2, ep=4), "auto"),  # MoE with expert parallelism
    ("deepseek-ai/DeepSeek-V3", ParallelSpec(tp=8, pp=2), "auto"),  # MLA + MoE, fp8 block weights
    ("openai/gpt-oss-20b", ParallelSpec(tp=2, pp=2), "auto"),  # sliding window + MoE, mxfp4 experts
    ("Qwen/Qwen3-235B-A22B-FP8", ParallelSpec(tp=4, pp=2), "auto"),  # fp8 dense and expert GEMMs
]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-300)


def _same_ops(rep, ref) -> None:
    assert len(rep.stages) == len(ref.stages)
    for s1, s2 in zip(rep.stages, ref.stages):
        assert len(s1.microbatch_ops) == len(s2.microbatch_ops)
        for m1, m2 in zip(s1.microbatch_ops, s2.microbatch_ops):
            assert [(o.op, o.scope, o.count, o.bound) for o in m1] == [(o.op, o.scope, o.count, o.bound) for o in m2]
            for o1, o2 in zip(m1, m2):
                assert _close(o1.time_s, o2.time_s) and _close(o1.flops, o2.flops) and _close(o1.bytes, o2.bytes), (
                    o1,
                    o2,
                )
                assert type(o1.bytes) is type(o2.bytes)  # ints stay ints (JSON outputs)
    assert all(_close(x, y) for x, y in zip(rep.runtime.stage_times_s, ref.runtime.stage_times_s))
    assert _close(rep.latency_s, ref.latency_s)
    assert rep.assumptions == ref.assumptions
    assert rep.max_stage_memory_bytes == ref.max_stage_memory_bytes


@pytest.fixture(scope="module")
def h100():
    return load_device("h100_sxm")


@pytest.mark.parametrize("name,par,kv", CASES, ids=[c[0].split("/")[1] for c in CASES])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "none"])
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_many_batch_path_equals_simulate(name, par, kv, engine, h100):
    cfg = ServingConfig(
        deployment=Deployment(model=load_model(name), device=h100, parallel=par, engine=engine, kv_cache_dtype=kv),
        workload=Workload(input_length=2048, output_length=256),
        batch_size=8,
    )
    coster = coster_for(cfg)
    times = coster.stage_times_many(BATCHES)
    reports = coster_for(cfg).reports(BATCHES)  # a fresh coster: reports from their own pass
    for b, t, rep in zip(BATCHES, times, reports):
        ref = simulate(coster.spec(b))
        assert all(_close(x, y) for x, y in zip(t, ref.runtime.stage_times_s)), (b, t, ref.runtime.stage_times_s)
        _same_ops(rep, ref)
    # one batch asked for alone, and a prompt's chunks as microbatches (the optimizer's prefill)
    assert coster_for(cfg).stage_times_s(BATCHES[2]) == times[2]
    pre = prefill_spec(cfg)
    for m in (1, 3):
        spec = SimSpec(**{**{f: getattr(pre, f) for f in pre.__dataclass_fields__}, "num_microbatches": m})
        _same_ops(coster.simulate(spec), simulate(spec))


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_prefetch_fills_the_memo_once_and_answers_from_it(h100):
    cfg = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"), device=h100, parallel=ParallelSpec(tp=1, pp=2), engine="vllm"
        ),
        workload=Workload(input_length=512, output_length=64),
        batch_size=4,
    )
    coster = coster_for(cfg)
    coster.prefetch(BATCHES[:6], reports=BATCHES[2:4])
    assert len(coster._memo) == 6 and set(coster._memo.reports) == set(BATCHES[2:4])
    layout = coster._memo.layout
    assert layout is not None
    layout.op_arrays = None  # any further costing would fail: the memo answers
    assert coster.stage_times_many(BATCHES[:6]) == [simulate(coster.spec(b)).runtime.stage_times_s for b in BATCHES[:6]]
    assert coster.report(BATCHES[3]).runtime.stage_times_s == coster.stage_times_s(BATCHES[3])


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_frontier_prefetch_covers_every_batch_the_estimate_asks_for(h100):
    """The optimizer dry-runs estimate_serving to cost its frontier in one pass; the real run then finds every
    batch already costed (a batch chosen from a cost would be costed alone: still right, only slower)."""
    from dataclasses import replace

    from simcast.serving.search.layouts import concurrency_grid
    from simcast.serving.steady.model import estimate_serving
    from simcast.serving.step import BatchRecorder

    cfg = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"), device=h100, parallel=ParallelSpec(tp=1, pp=2), engine="vllm"
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=1,
    )
    coster = coster_for(cfg)
    prefill = coster.simulate(prefill_spec(cfg))
    rec = BatchRecorder.like(coster, placeholder=prefill)
    grid = concurrency_grid(256)
    for b in grid:
        estimate_serving(replace(cfg, batch_size=b), prefill=prefill, coster=rec)
    coster.prefetch(list(rec.wanted), list(rec.wanted_reports))
    costed, reported = len(coster._memo), len(coster._memo.reports)
    fresh = coster_for(cfg)
    for b in grid:
        got = estimate_serving(replace(cfg, batch_size=b), prefill=prefill, coster=coster)
        ref = estimate_serving(replace(cfg, batch_size=b), prefill=simulate(prefill_spec(cfg)), coster=fresh)
        assert got.tpot_s == ref.tpot_s and got.ttft_s == ref.ttft_s and got.tokens_per_s == ref.tokens_per_s
        assert got.decode.runtime.stage_times_s == ref.decode.runtime.stage_times_s
    assert (len(coster._memo), len(coster._memo.reports)) == (costed, reported)  # nothing costed after the prefetch


def test_gemm_many_equals_scalar_path_on_an_n_banded_tile_rule():
    """L40S SGLang fp8 (sgl-kernel's SM89 tiles by M and N bands): the batched GEMM path gives the scalar
    path's padded time at every row count, in each N band."""
    import numpy as np

    from simcast.cost.kernels import engine_cost
    from simcast.cost.kernels.batched_kernels import gemm_many

    dev = load_device("l40s")
    assert dev.engines["sglang"].gemm_fit("fp8").tile_rule == "sgl_fp8_sm89"
    m = np.array([1, 2, 16, 17, 64, 65, 128, 129, 256, 257, 511, 513, 4097])
    for n, k in ((4096, 4096), (12288, 5120), (57344, 8192)):
        got, _ = gemm_many(dev, "sglang", "fp8", m, n, k, np.ones(len(m), dtype=bool))
        want = [engine_cost.gemm_s(dev, "sglang", "fp8", int(x), n, k)[0] for x in m]
        assert np.allclose(got, want, rtol=1e-12), (n, k)
