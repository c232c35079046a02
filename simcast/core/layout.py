"""Rank groups, node placement and link selection.

Global ranks reshape to ``[-1, dp, pp, tp]`` (vLLM's and the RFC's layout): TP
groups are contiguous ranks, PP groups stride by ``tp``. Ranks fill nodes of
``devices_per_node`` consecutive ranks. The cluster is a graph (GPUs, one switch
per node, one inter-node fabric as nodes; links with bandwidth and latency as edges:
:class:`ClusterGraph`, a plain edge map: networkx cost 0.2 s of import per run for two
edge look-ups, ../shared/design/ARCHITECTURE.md "Rank groups") built from the link table. The
route between two ranks follows the topology, never the lower latency: two
ranks of one node talk through their node's switch (the intra-node link),
ranks of different nodes through the fabric (the inter-node link). A route's
bandwidth is its slowest edge's, its latency the sum of its edges'.

A group that spans nodes with the same number of ranks on each carries a
:class:`Hierarchy` (ranks per node, nodes, the intra- and inter-node paths), so
collectives can be costed hierarchically (intra-node, then across nodes, then
intra-node: :mod:`simcast.cost.comm.time`). A pipeline hop is every TP rank of one stage
sending to its peer on the next at once: :func:`pp_hop_paths` gives each distinct
path those pairs use, and the hop costs the slowest.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from simcast.core.device import CollectiveFit, LinkSpec, LinkTable
from simcast.core.plan import SendRecvEdge
from simcast.core.specs import ParallelSpec


@dataclass(frozen=True, kw_only=True)
class ParallelGroup:
    rank: int
    world_size: int
    rank_group: tuple[int, ...]

    @property
    def rank_in_group(self) -> int:
        return self.rank_group.index(self.rank)


@dataclass(frozen=True, kw_only=True)
class RankGroups:
    tp_group: ParallelGroup
    pp_group: ParallelGroup
    dp_group: ParallelGroup


def rank_coords(rank: int, par: ParallelSpec) -> tuple[int, int, int]:
    """(dp_index, pp_index, tp_index) of a global rank in the [-1, dp, pp, tp] layout."""
    tp_i = rank % par.tp
    pp_i = (rank // par.tp) % par.pp
    dp_i = (rank // (par.tp * par.pp)) % par.dp
    return dp_i, pp_i, tp_i


def rank_of(dp_i: int, pp_i: int, tp_i: int, par: ParallelSpec) -> int:
    return (dp_i * par.pp + pp_i) * par.tp + tp_i


def rank_groups(rank: int, par: ParallelSpec) -> RankGroups:
    """The TP, PP and DP groups a global rank belongs to."""
    if not 0 <= rank < par.world_size:
        raise ValueError(f"rank {rank} outside world of {par.world_size}")
    d, p, t = rank_coords(rank, par)
    tp = tuple(rank_of(d, p, i, par) for i in range(par.tp))
    pp = tuple(rank_of(d, i, t, par) for i in range(par.pp))
    dp = tuple(rank_of(i, p, t, par) for i in range(par.dp))
    return RankGroups(
        tp_group=ParallelGroup(rank=rank, world_size=par.tp, rank_group=tp),
        pp_group=ParallelGroup(rank=rank, world_size=par.pp, rank_group=pp),
        dp_group=ParallelGroup(rank=rank, world_size=par.dp, rank_group=dp),
    )


def node_of(rank: int, devices_per_node: int) -> int:
    return rank // devices_per_node


@dataclass(frozen=True, kw_only=True)
class Edge:
    """One cluster-graph edge: its link and its share of the link's latency (s)."""

    link: LinkSpec
    latency_s: float


@dataclass(frozen=True, kw_only=True)
class ClusterGraph:
    """An undirected graph as an edge map: ``edges[u, v]`` is ``edges[v, u]`` (both orientations kept)."""

    edges: dict[tuple[str, str], Edge]

    def edge(self, u: str, v: str) -> Edge:
        return self.edges[u, v]


