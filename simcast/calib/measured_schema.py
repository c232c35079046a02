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
