"""Named inter-node fabrics, and how a fabric choice replaces a profile's inter-node link.

A device profile's link table fixes the inter-node link (``links.inter_node``). Users running PP
across nodes often have another fabric than the profile's (RoCE, plain TCP, fewer NICs), so the
CLI and the service YAML can replace it: ``--fabric NAME`` (a row of :data:`FABRICS`), and/or
``--inter-node-bandwidth GBPS`` / ``--inter-node-latency US`` (which override the named fabric's
values, or the profile's when no fabric is named). The result says where each number came from
(:attr:`simcast.core.device.LinkTable.inter_node_origin`, printed in the assumptions).

Bandwidth is per GPU, per direction (the link table's convention): every named fabric is one NIC
of that line rate per GPU, as in DGX/HGX nodes. Where GPUs share a NIC, give the share with
``--inter-node-bandwidth`` (NIC GB/s divided by the GPUs behind it): every GPU then sees its share
even when the others are idle, which is conservative for a PP hop where only some pairs cross nodes.

Latency and efficiency enter ``latency + bytes / (bw * efficiency)`` per message (NCCL send/recv,
one step of a collective). Sources per row; values nobody measured on that fabric say so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcast.core.device import DeviceSpec, InterNodeOrigin, LinkSpec, LinkTable
from simcast.core.errors import require

# The one measured inter-node send/recv simcast has: vidur's DGX H100 cross-node send_recv table
# (2 ranks on 2 nodes over ConnectX-7 InfiniBand NDR), fitted by `simcast calibrate` (median error
# 1.6%); device_profiles/h100_sxm.yaml carries the same fit.
_NDR_FIT = (
    "fit by simcast calibrate on ../shared/calibration/vidur/network/h100_dgx/send_recv.csv cross-node rows "
    "(vidur snapshot 7d47513, DGX H100, ConnectX-7 NDR), median err 1.6%"
)
_NDR_LATENCY_S = 1.8917e-5
_NDR_EFFICIENCY = 7.2756e-1
_RDMA_CARRIED = (
    "carried over from ib-ndr's fit (same NCCL IB-verbs transport and GPUDirect RDMA; NCCL's tuning model "
    "charges every NET link alike: baseLat 8.4 us + NET ring/Simple hwLat 14.0 us, NVIDIA/nccl "
    "src/graph/tuning.cc@b6475625); not measured on this fabric"
)
_TCP_LATENCY = (
    "NCCL socket transport (no RDMA): nccl-tests broadcast_perf 8 B over NET/Socket took 38.2-45.8 us between "
    "two nodes (NVIDIA/nccl-tests issue #82, NCCL 2.9.6); rounded to 40 us"
)
_TCP_EFFICIENCY = (
    "initial assumption: the socket transport stages through host memory and CPU threads, so it reaches less "
    "of the line rate than RDMA (0.6 vs ib-ndr's fitted 0.73); not measured"
)


@dataclass(frozen=True, kw_only=True)
class Fabric:
    """One named inter-node fabric: per-GPU, per-direction bandwidth, message latency, efficiency, sources."""

    name: str
    description: str
    bw_bytes_per_s: float
    latency_s: float
    efficiency: float
    bw_source: str
    latency_source: str
    efficiency_source: str

    def link(self) -> LinkSpec:
        return LinkSpec(
            name=f"{self.name}: {self.description}",
            bw_bytes_per_s=self.bw_bytes_per_s,
            latency_s=self.latency_s,
            efficiency=self.efficiency,
        )


FABRICS: dict[str, Fabric] = {
    f.name: f
    for f in (
        Fabric(
            name="ib-ndr",
            description="InfiniBand NDR 400 Gb/s, 1 NIC per GPU",
            bw_bytes_per_s=50.0e9,
            latency_s=_NDR_LATENCY_S,
            efficiency=_NDR_EFFICIENCY,
            bw_source="400 Gb/s / 8 per direction: NVIDIA ConnectX-7 datasheet (NDR 400 Gb/s per port); "
            "DGX H100 User Guide (8x single-port ConnectX-7)",
            latency_source=_NDR_FIT,
            efficiency_source=_NDR_FIT,
        ),
        Fabric(
            name="ib-hdr",
            description="InfiniBand HDR 200 Gb/s, 1 NIC per GPU",
            bw_bytes_per_s=25.0e9,
            latency_s=_NDR_LATENCY_S,
            efficiency=_NDR_EFFICIENCY,
            bw_source="200 Gb/s / 8 per direction: NVIDIA ConnectX-6 VPI datasheet (HDR 200 Gb/s per port); "
            "DGX A100 User Guide (8x single-port ConnectX-6 HDR)",
            latency_source=_RDMA_CARRIED,
            efficiency_source=_RDMA_CARRIED,
        ),
        Fabric(
            name="roce-400g",
            description="RoCE v2 400 GbE, 1 NIC per GPU",
            bw_bytes_per_s=50.0e9,
            latency_s=_NDR_LATENCY_S,
            efficiency=_NDR_EFFICIENCY,
            bw_source="400 Gb/s / 8 per direction: NVIDIA ConnectX-7 datasheet (400 GbE, RoCE)",
            latency_source=_RDMA_CARRIED,
            efficiency_source=_RDMA_CARRIED,
        ),
        Fabric(
            name="roce-200g",
            description="RoCE v2 200 GbE, 1 NIC per GPU",
            bw_bytes_per_s=25.0e9,
            latency_s=_NDR_LATENCY_S,
            efficiency=_NDR_EFFICIENCY,
            bw_source="200 Gb/s / 8 per direction: NVIDIA ConnectX-6 Dx datasheet (2x 100 / 1x 200 GbE, RoCE)",
            latency_source=_RDMA_CARRIED,
            efficiency_source=_RDMA_CARRIED,
        ),
        Fabric(
            name="tcp-100g",
            description="TCP over 100 GbE (NCCL sockets, no RDMA), 1 NIC per GPU",
            bw_bytes_per_s=12.5e9,
            latency_s=40.0e-6,
            efficiency=0.6,
            bw_source="100 Gb/s / 8 per direction (IEEE 802.3 100GBASE line rate)",
            latency_source=_TCP_LATENCY,
            efficiency_source=_TCP_EFFICIENCY,
        ),
        Fabric(
            name="tcp-25g",
            description="TCP over 25 GbE (NCCL sockets, no RDMA), 1 NIC per GPU",
            bw_bytes_per_s=3.125e9,
            latency_s=40.0e-6,
            efficiency=0.6,
            bw_source="25 Gb/s / 8 per direction (IEEE 802.3by 25GBASE line rate)",
            latency_source=_TCP_LATENCY,
            efficiency_source=_TCP_EFFICIENCY,
        ),
    )
}
"""Named fabrics, by ``--fabric`` name."""


@dataclass(frozen=True, kw_only=True)
class FabricChoice:
    """What the user asked for; ``None`` = not given. Bandwidth in GB/s (10^9 B/s) per GPU per direction,
    latency in microseconds; ``fields`` names where each came from (flag or YAML key) for messages."""

    fabric: str | None = None
    bandwidth_gbps: float | None = None
    latency_us: float | None = None
    fabric_field: str = "--fabric"
    bandwidth_field: str = "--inter-node-bandwidth"
    latency_field: str = "--inter-node-latency"

    @property
    def given(self) -> bool:
        return self.fabric is not None or self.bandwidth_gbps is not None or self.latency_us is not None


def fabric_links(links: LinkTable, choice: FabricChoice) -> LinkTable:
    """``links`` with the inter-node link replaced as ``choice`` says (unchanged when nothing is given).

    Precedence: the profile < the named fabric < an explicit bandwidth / latency. A replaced link drops
    the profile's fitted inter-node collectives (they were measured on the profile's fabric).
    """
    if not choice.given:
        return links
    base = links.inter_node
    if choice.fabric is not None:
        require(
            choice.fabric in FABRICS,
            choice.fabric_field,
            choice.fabric,
            f"allowed: {', '.join(FABRICS)}",
        )
        base = FABRICS[choice.fabric].link()
    # ranges are checked where the values are read (flags, service YAML: simcast.inputs.limits); here the sign
    require(
        choice.bandwidth_gbps is None or choice.bandwidth_gbps > 0,
        choice.bandwidth_field,
        choice.bandwidth_gbps,
        "must be > 0 GB/s per GPU per direction",
    )
    require(
        choice.latency_us is None or choice.latency_us >= 0, choice.latency_field, choice.latency_us, "must be >= 0"
    )
    bw = base.bw_bytes_per_s if choice.bandwidth_gbps is None else choice.bandwidth_gbps * 1e9
    lat = base.latency_s if choice.latency_us is None else choice.latency_us / 1e6
    given = []  # the link's name says which values were given
    if choice.bandwidth_gbps is not None:
        given.append(f"bandwidth {choice.bandwidth_gbps:g} GB/s from {choice.bandwidth_field}")
    if choice.latency_us is not None:
        given.append(f"latency {choice.latency_us:g} us from {choice.latency_field}")
    name = f"{base.name} at {bw / 1e9:g} GB/s, {lat * 1e6:g} us ({'; '.join(given)})" if given else base.name
    link = LinkSpec(name=name, bw_bytes_per_s=bw, latency_s=lat, efficiency=base.efficiency)
    f = FABRICS.get(choice.fabric or "")
    origin = InterNodeOrigin(
        fabric="" if f is None else f.name,
        base_link=base.name,
        bandwidth_gbps=choice.bandwidth_gbps,
        bandwidth_field=choice.bandwidth_field,
        latency_us=choice.latency_us,
        latency_field=choice.latency_field,
        efficiency=base.efficiency,
        fabric_sources=() if f is None else (f.bw_source, f.latency_source, f.efficiency_source),
    )
    return replace(links, inter_node=link, inter_node_origin=origin)


def with_fabric(dev: DeviceSpec, choice: FabricChoice) -> DeviceSpec:
    """``dev`` with its inter-node link replaced as ``choice`` says (the same object when nothing is given)."""
    return dev if not choice.given else replace(dev, links=fabric_links(dev.links, choice))
