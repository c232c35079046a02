"""Collective and point-to-point time: ``latency · steps + bytes · factor / (bw · eff)``.

Bandwidths are per-GPU unidirectional link bandwidths (the link table's
``bw_bytes_per_s``) scaled by the link's achievable efficiency.

A :class:`~simcast.core.layout.Path` carries its bottleneck link's calibrated collective fits
(:class:`~simcast.core.device.CollectiveFit`, per collective and group size); then a
collective costs ``α + factor · bytes / β`` with the fit of the nearest
measured group size, instead of the generic per-step formula.

A group spanning nodes evenly (a path with a :class:`~simcast.core.layout.Hierarchy`: ``g`` ranks
on each of ``m`` nodes) is costed hierarchically, the way NCCL's tree algorithm is built (chains
inside a node, a tree across nodes: NCCL docs ``NCCL_ALGO``; NVIDIA/nccl issue #545; the latency
model ``2((nRanks/nNodes-1)·intraLat + log2(nNodes)·interLat)`` in src/graph/tuning.cc@b6475625):

* all-reduce of ``S`` bytes = intra-node reduce-scatter + all-gather over ``g`` ranks (costed as one
  intra-node all-reduce of ``S``, with the intra link's fits) + an all-reduce of the ``S/g`` shard
  over the ``m`` nodes (each of the ``g`` GPUs at once, through its own NIC share: the inter link's
  per-GPU bandwidth), ring or tree, whichever is faster;
* all-gather producing ``S`` = an inter-node all-gather producing ``S/g`` over ``m`` nodes, then an
  intra-node all-gather producing ``S`` over ``g`` ranks;
* all-to-all (MoE dispatch/combine) of ``sent`` bytes per rank: the share bound for other nodes
  (``(n-g)/(n-1)`` of it) crosses the fabric while the rest moves inside the node, concurrently.

A cross-node link with a fit measured on a whole group of exactly ``n`` ranks (a100_sxm_80gb's, fitted
on Vidur's 2-node all-reduce rows) keeps that fit: a measurement of the very collective beats a
composition. On those rows (not used by the composition: it takes the intra-node fits and the
2-GPU/2-node pair fit), the hierarchical model predicts 0.3-0.6x the measured time, flat ring/tree
0.6-1.5x: that cluster's aggregate inter-node rate (busbw 12-22 GB/s) is below one NIC per GPU at the
single-pair rate, which is what the hierarchy assumes; give the per-GPU share with
``--inter-node-bandwidth`` for such clusters.
"""

from __future__ import annotations

import math

from simcast.core.device import CollectiveFit
from simcast.core.layout import Path
from simcast.cost.comm.collectives import factor, fitted_s, regime_for, regimes


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


def hierarchical(path: Path, kind: str, n: int) -> bool:
    """Cost ``kind`` over ``n`` ranks hierarchically: the group spans nodes evenly, and the cross-node
    link has no fit measured on a whole group of exactly ``n`` ranks (such a fit is used as it is)."""
    h = path.hierarchy
    if h is None or n != h.ranks_per_node * h.nodes or n <= 1:
        return False
    return not any(f.gpus == n and f.kind in (kind, "all_reduce") for f in path.collectives)


def ring_all_reduce_s(message_bytes: float, n: int, path: Path) -> float:
    """Ring all-reduce: reduce-scatter + all-gather, ``2(n-1)`` steps of ``bytes/n``."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    return 2 * (n - 1) * path.latency_s + factor("all_reduce", n) * message_bytes / path.effective_bw_bytes_per_s


def tree_all_reduce_s(message_bytes: float, n: int, path: Path) -> float:
    """Double binary tree all-reduce: ``2·log2(n)`` latency steps, pipelined full-size transfers."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * path.latency_s + message_bytes / path.effective_bw_bytes_per_s


def all_reduce_s(message_bytes: float, n: int, path: Path, algorithm: str = "auto") -> float:
    """All-reduce of ``message_bytes`` per rank over ``n`` ranks; ``auto`` takes the faster.

    A path with an all-reduce fit uses it (NCCL picks its own algorithm
    inside the measured time), whatever ``algorithm`` says. A group spanning nodes evenly is
    hierarchical (module docstring).
    """
    h = path.hierarchy
    if hierarchical(path, "all_reduce", n) and h is not None and message_bytes > 0:
        return all_reduce_s(message_bytes, h.ranks_per_node, h.intra, algorithm) + all_reduce_s(
            message_bytes / h.ranks_per_node, h.nodes, h.inter, algorithm
        )
    fit = collective_fit(path, "all_reduce", n, message_bytes)
    if fit is not None and n > 1 and message_bytes > 0:
        return fitted_s(fit, "all_reduce", n, message_bytes)
    if algorithm == "ring":
        return ring_all_reduce_s(message_bytes, n, path)
    if algorithm == "tree":
        return tree_all_reduce_s(message_bytes, n, path)
    return min(ring_all_reduce_s(message_bytes, n, path), tree_all_reduce_s(message_bytes, n, path))


def all_gather_s(output_bytes: float, n: int, path: Path) -> float:
    """Ring all-gather producing ``output_bytes`` per rank: ``n-1`` steps of ``bytes/n``."""
    if n <= 1 or output_bytes <= 0:
        return 0.0
    h = path.hierarchy
    if hierarchical(path, "all_gather", n) and h is not None:
        return all_gather_s(output_bytes / h.ranks_per_node, h.nodes, h.inter) + all_gather_s(
            output_bytes, h.ranks_per_node, h.intra
        )
    fit = collective_fit(path, "all_gather", n, output_bytes)
    if fit is not None:
        return fitted_s(fit, "all_gather", n, output_bytes)
    return (n - 1) * path.latency_s + factor("all_gather", n) * output_bytes / path.effective_bw_bytes_per_s


def p2p_s(message_bytes: float, path: Path) -> float:
    """One-way send/recv: ``latency + bytes / (bw · eff)``; 0 bytes -> 0."""
    if message_bytes <= 0:
        return 0.0
    return path.latency_s + message_bytes / path.effective_bw_bytes_per_s


def all_to_all_s(sent_bytes: float, path: Path) -> float:
    """All-to-all where each rank sends ``sent_bytes`` in total to the other ranks of ``path``'s group.

    Inside one node (or without a hierarchy): one transfer over the path. Across ``m`` nodes of ``g``
    ranks (``n = g·m``; destinations assumed spread evenly over the group): ``(n-g)/(n-1)`` of the bytes
    cross the fabric while the rest moves inside the node; the two run concurrently, so the slower counts.
    """
    h = path.hierarchy
    if h is None:
        return p2p_s(sent_bytes, path)
    g, n = h.ranks_per_node, h.ranks_per_node * h.nodes
    cross = sent_bytes * (n - g) / (n - 1)
    return max(p2p_s(cross, h.inter), p2p_s(sent_bytes - cross, h.intra))
