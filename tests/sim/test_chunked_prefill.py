"""Chunked pipeline prefill of one prompt: chunk plans (static, SGLang dynamic), the fill-drain of
chunks whose attention follows their prefix, each engine's overlap rule, and the CLI flags."""

import itertools
import json
import random

import pytest

from simcast.core.chunking import (
    ChunkedPrefill,
    chunk_plan,
    fit_quadratic,
    sglang_profile_lengths,
)
from simcast.core.errors import SimcastInputError
from simcast.core.schedule import flow_shop_latency
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.engines import PP_PREFILL_RULES as RULES
from simcast.sim.chunked import chunked_prefill_spec, chunked_prefill_timeline, stage_cost_of
from simcast.sim.simulate import simulate
from simcast.sim.timeline import schedule_pipeline


def spec_of(model, device, *, tp=1, pp=1, tokens=8192, **kw):
    return SimSpec(
        model=model,
        device=device,
        parallel=ParallelSpec(tp=tp, pp=pp, world_size=tp * pp),
        batch=Batch.prefill(1, tokens),
        **kw,
    )


# ------------------------------------------------------------------ the schedule, by hand
def test_two_stages_three_chunks_by_hand():
    # compute[k][s], one hop of 0.5 s paid by the receiver: stage times 1,2,3 on stage 0; 2.5,3.5,1.5 on stage 1.
    compute = [[1.0, 2.0], [2.0, 3.0], [3.0, 1.0]]
    send = [[0.5], [0.5], [0.5]]
    # C[0] = (1, 3.5); C[1] = (3, max(3.5, 3) + 3.5 = 7); C[2] = (6, max(7, 6) + 1.5 = 8.5)
    tl = schedule_pipeline(compute, send)
    assert tl.makespan_s == 8.5
    starts = {(e.microbatch, e.stage): e.start_s for e in tl.events if e.kind == "compute"}
    assert starts[(1, 0)] == 1.0  # chunk 1 enters stage 0 while chunk 0 is on stage 1
    assert starts[(2, 1)] == 7.0 + 0.5  # waits for stage 1 to finish chunk 1, then its recv
    # one chunk at a time (TRT-LLM's rule): every stage time in a row
    assert schedule_pipeline(compute, send, max_in_flight=1).makespan_s == 13.5
    stage_t = [[1.0, 2.5], [2.0, 3.5], [3.0, 1.5]]
    assert flow_shop_latency(stage_t) == 8.5
    assert flow_shop_latency(stage_t, max_in_flight=1) == 13.5
    assert flow_shop_latency(stage_t, max_in_flight=2) == 8.5  # two stages: a cap of 2 never binds here


@pytest.mark.parametrize("cap", [1, 2, 3, None])
def test_capped_flow_shop_equals_the_timeline(cap):
    rng = random.Random(7)
    for _ in range(50):
        m, p = rng.randint(1, 7), rng.randint(1, 5)
        compute = [[rng.uniform(0.1, 3) for _ in range(p)] for _ in range(m)]
        send = [[rng.uniform(0, 0.5) for _ in range(p - 1)] for _ in range(m)]
        stage_t = [[c + (send[k][s - 1] if s else 0.0) for s, c in enumerate(compute[k])] for k in range(m)]
        tl = schedule_pipeline(compute, send, max_in_flight=cap)
        assert tl.makespan_s == pytest.approx(flow_shop_latency(stage_t, cap), rel=1e-12)


# ------------------------------------------------------------------ chunk plans
def test_static_plan_is_equal_chunks_and_the_remainder():
    assert chunk_plan(10000, 4096) == (4096, 4096, 1808)
    assert chunk_plan(8192, 4096) == (4096, 4096)
    assert chunk_plan(100, 4096) == (100,)


def test_sglang_profile_lengths():
    # scheduler_pp_mixin.py: int(1.25*C - i*(1.25*C // 128)), i < 128: 10240, 10160, ..., 80 for C = 8192
    lens = sglang_profile_lengths(8192)
    assert len(lens) == 128 and lens[0] == 10240 and lens[1] == 10160 and lens[-1] == 80


def test_quadratic_fit_recovers_coefficients():
    f = fit_quadratic([1000, 2000, 5000, 9000], [2e-9 * n * n + 3e-6 * n + 0.01 for n in (1000, 2000, 5000, 9000)])
    assert (f.a, f.b, f.c) == pytest.approx((2e-9, 3e-6, 0.01), rel=1e-6)


