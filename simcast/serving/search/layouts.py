"""Throughput optimizer: best TP x PP x DP (x EP x MoE-DP) layout and batch for a workload.

Enumerates ``tp_sizes x pp_sizes x ep_sizes x moe_dp_sizes`` with the RFC's rules
(:func:`simcast.core.moe_layout.moe_layout_rule`): ``num_devices % (tp·pp) == 0``,
``dp = num_devices // (tp·pp)``, ``num_devices % ep == 0``,
``num_devices % (ep·moe_dp) == 0``, ``moe_tp = (num_devices/pp) // (ep·moe_dp)``
(stage-local MoE groups; the RFC's global formula at pp = 1); rejects layouts the model cannot be split
into (heads, kv heads, layers) or that do not fit in memory, and for each
legal layout sweeps concurrency (powers of two up to what memory allows, or
the listed batch sizes) and keeps every point: each layout's curve of
token/s/device against token/s/user, and the Pareto frontier over all of them.
Each layout is represented by its best point meeting the TTFT/TPOT limits;
layouts are ranked by its output token/s per device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcast.core.errors import SimcastInputError, require
from simcast.core.layout import parallel_label, pp_hop_path, stage_tp_path
from simcast.core.moe_layout import moe_layout_rule, moe_replica_sizes
from simcast.core.plan import SendRecvEdge
from simcast.core.specs import GIB, ParallelSpec
from simcast.serving.steady.model import (
    ServingConfig,
    ServingResult,
    coster_for,
    estimate_serving,
    max_batch_for_memory,
    memory_fit,
    prefill_spec,
    resolve_partition,
)
from simcast.serving.step import BatchRecorder

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
        require(
            isinstance(v, int) and 1 <= v <= num_devices, flag, v, f"each value must be an integer in 1..{num_devices}"
        )
    return sorted(set(values))


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    tp_sizes: tuple[int, ...]
    pp_sizes: tuple[int, ...]
    num_devices: int
    batch_sizes: tuple[int, ...] = ()  # empty: powers of two up to the memory limit (<= MAX_BATCH)
    ttft_limit_s: float = float("inf")
    tpot_limit_s: float = float("inf")
    ep_sizes: tuple[int, ...] = (1,)
    moe_dp_sizes: tuple[int, ...] = (1,)
    moe_replicas: bool = False  # MoE: moe_dp = dp (each replica its own experts) instead of moe_dp_sizes
    chunk_sizes: tuple[int, ...] = ()  # prompt chunk sizes to search per layout (empty: the engine's own only)
    redundant_experts: int = 0  # MoE: redundant expert replicas on every layout with ep > 1
    eplb: bool = False  # MoE: experts placed by load (simcast.core.moe_placement)

    def candidates(self) -> list[tuple[int, int, int, int, int, str]]:
        """Every (tp, pp, ep, moe_dp) with its moe_tp, or 0 and the RFC rule that removes it."""
        if self.moe_replicas:
            out = []
            for tp in self.tp_sizes:
                for pp in self.pp_sizes:
                    for ep in self.ep_sizes:
                        mdp, mtp = moe_replica_sizes(self.num_devices, tp, pp, ep)
                        rule = "" if mtp else f"replicas: {self.num_devices} devices / (tp*pp) or tp % ep={ep}"
                        if mtp and moe_layout_rule(self.num_devices, tp, pp, ep, mdp)[0] != mtp:
                            mtp, rule = 0, "replica split does not follow the RFC's stage-local rule"
                        if self.num_devices % (tp * pp):
                            rule = f"{self.num_devices} devices not divisible by tp*pp={tp * pp}"
                        out.append((tp, pp, ep, mdp or 1, mtp, rule))
            return out
        return [
            (tp, pp, ep, mdp, *moe_layout_rule(self.num_devices, tp, pp, ep, mdp))
            for tp in self.tp_sizes
            for pp in self.pp_sizes
            for ep in self.ep_sizes
            for mdp in self.moe_dp_sizes
        ]

    def layouts(self) -> list[tuple[int, int, int]]:
        """(tp, pp, dp) with num_devices % (tp·pp) == 0 (the dense view)."""
        return sorted(
            {(p.tp, p.pp, p.dp) for p in self.parallel_specs()},
            key=lambda t: (self.tp_sizes.index(t[0]), self.pp_sizes.index(t[1])),
        )

    def parallel_specs(self) -> list[ParallelSpec]:
        """The legal layouts (the RFC's filter rules), MoE sizes included."""
        return [
            ParallelSpec(
                tp=tp,
                pp=pp,
                dp=self.num_devices // (tp * pp),
                world_size=self.num_devices,
                ep=ep,
                moe_dp=mdp,
                moe_tp=mtp,
                redundant_experts=self.redundant_experts if ep > 1 else 0,
                eplb=self.eplb and ep > 1,
            )
            for tp, pp, ep, mdp, mtp, _ in self.candidates()
            if mtp
        ]


def check_space(space: SearchSpace) -> None:
    """Fail at parse time when no candidate passes the RFC's divisibility rules."""
    moe = len(space.ep_sizes) > 1 or len(space.moe_dp_sizes) > 1 or space.ep_sizes != (1,) or space.moe_dp_sizes != (1,)
    what = f"tp {list(space.tp_sizes)} x pp {list(space.pp_sizes)}" + (
        f" x ep {list(space.ep_sizes)} x moe_dp {list(space.moe_dp_sizes)}" if moe else ""
    )
    require(
        bool(space.parallel_specs()),
        "--tp-sizes/--pp-sizes" + ("/--ep-sizes/--moe-dp-sizes" if moe else ""),
        what,
        f"no combination divides --num-devices={space.num_devices} (need num_devices % (tp*pp) == 0"
        + (", num_devices % ep == 0, (num_devices/pp) % (ep*moe_dp) == 0" if moe else "")
        + ")",
    )


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One layout: its best point under the limits and every concurrency point swept."""

    result: ServingResult
    links: str  # which links the layout's TP groups and PP hops use
    points: tuple[ServingResult, ...] = ()  # every swept concurrency (the layout's curve)
    chunk_choices: tuple[tuple[str, float, float], ...] = ()  # searched chunk settings: (label, idle TTFT s, tok/s/dev)


@dataclass(frozen=True, kw_only=True)
class Rejection:
    parallel: str
    reason: str


def model_label(cfg: ServingConfig) -> str:
    """``TP=.. | PP=.. | DP=..``, with the MoE groups for an MoE model (:func:`simcast.core.layout.parallel_label`)."""
    return parallel_label(cfg.parallel, cfg.model.moe is not None)


def layout_links(cfg: ServingConfig) -> str:
    par, links = cfg.parallel, cfg.device.links
    tp_names = {stage_tp_path(s, par, links) for s in range(par.pp)} if par.tp > 1 else set()
    pp_paths = [pp_hop_path(SendRecvEdge(src_stage=s, dst_stage=s + 1), par, links) for s in range(par.pp - 1)]
    tp_s = "/".join(sorted({("inter" if p.cross_node else "intra") for p in tp_names})) or "-"
    pp_s = "/".join(sorted({("inter" if p.cross_node else "intra") for p in pp_paths})) or "-"
    return f"TP:{tp_s} PP:{pp_s}"


def concurrency_grid(b_max: int, listed: Sequence[int] = ()) -> list[int]:
    """Concurrency per replica to sweep: the listed values up to ``b_max``, else 1, 2, 3, 4, 6, 8, 12, ...
    and ``b_max``."""
    if listed:
        return sorted({b for b in listed if b <= b_max})
    p2 = powers_of_two(b_max)
    return sorted(set(p2) | {3 * p // 2 for p in p2 if p >= 2 and 3 * p // 2 <= b_max} | {b_max})


def meets(r: ServingResult, space: SearchSpace) -> bool:
    return r.ttft_s <= space.ttft_limit_s and r.tpot_s <= space.tpot_limit_s


def evaluate_layout(base: ServingConfig, space: SearchSpace, use_disk_cache: bool = True) -> Candidate | Rejection:
    """Sweep the layout's concurrency (memory-limited) and keep every point; the best one meeting the limits
    (highest token/s/device) represents the layout. With ``space.chunk_sizes``, once per chunk setting
    (:func:`simcast.serving.search.chunk_search.chunk_settings`), keeping one by
    :data:`~simcast.serving.search.chunk_search.RULE`."""
    if not space.chunk_sizes:
        return _sweep_layout(base, space, use_disk_cache)
    from simcast.serving.search.chunk_search import chunk_label, chunk_settings, pick, with_setting

    got = [
        _sweep_layout(with_setting(base, c, d), space, use_disk_cache)
        for c, d in chunk_settings(base, space.chunk_sizes)
    ]
    ok = [c for c in got if isinstance(c, Candidate)]
    if not ok:
        return got[0]
    tried = tuple((chunk_label(c.result.config), c.result.ttft_idle_s, c.result.tokens_per_s_per_device) for c in ok)
    best = ok[pick([(t, x) for _, t, x in tried])]
    return replace(best, chunk_choices=tried)


def _sweep_layout(base: ServingConfig, space: SearchSpace, use_disk_cache: bool = True) -> Candidate | Rejection:
    """:func:`evaluate_layout` for one chunk setting."""
    label = model_label(base)
    try:
        base = resolve_partition(base, use_disk_cache=use_disk_cache)  # "balanced": once per layout
        mem1 = memory_fit(base)
    except SimcastInputError as e:
        return Rejection(parallel=label, reason=f"illegal split: {e}")
    b_mem = min(max_batch_for_memory(base), MAX_BATCH)
    if not mem1.fits or b_mem < 1:
        return Rejection(
            parallel=label,
            reason=f"does not fit: {max(mem1.stage_total_bytes) / GIB:.1f} GiB per device "
            f"at batch 1 > budget {mem1.budget_bytes / GIB:.1f} GiB",
        )
    grid = concurrency_grid(b_mem, space.batch_sizes)
    if not grid:
        return Rejection(parallel=label, reason=f"no listed batch size <= {b_mem} (memory limit)")
    coster = coster_for(base, use_disk_cache)
    prefill = coster.simulate(prefill_spec(base, use_disk_cache=use_disk_cache))
    # the whole frontier's steps costed in one pass: a dry run records which batches each point asks for
    rec = BatchRecorder.like(coster, placeholder=prefill)
    for b in grid:
        estimate_serving(replace(base, batch_size=b), use_disk_cache=use_disk_cache, prefill=prefill, coster=rec)
    coster.prefetch(list(rec.wanted), list(rec.wanted_reports))
    coster.draft_s.prefetch(list(rec.wanted_drafts))  # speculative decoding: the draft's steps too
    points: dict[int, ServingResult] = {}
    for b in grid:
        r = estimate_serving(replace(base, batch_size=b), use_disk_cache=use_disk_cache, prefill=prefill, coster=coster)
        points.setdefault(r.config.batch_size, r)  # a capped request repeats a served concurrency
    ok = [r for r in points.values() if meets(r, space)]
    if not ok:
        first = next(iter(points.values()))
        if first.ttft_s > space.ttft_limit_s:
            return Rejection(
                parallel=label, reason=f"violates TTFT: {first.ttft_s * 1e3:.1f} ms > {space.ttft_limit_s * 1e3:.1f} ms"
            )
        return Rejection(
            parallel=label,
            reason=f"violates TPOT: {first.tpot_s * 1e3:.2f} ms at batch "
            f"{first.config.batch_size} > {space.tpot_limit_s * 1e3:.2f} ms",
        )
    best = max(ok, key=lambda r: r.tokens_per_s_per_device)
    return Candidate(result=best, links=layout_links(base), points=tuple(points.values()))


def pareto_flags(xs: Sequence[float], ys: Sequence[float]) -> list[bool]:
    """True where no other point is at least as good in both (x, y), larger is better, and better in one."""
    order = sorted(range(len(xs)), key=lambda i: (-xs[i], -ys[i]))
    flags = [False] * len(xs)
    best_y = float("-inf")
    for i in order:
        if ys[i] > best_y:
            flags[i] = True
            best_y = ys[i]
    return flags


def _evaluate(task: tuple[ServingConfig, SearchSpace, bool]) -> Candidate | Rejection:
    """One layout (a process-pool / Ray task: module level, picklable arguments)."""
    cfg, space, use_disk_cache = task
    return evaluate_layout(cfg, space, use_disk_cache)


WARM_LAYOUT_S = 0.03
"""Seconds to sweep one layout's concurrency with its traces cached: measured 0.28 s for the demo's
10 Llama-3.1-70B layouts in-process (benchmarks/search_speed.py), 2-core development machine."""

COMPILE_S = 0.29
"""Seconds to compile one missing stage trace: the demo's empty-cache run (5.3-5.5 s) minus its warm run
(0.65 s) minus the torch import (1.6 s), over its 11 stage keys; same machine."""

TORCH_IMPORT_S = 1.6
"""``python -c "import torch"`` (CPU wheel 2.13), same machine: each pool worker that compiles pays it."""


def layout_work(cfgs: Sequence[ServingConfig], use_disk_cache: bool = True) -> tuple[float, float]:
    """(estimated seconds per layout task, extra start-up seconds of a pool worker): the warm sweep plus
    the layout's share of the stage traces not yet cached, and the torch import a worker pays when any
    trace must be compiled (the parent pays it too when it runs them serially). The partition
    ``balanced`` is estimated as ``vllm``: its keys are known only after a fit."""
    from simcast.serving.search.trace_warmup import missing_keys

    if not cfgs:
        return 0.0, 0.0
    missing = len(missing_keys(cfgs, use_disk_cache))
    return WARM_LAYOUT_S + COMPILE_S * missing / len(cfgs), TORCH_IMPORT_S if missing else 0.0


def search(
    base: ServingConfig,
    space: SearchSpace,
    *,
    use_disk_cache: bool = True,
    progress: bool | None = None,
    workers: int | None = 1,
    ray_address: str | None = None,
) -> tuple[list[Candidate], list[Rejection]]:
    """Evaluate every layout; returns (ranked candidates, rejections).

    The layouts are independent tasks (:func:`simcast.serving.search.parallel.pmap`): serial (``workers=1``,
    the API's default), a local process pool of ``workers`` (None: chosen from the estimated work, the
    CLI's default) or a Ray cluster (``ray_address``). The result is the same whichever runs them. A
    script that asks for a pool needs the ``if __name__ == "__main__":`` guard (spawned workers import
    the main module).
    """
    check_space(space)
    rejected: list[Rejection | None] = []
    moe = base.model.moe is not None
    for tp, pp, ep, mdp, mtp, rule in space.candidates():
        if not mtp:
            first_rule = space.num_devices % (tp * pp) != 0  # independent of ep / moe_dp: listed once
            label = f"TP={tp} | PP={pp}" + ("" if first_rule else f" | EP={ep} | MoE-DP={mdp}")
            if not any(r is not None and r.parallel == label for r in rejected):
                rejected.append(Rejection(parallel=label, reason=f"illegal split: {rule}"))
    tasks: list[ServingConfig] = []
    slots: list[int] = []  # where each task's rejection (if any) goes, to keep the serial order
    for par in space.parallel_specs():
        cfg = base.redeployed(parallel=par)
        if not moe and (par.ep > 1 or par.moe_dp > 1):
            rejected.append(
                Rejection(
                    parallel=model_label(cfg) + f" | EP={par.ep} | MoE-DP={par.moe_dp}",
                    reason="illegal split: the model has no experts (ep and moe_dp must be 1)",
                )
            )
            continue
        if par.pp > base.model.num_layers:
            rejected.append(
                Rejection(
                    parallel=model_label(cfg), reason=f"illegal split: pp={par.pp} > {base.model.num_layers} layers"
                )
            )
            continue
        tasks.append(cfg)
        slots.append(len(rejected))
        rejected.append(None)
    from simcast.serving.search.parallel import POOL_STARTUP_S, choose_backend, pmap

    task_s, torch_s = layout_work(tasks, use_disk_cache) if workers is None and not ray_address else (0.0, 0.0)
    backend = choose_backend(
        len(tasks), task_s=task_s, workers=workers, ray_address=ray_address, startup_s=POOL_STARTUP_S + torch_s
    )
    show = progress if progress is not None else (None if len(tasks) > 4 else False)
    if backend.kind == "serial":  # in-process: the traces first, under their own bar (serving.trace_warmup)
        from simcast.serving.search.trace_warmup import warm_traces

        warm_traces(tasks, use_disk_cache, show)
    outs = pmap(_evaluate, [(c, space, use_disk_cache) for c in tasks], backend=backend, desc="layouts", progress=show)
    rows: list[Candidate] = []
    for slot, out in zip(slots, outs):
        if isinstance(out, Candidate):
            rows.append(out)
        else:
            rejected[slot] = out
    rows.sort(key=lambda c: -c.result.tokens_per_s_per_device)
    return rows, [r for r in rejected if r is not None]
