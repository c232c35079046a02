"""One step of the request-level simulator (:mod:`simcast.serving.request_level.simulate`): its requests split into the
microbatches in flight, and its cost (the period, each microbatch's own trip with PP). Times in s, tokens.

Step cost approximation: a step's decodes are one group at their mean context rounded to ``CTX_ROUND``
tokens, prompt chunks grouped by (chunk, context) rounded to ``CHUNK_ROUND`` / ``CTX_ROUND``; each distinct
rounded batch is simulated once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simcast.core.specs import Batch
from simcast.serving.request_level.scheduler import Req
from simcast.serving.step import StepCoster

CTX_ROUND = 64  # tokens: context rounding of the step-cost cache key
CHUNK_ROUND = 16  # tokens: prompt-chunk rounding of the step-cost cache key


def _round(x: float, to: int) -> int:
    return max(0, int(round(x / to)) * to)


@dataclass(frozen=True, kw_only=True)
class Microbatches:
    """A step's requests split into the microbatches in flight: each one's batch (None: empty), its decodes,
    the decodes' rounded mean context (tokens), and where each prompt's pieces went."""

    batches: list[Batch | None]
    dec_n: list[int]
    dec_ctx: int
    last_mb: dict[int, int]  # request idx -> microbatch of its last piece
    earlier: dict[int, list[int]]  # request idx -> microbatches of its earlier pieces


def split_microbatches(
    coster: StepCoster, piece: Callable[[int], int], decodes: list[Req], chunks: list[tuple[Req, int]]
) -> Microbatches:
    """Step formation: the step's requests split into ``per`` microbatches in flight (decodes evenly; a prompt's
    scheduled tokens in pieces of at most one microbatch's budget, consecutive pieces on consecutive
    microbatches (a chunked pipeline: piece k+1 enters stage 0 while piece k runs on stage 1), each piece to
    the microbatch with the fewest tokens so far)."""
    m, vt = coster.parallel.pp, coster.verify_tokens
    pieces: list[tuple[Req, int, int]] = []  # (request, tokens, prefix before the piece)
    for q, n in chunks:
        done = 0
        while done < n:
            take = min(piece(q.computed + done), n - done) if m > 1 else n - done
            pieces.append((q, take, q.computed + done))
            done += take
    per = max(1, min(m, len(decodes) + len(pieces)))
    dec_ctx = max(1, _round(sum(q.computed for q in decodes) / len(decodes), CTX_ROUND)) if decodes else 0
    dec_n = [len(decodes) // per + (1 if i < len(decodes) % per else 0) for i in range(per)]
    load = list(dec_n)
    mb_chunks: list[list[tuple[int, int]]] = [[] for _ in range(per)]
    last_mb: dict[int, int] = {}
    earlier: dict[int, list[int]] = {}
    for q, n, ctx in sorted(pieces, key=lambda c: (-c[1], c[2]) if m == 1 else (c[0].idx, c[2])):
        used = {last_mb.get(q.idx, -1)}
        i = min(range(per), key=lambda j: (j in used, load[j], j))
        mb_chunks[i].append((max(1, _round(n, CHUNK_ROUND) or n), _round(ctx, CTX_ROUND)))
        load[i] += n
        if q.idx in last_mb:
            earlier.setdefault(q.idx, []).append(last_mb[q.idx])
        last_mb[q.idx] = i
    mb_batch: list[Batch | None] = []
    for i in range(per):
        q_l = [vt] if dec_n[i] else []
        c_l = [dec_ctx] if dec_n[i] else []
        n_l = [dec_n[i]] if dec_n[i] else []
        for ql, cl in sorted(mb_chunks[i]):
            q_l.append(ql)
            c_l.append(cl)
            n_l.append(1)
        mb_batch.append(Batch(query_lens=tuple(q_l), context_lens=tuple(c_l), counts=tuple(n_l)) if q_l else None)
    return Microbatches(batches=mb_batch, dec_n=dec_n, dec_ctx=dec_ctx, last_mb=last_mb, earlier=earlier)


@dataclass(frozen=True, kw_only=True)
class StepCost:
    """One step's cost: its period ``dt`` from ``start``, each microbatch's own trip and first-stage time
    (PP), the microbatch of each decode, and where each prompt's pieces went. Times in s."""

    start: float
    dt: float
    own: list[float]
    first0: list[float]
    dec_mb: list[int]
    last_mb: dict[int, int]  # request idx -> microbatch of its last piece
    earlier: dict[int, list[int]]  # request idx -> microbatches of its earlier pieces


def step_cost(coster: StepCoster, start_s: float, mb: Microbatches) -> StepCost:
    """Step cost: the period in which each microbatch advances once (``StepCoster.period_s``) and, with PP,
    each microbatch's own trip (a token leaves the pipeline no earlier than its own microbatch's pass through
    every stage: the period averages microbatches, a request's own trip can be longer)."""
    pol, m = coster.policy, coster.parallel.pp
    per, dec_n, dec_ctx = len(mb.batches), mb.dec_n, mb.dec_ctx
    batches = [b for b in mb.batches if b is not None]
    drafting = [dec_n[i] for i in range(per) if mb.batches[i] is not None]
    dt = coster.period_s(batches, drafting, dec_ctx)
    own: list[float] = [dt] * per
    first0: list[float] = [0.0] * per
    if m > 1:
        for i, bt in enumerate(mb.batches):
            if bt is not None:
                stage = coster.with_draft(coster.stage_times_s(bt), dec_n[i], dec_ctx)
                cpu = pol.step_cpu_s(bt.num_requests)
                gpu = sum(stage) + coster.return_s(bt)
                own[i] = max(dt, max(cpu, gpu) if pol.overlap_cpu else cpu + gpu)
                first0[i] = stage[0] if stage else 0.0
    return StepCost(
        start=start_s,
        dt=dt,
        own=own,
        first0=first0,
        dec_mb=[i for i in range(per) for _ in range(dec_n[i])],
        last_mb=mb.last_mb,
        earlier=mb.earlier,
    )
