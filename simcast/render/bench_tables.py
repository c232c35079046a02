"""``vllm bench serve``-style metrics of a request-level run: printed block, JSON keys, per-request rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from simcast.serving.bench_result import BenchResult

PERCENTILES = (50, 90, 99)


def _weighted_percentile(v: np.ndarray, w: np.ndarray, p: float) -> float:
    if v.size == 0:
        return 0.0
    o = np.argsort(v)
    cw = np.cumsum(w[o])
    return float(v[o][min(np.searchsorted(cw, p / 100 * cw[-1]), v.size - 1)])


def bench_metrics(
    r: BenchResult, *, request_rate: float, burstiness: float, max_concurrency: int | None, num_prompts: int
) -> dict:
    """The keys ``vllm bench serve --save-result`` writes (times in ms, as there); TPOT per request =
    (E2E - TTFT) / (output - 1) for outputs > 1; ITL from the step gaps each decoding request saw."""
    reqs = r.requests
    dur = r.duration_s or 1.0
    tin = sum(x.input_len for x in reqs)
    tout = sum(x.output_len for x in reqs)
    ttft = np.array([x.ttft_s for x in reqs]) * 1e3
    e2el = np.array([x.e2e_s for x in reqs]) * 1e3
    tpot = np.array([(x.e2e_s - x.ttft_s) / (x.output_len - 1) for x in reqs if x.output_len > 1]) * 1e3
    d: dict[str, Any] = {
        "backend": "simcast",
        "num_prompts": num_prompts,
        "request_rate": "inf" if np.isinf(request_rate) else request_rate,
        "burstiness": burstiness,
        "max_concurrency": max_concurrency,
        "duration": dur,
        "completed": len(reqs),
        "failed": num_prompts - len(reqs),
        "total_input_tokens": tin,
        "total_output_tokens": tout,
        "request_throughput": len(reqs) / dur,
        "request_goodput": None,
        "output_throughput": tout / dur,
        "total_token_throughput": (tin + tout) / dur,
        "max_concurrent_requests": max((s.running + s.waiting for s in r.samples), default=0),
        "prefix_cache_hit_rate": r.prefix_hit_rate,
        "prefix_cache_hit_tokens": r.prefix_hit_tokens,
        "prefix_cache_query_tokens": r.prefix_query_tokens,
    }
    for name, v in (("ttft", ttft), ("tpot", tpot), ("e2el", e2el)):
        v = v if v.size else np.zeros(1)
        d[f"mean_{name}_ms"] = float(v.mean())
        d[f"median_{name}_ms"] = float(np.median(v))
        d[f"std_{name}_ms"] = float(v.std())
        for p in PERCENTILES[1:]:
            d[f"p{p}_{name}_ms"] = float(np.percentile(v, p))
    iv, iw = r.itl_s * 1e3, r.itl_weight.astype(float)
    d["mean_itl_ms"] = float((iv * iw).sum() / iw.sum()) if iw.size else 0.0
    d["median_itl_ms"] = _weighted_percentile(iv, iw, 50)
    d["std_itl_ms"] = float(np.sqrt((iw * (iv - d["mean_itl_ms"]) ** 2).sum() / iw.sum())) if iw.size else 0.0
    for p in PERCENTILES[1:]:
        d[f"p{p}_itl_ms"] = _weighted_percentile(iv, iw, p)
    return d


def format_bench(d: dict, header: str) -> str:
    """The block ``vllm bench serve`` prints, same labels."""
    rows = [
        ("Successful requests:", d["completed"]),
        ("Failed requests:", d["failed"]),
        ("Maximum request concurrency:", d["max_concurrency"]),
        ("Request rate configured (RPS):", d["request_rate"]),
        ("Benchmark duration (s):", f"{d['duration']:.2f}"),
        ("Total input tokens:", d["total_input_tokens"]),
        ("Total generated tokens:", d["total_output_tokens"]),
        ("Request throughput (req/s):", f"{d['request_throughput']:.2f}"),
        ("Output token throughput (tok/s):", f"{d['output_throughput']:.2f}"),
        ("Peak concurrent requests:", d["max_concurrent_requests"]),
        ("Total token throughput (tok/s):", f"{d['total_token_throughput']:.2f}"),
    ]
    if d.get("prefix_cache_hit_tokens"):  # only when prompts share prefixes: other runs print as before
        rows += [
            ("Prefix cache hit rate (%):", f"{100 * d['prefix_cache_hit_rate']:.2f}"),
            ("Prefill tokens skipped (cache hits):", d["prefix_cache_hit_tokens"]),
        ]
    out = [header, "{s:{c}^50}".format(s=" Serving Benchmark Result (simulated) ", c="=")]
    out += [f"{k:<40}{v!s:<10}" for k, v in rows]
    for name, title in (
        ("ttft", "Time to First Token"),
        ("tpot", "Time per Output Token (excl. 1st token)"),
        ("itl", "Inter-token Latency"),
        ("e2el", "End-to-end Latency"),
    ):
        out.append("{s:{c}^50}".format(s=title, c="-"))
        out.append(f"{'Mean ' + name.upper() + ' (ms):':<40}{d[f'mean_{name}_ms']:<10.2f}")
        out.append(f"{'Median ' + name.upper() + ' (ms):':<40}{d[f'median_{name}_ms']:<10.2f}")
        for p in PERCENTILES[1:]:
            out.append(f"{f'P{p} ' + name.upper() + ' (ms):':<40}{d[f'p{p}_{name}_ms']:<10.2f}")
    out.append("=" * 50)
    if d.get("steady_state"):
        out.append(
            f"whole run: {d['output_throughput']:.2f} output tok/s (ramp-up and drain included); " + d["steady_state"]
        )
    return "\n".join(out)


def request_rows(r: BenchResult) -> list[dict]:
    return [
        {
            "sent_s": x.arrival_s,
            "input_len": x.input_len,
            "output_len": x.output_len,
            "ttft_s": x.ttft_s,
            "e2e_s": x.e2e_s,
            "tpot_s": (x.e2e_s - x.ttft_s) / (x.output_len - 1) if x.output_len > 1 else None,
            "preemptions": x.preemptions,
            "replica": x.replica,
            "cached_tokens": x.cached_tokens,
        }
        for x in r.requests
    ]
