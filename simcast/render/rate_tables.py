"""Text of an aggregated deployment at a target request rate (:mod:`simcast.serving.steady.rate`)."""

from __future__ import annotations

import math

from simcast.serving.steady.rate import RateEstimate


def rate_row(e: RateEstimate, p99_limit_rate: float | None) -> dict[str, object]:
    """The JSON fields (times in ms, rates in requests/s; None where the queue diverges)."""

    def ms(x: float) -> float | None:
        return None if math.isinf(x) else x * 1e3

    return {
        "request_rate": e.rate_per_s,
        "capacity_request_rate": e.capacity_per_s,
        "utilisation": e.utilisation,
        "concurrency_per_replica": e.concurrency,
        "mean_ttft_ms": ms(e.ttft_s),
        "p99_ttft_ms": ms(e.ttft_p99_s),
        "mean_tpot_ms": e.tpot_s * 1e3,
        "prompts_per_step": None if math.isinf(e.prompts_per_step) else e.prompts_per_step,
        "rate_at_p99_ttft_limit": p99_limit_rate,
    }


def format_at_rate(e: RateEstimate, p99_limit_rate: float | None, ttft_limit_ms: float | None) -> str:
    """Lines for serve-config's output: utilisation, the open-loop TTFT and how far the rate is from the limit."""
    head = (
        f"at {e.rate_per_s:g} requests/s (Poisson): utilisation {e.utilisation:.2f} of capacity "
        f"{e.capacity_per_s:.3g} requests/s"
    )
    if e.utilisation >= 1:
        lines = [head + ": over capacity, the queue grows without bound (no TTFT)"]
    else:
        lines = [
            head,
            f"  concurrency {e.concurrency} per replica | mean ttft {e.ttft_s * 1e3:.1f} ms | p99 ttft "
            f"{e.ttft_p99_s * 1e3:.1f} ms (approximation) | tpot {e.tpot_s * 1e3:.2f} ms | "
            f"{e.prompts_per_step:.2f} prompts arrive per step",
        ]
    if p99_limit_rate is not None and ttft_limit_ms is not None:
        lines.append(
            f"  TTFT p99 reaches the {ttft_limit_ms:g} ms limit at {p99_limit_rate:.3g} requests/s "
            f"(utilisation {p99_limit_rate / e.capacity_per_s:.2f})"
        )
    lines.append(
        "  open loop (simcast/serving/steady/rate.py): the steady state at the smallest concurrency carrying the "
        "rate; TTFT adds the length-biased step in flight and the prompts arriving with the request; "
        "check with bench-serve --request-rate"
    )
    return "\n".join(lines)
