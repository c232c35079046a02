"""MoE rank groups and the RFC's filter rules for EP x MoE-TP x MoE-DP layouts.

The RFC (§2.2.3) keeps a candidate ``(tp, pp, ep, moe_dp)`` when
``devices % (tp·pp) == 0`` (then ``dp = devices / (tp·pp)``), ``devices % ep == 0``
and ``devices % (ep·moe_dp) == 0`` (then ``moe_tp = devices / (ep·moe_dp)``), with
the MoE groups global. With ``pp > 1`` simcast makes them stage-local (the RFC's
§4.3 next step): the ``devices / pp`` ranks of one stage (every replica's copy of
it) split that stage's experts, so the last two rules apply to ``devices / pp`` —
identical to the RFC's at ``pp = 1``.

Groups inside a stage: its ranks in global order (``[-1, dp, pp, tp]`` layout, so
replica-major, TP-minor) reshape to ``[moe_dp, ep, moe_tp]``: MoE-TP groups are
contiguous (NVLink-near, like TP), EP groups stride by ``moe_tp``, MoE-DP groups by
``ep·moe_tp``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcast.core.device import LinkTable
from simcast.core.layout import ParallelGroup, Path, group_path, rank_coords, rank_of
from simcast.core.specs import ParallelSpec


def moe_layout_rule(devices: int, tp: int, pp: int, ep: int, moe_dp: int) -> tuple[int, str]:
    """``(moe_tp, "")`` for a legal candidate, else ``(0, the rule that removes it)``."""
    if devices % (tp * pp):
        return 0, f"{devices} devices not divisible by tp*pp={tp * pp}"
    if devices % ep:
        return 0, f"{devices} devices not divisible by ep={ep} (devices % ep == 0)"
    if devices % (ep * moe_dp):
        return 0, f"{devices} devices not divisible by ep*moe_dp={ep * moe_dp} (devices % (ep*moe_dp) == 0)"
    stage = devices // pp
    if stage % (ep * moe_dp):
        return 0, (
            f"stage-local MoE groups: the {stage} ranks of a stage (devices/pp) are not divisible by "
            f"ep*moe_dp={ep * moe_dp}"
        )
    return stage // (ep * moe_dp), ""


def stage_ranks(stage: int, par: ParallelSpec) -> tuple[int, ...]:
    """The ``tp·dp`` ranks that run ``stage`` (all replicas), in global order."""
    return tuple(rank_of(d, stage, t, par) for d in range(par.dp) for t in range(par.tp))


@dataclass(frozen=True, kw_only=True)
class MoEGroups:
    ep_group: ParallelGroup
    moe_tp_group: ParallelGroup
    moe_dp_group: ParallelGroup


def moe_groups(rank: int, par: ParallelSpec) -> MoEGroups:
    """The stage-local EP, MoE-TP and MoE-DP groups of a global rank."""
    if not 0 <= rank < par.world_size:
        raise ValueError(f"rank {rank} outside world of {par.world_size}")
    ranks = stage_ranks(rank_coords(rank, par)[1], par)
    j = ranks.index(rank)
    t, e, d = j % par.moe_tp, (j // par.moe_tp) % par.ep, j // (par.moe_tp * par.ep)

    def at(dd: int, ee: int, tt: int) -> int:
        return ranks[(dd * par.ep + ee) * par.moe_tp + tt]

    return MoEGroups(
        ep_group=ParallelGroup(rank=rank, world_size=par.ep, rank_group=tuple(at(d, i, t) for i in range(par.ep))),
        moe_tp_group=ParallelGroup(
            rank=rank, world_size=par.moe_tp, rank_group=tuple(at(d, e, i) for i in range(par.moe_tp))
        ),
        moe_dp_group=ParallelGroup(
            rank=rank, world_size=par.moe_dp, rank_group=tuple(at(i, e, t) for i in range(par.moe_dp))
        ),
    )


def stage_moe_path(stage: int, par: ParallelSpec, links: LinkTable) -> Path:
    """The path the MoE collectives of ``stage`` see: the bottleneck hop of the EP x MoE-TP
    ranks around the stage's first rank (all-to-all dispatch/combine, MoE-TP reduction)."""
    first = stage_ranks(stage, par)[0]
    g = moe_groups(first, par)
    ranks = tuple(sorted({r for e in g.ep_group.rank_group for r in moe_groups(e, par).moe_tp_group.rank_group}))
    return group_path(ranks, links, par.world_size)


def moe_replica_sizes(devices: int, tp: int, pp: int, ep: int) -> tuple[int, int]:
    """``(moe_dp, moe_tp)`` when each of the ``dp = devices/(tp·pp)`` replicas holds its own experts, split
    ``ep × moe_tp = tp`` inside the replica (what a user means by ``--tp-sizes T`` on more devices than T:
    T-way replicas, as ``vllm serve --tensor-parallel-size T --data-parallel-size D`` without expert
    parallelism across replicas); ``(0, 0)`` when ``ep`` does not divide ``tp`` or the split is illegal."""
    if devices % (tp * pp) or tp % ep:
        return 0, 0
    return devices // (tp * pp), tp // ep


def replicas_share_nothing(par: ParallelSpec) -> bool:
    """Each of the ``dp`` replicas holds its own experts (``moe_dp == dp``: one MoE-DP group per replica,
    ``ep x moe_tp == tp`` inside it): the replicas exchange nothing, so a replica's step is a ``dp = 1``
    engine's (what ``--dp D`` with separate servers behind a router is)."""
    return par.dp > 1 and par.moe_dp == par.dp


def replica_view(par: ParallelSpec) -> ParallelSpec:
    """The layout one replica's MoE layers see: ``par`` itself, or for replicas that share nothing
    (:func:`replicas_share_nothing`) the same layout at ``dp = 1`` (so a replica's step, trace and
    numbers are exactly a one-replica engine's)."""
    if not replicas_share_nothing(par):
        return par
    return replace(par, dp=1, world_size=par.tp * par.pp, moe_dp=1)


def spans_replicas(par: ParallelSpec) -> bool:
    """The MoE group takes tokens from several attention replicas (attention-DP: ``moe_dp < dp``, SGLang
    ``--enable-dp-attention``, vLLM ``--data-parallel-size`` on an MoE model)."""
    return par.dp > 1 and not replicas_share_nothing(par)


def moe_comm_mode(par: ParallelSpec) -> str:
    """How a rank's MoE output reaches its tokens: inside the TP group an all-reduce (vLLM's EP / MoE-TP
    without DP; also each replica of a layout whose replicas share nothing); when the MoE group spans
    attention-DP replicas an all-to-all (EP, DeepEP) or all-gather/reduce-scatter (no EP)."""
    if spans_replicas(par):
        return "all_to_all" if par.ep > 1 else "all_gather"
    return "all_reduce" if par.tp > 1 else ""
