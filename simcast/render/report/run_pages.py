"""``bench-serve --report`` and ``simulate --report``: one run as a self-contained page (builds HTML text).

bench-serve: the question (model, devices, engine, layout, client settings), the answer (throughput and the
latencies a client sees), the ``vllm bench serve`` block as a table (same figures, same formatting as the
terminal), the TTFT / TPOT / ITL distributions, throughput and the engine's queue over time, the assumptions.
simulate: the step's latency and its PP Compute / PP Comm / PP Bubble split, the per-stage time, memory and
timeline, the assumptions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simcast.render.assumption_text import assumption_lines
from simcast.render.bench_plots import per_request_ms, state_series
from simcast.render.bench_tables import bench_rows, latency_rows
from simcast.render.breakdown import breakdown_line
from simcast.render.report import page
from simcast.render.report.charts import histogram, over_time, queue_chart
from simcast.render.report.svg_charts import stage_memory_svg, stage_time_svg, timeline_svg

if TYPE_CHECKING:  # pragma: no cover
    from simcast.render.report.shapes import BenchLike
    from simcast.serving.steady.model import ServingResult
    from simcast.sim.report import Report

WINDOW_S = 1.0  # throughput-over-time bins (s); widened for long runs so a chart has at most ~200 bins


def _assumptions(lines: list[str]) -> str:
    return (
        "<h2>Assumptions</h2>"
        + '<ul class="assumptions">'
        + "".join(f"<li>{page.esc(a)}</li>" for a in lines)
        + "</ul>"
    )


def _throughput_series(result: BenchLike) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens/s per time bin (bin of ``WINDOW_S`` s or wider), from each step's end and tokens."""
    ends, toks = result.run.step_end_s, result.run.step_tokens
    if len(ends) == 0:
        return np.zeros(0), np.zeros(0)
    t0 = float(min(x.arrival_s for x in result.run.requests))
    span = max(float(ends.max()) - t0, 1e-9)
    width = max(WINDOW_S, span / 200.0)
    edges = np.arange(0.0, span + width, width)
    counts, _ = np.histogram(ends - t0, bins=edges, weights=toks.astype(float))
    return edges[:-1] + width / 2, counts / width


def bench_page(result: BenchLike, command: str = "", uncertainty: list[str] | None = None) -> str:
    """The page of one ``bench-serve`` run (``command``: the command line that made it, shown verbatim)."""
    m, cfg = result.summary, result.config
    par = cfg.parallel
    title = f"simcast bench-serve: {cfg.model.name} on {par.world_size} × {cfg.device.name}"
    rate = "inf" if m.request_rate_per_s == float("inf") else f"{m.request_rate_per_s:g}/s"
    question = (
        f"How does {cfg.model.name} serve on {par.world_size} × {cfg.device.name} with engine {cfg.runtime} "
        f"(TP {par.tp} × PP {par.pp} × DP {par.dp}) under {m.num_prompts} prompts from {result.source}, request "
        f"rate {rate}, max concurrency {m.max_concurrency or 'unlimited'}?"
    )
    answer = (
        f'<p class="answer"><b>{m.output_throughput_tok_s:.2f} output token/s</b> '
        f"({m.request_throughput_req_s:.2f} req/s); median TTFT <b>{m.ttft.median_ms:.2f} ms</b> "
        f"(P99 {m.ttft.p99_ms:.2f}), median TPOT <b>{m.tpot.median_ms:.2f} ms</b>, median ITL "
        f"{m.itl.median_ms:.2f} ms; the run lasts {m.duration_s:.2f} s.</p>"
    )
    summary = page.table(
        ["metric", "value"], [[(k.rstrip(":"), None), (str(v), None)] for k, v in bench_rows(m)], text_cols=(0,)
    )
    lat = page.table(
        ["latency", "mean ms", "median ms", "P90 ms", "P99 ms"],
        [[(r[0], None), *((c, float(c)) for c in r[1:])] for r in latency_rows(m)],
        text_cols=(0,),
    )
    ttft, tpot = per_request_ms(result.run)
    itl = np.repeat(result.run.itl_s, result.run.itl_weight.astype(int)) * 1e3
    hists = [(ttft, "TTFT", "#4C72B0", "requests"), (tpot, "TPOT", "#DD8452", "requests")]
    hists.append((itl, "ITL", "#55A868", "token gaps"))
    dists = "".join(page.svg(histogram(v, n, c, y), f"h{k}") for k, (v, n, c, y) in enumerate(hists))
    t, tps = _throughput_series(result)
    parts = [
        f"<h1>{page.esc(title)}</h1>",
        f'<p class="question">{page.esc(question)}</p>',
        answer,
        *([f"<pre>{page.esc(command)}</pre>"] if command else []),
        page.uncertainty_section(uncertainty or []),
        "<h2>Serving benchmark result (simulated)</h2>",
        '<div class="charts">' + summary + lat + "</div>",
        "<h2>Latency distributions</h2>",
        page.figure(
            f'<div class="charts">{dists}</div>',
            "Per request (TTFT, TPOT) and per decode step (ITL); lines: median and P99.",
        ),
        "<h2>Over time</h2>",
        page.figure(page.svg(over_time(t, tps), "tput"), "Output tokens/s of the engine, binned by step end."),
        page.figure(
            page.svg(queue_chart(state_series(result.run)), "queue"),
            "Requests running and waiting (all replicas) and the KV cache in use.",
        ),
        _assumptions(list(result.assumptions)),
    ]
    return page.document(title, "\n".join(parts))


