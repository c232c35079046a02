"""Chunked pipeline prefill of one prompt: its chunk plan and its idle TTFT on a layout.

A long prompt is prefilled in chunks; under PP the chunks flow through the stages as
microbatches, chunk ``k`` attending to the KV of the chunks before it (on the same stage), so
stage ``s`` may start chunk ``k`` once stage ``s - 1`` has finished it (plus the receiver-paid
send/recv) and stage ``s`` has finished chunk ``k - 1``; an engine's batch queue caps the chunks
in flight (:data:`simcast.engines.PP_PREFILL_RULES`). TTFT is when the last chunk leaves the last stage.

:func:`chunked_prefill_timeline` is the one entry point for other layers (the request-level
simulator uses it for a prompt's idle TTFT and per-chunk stage times).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from simcast.core.chunking import SGLANG_SMOOTH_FACTOR, ChunkedPrefill, chunk_plan
from simcast.core.specs import Batch, SimSpec
from simcast.engines import PP_PREFILL_RULES as RULES
from simcast.sim.simulate import Report, simulate, stage_costers
from simcast.sim.timeline import report_timeline


def stage_cost_of(spec: SimSpec, stage: int = 0, *, use_disk_cache: bool = True) -> Callable[[int, int], float]:
    """``cost_of(prefix_tokens, new_tokens) -> seconds``: stage ``stage``'s forward time of one
    prompt's chunk on ``spec``'s layout (compute incl. TP collectives; no PP recv).

    SGLang's dynamic chunking profiles PP rank 0 this way (fresh prefills, prefix 0).
    """
    _, costers, _, _ = stage_costers(spec, use_disk_cache=use_disk_cache)
    cost = costers[stage]
    return lambda prefix, n: sum(o.time_s * o.count for o in cost(Batch.prefill(1, n, prefix)))


def plan_chunks(
    spec: SimSpec,
    prompt_tokens: int,
    chunk_size: int,
    *,
    dynamic: bool = False,
    smooth_factor: float = SGLANG_SMOOTH_FACTOR,
    page_size: int = 1,
    use_disk_cache: bool = True,
) -> tuple[int, ...]:
    """:func:`simcast.core.chunking.chunk_plan` with stage 0 of ``spec``'s layout as the profiled step."""
    cost_of = stage_cost_of(spec, 0, use_disk_cache=use_disk_cache) if dynamic else None
    return chunk_plan(
        prompt_tokens, chunk_size, dynamic=dynamic, smooth_factor=smooth_factor, page_size=page_size, cost_of=cost_of
    )


def chunked_prefill_spec(
    spec: SimSpec, chunk_tokens: Sequence[int], *, engine: str | None = None, note: str = ""
) -> SimSpec:
    """``spec`` prefilling one prompt of ``sum(chunk_tokens)`` tokens in those chunks.

    ``engine`` (default ``spec.engine``) picks the overlap rule and the in-flight cap from
    :data:`~simcast.engines.PP_PREFILL_RULES`; no engine: chunks overlap, no cap. ``note`` says how the
    chunks were chosen (for the assumption record).
    """
    name = engine if engine is not None else spec.engine
    rule = RULES.get(name or "")
    cap = None if rule is None else rule.max_in_flight(spec.parallel.pp)
    tokens = tuple(int(t) for t in chunk_tokens)
    return replace(
        spec,
        batch=Batch.prefill(1, sum(tokens)),
        num_microbatches=len(tokens),
        chunked_prefill=ChunkedPrefill(
            tokens=tokens, max_in_flight=cap, engine_rule="" if rule is None else rule.engine, note=note
        ),
    )


@dataclass(frozen=True, kw_only=True)
class ChunkedPrefillTimeline:
    """One prompt's idle prefill on a layout.

    ``ttft_s``: when the last chunk leaves the last stage (s). ``spans_s[k][s]``: ``(start, end)``
    seconds stage ``s`` is held by chunk ``k`` (its incoming send/recv, then its compute);
    ``compute_s[k][s]``: the compute part. ``report``: the full :class:`~simcast.sim.simulate.Report`.
    """

    ttft_s: float
    chunk_tokens: tuple[int, ...]
    spans_s: tuple[tuple[tuple[float, float], ...], ...]
    compute_s: tuple[tuple[float, ...], ...]
    report: Report


def chunked_prefill_timeline(
    spec: SimSpec, chunk_sizes: Sequence[int], *, engine: str | None = None, use_disk_cache: bool = True
) -> ChunkedPrefillTimeline:
    """Idle TTFT and per-chunk, per-stage times of one prompt prefilled in ``chunk_sizes`` chunks
    on ``spec``'s layout (``spec.batch`` is replaced; ``spec.partition`` must be resolved)."""
    report = simulate(chunked_prefill_spec(spec, chunk_sizes, engine=engine), use_disk_cache=use_disk_cache)
    tl = report_timeline(report)
    m, p = len(chunk_sizes), report.spec.parallel.pp
    start = [[float("inf")] * p for _ in range(m)]
    end = [[0.0] * p for _ in range(m)]
    comp = [[0.0] * p for _ in range(m)]
    for ev in tl.events:
        if ev.resource != f"stage{ev.stage}":
            continue
        k, s = ev.microbatch, ev.stage
        start[k][s], end[k][s] = min(start[k][s], ev.start_s), max(end[k][s], ev.end_s)
        if ev.kind == "compute":
            comp[k][s] += ev.duration_s
    return ChunkedPrefillTimeline(
        ttft_s=report.latency_s,
        chunk_tokens=report.spec.chunked_prefill.tokens if report.spec.chunked_prefill else (),
        spans_s=tuple(tuple(zip(start[k], end[k])) for k in range(m)),
        compute_s=tuple(tuple(row) for row in comp),
        report=report,
    )
