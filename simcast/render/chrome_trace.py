"""Report → Chrome Trace Event Format (loads in Perfetto and chrome://tracing).

Layout (see docs/timeline.md):

* one process per pipeline stage, shown as its TP-rank-0 global rank
  (``pid = stage``); threads ``compute`` (tid 0), ``recv`` (1), ``send`` (2);
* per microbatch a ``compute`` slice on the stage's compute thread, with
  nested children, by granularity ``detail``:
  ``"op"``: embedding / ``layer i`` / head slices, each holding one slice
  per op (ops of the traced representative layer, replayed per layer);
  ``"layer"``: the layer slices only, FLOPs/bytes aggregated in their args;
  ``"stage"``: no children. ``"auto"`` picks the finest level whose slice
  count stays under :data:`MAX_SLICES` (~200 bytes each: files stay well
  under 20 MB);
* send/recv slices on the send/recv threads, joined by flow arrows (a recv
  slice includes the receiver's TP all-gather of a TP-sharded send);
* ``M`` metadata events name processes and threads.

Timestamps and durations are in microseconds (``ts``, ``dur``). Pure: returns a
JSON-ready dict, writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from simcast.sim.timeline import SEND_RECV_LABELS, Timeline, TimelineEvent, microbatch_ops, report_timeline

if TYPE_CHECKING:  # pragma: no cover
    from simcast.cost.ops.op_work import OpCost
    from simcast.sim.simulate import Report

MAX_SLICES = 60_000
TIDS = {"compute": 0, "recv": 1, "send": 2}
US = 1e6
_LINEAR_NAMES = {"layer": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"), "post": ("lm_head",)}


def _op_names(ops: Sequence[OpCost], where: str) -> list[str]:
    """Readable op names; the linears of a Llama/Qwen layer are named by position."""
    linears = [i for i, o in enumerate(ops) if o.op == "linear"]
    known = _LINEAR_NAMES.get(where, ())
    names = [o.op.removeprefix("simcast::") for o in ops]
    if len(linears) == len(known):
        for i, n in zip(linears, known):
            names[i] = n
    return [n + " (TP)" if o.bound == "Comm" else n for n, o in zip(names, ops)]


def stage_segments(
    ops: Sequence[OpCost], start_layer: int, num_layers: int
) -> list[tuple[str, list[tuple[str, OpCost]]]]:
    """The ordered groups of one stage's forward: ``[(name, [(op name, op), ...]), ...]``.

    Edge ops (``pre``: embedding; ``post``: final norm, lm_head, sampler) form
    their own group; each decoder layer gets the ops of its traced scope
    (``layer0`` for the first layer, ``layer1`` for the rest when the stage
    traced two layers). Each op appears once per group (one instance).
    """
    by_scope: dict[str, list[OpCost]] = {}
    for o in ops:
        by_scope.setdefault(o.scope, []).append(o)
    groups: list[tuple[str, list[tuple[str, OpCost]]]] = []
    if "pre" in by_scope:
        groups.append(("embedding", list(zip(_op_names(by_scope["pre"], "pre"), by_scope["pre"]))))
    for i in range(num_layers):
        scope = "layer1" if i > 0 and "layer1" in by_scope else "layer0"
        lops = by_scope.get(scope, [])
        groups.append((f"layer {start_layer + i}", list(zip(_op_names(lops, "layer"), lops))))
    if "post" in by_scope:
        groups.append(("norm + lm_head", list(zip(_op_names(by_scope["post"], "post"), by_scope["post"]))))
    return groups


def _slice(
    name: str, cat: str, start_us: float, end_us: float, pid: int, tid: int, args: dict[str, Any]
) -> dict[str, Any]:
    ts = round(start_us, 3)
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": ts,
        "dur": max(0.0, round(round(end_us, 3) - ts, 3)),
        "pid": pid,
        "tid": tid,
        "args": args,
    }


def _children(ev: TimelineEvent, groups: list, detail: str, pid: int) -> list[dict[str, Any]]:
    """Layer (and op) slices laid end to end inside the compute slice ``ev``."""
    total = sum(op.time_s for _, g in groups for _, op in g)
    if total <= 0:
        return []
    scale = (ev.end_s - ev.start_s) / total  # 1 up to rounding: the ops sum to the stage compute
    lo, hi = ev.start_s * US, ev.end_s * US
    clamp = lambda t: min(max(t, lo), hi)  # noqa: E731
    out, t = [], ev.start_s * US
    for name, g in groups:
        g_start = t
        kids = []
        for op_name, op in g:
            t_next = t + op.time_s * scale * US
            if detail == "op":
                kids.append(
                    _slice(
                        op_name,
                        "op",
                        clamp(t),
                        clamp(t_next),
                        pid,
                        0,
                        {
                            "flops": op.flops,
                            "bytes": op.bytes,
                            "bound": op.bound,
                            "op": op.op,
                            "time_us": op.time_s * US,
                        },
                    )
                )
            t = t_next
        out.append(
            _slice(
                name,
                "layer",
                clamp(g_start),
                clamp(t),
                pid,
                0,
                {"flops": sum(op.flops for _, op in g), "bytes": sum(op.bytes for _, op in g), "ops": len(g)},
            )
        )
        out.extend(kids)
    return out


def choose_detail(report: Report, detail: str = "auto") -> str:
    """``detail`` itself unless ``"auto"``: the finest of op/layer/stage under :data:`MAX_SLICES`."""
    if detail != "auto":
        if detail not in ("op", "layer", "stage"):
            raise ValueError(f"detail must be auto, op, layer or stage, got {detail!r}")
        return detail
    m = len(report.microbatches)
    per_stage = [stage_segments(s.ops, s.start_layer, s.num_layers) for s in report.stages]
    layers = m * sum(len(g) + 1 for g in per_stage)
    ops = layers + m * sum(len(ops) for g in per_stage for _, ops in g)
    return "op" if ops <= MAX_SLICES else "layer" if layers <= MAX_SLICES else "stage"


def _metadata(report: Report) -> list[dict[str, Any]]:
    from simcast.core.layout import rank_of

    par = report.spec.parallel
    out: list[dict[str, Any]] = []
    for st in report.stages:
        r0 = rank_of(0, st.stage_id, 0, par)
        tp = f", TP ranks {r0}-{r0 + par.tp - 1}" if par.tp > 1 else ""
        name = f"PP stage {st.stage_id}: layers {st.start_layer}-{st.end_layer - 1} (rank {r0}{tp})"
        out += [
            {"name": "process_name", "ph": "M", "pid": st.stage_id, "tid": 0, "args": {"name": name}},
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": st.stage_id,
                "tid": 0,
                "args": {"sort_index": st.stage_id},
            },
        ]
        for lane, tid in TIDS.items():
            out += [
                {"name": "thread_name", "ph": "M", "pid": st.stage_id, "tid": tid, "args": {"name": lane}},
                {"name": "thread_sort_index", "ph": "M", "pid": st.stage_id, "tid": tid, "args": {"sort_index": tid}},
            ]
    return out


def chrome_trace(
    report: Report,
    *,
    send_recv: str = "receiver",
    max_in_flight: int | None = None,
    detail: str = "auto",
    timeline: Timeline | None = None,
) -> dict[str, Any]:
    """The report's forward step as a Trace Event Format dict (``{"traceEvents": [...], ...}``).

    ``send_recv``/``max_in_flight`` choose the timeline (:func:`simcast.sim.timeline.schedule_pipeline`;
    the default ``"receiver"`` is what the report's latency assumes); a precomputed ``timeline`` of
    the same report may be passed instead.
    """
    ops = microbatch_ops(report)
    tl = timeline or report_timeline(report, send_recv=send_recv, max_in_flight=max_in_flight, ops=ops)
    level = choose_detail(report, detail)
    msg = {(e.src_stage, e.microbatch): e for e in report.runtime.send_recv_events}
    events = _metadata(report)
    recvs = {(e.stage, e.microbatch): e for e in tl.events if e.kind == "recv"}
    flow_id = 0
    for ev in tl.events:
        if ev.kind == "compute":
            events += _compute_events(report, ev, ops[ev.stage][ev.microbatch], level)
            continue
        hop = ev.stage if ev.kind == "send" else ev.peer
        events.append(_comm_event(ev, msg.get((hop, ev.microbatch)) if hop is not None else None, tl.send_recv))
        if ev.kind == "send":  # flow arrow from this send to the matching recv
            flow_id += 1
            recv = recvs.get((ev.peer, ev.microbatch)) if ev.peer is not None else None
            if recv is not None:
                events += _flow(flow_id, ev, recv)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": _other_data(report, tl, level)}


def _compute_events(report: Report, ev: TimelineEvent, mops: Sequence[Any], level: str) -> list[dict[str, Any]]:
    """One microbatch's compute slice on its stage, and its children at ``level`` of detail."""
    st = report.stages[ev.stage]
    mb = report.microbatches[ev.microbatch]
    chunked = report.spec.chunked_prefill is not None
    chunk = {"prefix_tokens": mb.context_lens[0]} if chunked else {}
    name = (
        f"chunk {ev.microbatch}: {mb.num_tokens} tok @ prefix {mb.context_lens[0]}"
        if chunked
        else f"mb {ev.microbatch} compute"
    )
    args = {
        "microbatch": ev.microbatch,
        "tokens": mb.num_tokens,
        "requests": mb.num_requests,
        "layers": st.num_layers,
        "flops": sum(o.flops * o.count for o in mops),
        "bytes": sum(o.bytes * o.count for o in mops),
        "tp_comm_us": sum(o.time_s * o.count for o in mops if o.bound == "Comm") * US,
        **chunk,
    }
    out = [_slice(name, "compute", ev.start_s * US, ev.end_s * US, ev.stage, TIDS["compute"], args)]
    if level != "stage":
        out.extend(_children(ev, stage_segments(mops, st.start_layer, st.num_layers), level, ev.stage))
    return out


def _comm_event(ev: TimelineEvent, m: Any, send_recv: str) -> dict[str, Any]:
    """A send or recv slice of the PP hand-off ``m`` (a send/recv event of the report, or None)."""
    arrow = f"{ev.stage}->{ev.peer}" if ev.kind == "send" else f"{ev.peer}->{ev.stage}"
    args = {
        "microbatch": ev.microbatch,
        "peer_stage": ev.peer,
        "bytes": m.message_bytes if m else None,
        "link": m.link if m else None,
        "transfer_us": m.latency_s * US if m else None,
        "all_gather_us": m.all_gather_s * US if m else None,
        "send_recv": send_recv,
    }
    name = f"mb {ev.microbatch} {ev.kind} {arrow}"
    return _slice(name, "pp_comm", ev.start_s * US, ev.end_s * US, ev.stage, TIDS[ev.kind], args)


def _flow(flow_id: int, send: TimelineEvent, recv: TimelineEvent) -> list[dict[str, Any]]:
    """The flow arrow (start and end events) from a send to its recv, at each slice's middle (us)."""

    def mid(e: TimelineEvent) -> float:
        return round((e.start_s + e.end_s) / 2 * US, 3)

    name, cat = "hidden states", "pp_comm"
    return [
        {"name": name, "cat": cat, "ph": "s", "id": flow_id, "ts": mid(send), "pid": send.stage, "tid": TIDS["send"]},
        {
            "name": name,
            "cat": cat,
            "ph": "f",
            "bp": "e",
            "id": flow_id,
            "ts": mid(recv),
            "pid": recv.stage,
            "tid": TIDS["recv"],
        },
    ]


def _other_data(report: Report, tl: Timeline, level: str) -> dict[str, Any]:
    """The trace's ``otherData``: what was simulated and the step's latencies (ms)."""
    rt, sp = report.runtime, report.spec
    return {
        "model": sp.model.name,
        "device": sp.device.name,
        "parallel": f"TP={sp.parallel.tp} | PP={sp.parallel.pp} | DP={sp.parallel.dp}",
        "send_recv": SEND_RECV_LABELS[tl.send_recv],
        "max_in_flight": tl.max_in_flight,
        "detail": level,
        "microbatches": tl.num_microbatches,
        "prefill_chunks": list(sp.chunked_prefill.tokens) if sp.chunked_prefill is not None else None,
        "timeline_makespan_ms": tl.makespan_s * 1e3,
        "fill_drain_latency_ms": rt.latency_s * 1e3,
        "rfc_bubble_ms": rt.breakdown["bubble"] * 1e3,
        "idle_fraction": tl.idle_fraction,
    }
