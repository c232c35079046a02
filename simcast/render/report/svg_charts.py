"""Small per-layout charts drawn directly as SVG text (fast and light: a search report carries one set per
ranked layout). Same data and colours as the matplotlib figures of :mod:`simcast.render.plots`: per-stage
time over one step, per-stage memory against the device's HBM, and the step's pipeline timeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from simcast.core.specs import GIB
from simcast.render.plots import COLORS, MS, stage_breakdown_ms
from simcast.render.report.page import esc
from simcast.sim.timeline import report_timeline

if TYPE_CHECKING:  # pragma: no cover
    from simcast.sim.simulate import Report

W, H = 420, 250  # px of one bar chart
PAD_L, PAD_R, PAD_T, PAD_B = 52, 12, 28, 58
MB_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _nice_max(v: float) -> float:
    """A round axis maximum at or above ``v``."""
    if v <= 0:
        return 1.0
    for e in range(-3, 12):
        for step in (1, 2, 2.5, 5):
            top = step * 10.0**e
            if top >= v:
                return top
    return v


def _axes(title: str, ylabel: str, ymax: float, ticks: Sequence[str]) -> list[str]:
    """Frame, y grid with 5 ticks, x labels under each bar slot."""
    iw, ih = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    out = [f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="12" font-weight="600">{esc(title)}</text>']
    for k in range(6):
        y = PAD_T + ih - ih * k / 5
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{PAD_L - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{ymax * k / 5:g}</text>')
    out.append(
        f'<text transform="translate(12 {PAD_T + ih / 2}) rotate(-90)" text-anchor="middle" font-size="10">'
        f"{esc(ylabel)}</text>"
    )
    slot = iw / max(1, len(ticks))
    for i, t in enumerate(ticks):
        x = PAD_L + slot * (i + 0.5)
        out.append(f'<text x="{x:.1f}" y="{H - PAD_B + 14}" text-anchor="middle" font-size="10">{esc(t)}</text>')
    out.append(f'<rect x="{PAD_L}" y="{PAD_T}" width="{iw}" height="{ih}" fill="none" stroke="#999"/>')
    return out


def _stacked(
    title: str,
    ylabel: str,
    ticks: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    line: tuple[float, str, str] | None,
    unit: str,
) -> str:
    """Stacked bars (``series``: label, colour, one value per bar) and an optional horizontal line."""
    tops = [sum(v[i] for _, _, v in series) for i in range(len(ticks))]
    ymax = _nice_max(max([*tops, line[0] if line else 0.0]) * 1.08)
    iw, ih = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    out = _axes(title, ylabel, ymax, ticks)
    slot = iw / max(1, len(ticks))
    for i in range(len(ticks)):
        base = 0.0
        for label, color, vals in series:
            v = vals[i]
            y0, y1 = PAD_T + ih * (1 - (base + v) / ymax), PAD_T + ih * (1 - base / ymax)
            x = PAD_L + slot * i + slot * 0.2
            out.append(
                f'<rect x="{x:.1f}" y="{y0:.1f}" width="{slot * 0.6:.1f}" height="{max(0.0, y1 - y0):.1f}" '
                f'fill="{color}"><title>{esc(label)}: {v:.2f} {unit}</title></rect>'
            )
            base += v
        out.append(
            f'<text x="{PAD_L + slot * (i + 0.5):.1f}" y="{PAD_T + ih * (1 - base / ymax) - 3:.1f}" '
            f'text-anchor="middle" font-size="9">{base:.1f}</text>'
        )
    if line:
        y = PAD_T + ih * (1 - line[0] / ymax)
        out.append(
            f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}" stroke="{line[2]}" stroke-dasharray="5 3"/>'
        )
    legend = [*((lab, col) for lab, col, _ in series), *([(line[1], line[2])] if line else [])]
    for k, (lab, col) in enumerate(legend):
        x, y = PAD_L + (k % 2) * (iw / 2), H - PAD_B + 30 + (k // 2) * 13
        out.append(f'<rect x="{x}" y="{y - 8}" width="9" height="9" fill="{col}"/>')
        out.append(f'<text x="{x + 13}" y="{y}" font-size="9.5">{esc(lab)}</text>')
    h = H + 13 * max(0, (len(legend) - 1) // 2 - 1)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" '
        f'font-family="system-ui, sans-serif" role="img" aria-label="{esc(title)}">' + "".join(out) + "</svg>"
    )


def _ticks(report: Report) -> list[str]:
    return [f"{s.stage_id}: L{s.start_layer}-{s.end_layer - 1}" for s in report.stages]


def stage_time_svg(report: Report) -> str:
    """Per-stage time over one step (ms): compute, TP collectives, PP recv, idle up to the step latency."""
    parts = stage_breakdown_ms(report)
    series = [
        ("compute (excl. TP collectives)", COLORS["compute"], parts["compute"]),
        ("TP collectives", COLORS["tp"], parts["tp_comm"]),
        ("PP recv (waits for data)", COLORS["pp"], parts["pp_comm"]),
        ("idle (bubble)", COLORS["idle"], parts["idle"]),
    ]
    lat = report.runtime.latency_s * MS
    return _stacked(
        "Per-stage time over one step", "ms", _ticks(report), series, (lat, f"step latency {lat:.1f} ms", "#000"), "ms"
    )


def stage_memory_svg(report: Report) -> str:
    """Per-stage memory per rank (GiB): weights, KV cache, peak activations, against the device's HBM."""
    st = report.stages
    series = [
        ("weights", COLORS["weights"], [s.weight_bytes / GIB for s in st]),
        ("KV cache (this batch)", COLORS["kv"], [s.kv_cache_bytes / GIB for s in st]),
        ("activations (peak)", COLORS["act"], [s.activation_bytes / GIB for s in st]),
    ]
    cap = report.spec.device.hbm_bytes / GIB
    return _stacked(
        "Per-stage memory per rank",
        "GiB",
        _ticks(report),
        series,
        (cap, f"HBM {cap:.1f} GiB ({report.spec.device.name})", COLORS["capacity"]),
        "GiB",
    )


