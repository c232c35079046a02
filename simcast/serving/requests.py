"""Request-level serving simulator (the pure core of ``simcast bench-serve``; no I/O).

Arrivals as ``vllm bench serve`` makes them (gamma inter-arrival gaps with mean
``1/rate`` and shape ``burstiness``; rate ``inf`` sends all at t = 0; or a
trace), a router over DP replicas (round-robin or least-loaded), and per replica
the engine's scheduler: waiting and running queues, admission while
``max_num_seqs`` and the step's token budget allow and free KV blocks (of the
engine's block size) hold the new tokens, chunked prefill, and preemption by
recompute (the most recently admitted running request frees its blocks and goes
back to the head of the queue, as vLLM V1 does) when a decode needs a block and
none is free. Decode-first engines put running requests first in each step;
prefill-first engines (SGLang) run a prefill step whenever a prompt can be
admitted.

Step cost approximation (stated in every result): a step's decodes are one
group at their mean context (decode attention is linear in context, so FLOPs
and KV bytes are exact up to rounding of the context to ``CTX_ROUND`` tokens),
prompt chunks are grouped by (chunk, context) rounded likewise; with PP the
step's requests are split into ``pp`` microbatches in flight (decodes evenly,
each prompt chunk whole to the least-loaded microbatch) and the step costs the
period in which each microbatch advances once (``StepCoster.period_s``). Each
distinct rounded batch is simulated once.

Speculative decoding (the coster's ``verify_tokens`` = ``k + 1`` and ``draft_s``): a decode takes ``k + 1``
query tokens of the step (and of its token budget, and ``k + 1`` KV slots), the draft's passes are added
to the last stage, and a decoding request emits the **expected** ``1 + E`` tokens per step,
deterministically: the fraction is carried to its next step (no random acceptance draws), so the run
matches the steady state's mean and is reproducible.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from simcast.core.errors import require
from simcast.core.specs import Batch
from simcast.engines.sglang import SGLANG_RATIO
from simcast.serving.bench_result import BenchResult, RequestResult, Sample
from simcast.serving.request_gen import make_conversations, make_requests, requests_from_lengths
from simcast.serving.scheduler import Replica, Req, RequestSpec, blocks_for, form_step
from simcast.serving.step import StepCoster

CTX_ROUND = 64  # tokens: context rounding of the step-cost cache key
CHUNK_ROUND = 16  # tokens: prompt-chunk rounding of the step-cost cache key

__all__ = ["RequestSpec", "make_conversations", "make_requests", "requests_from_lengths", "simulate_requests"]


def _round(x: float, to: int) -> int:
    return max(0, int(round(x / to)) * to)


def simulate_requests(
    reqs: list[RequestSpec],
    coster: StepCoster,
    *,
    kv_tokens_per_replica: int,
    dp: int = 1,
    router: str = "round_robin",
    max_concurrency: int = 0,
    sample_every: int = 1,
    next_chunk: Callable[[int], int] | None = None,
) -> BenchResult:
    """Run ``reqs`` through ``dp`` replicas of the layout ``coster`` costs (see module docstring).

    ``max_concurrency`` (0: none) limits requests in flight across replicas, like the client's
    ``--max-concurrency``: a request is sent when it has arrived and a slot is free.
    """
    require(router in ("round_robin", "least_loaded"), "--router", router, "allowed: round_robin, least_loaded")
    pol = coster.policy
    blk = pol.kv_block_tokens
    m = coster.parallel.pp
    reps = [Replica(rid=i, kv_blocks=kv_tokens_per_replica // blk) for i in range(dp)]
    for rp in reps:
        rp.ratio = SGLANG_RATIO["init"] if pol.kv_admission == "reserve_ratio" else 0.0
    for r in reqs:
        need = blocks_for(r.input_len + r.output_len, blk)
        require(
            need <= reps[0].kv_blocks,
            "request length",
            r.input_len + r.output_len,
            f"needs {need} KV blocks of {blk} tokens; one replica's KV cache holds {reps[0].kv_blocks} blocks "
            f"({kv_tokens_per_replica} tokens) under engine {pol.name}'s memory rule",
        )
        require(
            pol.chunked_prefill or r.input_len - r.kv_ready_tokens <= pol.max_num_batched_tokens,
            "request input length",
            r.input_len,
            f"engine {pol.name} runs without chunked prefill and refuses a prompt longer than its "
            f"max_num_batched_tokens {pol.max_num_batched_tokens}; raise --max-num-batched-tokens",
        )
        require(
            not pol.max_model_len or r.input_len + r.output_len <= pol.max_model_len,
            "request length",
            r.input_len + r.output_len,
            f"longer than --max-model-len {pol.max_model_len}: the engine refuses it",
        )
    for i, r in enumerate(reqs):
        require(
            r.parent < i and (r.parent < 0 or r.prefix_len <= reqs[r.parent].input_len + reqs[r.parent].output_len),
            "request parent",
            r.parent,
            "must be an earlier request whose prompt + output holds the prefix",
        )
    all_q = [Req(idx=i, spec=r) for i, r in enumerate(reqs)]
    children: dict[int, list[Req]] = {}
    for q in all_q:
        if q.spec.parent >= 0:
            q.parent_req = all_q[q.spec.parent]
            children.setdefault(q.spec.parent, []).append(q)
    order = sorted((i for i in range(len(reqs)) if reqs[i].parent < 0), key=lambda i: reqs[i].arrival_s)
    pending = deque(all_q[i] for i in order)
    follow: list[tuple[float, int, Req]] = []  # (send time, idx, request): next turns, sent when the previous ends
    sticky: dict[int, Replica] = {}  # a conversation's turns go to the replica of its first (its cache is there)
    out: list[RequestResult | None] = [None] * len(reqs)
    itl_v: list[float] = []
    itl_w: list[int] = []
    samples: list[Sample] = []
    in_flight = 0
    rr = 0
    steps = 0
    step_end: list[float] = []
    step_tok: list[int] = []
    budget = pol.max_num_batched_tokens
    overlap = pol.overlap_cpu and pol.engine.schedules
    vt, tau = coster.verify_tokens, coster.tokens_per_step
    piece = next_chunk if next_chunk is not None and m > 1 else (lambda _prefix: budget)

    def prompt_cap(prefix: int) -> int:
        """A prompt's tokens in one step: its next ``m`` chunks, one per microbatch (dynamic chunking)."""
        got = 0
        for _ in range(m):
            got += piece(prefix + got)
        return got

    cap = prompt_cap if next_chunk is not None and m > 1 else None

    def next_send() -> float:
        a = pending[0].spec.arrival_s if pending else math.inf
        return min(a, follow[0][0]) if follow else a

    def route(now: float) -> None:
        nonlocal rr, in_flight
        while (pending or follow) and next_send() <= now and (not max_concurrency or in_flight < max_concurrency):
            if follow and (not pending or follow[0][0] <= pending[0].spec.arrival_s):
                t, _, q = heapq.heappop(follow)
            else:
                q = pending.popleft()
                t = q.spec.arrival_s
            # open loop: sent at its arrival (a step may be in flight: TTFT counts the wait); a client slot
            # freed by --max-concurrency: sent when this replica's clock reached it
            q.sent_s = max(now, t) if max_concurrency else t
            q.ready_s = q.sent_s  # the serving path is added to TTFT and E2E (see RequestResult)
            if q.parent_req is not None:
                rep = sticky[q.parent_req.idx]
            elif router == "round_robin":
                rep = reps[rr % dp]
                rr += 1
            else:
                rep = min(reps, key=lambda x: (len(x.running) + len(x.waiting), x.rid))
            sticky[q.idx] = rep
            if not rep.running and not rep.waiting:
                rep.clock = max(rep.clock, q.sent_s)
            rep.waiting.append(q)
            in_flight += 1

    while True:
        live = [r for r in reps if r.running or r.waiting]
        if not live:
            if not pending and not follow:
                break
            # all replicas idle: the next request goes out at its arrival, or, when the client's
            # --max-concurrency held it back, when the last request in flight finished (the latest clock)
            nxt = max(next_send(), max(rp.clock for rp in reps))
            for rp in reps:
                rp.clock = max(rp.clock, nxt)
            route(nxt)
            continue
        rep = min(live, key=lambda r: r.clock)
        route(rep.clock)
        # ---- form the step (prefill-first engines, SGLang: a prefill-only step whenever a prompt can start)
        # an overlap scheduler formed this step while the previous one ran: it sees requests ready by then
        cutoff = rep.step_start_s if overlap and rep.step_start_s > float("-inf") else rep.clock
        ready = bool(rep.waiting) and rep.waiting[0].ready_s <= cutoff  # FIFO by send time: the head is first
        decodes, chunks = form_step(
            rep,
            pol,
            blk,
            budget * m,
            pol.max_num_seqs * m,
            prefill_first=not pol.decode_first and ready,
            cutoff_s=cutoff,
            decode_tokens=vt,
            prompt_cap=cap,
        )
        if not pol.decode_first and not chunks:
            decodes, chunks = form_step(
                rep,
                pol,
                blk,
                budget * m,
                pol.max_num_seqs * m,
                prefill_first=False,
                cutoff_s=cutoff,
                decode_tokens=vt,
                prompt_cap=cap,
            )
        if not decodes and not chunks:  # idle until the next request is ready (or arrives)
            later = [rep.waiting[0].ready_s] if rep.waiting and rep.waiting[0].ready_s > cutoff else []
            if (pending or follow) and next_send() > rep.clock:
                later.append(next_send())
            require(
                bool(later),
                "request",
                rep.waiting[0].spec.input_len if rep.waiting else 0,
                "cannot be scheduled on an idle engine (internal check)",
            )
            rep.clock = max(rep.clock, min(later))
            rep.step_start_s = float("-inf")  # idle: the next step is formed at once
            continue
        rep.step_start_s = rep.clock
        # ---- cost it: the step's requests split into `per` microbatches in flight (decodes evenly; a
        # prompt's scheduled tokens in pieces of at most one microbatch's budget, consecutive pieces on
        # consecutive microbatches (a chunked pipeline: piece k+1 enters stage 0 while piece k runs on
        # stage 1), each piece to the microbatch with the fewest tokens so far)
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
        last_mb: dict[int, int] = {}  # request idx -> microbatch of its last piece
        earlier: dict[int, list[int]] = {}  # request idx -> microbatches of its earlier pieces
        for q, n, ctx in sorted(pieces, key=lambda c: (-c[1], c[2]) if m == 1 else (c[0].idx, c[2])):
            used = {last_mb.get(q.idx, -1)}
            i = min(range(per), key=lambda j: (j in used, load[j], j))
            mb_chunks[i].append((max(1, _round(n, CHUNK_ROUND) or n), _round(ctx, CTX_ROUND)))
            load[i] += n
            if q.idx in last_mb:
                earlier.setdefault(q.idx, []).append(last_mb[q.idx])
            last_mb[q.idx] = i
        batches: list[Batch] = []
        mb_batch: list[Batch | None] = []
        for i in range(per):
            q_l = [vt] if dec_n[i] else []
            c_l = [dec_ctx] if dec_n[i] else []
            n_l = [dec_n[i]] if dec_n[i] else []
            for ql, cl in sorted(mb_chunks[i]):
                q_l.append(ql)
                c_l.append(cl)
                n_l.append(1)
            bt = Batch(query_lens=tuple(q_l), context_lens=tuple(c_l), counts=tuple(n_l)) if q_l else None
            mb_batch.append(bt)
            if bt is not None:
                batches.append(bt)
        drafting = [dec_n[i] for i in range(per) if mb_batch[i] is not None]
        dt = coster.period_s(batches, drafting, dec_ctx)
        start = rep.clock
        # with PP, a token leaves the pipeline no earlier than its own microbatch's pass through every stage
        # (the period averages microbatches; a request's own trip can be longer): per-request stamps
        own: list[float] = [dt] * per
        first0: list[float] = [0.0] * per
        if m > 1:
            for i, bt in enumerate(mb_batch):
                if bt is not None:
                    st = coster.with_draft(coster.stage_times_s(bt), dec_n[i], dec_ctx)
                    cpu = pol.step_cpu_s(bt.num_requests)
                    gpu = sum(st) + coster.return_s(bt)
                    own[i] = max(dt, max(cpu, gpu) if pol.overlap_cpu else cpu + gpu)
                    first0[i] = st[0] if st else 0.0
        dec_mb = [i for i in range(per) for _ in range(dec_n[i])]
        steps += 1
        step_end.append(rep.clock + dt)
        rep.clock += dt
        now = rep.clock
        # ---- apply it
        if decodes:
            itl_v.append(dt)
            itl_w.append(len(decodes))
        emitted = sum(1 for q, n in chunks if n == q.prefill_left)
        for k, q in enumerate(decodes):
            got = 1
            if tau > 1.0:  # speculative: the expected 1 + E tokens, the fraction carried to the next step
                credit = q.spec_credit + tau
                got = max(1, min(int(credit), q.spec.output_len - q.generated))
                q.spec_credit = credit - int(credit)
            emitted += got
            q.generated += got
            q.computed += got
            q.token_s = start + own[dec_mb[k]] if m > 1 else now
        step_tok.append(emitted)
        for q, n in chunks:
            q.computed += n  # its blocks were reserved when the step was formed
            if q.prefill_left == 0:  # prompt done: the step samples the next token
                q.prefilling = False
                q.generated += 1
                t = now
                if m > 1:  # its earlier pieces on stage 0, then the last piece's whole pass
                    t = start + max(dt, sum(first0[i] for i in earlier.get(q.idx, ())) + own[last_mb[q.idx]])
                q.token_s = t
                if q.first_token_s < 0:
                    q.first_token_s = t
        for q in [q for q in rep.running if q.generated >= q.spec.output_len and not q.prefilling]:
            rep.running.remove(q)
            rep.release(q, blk)
            in_flight -= 1
            fe = pol.front_end_time_s(q.spec.input_len)
            out[q.idx] = RequestResult(
                arrival_s=q.sent_s,
                input_len=q.spec.input_len,
                output_len=q.generated,
                ttft_s=q.first_token_s - q.sent_s + fe,
                e2e_s=max(now, q.token_s) - q.sent_s + fe,
                front_end_s=fe,
                admitted_s=q.admitted_s,
                preemptions=q.preemptions,
                replica=rep.rid,
                cached_tokens=q.cached_tokens,
            )
            for c in children.pop(q.idx, ()):  # the conversation's next turn: sent when the client has this one
                heapq.heappush(follow, (max(now, q.token_s) + fe, c.idx, c))
        if steps % sample_every == 0:
            samples.append(
                Sample(
                    time_s=now,
                    replica=rep.rid,
                    running=len(rep.running),
                    waiting=len(rep.waiting),
                    kv_used_blocks=rep.used_blocks,
                    kv_total_blocks=rep.kv_blocks,
                )
            )
    res = tuple(r for r in out if r is not None)
    duration = max((r.arrival_s + r.e2e_s for r in res), default=0.0)
    return BenchResult(
        requests=res,
        itl_s=np.asarray(itl_v),
        itl_weight=np.asarray(itl_w, dtype=np.int64),
        samples=tuple(samples),
        duration_s=duration,
        steps=steps,
        distinct_batches=len(coster._memo),
        step_end_s=np.asarray(step_end),
        step_tokens=np.asarray(step_tok, dtype=np.int64),
        prefix_hit_tokens=sum(rp.hit_tokens for rp in reps),
        prefix_query_tokens=sum(rp.query_tokens for rp in reps),
    )
