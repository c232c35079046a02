"""Which ``xPyD`` deployments a device budget allows, as Dynamo, SGLang PD and TensorRT-LLM place them, and the
Pareto front users read (output token/s per GPU against token/s per user).

**Allocation unit** (:func:`allocation_unit`): the GPUs a pool is given in whole: a node of an HGX/DGX-class
profile (``devices_per_node`` <= 8: 8 GPUs of one NVSwitch baseboard), or a **compute tray of 4 GPUs** on a
rack-scale NVLink domain (GB200/GB300 NVL72: 18 trays of 4 GPUs behind the NVLink Switch; the profiles'
``devices_per_node`` is the 72-GPU domain, ``simcast/data/device_profiles/gb200.yaml``: "4 GPUs per compute
tray", aiconfigurator-core gb200.yaml). A worker may span units (a TP8 worker is two trays, a DP32 decode
worker four HGX nodes or eight trays); a GB200 worker spanning trays stays inside the NVLink domain while it
has at most ``devices_per_node`` GPUs.

**Whole units** (:func:`fills_whole_units`): each pool takes whole units (``x·W_p`` and ``y·W_d`` multiples of
the unit: the pools on their own nodes, as the engines' multi-node recipes launch them), or both pools share
exactly one unit: a single-node ``xPyD``. A budget under one unit is a part of a node: any split of it.

**Token/s per user** = ``1 / TPOT`` (the decode rate one stream sees; MTP/EAGLE's tokens per step are in
TPOT). **Pareto front** (:func:`pareto_front`): the points no other point beats in both token/s/GPU and
token/s/user.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

from simcast.core.device import DeviceSpec

TRAY_DEVICES = 4
"""GPUs per compute tray of a GB200/GB300 NVL72 rack (NVIDIA GB200 NVL72 spec: 18 compute trays, 72 GPUs;
aiconfigurator-core gb200.yaml, as cited in ``simcast/data/device_profiles/gb200.yaml``)."""
HGX_NODE_MAX = 8
"""The largest ``devices_per_node`` of a single-baseboard node (HGX/DGX 8-GPU, MI300X-class OAM platforms)."""


def allocation_unit(device: DeviceSpec) -> tuple[int, str]:
    """(GPUs a pool takes in whole, why) for ``device`` (module docstring)."""
    per = device.links.devices_per_node
    if per <= HGX_NODE_MAX:
        return per, f"whole nodes of {per} GPUs"
    return TRAY_DEVICES, f"whole compute trays of {TRAY_DEVICES} GPUs in a {per}-GPU NVLink domain"


def fills_whole_units(prefill_devices: int, decode_devices: int, unit: int, budget: int) -> bool:
    """True when pools of ``prefill_devices`` and ``decode_devices`` GPUs fit in ``budget`` and fill whole units
    (module docstring): each pool whole units, or both together exactly one unit; any split of a budget under
    one unit."""
    total = prefill_devices + decode_devices
    if total > budget:
        return False
    if budget < unit or (prefill_devices % unit == 0 and decode_devices % unit == 0):
        return True
    return total == unit


def worker_counts(wp: int, wd: int, unit: int, budget: int) -> Iterator[tuple[int, int]]:
    """Every ``(x, y)`` (x, y >= 1) of prefill workers of ``wp`` GPUs and decode workers of ``wd`` GPUs that
    fills whole units within ``budget`` (:func:`fills_whole_units`)."""
    for x in range(1, (budget - wd) // wp + 1):
        for y in range(1, (budget - x * wp) // wd + 1):
            if fills_whole_units(x * wp, y * wd, unit, budget):
                yield x, y


T = TypeVar("T")


def pareto_front(points: Sequence[T], gpu: Sequence[float], user: Sequence[float]) -> list[T]:
    """The points of ``points`` (token/s/GPU ``gpu``, token/s/user ``user``) that no other point beats in both
    (ties kept once), by falling token/s/GPU."""
    order = sorted(range(len(points)), key=lambda i: (-gpu[i], -user[i]))
    front: list[T] = []
    best_user = -1.0
    for i in order:
        if user[i] > best_user:
            front.append(points[i])
            best_user = user[i]
    return front