def simulate_page(report: Report, command: str = "", uncertainty: list[str] | None = None) -> str:
    """The page of one ``simulate`` step."""
    sp = report.spec
    par, b = sp.parallel, sp.batch
    title = f"simcast simulate: {sp.model.name} on {par.world_size} × {sp.device.name}"
    question = (
        f"How long does one {b.phase} step of {b.num_requests} request(s) / {b.num_tokens} token(s) of "
        f"{sp.model.name} take on {par.world_size} × {sp.device.name} as TP {par.tp} × PP {par.pp} × DP {par.dp}, "
        f"in {report.runtime.num_microbatches} microbatch(es)?"
    )
    rt = report.runtime
    answer = (
        f'<p class="answer">Step latency <b>{rt.latency_s * 1e3:.2f} ms</b>. {page.esc(breakdown_line(report))}</p>'
    )
    parts = [
        f"<h1>{page.esc(title)}</h1>",
        f'<p class="question">{page.esc(question)}</p>',
        answer,
        *([f"<pre>{page.esc(command)}</pre>"] if command else []),
        page.uncertainty_section(uncertainty or []),
        "<h2>Where the time and the memory go</h2>",
        '<div class="charts">' + stage_time_svg(report) + stage_memory_svg(report) + "</div>",
        page.figure(timeline_svg(report), "The step's pipeline timeline (hover a bar for its times)."),
        _assumptions(assumption_lines(report.assumptions)),
    ]
    return page.document(title, "\n".join(parts))


def serving_page(result: ServingResult, links: str = "", command: str = "") -> str:
    """The page of one steady-state serving estimate (``serve-config`` of an aggregated service)."""
    from simcast.render.search_tables import result_row

    cfg, par = result.config, result.config.parallel
    r = result_row(result, links)
    title = f"simcast serve-config: {cfg.model.name} on {par.world_size} × {cfg.device.name}"
    w = cfg.workload
    question = (
        f"How does {cfg.model.name} serve on {par.world_size} × {cfg.device.name} with engine {cfg.runtime} as "
        f"{r['parallel']}, ISL {w.input_length} / OSL {w.output_length}, {cfg.batch_size} request(s) in flight "
        "per replica?"
    )
    answer = (
        f'<p class="answer"><b>{r["tokens_per_s"]:.1f} token/s</b> ({r["tokens_per_s_per_device"]:.1f} per device, '
        f"{r['tokens_per_s_per_user']:.1f} per user) at {r['concurrency']} requests in flight; TTFT "
        f"<b>{r['ttft_ms']:.1f} ms</b> (one prompt on an idle engine {r['ttft_idle_ms']:.1f} ms), TPOT "
        f"<b>{r['tpot_ms']:.2f} ms</b>.</p>"
    )
    parts = [
        f"<h1>{page.esc(title)}</h1>",
        f'<p class="question">{page.esc(question)}</p>',
        answer,
        *([f"<pre>{page.esc(command)}</pre>"] if command else []),
    ]
    for phase, rep in (("prefill (one prompt, idle engine)", result.prefill), ("decode step", result.decode)):
        parts += [
            f"<h2>{page.esc(phase)}</h2>",
            f'<p class="muted">{page.esc(breakdown_line(rep))}</p>',
            '<div class="charts">' + stage_time_svg(rep) + stage_memory_svg(rep) + "</div>",
            page.figure(timeline_svg(rep), "The step's pipeline timeline (hover a bar for its times)."),
        ]
    parts.append(_assumptions(assumption_lines(result.assumptions)))
    return page.document(title, "\n".join(parts))
