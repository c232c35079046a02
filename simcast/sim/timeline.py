"""Event-level pipeline timeline: stages and inter-stage links as resources.

Microbatches flow through the stages in order (FIFO on every resource, no
overtaking), as vLLM and SGLang run a forward step under PP. Three send/recv
models (``send_recv=``):

* ``"receiver"`` (default; what :func:`simcast.sim.simulate.simulate` charges):
  the receiving stage waits for the data, the sender does not. vLLM posts
  ``isend`` after a stage's forward and returns (the handle is waited at the
  start of its next step, by then long done) while the next stage waits on
  its ``irecv`` before computing; NCCL send/recv is a rendezvous, so the
  transfer starts once the sender has finished and the receiver is free. The
  receiving stage is held for ``incoming + compute``; the makespan equals
  :func:`simcast.core.schedule.flow_shop_latency` of those stage times bit for
  bit (hence :func:`~simcast.core.schedule.fill_drain_latency` for identical
  microbatches). Each hop is counted once, on the receiver.
* ``"blocking"`` (the RFC): a stage is busy for
  ``compute + (incoming + outgoing)``, receiving first and sending last; the
  next stage starts the microbatch only when the sender has finished
  sending. Each hop is counted on both sides, one after the other
  (conservative); the makespan is the flow-shop latency of those times.
* ``"overlap"``: a stage is busy only while computing; after compute the
  hidden states cross the link (one transfer per hop and microbatch, FIFO on
  the link) while the sender moves on, and the transfer may run while the
  receiver still computes an earlier microbatch (irecv posted ahead); the
  receiver starts when the data has arrived. A lower bound:
  ``overlap <= receiver <= blocking``.

``max_in_flight`` caps the microbatches inside the pipeline: stage 0 starts
microbatch ``m`` only after microbatch ``m - max_in_flight`` has left the last
stage (``None``: no cap).

The scheduler is a pure function of per-microbatch, per-stage compute times
``compute_s[m][s]`` and per-hop one-way times ``send_s[m][h]`` (hop ``h``
is stage ``h`` → ``h + 1``, including the receiver's TP all-gather of a
TP-sharded send); all times in seconds. ``report_timeline`` adapts a
:class:`~simcast.sim.simulate.Report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simcast.core.schedule import PipelineTimes, pipeline_times

if TYPE_CHECKING:  # pragma: no cover
    from simcast.cost.ops.op_work import OpCost
    from simcast.sim.simulate import Report

SEND_RECV_MODES = ("receiver", "blocking", "overlap")
SEND_RECV_LABELS = {
    "receiver": "receiver waits for each hop (vLLM, SGLang irecv)",
    "blocking": "blocking send + recv on both sides (RFC)",
    "overlap": "overlapped isend/irecv (transfer hidden under earlier work)",
}


@dataclass(frozen=True, kw_only=True)
class TimelineEvent:
    """One busy interval of a resource.

    ``stage`` is the stage whose lane shows the event (the sender for ``send``,
    the receiver for ``recv``); ``peer`` is the other stage of a transfer.
    ``resource`` is what the event holds exclusively: ``"stage<s>"`` or
    ``"link<h>-><h+1>"``. A transfer appears twice, once per side: with
    ``receiver`` the recv holds the receiving stage and the send the link;
    with ``blocking`` both hold their stage; with ``overlap`` both are the
    same link interval.
    """

    kind: str  # compute | send | recv
    stage: int
    microbatch: int
    start_s: float
    end_s: float
    resource: str
    peer: int | None = None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, kw_only=True)
class Timeline:
    """All events of one forward step, in the order they were scheduled."""

    events: tuple[TimelineEvent, ...]
    num_stages: int
    num_microbatches: int
    send_recv: str  # one of SEND_RECV_MODES
    max_in_flight: int | None

    @property
    def makespan_s(self) -> float:
        """End of the last event (the last stage finishing the last microbatch), seconds."""
        return max((e.end_s for e in self.events), default=0.0)

    def stage_busy_s(self, stage: int) -> float:
        """Seconds ``stage`` is held: compute plus the send/recv its mode charges to the stage."""
        return sum(e.duration_s for e in self.events if e.resource == f"stage{stage}")

    @property
    def idle_fraction(self) -> float:
        """``1 - Σ_s busy_s / (P · makespan)``: the share of stage-time spent waiting."""
        span = self.makespan_s
        if self.num_stages <= 1 or span <= 0:
            return 0.0
        busy = sum(self.stage_busy_s(s) for s in range(self.num_stages))
        return max(0.0, 1.0 - busy / (self.num_stages * span))


def _check_inputs(
    compute_s: Sequence[Sequence[float]], send_s: Sequence[Sequence[float]], max_in_flight: int | None, send_recv: str
) -> tuple[int, int]:
    if send_recv not in SEND_RECV_MODES:
        raise ValueError(f"send_recv must be one of {', '.join(SEND_RECV_MODES)}, got {send_recv!r}")
    m = len(compute_s)
    if m < 1:
        raise ValueError("need at least one microbatch")
    p = len(compute_s[0])
    if p < 1 or any(len(row) != p for row in compute_s):
        raise ValueError(f"compute_s rows must all have the same length >= 1, got {[len(r) for r in compute_s]}")
    if len(send_s) != m or any(len(row) != p - 1 for row in send_s):
        raise ValueError(f"send_s must be {m} rows of {p - 1} hop times")
    if any(t < 0 for row in compute_s for t in row) or any(t < 0 for row in send_s for t in row):
        raise ValueError("times must be >= 0")
    if max_in_flight is not None and max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1 or None, got {max_in_flight}")
    return m, p


def schedule_pipeline(
    compute_s: Sequence[Sequence[float]],
    send_s: Sequence[Sequence[float]],
    *,
    send_recv: str = "receiver",
    max_in_flight: int | None = None,
) -> Timeline:
    """Schedule ``M`` microbatches through ``P`` stages; returns every event.

    ``compute_s[m][s]``: stage ``s`` compute time of microbatch ``m`` (s),
    TP collectives included. ``send_s[m][h]``: one-way time of microbatch
    ``m``'s hidden states over hop ``h`` (s); ``P - 1`` hops per row.
    ``send_recv``: ``"receiver"``, ``"blocking"`` or ``"overlap"`` (module docstring).
    Zero-length send/recv events are omitted; compute events are always kept.
    The times are :func:`simcast.core.schedule.pipeline_times` over the stages (``receiver``, ``blocking``:
    each held for its compute and the transfers its mode charges to it) or over the stages and the links
    between them (``overlap``).
    """
    m_count, p = _check_inputs(compute_s, send_s, max_in_flight, send_recv)
    if send_recv == "overlap":
        busy = [_interleave(compute_s[m], send_s[m]) for m in range(m_count)]
        times = pipeline_times(busy, max_in_flight)
        events = [e for m in range(m_count) for e in _overlap_events(m, times, send_s[m])]
    else:
        busy = [[_stage_busy(compute_s[m], send_s[m], s, send_recv) for s in range(p)] for m in range(m_count)]
        times = pipeline_times(busy, max_in_flight)
        events = [e for m in range(m_count) for e in _stage_events(m, times, send_s[m], send_recv)]
    return Timeline(
        events=tuple(events), num_stages=p, num_microbatches=m_count, send_recv=send_recv, max_in_flight=max_in_flight
    )


def _interleave(compute: Sequence[float], send: Sequence[float]) -> list[float]:
    """``[compute_0, send_0, compute_1, ..., compute_{P-1}]``: the overlap mode's resources in a microbatch's order."""
    out = [compute[0]]
    for c, t in zip(compute[1:], send):
        out += [t, c]
    return out


def _stage_busy(compute: Sequence[float], send: Sequence[float], s: int, send_recv: str) -> float:
    """Seconds stage ``s`` is held: compute + (incoming [+ outgoing]), the float expression of simulate/schedule."""
    inc = send[s - 1] if s > 0 else 0.0
    out = send[s] if s < len(compute) - 1 and send_recv == "blocking" else 0.0
    return compute[s] + ((0.0 + inc) + out)


def _overlap_events(m: int, times: PipelineTimes, send: Sequence[float]) -> list[TimelineEvent]:
    """Microbatch ``m``'s events with overlapped send/recv: compute on the stages, each transfer on its link."""
    start, end = times.start_s[m], times.end_s[m]
    out: list[TimelineEvent] = []
    for s in range(len(send) + 1):
        out.append(
            TimelineEvent(
                kind="compute", stage=s, microbatch=m, start_s=start[2 * s], end_s=end[2 * s], resource=f"stage{s}"
            )
        )
        if s < len(send) and send[s] > 0:
            t0, t1, link = start[2 * s + 1], end[2 * s + 1], f"link{s}->{s + 1}"
            out.append(
                TimelineEvent(kind="send", stage=s, microbatch=m, start_s=t0, end_s=t1, resource=link, peer=s + 1)
            )
            out.append(
                TimelineEvent(kind="recv", stage=s + 1, microbatch=m, start_s=t0, end_s=t1, resource=link, peer=s)
            )
    return out


