"""MoE kernel times with an engine's fitted parameters: the routed experts' grouped GEMMs and the
all-to-all that moves tokens to them and back (:class:`~simcast.core.kernel_fits.MoeFit`,
:class:`~simcast.core.kernel_fits.AllToAllFit`).

Routed experts on one rank (one fused-MoE call: gate_up grouped GEMM, activation, down grouped GEMM),
``pairs`` token-expert pairs over ``active`` experts with ``i`` intermediate columns per rank:

* compute: ``2·pairs·h·3·i`` FLOPs at the weight format's peak times an efficiency that saturates in
  the rows each active expert gets (``pairs / active``: a grouped GEMM pads every expert's rows to its
  M tile, so a few tokens per expert waste most of it), in ``i`` and in ``h``;
* memory: every active expert's weights read once (``3·h·i`` elements in the weight format) and the
  activations moved (``pairs · (2h + 3i)`` 16-bit elements: x in, gate_up out, down in and out);
* a smooth maximum of the two, then a fixed time for the layer's launches (routing metadata,
  alignment, two GEMMs).

All-to-all (DeepEP dispatch or combine) in one mode: ``latency + bytes / bw`` with ``bytes`` what one
rank sends: each of its ``T`` tokens once per other rank holding one of its experts,
``T · ranks_per_token · (ep-1)/ep · h`` elements of ``elem_bytes``.

Array-friendly where the fits need it.
"""

from __future__ import annotations

import math

import numpy as np

from simcast.core.dtypes import DTYPE_BYTES, PEAK_DTYPE, WEIGHT_FORMAT_BYTES
from simcast.core.kernel_fits import MOE_DTYPES, AllToAllFit, MoeFit

__all__ = ["PEAK_DTYPE"]  # the matmul peak of each expert weight format (simcast.core.dtypes)
from simcast.cost.kernels.curves import saturation, smooth_max

ACT_BYTES = DTYPE_BYTES["bf16"]  # activations enter and leave the experts in 16 bits (fp8 kernels quantise x inside)


def moe_family(fmt: str) -> str | None:
    """The MoE fit family of an expert weight format (``fp16`` shares bf16's); None when none exists."""
    fam = "bf16" if fmt in ("bf16", "fp16") else fmt
    return fam if fam in MOE_DTYPES else None


def moe_bytes(pairs, active, i, h, fmt: str):
    """Bytes one rank's routed experts move: active experts' weights once, activations in 16 bits."""
    wb = WEIGHT_FORMAT_BYTES["bf16" if fmt == "fp16" else fmt]
    return active * 3.0 * h * i * wb + pairs * (2.0 * h + 3.0 * i) * ACT_BYTES


def padded_rows(pairs, active, block_m: int):
    """Rows a grouped GEMM computes: each active expert's rows padded to whole ``block_m`` tiles.

    An expert with fewer than ``block_m`` rows still costs a whole tile (``active · block_m``); with more,
    its last tile is on average half empty (``pairs + active · block_m / 2``: loads spread over the
    tile's residues). The larger of the two; non-decreasing in pairs and in active experts.
    """
    pairs, active = np.asarray(pairs, dtype=float), np.maximum(np.asarray(active, dtype=float), 1.0)
    return np.maximum(active * block_m, pairs + active * block_m / 2.0)


def moe_parts(fit: MoeFit, peak_flops_per_s: float, hbm_bw_bytes_per_s: float, pairs, active, i, h):
    """(compute_s, memory_s) of one rank's routed experts, before the smooth maximum and the launch time.

    Tile/wave form (``fit.block_m`` > 0): the gate_up GEMM (N = 2i, K = h) and the down GEMM (N = h,
    K = i) each cut the padded rows into ``block_m × tile_n`` output tiles that run in waves over the
    SMs; a wave costs one tile's FLOPs on every SM, so the time is ``waves · sm · block_m · tile_n ·
    2K / (peak · matmul · s(i) s(h))`` summed over the two GEMMs. Wave and tile quantisation waste is
    what 100-300 tokens per expert pay; the form is non-decreasing in pairs and active experts.
    """
    pairs, active, i, h = (np.asarray(v, dtype=float) for v in (pairs, active, i, h))
    t_m = moe_bytes(pairs, active, i, h, fit.dtype) / (hbm_bw_bytes_per_s * fit.memory)
    if fit.block_m > 0:
        blocks = padded_rows(pairs, active, fit.block_m) / fit.block_m
        tile = fit.block_m * fit.tile_n * fit.sm_count  # rows x columns one wave covers
        waves_up = np.ceil(blocks * np.ceil(2.0 * i / fit.tile_n) / fit.sm_count)
        waves_dn = np.ceil(blocks * np.ceil(h / fit.tile_n) / fit.sm_count)
        eff = fit.matmul * saturation(i, fit.half_n) * saturation(h, fit.half_k)
        t_c = 2.0 * tile * (waves_up * h + waves_dn * i) / (peak_flops_per_s * eff)
        return t_c, t_m
    rows = pairs / np.maximum(active, 1.0)
    eff = fit.matmul * saturation(rows, fit.half_rows) * saturation(i, fit.half_n) * saturation(h, fit.half_k)
    t_c = 2.0 * pairs * h * 3.0 * i / (peak_flops_per_s * eff)
    return t_c, t_m


def moe_time_s(fit: MoeFit, peak_flops_per_s: float, hbm_bw_bytes_per_s: float, pairs, active, i, h, *, routed_pairs):
    """Seconds for one MoE layer's routed experts on one rank (array-friendly).

    ``pairs``: the rank's (token, expert) pairs; ``routed_pairs``: the layer input's tokens × top-k, all
    ranks' pairs before the EP filter (:func:`routing_s`)."""
    t_c, t_m = moe_parts(fit, peak_flops_per_s, hbm_bw_bytes_per_s, pairs, active, i, h)
    return smooth_max(t_c, t_m, p=fit.smooth_p) + fit.launch_s + routing_s(fit, routed_pairs)


def routing_s(fit: MoeFit, routed_pairs):
    """``routed_pair_s · tokens · top_k``: routing, sort/align and permutation over every routed pair of the
    layer input (each rank does it for all pairs before keeping its own experts'); array-friendly."""
    return fit.routed_pair_s * np.asarray(routed_pairs, dtype=float)


def ranks_per_token(top_k: int, num_experts: int, ep: int) -> float:
    """Expected distinct EP ranks among a token's ``top_k`` experts (experts split evenly over ``ep`` ranks)."""
    if ep <= 1:
        return 1.0
    local = num_experts // ep
    miss = math.comb(num_experts - local, top_k) / math.comb(num_experts, top_k)
    return ep * (1 - miss)


def a2a_bytes(tokens, top_k: int, num_experts: int, ep: int, hidden, elem_bytes: float = ACT_BYTES):
    """Bytes one rank sends in a dispatch (or receives back in a combine): ``T·rpt·(ep-1)/ep·h·elem``."""
    rpt = ranks_per_token(top_k, num_experts, ep)
    return np.asarray(tokens, dtype=float) * rpt * (ep - 1) / ep * np.asarray(hidden, dtype=float) * elem_bytes


def a2a_time_s(fit: AllToAllFit, nbytes):
    """Seconds for one dispatch or combine moving ``nbytes`` per rank (array-friendly)."""
    return fit.latency_s + np.asarray(nbytes, dtype=float) / fit.bw_bytes_per_s
