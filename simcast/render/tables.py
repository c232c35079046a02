"""Rendering of reports: text tables and JSON-ready dicts (no simulation here)."""

from __future__ import annotations

import dataclasses
from typing import Any

from simcast.core.specs import GIB
from simcast.render.assumption_text import assumption_lines
from simcast.render.breakdown import breakdown_line
from simcast.sim.simulate import Report


def report_to_dict(r: Report) -> dict[str, Any]:
    """The JSON form of a :class:`Report` (seconds and bytes)."""
    rt = r.runtime
    sp = r.spec
    return {
        "model": sp.model.name,
        "device": sp.device.name,
        "parallel": {
            "tp": sp.parallel.tp,
            "pp": sp.parallel.pp,
            "dp": sp.parallel.dp,
            "world_size": sp.parallel.world_size,
            "devices_per_node": sp.device.links.devices_per_node,
        },
        "batch": {
            "num_requests": sp.batch.num_requests,
            "num_tokens": sp.batch.num_tokens,
            "query_lens": list(sp.batch.query_lens),
            "context_lens": list(sp.batch.context_lens),
            "counts": list(sp.batch.counts),
        },
        "partition": sp.partition,
        "num_microbatches": rt.num_microbatches,
        "prefill_chunks": list(sp.chunked_prefill.tokens) if sp.chunked_prefill is not None else None,
        "latency_s": rt.latency_s,
        "overlapped_latency_s": timeline_latency_s(r, "overlap"),
        "rfc_blocking_latency_s": timeline_latency_s(r, "blocking"),
        "stage_compute_times_s": list(rt.stage_compute_times_s),
        "stage_comm_times_s": list(rt.stage_comm_times_s),
        "stage_times_s": list(rt.stage_times_s),
        "send_recv_events": [dataclasses.asdict(e) for e in rt.send_recv_events],
        "breakdown": rt.breakdown,
        "idle_fraction": rt.idle_fraction,
        "op_bound_s": r.op_bound_s,
        "breakdown_line": breakdown_line(r),
        "stages": [
            {
                "stage_id": s.stage_id,
                "start_layer": s.start_layer,
                "end_layer": s.end_layer,
                "num_layers": s.num_layers,
                "compute_s": s.compute_s,
                "tp_comm_s": s.tp_comm_s,
                "comm_s": s.comm_s,
                "stage_s": s.stage_s,
                "weight_bytes": s.weight_bytes,
                "kv_cache_bytes": s.kv_cache_bytes,
                "activation_bytes": s.activation_bytes,
                "tp_link": s.tp_link,
            }
            for s in r.stages
        ],
        "max_stage_weight_bytes": r.max_stage_weight_bytes,
        "max_stage_kv_cache_bytes": r.max_stage_kv_cache_bytes,
        "max_stage_memory_bytes": r.max_stage_memory_bytes,
        "device_memory_bytes": sp.device.hbm_bytes,
        "assumptions": assumption_lines(r.assumptions),
        "traces_compiled": r.traces_compiled,
    }


def timeline_latency_s(r: Report, send_recv: str) -> float:
    """Makespan of the event-level timeline under another send/recv model (``"overlap"``: a lower bound,
    ``"blocking"``: the RFC's both-sides figure); the report's own latency is the ``"receiver"`` one."""
    from simcast.sim.timeline import report_timeline

    return report_timeline(r, send_recv=send_recv).makespan_s


def table(headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> str:
    """Plain aligned text table: the columns in ``left`` (text) left-aligned, the others (numbers) right-aligned."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def format_report(r: Report) -> str:
    sp, rt = r.spec, r.runtime
    b = sp.batch
    phase = b.phase
    head = (
        f"simcast simulate: {sp.model.name} on {sp.parallel.world_size} x {sp.device.name} "
        f"(TP={sp.parallel.tp} | PP={sp.parallel.pp} | DP={sp.parallel.dp}), {phase} step, "
        f"{b.num_requests} requests / {b.num_tokens} tokens, {rt.num_microbatches} "
        f"{'prefill chunks' if sp.chunked_prefill is not None else 'microbatch(es)'}, "
        f"partition {sp.partition}"
    )
    rows = [
        [
            str(s.stage_id),
            f"{s.start_layer}-{s.end_layer - 1}",
            str(s.num_layers),
            f"{s.compute_s * 1e3:.3f}",
            f"{s.tp_comm_s * 1e3:.3f}",
            f"{s.comm_s * 1e3:.3f}",
            f"{s.stage_s * 1e3:.3f}",
            f"{s.weight_bytes / GIB:.2f}",
            f"{s.kv_cache_bytes / GIB:.2f}",
            f"{s.activation_bytes / GIB:.2f}",
        ]
        for s in r.stages
    ]
    tab = table(
        [
            "stage",
            "layers",
            "n",
            "compute ms",
            "(TP comm) ms",
            "PP comm ms",
            "stage ms",
            "weights GiB",
            "KV GiB",
            "act GiB",
        ],
        rows,
    )
    fit = r.max_stage_memory_bytes <= sp.device.hbm_bytes
    bd = rt.breakdown
    lines = [
        head,
        "",
        "per microbatch, per rank:" if sp.chunked_prefill is None else "per chunk (mean over chunks), per rank:",
        tab,
        "",
        f"latency: {rt.latency_s * 1e3:.3f} ms"
        + (" (TTFT)" if sp.chunked_prefill is not None else "")
        + (
            f" (receiver waits for each send/recv, as vLLM's irecv); transfers fully overlapped: "
            f"{timeline_latency_s(r, 'overlap') * 1e3:.3f} ms; RFC blocking send+recv: "
            f"{timeline_latency_s(r, 'blocking') * 1e3:.3f} ms"
            if sp.parallel.pp > 1
            else ""
        ),
        f"breakdown: compute {bd['compute'] * 1e3:.3f} ms | communication {bd['communication'] * 1e3:.3f} ms | "
        f"bubble {bd['bubble'] * 1e3:.3f} ms | idle fraction {rt.idle_fraction * 100:.1f}%",
        f"ops: {breakdown_line(r)}",
        f"memory: max stage {r.max_stage_memory_bytes / GIB:.2f} GiB of {sp.device.hbm_bytes / GIB:.2f} GiB "
        f"({'fits' if fit else 'DOES NOT FIT'})",
        "",
        "assumptions:",
    ] + [f"  - {a}" for a in assumption_lines(r.assumptions)]
    return "\n".join(lines)