def _stage_events(m: int, times: PipelineTimes, send: Sequence[float], send_recv: str) -> list[TimelineEvent]:
    """Microbatch ``m``'s events when the stages hold the transfers (``receiver``: the incoming one; ``blocking``:
    both): recv, then compute, then (blocking) send, inside each stage's busy interval."""
    out: list[TimelineEvent] = []
    p = len(send) + 1
    for s in range(p):
        start, end, res = times.start_s[m][s], times.end_s[m][s], f"stage{s}"
        inc = send[s - 1] if s > 0 else 0.0
        out_s = send[s] if s < p - 1 and send_recv == "blocking" else 0.0
        c_start, c_end = start + inc, max(start + inc, end - out_s)
        if inc > 0:
            if send_recv == "receiver":  # the sender's side of the transfer: the link, not the sender, is held
                link = f"link{s - 1}->{s}"
                out.append(
                    TimelineEvent(
                        kind="send", stage=s - 1, microbatch=m, start_s=start, end_s=c_start, resource=link, peer=s
                    )
                )
            out.append(
                TimelineEvent(
                    kind="recv", stage=s, microbatch=m, start_s=start, end_s=c_start, resource=res, peer=s - 1
                )
            )
        out.append(TimelineEvent(kind="compute", stage=s, microbatch=m, start_s=c_start, end_s=c_end, resource=res))
        if out_s > 0:
            out.append(
                TimelineEvent(kind="send", stage=s, microbatch=m, start_s=c_end, end_s=end, resource=res, peer=s + 1)
            )
    return out


