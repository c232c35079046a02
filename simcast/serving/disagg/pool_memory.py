"""The memory check of each pool of a disaggregated deployment, as the aggregated path checks its layout.

A pool fits when one of its DP ranks holds, on every stage, its weights, the profile run's activations, the
engine's reserve and the KV of the requests it runs (:func:`~simcast.serving.kv_memory.memory_fit`, the
aggregated path's rule), and memory allows at least one request of the workload's full length
(:func:`~simcast.serving.kv_memory.max_batch_for_memory` > 0). The prefill pool is checked at the prompts its
full steps hold, the decode pool at its running requests. ``bench-serve`` refuses a pool that does not fit
(one line, exit 2, as an aggregated run whose KV cache holds no request); ``serve-config`` reports
``fits: false`` per pool and for the deployment, as its aggregated output does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcast.core.errors import SimcastInputError
from simcast.core.specs import GIB
from simcast.serving.config import ServingConfig
from simcast.serving.kv_memory import max_batch_for_memory, memory_fit

__all__ = ["PoolFit", "pool_fit", "require_fits"]


@dataclass(frozen=True, kw_only=True)
class PoolFit:
    """One pool's memory at ``requests`` running requests per DP rank: whether it fits, how many memory allows
    (requests per DP rank, 0: not one of the workload's length) and the line that says so."""

    role: str  # "prefill" | "decode"
    fits: bool
    requests: int
    allows: int
    line: str


def pool_fit(cfg: ServingConfig, role: str, requests: int) -> PoolFit:
    """``cfg``'s memory at ``requests`` running requests per DP rank (module docstring)."""
    b = max(1, requests)
    mem = memory_fit(replace(cfg, batch_size=b))
    allows = max_batch_for_memory(cfg)
    fits = mem.fits and allows >= 1
    par = cfg.parallel
    line = (
        f"memory, {role} pool (TP{par.tp} PP{par.pp} DP{par.dp} on {cfg.device.name}, {cfg.runtime}): "
        f"{'fits' if fits else 'DOES NOT FIT'}: weights {max(mem.stage_weight_bytes) / GIB:.2f} GiB + KV of "
        f"{b} request(s) {max(mem.stage_kv_bytes) / GIB:.2f} GiB against a KV budget of "
        f"{min(mem.stage_kv_budget_bytes) / GIB:.2f} GiB per device; memory allows {allows} running request(s) "
        "per DP rank"
    )
    return PoolFit(role=role, fits=fits, requests=b, allows=allows, line=line)


def require_fits(fit: PoolFit, field: str, value: object) -> None:
    """Refuse a pool that does not fit: one :class:`SimcastInputError` naming ``field`` (its flag)."""
    if not fit.fits:
        raise SimcastInputError(field, value, fit.line)
