"""Text and JSON rows of disaggregated results (``optimize --serving-mode``, ``serve-config``)."""

from __future__ import annotations

import math

from simcast.render.assumption_text import assumption_lines
from simcast.render.tables import table
from simcast.serving.disagg.requests import DisaggBench
from simcast.serving.disagg.search import DisaggCandidate
from simcast.serving.disagg.steady import DisaggResult
from simcast.serving.search.layouts import model_label


def _ms(v: float) -> float | None:
    return None if math.isinf(v) else v * 1e3


def disagg_row(r: DisaggResult) -> dict:
    """One result as a flat dict (JSON; times in ms, ``None`` where unbounded)."""
    c = r.config
    return {
        "serving_mode": "disagg",
        "ratio": c.label,
        "prefill_parallel": model_label(c.prefill),
        "decode_parallel": model_label(c.decode),
        "prefill_replicas": c.prefill_replicas,
        "decode_replicas": c.decode_replicas,
        "devices": c.num_devices,
        "decode_batch_size": r.decode.concurrency,
        "request_rate": r.request_rate_per_s,
        "ttft": _ms(r.ttft_s),
        "ttft_queue": _ms(r.queue_s),
        "ttft_prefill": r.prefill_s * 1e3,
        "ttft_transfer": r.transfer.exposed_s * 1e3,
        "ttft_admission": r.admission_s * 1e3,
        "ttft_serving_path": r.front_end_s * 1e3,
        "tpot": r.tpot_s * 1e3,
        "e2e": _ms(r.e2e_latency_s),
        "token/s": r.tokens_per_s,
        "token/s/device": r.tokens_per_s_per_device,
        "prefill_utilisation": r.prefill_utilisation,
        "prefill_prompts_per_s": r.prefill.prompts_per_s,
        "decode_requests_per_s": r.decode.requests_per_s,
        "balanced_decode_per_prefill": r.balanced_decode_per_prefill,
        "kv_transfer": c.kv_transfer,
        "kv_bytes_per_request": r.transfer.bytes_per_request,
        "saturated": r.saturated,
    }


NULL_DISAGG = "ttft, ttft_queue and e2e are null where the prefill pool is saturated (utilisation >= 1: unbounded)"


def format_disagg_rows(rows: list[DisaggCandidate], top: int) -> str:
    head = ["#", "prefill", "decode", "xPyD", "devices", "D batch", "ttft ms", "tpot ms", "token/s"]
    head += ["token/s/device", "P util", "balanced D/P", "transfer ms"]
    body = []
    for i, c in enumerate(rows[:top]):
        r = c.result
        body.append(
            [
                str(i + 1),
                c.prefill_label,
                c.decode_label,
                r.config.label,
                str(r.num_devices),
                str(r.decode.concurrency),
                f"{r.ttft_s * 1e3:.1f}",
                f"{r.tpot_s * 1e3:.2f}",
                f"{r.tokens_per_s:.1f}",
                f"{r.tokens_per_s_per_device:.1f}",
                f"{r.prefill_utilisation:.2f}",
                f"{r.balanced_decode_per_prefill:.2f}",
                f"{r.transfer.exposed_s * 1e3:.2f}",
            ]
        )
    return table(head, body)


def format_disagg(r: DisaggResult) -> str:
    """``serve-config`` of a disaggregated service YAML: the figures, the TTFT decomposition, assumptions."""
    c = r.config
    w = c.decode.workload
    lines = [
        f"simcast serve-config: {c.decode.model.name}, disaggregated {c.label} on {c.num_devices} devices "
        f"(prefill {model_label(c.prefill)} x {c.prefill_replicas} on {c.prefill.device.name}, decode "
        f"{model_label(c.decode)} x {c.decode_replicas} on {c.decode.device.name}), ISL {w.input_length} / "
        f"OSL {w.output_length}",
        "",
        f"ttft {r.ttft_s * 1e3:.1f} ms = serving path {r.front_end_s * 1e3:.2f} + prefill queue "
        f"{r.queue_s * 1e3:.2f} + prefill {r.prefill_s * 1e3:.2f} + KV transfer "
        f"{r.transfer.exposed_s * 1e3:.2f} + decode admission {r.admission_s * 1e3:.2f} ms",
        f"tpot {r.tpot_s * 1e3:.2f} ms | e2e {r.e2e_latency_s * 1e3:.0f} ms | request rate "
        f"{r.request_rate_per_s:.3g}/s",
        f"token/s {r.tokens_per_s:.1f} | token/s/device {r.tokens_per_s_per_device:.1f} | prefill utilisation "
        f"{r.prefill_utilisation:.3f} | balanced {r.balanced_decode_per_prefill:.2f} decode per prefill replica",
    ]
    if r.saturated:
        lines.append(
            f"SATURATED: the {r.saturated} pool cannot carry the request rate"
            + (" (TTFT grows without bound)" if r.saturated == "prefill" else "")
        )
    lines += ["", "assumptions:"] + [f"  - {a}" for a in assumption_lines(r.assumptions)]
    return "\n".join(lines)


def disagg_bench_row(b: DisaggBench) -> dict:
    """The request-level run as a flat dict (JSON; times in ms: medians and p90 of each TTFT term)."""
    row: dict = {
        "serving_mode": "disagg",
        "ratio": b.config.label,
        "num_prompts": len(b.requests),
        "duration_s": b.duration_s,
        "output_throughput_tok_s": b.output_tokens_per_s,
        "preemptions": sum(r.preemptions for r in b.requests),
    }
    for what in BENCH_TERMS:
        row[f"median_{what[:-2]}_ms"] = b.percentile_ms(what, 50)
        row[f"p90_{what[:-2]}_ms"] = b.percentile_ms(what, 90)
    return row


BENCH_TERMS = (
    "ttft_s",
    "front_end_s",
    "prefill_queue_s",
    "prefill_s",
    "transfer_s",
    "decode_admission_s",
    "tpot_s",
    "e2e_s",
)
"""Per-request times the request-level disaggregated run reports (TTFT = the five terms after it)."""


def format_disagg_bench(b: DisaggBench) -> str:
    """The request-level run: median / p90 of TTFT and its terms, TPOT, E2E, and the run's throughput."""
    body = [[what[:-2], f"{b.percentile_ms(what, 50):.2f}", f"{b.percentile_ms(what, 90):.2f}"] for what in BENCH_TERMS]
    lines = [
        f"request level ({len(b.requests)} requests, {b.config.label}): {b.output_tokens_per_s:,.1f} output token/s "
        f"over {b.duration_s:.2f} s, {sum(r.preemptions for r in b.requests)} preemptions",
        table(["per request", "median ms", "p90 ms"], body),
        *("  " + a for a in assumption_lines(b.assumptions)),
    ]
    return "\n".join(lines)