# --- adapter from a Report ---------------------------------------------------


def microbatch_ops(report: Report) -> tuple[tuple[tuple[OpCost, ...], ...], ...]:
    """Op costs ``[stage][microbatch]`` of a report, with replay counts (as simulate costed them)."""
    return tuple(st.microbatch_ops for st in report.stages)


def report_timeline_inputs(
    report: Report,
    ops: Sequence[Sequence[Sequence[OpCost]]] | None = None,
) -> tuple[list[list[float]], list[list[float]]]:
    """``(compute_s[m][s], send_s[m][h])`` of a report, in seconds.

    A hop's time is what the receiver waits for: the transfer plus, for a
    TP-sharded send, its TP all-gather (``PipelineSendRecvEvent.recv_s``).
    ``ops`` (from :func:`microbatch_ops`) is computed when not given.
    """
    ops = microbatch_ops(report) if ops is None else ops
    m_count, p = len(report.microbatches), len(report.stages)
    compute = [[sum(o.time_s * o.count for o in ops[s][m]) for s in range(p)] for m in range(m_count)]
    send = [[0.0] * (p - 1) for _ in range(m_count)]
    for ev in report.runtime.send_recv_events:
        send[ev.microbatch][ev.src_stage] = ev.recv_s
    return compute, send


def report_timeline(
    report: Report,
    *,
    send_recv: str = "receiver",
    max_in_flight: int | None = None,
    ops: Sequence[Sequence[Sequence[OpCost]]] | None = None,
) -> Timeline:
    """The event-level timeline of a report's forward step (see :func:`schedule_pipeline`).

    ``max_in_flight`` None: the report's own cap (a chunked prefill's
    ``spec.chunked_prefill.max_in_flight``; otherwise no cap).
    """
    compute, send = report_timeline_inputs(report, ops)
    if max_in_flight is None and report.spec.chunked_prefill is not None:
        max_in_flight = report.spec.chunked_prefill.max_in_flight
    return schedule_pipeline(compute, send, send_recv=send_recv, max_in_flight=max_in_flight)
