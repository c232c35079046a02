"""One engine step: a mixed batch through the stage pipeline, plus the engine's CPU time.

A step is one forward pass over the running decodes (q = 1 at their context)
and the prefill chunks admitted with them; weights are read once per step and
attention is the only per-request term (:class:`~simcast.core.specs.Batch`
groups make that O(groups)). With PP, ``M`` such steps (microbatches) are in
flight; a microbatch comes back every

    cycle = max(round trip, M · slowest stage, M · cpu)

where the round trip is ``cpu + Σ stage`` when the engine prepares the next
step after the GPU finishes, and ``max(cpu, Σ stage)`` when an overlap
scheduler prepares it during the GPU work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol

from simcast.core.schedule import pipeline_times
from simcast.core.specs import Batch, SimSpec
from simcast.deploy.deployment import Deployment, OnDeployment
from simcast.engines.policy import EnginePolicy
from simcast.serving.step_cache import STEP_COST_CACHE, StepCostCache
from simcast.sim.batched import LayoutCoster
from simcast.sim.report import Report


def step_cycle_s(
    stage_times_s: tuple[float, ...], cpu_s: float, in_flight: int, overlap_cpu: bool, return_s: float = 0.0
) -> float:
    """Time between two steps of one microbatch with ``in_flight`` microbatches sharing the stages and the CPU;
    ``return_s``: the hop that brings a microbatch's sampled tokens from the last stage back to stage 0 (PP).

    The GPU round trip is one microbatch through the stages (:func:`simcast.core.schedule.pipeline_times`) and
    the return hop; ``in_flight`` microbatches circulating come back every
    ``max(trip, in_flight · slowest stage)`` (the closed form stated there), the CPU a shared resource too.
    """
    gpu = stages_pass_s(stage_times_s) + return_s
    trip = max(cpu_s, gpu) if overlap_cpu else cpu_s + gpu
    return max(trip, in_flight * max(stage_times_s, default=0.0), in_flight * cpu_s)


def stages_pass_s(stage_times_s: Sequence[float]) -> float:
    """Seconds one microbatch takes through the stages alone (:func:`simcast.core.schedule.pipeline_times`)."""
    return pipeline_times([stage_times_s]).makespan_s


def microbatch_period_s(
    stage_times_s: list[tuple[float, ...]], cpu_s: list[float], overlap_cpu: bool, return_s: list[float] | None = None
) -> float:
    """Mean time for each of ``len(stage_times_s)`` different microbatches in flight to make one step.

    Assumption: the microbatches are scheduled independently (vLLM's virtual engines, SGLang's PP
    micro-batches each run their own step loop), and which one holds a prompt chunk changes from
    step to step. Over many steps every stage processes all of them (``max_s Σ_mb t``), the CPU
    prepares each in turn (``Σ cpu``), and a microbatch cannot come back faster than its own round
    trip (``cpu + Σ stage``, ``max(cpu, Σ stage)`` overlapped), which binds on average: the mean
    trip. Equal microbatches reduce this to :func:`step_cycle_s`.
    """
    back = return_s or [0.0] * len(cpu_s)
    gpu = [stages_pass_s(t) for t in stage_times_s]
    trips = [max(c, g + r) if overlap_cpu else c + g + r for g, c, r in zip(gpu, cpu_s, back)]
    per_stage = [sum(col) for col in zip(*stage_times_s)]
    mean_trip = sum(trips) / len(trips) if trips else 0.0
    return max(mean_trip, max(per_stage, default=0.0), sum(cpu_s))


def mixed_batch(
    decodes: int, decode_context: int, prompts: int, chunk_tokens: int, chunk_context: int, decode_tokens: int = 1
) -> Batch | None:
    """``decodes`` requests at ``decode_context`` (``decode_tokens`` query tokens each: 1, or ``k + 1`` in a
    speculative verify step) plus ``prompts`` chunks of ``chunk_tokens`` after ``chunk_context`` cached
    tokens; None for an empty step."""
    q: list[int] = []
    c: list[int] = []
    n: list[int] = []
    if decodes > 0:
        q.append(decode_tokens)
        c.append(decode_context)
        n.append(decodes)
    if prompts > 0 and chunk_tokens > 0:
        q.append(chunk_tokens)
        c.append(chunk_context)
        n.append(prompts)
    return Batch(query_lens=tuple(q), context_lens=tuple(c), counts=tuple(n)) if q else None


class DraftTime(Protocol):
    """Seconds a speculative draft adds to the last stage of a step with ``n`` drafting requests at context
    ``ctx`` (tokens); :meth:`prefetch` costs many (n, ctx) pairs at once."""

    def __call__(self, n: int, ctx: int) -> float: ...

    def prefetch(self, pairs: list[tuple[int, int]]) -> None: ...


@dataclass(frozen=True)
class NoDraft:
    """No speculative draft: 0 s on the last stage."""

    def __call__(self, n: int, ctx: int) -> float:
        return 0.0

    def prefetch(self, pairs: list[tuple[int, int]]) -> None:
        return None


NO_DRAFT = NoDraft()


class StepMemo:
    """What a :class:`StepCoster` has costed: each batch's stage times, the reports asked for, the layout's
    stage traces. ``len`` is the number of distinct batches costed."""

    def __init__(self) -> None:
        self.times: dict[Batch, tuple[float, ...]] = {}
        self.reports: dict[Batch, Report] = {}
        self.layout: LayoutCoster | None = None
        self.layout_key: str | None = None  # the shared store's key of this layout

    def __len__(self) -> int:
        return len(self.times)


@dataclass(kw_only=True)
class StepCoster(OnDeployment):
    """Costs steps of one layout, memoised by batch (each distinct batch is costed once).

    A step is one microbatch through the stage pipeline (:func:`simcast.sim.simulate.simulate`'s numbers);
    :meth:`cycle_s` adds the engine's CPU and ``in_flight``. Batches are costed many at a time
    (:class:`simcast.sim.batched.LayoutCoster`: each op once over all of them): :meth:`stage_times_many`
    and :meth:`reports` take a list, and a caller that knows the batches it will ask for (the optimizer's
    concurrency frontier) hands them over first; a batch asked for alone is costed alone. Stage times are
    also shared with every coster of the same layout in the process (``shared``:
    :mod:`simcast.serving.step_cache`).
    """

    deployment: Deployment  # the model, devices, layout, partition, engine (its kernels cost the ops)
    policy: EnginePolicy
    use_disk_cache: bool = True
    verify_tokens: int = 1  # query tokens per decoding request: 1, or k + 1 with speculative decoding
    tokens_per_step: float = 1.0  # tokens a decoding request emits per step: 1, or 1 + E with speculative decoding
    draft_s: DraftTime = NO_DRAFT  # speculative draft: (requests, context) -> s on the last stage
    shared: StepCostCache | None = field(default=STEP_COST_CACHE, repr=False)  # None: this coster's memo only
    _memo: StepMemo = field(default_factory=StepMemo, repr=False)

    @property
    def engine(self) -> str | None:
        """Whose fitted kernels cost the ops (None: the generic roofline)."""
        return self.deployment.kernel_engine

    def _layout(self) -> LayoutCoster:
        if self._memo.layout is None:
            self._memo.layout = LayoutCoster(spec=self.spec(Batch.decode(1, 1)), use_disk_cache=self.use_disk_cache)
        return self._memo.layout

    def spec(self, batch: Batch) -> SimSpec:
        """The :class:`SimSpec` of one step on ``batch`` (one microbatch)."""
        return self.deployment.sim_spec(
            batch,
            num_microbatches=1,
            decode_query_len=self.verify_tokens,
            tp_sharded_send=self.policy.tp_sharded_send,
        )

    def return_s(self, batch: Batch | None) -> float:
        """The hop bringing a microbatch's sampled tokens (8 bytes each) from the last stage back to stage 0,
        for an engine whose stage 0 waits for them (``policy.pp_output_return``); 0 otherwise."""
        par = self.parallel
        if batch is None or par.pp == 1 or not self.policy.pp_output_return:
            return 0.0
        from simcast.core.layout import pp_hop_path
        from simcast.core.plan import SendRecvEdge
        from simcast.cost.comm.time import p2p_s

        path = pp_hop_path(SendRecvEdge(src_stage=par.pp - 1, dst_stage=0), par, self.device.links)
        return p2p_s(8 * batch.num_requests, path)

    def reports(self, batches: Sequence[Batch]) -> list[Report]:
        """The :class:`Report` of one step on each of ``batches``, the new ones costed in one pass."""
        memo = self._memo
        new = list(dict.fromkeys(b for b in batches if b not in memo.reports))
        for b, r in zip(new, self._layout().reports(new)):
            memo.reports[b] = r
            memo.times[b] = r.runtime.stage_times_s
        return [memo.reports[b] for b in batches]

    def stage_times_many(self, batches: Sequence[Batch | None]) -> list[tuple[float, ...]]:
        """Stage times (s) of one step on each of ``batches`` (None: an empty step, zeros), the new ones
        costed in one pass (those the shared store has taken from it)."""
        memo = self._memo
        new = list(dict.fromkeys(b for b in batches if b is not None and b not in memo.times))
        if new:
            self._cost_times(new)
        zero = (0.0,) * self.parallel.pp
        return [zero if b is None else memo.times[b] for b in batches]

    def _shared_key(self) -> str:
        """The layout's key in the shared store: the step spec's full repr (every field of the frozen spec
        tree, dicts included, which makes the spec itself unhashable) and whether traces come from disk."""
        if self._memo.layout_key is None:
            self._memo.layout_key = f"{self.spec(Batch.decode(1, 1))!r} disk={self.use_disk_cache}"
        return self._memo.layout_key

    def _cost_times(self, new: list[Batch], costed: Sequence[tuple[float, ...]] | None = None) -> None:
        """Stage times of ``new`` (none of them in the memo) into the memo: from the shared store, else
        ``costed`` (given: already costed on the stage-times path) or costed now, and stored there."""
        memo, shared = self._memo, self.shared
        if shared is not None and costed is None:
            found = shared.get_many(self._shared_key(), new)
            memo.times.update(found)
            new = [b for b in new if b not in found]
        times = list(costed) if costed is not None else self._layout().stage_times_many(new)
        memo.times.update(zip(new, times))
        if shared is not None and new:
            shared.put_many(self._shared_key(), new, times)

    def prefetch(self, batches: Sequence[Batch], reports: Sequence[Batch] = ()) -> None:
        """Cost ``batches`` (stage times) and ``reports`` (full reports) now, each new one once, in one pass."""
        memo = self._memo
        want = list(dict.fromkeys(b for b in reports if b not in memo.reports))
        rest = [b for b in dict.fromkeys(batches) if b not in memo.times and b not in want]
        if not want:
            self.stage_times_many(rest)
            return
        if self.shared is not None and rest:
            found = self.shared.get_many(self._shared_key(), rest)
            memo.times.update(found)
            rest = [b for b in rest if b not in found]
        reps, times = self._layout().costs(want, rest)
        for b, r in zip(want, reps):
            memo.reports[b] = r
            memo.times[b] = r.runtime.stage_times_s
        self._cost_times(rest, times)

    def report(self, batch: Batch) -> Report:
        return self.reports([batch])[0]

    def simulate(self, spec: SimSpec) -> Report:
        """``simulate(spec)`` for a step of this layout with any microbatches (e.g. a prompt's chunks), costed
        on the many-batch path with this coster's traces."""
        return self._layout().simulate(spec)

    def stage_times_s(self, batch: Batch | None) -> tuple[float, ...]:
        return self.stage_times_many([batch])[0]

    def with_draft(self, times: tuple[float, ...], drafting: int, context: int) -> tuple[float, ...]:
        """``times`` with the speculative draft of ``drafting`` requests at ``context`` added to the last
        stage (the proposer runs after the verify step on the rank that samples); unchanged without one."""
        if drafting <= 0 or not times:
            return times
        return times[:-1] + (times[-1] + self.draft_s(drafting, context),)

    def period_s(self, batches: list[Batch], drafting: Sequence[int] = (), context: int = 0) -> float:
        """One step of each of ``batches``, the microbatches in flight (:func:`microbatch_period_s`);
        ``drafting[i]``: the requests of ``batches[i]`` that draft (speculative decoding) at ``context``."""
        drafts = list(drafting) or [0] * len(batches)
        if len(set(zip(batches, drafts))) <= 1:
            return self.cycle_s(batches[0] if batches else None, len(batches), drafts[0] if drafts else 0, context)
        return microbatch_period_s(
            [
                self.with_draft(t, d, context) for t, d in zip(self.stage_times_many(batches), drafts)
            ],  # the new ones costed in one pass
            [self.policy.step_cpu_s(b.num_requests) for b in batches],
            self.policy.overlap_cpu,
            [self.return_s(b) for b in batches],
        )

    def cycle_s(self, batch: Batch | None, in_flight: int, drafting: int = 0, context: int = 0) -> float:
        """One microbatch's step cycle (s) with ``in_flight`` microbatches like it; ``drafting`` requests of
        it run the speculative draft at ``context``."""
        if batch is None:
            return 0.0
        cpu = self.policy.step_cpu_s(batch.num_requests)
        times = self.with_draft(self.stage_times_s(batch), drafting, context)
        return step_cycle_s(times, cpu, in_flight, self.policy.overlap_cpu, self.return_s(batch))


@dataclass(kw_only=True)
class BatchRecorder(StepCoster):
    """A :class:`StepCoster` that costs nothing: it records the batches a caller asks for (stage times and
    reports) and answers with placeholders, so that a caller whose choice of batches does not depend on
    their costs (the steady-state estimate) can be dry-run first and its batches costed in one pass
    (:meth:`StepCoster.prefetch`)."""

    placeholder: Report  # returned by :meth:`report`
    wanted: dict[Batch, None] = field(default_factory=dict)
    wanted_reports: dict[Batch, None] = field(default_factory=dict)
    wanted_drafts: dict[tuple[int, int], None] = field(default_factory=dict)  # (drafting requests, context)

    @staticmethod
    def like(coster: StepCoster, placeholder: Report) -> BatchRecorder:
        """A recorder for ``coster``'s layout and engine policy."""
        return BatchRecorder(
            **{f.name: getattr(coster, f.name) for f in fields(StepCoster) if f.name != "_memo"},
            placeholder=placeholder,
        )

    def reports(self, batches: Sequence[Batch]) -> list[Report]:
        self.wanted_reports.update(dict.fromkeys(batches))
        return [self.placeholder for _ in batches]

    def stage_times_many(self, batches: Sequence[Batch | None]) -> list[tuple[float, ...]]:
        self.wanted.update(dict.fromkeys(b for b in batches if b is not None))
        return [(1e-3,) * self.parallel.pp for _ in batches]

    def with_draft(self, times: tuple[float, ...], drafting: int, context: int) -> tuple[float, ...]:
        if drafting > 0:
            self.wanted_drafts[(drafting, context)] = None
        return times
