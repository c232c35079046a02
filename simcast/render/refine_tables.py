"""The ``--refine-top`` table and rows: each layout's steady-state estimate beside its request-level
refinement (rate, p90 TTFT, mean TPOT, output token/s/device)."""

from __future__ import annotations

import math
from typing import Any

from simcast.render.tables import table
from simcast.serving.search.layouts import Candidate, model_label
from simcast.serving.search.refine import PERCENTILE, Refinement

REFINED_COLUMNS = [
    "refined_rate_per_s",
    "refined_p90_ttft_ms",
    "refined_mean_tpot_ms",
    "refined_tokens_per_s_per_device",
    "refined_miss_rate_per_s",
    "refined_miss_p90_ttft_ms",
    "refined_prompts",
    "refined_runs",
]
"""Columns ``--csv`` adds to a refined layout's best row, with ``steady_rate`` (rates in requests/s, times
in ms; empty where there is no such probe)."""


def steady_rate_per_s(c: Candidate) -> float:
    """The steady state's request throughput (all replicas): output token/s over OSL."""
    return c.result.tokens_per_s / c.result.config.workload.output_length


def refined_row(c: Candidate, ref: Refinement) -> dict[str, Any]:
    """One refined layout: steady-state figures (``steady_*``) and the bracket's figures (``refined_*``)."""
    r, best, miss = c.result, ref.best, ref.above
    nan = None  # JSON null, an empty CSV cell
    return {
        "parallel": model_label(r.config),
        "steady_rate_per_s": steady_rate_per_s(c),
        "steady_ttft_ms": r.ttft_s * 1e3,
        "steady_tpot_ms": r.tpot_s * 1e3,
        "steady_tokens_per_s_per_device": r.tokens_per_s_per_device,
        "refined_rate_per_s": best.rate_per_s if best else nan,
        "refined_p90_ttft_ms": best.p90_ttft_s * 1e3 if best else nan,
        "refined_mean_tpot_ms": best.mean_tpot_s * 1e3 if best else nan,
        "refined_tokens_per_s_per_device": best.output_tokens_per_s_per_device if best else nan,
        "refined_miss_rate_per_s": miss.rate_per_s if miss else nan,
        "refined_miss_p90_ttft_ms": miss.p90_ttft_s * 1e3 if miss else nan,
        "refined_prompts": ref.task.num_prompts,
        "refined_runs": len(ref.probes),
    }


def csv_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The columns ``--csv`` adds to the layout's best row (the others are already there)."""
    return {k: row[k] for k in ("steady_rate_per_s", *REFINED_COLUMNS)}


def _f(x: float | None, fmt: str) -> str:
    if x is None:
        return "-"
    if fmt == "rate":  # requests/s: 3 significant digits, no exponent
        return f"{x:.3g}" if x < 1000 else f"{x:.0f}"
    return format(x, fmt)


def format_refined(rows: list[dict[str, Any]], refs: list[Refinement]) -> str:
    """The second table of ``optimize --refine-top``, with the limits and method in its header."""
    t = refs[0].task
    lim = f"p{PERCENTILE} TTFT <= {t.ttft_limit_s * 1e3:g} ms" + (
        f" and mean TPOT <= {t.tpot_limit_s * 1e3:g} ms" if math.isfinite(t.tpot_limit_s) else ""
    )
    cells = [
        [
            str(i + 1),
            r["parallel"],
            _f(r["steady_rate_per_s"], "rate"),
            f"{r['steady_ttft_ms']:.1f}",
            f"{r['steady_tpot_ms']:.2f}",
            f"{r['steady_tokens_per_s_per_device']:.1f}",
            _f(r["refined_rate_per_s"], "rate"),
            _f(r["refined_p90_ttft_ms"], ".1f"),
            _f(r["refined_mean_tpot_ms"], ".2f"),
            _f(r["refined_tokens_per_s_per_device"], ".1f"),
            _f(r["refined_miss_rate_per_s"], "rate") + " (" + _f(r["refined_miss_p90_ttft_ms"], ".0f") + ")",
        ]
        for i, r in enumerate(rows)
    ]
    head = [
        "#",
        "parallel",
        "steady req/s",
        "ttft ms",
        "tpot ms",
        "token/s/device",
        "refined req/s",
        f"p{PERCENTILE} ttft ms",
        "mean tpot ms",
        "token/s/device",
        "misses at req/s (p90 ms)",
    ]
    notes = [
        f"refined with the request-level simulator (bench-serve): the highest request rate with {lim}, "
        f"bracketed by bisection to {t.rel_tol * 100:g} % (the next rate misses); Poisson arrivals, "
        f"{', '.join(sorted({str(x.task.num_prompts) for x in refs}))} prompts per run, seed {t.seed}; p90 TTFT "
        f"over the second half of the requests by send time (a queue growing over the run counts); "
        f"refined token/s/device over the whole run (ramp-up from empty and drain included, as vllm bench serve "
        f"reports it); steady state: closed loop at the chosen concurrency, req/s = token/s / OSL, no queueing",
    ]
    for r, ref in zip(rows, refs):
        if ref.best is None:
            notes.append(
                f"{r['parallel']}: no probed rate meets the limits "
                f"(lowest tried {_f(r['refined_miss_rate_per_s'], 'rate')} req/s)"
            )
        elif ref.above is None:
            top = _f(r["refined_rate_per_s"], "rate")
            notes.append(f"{r['parallel']}: every probed rate meets the limits (up to {top} req/s)")
    return "\n".join([table(head, cells), ""] + [f"  - {n}" for n in notes])
