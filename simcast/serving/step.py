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
from dataclasses import dataclass, field

from simcast.core.specs import Batch, DeviceSpec, ModelSpec, ParallelSpec, SimSpec
from simcast.serving.engines import EnginePolicy
from simcast.sim.simulate import Report, simulate


def step_cycle_s(stage_times_s: tuple[float, ...], cpu_s: float, in_flight: int, overlap_cpu: bool) -> float:
    """Time between two steps of one microbatch with ``in_flight`` microbatches sharing the stages and the CPU."""
    gpu = sum(stage_times_s)
    trip = max(cpu_s, gpu) if overlap_cpu else cpu_s + gpu
    return max(trip, in_flight * max(stage_times_s, default=0.0), in_flight * cpu_s)


def mixed_batch(decodes: int, decode_context: int, prompts: int, chunk_tokens: int, chunk_context: int) -> Batch | None:
    """``decodes`` requests at ``decode_context`` plus ``prompts`` chunks of ``chunk_tokens`` after
    ``chunk_context`` cached tokens; None for an empty step."""
    q: list[int] = []
    c: list[int] = []
    n: list[int] = []
    if decodes > 0:
        q.append(1)
        c.append(decode_context)
        n.append(decodes)
    if prompts > 0 and chunk_tokens > 0:
        q.append(chunk_tokens)
        c.append(chunk_context)
        n.append(prompts)
    return Batch(query_lens=tuple(q), context_lens=tuple(c), counts=tuple(n)) if q else None


@dataclass(kw_only=True)
class StepCoster:
    """Costs steps of one layout, memoised by batch (each distinct batch is simulated once).

    ``simulate`` runs the stage pipeline with one microbatch, so the stage times
    are those of one step; :meth:`cycle_s` adds the engine's CPU and ``in_flight``.
    """

    model: ModelSpec
    device: DeviceSpec
    parallel: ParallelSpec
    partition: str
    policy: EnginePolicy
    expert_imbalance: float = 1.0  # MoE: busiest expert rank's load / the uniform-routing expectation
    kv_cache_dtype: str = "auto"
    use_disk_cache: bool = True
    _memo: dict[Batch, Report] = field(default_factory=dict, repr=False)

    def report(self, batch: Batch) -> Report:
        if batch not in self._memo:
            self._memo[batch] = simulate(
                SimSpec(
                    model=self.model,
                    device=self.device,
                    parallel=self.parallel,
                    batch=batch,
                    num_microbatches=1,
                    partition=self.partition,
                    expert_imbalance=self.expert_imbalance,
                    kv_cache_dtype=self.kv_cache_dtype,
                ),
                use_disk_cache=self.use_disk_cache,
            )
        return self._memo[batch]

    def stage_times_s(self, batch: Batch | None) -> tuple[float, ...]:
        if batch is None:
            return (0.0,) * self.parallel.pp
        return self.report(batch).runtime.stage_times_s

    def cycle_s(self, batch: Batch | None, in_flight: int) -> float:
        """One microbatch's step cycle (s) with ``in_flight`` microbatches like it."""
        if batch is None:
            return 0.0
        cpu = self.policy.step_cpu_s(batch.num_requests)
        return step_cycle_s(self.stage_times_s(batch), cpu, in_flight, self.policy.overlap_cpu)

    def cycle_of_s(self, batches: Sequence[Batch]) -> float:
        """One step (s) of ``batches`` in flight together, each once (the microbatches may differ).

        Approximation (the request-level simulator advances every microbatch of a step together): the
        mean over the microbatches of :meth:`cycle_s` with ``in_flight = len(batches)``, i.e. each
        microbatch's cycle as if the pipeline were full of microbatches like it. This is what the
        steady state assumes when it mixes steps with and without prompt chunks (the expected cycle),
        so the two models agree; identical batches give exactly ``cycle_s(batch, len(batches))``.
        A microbatch carrying a long chunk really delays only its own virtual engine; the max of the
        cycles would charge that delay to every request of the step.
        """
        if not batches:
            return 0.0
        return sum(self.cycle_s(b, len(batches)) for b in batches) / len(batches)