@lru_cache(maxsize=64)
def cluster_graph(links: LinkTable, world_size: int) -> ClusterGraph:
    """GPUs ``gpu{r}``, a switch ``sw{n}`` per node, and one fabric ``net``.

    Each GPU has an intra-node edge to its node's switch and an inter-node edge
    (its NIC) to the fabric. Edge latency is split in half so a two-edge path
    costs one link latency.
    """
    edges: dict[tuple[str, str], Edge] = {}
    intra = Edge(link=links.intra_node, latency_s=links.intra_node.latency_s / 2)
    inter = Edge(link=links.inter_node, latency_s=links.inter_node.latency_s / 2)
    for r in range(world_size):
        gpu, sw = f"gpu{r}", f"sw{node_of(r, links.devices_per_node)}"
        edges[gpu, sw] = edges[sw, gpu] = intra
        edges[gpu, "net"] = edges["net", gpu] = inter
    return ClusterGraph(edges=edges)


@dataclass(frozen=True, kw_only=True)
class Hierarchy:
    """A group of ``ranks_per_node`` ranks on each of ``nodes`` nodes: the path inside a node, and the
    path between same-position ranks of different nodes (each GPU through its own NIC share)."""

    ranks_per_node: int
    nodes: int
    intra: Path
    inter: Path


@dataclass(frozen=True, kw_only=True)
class Path:
    """A resolved route between ranks: what a message between them sees."""

    name: str
    bw_bytes_per_s: float
    latency_s: float
    efficiency: float
    cross_node: bool
    collectives: tuple[CollectiveFit, ...] = ()  # calibrated fits of the bottleneck link
    hierarchy: Hierarchy | None = None  # a group spanning nodes evenly (collectives go hierarchical)

    @property
    def effective_bw_bytes_per_s(self) -> float:
        return self.bw_bytes_per_s * self.efficiency


def route(a: int, b: int, devices_per_node: int) -> tuple[str, ...]:
    """The cluster-graph nodes a message from rank ``a`` to rank ``b`` crosses, by topology.

    Same node: through the node's switch (NVLink/NVSwitch, xGMI, HCCS, PCIe),
    whatever the latencies say; different nodes: through the fabric (each GPU's NIC).
    """
    na, nb = node_of(a, devices_per_node), node_of(b, devices_per_node)
    return (f"gpu{a}", f"sw{na}" if na == nb else "net", f"gpu{b}")


def path_between(a: int, b: int, links: LinkTable, world_size: int) -> Path:
    """The path between two ranks: the intra-node link on one node, the inter-node link across nodes."""
    if a == b:
        return Path(name="local", bw_bytes_per_s=float("inf"), latency_s=0.0, efficiency=1.0, cross_node=False)
    g = cluster_graph(links, world_size)
    nodes = route(a, b, links.devices_per_node)
    hops = [g.edge(u, v) for u, v in zip(nodes, nodes[1:])]
    edges: list[LinkSpec] = [e.link for e in hops]
    slowest = min(edges, key=lambda e: e.effective_bw_bytes_per_s / max(1, e.mesh_links))
    return Path(
        name=slowest.name,
        bw_bytes_per_s=slowest.bw_bytes_per_s / max(1, slowest.mesh_links),
        latency_s=sum(e.latency_s for e in hops),
        efficiency=slowest.efficiency,
        collectives=slowest.collectives,
        cross_node=node_of(a, links.devices_per_node) != node_of(b, links.devices_per_node),
    )