def test_dynamic_chunks_by_hand():
    # f(l) = l^2 (units do not matter): T = 8192^2; after L tokens x = sqrt(L^2 + 8192^2) - L,
    # smoothed 8192 + 0.75 (x - 8192), floored at 2048, aligned down to 64.
    # L = 8192: x = 3393.2 -> 4592.9 -> 4544; L = 12736: x = 2407.1 -> 3853.3 -> 3840.
    plan = chunk_plan(60000, 8192, dynamic=True, cost_of=lambda prefix, n: float(n * n))
    assert plan[:3] == (8192, 4544, 3840)
    # page size 256: alignment max(page, 64) = 256 -> 4592 // 256 * 256
    assert chunk_plan(60000, 8192, dynamic=True, page_size=256, cost_of=lambda p, n: float(n * n))[1] == 4352


def test_dynamic_chunks_fall_to_the_floor_and_sum_to_the_prompt():
    quad = lambda prefix, n: 1e-9 * n * n + 2e-5 * n + 0.003  # noqa: E731
    for smooth in (0.5, 0.75, 1.0):
        plan = chunk_plan(200_000, 8192, dynamic=True, smooth_factor=smooth, cost_of=quad)
        assert sum(plan) == 200_000
        assert all(a >= b for a, b in itertools.pairwise(plan[:-1]))  # non-increasing
        assert min(plan[:-1]) >= 8192 // 4 and all(c % 64 == 0 for c in plan[:-1])
    exact = chunk_plan(400_000, 8192, dynamic=True, smooth_factor=1.0, cost_of=quad)
    assert min(exact[:-1]) == 2048  # the floor is reached
    # smooth 1: each chunk takes the first chunk's time, to within one alignment unit
    f = lambda n: 1e-9 * n * n + 2e-5 * n  # noqa: E731
    target, done = f(8192), 8192
    for x in exact[1:6]:
        assert f(done + x) - f(done) <= target * (1 + 1e-9) < f(done + x + 64) - f(done)
        done += x


def test_dynamic_chunking_refuses_a_concave_fit():
    with pytest.raises(SimcastInputError, match="a > 0"):
        chunk_plan(50000, 8192, dynamic=True, cost_of=lambda p, n: n - 1e-5 * n * n)


def test_chunked_prefill_checks():
    with pytest.raises(SimcastInputError):
        ChunkedPrefill(tokens=(4096, 0))
    with pytest.raises(SimcastInputError):
        ChunkedPrefill(tokens=(4096,), max_in_flight=0)


def test_spec_needs_one_prompt_whose_chunks_sum_to_it(qwen06b, h100):
    with pytest.raises(SimcastInputError, match="sum to"):
        spec_of(qwen06b, h100, tokens=8192, chunked_prefill=ChunkedPrefill(tokens=(4096, 2048)))
    with pytest.raises(SimcastInputError, match="one prompt"):
        SimSpec(
            model=qwen06b,
            device=h100,
            parallel=ParallelSpec(tp=1, pp=2, world_size=2),
            batch=Batch.prefill(2, 4096),
            chunked_prefill=ChunkedPrefill(tokens=(4096, 4096)),
        )


# ------------------------------------------------------------------ on a model
def test_chunk_cost_grows_with_its_prefix(qwen06b, h100):
    cost = stage_cost_of(spec_of(qwen06b, h100, pp=2))
    times = [cost(prefix, 2048) for prefix in (0, 4096, 16384, 65536)]
    assert all(a < b for a, b in itertools.pairwise(times))
    r = simulate(chunked_prefill_spec(spec_of(qwen06b, h100, pp=2, tokens=16384), (4096,) * 4))
    assert [mb.context_lens for mb in r.microbatches] == [(0,), (4096,), (8192,), (12288,)]
    per_chunk = [sum(o.time_s * o.count for o in ops) for ops in r.stages[1].microbatch_ops]
    assert all(a < b for a, b in itertools.pairwise(per_chunk))


def test_pp1_ttft_is_the_sum_of_the_chunk_steps(qwen06b, h100):
    spec = spec_of(qwen06b, h100, tokens=12000)
    chunks = chunk_plan(12000, 4096)
    cost = stage_cost_of(spec)
    steps = [cost(prefix, n) for prefix, n in zip((0, 4096, 8192), chunks)]
    assert chunked_prefill_timeline(spec, chunks).ttft_s == pytest.approx(sum(steps), rel=1e-12)


