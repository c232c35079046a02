"""The engines' device-dependent defaults: the token budget, sequence limit and memory fraction each
engine picks from the GPU it runs on (read by :func:`simcast.serving.engines.engine_policy`)."""

from __future__ import annotations

from simcast.core.device import DeviceSpec
from simcast.core.specs import GIB


def vllm_limits(device: DeviceSpec, usage: str) -> tuple[int, int]:
    """vLLM's ``_set_default_args`` table: (max_num_batched_tokens, max_num_seqs) by GPU memory and name
    (vLLM tests the name the driver reports for "a100": the profile's ``reported_name``) and usage context
    (server vs LLM class)."""
    big = device.hbm_bytes >= 70 * GIB and "a100" not in device.reported_name.lower()
    if big:
        return (8192 if usage == "server" else 16384), 1024
    return (2048 if usage == "server" else 8192), 256


def sglang_limits(device: DeviceSpec, tp: int, pp: int) -> tuple[int, float]:
    """SGLang's ``_handle_gpu_memory_settings``: (chunked_prefill_size, mem_fraction_static) by GPU size."""
    gpu_mb = device.hbm_bytes / 2**20
    gb = gpu_mb / 1024
    if gb < 35:
        chunk, graph_bs = 2048, (24 if tp < 4 else 80)
    elif gb < 60:
        chunk, graph_bs = 4096, (32 if tp < 4 else 160)
    elif gb < 160:
        chunk, graph_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunk, graph_bs = 16384, 512
    reserved_mb = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if gb > 60:
        reserved_mb = max(reserved_mb, 10 * 1024)
    return chunk, round((gpu_mb - reserved_mb) / gpu_mb, 3)
