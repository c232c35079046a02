"""Search over disaggregated deployments, the agg/disagg verdict, and the fewest devices for a request rate.

**Pools.** Every replica layout ``tp x pp (x ep)`` of the search space with ``dp = 1`` (a replica of
``tp·pp`` devices, MoE groups inside it: :func:`simcast.core.moe_layout.moe_layout_rule`), and for MoE
models its attention-DP replicas (``dp`` = 2, 4, ... groups sharing one expert layout), is costed
once as a prefill replica (:func:`~simcast.serving.disagg.steady.prefill_pool`) and once as a decode replica
at each concurrency of :func:`~simcast.serving.search.layouts.concurrency_grid` up to its memory limit.

**Deployments.** Each (prefill layout, decode layout, ``x``, ``y``) with ``x·W_p + y·W_d <=
num_devices`` and each decode concurrency gives one steady state
(:func:`~simcast.serving.disagg.steady.assemble`, the decode pool saturated at that concurrency); points with
the prefill pool at ``ρ >= 1`` or outside the TTFT/TPOT limits are dropped, and each layout pair is
represented by its best point (token/s/device).

**Verdict** (:func:`mechanism`): per device, ``disagg / agg = g · s`` exactly, with ``g`` the decode
pool's output per decode device over the aggregated output per device (what removing prefill
interference buys) and ``s`` the decode devices' share of the deployment (what the prefill pool and
its imbalance cost).

**Fewest devices for a rate** (:func:`fewest_agg`, :func:`fewest_disagg`): replicas are independent,
so a layout's capacity grows linearly with its replicas and the fewest replicas carrying ``R`` is
``ceil(R / rate per replica)`` (the monotone search over device counts in closed form); a prefill
pool's TTFT falls as replicas are added (the M/D/1 wait falls with ``ρ``), so ``x`` grows from the
least that keeps ``ρ < 1`` until TTFT meets its limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcast.core.assumption import Assumption
from simcast.core.errors import SimcastInputError
from simcast.core.moe_layout import moe_layout_rule
from simcast.core.specs import ParallelSpec
from simcast.serving.config import ServingConfig
from simcast.serving.disagg.deploy_grid import allocation_unit, fills_whole_units, pareto_front, worker_counts
from simcast.serving.disagg.kv_transfer import KvTransfer, kv_transfer
from simcast.serving.disagg.steady import (
    DecodePool,
    DisaggConfig,
    DisaggResult,
    PrefillPool,
    assemble,
    decode_capacity,
    decode_pool,
    prefill_pool,
)
from simcast.serving.search.layouts import MAX_BATCH, Candidate, SearchSpace, concurrency_grid, model_label
from simcast.serving.steady.model import ServingResult, coster_for, kernels_note, memory_fit, resolve_partition
from simcast.serving.step import StepCoster, mixed_batch


@dataclass(kw_only=True)
class Pool:
    """One replica layout costed as a prefill and as a decode replica (``reason``: why it cannot serve)."""

    cfg: ServingConfig
    coster: StepCoster
    prefill_cfg: ServingConfig | None = None  # the prefill replica when it differs (no drafting): else cfg
    prefill: PrefillPool | None = None
    decode: tuple[DecodePool, ...] = ()
    reason: str = ""

    @property
    def label(self) -> str:
        return model_label(self.cfg)


@dataclass(frozen=True, kw_only=True)
class DisaggCandidate:
    result: DisaggResult
    prefill_label: str
    decode_label: str


def pool_layouts(base: ServingConfig, space: SearchSpace) -> list[ParallelSpec]:
    """Replica layouts of the search space that fit in ``num_devices`` and split the model: ``tp x pp (x ep)``
    with ``dp = 1``, and for a MoE model also attention-DP replicas (``dp`` = 2, 4, ... attention groups of
    ``tp`` ranks feeding one expert layout over all ``tp·dp`` ranks of a stage: SGLang's
    ``--enable-dp-attention``, vLLM's DP+EP), the layouts large-scale MoE decode pools run."""
    out = []
    moe = base.model.moe is not None
    for tp in space.tp_sizes:
        for pp in space.pp_sizes:
            for ep in space.ep_sizes:
                if pp > base.model.num_layers or (not moe and ep > 1):
                    continue
                dp = 1
                while tp * pp * dp <= space.num_devices and (dp == 1 or moe):
                    w = tp * pp * dp
                    mtp, _ = moe_layout_rule(w, tp, pp, ep, 1)
                    if mtp:
                        out.append(
                            ParallelSpec(tp=tp, pp=pp, dp=dp, world_size=w, ep=ep, moe_tp=mtp, dp_attention=dp > 1)
                        )
                    dp *= 2
    return out


def evaluate_pool(base: ServingConfig, par: ParallelSpec, space: SearchSpace, use_disk_cache: bool = True) -> Pool:
    """``par`` as a prefill replica and as a decode replica at each concurrency (TPOT limit applied)."""
    try:
        cfg = resolve_partition(replace(base.redeployed(parallel=par), batch_size=1), use_disk_cache=use_disk_cache)
        fits = memory_fit(cfg).fits
    except SimcastInputError as e:
        return Pool(cfg=base.redeployed(parallel=par), coster=coster_for(base), reason=f"illegal split: {e}")
    coster = coster_for(cfg, use_disk_cache)
    if not fits:
        return Pool(cfg=cfg, coster=coster, reason="does not fit at batch 1")
    pcfg = replace(cfg, speculative=None) if cfg.speculative is not None else cfg  # the prefill pool never drafts
    pre = prefill_pool(pcfg, coster if pcfg is cfg else coster_for(pcfg, use_disk_cache))
    cap = min(decode_capacity(cfg), MAX_BATCH)
    grid = concurrency_grid(cap, space.batch_sizes) if cap else []
    points = tuple(p for p in (decode_pool(cfg, b, coster) for b in grid) if p.tpot_s <= space.tpot_limit_s)
    reason = "" if points else ("no KV room for one request" if not cap else "violates TPOT at every concurrency")
    pre_ok = pre if pre.memory.fits else None
    return Pool(cfg=cfg, coster=coster, prefill_cfg=pcfg, prefill=pre_ok, decode=points, reason=reason)


def _pool_task(task: tuple[ServingConfig, ParallelSpec, SearchSpace, bool]) -> Pool:
    return evaluate_pool(*task)


def evaluate_pools(
    base: ServingConfig, space: SearchSpace, use_disk_cache: bool = True, progress: bool | None = None
) -> list[Pool]:
    """Every pool layout evaluated in this process, under a "pools" progress bar (``progress`` None: when
    stderr is a terminal), its missing stage traces first under their own
    (:mod:`simcast.serving.search.trace_warmup`)."""
    from simcast.serving.search.parallel import pmap
    from simcast.serving.search.trace_warmup import warm_traces

    layouts = pool_layouts(base, space)
    warm_traces([replace(base.redeployed(parallel=par), batch_size=1) for par in layouts], use_disk_cache, progress)
    return pmap(_pool_task, [(base, par, space, use_disk_cache) for par in layouts], desc="pools", progress=progress)


def _transfer(p: Pool, d: Pool, mode: str, devices: int, rate_per_rank: float | None = None) -> KvTransfer:
    """The KV transfer behind a prompt's prefill: at full steps, or at the step size of a prefill DP rank
    receiving ``rate_per_rank`` prompts/s (what a per-layer stream can hide is that prefill)."""
    assert p.prefill is not None
    own = p.prefill.prefill_s if rate_per_rank is None else p.prefill.at_rate(rate_per_rank)[1]
    return kv_transfer(p.cfg, d.cfg, mode, own, together=devices)


def _meets(r: DisaggResult, space: SearchSpace) -> bool:
    return not r.saturated and r.ttft_s <= space.ttft_limit_s and r.tpot_s <= space.tpot_limit_s


def _note(p: Pool) -> tuple[Assumption, ...]:
    assert p.prefill is not None
    return (kernels_note(p.cfg, p.coster.report(mixed_batch(0, 0, 1, p.prefill.chunk_tokens, 0))),)  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class DisaggSearch:
    """A search's answer: each layout pair's best point at the target (ranked by token/s/GPU), the Pareto front
    over every point meeting the limits (token/s/GPU against token/s/user), what could not serve, the points
    costed, and the allocation unit the pools took."""

    rows: list[DisaggCandidate]
    front: list[DisaggResult]
    rejected: list[tuple[str, str]]
    points: int
    unit: int
    unit_note: str


def _user_tps(r: DisaggResult) -> float:
    """Token/s per user: ``1 / TPOT`` (:mod:`simcast.serving.disagg.deploy_grid`)."""
    return 1.0 / r.tpot_s if r.tpot_s > 0 else 0.0


def _pair_points(p: Pool, d: Pool, space: SearchSpace, kv_mode: str, unit: int) -> list[DisaggResult]:
    """Every whole-unit ``xPyD`` of prefill layout ``p`` and decode layout ``d`` at each decode concurrency that
    meets the limits, its figures only (:func:`assemble` without notes)."""
    assert p.prefill is not None
    pcfg = p.prefill_cfg or p.cfg
    wp, wd = p.cfg.parallel.world_size, d.cfg.parallel.world_size
    transfers: dict[tuple[bool, float], KvTransfer] = {}
    out = []
    for x, y in worker_counts(wp, wd, unit, space.num_devices):
        together = x * wp + y * wd
        near = together <= d.cfg.device.links.devices_per_node
        for dec in d.decode:
            rate = y * dec.ranks * dec.requests_per_s / (x * p.prefill.ranks)  # per prefill DP rank
            own = p.prefill.at_rate(rate)[1]
            if (near, own) not in transfers:
                transfers[near, own] = _transfer(p, d, kv_mode, together, rate)
            cfg = DisaggConfig(
                prefill=pcfg,
                decode=replace(d.cfg, batch_size=dec.concurrency),
                prefill_replicas=x,
                decode_replicas=y,
                kv_transfer=kv_mode,
            )
            r = assemble(cfg, p.prefill, dec, dec, transfers[near, own], None)
            if _meets(r, space):
                out.append(r)
    return out


def _with_notes(r: DisaggResult, p: Pool, d: Pool, kv_mode: str) -> DisaggResult:
    """``r`` assembled again with its assumption records (the rows and the front printed)."""
    assert p.prefill is not None
    cfg = r.config
    dec = next(x for x in d.decode if x.concurrency == cfg.decode.batch_size)
    rate = cfg.decode_replicas * dec.ranks * dec.requests_per_s / (cfg.prefill_replicas * p.prefill.ranks)
    tr = _transfer(p, d, kv_mode, cfg.num_devices, rate)
    return assemble(cfg, p.prefill, dec, dec, tr, _note(p))


def search_deployments(
    pools: Sequence[Pool], space: SearchSpace, kv_mode: str = "whole", min_user_tps: float = 0.0
) -> DisaggSearch:
    """Every (prefill layout, decode layout, ``x``, ``y``, decode concurrency) whose pools fill whole allocation
    units of ``space.num_devices`` (:mod:`simcast.serving.disagg.deploy_grid`) and meet the TTFT/TPOT limits:
    the Pareto front over all of them, and each layout pair's best token/s/GPU among its points with at least
    ``min_user_tps`` token/s per user (0: no target), pairs ranked by it."""
    rejected = [(p.label, p.reason) for p in pools if p.reason and p.prefill is None]
    unit, unit_note = allocation_unit(pools[0].cfg.device) if pools else (1, "")
    rows: list[DisaggCandidate] = []
    every: list[tuple[DisaggResult, Pool, Pool]] = []
    for p in pools:
        if p.prefill is None:
            continue
        for d in pools:
            if not d.decode:
                continue
            pts = _pair_points(p, d, space, kv_mode, unit)
            every += [(r, p, d) for r in pts]
            at_target = [r for r in pts if _user_tps(r) >= min_user_tps * (1 - 1e-12)]
            if not at_target:
                why = "no whole-node xPyD within the devices meets the limits" + (
                    f" at {min_user_tps:g} token/s/user" if min_user_tps and pts else ""
                )
                rejected.append((f"P[{p.label}] D[{d.label}]", why))
                continue
            best = max(at_target, key=lambda r: r.tokens_per_s_per_device)
            rows.append(
                DisaggCandidate(result=_with_notes(best, p, d, kv_mode), prefill_label=p.label, decode_label=d.label)
            )
    rows.sort(key=lambda c: -c.result.tokens_per_s_per_device)
    front = pareto_front(every, [e[0].tokens_per_s_per_device for e in every], [_user_tps(e[0]) for e in every])
    return DisaggSearch(
        rows=rows,
        front=[_with_notes(r, p, d, kv_mode) for r, p, d in front],
        rejected=rejected,
        points=len(every),
        unit=unit,
        unit_note=unit_note,
    )


def search_disagg(
    pools: Sequence[Pool], space: SearchSpace, kv_mode: str = "whole"
) -> tuple[list[DisaggCandidate], list[tuple[str, str]]]:
    """Best point of each (prefill layout, decode layout) pair over ``x``, ``y`` and the decode concurrency
    (:func:`search_deployments` with no token/s/user target); returns (candidates ranked by token/s/device,
    (label, reason) of pairs and pools that cannot serve)."""
    found = search_deployments(pools, space, kv_mode)
    return found.rows, found.rejected


def mechanism(agg: ServingResult, dis: DisaggResult) -> tuple[str, float, float]:
    """One line naming why the winner wins, and ``(g, s)`` with ``disagg/agg per device = g · s``
    (module docstring)."""
    cfg = dis.config
    wd = cfg.decode_replicas * cfg.decode.parallel.world_size
    g = (dis.tokens_per_s / wd) / agg.tokens_per_s_per_device
    s = wd / cfg.num_devices
    head = (
        f"{dis.tokens_per_s_per_device:.1f} disaggregated vs {agg.tokens_per_s_per_device:.1f} aggregated "
        f"token/s/device = {g:.2f} x {s:.2f}: "
    )
    gain = (
        f"decode-only steps give the decode devices {g:.2f}x the aggregated per-device rate (TPOT "
        f"{dis.tpot_s * 1e3:.2f} vs {agg.tpot_s * 1e3:.2f} ms, of which {agg.prefill_interference_s * 1e3:.2f} ms is "
        "other requests' prompt chunks)"
    )
    cost = (
        f"the prefill pool takes {1 - s:.0%} of the devices at utilisation {dis.prefill_utilisation:.2f} "
        f"({cfg.label}, balanced {dis.balanced_decode_per_prefill:.2f} D per P) and the KV transfer adds "
        f"{dis.transfer.exposed_s * 1e3:.2f} ms to TTFT"
    )
    if g * s > 1:
        return f"disaggregated wins: prefill interference removed: {head}{gain}, more than {cost}", g, s
    return f"aggregated wins: transfer cost and pool imbalance: {head}{cost}, more than {gain}", g, s


def agg_group_devices(par: ParallelSpec) -> int:
    """Devices of the smallest independent group of an aggregated layout: a replica (``tp·pp``), or the
    ranks an expert-parallel group spans when it crosses replicas."""
    per_stage = par.ep * par.moe_dp
    return par.tp * par.pp * max(1, math.ceil(per_stage / par.tp))


def replicas_for(rate_per_s: float, replica_rate_per_s: float) -> int:
    """Replicas of replica_rate_per_s requests/s each that carry rate_per_s: at least one (a tiny
    rate is still served by one replica, never by none)."""
    return max(1, math.ceil(rate_per_s / replica_rate_per_s - 1e-9))


def fewest_agg(rows: Sequence[Candidate], rate_per_s: float, max_devices: int) -> tuple[Candidate, int] | None:
    """The aggregated layout needing the fewest devices for ``rate_per_s`` (its best point under the limits,
    replicated), and that count; None when none fits in ``max_devices``."""
    best: tuple[Candidate, int] | None = None
    for c in rows:
        r = c.result
        par = r.config.parallel
        g = agg_group_devices(par)
        group_rate = r.tokens_per_s_per_device * g / r.config.workload.output_length
        need = replicas_for(rate_per_s, group_rate) * g
        if need <= max_devices and (best is None or need < best[1]):
            best = (c, need)
    return best


def fewest_disagg(
    pools: Sequence[Pool], space: SearchSpace, rate_per_s: float, kv_mode: str = "whole"
) -> DisaggResult | None:
    """The disaggregated deployment with the fewest devices carrying ``rate_per_s`` under the limits (ties:
    the higher token/s/device), its pools on whole allocation units (:func:`fills_whole_units`), costed at that
    rate; None when none fits in ``num_devices``."""
    best: tuple[int, float, DisaggResult, Pool, KvTransfer] | None = None
    n = space.num_devices
    unit = allocation_unit(pools[0].cfg.device)[0] if pools else 1
    for p in pools:
        if p.prefill is None:
            continue
        wp = p.cfg.parallel.world_size
        x0 = math.floor(rate_per_s / (p.prefill.ranks * p.prefill.prompts_per_s)) + 1  # least x with rho < 1
        for d in pools:
            wd = d.cfg.parallel.world_size
            for dec in d.decode:
                y0 = replicas_for(rate_per_s, dec.ranks * dec.requests_per_s)
                for y in range(y0, (n - x0 * wp) // wd + 1):  # more decode replicas only to fill whole units
                    for x in range(x0, (n - y * wd) // wp + 1):
                        devices = x * wp + y * wd
                        if best is not None and devices > best[0]:
                            break
                        if not fills_whole_units(x * wp, y * wd, unit, n):
                            continue
                        cfg = DisaggConfig(
                            prefill=p.prefill_cfg or p.cfg,
                            decode=replace(d.cfg, batch_size=dec.concurrency),
                            prefill_replicas=x,
                            decode_replicas=y,
                            kv_transfer=kv_mode,
                            request_rate_per_s=rate_per_s,
                        )
                        tr = _transfer(p, d, kv_mode, devices, rate_per_s / (x * p.prefill.ranks))
                        r = assemble(cfg, p.prefill, dec, dec, tr, None)
                        if _meets(r, space):  # TTFT falls as x grows: the first x that meets is the fewest
                            if best is None or (devices, -r.tokens_per_s_per_device) < (best[0], -best[1]):
                                best = (devices, r.tokens_per_s_per_device, r, p, tr)
                            break
    if best is None:
        return None
    r, p, tr = best[2], best[3], best[4]
    return assemble(r.config, r.prefill, r.decode, r.decode, tr, _note(p))
