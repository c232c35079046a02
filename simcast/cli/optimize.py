"""``simcast optimize``: run the layout search its flags ask for and write its outputs (text table, CSV,
JSON, Pareto plot, launch lines) (edge module)."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.api.optimize import optimize_setup, run_search
from simcast.api.search_inputs import SearchOptions, search_space
from simcast.cli.disagg import check_disagg_args, cmd_optimize_modes, wanted
from simcast.cli.engine_args import serving_engine_args
from simcast.cli.exits import EXIT_NO_LAYOUT, EXIT_OK
from simcast.cli.optimize_args import SEARCH_FLAGS, normalize_trailing_model
from simcast.cli.option_flags import option_values
from simcast.cli.outputs import (
    emit,
    emit_json,
    note_model_alias,
    run_metadata,
    write_atomic,
    write_pareto_plot,
    write_report,
)
from simcast.cli.shared_flags import target_kwargs
from simcast.cli.speculative import speculative_kwargs
from simcast.cli.sweep import check_sweep_args, run_refine
from simcast.core.errors import require
from simcast.engines import EMIT_ENGINES
from simcast.render.finite_tables import finite_row, format_finite, workload_label

NULL_ROWS = (
    "steady_rate_per_s and refined_* are null on rows --refine-top did not refine (it fills each refined layout's "
    "best row); on a refined row refined_miss_* are null when no probed rate missed the TTFT limit and "
    "the other refined_* when none met it"
)
"""Why a value of ``optimize --json`` is null (strict JSON has no NaN)."""


def search_options(a: argparse.Namespace) -> SearchOptions:
    """The :func:`simcast.api.optimize.optimize` keywords of parsed ``simcast optimize`` flags (``a.runtime``
    resolved: ``--engine``, else the ``--emit`` engine, else vllm)."""
    return SearchOptions(
        **option_values(a, SearchOptions, SEARCH_FLAGS),
        workers=a.workers,
        ray_address=a.ray_address,
        progress=None,
        **target_kwargs(a),
        **serving_engine_args(a),
        **speculative_kwargs(a),
    )


def cmd_optimize(a: argparse.Namespace) -> int:
    from simcast.render.search_tables import format_search

    came_positional = a.model is not None
    normalize_trailing_model(a)
    if not came_positional:  # main() noted a positional alias already
        note_model_alias(a.model)
    implied = a.emit if a.emit in EMIT_ENGINES else None  # dynamo is a launcher, not an engine
    a.runtime = a.runtime or implied or "vllm"  # --emit X implies --engine X unless --engine was given
    o = search_options(a)
    space = search_space(o)
    check_sweep_args(a)
    check_disagg_args(a)
    setup = optimize_setup(o, space)
    base, space, workload, dist = setup.config, setup.space, setup.workload, setup.lengths
    model, device = base.model, base.device
    require(  # ranked disaggregated searches draft in the decode pool only (MTP/EAGLE there, never in prefill)
        base.speculative is None or getattr(a, "request_rate", None) is None,
        "--request-rate",
        getattr(a, "request_rate", None),
        "speculative decoding is searched ranked by token/s (not for the fewest devices at a request rate)",
    )
    require(
        not space.chunk_sizes or not wanted(a),
        "--chunked-prefill-sizes",
        list(space.chunk_sizes),
        "searches aggregated layouts only (not with --serving-mode disagg/both or a request rate)",
    )
    if wanted(a):  # another serving mode than agg, or the fewest devices for a request rate
        return cmd_optimize_modes(a, base, space)
    found = run_search(setup, o)
    rows, rejected = list(found.candidates), list(found.rejected)
    refs, refined = run_refine(a, rows) if a.refine_top else ([], [])
    finite = _finite_runs(a, rows, dist)
    pts = _points(a, rows, space, refined)
    meta = run_metadata(device=a.device, engine=a.runtime) if a.csv or a.json else {}  # the text table has none
    _write_files(a, pts, meta, f"{model.name}, {a.num_devices} x {device.name}, {workload_label(workload)}")
    launch = _launch(a, rows)
    from simcast.api.search_uncertainty import search_uncertainty

    unc, unc_lines = search_uncertainty(rows, a.runtime, a.top, found.user_residuals)
    write_report(a, found)
    if a.json:
        _emit_json(a, pts, meta, rejected, refined, finite, launch, unc)
        return EXIT_OK if rows else EXIT_NO_LAYOUT
    lim = []
    if a.ttft_limit:
        lim.append(f"TTFT <= {a.ttft_limit:g} ms")
    if a.tpot_limit:
        lim.append(f"TPOT <= {a.tpot_limit:g} ms")
    assumptions = rows[0].result.assumptions if rows else ()
    header = _header(a, base, space, workload, lim)
    emit(format_search(rows, rejected, header, a.top, a.show_rejected, assumptions, has_limits=bool(lim)))
    if unc_lines:
        emit("\n" + "\n".join(unc_lines))
    if refined:
        from simcast.render.refine_tables import format_refined

        emit("\n" + format_refined(refined, refs))
    if finite:
        emit("\n" + format_finite(finite))
    if a.emit:
        from simcast.render.launch import format_launch

        emit("\n" + format_launch(launch, a.emit))
    return EXIT_OK if rows else EXIT_NO_LAYOUT


def _finite_runs(a: argparse.Namespace, rows: list[Any], dist: Any) -> list[Any]:
    """``--num-prompts``: a finite run of that many requests on each of the ``--top`` layouts."""
    if not a.num_prompts:
        return []
    from simcast.serving.request_level.finite import finite_run

    return [finite_run(c.result.config, a.num_prompts, lengths=dist, use_disk_cache=a.use_cache) for c in rows[: a.top]]


def _points(a: argparse.Namespace, rows: list[Any], space: Any, refined: list[Any]) -> Any:
    """Every searched point as a DataFrame, for ``--csv``, ``--json`` and ``--plot`` (else None)."""
    if not (a.csv or a.json or a.plot):  # pandas only for these (its import is a third of a warm run)
        return None
    from simcast.render.refine_tables import csv_columns
    from simcast.render.search_tables import points_dataframe
    from simcast.serving.search.layouts import meets

    return points_dataframe(rows, lambda r: meets(r, space), {r["parallel"]: csv_columns(r) for r in refined})


def _write_files(a: argparse.Namespace, pts: Any, meta: dict[str, str], title: str) -> None:
    """``--csv`` (with the run metadata per row) and ``--plot`` (the Pareto plot titled ``title``)."""
    if a.csv:
        table_ = pts.assign(**{k: v for k, v in meta.items() if k not in pts.columns})
        write_atomic(a.csv, "--csv", lambda tmp: table_.to_csv(tmp, index=False))
    if a.plot:
        write_pareto_plot(
            pts, a.plot, f"{title}, engine {a.runtime}", ttft_limit_ms=a.ttft_limit, tpot_limit_ms=a.tpot_limit
        )


def _launch(a: argparse.Namespace, rows: list[Any]) -> list[Any]:
    """``--emit``: (model label, launch lines) of each of the ``--top`` layouts."""
    if not a.emit:
        return []
    from simcast.render.launch import launch_lines
    from simcast.serving.search.layouts import model_label

    return [
        (model_label(c.result.config), launch_lines(c.result.config, a.emit, c.result.concurrency, a.router))
        for c in rows[: a.top]
    ]


def _emit_json(
    a: argparse.Namespace,
    pts: Any,
    meta: dict[str, str],
    rejected: list[Any],
    refined: list[Any],
    finite: list[Any],
    launch: list[Any],
    uncertainty: dict[str, Any],
) -> None:
    """``--json``: the points, the rejected layouts, what ``--refine-top``/``--num-prompts``/``--emit``
    added, and the prediction intervals (``uncertainty``)."""
    out: dict[str, Any] = {
        "run": meta,
        "rows": pts.to_dict(orient="records"),
        "rejected": [{"parallel": r.parallel, "reason": r.reason} for r in rejected],
    }
    if a.refine_top:
        out["refined"] = refined
    if finite:
        out["finite_runs"] = [finite_row(f) for f in finite]
    if a.emit:
        from simcast.render.launch import launch_dict

        out["launch"] = [{"parallel": lab, **launch_dict(ll)} for lab, ll in launch]
    if uncertainty:
        out["uncertainty"] = uncertainty
    emit_json(out, null_reason=NULL_ROWS)


def _header(a: argparse.Namespace, base: Any, space: Any, workload: Any, lim: list[str]) -> str:
    """The text table's first line: the model, devices, workload, searched sizes and limits."""
    model, device = base.model, base.device
    return (
        f"simcast optimize: {model.name} on {a.num_devices} x {device.name} ({device.links.devices_per_node} per "
        f"node), {workload_label(workload)}, tp {list(space.tp_sizes)} x pp {list(space.pp_sizes)}"
        + (
            (
                f" x ep {list(space.ep_sizes)}, MoE experts per replica (MoE-DP = DP)"
                if space.moe_replicas
                else f" x ep {list(space.ep_sizes)} x moe_dp {list(space.moe_dp_sizes)}"
            )
            if model.moe is not None
            else ""
        )
        + (f", limits {', '.join(lim)}" if lim else "")
        + "; ranked by token/s/device"
    )
