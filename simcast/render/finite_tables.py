"""Tables of ``simcast optimize``: the workload label and the finite-run rows (JSON) and table (text)."""

from __future__ import annotations

from typing import Any


def workload_label(w: Any) -> str:
    """``ISL .. / OSL ..``, or the dataset with its mean lengths."""
    if w.length_mix:
        return f"dataset {w.name} (mean ISL {w.input_length} / OSL {w.output_length})"
    return f"ISL {w.input_length} / OSL {w.output_length}"


def finite_row(f: Any) -> dict[str, Any]:
    """One finite run (N prompts sent at once) as a JSON row."""
    from simcast.serving.search.layouts import model_label

    return {
        "parallel": model_label(f.config),
        "num_prompts": f.num_prompts,
        "duration_s": f.duration_s,
        "whole_run_output_tokens_per_s": f.output_tokens_per_s,
        "whole_run_output_tokens_per_s_per_device": f.output_tokens_per_s_per_device,
        "steady_output_tokens_per_s": f.steady.output_tokens_per_s if f.steady.reached else None,
        "steady_state": f.steady.describe(),
        "preemptions": f.preemptions,
        "max_running": f.max_running,
    }


def format_finite(runs: list[Any]) -> str:
    """The finite-run table: what a run of N prompts sent at once measures, beside its steady window."""
    head = (
        f"finite runs: {runs[0].num_prompts} prompts sent at once (vllm bench throughput, MLPerf Offline, "
        "bench-serve --request-rate inf), simulated request by request with the engine's scheduler; "
        "whole-run token/s includes ramp-up and drain, steady is the window between the first completion "
        "and the last admission"
    )
    lines = [
        head,
        f"{'#':>2}  {'parallel':<48} {'duration s':>10} {'token/s':>10} {'token/s/dev':>11} "
        f"{'steady tok/s':>12} {'max running':>11} {'preempt':>7}",
    ]
    for k, f in enumerate(runs):
        row = finite_row(f)
        steady = f"{row['steady_output_tokens_per_s']:.1f}" if f.steady.reached else "not reached"
        lines.append(
            f"{k + 1:>2}  {row['parallel']:<48} {f.duration_s:>10.2f} {f.output_tokens_per_s:>10.1f} "
            f"{f.output_tokens_per_s_per_device:>11.1f} {steady:>12} {f.max_running:>11} {f.preemptions:>7}"
        )
    return "\n".join(lines)