def group_path(ranks: tuple[int, ...], links: LinkTable, world_size: int) -> Path:
    """The bottleneck path a ring over ``ranks`` sees (the slowest neighbour hop).

    A group spanning ``m >= 2`` nodes with the same number ``g >= 2`` of its ranks on each also carries
    its :class:`Hierarchy` (``g`` ranks over the intra-node path, ``m`` nodes over the fabric).
    """
    if len(ranks) <= 1:
        return path_between(ranks[0], ranks[0], links, world_size)
    hops = [path_between(a, b, links, world_size) for a, b in zip(ranks, ranks[1:] + ranks[:1])]
    worst = min(hops, key=lambda p: (p.effective_bw_bytes_per_s, -p.latency_s))
    mesh = links.intra_node.mesh_links
    if mesh and not worst.cross_node:  # a collective over k ranks of a full mesh drives min(k-1, n) links
        worst = replace(worst, bw_bytes_per_s=worst.bw_bytes_per_s * min(len(ranks) - 1, mesh))
    per_node: dict[int, list[int]] = {}
    for r in ranks:
        per_node.setdefault(node_of(r, links.devices_per_node), []).append(r)
    sizes = {len(v) for v in per_node.values()}
    if len(per_node) >= 2 and sizes == {g := len(ranks) // len(per_node)} and g >= 2:  # g = 1: a flat ring
        local = next(iter(per_node.values()))
        intra = group_path(tuple(local), links, world_size)
        firsts = [v[0] for v in per_node.values()]
        inter = path_between(firsts[0], firsts[1], links, world_size)
        worst = replace(worst, hierarchy=Hierarchy(ranks_per_node=g, nodes=len(per_node), intra=intra, inter=inter))
    return worst


def stage_tp_path(stage: int, par: ParallelSpec, links: LinkTable) -> Path:
    """The TP group of ``stage`` in replica 0 (all replicas are placed alike) and the path its ring sees."""
    return group_path(tuple(rank_of(0, stage, i, par) for i in range(par.tp)), links, par.world_size)


def pp_hop_pairs(edge: SendRecvEdge, par: ParallelSpec) -> list[tuple[int, int]]:
    """Every (sender, receiver) pair of a send/recv edge: TP rank t of the source stage sends to TP rank t
    of the destination stage, in every DP replica, all at once."""
    return [
        (rank_of(d, edge.src_stage, t, par), rank_of(d, edge.dst_stage, t, par))
        for d in range(par.dp)
        for t in range(par.tp)
    ]


def pp_hop_paths(edge: SendRecvEdge, par: ParallelSpec, links: LinkTable) -> tuple[Path, ...]:
    """The distinct paths the pairs of a send/recv edge use (intra-node, inter-node or both), intra first.

    The hop costs its slowest pair (:func:`simcast.cost.comm.time.p2p_s` of each, the maximum): a stage
    straddling two nodes sends part of its pairs through the fabric even when TP rank 0's stays inside.
    """
    dpn = links.devices_per_node
    found: dict[bool, tuple[int, int]] = {}
    for a, b in pp_hop_pairs(edge, par):
        found.setdefault(node_of(a, dpn) != node_of(b, dpn), (a, b))
        if len(found) == 2:
            break
    return tuple(path_between(a, b, links, par.world_size) for _, (a, b) in sorted(found.items()))


def pp_hop_cross_pairs(edge: SendRecvEdge, par: ParallelSpec, links: LinkTable) -> int:
    """How many of the edge's pairs cross nodes."""
    dpn = links.devices_per_node
    return sum(node_of(a, dpn) != node_of(b, dpn) for a, b in pp_hop_pairs(edge, par))


def pp_hop_path(edge: SendRecvEdge, par: ParallelSpec, links: LinkTable) -> Path:
    """The slowest path of a send/recv edge's pairs (lowest effective bandwidth, then highest latency)."""
    return min(pp_hop_paths(edge, par, links), key=lambda p: (p.effective_bw_bytes_per_s, -p.latency_s))


def parallel_label(par: ParallelSpec, moe: bool) -> str:
    """``TP=.. | PP=.. | DP=..``, with ``| EP=.. | MoE-TP=.. | MoE-DP=..`` for MoE models."""
    s = f"TP={par.tp} | PP={par.pp} | DP={par.dp}"
    if not moe:
        return s
    s += f" | EP={par.ep} | MoE-TP={par.moe_tp} | MoE-DP={par.moe_dp}"
    s += f" | redundant experts={par.redundant_experts}" if par.redundant_experts else ""
    s += " | EPLB" if par.eplb else ""
    return s + " (replicas)" if par.dp > 1 and par.moe_dp == par.dp else s
