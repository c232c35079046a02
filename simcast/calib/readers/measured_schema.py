"""The generic measured-kernel CSV schema that ``simcast validate`` and ``simcast calibrate`` read
(one row per measured kernel; ``time_s`` in seconds, sizes in elements or bytes as named)."""

from __future__ import annotations

GENERIC_COLUMNS = (
    "kind",
    "device",
    "dtype",
    "m",
    "n",
    "k",
    "batch",
    "q_len",
    "kv_len",
    "heads",
    "kv_heads",
    "head_dim",
    "bytes",
    "gpus",
    "nodes",
    "time_s",
)

META_COLUMNS = (
    "gpu_name",
    "gpu_count",
    "backend",
    "torch",
    "runtime",
    "driver",
    "memory_bytes",
)
"""Optional columns ``simcast microbench`` adds to every row: what the rows were measured on. ``gpu_name`` is
the device's own name (a CPU's model name), ``gpu_count`` the devices torch saw, ``backend`` cpu, cuda (also
ROCm), xpu or npu, ``torch`` its version, ``runtime`` CUDA / ROCm / oneAPI / CANN version, ``driver`` the
driver's, ``memory_bytes`` the device memory torch reports (bytes). ``simcast calibrate --device-template``
writes them into the profile's provenance (and ``memory_bytes``, ``gpu_count`` into the profile)."""