def timeline_svg(report: Report) -> str:
    """The step's pipeline timeline (receiver waits for each hop): a row per stage, a bar per microbatch's
    compute, hatched-free grey bars for the PP receive the stage waits on; time in ms."""
    tl = report_timeline(report, send_recv="receiver")
    width, row_h, left = 860, 22, 64
    span = tl.makespan_s * MS or 1.0
    iw = width - left - 16
    h = 30 + row_h * tl.num_stages + 34
    out = [
        f'<text x="{width / 2}" y="14" text-anchor="middle" font-size="12" font-weight="600">Pipeline timeline of '
        f"one step: {tl.num_microbatches} microbatch(es), makespan {span:.1f} ms</text>"
    ]
    for s in range(tl.num_stages):
        y = 24 + row_h * s
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end" font-size="10">stage {s}</text>')
    for e in tl.events:
        if e.kind == "send":
            continue
        x0 = left + iw * e.start_s * MS / span
        x1 = left + iw * e.end_s * MS / span
        y = 24 + row_h * e.stage + 2
        color = MB_COLORS[e.microbatch % len(MB_COLORS)] if e.kind == "compute" else COLORS["pp"]
        what = "compute" if e.kind == "compute" else "PP recv"
        out.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{max(0.5, x1 - x0):.1f}" height="{row_h - 4}" fill="{color}">'
            f"<title>stage {e.stage}, microbatch {e.microbatch}: {what} {e.start_s * MS:.2f}-{e.end_s * MS:.2f} ms"
            "</title></rect>"
        )
    base = 24 + row_h * tl.num_stages
    for k in range(6):
        x = left + iw * k / 5
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="24" y2="{base}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 13}" text-anchor="middle" font-size="10">{span * k / 5:.1f}</text>')
    out.append(
        f'<text x="{left + iw / 2}" y="{base + 28}" text-anchor="middle" font-size="10">time since step start (ms)'
        "</text>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {h}" width="{width}" height="{h}" '
        'font-family="system-ui, sans-serif" role="img" aria-label="pipeline timeline">' + "".join(out) + "</svg>"
    )
