"""``optimize --request-rate R``, aggregated: the fewest devices that sustain ``R`` requests/s under the
limits, searched over device counts, and when none does within ``--num-devices``, the best rate reached.

A layout's smallest independent group (:func:`group_devices`: a replica, or the attention-DP replicas one
MoE-DP group spans) carries ``g_rate = token/s/device · g /
OSL`` requests/s at its best point under the limits; ``R`` needs ``ceil(R / g_rate)`` groups. Replicas
that share nothing have the same group at every device count, so one search at ``--num-devices`` finds
them; an attention-DP engine's group is the whole world it is searched at, so those layouts are searched
at every device count ``n`` in :func:`device_counts` (powers of two and ``--num-devices``). Within ``N``
devices the most a layout reaches is ``floor(N / g) · g_rate``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from simcast.core.errors import SimcastInputError
from simcast.core.moe_layout import spans_replicas
from simcast.serving.disagg.search import replicas_for
from simcast.serving.search.layouts import Candidate, Rejection, SearchSpace, powers_of_two
from simcast.serving.steady.model import ServingConfig
from simcast.serving.steady.rate import RateEstimate


@dataclass(frozen=True, kw_only=True)
class GroupRate:
    """One layout as a unit of capacity: its candidate, group size (devices) and rate (requests/s)."""

    candidate: Candidate
    group_devices: int
    group_rate_per_s: float

    def devices_for(self, rate_per_s: float) -> int:
        return replicas_for(rate_per_s, self.group_rate_per_s) * self.group_devices

    def rate_within(self, devices: int) -> float:
        """Requests/s of as many whole groups as ``devices`` holds."""
        return (devices // self.group_devices) * self.group_rate_per_s


@dataclass(frozen=True, kw_only=True)
class FewestAnswer:
    """``best`` with ``devices`` when some layout sustains the rate within the limit; else ``best`` is the
    layout reaching the highest rate within ``max_devices`` (``reached_per_s``) and ``devices`` what the rate
    would need with it (beyond the limit); ``best`` None when no layout met the TTFT/TPOT limits at all
    (``rejections`` say why)."""

    rate_per_s: float
    max_devices: int
    best: GroupRate | None
    devices: int
    sustained: bool
    reached_per_s: float
    counts_searched: tuple[int, ...]
    rejections: tuple[Rejection, ...] = ()


def device_counts(max_devices: int) -> list[int]:
    """The device counts searched for attention-DP engines: powers of two up to ``max_devices``, and it."""
    return sorted(set(powers_of_two(max_devices)) | {max_devices})


def group_devices(cfg: ServingConfig) -> int:
    """Devices of a layout's smallest independent group: a replica (``tp·pp``), or for an MoE model whose
    MoE group spans attention-DP replicas the ``dp / moe_dp`` replicas of one MoE-DP group."""
    par = cfg.parallel
    if cfg.model.moe is not None and spans_replicas(par):
        return par.tp * par.pp * (par.dp // par.moe_dp)
    return par.tp * par.pp


def group_rates(rows: Sequence[Candidate]) -> list[GroupRate]:
    out = []
    for c in rows:
        r = c.result
        g = group_devices(r.config)
        rate = r.tokens_per_s_per_device * g / r.config.workload.output_length
        if rate > 0:
            out.append(GroupRate(candidate=c, group_devices=g, group_rate_per_s=rate))
    return out


def sub_space(space: SearchSpace, n: int) -> SearchSpace | None:
    """``space`` at ``n`` devices with the sizes that fit in ``n``; None when nothing does."""
    fit = lambda xs: tuple(x for x in xs if x <= n and n % x == 0)  # noqa: E731
    tps, pps, eps, mdps = fit(space.tp_sizes), fit(space.pp_sizes), fit(space.ep_sizes), fit(space.moe_dp_sizes)
    if not (tps and pps and eps and mdps):
        return None
    return replace(space, num_devices=n, tp_sizes=tps, pp_sizes=pps, ep_sizes=eps, moe_dp_sizes=mdps)


def fewest_devices(
    rows_at_max: Sequence[Candidate],
    rejected_at_max: Sequence[Rejection],
    space: SearchSpace,
    rate_per_s: float,
    search_at: Callable[[SearchSpace], Sequence[Candidate]],
    moe: bool = False,
) -> FewestAnswer:
    """The fewest devices sustaining ``rate_per_s`` (module docstring); ``rows_at_max`` the layouts ranked at
    ``space.num_devices``, ``search_at`` ranks a smaller space's (its attention-DP engines are kept; only
    for an MoE model whose space has them)."""
    n_max = space.num_devices
    units = group_rates(rows_at_max)
    searched = [n_max]
    if moe and not space.moe_replicas:  # attention-DP engines are in the space: each device count is a world
        for n in device_counts(n_max)[:-1]:
            sub = sub_space(space, n)
            if sub is None:
                continue
            try:
                found = search_at(sub)
            except SimcastInputError:  # no candidate divides n
                continue
            searched.append(n)
            units += [u for u in group_rates(found) if spans_replicas(u.candidate.result.config.parallel)]
    if not units:
        return FewestAnswer(
            rate_per_s=rate_per_s,
            max_devices=n_max,
            best=None,
            devices=0,
            sustained=False,
            reached_per_s=0.0,
            counts_searched=tuple(sorted(searched)),
            rejections=tuple(rejected_at_max),
        )
    key = lambda u: (u.devices_for(rate_per_s), -u.candidate.result.tokens_per_s_per_device)  # noqa: E731
    best = min(units, key=key)
    need = best.devices_for(rate_per_s)
    if need <= n_max:
        return FewestAnswer(
            rate_per_s=rate_per_s,
            max_devices=n_max,
            best=best,
            devices=need,
            sustained=True,
            reached_per_s=best.rate_within(n_max),
            counts_searched=tuple(sorted(searched)),
        )
    top = max(units, key=lambda u: (u.rate_within(n_max), -u.group_devices))
    return FewestAnswer(
        rate_per_s=rate_per_s,
        max_devices=n_max,
        best=top,
        devices=top.devices_for(rate_per_s),
        sustained=False,
        reached_per_s=top.rate_within(n_max),
        counts_searched=tuple(sorted(searched)),
    )


def why_not(ans: FewestAnswer) -> str:
    """One line: why no layout sustains the rate within the limit."""
    if ans.best is None:
        reasons = sorted({r.reason.split(":")[0] for r in ans.rejections})
        return "no layout meets the TTFT/TPOT limits at any concurrency (" + ", ".join(reasons or ["none legal"]) + ")"
    b = ans.best
    groups = ans.max_devices // b.group_devices
    return (
        f"each {b.group_devices}-device group carries {b.group_rate_per_s:.3g} requests/s at its best point under "
        f"the limits; {groups} group(s) fit in {ans.max_devices} devices; {ans.rate_per_s:g} requests/s needs "
        f"{math.ceil(ans.rate_per_s / b.group_rate_per_s - 1e-9)} groups = {ans.devices} devices"
    )


@dataclass(frozen=True, kw_only=True)
class AtRate:
    """:func:`at_rate`'s answer: the deployment's size (devices) and its estimate at the rate (rates in
    requests/s over the whole deployment; None: no TTFT limit given)."""

    devices: int
    estimate: RateEstimate
    rate_at_p99_limit_per_s: float | None


def at_rate(ans: FewestAnswer, ttft_limit_s: float | None, *, use_disk_cache: bool = True) -> AtRate | None:
    """The open-loop estimate (:mod:`simcast.serving.steady.rate`) of the answer's deployment at the rate:
    ``ans.devices`` devices when sustained, else the whole groups ``--num-devices`` holds (None: no layout).

    The layout was ranked at ``world`` devices; each group of the deployment carries the same share of the
    rate as each group of the ranked configuration at ``rate · world / devices``, so that configuration is
    estimated at that rate (utilisation, per-replica concurrency, TTFT and TPOT are per group) and the rates
    (capacity, the rate at which TTFT p99 reaches ``ttft_limit_s``) scaled back by ``devices / world``.
    Assumption: requests split evenly over the groups (the steady state's router)."""
    from simcast.serving.steady.rate import capacity_per_s, estimate_at_rate, rate_at_p99_limit

    if ans.best is None:
        return None
    cfg = ans.best.candidate.result.config
    world = cfg.parallel.world_size
    devices = ans.devices if ans.sustained else (ans.max_devices // ans.best.group_devices) * ans.best.group_devices
    scale = devices / world
    known = capacity_per_s(cfg, use_disk_cache=use_disk_cache)
    est = estimate_at_rate(cfg, ans.rate_per_s / scale, use_disk_cache=use_disk_cache, capacity=known)
    limit = rate_at_p99_limit(cfg, ttft_limit_s, use_disk_cache=use_disk_cache) * scale if ttft_limit_s else None
    deployed = replace(est, rate_per_s=ans.rate_per_s, capacity_per_s=est.capacity_per_s * scale)
    return AtRate(devices=devices, estimate=deployed, rate_at_p99_limit_per_s=limit)
