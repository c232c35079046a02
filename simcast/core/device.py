"""The device spec: one accelerator's peaks, efficiencies and the links of its cluster.

Units are in the field names. Constructors validate and never touch files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from simcast.core.errors import require
from simcast.core.kernel_fits import EngineKernels

COLLECTIVE_KINDS = ("all_reduce", "all_gather")


@dataclass(frozen=True, kw_only=True)
class CollectiveFit:
    """A fitted collective on one link for one group size: ``t = latency_s + factor · bytes / bus_bw``.

    ``latency_s`` (α) is the fixed cost of one call (launch, handshake, sync),
    ``bus_bw_bytes_per_s`` (β) the achieved NCCL bus bandwidth; ``factor`` is
    ``2(n-1)/n`` for all-reduce and ``(n-1)/n`` for all-gather (nccl-tests' busbw).

    Optional piecewise regimes: several fits of one kind and group size with
    ``max_bytes`` form a piecewise-linear curve (each applies up to its
    ``max_bytes``; 0 = no upper bound), e.g. an engine's one-shot kernel, its
    two-shot kernel, then NCCL, or NCCL's own protocol switches; ``algorithm``
    names the regime (``one_shot``, ``two_shot``, ``nccl``...).
    """

    kind: str
    gpus: int
    latency_s: float
    bus_bw_bytes_per_s: float
    max_bytes: float = 0.0
    algorithm: str = ""

    def __post_init__(self) -> None:
        require(self.kind in COLLECTIVE_KINDS, "collectives.kind", self.kind, f"allowed: {', '.join(COLLECTIVE_KINDS)}")
        require(self.gpus >= 2, "collectives.gpus", self.gpus, "must be >= 2")
        require(self.latency_s >= 0, "collectives.latency_s", self.latency_s, "must be >= 0")
        require(self.bus_bw_bytes_per_s > 0, "collectives.bus_bw_bytes_per_s", self.bus_bw_bytes_per_s, "must be > 0")
        require(self.max_bytes >= 0, "collectives.max_bytes", self.max_bytes, "must be >= 0 (0: no upper bound)")


@dataclass(frozen=True, kw_only=True)
class LinkSpec:
    """One kind of link: per-GPU unidirectional bandwidth, per-message latency.

    ``latency_s`` and ``efficiency`` give a point-to-point message
    ``latency_s + bytes / (bw · efficiency)``; ``collectives`` (optional,
    fitted by ``simcast calibrate``) hold per-collective, per-group-size fits.
    ``mesh_links`` (optional): 0 for a switched fabric, where every pair sees
    ``bw_bytes_per_s``; n > 0 for a full mesh of n equal peer links sharing it
    (e.g. MI300X xGMI), where one pair sees ``bw/n`` and a collective over k
    ranks drives ``min(k-1, n)`` links.
    """

    name: str
    bw_bytes_per_s: float
    latency_s: float
    efficiency: float
    collectives: tuple[CollectiveFit, ...] = ()
    mesh_links: int = 0

    def __post_init__(self) -> None:
        require(self.bw_bytes_per_s > 0, f"link {self.name}.bw_bytes_per_s", self.bw_bytes_per_s, "must be > 0")
        require(self.latency_s >= 0, f"link {self.name}.latency_s", self.latency_s, "must be >= 0")
        require(0 < self.efficiency <= 1, f"link {self.name}.efficiency", self.efficiency, "must be in (0, 1]")
        require(self.mesh_links >= 0, f"link {self.name}.mesh_links", self.mesh_links, "must be >= 0 (0: switched)")
        object.__setattr__(
            self,
            "collectives",
            tuple(c if isinstance(c, CollectiveFit) else CollectiveFit(**c) for c in self.collectives),
        )

    @property
    def effective_bw_bytes_per_s(self) -> float:
        return self.bw_bytes_per_s * self.efficiency


@dataclass(frozen=True, kw_only=True)
class InterNodeOrigin:
    """Where a replaced inter-node link's numbers come from (:func:`simcast.core.fabrics.fabric_links`):
    the base link (a named fabric's, else the profile's) and the values given explicitly, each with the
    flag or service-YAML key that gave it."""

    fabric: str  # the named fabric ("": the profile's link is the base)
    base_link: str  # the base link's name
    bandwidth_gbps: float | None  # given explicitly (GB/s per GPU per direction), else None
    bandwidth_field: str
    latency_us: float | None  # given explicitly, else None
    latency_field: str
    efficiency: float  # the base link's
    fabric_sources: tuple[str, ...] = ()  # the named fabric's bandwidth, latency and efficiency sources


@dataclass(frozen=True, kw_only=True)
class LinkTable:
    """Cluster topology: nodes of ``devices_per_node`` devices, an intra- and an inter-node link.

    ``inter_node_origin``: None when ``inter_node`` is the device profile's; else where it came from
    (a named fabric, flags or service-YAML keys: :func:`simcast.core.fabrics.fabric_links`).
    """

    devices_per_node: int
    intra_node: LinkSpec
    inter_node: LinkSpec
    inter_node_origin: InterNodeOrigin | None = None

    def __post_init__(self) -> None:
        require(self.devices_per_node >= 1, "links.devices_per_node", self.devices_per_node, "must be >= 1")


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """Achieved fractions of peak, and fixed per-kernel overhead.

    ``matmul``/``vector``/``memory`` are fractions of the matmul peak, vector
    peak and HBM bandwidth.

    GEMM shape curves (optional, fitted by ``simcast calibrate``): the matmul
    efficiency of an ``M×K @ K×N`` GEMM is multiplied by
    ``d / (d + d_half)`` for d in M, N, K. ``matmul_half_m_ridge`` gives M's
    half point in units of the device's ridge intensity (tokens at which a
    GEMM turns compute-bound, ``peak / hbm_bw`` for 2-byte dtypes), so the
    curve carries over to a device with other peaks; ``matmul_half_n`` and
    ``matmul_half_k`` are in elements. ``vector_memory`` is the HBM fraction
    reached by non-GEMM kernels (norms, activations, RoPE, adds); 0 = ``memory``.
    ``vector_launch_overhead_s`` is their fixed cost per kernel; None = ``launch_overhead_s``.
    """

    matmul: float
    vector: float
    memory: float
    launch_overhead_s: float
    matmul_half_m_ridge: float = 0.0
    matmul_half_n: float = 0.0
    matmul_half_k: float = 0.0
    vector_memory: float = 0.0
    vector_launch_overhead_s: float | None = None

    def __post_init__(self) -> None:
        for f in ("matmul", "vector", "memory"):
            v = getattr(self, f)
            require(0 < v <= 1, f"efficiency.{f}", v, "must be in (0, 1]")
        require(self.launch_overhead_s >= 0, "efficiency.launch_overhead_s", self.launch_overhead_s, "must be >= 0")
        for f in ("matmul_half_m_ridge", "matmul_half_n", "matmul_half_k"):
            require(getattr(self, f) >= 0, f"efficiency.{f}", getattr(self, f), "must be >= 0 (0 disables)")
        require(
            self.vector_launch_overhead_s is None or self.vector_launch_overhead_s >= 0,
            "efficiency.vector_launch_overhead_s",
            self.vector_launch_overhead_s,
            "must be >= 0",
        )
        require(0 <= self.vector_memory <= 1, "efficiency.vector_memory", self.vector_memory, "must be in [0, 1]")


@dataclass(frozen=True, kw_only=True)
class DeviceSpec:
    """One accelerator and the cluster it sits in (hardware as data)."""

    name: str
    description: str
    matmul_flops_per_s: Mapping[str, float]
    vector_flops_per_s: Mapping[str, float]
    hbm_bytes: int
    hbm_bw_bytes_per_s: float
    efficiency: Efficiency
    links: LinkTable
    engines: Mapping[str, EngineKernels] = field(default_factory=dict)
    """Per-engine fitted kernels (optional, see :mod:`simcast.core.kernel_fits`)."""
    reported_name: str = ""
    """The name the driver reports (``nvidia-smi``, ``torch.cuda.get_device_name()``): an engine that picks
    defaults by device name reads this, never the profile's ``name``; empty when the profile does not say."""

    @property
    def has_fp4(self) -> bool:
        """The device has FP4 tensor cores (an ``fp4`` matmul peak): fp4 weight formats run W4A4 on it."""
        return self.matmul_flops_per_s.get("fp4", 0) > 0

    def matmul_peak(self, dtype: str) -> float:
        """Dense matmul peak for ``dtype`` in FLOP/s; a dtype the profile lacks is an error naming the field."""
        require(
            self.matmul_flops_per_s.get(dtype, 0) > 0,
            f"device.compute.matmul_flops_per_s.{dtype}",
            "missing",
            f"device {self.name} has matmul peaks for {sorted(self.matmul_flops_per_s)}; "
            f"add the {dtype} peak (FLOP/s) to its profile or pick another --dtype",
        )
        return self.matmul_flops_per_s[dtype]

    def vector_peak(self, dtype: str) -> float:
        """Vector-unit (non-matmul) peak for ``dtype`` in FLOP/s.

        fp8 has no vector arithmetic (norms and activations upcast), so an fp8
        model's elementwise work runs at the fp32 peak unless the profile gives
        an fp8 one. Any other missing dtype is an error naming the field.
        """
        key = "fp32" if dtype == "fp8" and "fp8" not in self.vector_flops_per_s else dtype
        require(
            self.vector_flops_per_s.get(key, 0) > 0,
            f"device.compute.vector_flops_per_s.{key}",
            "missing",
            f"device {self.name} has vector peaks for {sorted(self.vector_flops_per_s)}; "
            f"add the {key} peak (FLOP/s) to its profile or pick another --dtype",
        )
        return self.vector_flops_per_s[key]
