"""Collective and point-to-point time: ``latency · steps + bytes · factor / (bw · eff)``.

Bandwidths are per-GPU unidirectional link bandwidths (the link table's
``bw_bytes_per_s``) scaled by the link's achievable efficiency.

A :class:`~simcast.core.layout.Path` carries its bottleneck link's calibrated collective fits
(:class:`~simcast.core.specs.CollectiveFit`, per collective and group size); then a
collective costs ``α + factor · bytes / β`` with the fit of the nearest
measured group size, instead of the generic per-step formula.
"""

from __future__ import annotations

import math

from simcast.core.layout import Path
from simcast.core.specs import CollectiveFit
from simcast.cost.collectives import regime_for, regimes


def collective_fit(path: Path, kind: str, n: int, message_bytes: float = 0.0) -> CollectiveFit | None:
    """The fit for ``kind`` at the group size nearest ``n`` (log scale); all-gather falls back to all-reduce's.

    With piecewise fits (``max_bytes``), the regime covering ``message_bytes``.
    """
    fits = path.collectives
    for k in (kind, "all_reduce"):
        regs = regimes(fits, k, n)
        if regs:
            return regime_for(regs, message_bytes)
    return None


def fitted_collective_s(message_bytes: float, n: int, fit: CollectiveFit, kind: str) -> float:
    """``α + factor · bytes / β``; factor ``2(n-1)/n`` (all-reduce) or ``(n-1)/n`` (all-gather)."""
    factor = (2.0 if kind == "all_reduce" else 1.0) * (n - 1) / n
    return fit.latency_s + factor * message_bytes / fit.bus_bw_bytes_per_s


def ring_all_reduce_s(message_bytes: float, n: int, path: Path) -> float:
    """Ring all-reduce: reduce-scatter + all-gather, ``2(n-1)`` steps of ``bytes/n``."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    return 2 * (n - 1) * path.latency_s + 2 * (n - 1) / n * message_bytes / path.effective_bw_bytes_per_s


def tree_all_reduce_s(message_bytes: float, n: int, path: Path) -> float:
    """Double binary tree all-reduce: ``2·log2(n)`` latency steps, pipelined full-size transfers."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * path.latency_s + message_bytes / path.effective_bw_bytes_per_s


def all_reduce_s(message_bytes: float, n: int, path: Path, algorithm: str = "auto") -> float:
    """All-reduce of ``message_bytes`` per rank over ``n`` ranks; ``auto`` takes the faster.

    A path with an all-reduce fit uses it (NCCL picks its own algorithm
    inside the measured time), whatever ``algorithm`` says.
    """
    fit = collective_fit(path, "all_reduce", n, message_bytes)
    if fit is not None and n > 1 and message_bytes > 0:
        return fitted_collective_s(message_bytes, n, fit, "all_reduce")
    if algorithm == "ring":
        return ring_all_reduce_s(message_bytes, n, path)
    if algorithm == "tree":
        return tree_all_reduce_s(message_bytes, n, path)
    return min(ring_all_reduce_s(message_bytes, n, path), tree_all_reduce_s(message_bytes, n, path))


def all_gather_s(output_bytes: float, n: int, path: Path) -> float:
    """Ring all-gather producing ``output_bytes`` per rank: ``n-1`` steps of ``bytes/n``."""
    if n <= 1 or output_bytes <= 0:
        return 0.0
    fit = collective_fit(path, "all_gather", n, output_bytes)
    if fit is not None:
        return fitted_collective_s(output_bytes, n, fit, "all_gather")
    return (n - 1) * path.latency_s + (n - 1) / n * output_bytes / path.effective_bw_bytes_per_s


def p2p_s(message_bytes: float, path: Path) -> float:
    """One-way send/recv: ``latency + bytes / (bw · eff)``; 0 bytes -> 0."""
    if message_bytes <= 0:
        return 0.0
    return path.latency_s + message_bytes / path.effective_bw_bytes_per_s
