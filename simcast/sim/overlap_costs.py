"""A stage's op costs under the overlaps the engine schedules (two-batch, single-batch:
:mod:`simcast.cost.overlap`): when a batch splits in two micro-batches, what each costs, and the fold.

Used by :func:`simcast.sim.simulate.stage_costers` (one batch at a time) and
:class:`simcast.sim.batched.LayoutCoster` (many batches in one pass); with no overlap flag neither path
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simcast.core.moe_comm import MoECommPlan
from simcast.core.specs import Batch, SimSpec
from simcast.cost.ops.op_work import OpCost
from simcast.cost.overlap import single_batch_costs, two_batch_costs
from simcast.engines import get_engine

DEFAULT_SMS = 132
"""SMs assumed when the profile's engine fits name none (H100/H800 SXM: 132)."""


def overlap_plan(spec: SimSpec) -> MoECommPlan | None:
    """The engine's plan when it overlaps MoE communication with compute on an all-to-all layout (None:
    the costs stay as they are)."""
    if spec.moe_comm.is_default or spec.model.moe is None or spec.parallel.dp <= 1 or spec.parallel.ep <= 1:
        return None
    plan = get_engine(spec.engine).moe_comm_plan(spec.moe_comm)
    return plan if plan.overlaps else None


def device_sms(spec: SimSpec) -> int:
    """The device's SM count, from its engine fits (the first GEMM fit naming one), else :data:`DEFAULT_SMS`."""
    for kern in spec.device.engines.values():
        for g in kern.gemm:
            n = getattr(g, "sm_count", 0)
            if n:
                return int(n)
    return DEFAULT_SMS


Splitter = Callable[[Batch, int], tuple[Batch, ...]]
"""How a batch splits in microbatches (:func:`simcast.sim.simulate.split_batch`)."""


def tbo_halves(plan: MoECommPlan, batch: Batch, split: Splitter) -> tuple[Batch, Batch] | None:
    """The two micro-batches two-batch overlap runs ``batch`` as (``split`` in two: requests dealt in two;
    one prompt: two chunks, the second attending to the first), or None when the engine does not split it."""
    if not plan.splits(batch.num_tokens, batch.num_requests, batch.is_decode):
        return None
    parts = split(batch, 2)
    return (parts[0], parts[1]) if len(parts) == 2 else None


def fold(
    spec: SimSpec,
    plan: MoECommPlan,
    batch: Batch,
    full: Sequence[OpCost],
    halves: tuple[Sequence[OpCost], Sequence[OpCost]] | None,
) -> tuple[OpCost, ...]:
    """``batch``'s op costs under ``plan``: two overlapped micro-batches when it splits (``halves``: their
    costs), else single-batch overlap when asked, else ``full`` as it is."""
    sms = device_sms(spec)
    if halves is not None:
        comm_sms = plan.normal_comm_sms if plan.mode_for(batch.is_decode) == "normal" else 0
        return two_batch_costs(halves[0], halves[1], sms / max(1, sms - comm_sms))
    if plan.single_batch_overlap:
        return single_batch_costs(full, plan.sbo_comm_sms, sms)
    return tuple(full)


def overlapped(
    spec: SimSpec, plan: MoECommPlan, batch: Batch, cost: Callable[[Batch], tuple[OpCost, ...]], split: Splitter
) -> tuple[OpCost, ...]:
    """:func:`fold` with ``cost`` pricing a batch on the stage."""
    halves = tbo_halves(plan, batch, split)
    if halves is not None:
        return fold(spec, plan, batch, (), (cost(halves[0]), cost(halves[1])))
    return fold(spec, plan, batch, cost(batch), None)
