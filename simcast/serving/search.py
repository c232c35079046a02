"""Throughput optimizer: best TP x PP x DP layout and batch for a workload.

Enumerates ``tp_sizes x pp_sizes``, keeps ``num_devices % (tp·pp) == 0`` with
``dp = num_devices // (tp·pp)``, rejects layouts the model cannot be split
into (heads, kv heads, layers) or that do not fit in memory, and for each
legal layout binary-searches the largest concurrency that fits and meets the
TTFT/TPOT limits. Rows are ranked by output token/s per device.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from simcast.core.errors import SimcastInputError, require
from simcast.core.layout import pp_hop_path, stage_tp_path
from simcast.core.plan import SendRecvEdge
from simcast.serving.model import ServingConfig, ServingResult, estimate_serving, memory_fit, prefill_spec, resolve_partition
from simcast.sim.simulate import simulate
from simcast.core.specs import GIB, ParallelSpec

MAX_BATCH = 4096


def powers_of_two(n: int) -> list[int]:
    out, p = [], 1
    while p <= n:
        out.append(p)
        p *= 2
    return out


def resolve_search_sizes(values: Sequence[int] | None, num_devices: int, default: int | None, flag: str) -> list[int]:
    """The RFC's contract: None -> [default] (or powers of two when default is None);
    [] (flag with no value) -> powers of two <= num_devices; values -> those, each in 1..num_devices."""
    if values is None:
        return [default] if default is not None else powers_of_two(num_devices)
    if len(values) == 0:
        return powers_of_two(num_devices)
    for v in values:
        require(isinstance(v, int) and 1 <= v <= num_devices, flag, v, f"each value must be an integer in 1..{num_devices}")
    return sorted(set(values))


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    tp_sizes: tuple[int, ...]
    pp_sizes: tuple[int, ...]
    num_devices: int
    batch_sizes: tuple[int, ...] = ()  # empty: binary search 1..MAX_BATCH
    ttft_limit_s: float = float("inf")
    tpot_limit_s: float = float("inf")

    def layouts(self) -> list[tuple[int, int, int]]:
        """(tp, pp, dp) with num_devices % (tp·pp) == 0."""
        return [(tp, pp, self.num_devices // (tp * pp)) for tp in self.tp_sizes for pp in self.pp_sizes
                if self.num_devices % (tp * pp) == 0]


def check_space(space: SearchSpace) -> None:
    """Fail at parse time when no (tp, pp) divides the device count."""
    require(bool(space.layouts()), "--tp-sizes/--pp-sizes", f"tp {list(space.tp_sizes)} x pp {list(space.pp_sizes)}",
            f"no combination divides --num-devices={space.num_devices} (need num_devices % (tp*pp) == 0)")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    result: ServingResult
    links: str  # which links the layout's TP groups and PP hops use


@dataclass(frozen=True, kw_only=True)
class Rejection:
    parallel: str
    reason: str


def parallel_label(tp: int, pp: int, dp: int) -> str:
    return f"TP={tp} | PP={pp} | DP={dp}"


def layout_links(cfg: ServingConfig) -> str:
    par, links = cfg.parallel, cfg.device.links
    tp_names = {stage_tp_path(s, par, links) for s in range(par.pp)} if par.tp > 1 else set()
    pp_paths = [pp_hop_path(SendRecvEdge(src_stage=s, dst_stage=s + 1), par, links) for s in range(par.pp - 1)]
    tp_s = "/".join(sorted({("inter" if p.cross_node else "intra") for p in tp_names})) or "-"
    pp_s = "/".join(sorted({("inter" if p.cross_node else "intra") for p in pp_paths})) or "-"
    return f"TP:{tp_s} PP:{pp_s}"


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest b in [lo, hi] with ok(b), assuming ok is monotone (True then False); lo-1 if none."""
    if not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def evaluate_layout(base: ServingConfig, space: SearchSpace, use_disk_cache: bool = True) -> Candidate | Rejection:
    par = base.parallel
    label = parallel_label(par.tp, par.pp, par.dp)
    try:
        base = resolve_partition(base, use_disk_cache=use_disk_cache)  # "balanced": once per layout
        mem1 = memory_fit(base)
    except SimcastInputError as e:
        return Rejection(parallel=label, reason=f"illegal split: {e}")
    if not mem1.fits:
        return Rejection(parallel=label, reason=f"does not fit: {max(mem1.stage_total_bytes) / GIB:.1f} GiB per device "
                         f"at batch 1 > budget {mem1.budget_bytes / GIB:.1f} GiB")
    cap = max(space.batch_sizes) if space.batch_sizes else MAX_BATCH
    b_mem = _largest(1, cap, lambda b: memory_fit(replace(base, batch_size=b)).fits)
    prefill = simulate(prefill_spec(base), use_disk_cache=use_disk_cache)
    cache: dict[int, ServingResult] = {}

    def result(b: int) -> ServingResult:
        if b not in cache:
            cache[b] = estimate_serving(replace(base, batch_size=b), use_disk_cache=use_disk_cache, prefill=prefill)
        return cache[b]

    r1 = result(1)
    if r1.ttft_s > space.ttft_limit_s:
        return Rejection(parallel=label, reason=f"violates TTFT: {r1.ttft_s * 1e3:.1f} ms > {space.ttft_limit_s * 1e3:.1f} ms")
    if r1.tpot_s > space.tpot_limit_s:
        return Rejection(parallel=label, reason=f"violates TPOT: {r1.tpot_s * 1e3:.2f} ms at batch 1 > {space.tpot_limit_s * 1e3:.2f} ms")
    b_best = _largest(1, b_mem, lambda b: result(b).tpot_s <= space.tpot_limit_s)
    if space.batch_sizes:
        allowed = [b for b in space.batch_sizes if b <= b_best]
        if not allowed:
            return Rejection(parallel=label, reason=f"no listed batch size <= {b_best} (memory/TPOT limit)")
        b_best = max(allowed, key=lambda b: result(b).tokens_per_s)
    return Candidate(result=result(b_best), links=layout_links(base))


def search(base: ServingConfig, space: SearchSpace, *, use_disk_cache: bool = True,
           progress: bool | None = None) -> tuple[list[Candidate], list[Rejection]]:
    """Evaluate every layout; returns (ranked candidates, rejections)."""
    check_space(space)
    rows: list[Candidate] = []
    rejected: list[Rejection] = []
    layouts_ = space.layouts()
    for tp in space.tp_sizes:
        for pp in space.pp_sizes:
            if space.num_devices % (tp * pp):
                rejected.append(Rejection(parallel=f"TP={tp} | PP={pp}",
                                          reason=f"illegal split: {space.num_devices} devices not divisible by tp*pp={tp * pp}"))
    it = layouts_
    if progress or (progress is None and len(layouts_) > 4 and sys.stderr.isatty()):
        from tqdm import tqdm
        it = tqdm(layouts_, desc="layouts", unit="layout", file=sys.stderr)
    for tp, pp, dp in it:
        if pp > base.model.num_layers:
            rejected.append(Rejection(parallel=parallel_label(tp, pp, dp),
                                      reason=f"illegal split: pp={pp} > {base.model.num_layers} layers"))
            continue
        cfg = replace(base, parallel=ParallelSpec(tp=tp, pp=pp, dp=dp, world_size=space.num_devices))
        out = evaluate_layout(cfg, space, use_disk_cache)
        (rows if isinstance(out, Candidate) else rejected).append(out)
    rows.sort(key=lambda c: -c.result.tokens_per_s_per_device)
    return rows, rejected