def test_stage_waits_for_the_previous_stage_and_its_previous_chunk(qwen06b, h100):
    spec = spec_of(qwen06b, h100, pp=4, tokens=16384)
    t = chunked_prefill_timeline(spec, (4096,) * 4, engine="sglang")
    assert t.report.spec.chunked_prefill.max_in_flight == 4
    eps = 1e-12
    for k, row in enumerate(t.spans_s):
        for s, (start, end) in enumerate(row):
            assert end - start >= t.compute_s[k][s] - eps
            if s:
                assert start >= row[s - 1][1] - eps  # stage s-1 has finished chunk k
            if k:
                assert start >= t.spans_s[k - 1][s][1] - eps  # stage s has finished chunk k-1
    assert t.ttft_s == pytest.approx(t.spans_s[-1][-1][1], rel=1e-12)
    assert t.spans_s[1][0][0] < t.spans_s[0][-1][1]  # chunk 1 starts before chunk 0 leaves the pipeline


def test_sequential_engine_rule_is_the_sum_of_all_stage_times(qwen06b, h100):
    spec = spec_of(qwen06b, h100, pp=2, tokens=8192)
    seq = chunked_prefill_timeline(spec, (4096, 4096), engine="trtllm")
    r = seq.report
    total = sum(r.runtime.stage_times_s) * 2  # stage times are the mean over the 2 chunks
    assert seq.ttft_s == pytest.approx(total, rel=1e-9)
    assert chunked_prefill_timeline(spec, (4096, 4096), engine="vllm").ttft_s < seq.ttft_s
    assert not RULES["trtllm"].overlap and RULES["vllm"].overlap and RULES["sglang"].overlap


@pytest.mark.slow
def test_long_prompt_gains_from_pp_but_not_ideally(llama70b, h100):
    # Llama-3.1-70B, 32K tokens, 4K chunks: TP2 x PP4 on 8 H100 vs TP2 alone.
    chunks = chunk_plan(32768, 4096)
    pp1 = chunked_prefill_timeline(spec_of(llama70b, h100, tp=2, tokens=32768), chunks, engine="sglang").ttft_s
    pp4 = chunked_prefill_timeline(spec_of(llama70b, h100, tp=2, pp=4, tokens=32768), chunks, engine="sglang").ttft_s
    assert pp1 / 4 * 1.1 < pp4 < pp1 * 0.5


# ------------------------------------------------------------------ CLI
def run_cli(capsys, *args):
    from simcast.cli.main import main

    rc = main(["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--json", *args])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if rc == 0 else None), out.err


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
def test_cli_chunked_prefill_flags(capsys):
    rc, js, _ = run_cli(capsys, "--pp", "2", "--input-length", "10000", "--chunked-prefill-size", "4096")
    assert rc == 0 and js["prefill_chunks"] == [4096, 4096, 1808] and js["num_microbatches"] == 3
    rc, js, _ = run_cli(capsys, "--pp", "2", "--input-length", "20000", "--engine", "sglang")
    assert rc == 0 and js["prefill_chunks"] == [8192, 8192, 3616]  # SGLang's default on an 80 GB GPU
    rc, js, _ = run_cli(capsys, "--pp", "2", "--input-length", "20000", "--engine", "trtllm")
    assert rc == 0 and js["prefill_chunks"] == [20000]  # chunked prefill off by default
    rc, js, _ = run_cli(capsys, "--pp", "2", "--input-length", "20000")
    assert rc == 0 and js["prefill_chunks"] is None and js["num_microbatches"] == 2  # no engine: --microbatches
    rc, js, _ = run_cli(
        capsys, "--pp", "2", "--input-length", "40000", "--chunked-prefill-size", "8192", "--enable-dynamic-chunking"
    )
    assert rc == 0 and js["prefill_chunks"][0] == 8192 and sum(js["prefill_chunks"]) == 40000


@pytest.mark.parametrize(
    "args",
    [
        ["--batch", "2", "--chunked-prefill-size", "4096"],
        ["--phase", "decode", "--chunked-prefill-size", "4096"],
        ["--microbatches", "2", "--chunked-prefill-size", "4096"],
        ["--enable-dynamic-chunking"],
        ["--chunked-prefill-size", "4096", "--dynamic-chunking-smooth-factor", "1.5"],
        ["--input-length", "10000000", "--chunked-prefill-size", "64"],
    ],
)
def test_cli_chunked_prefill_bad_input(capsys, args):
    from simcast.cli.main import main

    with pytest.raises(SystemExit) if "1.5" in args else _nothing():
        rc = main(["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", "h100_sxm", "--pp", "2", *args])
        assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("simcast: error:") and err.count("\n") == 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
