"""Figure of a request-level run (``simcast bench-serve --plot``; edge module: no simulation).

Top row: the engine's state over time, summed over DP replicas — running
requests and waiting-queue length (left), KV-cache blocks in use as a percent
of capacity (right). Bottom row: the empirical CDFs of TTFT and TPOT per
request, with the median and p99 marked (the values ``vllm bench serve``
prints). Time is the simulated clock in seconds from the first arrival.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simcast.render.plots import new_figure
from simcast.serving.request_level.bench_result import BenchResult, tpots_s

MS = 1e3


@dataclass(frozen=True, kw_only=True)
class StateSeries:
    """The engine state after each step, summed over replicas (each replica's last sample carried forward)."""

    time_s: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    kv_used_frac: np.ndarray  # KV blocks in use / blocks held by all replicas, 0..1


def state_series(r: BenchResult) -> StateSeries:
    """Totals over replicas at every sample time (a replica's state holds until its next step)."""
    t = np.array([s.time_s for s in r.samples])
    rid = np.array([s.replica for s in r.samples])
    vals = np.array(
        [(s.running, s.waiting, s.kv_used_blocks, s.kv_total_blocks) for s in r.samples], dtype=float
    ).reshape(-1, 4)
    times = np.unique(t)
    tot = np.zeros((times.size, 4))
    for k in np.unique(rid):  # forward-fill each replica's state onto the common clock, then add
        m = rid == k
        tk, vk = t[m], vals[m]
        o = np.argsort(tk, kind="stable")
        tk, vk = tk[o], vk[o]
        i = np.searchsorted(tk, times, side="right") - 1
        tot += np.where((i >= 0)[:, None], vk[np.maximum(i, 0)], 0.0)
    cap = max(1.0, float(vals[:, 3].max(initial=0.0))) * max(1, np.unique(rid).size)  # replicas hold equal caches
    return StateSeries(time_s=times, running=tot[:, 0], waiting=tot[:, 1], kv_used_frac=tot[:, 2] / cap)


def per_request_ms(r: BenchResult) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) per request in ms; TPOT = (E2E − TTFT)/(output − 1), outputs > 1 only (as vLLM counts it)."""
    ttft = np.array([x.ttft_s for x in r.requests]) * MS
    tpot = np.array(tpots_s(r.requests)) * MS
    return ttft, tpot


def draw_queue(ax: Axes, s: StateSeries) -> None:
    """Running batch and waiting queue (requests) against time (s), as steps."""
    ax.step(s.time_s, s.running, where="post", color="#4C72B0", linewidth=1, label="running")
    ax.step(s.time_s, s.waiting, where="post", color="#DD8452", linewidth=1, label="waiting")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("requests")
    ax.set_title("Running batch and waiting queue")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)


def draw_kv(ax: Axes, s: StateSeries) -> None:
    """KV-cache blocks in use (% of capacity) against time (s)."""
    ax.step(s.time_s, 100 * s.kv_used_frac, where="post", color="#55A868", linewidth=1, label="KV blocks in use")
    ax.axhline(100, color="#C44E52", linestyle="--", linewidth=1, label="capacity")
    ax.set_ylim(0, 105)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KV cache used (%)")
    ax.set_title("KV-cache use")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)


def draw_cdf(ax: Axes, v_ms: np.ndarray, name: str, color: str) -> None:
    """Empirical CDF of per-request values (ms) with the median and p99 as dashed lines."""
    v = np.sort(v_ms) if v_ms.size else np.zeros(1)
    ax.plot(v, np.arange(1, v.size + 1) / v.size, color=color, linewidth=1.5, label=f"{name} CDF ({v.size} req)")
    for p, ls in ((50, "--"), (99, ":")):
        x = float(np.percentile(v, p))
        ax.axvline(x, color="black", linestyle=ls, linewidth=1, label=f"p{p} {x:.1f} ms")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"{name} (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(f"{name} distribution")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)


def plot_bench(r: BenchResult, *, title: str | None = None) -> Figure:
    """2×2 figure: queue and running batch, KV use (over time), TTFT and TPOT CDFs."""
    fig = new_figure(11.0, 7.0)
    axes = fig.subplots(2, 2)
    s = state_series(r)
    ttft, tpot = per_request_ms(r)
    draw_queue(axes[0, 0], s)
    draw_kv(axes[0, 1], s)
    draw_cdf(axes[1, 0], ttft, "TTFT", "#4C72B0")
    draw_cdf(axes[1, 1], tpot, "TPOT", "#8172B3")
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
