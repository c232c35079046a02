"""The device-profile YAML schema: every key with its range (:mod:`simcast.inputs.schema` checks
a loaded profile against it and reports errors under the YAML key names)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simcast.engines import ENGINES
from simcast.inputs.limits import (
    MAX_BW_BYTES_PER_S,
    MAX_DEVICES,
    MAX_DEVICES_PER_NODE,
    MAX_FIT_BOOST,
    MAX_FIT_EXPONENT,
    MAX_FLOPS,
    MAX_HALF_POINT,
    MAX_HBM_BYTES,
    MAX_HEADS,
    MAX_LATENCY_S,
    MAX_MESSAGE_BYTES,
    MAX_SM_COUNT,
    MAX_TEXT_CHARS,
    MAX_TOKENS,
    MIN_BW_BYTES_PER_S,
    MIN_EFFICIENCY,
    MIN_FLOPS,
    MIN_HBM_BYTES,
)
from simcast.inputs.schema import Int, Num, Str

if TYPE_CHECKING:
    from simcast.core.device import DeviceSpec

_SECONDS = Num(0.0, MAX_LATENCY_S)
_FRACTION = Num(MIN_EFFICIENCY, 1.0)  # an efficiency: a fraction of a peak (floor: simcast.inputs.limits)
_BW = Num(MIN_BW_BYTES_PER_S, MAX_BW_BYTES_PER_S)
_COLLECTIVE_SCHEMA: dict[str, Any] = {
    "kind": Str(64),
    "gpus": Int(2, MAX_DEVICES),
    "latency_s": _SECONDS,
    "bus_bw_bytes_per_s": _BW,
    "max_bytes?": Num(0.0, MAX_MESSAGE_BYTES),  # piecewise regimes: upper message size (0: unbounded)
    "algorithm?": Str(64),  # regime name (nccl_small, one_shot, two_shot, nccl...)
}
_LINK_SCHEMA: dict[str, Any] = {
    "name": Str(256),
    "bw_bytes_per_s": _BW,
    "latency_s": _SECONDS,
    "efficiency": _FRACTION,
    "collectives?": [_COLLECTIVE_SCHEMA],
    "mesh_links?": Int(0, MAX_DEVICES_PER_NODE),
}
# Per-engine fitted kernels (simcast.core.kernel_fits): efficiencies are fractions, half points and split
# sizes are element/token/CTA counts, exponents and powers bounded by MAX_FIT_EXPONENT.
_HALF = Num(0.0, MAX_HALF_POINT)
_EXP = Num(0.0, MAX_FIT_EXPONENT)
_POWER = Num(1.0, MAX_FIT_EXPONENT)
_BOOST = Num(0.0, MAX_FIT_BOOST)
_SMS = Int(1, MAX_SM_COUNT)
_GEMM_FIT_SCHEMA: dict[str, Any] = {
    "dtype": Str(64),
    "matmul": _FRACTION,
    "half_m": _HALF,
    "half_n": _HALF,
    "half_k": _HALF,
    "wave_exp": _EXP,
    "memory": _FRACTION,
    "split_k_elems": Num(1.0, MAX_HALF_POINT),
    "parallel_exp": _EXP,
    "l2_boost": _BOOST,
    "l2_half_bytes": Num(0.0, MAX_HBM_BYTES),
    "smooth_p": _POWER,
    "launch_s": _SECONDS,
    "sm_count": _SMS,
    "tile_m?": _SMS,
    "tile_n?": _SMS,
    "host_floor_s?": _SECONDS,
    "tile_rule?": Str(64),
    "step_s?": _SECONDS,
    "tile_k?": _SMS,
    "l2_edge?": Num(0.0, MAX_FIT_EXPONENT),  # 0 = the smooth L2 form
}
_PREFILL_FIT_SCHEMA: dict[str, Any] = {
    "dtype": Str(64),
    "matmul": _FRACTION,
    "half_q_len": _HALF,
    "half_units": _HALF,
    "half_head_dim": _HALF,
    "memory": _FRACTION,
    "smooth_p": _POWER,
    "launch_s": _SECONDS,
    "tile?": _SMS,
    "kernel_rule?": Str(64),
    "cta_s?": _SECONDS,
    "sm_count?": Int(0, MAX_SM_COUNT),
    "l2_boost?": _BOOST,
    "l2_half_bytes?": Num(0.0, MAX_HBM_BYTES),
    "l2_edge?": Num(0.0, MAX_FIT_EXPONENT),  # 0 = the smooth L2 form
    "half_tile?": _HALF,
}
_DECODE_FIT_SCHEMA: dict[str, Any] = {
    "dtype": Str(64),
    "memory": _FRACTION,
    "half_units": _HALF,
    "split_tokens": Num(1.0, MAX_HALF_POINT),
    "half_kv_len": _HALF,
    "matmul": _FRACTION,
    "wave_s": _SECONDS,
    "smooth_p": _POWER,
    "launch_s": _SECONDS,
    "sm_count": _SMS,
    "max_group?": Int(0, MAX_HEADS),
    "group_share?": Num(1.0, MAX_FIT_BOOST),
    "l2_boost?": _BOOST,
    "l2_half_bytes?": Num(0.0, MAX_HBM_BYTES),
    "kernel_rule?": Str(64),
    "fallback_wave_s?": _SECONDS,
    "cta_kv_byte_s?": _SECONDS,
    "cta_group_s?": _SECONDS,
    "token_group_s?": _SECONDS,
    "narrow_launch_s?": _SECONDS,
    "merge_s?": _SECONDS,
    "fallback_kv_byte_s?": _SECONDS,
    "fallback_merge_s?": _SECONDS,
    "gqa_swap_s?": _SECONDS,
    "gqa_copy_s?": _SECONDS,
    "diff_kv_launch_s?": _SECONDS,
    "kv_write_s?": _SECONDS,
    "kv_write_elem_s?": _SECONDS,
    "mmha_ctas_per_sm?": _SMS,  # CTAs resident per SM: bounded as SM counts are
    "mmha_block_tokens?": Int(1, MAX_TOKENS),
    "l2_edge?": Num(0.0, MAX_FIT_EXPONENT),  # 0 = the smooth L2 form
}
_MOE_FIT_SCHEMA: dict[str, Any] = {
    "dtype": Str(64),
    "matmul": _FRACTION,
    "half_rows": _HALF,
    "half_n": _HALF,
    "half_k": _HALF,
    "memory": _FRACTION,
    "smooth_p": _POWER,
    "launch_s": _SECONDS,
    "block_m?": Int(0, 4096),
    "tile_n?": _SMS,
    "sm_count?": Int(0, MAX_SM_COUNT),
    "routed_pair_s?": _SECONDS,
}
_A2A_FIT_SCHEMA: dict[str, Any] = {
    "mode": Str(64),
    "phase": Str(64),
    "latency_s": _SECONDS,
    "bw_bytes_per_s": _BW,
    "ep": Int(2, MAX_DEVICES),
}
_ENGINE_SCHEMA: dict[str, Any] = {
    "source": Str(MAX_TEXT_CHARS),
    "fit_abs_err_pct?": dict,  # provenance: held-out error per kernel kind
    "gemm?": [_GEMM_FIT_SCHEMA],
    "prefill?": [_PREFILL_FIT_SCHEMA],
    "decode?": [_DECODE_FIT_SCHEMA],
    "all_reduce?": [_COLLECTIVE_SCHEMA],
    "moe?": [_MOE_FIT_SCHEMA],
    "all_to_all?": [_A2A_FIT_SCHEMA],
}
PROFILE_SCHEMA: dict[str, Any] = {
    "name": Str(256),
    "description": Str(MAX_TEXT_CHARS),
    "reported_name?": Str(256),
    "compute": {"matmul_flops_per_s": "dtype_map", "vector_flops_per_s": "dtype_map"},
    "memory": {"hbm_bytes": Int(MIN_HBM_BYTES, MAX_HBM_BYTES), "hbm_bw_bytes_per_s": _BW},
    "efficiency": {
        "matmul": _FRACTION,
        "vector": _FRACTION,
        "memory": _FRACTION,
        "launch_overhead_s": _SECONDS,
        "matmul_half_m_ridge?": Num(0.0, 1e6),
        "matmul_half_n?": Num(0.0, MAX_HALF_POINT),
        "matmul_half_k?": Num(0.0, MAX_HALF_POINT),
        "vector_memory?": Num(0.0, 1.0),
        "vector_launch_overhead_s?": _SECONDS,
    },
    "links": {"devices_per_node": Int(1, MAX_DEVICES_PER_NODE), "intra_node": _LINK_SCHEMA, "inter_node": _LINK_SCHEMA},
    "calibration?": dict,  # provenance of fitted numbers (free-form), written by `simcast calibrate`
    "engines?": {f"{e}?": _ENGINE_SCHEMA for e in ENGINES},  # per-engine fitted kernels (simcast.core.kernel_fits)
}


def check_device_spec(dev: DeviceSpec, where: str = "device") -> DeviceSpec:
    """``dev`` (a :class:`DeviceSpec` built in Python, e.g. given to the API) within the physical bounds a
    profile YAML gets: the same :data:`PROFILE_SCHEMA` entries check its peaks, memory, efficiencies and links
    (floors from :mod:`simcast.inputs.limits`), so no spec reaches a run that its YAML could not describe.
    Errors name the YAML key under ``where``."""
    flops = Num(MIN_FLOPS, MAX_FLOPS)
    for table in ("matmul_flops_per_s", "vector_flops_per_s"):
        for dtype, v in getattr(dev, table).items():
            flops.check(v, f"{where}.compute.{table}.{dtype}")
    memory, efficiency, links = PROFILE_SCHEMA["memory"], PROFILE_SCHEMA["efficiency"], PROFILE_SCHEMA["links"]
    memory["hbm_bytes"].check(dev.hbm_bytes, f"{where}.memory.hbm_bytes")
    memory["hbm_bw_bytes_per_s"].check(dev.hbm_bw_bytes_per_s, f"{where}.memory.hbm_bw_bytes_per_s")
    for key in ("matmul", "vector", "memory", "launch_overhead_s"):
        efficiency[key].check(getattr(dev.efficiency, key), f"{where}.efficiency.{key}")
    links["devices_per_node"].check(dev.links.devices_per_node, f"{where}.links.devices_per_node")
    for name in ("intra_node", "inter_node"):
        link = getattr(dev.links, name)
        for key in ("bw_bytes_per_s", "latency_s", "efficiency"):
            _LINK_SCHEMA[key].check(getattr(link, key), f"{where}.links.{name}.{key}")
    return dev
