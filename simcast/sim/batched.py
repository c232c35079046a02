"""One layout's steps for many batches in one pass: stage times and :class:`Report` s.

:class:`LayoutCoster` holds a layout's stage traces (looked up once) and costs a list of one-microbatch
steps with :func:`simcast.cost.ops.batched.cost_ops_many`: every op of every stage once, as arrays over the
batches. A stage's time is then summed in op order and its incoming PP hop added exactly as
:func:`simcast.sim.simulate.simulate` does, so each batch's numbers equal that function's (to rounding;
``tests/cost/test_batched_cost.py``); :meth:`LayoutCoster.reports` builds the full reports with
:func:`simcast.sim.report.report_from_ops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from simcast.core.plan import PipelineStagePlan
from simcast.core.specs import Batch, SimSpec
from simcast.cost.ops.batched import Batches, OpArrays, cost_ops_many
from simcast.cost.ops.op_work import OpCost
from simcast.engines.cuda_graphs import step_captured
from simcast.sim.overlap_costs import fold, overlap_plan, tbo_halves
from simcast.sim.report import Report, pp_hops, recv_times, report_from_ops
from simcast.sim.simulate import StageSetup, cost_context, microbatches_of, simulate, split_batch, stage_setups


@dataclass(kw_only=True)
class LayoutCoster:
    """Costs one-microbatch steps of ``spec``'s layout (``spec.batch`` is only a template)."""

    spec: SimSpec
    use_disk_cache: bool = True
    _setup: tuple[PipelineStagePlan, list[StageSetup], int] | None = field(default=None, repr=False)
    _compiled: int = field(default=0, repr=False)  # traces compiled by setup() not yet counted in a report

    def setup(self) -> tuple[PipelineStagePlan, list[StageSetup], int]:
        """The stage plan, each stage's trace and paths, and how many traces this compiled (looked up once)."""
        if self._setup is None:
            self._setup = stage_setups(self.spec, use_disk_cache=self.use_disk_cache)
            self._compiled = self._setup[2]
        return self._setup

    def spec_for(self, batch: Batch) -> SimSpec:
        return replace(self.spec, batch=batch, num_microbatches=1, chunked_prefill=None)

    def op_arrays(self, batches: Sequence[Batch]) -> list[list[OpArrays]]:
        """``[stage][op]`` arrays over ``batches`` (one microbatch each)."""
        _, setups, _ = self.setup()
        bs = Batches.of(batches)
        captured = np.array([step_captured(self.spec, b) for b in bs.batches], dtype=bool)
        memo: dict = {}
        return [
            cost_ops_many(
                st.ops(), cost_context(self.spec, st, bs.batches[0]), bs, captured, self.spec.model.dtype, memo
            )
            for st in setups
        ]

    def folded_ops(self, batches: Sequence[Batch]) -> list[list[tuple[OpCost, ...]]] | None:
        """``[batch][stage]`` op costs under the engine's MoE overlap (:mod:`simcast.sim.overlap_costs`),
        each batch and its two micro-batches costed in one pass; None when nothing overlaps."""
        ov = overlap_plan(self.spec)
        if ov is None:
            return None
        halves = {b: tbo_halves(ov, b, split_batch) for b in batches}
        uniq = list(dict.fromkeys([*batches, *(h for hs in halves.values() if hs for h in hs)]))
        arrays = self.op_arrays(uniq)
        at = {b: i for i, b in enumerate(uniq)}

        def ops(b: Batch, s: int) -> tuple[OpCost, ...]:
            return tuple(o.cost(at[b]) for o in arrays[s])

        out = []
        for b in batches:
            hs = halves[b]
            out.append(
                [
                    fold(self.spec, ov, b, ops(b, s), None if hs is None else (ops(hs[0], s), ops(hs[1], s)))
                    for s in range(len(arrays))
                ]
            )
        return out

    def stage_times_many(self, batches: Sequence[Batch]) -> list[tuple[float, ...]]:
        """Each batch's stage times (compute + incoming PP hop, seconds) as one step of one microbatch."""
        if not batches:
            return []
        folded = self.folded_ops(batches)
        if folded is not None:
            return self._folded_times(batches, folded)
        return self._times(batches, self.op_arrays(batches))

    def _folded_times(
        self, batches: Sequence[Batch], folded: list[list[tuple[OpCost, ...]]]
    ) -> list[tuple[float, ...]]:
        plan, setups, _ = self.setup()
        hops = pp_hops(self.spec, plan)
        tp_paths = [st.tp_path for st in setups]
        out = []
        for b, stages in zip(batches, folded):
            recv, _ = recv_times(self.spec, plan, hops, tp_paths, b.num_tokens)
            out.append(tuple(sum(c.time_s * c.count for c in ops) + r for ops, r in zip(stages, recv)))
        return out

    def _times(self, batches: Sequence[Batch], arrays: list[list[OpArrays]]) -> list[tuple[float, ...]]:
        plan, setups, _ = self.setup()
        compute = []
        for ops in arrays:
            tot = np.zeros(len(batches))
            for o in ops:  # summed in op order, as simulate sums them
                tot = tot + o.time_s * o.count
            compute.append(tot.tolist())
        hops = pp_hops(self.spec, plan)
        tp_paths = [st.tp_path for st in setups]
        out = []
        for i, b in enumerate(batches):
            recv, _ = recv_times(self.spec, plan, hops, tp_paths, b.num_tokens)
            out.append(tuple(c[i] / 1 + r / 1 for c, r in zip(compute, recv)))
        return out

    def reports(self, batches: Sequence[Batch]) -> list[Report]:
        """Each batch's :class:`Report` as :func:`simcast.sim.simulate.simulate` makes it (one microbatch)."""
        return self.costs(batches)[0]

    def costs(
        self, batches: Sequence[Batch], extra: Sequence[Batch] = ()
    ) -> tuple[list[Report], list[tuple[float, ...]]]:
        """In one pass: the :class:`Report` of each of ``batches`` and the stage times of each of ``extra``."""
        if not batches and not extra:
            return [], []
        plan, setups, _ = self.setup()
        every = list(batches) + list(extra)
        folded = self.folded_ops(every)
        if folded is not None:
            return self._folded_costs(batches, extra, folded)
        arrays = self.op_arrays(every)
        tp_paths = [st.tp_path for st in setups]
        out: list[Report] = []
        for i, b in enumerate(batches):
            spec = self.spec_for(b)
            ops = [[tuple(o.cost(i) for o in stage)] for stage in arrays]
            compiled, self._compiled = self._compiled, 0  # traces compiled for this coster: counted once
            out.append(report_from_ops(spec, plan, tp_paths, microbatches_of(spec), ops, compiled))
        return out, (self._times(every, arrays)[len(batches) :] if extra else [])

    def _folded_costs(
        self, batches: Sequence[Batch], extra: Sequence[Batch], folded: list[list[tuple[OpCost, ...]]]
    ) -> tuple[list[Report], list[tuple[float, ...]]]:
        """:meth:`costs` from the overlapped op costs (``folded``: ``batches`` then ``extra``)."""
        plan, setups, _ = self.setup()
        tp_paths = [st.tp_path for st in setups]
        out: list[Report] = []
        for b, stages in zip(batches, folded):
            spec = self.spec_for(b)
            compiled, self._compiled = self._compiled, 0
            ops = [[stage] for stage in stages]
            out.append(report_from_ops(spec, plan, tp_paths, microbatches_of(spec), ops, compiled))
        times = self._folded_times(extra, folded[len(batches) :]) if extra else []
        return out, times

    def simulate(self, spec: SimSpec) -> Report:
        """:func:`simcast.sim.simulate.simulate` of ``spec``, all its microbatches costed in one pass, when
        ``spec`` is of this layout (else that function itself)."""
        if replace(spec, num_microbatches=1, chunked_prefill=None) != self.spec_for(spec.batch):
            return simulate(spec, use_disk_cache=self.use_disk_cache)
        plan, setups, _ = self.setup()
        micro = microbatches_of(spec)
        uniq = list(dict.fromkeys(micro))
        folded = self.folded_ops(uniq)
        if folded is not None:
            per = dict(zip(uniq, folded))
        else:
            arrays = self.op_arrays(uniq)
            per = {b: [tuple(o.cost(i) for o in stage) for stage in arrays] for i, b in enumerate(uniq)}
        ops = [[per[mb][s] for mb in micro] for s in range(len(setups))]
        compiled, self._compiled = self._compiled, 0
        return report_from_ops(spec, plan, [st.tp_path for st in setups], micro, ops, compiled)
