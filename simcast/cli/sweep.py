"""CLI wiring shared by sweeps: ``--workers``, ``--ray`` and ``optimize --refine-top`` (edge module)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from simcast.api.options import Flag, opt
from simcast.api.search_inputs import SearchOptions
from simcast.cli.option_flags import add_option_flags
from simcast.core.errors import require
from simcast.inputs.limits import MAX_BENCH_PROMPTS, MAX_BENCH_TOKENS


@dataclass(frozen=True, kw_only=True)
class SweepFlags:
    """Where a sweep's tasks run (``--ray`` is :class:`SearchOptions`' ``ray_address``) and ``optimize
    --refine-top``'s request-level re-check."""

    workers: int | None = opt(
        None,
        "local worker processes (None: auto, a pool only when the work outweighs starting it)",
        flag=Flag(
            names=("--workers",),
            help="local worker processes for the sweep [default auto: a pool of up to one per CPU only when the "
            "estimated work outweighs starting it; 1: serial; <= 1024]",
            value_type="workers",
        ),
    )
    refine_top: int | None = opt(
        None,
        "layouts re-checked with the request-level simulator",
        flag=Flag(
            names=("--refine-top",),
            help="re-check the top K layouts with the request-level simulator: the highest request rate whose "
            "p90 TTFT meets --ttft-limit (and mean TPOT --tpot-limit), by bisection; needs --ttft-limit",
            value_type="refine_top",
            metavar="K",
        ),
    )
    refine_prompts: int | None = opt(
        None,
        "prompts per request-level run of --refine-top",
        flag=Flag(
            names=("--refine-prompts",),
            help="prompts per request-level run of --refine-top [default: 10 x the layout's steady-state "
            f"concurrency within 1000..20000 and the {MAX_BENCH_TOKENS:,}-token cap; <= {MAX_BENCH_PROMPTS}]",
            value_type="refine_prompts",
        ),
    )


def add_sweep_args(p: argparse.ArgumentParser, refine: bool = True) -> None:
    """``--workers`` / ``--ray`` (where the sweep's independent tasks run) and, with ``refine``,
    ``--refine-top`` / ``--refine-prompts``."""
    add_option_flags(p, SweepFlags, ("workers",))
    add_option_flags(p, SearchOptions, ("ray_address",))
    if refine:
        add_option_flags(p, SweepFlags, ("refine_top", "refine_prompts"))


def check_sweep_args(a: argparse.Namespace) -> None:
    """Flag combinations that cannot work, as one-line errors before any work starts."""
    if a.ray_address:
        from simcast.serving.search.parallel import import_ray

        require(a.workers is None, "--workers", a.workers, "not used with --ray (the cluster sets the parallelism)")
        import_ray(a.ray_address)  # missing extra: one line naming it
    if getattr(a, "refine_top", None) is not None:
        require(
            bool(a.ttft_limit),
            "--refine-top",
            a.refine_top,
            "needs --ttft-limit (the p90 TTFT limit the refined request rate must meet)",
        )
        n = a.refine_prompts or 0
        require(  # before the search, not after it (refine_task checks it again for the Python API)
            n * ((a.input_length or 0) + (a.output_length or 0)) <= MAX_BENCH_TOKENS,
            "--refine-prompts",
            n,
            f"x (ISL + OSL) tokens must be <= {MAX_BENCH_TOKENS:.0e} per run (bench-serve's bound)",
        )
    elif getattr(a, "refine_prompts", None) is not None:
        require(False, "--refine-prompts", a.refine_prompts, "only with --refine-top")


def run_refine(a: argparse.Namespace, rows: list) -> tuple[list, list[dict[str, Any]]]:
    """Refine the top ``--refine-top`` ranked layouts (one task each, on the sweep's backend).
    Returns (refinements, table rows)."""
    from simcast.render.refine_tables import refined_row
    from simcast.serving.search.parallel import choose_backend, pmap
    from simcast.serving.search.refine import refine_layout, refine_task

    top = rows[: a.refine_top]
    tasks = [
        refine_task(
            c.result.config,
            steady_tokens_per_s=c.result.tokens_per_s,
            ttft_limit_s=a.ttft_limit / 1e3,
            tpot_limit_s=a.tpot_limit / 1e3 if a.tpot_limit else math.inf,
            num_prompts=a.refine_prompts or 0,
            steady_concurrency=c.result.concurrency,
            use_disk_cache=a.use_cache,
        )
        for c in top
    ]
    backend = choose_backend(len(tasks), task_s=REFINE_TASK_S, workers=a.workers, ray_address=a.ray_address)
    refs = pmap(refine_layout, tasks, backend=backend, desc="refine")
    return refs, [refined_row(c, r) for c, r in zip(top, refs)]


REFINE_TASK_S = 2.0
"""A refinement's seconds, at least: 6-9 request-level runs of 500-2000 prompts; measured 1.8 s for
Llama-3.1-8B on one H100 (500 prompts) and 7.4 s for Llama-3.1-70B TP8 (2000 prompts) on the 2-core
development machine. Far above the pool's start-up, so two or more layouts go to the pool."""
