"""Collective and point-to-point time: ``latency · steps + bytes · factor / (bw · eff)``.

Bandwidths are per-GPU unidirectional link bandwidths (the link table's
``bw_bytes_per_s``) scaled by the link's achievable efficiency.
"""

from __future__ import annotations

import math

from ..groups import Path


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
    """All-reduce of ``message_bytes`` per rank over ``n`` ranks; ``auto`` takes the faster."""
    if algorithm == "ring":
        return ring_all_reduce_s(message_bytes, n, path)
    if algorithm == "tree":
        return tree_all_reduce_s(message_bytes, n, path)
    return min(ring_all_reduce_s(message_bytes, n, path), tree_all_reduce_s(message_bytes, n, path))


def all_gather_s(output_bytes: float, n: int, path: Path) -> float:
    """Ring all-gather producing ``output_bytes`` per rank: ``n-1`` steps of ``bytes/n``."""
    if n <= 1 or output_bytes <= 0:
        return 0.0
    return (n - 1) * path.latency_s + (n - 1) / n * output_bytes / path.effective_bw_bytes_per_s


def p2p_s(message_bytes: float, path: Path) -> float:
    """One-way send/recv: ``latency + bytes / (bw · eff)``; 0 bytes -> 0."""
    if message_bytes <= 0:
        return 0.0
    return path.latency_s + message_bytes / path.effective_bw_bytes_per_s
