"""What ``simcast optimize`` (and its HTML report) says about its own error: the best layout's 80 %
intervals, the layouts simcast cannot tell from the best one, and the bench command of each worth running
(docs/uncertainty.md)."""

from __future__ import annotations

from typing import Any

from simcast.api.uncertainty import as_dict, layout_choice, serving_intervals
from simcast.calib.uncertainty.user_residuals import UserResiduals
from simcast.engines import EMIT_ENGINES
from simcast.render.interval_text import interval_lines
from simcast.serving.search.layouts import model_label

BENCH_LABELS = {
    "median_ttft_ms": ("median TTFT", "ms", 2),
    "median_tpot_ms": ("median TPOT", "ms", 2),
    "median_itl_ms": ("median ITL", "ms", 2),
    "output_throughput": ("output token/s", "tok/s", 1),
}
"""bench-serve's figures with intervals, as its text and its report name them."""
LABELS = {
    "tokens_per_s_per_device": ("token/s/device", "tok/s", 1),
    "ttft_ms": ("TTFT", "ms", 1),
    "tpot_ms": ("TPOT", "ms", 2),
}


def search_uncertainty(
    rows: list[Any], engine: str, top: int, user: UserResiduals | None = None
) -> tuple[dict[str, Any], list[str]]:
    """(the ``--json`` block, the text lines) for the ranked candidates ``rows`` (best first); ``user``: the
    engine profile's leave-one-out residuals (the best layout's intervals take them where they hold enough)."""
    if not rows:
        return {}, []
    from simcast.render.launch import launch_lines

    best = rows[0].result
    figs = serving_intervals(
        ttft_ms=best.ttft_s * 1e3,
        tpot_ms=best.tpot_s * 1e3,
        tokens_per_s_per_device=best.tokens_per_s_per_device,
        engine=engine,
        device=best.config.device,
        saturated=True,
        user=user,
    )
    choice = layout_choice([c.result.tokens_per_s_per_device for c in rows[:top]], engine=engine)
    bench_engine = engine if engine in EMIT_ENGINES else "vllm"
    worth = [(i, rows[i].result) for i in choice.benchmark]
    benches = [(i, model_label(r.config), launch_lines(r.config, bench_engine, r.concurrency).bench) for i, r in worth]
    block = {
        "best_intervals_80": as_dict(figs),
        **choice.to_dict(),
        "benchmark_commands": [{"rank": i + 1, "parallel": lab, "command": cmd} for i, lab, cmd in benches],
    }
    lines = interval_lines(figs, LABELS)
    lines[0] = lines[0].replace("intervals", "intervals of the best layout", 1)
    ranks = ", ".join(f"#{i + 1}" for i in choice.within)
    lines.append(
        f"within simcast's error of the best (token/s/device within the {choice.spread_pct:.0f}% paired spread of its "
        f"held-out errors): {ranks}"
    )
    if len(choice.within) > 1:
        lines.append("worth benchmarking to settle the choice:")
        lines += [f"  #{i + 1} {lab}: {cmd}" for i, lab, cmd in benches]
    else:
        lines.append("the best layout leads by more than simcast's error: no benchmark needed to choose")
    return block, lines
