"""``vllm bench serve``-style metrics of a request-level run, worded: the printed block, the ``--save-result``
JSON keys, per-request rows (the metrics themselves: :mod:`simcast.serving.request_level.bench_metrics`)."""

from __future__ import annotations

import math
from typing import Any

from simcast.serving.request_level.bench_metrics import BenchMetrics, LatencyStats
from simcast.serving.request_level.bench_result import BenchResult

LATENCIES = (
    ("ttft", "Time to First Token"),
    ("tpot", "Time per Output Token (excl. 1st token)"),
    ("itl", "Inter-token Latency"),
    ("e2el", "End-to-end Latency"),
)
"""The four latencies of :class:`BenchMetrics` (attribute, vLLM's section title), in vLLM's printed order."""


def _rate(m: BenchMetrics) -> float | str:
    return "inf" if math.isinf(m.request_rate_per_s) else m.request_rate_per_s


def _latency_keys(name: str, s: LatencyStats) -> dict[str, float]:
    return {
        f"mean_{name}_ms": s.mean_ms,
        f"median_{name}_ms": s.median_ms,
        f"std_{name}_ms": s.std_ms,
        f"p90_{name}_ms": s.p90_ms,
        f"p99_{name}_ms": s.p99_ms,
    }


def bench_json(
    m: BenchMetrics,
    *,
    model_id: str,
    engine: str,
    prefix_caching: bool,
    tp: int,
    pp: int,
    dp: int,
    assumptions: list[str],
) -> dict[str, Any]:
    """The keys ``vllm bench serve --save-result`` writes (times in ms, as there), in its order, then
    simcast's steady-state window, the deployment and the assumptions."""
    d: dict[str, Any] = {
        "backend": "simcast",
        "num_prompts": m.num_prompts,
        "request_rate": _rate(m),
        "burstiness": m.burstiness,
        "max_concurrency": m.max_concurrency,
        "duration": m.duration_s,
        "completed": m.completed,
        "failed": m.failed,
        "total_input_tokens": m.total_input_tokens,
        "total_output_tokens": m.total_output_tokens,
        "request_throughput": m.request_throughput_req_s,
        "request_goodput": None,
        "output_throughput": m.output_throughput_tok_s,
        "total_token_throughput": m.total_token_throughput_tok_s,
        "max_concurrent_requests": m.max_concurrent_requests,
        "prefix_cache_hit_rate": m.prefix_cache_hit_rate,
        "prefix_cache_hit_tokens": m.prefix_cache_hit_tokens,
        "prefix_cache_query_tokens": m.prefix_cache_query_tokens,
    }
    for name in ("ttft", "tpot", "e2el", "itl"):  # vLLM's JSON order
        d.update(_latency_keys(name, getattr(m, name)))
    win = m.steady
    d.update(
        steady_state=win.describe(),
        steady_output_throughput=win.output_tokens_per_s if win.reached else None,
        steady_window_s=[win.start_s, win.end_s],
        model_id=model_id,
        engine=engine,
        prefix_caching=prefix_caching,
        tp=tp,
        pp=pp,
        dp=dp,
        assumptions=assumptions,
    )
    return d


def bench_rows(m: BenchMetrics) -> list[tuple[str, object]]:
    """The (label, value) lines ``vllm bench serve`` prints above its latency blocks, formatted as printed."""
    rows: list[tuple[str, object]] = [
        ("Successful requests:", m.completed),
        ("Failed requests:", m.failed),
        ("Maximum request concurrency:", m.max_concurrency),
        ("Request rate configured (RPS):", _rate(m)),
        ("Benchmark duration (s):", f"{m.duration_s:.2f}"),
        ("Total input tokens:", m.total_input_tokens),
        ("Total generated tokens:", m.total_output_tokens),
        ("Request throughput (req/s):", f"{m.request_throughput_req_s:.2f}"),
        ("Output token throughput (tok/s):", f"{m.output_throughput_tok_s:.2f}"),
        ("Peak concurrent requests:", m.max_concurrent_requests),
        ("Total token throughput (tok/s):", f"{m.total_token_throughput_tok_s:.2f}"),
    ]
    if m.prefix_cache_hit_tokens:  # only when prompts share prefixes: other runs print as before
        rows += [
            ("Prefix cache hit rate (%):", f"{100 * m.prefix_cache_hit_rate:.2f}"),
            ("Prefill tokens skipped (cache hits):", m.prefix_cache_hit_tokens),
        ]
    return rows


def latency_rows(m: BenchMetrics) -> list[list[str]]:
    """Per latency (TTFT, TPOT, ITL): [name, mean, median, P90, P99] in ms as printed."""
    out = []
    for name, _ in LATENCIES:
        s: LatencyStats = getattr(m, name)
        out.append([name.upper(), *(f"{v:.2f}" for v in (s.mean_ms, s.median_ms, s.p90_ms, s.p99_ms))])
    return out


def format_bench(m: BenchMetrics, header: str) -> str:
    """The block ``vllm bench serve`` prints, same labels."""
    rows = bench_rows(m)
    out = [header, "{s:{c}^50}".format(s=" Serving Benchmark Result (simulated) ", c="=")]
    out += [f"{k:<40}{v!s:<10}" for k, v in rows]
    for name, title in LATENCIES:
        s: LatencyStats = getattr(m, name)
        out.append("{s:{c}^50}".format(s=title, c="-"))
        out.append(f"{'Mean ' + name.upper() + ' (ms):':<40}{s.mean_ms:<10.2f}")
        out.append(f"{'Median ' + name.upper() + ' (ms):':<40}{s.median_ms:<10.2f}")
        out.append(f"{'P90 ' + name.upper() + ' (ms):':<40}{s.p90_ms:<10.2f}")
        out.append(f"{'P99 ' + name.upper() + ' (ms):':<40}{s.p99_ms:<10.2f}")
    out.append("=" * 50)
    steady = m.steady.describe()
    if steady:
        out.append(f"whole run: {m.output_throughput_tok_s:.2f} output tok/s (ramp-up and drain included); " + steady)
    return "\n".join(out)


def request_rows(r: BenchResult) -> list[dict]:
    """One row per request: send time, lengths (tokens), TTFT, end-to-end time and TPOT (s), preemptions,
    replica, prompt tokens from the prefix cache."""
    return [
        {
            "sent_s": x.arrival_s,
            "input_len": x.input_len,
            "output_len": x.output_len,
            "ttft_s": x.ttft_s,
            "e2e_s": x.e2e_s,
            "tpot_s": x.tpot_s,
            "preemptions": x.preemptions,
            "replica": x.replica,
            "cached_tokens": x.cached_tokens,
        }
        for x in r.requests
    ]
