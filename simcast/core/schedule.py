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
    """The RFC's formula: ``Σ stage_times + (M - 1) · max(stage_times)``."""
    if num_microbatches < 1:
        raise ValueError(f"num_microbatches must be >= 1, got {num_microbatches}")
    if not stage_times_s:
        return 0.0
    return sum(stage_times_s) + (num_microbatches - 1) * max(stage_times_s)


def flow_shop_latency(times_s: Sequence[Sequence[float]], max_in_flight: int | None = None) -> float:
    """Makespan of microbatches ``times_s[m][s]`` through stages in order, blocking.

    ``C[m][s] = max(C[m-1][s], C[m][s-1]) + t[m][s]``; for identical microbatches
    it equals :func:`fill_drain_latency` exactly. ``max_in_flight``: microbatch ``m``
    enters stage 0 only after microbatch ``m - max_in_flight`` has left the last
    stage (an engine's batch queue; None: no cap).
    """
    if not times_s:
        return 0.0
    prev = [0.0] * len(times_s[0])
    left: list[float] = []  # per microbatch: end on the last stage
    for m, row in enumerate(times_s):
        cur, t = [], 0.0
        if max_in_flight is not None and m >= max_in_flight:
            t = left[m - max_in_flight]
        for s, ts in enumerate(row):
            t = max(t, prev[s]) + ts
            cur.append(t)
        prev = cur
        left.append(cur[-1])
    return prev[-1]


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
