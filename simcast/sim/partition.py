"""Partition policies that need stage costs, resolved to explicit layer counts.

:func:`resolve_partition` is the one entry point (CLI, serving and search call it);
:func:`simcast.sim.simulate.simulate` only ever sees resolved counts.

The ``balanced`` policy: layer counts that minimise the slowest stage.

vLLM's even split ignores that stage 0 also runs the embedding and the last
stage the final norm, lm_head and sampler, and that middle stages both
receive and send. Starting from the vLLM split, this moves one layer at a
time from the slowest stage to whichever other stage lowers the slowest
stage time most (ties: lower latency); when no such move helps it tries a
move between any two stages, and it stops when nothing lowers (slowest
stage, latency). Every candidate is costed with
:func:`simcast.sim.simulate.simulate` itself. Layer ranges stay contiguous; only
the counts change.
"""

from __future__ import annotations

from dataclasses import replace

from simcast.core.assumption import Assumption, PartitionResolved, Topic
from simcast.core.errors import require
from simcast.core.specs import SimSpec
from simcast.engines.partition import partition_layers
from simcast.inputs.limits import MAX_BALANCED_PP
from simcast.sim.simulate import Report, simulate


def _score(r: Report) -> tuple[float, float]:
    return max(r.runtime.stage_times_s), r.latency_s


def balanced_counts(spec: SimSpec, *, use_disk_cache: bool = True, max_moves: int = 1000) -> tuple[int, ...]:
    """Layer counts per stage minimising the slowest per-microbatch stage time for ``spec.batch``."""
    pp, layers = spec.parallel.pp, spec.model.num_layers
    require(
        pp <= MAX_BALANCED_PP,
        "--partition",
        f"balanced at pp {pp}",
        f"balanced costs up to pp^2 trial simulations of pp stages per layer moved (~{pp**3} stage costs here); "
        f"it searches at most pp {MAX_BALANCED_PP}: give explicit layer counts, or vllm",
    )
    counts = list(partition_layers(layers, pp, "vllm"))
    if pp == 1:
        return tuple(counts)

    def run(c: list[int]) -> Report:
        return simulate(replace(spec, partition=",".join(map(str, c))), use_disk_cache=use_disk_cache)

    def best_move(sources: list[int]) -> tuple[Report, list[int]] | None:
        trials = []
        for i in sources:
            for j in range(pp):
                if j != i and counts[i] > 1:
                    c = counts.copy()
                    c[i] -= 1
                    c[j] += 1
                    trials.append((run(c), c))
        return min(trials, key=lambda t: _score(t[0])) if trials else None

    best = run(counts)
    for _ in range(max_moves):
        times = best.runtime.stage_times_s
        slow = max(range(pp), key=lambda s: times[s])
        # moves off the slowest stage first; when none helps, any move that lowers (slowest, latency)
        move = best_move([slow])
        if move is None or _score(move[0]) >= _score(best):
            move = best_move(list(range(pp)))
        if move is None or _score(move[0]) >= _score(best):
            break
        best, counts = move
    return tuple(counts)


def resolve_partition(spec: SimSpec, *, use_disk_cache: bool = True) -> SimSpec:
    """``spec`` with ``partition="balanced"`` replaced by explicit counts; other specs unchanged."""
    if spec.partition != "balanced":
        return spec
    counts = balanced_counts(spec, use_disk_cache=use_disk_cache)
    return replace(spec, partition=",".join(map(str, counts)))


def simulate_partitioned(spec: SimSpec, *, use_disk_cache: bool = True) -> Report:
    """:func:`resolve_partition`, then :func:`simulate`; a resolved policy is named in the assumptions."""
    resolved = resolve_partition(spec, use_disk_cache=use_disk_cache)
    r = simulate(resolved, use_disk_cache=use_disk_cache)
    if resolved is spec:
        return r
    return replace(
        r,
        assumptions=r.assumptions
        + (
            Assumption(
                topic=Topic.PARTITION_RESOLVED,
                facts=PartitionResolved(policy=spec.partition, layer_counts=r.plan.layer_counts),
            ),
        ),
    )
