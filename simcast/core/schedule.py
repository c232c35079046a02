"""Pipeline scheduling: the RFC's fill-drain estimate, send/recv events, breakdowns.

All times in seconds. Stage costs are per *microbatch* (simcast splits the
batch into M microbatches and costs each; the RFC costs every stage on the
whole batch and then counts it M times, which we do not copy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class PipelineSendRecvEvent:
    """Hidden states of one microbatch crossing ``src_stage -> dst_stage``.

    ``latency_s`` is the one-way transfer over the PP hop (``message_bytes``
    per rank); ``all_gather_s`` the receiving stage's TP all-gather that
    rebuilds TP-sharded hidden states (0 unless the send is TP-sharded).
    """

    src_stage: int
    dst_stage: int
    message_bytes: int
    latency_s: float
    link: str
    microbatch: int = 0
    all_gather_s: float = 0.0

    @property
    def recv_s(self) -> float:
        """Seconds from the start of the transfer until the receiver holds the full hidden states."""
        return self.latency_s + self.all_gather_s


@dataclass(frozen=True, kw_only=True)
class PipelineRuntimeEstimate:
    """The RFC's fields; stage times are per microbatch (mean over microbatches).

    ``stage_comm_times_s`` is PP send/recv charged where it is spent: on the
    receiving stage, which waits for the data (see :mod:`simcast.sim.timeline`).
    """

    latency_s: float
    stage_compute_times_s: tuple[float, ...]
    stage_comm_times_s: tuple[float, ...]
    stage_times_s: tuple[float, ...]
    send_recv_events: tuple[PipelineSendRecvEvent, ...]
    num_microbatches: int

    @property
    def breakdown(self) -> dict[str, float]:
        """``{compute, communication, bubble}`` in seconds, as the RFC defines them."""
        return {
            "compute": sum(self.stage_compute_times_s),
            "communication": sum(self.stage_comm_times_s),
            "bubble": max(0.0, self.latency_s - sum(self.stage_times_s)),
        }

    @property
    def idle_fraction(self) -> float:
        """Share of device-time the stages sit idle: ``1 - Σ_s M·t_s / (P · latency)``.

        The classic pipeline bubble ((P-1)/(M+P-1) for equal stages); it falls as
        M grows, unlike the RFC's bubble, which is the time beyond one
        microbatch's traversal and is 0 at M = 1.
        """
        p = len(self.stage_times_s)
        if p <= 1 or self.latency_s <= 0:
            return 0.0
        busy = self.num_microbatches * sum(self.stage_times_s)
        return max(0.0, 1.0 - busy / (p * self.latency_s))


def fill_drain_latency(stage_times_s: Sequence[float], num_microbatches: int) -> float:
    """The RFC's formula: ``Σ stage_times + (M - 1) · max(stage_times)``, the closed form of
    :func:`pipeline_times` for identical microbatches without a cap."""
    if num_microbatches < 1:
        raise ValueError(f"num_microbatches must be >= 1, got {num_microbatches}")
    if not stage_times_s:
        return 0.0
    return sum(stage_times_s) + (num_microbatches - 1) * max(stage_times_s)


@dataclass(frozen=True, kw_only=True)
class PipelineTimes:
    """When each microbatch holds each resource: ``start_s[m][r]`` and ``end_s[m][r]`` (s)."""

    start_s: tuple[tuple[float, ...], ...]
    end_s: tuple[tuple[float, ...], ...]

    @property
    def makespan_s(self) -> float:
        """End of the last microbatch on the last resource (0 without microbatches), seconds."""
        return self.end_s[-1][-1] if self.end_s and self.end_s[-1] else 0.0


def pipeline_times(busy_s: Sequence[Sequence[float]], max_in_flight: int | None = None) -> PipelineTimes:
    """The one pipeline-timing formula: microbatches ``m`` through resources ``r`` in order, FIFO.

    ``busy_s[m][r]``: seconds microbatch ``m`` holds resource ``r`` (a stage: its compute plus the send/recv the
    caller charges to it; a link: one hop's transfer; the return hop of a serving step). The recurrence::

        start[m][r] = max(end[m-1][r], end[m][r-1])        (end[m][-1] = 0, or end[m-K][R-1] with a cap K)
        end[m][r]   = start[m][r] + busy[m][r]

    Assumption: every resource serves one microbatch at a time in microbatch order (no overtaking, as vLLM and
    SGLang run a PP forward step), a microbatch moves on as soon as it is done (unbounded buffers between
    resources), and with ``max_in_flight`` K microbatch ``m`` enters the first resource only after microbatch
    ``m - K`` has left the last one (an engine's batch queue). Closed forms for ``M`` identical microbatches of
    times ``t_r``: the makespan without a cap is ``Σ t + (M - 1) · max t`` (the RFC's fill-drain,
    :func:`fill_drain_latency`), and when ``K = M`` microbatches circulate (each one's next step enters
    once it has left) one microbatch comes back every ``max(Σ t, M · max t)``
    (:func:`simcast.serving.step.step_cycle_s`, whose round trip ``Σ t`` is this function on one microbatch).
    """
    starts: list[tuple[float, ...]] = []
    ends: list[tuple[float, ...]] = []
    prev: Sequence[float] = [0.0] * (len(busy_s[0]) if busy_s else 0)
    for m, row in enumerate(busy_s):
        t = 0.0
        if max_in_flight is not None and m >= max_in_flight:
            t = ends[m - max_in_flight][-1]
        st, cur = [], []
        for r, tr in enumerate(row):
            t = max(t, prev[r])
            st.append(t)
            t = t + tr
            cur.append(t)
        starts.append(tuple(st))
        ends.append(tuple(cur))
        prev = cur
    return PipelineTimes(start_s=tuple(starts), end_s=tuple(ends))


def flow_shop_latency(times_s: Sequence[Sequence[float]], max_in_flight: int | None = None) -> float:
    """Makespan of microbatches ``times_s[m][s]`` through stages in order (:func:`pipeline_times`).

    For identical microbatches it equals :func:`fill_drain_latency`. ``max_in_flight``: microbatch ``m``
    enters stage 0 only after microbatch ``m - max_in_flight`` has left the last stage (None: no cap).
    """
    return pipeline_times(times_s, max_in_flight).makespan_s


def estimate_pipeline_runtime(
    compute_s: Sequence[Sequence[float]],
    comm_s: Sequence[Sequence[float]],
    events: Sequence[PipelineSendRecvEvent],
    max_in_flight: int | None = None,
) -> PipelineRuntimeEstimate:
    """Combine per-microbatch, per-stage compute and PP-comm times (``[m][s]``); ``max_in_flight``
    caps the microbatches inside the pipeline (see :func:`flow_shop_latency`)."""
    m = len(compute_s)
    p = len(compute_s[0])
    stage_t = [[compute_s[i][s] + comm_s[i][s] for s in range(p)] for i in range(m)]
    identical = all(row == stage_t[0] for row in stage_t)
    mean = lambda rows, s: sum(r[s] for r in rows) / m  # noqa: E731
    comp = tuple(mean(compute_s, s) for s in range(p))
    comm = tuple(mean(comm_s, s) for s in range(p))
    st = tuple(c + k for c, k in zip(comp, comm))
    uncapped = max_in_flight is None
    latency = fill_drain_latency(st, m) if identical and uncapped else flow_shop_latency(stage_t, max_in_flight)
    return PipelineRuntimeEstimate(
        latency_s=latency,
        stage_compute_times_s=comp,
        stage_comm_times_s=comm,
        stage_times_s=st,
        send_recv_events=tuple(events),
        num_microbatches=m,
    )
