"""``--engine none``: no engine scheduler and the device's generic roofline kernels.

vLLM's scheduling limits, KV admission and memory rule (its memory flag is accepted) with no CPU time and no
serving path, nothing captured in CUDA graphs (no capture limit), vLLM's layer partition; kernels only (the old
``--runtime none``).
"""

from __future__ import annotations

from dataclasses import replace

import simcast.engines.vllm as vllm
from simcast.core.device import DeviceSpec
from simcast.engines.base import Engine, EngineDefaults

RECORD = replace(
    vllm.RECORD,
    name="none",
    step_overhead_s=0.0,
    per_request_overhead_s=0.0,
    overlap_cpu=True,
    cpu_source="no engine CPU time (kernels only)",
    front_end_s=0.0,
    front_end_per_token_s=0.0,
    front_end_source="no serving path (kernels only)",
)


class NoEngine(Engine):
    """No engine (see the module docstring)."""

    record = RECORD
    kernels = False
    schedules = False
    prefix_cache_when = vllm.ENGINE.prefix_cache_when

    def defaults(self, device: DeviceSpec, tp: int, pp: int, usage: str) -> EngineDefaults:
        return vllm.ENGINE.defaults(device, tp, pp, usage)

    def accepts_memory_flag(self, owner: str | None) -> bool:
        """vLLM's memory flag (the limits are vLLM's)."""
        return owner == vllm.ENGINE.name

    @property
    def partition_name(self) -> str:
        return vllm.ENGINE.partition_name


ENGINE = NoEngine()
