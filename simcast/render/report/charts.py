"""The report's charts (matplotlib, the notebooks' style; each returns a Figure, nothing is written).

The Pareto chart marks one point per layout (its chosen point) with an SVG group id ``pt<i>``, so the page
attaches the layout's label as a hover tooltip (:func:`simcast.render.report.page.svg`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from simcast.render.bench_plots import StateSeries
from simcast.render.plots import new_figure, pareto_front

MARK = {"best": "#C44E52", "pareto": "#4C72B0", "other": "#8c8c8c"}


def pareto_chart(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]],
    points: Sequence[tuple[float, float, bool]],
    *,
    tpot_limit_ms: float | None,
    best_index: int,
) -> Figure:
    """Token/s/device against token/s/user: each layout's swept points as a faint curve, its chosen point
    as a marker (``gid`` ``pt<i>``, in the order given), the Pareto front over the chosen points meeting the
    limits (``points[i] = (x, y, meets_limits)``), the TPOT limit as the line ``x = 1000 / TPOT``."""
    fig = new_figure(8.0, 4.6)
    ax = fig.add_subplot(1, 1, 1)
    for xs, ys in curves:
        if len(xs) > 1:
            ax.plot(xs, ys, color="#b8b8b8", linewidth=0.9, zorder=1)
    ok = [i for i, (_, _, m) in enumerate(points) if m]
    front = [ok[j] for j in pareto_front([points[i][0] for i in ok], [points[i][1] for i in ok])]
    if len(front) > 1:
        fx = [points[i][0] for i in front]
        fy = [points[i][1] for i in front]
        order = np.argsort(fx)
        ax.plot(np.asarray(fx)[order], np.asarray(fy)[order], color="black", linewidth=1.6, zorder=2)
    for i, (x, y, meets) in enumerate(points):
        kind = "best" if i == best_index else "pareto" if i in front else "other"
        ax.plot(
            [x],
            [y],
            marker="*" if kind == "best" else "o",
            markersize=14 if kind == "best" else 7,
            color=MARK[kind],
            markeredgecolor="white" if meets else "black",
            linestyle="none",
            gid=f"pt{i}",
            zorder=3,
        )
    if tpot_limit_ms:
        ax.axvline(1e3 / tpot_limit_ms, color="#C44E52", linestyle="--", linewidth=1)
        ax.text(1e3 / tpot_limit_ms, ax.get_ylim()[1], " TPOT limit", color="#C44E52", va="top", fontsize=9)
    ax.set_xlabel("token/s/user (interactivity) = 1000 / TPOT ms")
    ax.set_ylabel("token/s per device (throughput)")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    return fig


def histogram(values_ms: np.ndarray, name: str, color: str, ylabel: str = "requests") -> Figure:
    """One distribution (ms): histogram with the median and p99 marked; ``ylabel`` names what is counted."""
    fig = new_figure(4.2, 2.8)
    ax = fig.add_subplot(1, 1, 1)
    v = values_ms[np.isfinite(values_ms)]
    if len(v):
        ax.hist(v, bins=min(40, max(5, len(v) // 5)), color=color, alpha=0.85)
        for q, style in ((50, "-"), (99, "--")):
            x = float(np.percentile(v, q))
            ax.axvline(x, color="black", linestyle=style, linewidth=1)
            ax.text(x, ax.get_ylim()[1], f" p{q} {x:.1f}", va="top", fontsize=8)
    ax.set_xlabel(f"{name} (ms)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig


def over_time(t_s: np.ndarray, tok_per_s: np.ndarray) -> Figure:
    """Output tokens/s over the run (per window)."""
    fig = new_figure(8.0, 2.8)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(t_s, tok_per_s, color="#4C72B0", linewidth=1.2)
    ax.set_xlabel("time since the first request (s)")
    ax.set_ylabel("output token/s")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    return fig


def queue_chart(s: StateSeries) -> Figure:
    """Running and waiting requests (left axis) and the KV cache in use (right axis, %) over the run."""
    fig = new_figure(8.0, 2.8)
    ax = fig.add_subplot(1, 1, 1)
    t = s.time_s - (s.time_s[0] if len(s.time_s) else 0.0)
    ax.step(t, s.running, where="post", color="#4C72B0", label="running")
    ax.step(t, s.waiting, where="post", color="#C44E52", label="waiting")
    ax.set_xlabel("time since the first request (s)")
    ax.set_ylabel("requests")
    ax.grid(True, alpha=0.3)
    kv = ax.twinx()
    kv.plot(t, 100 * s.kv_used_frac, color="#DD8452", linewidth=1, label="KV in use")
    kv.set_ylabel("KV cache in use (%)")
    kv.set_ylim(0, 105)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = kv.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    return fig
