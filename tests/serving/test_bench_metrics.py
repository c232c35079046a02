"""bench-serve's typed metrics (simcast.serving.request_level.bench_metrics) against hand-computed values,
and their wording."""

import math

import numpy as np
import pytest

from simcast.render.bench_tables import bench_json, format_bench, request_rows
from simcast.serving.request_level.bench_metrics import LatencyStats, bench_metrics
from simcast.serving.request_level.bench_result import BenchResult, RequestResult, Sample, tpots_s


def _req(ttft_s: float, e2e_s: float, output_len: int, arrival_s: float = 0.0) -> RequestResult:
    return RequestResult(
        arrival_s=arrival_s, input_len=100, output_len=output_len, ttft_s=ttft_s, e2e_s=e2e_s, preemptions=0, replica=0
    )


def _run() -> BenchResult:
    reqs = (
        _req(0.1, 1.1, 11),  # TPOT (1.1 - 0.1) / 10 = 0.1 s
        _req(0.2, 2.2, 21, arrival_s=0.5),  # TPOT 2.0 / 20 = 0.1 s
        _req(0.3, 0.3, 1),  # one token: no TPOT
    )
    return BenchResult(
        requests=reqs,
        itl_s=np.array([0.01, 0.03]),
        itl_weight=np.array([3, 1]),
        samples=(Sample(time_s=1.0, replica=0, running=2, waiting=1, kv_used_blocks=4, kv_total_blocks=8),),
        duration_s=2.7,  # the last request ends at 0.5 + 2.2
        steps=4,
        distinct_batches=2,
    )


def test_per_request_tpot_is_e2e_minus_ttft_over_output_minus_one():
    r = _run()
    assert [x.tpot_s for x in r.requests] == [pytest.approx(0.1), pytest.approx(0.1), None]
    assert tpots_s(r.requests) == [pytest.approx(0.1), pytest.approx(0.1)]


def test_metrics_by_hand():
    m = bench_metrics(_run(), request_rate_per_s=math.inf, burstiness=1.0, max_concurrency=None, num_prompts=4)
    assert (m.completed, m.failed) == (3, 1)
    assert m.total_output_tokens == 33 and m.total_input_tokens == 300
    assert m.output_throughput_tok_s == pytest.approx(33 / 2.7)
    assert m.request_throughput_req_s == pytest.approx(3 / 2.7)
    assert m.max_concurrent_requests == 3  # 2 running + 1 waiting
    assert m.ttft.mean_ms == pytest.approx(200.0) and m.ttft.median_ms == pytest.approx(200.0)
    assert m.tpot.mean_ms == pytest.approx(100.0) and m.tpot.std_ms == pytest.approx(0.0)
    # ITL: 10 ms seen by 3 requests, 30 ms by 1: mean (30 + 30) / 4 = 15 ms, median 10 ms, p99 30 ms
    assert m.itl.mean_ms == pytest.approx(15.0)
    assert (m.itl.median_ms, m.itl.p99_ms) == (pytest.approx(10.0), pytest.approx(30.0))
    assert m.itl.std_ms == pytest.approx(math.sqrt((3 * 25 + 225) / 4))
    assert not m.steady.reached  # no step records: no steady window


def test_empty_latencies_are_zero():
    s = LatencyStats.of(np.zeros(0))
    assert (s.mean_ms, s.p99_ms) == (0.0, 0.0)
    assert LatencyStats.weighted(np.zeros(0), np.zeros(0, dtype=np.int64)).mean_ms == 0.0


def test_wording_keeps_vllm_keys_and_labels():
    m = bench_metrics(_run(), request_rate_per_s=math.inf, burstiness=1.0, max_concurrency=8, num_prompts=3)
    d = bench_json(m, model_id="x", engine="vllm", prefix_caching=True, tp=1, pp=1, dp=1, assumptions=[])
    assert d["request_rate"] == "inf" and d["max_concurrency"] == 8
    assert d["median_tpot_ms"] == pytest.approx(100.0) and d["p99_itl_ms"] == pytest.approx(30.0)
    keys = list(d)
    assert keys.index("p99_e2el_ms") < keys.index("mean_itl_ms") < keys.index("steady_state")  # vLLM's order
    text = format_bench(m, "header")
    assert "Mean TPOT (ms):                         100.00" in text
    assert request_rows(_run())[2]["tpot_s"] is None
