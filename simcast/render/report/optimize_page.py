"""``optimize --report``: the layout search as one self-contained page (edge of render: builds HTML text).

Order: the question, the answer (the best layout in one sentence), the ranked layouts (sortable, best and
Pareto rows marked, launch lines with a copy button), the Pareto chart, each ranked layout's breakdown,
per-stage memory and one-step pipeline timeline, then the assumptions. Every figure is formatted as the
terminal table prints it (:func:`simcast.render.search_tables.ranked_cells`), so the two agree digit for digit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcast.render.assumption_text import assumption_lines
from simcast.render.plots import pareto_front
from simcast.render.report import page
from simcast.render.report.charts import pareto_chart
from simcast.render.report.svg_charts import stage_memory_svg, stage_time_svg, timeline_svg
from simcast.render.search_tables import RANKED_HEADERS, best_rows, ranked_cells

if TYPE_CHECKING:  # pragma: no cover
    from simcast.render.launch import LaunchLines
    from simcast.render.report.shapes import SearchLike

DETAIL_LAYOUTS = 24
"""Ranked layouts whose breakdown, memory and timeline charts the page carries (the file stays small)."""


def question_text(result: SearchLike) -> tuple[str, str]:
    """(title, one-line question) of a search."""
    cfg, sp = result.config, result.space
    w = cfg.workload
    limits = []
    if sp.ttft_limit_s != float("inf"):
        limits.append(f"TTFT ≤ {sp.ttft_limit_s * 1e3:g} ms")
    if sp.tpot_limit_s != float("inf"):
        limits.append(f"TPOT ≤ {sp.tpot_limit_s * 1e3:g} ms")
    model = cfg.model.name
    title = f"simcast optimize: {model} on {sp.num_devices} × {cfg.device.name}"
    q = (
        f"Which layout serves {model} fastest on {sp.num_devices} × {cfg.device.name} with engine "
        f"{cfg.runtime}, ISL {w.input_length} / OSL {w.output_length}"
        + (f", {' and '.join(limits)}" if limits else ", no latency limits")
        + f"? Searched TP {list(sp.tp_sizes)} × PP {list(sp.pp_sizes)}, ranked by token/s/device."
    )
    return title, q


def _answer(best: dict, n_layouts: int) -> str:
    return (
        f'<p class="answer">Best: <b>{page.esc(best["parallel"])}</b> at {best["concurrency"]} requests in '
        f"flight — <b>{best['tokens_per_s_per_device']:.1f} token/s/device</b> ({best['tokens_per_s']:.1f} "
        f"token/s in all), TTFT {best['ttft_ms']:.1f} ms, TPOT {best['tpot_ms']:.2f} ms "
        f"({best['tokens_per_s_per_user']:.1f} token/s/user). {n_layouts} layout(s) ranked.</p>"
    )


def _layouts_table(best: list[dict], pareto: set[int]) -> str:
    headers = [*RANKED_HEADERS, "mark"]
    rows, classes = [], []
    keys: list[str | None] = [None, None, "batch_size", "concurrency", "ttft_ms", "ttft_idle_ms", "tpot_ms"]
    keys += ["tokens_per_s", "tokens_per_s_per_device", "tokens_per_s_per_user", "max_stage_weights_gib"]
    keys += ["max_stage_kv_gib", None]
    for i, r in enumerate(best):
        cells = ranked_cells(i, r, chunks=False)
        vals = [float(i + 1) if k is None and j == 0 else (float(r[k]) if k else None) for j, k in enumerate(keys)]
        mark = "best" if i == 0 else "Pareto" if i in pareto else ""
        rows.append([*zip(cells, vals, strict=True), (mark, None)])
        classes.append("best" if i == 0 else "pareto" if i in pareto else "")
    legend = (
        '<p class="muted"><span class="legend-chip chip-best"></span> best layout &nbsp; '
        '<span class="legend-chip chip-pareto"></span> on the Pareto front (token/s/device vs token/s/user, '
        "limits met) &nbsp; click a column to sort</p>"
    )
    return legend + page.table(headers, rows, row_classes=classes, text_cols=(1, 12, 13), table_id="layouts")


def _launch_section(entries: list[tuple[str, LaunchLines]], engine: str) -> str:
    out = [
        f"<h2>Launch lines ({page.esc(engine)})</h2>",
        '<p class="muted">The server command of each ranked layout, and the bench line that checks its prediction.</p>',
    ]
    for i, (label, ll) in enumerate(entries):
        lines = [*(f"# {n}" for n in ll.notes)]
        lines += [f"{f'[{w}] ' if w else ''}{c}" for w, c in ll.commands] + [ll.bench]
        opened = " open" if i == 0 else ""
        out.append(
            f"<details{opened}><summary>{i + 1}. {page.esc(label)}</summary>"
            + page.code_block(f"launch-{i}", "\n".join(lines))
            + "</details>"
        )
    return "\n".join(out)


def _details(result: SearchLike, best: list[dict]) -> str:
    out = ["<h2>Per layout: where the time and the memory go</h2>"]
    for i, cand in enumerate(result.candidates[: min(DETAIL_LAYOUTS, len(best))]):
        r = best[i]
        rep = cand.result.prefill
        body = (
            f'<p class="muted">prefill: {page.esc(r["prefill_breakdown"])}<br>decode: '
            f"{page.esc(r['decode_breakdown'])}</p>"
            + '<div class="charts">'
            + stage_time_svg(rep)
            + stage_memory_svg(rep)
            + "</div>"
            + page.figure(
                timeline_svg(rep),
                "One prompt's prefill step on an idle engine (hover a bar for its times): per-stage time "
                "(compute, TP collectives, PP receive, idle), per-stage memory per rank against the device's HBM, "
                "and the pipeline timeline of the step's microbatches.",
            )
        )
        opened = " open" if i == 0 else ""
        out.append(f"<details{opened}><summary>{i + 1}. {page.esc(r['parallel'])}</summary>{body}</details>")
    return "\n".join(out)


def optimize_page(
    result: SearchLike, launch: list[tuple[str, LaunchLines]], engine: str, uncertainty: list[str] | None = None
) -> str:
    """The whole page of a search (``launch``: each ranked layout's lines for ``engine``; ``uncertainty``: the
    prediction intervals' lines, as the terminal prints them)."""
    title, question = question_text(result)
    best = best_rows(list(result.candidates))
    parts = [f"<h1>{page.esc(title)}</h1>", f'<p class="question">{page.esc(question)}</p>']
    if not best:
        parts.append('<p class="answer">No layout meets the limits.</p>')
        return page.document(title, "\n".join(parts))
    meets = [bool(row.meets_limits) for row in result.rows if row.best]
    xs = [r["tokens_per_s_per_user"] for r in best]
    ys = [r["tokens_per_s_per_device"] for r in best]
    ok = [i for i, m in enumerate(meets) if m]
    pareto = {ok[j] for j in pareto_front([xs[i] for i in ok], [ys[i] for i in ok])}
    parts += [_answer(best[0], len(best)), "<h2>Layouts</h2>", _layouts_table(best, pareto)]
    curves = [
        ([p.tokens_per_s_per_user for p in c.points], [p.tokens_per_s_per_device for p in c.points])
        for c in result.candidates
    ]
    tpot = result.space.tpot_limit_s * 1e3 if result.space.tpot_limit_s != float("inf") else None
    fig = pareto_chart(curves, list(zip(xs, ys, meets, strict=True)), tpot_limit_ms=tpot, best_index=0)
    tips = {
        f"pt{i}": f"{i + 1}. {r['parallel']}: {r['tokens_per_s_per_device']:.1f} token/s/device, "
        f"{r['tokens_per_s_per_user']:.1f} token/s/user"
        for i, r in enumerate(best)
    }
    parts += [
        page.uncertainty_section(uncertainty or []),
        "<h2>Throughput against interactivity</h2>",
        page.figure(
            page.svg(fig, "pareto", tips),
            "One marker per layout at its chosen point (★ best; blue: Pareto front; hover for the layout); grey "
            "lines: each layout's swept concurrencies; black: the front over the points meeting the limits.",
        ),
        _launch_section(launch, engine),
        _details(result, best),
        "<h2>Assumptions</h2>",
        '<ul class="assumptions">'
        + "".join(f"<li>{page.esc(a)}</li>" for a in assumption_lines(result.candidates[0].result.assumptions))
        + "</ul>",
        f"<details><summary>{len(result.rejected)} layout(s) rejected</summary>"
        + '<ul class="assumptions">'
        + "".join(f"<li>{page.esc(x.parallel)}: {page.esc(x.reason)}</li>" for x in result.rejected)
        + "</ul></details>",
    ]
    return page.document(title, "\n".join(parts))
