"""Request-level serving simulator (the pure core of ``simcast bench-serve``; no I/O).

Arrivals as ``vllm bench serve`` makes them (gamma inter-arrival gaps with mean
``1/rate`` and shape ``burstiness``; rate ``inf`` sends all at t = 0; or a
trace), a router over DP replicas (:mod:`simcast.serving.request_level.routers`; every request, a
conversation's turns too, goes where the router sends it), and per replica
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
from dataclasses import dataclass, field

import numpy as np

from simcast.core.errors import require
from simcast.engines.sglang import SGLANG_RATIO
from simcast.serving.request_level.bench_result import BenchResult, RequestResult, Sample
from simcast.serving.request_level.intake import hold_prompts, receive_cutoff, stream_gaps
from simcast.serving.request_level.request_gen import make_conversations, make_requests, requests_from_lengths
from simcast.serving.request_level.routers import Router, RouterSettings, default_settings, make_router
from simcast.serving.request_level.scheduler import Replica, Req, RequestSpec, blocks_for, form_step
from simcast.serving.request_level.steps import StepCost, split_microbatches, step_cost
from simcast.serving.step import StepCoster

__all__ = ["RequestSpec", "make_conversations", "make_requests", "requests_from_lengths", "simulate_requests"]


@dataclass(kw_only=True)
class ReplayLoop:
    """The run's state passed between the loop's phases: the settings (fixed for the run) and what the
    phases change (the queues of requests not yet sent, the replicas, the records). Times in s."""

    coster: StepCoster
    reps: list[Replica]
    router: Router
    max_concurrency: int
    sample_every: int
    pending: deque[Req]
    follow: list[tuple[float, int, Req]]  # (send time, idx, request): next turns, sent when the previous ends
    children: dict[int, list[Req]]
    piece: Callable[[int], int]  # a prompt's next chunk (tokens) after a prefix of that many tokens
    cap: Callable[[int], int] | None  # a prompt's tokens in one step (dynamic chunking), None: the budget
    out: list[RequestResult | None]
    itl_v: list[float] = field(default_factory=list)
    itl_w: list[int] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    step_end: list[float] = field(default_factory=list)
    step_tok: list[int] = field(default_factory=list)
    in_flight: int = 0
    steps: int = 0
    front_free: list[float] = field(default_factory=list)  # when each serial front-end process is free (s)

    @property
    def m(self) -> int:
        return self.coster.parallel.pp

    @property
    def blk(self) -> int:
        return self.coster.policy.kv_block_tokens

    def has_unsent(self) -> bool:
        return bool(self.pending or self.follow)

    def next_send(self) -> float:
        a = self.pending[0].spec.arrival_s if self.pending else math.inf
        return min(a, self.follow[0][0]) if self.follow else a


def check_requests(reqs: list[RequestSpec], coster: StepCoster, kv_tokens_per_replica: int) -> None:
    """Refuse a request the engine could never run (too long for one replica's KV, its budget, its max length)
    and a conversation turn whose parent is not an earlier request holding its prefix."""
    pol = coster.policy
    blk = pol.kv_block_tokens
    kv_blocks = kv_tokens_per_replica // blk
    for r in reqs:
        need = blocks_for(r.input_len + r.output_len, blk)
        require(
            need <= kv_blocks,
            "request length",
            r.input_len + r.output_len,
            f"needs {need} KV blocks of {blk} tokens; one replica's KV cache holds {kv_blocks} blocks "
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


def arrival_queue(reqs: list[RequestSpec]) -> tuple[deque[Req], dict[int, list[Req]]]:
    """Arrivals: the first requests of each conversation by send time, and each request's next turns."""
    all_q = [Req(idx=i, spec=r) for i, r in enumerate(reqs)]
    children: dict[int, list[Req]] = {}
    for q in all_q:
        if q.spec.parent >= 0:
            q.parent_req = all_q[q.spec.parent]
            children.setdefault(q.spec.parent, []).append(q)
    order = sorted((i for i in range(len(reqs)) if reqs[i].parent < 0), key=lambda i: reqs[i].arrival_s)
    return deque(all_q[i] for i in order), children


def chunk_rules(
    coster: StepCoster, next_chunk: Callable[[int], int] | None
) -> tuple[Callable[[int], int], Callable[[int], int] | None]:
    """(the next piece of a prompt after a prefix, a prompt's tokens in one step or None): dynamic chunking
    at PP > 1 (``next_chunk``), else the token budget."""
    m, budget = coster.parallel.pp, coster.policy.max_num_batched_tokens
    piece = next_chunk if next_chunk is not None and m > 1 else (lambda _prefix: budget)

    def prompt_cap(prefix: int) -> int:
        """A prompt's tokens in one step: its next ``m`` chunks, one per microbatch (dynamic chunking)."""
        got = 0
        for _ in range(m):
            got += piece(prefix + got)
        return got

    return piece, prompt_cap if next_chunk is not None and m > 1 else None


def route_arrivals(st: ReplayLoop, now: float) -> None:
    """Arrivals: send every request due by ``now`` (client slots allowing) to a replica's waiting queue."""
    reps = st.reps
    while st.has_unsent() and st.next_send() <= now and (not st.max_concurrency or st.in_flight < st.max_concurrency):
        if st.follow and (not st.pending or st.follow[0][0] <= st.pending[0].spec.arrival_s):
            t, _, q = heapq.heappop(st.follow)
        else:
            q = st.pending.popleft()
            t = q.spec.arrival_s
        # open loop: sent at its arrival (a step may be in flight: TTFT counts the wait); a client slot
        # freed by --max-concurrency: sent when this replica's clock reached it
        q.sent_s = max(now, t) if st.max_concurrency else t
        q.ready_s = q.sent_s  # the serving path is added to TTFT and E2E (see RequestResult)
        if st.front_free:  # serial front end: the request waits for a free process (FIFO by send time)
            i = min(range(len(st.front_free)), key=st.front_free.__getitem__)
            q.ready_s = max(q.sent_s, st.front_free[i])
            st.front_free[i] = q.ready_s + st.coster.policy.front_end_time_s(q.spec.input_len)
        rep = st.router.choose(q, reps, st.blk)
        q.rid = rep.rid
        if not rep.running and not rep.waiting:
            rep.clock = max(rep.clock, q.sent_s)
        rep.waiting.append(q)
        st.in_flight += 1


def admit_step(st: ReplayLoop, rep: Replica) -> tuple[list[Req], list[tuple[Req, int]]] | None:
    """Admission and step formation on ``rep`` (prefill-first engines, SGLang: a prefill-only step whenever a
    prompt can start); None when it idles until the next request is ready (its clock moved there)."""
    pol, m = st.coster.policy, st.m
    budget = pol.max_num_batched_tokens
    # an overlap scheduler formed this step while the previous one ran: it sees requests ready by then
    overlap = pol.overlap_cpu and pol.engine.schedules
    cutoff = receive_cutoff(rep, pol, rep.step_start_s if overlap and rep.step_start_s > float("-inf") else rep.clock)
    if hold_prompts(rep, pol, cutoff, budget * m):
        cutoff = float("-inf")
    ready = bool(rep.waiting) and rep.waiting[0].ready_s <= cutoff  # FIFO by send time: the head is first

    def form(prefill_first: bool) -> tuple[list[Req], list[tuple[Req, int]]]:
        return form_step(
            rep,
            pol,
            st.blk,
            budget * m,
            pol.max_num_seqs * m,
            prefill_first=prefill_first,
            cutoff_s=cutoff,
            decode_tokens=st.coster.verify_tokens,
            prompt_cap=st.cap,
        )

    decodes, chunks = form(not pol.decode_first and ready)
    if not pol.decode_first and not chunks:
        decodes, chunks = form(False)
    if decodes or chunks:
        rep.step_start_s = rep.clock
        rep.decode_only = not chunks
        return decodes, chunks
    later = [rep.waiting[0].ready_s] if rep.waiting and rep.waiting[0].ready_s > cutoff else []
    if st.has_unsent() and st.next_send() > rep.clock:
        later.append(st.next_send())
    require(
        bool(later),
        "request",
        rep.waiting[0].spec.input_len if rep.waiting else 0,
        "cannot be scheduled on an idle engine (internal check)",
    )
    rep.clock = max(rep.clock, min(later))
    rep.step_start_s = float("-inf")  # idle: the next step is formed at once
    return None


def advance_step(st: ReplayLoop, rep: Replica, decodes: list[Req], chunks: list[tuple[Req, int]], c: StepCost) -> None:
    """The step runs: the replica's clock moves by its period, decodes emit their tokens (speculative: the
    expected ``1 + E``, the fraction carried to the next step; exactly 1 without), finished prompts sample
    their first token."""
    m, tau = st.m, st.coster.tokens_per_step
    st.steps += 1
    st.step_end.append(rep.clock + c.dt)
    rep.clock += c.dt
    now = rep.clock
    every = st.coster.policy.stream_every
    if decodes and every == 1:
        st.itl_v.append(c.dt)
        st.itl_w.append(len(decodes))
    emitted = sum(1 for q, n in chunks if n == q.prefill_left)
    for k, q in enumerate(decodes):
        credit = q.spec_credit + tau
        got = max(1, min(int(credit), q.spec.output_len - q.generated))
        q.spec_credit = credit - int(credit)
        emitted += got
        q.generated += got
        q.computed += got
        q.decode_steps += 1
        q.token_s = c.start + c.own[c.dec_mb[k]] if m > 1 else now
        gap = stream_gaps(q, got, q.token_s, st.coster.policy, every) if every > 1 else None
        if gap is not None:
            st.itl_v.append(gap)
            st.itl_w.append(1)
    st.step_tok.append(emitted)
    for q, n in chunks:
        q.computed += n  # its blocks were reserved when the step was formed
        if q.prefill_left == 0:  # prompt done: the step samples the next token
            q.prefilling = False
            q.generated += 1
            t = now
            if m > 1:  # its earlier pieces on stage 0, then the last piece's whole pass
                t = c.start + max(c.dt, sum(c.first0[i] for i in c.earlier.get(q.idx, ())) + c.own[c.last_mb[q.idx]])
            q.token_s = t
            if q.first_token_s < 0:
                q.first_token_s = t
            q.sent_token_s = t


def complete_step(st: ReplayLoop, rep: Replica) -> None:
    """Completion: finished requests leave ``rep`` (their blocks freed, their results recorded, their
    conversation's next turn queued), then the step's queue and KV sample."""
    pol, blk, now = st.coster.policy, st.blk, rep.clock
    for q in [q for q in rep.running if q.generated >= q.spec.output_len and not q.prefilling]:
        rep.running.remove(q)
        rep.release(q, blk)
        st.in_flight -= 1
        fe = pol.front_end_time_s(q.spec.input_len)
        st.out[q.idx] = RequestResult(
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
        for ch in st.children.pop(q.idx, ()):  # the conversation's next turn: sent when the client has this one
            heapq.heappush(st.follow, (max(now, q.token_s) + fe, ch.idx, ch))
    if st.steps % st.sample_every == 0:
        st.samples.append(
            Sample(
                time_s=now,
                replica=rep.rid,
                running=len(rep.running),
                waiting=len(rep.waiting),
                kv_used_blocks=rep.used_blocks,
                kv_total_blocks=rep.kv_blocks,
            )
        )


def loop_result(st: ReplayLoop) -> BenchResult:
    """The run's records."""
    res = tuple(r for r in st.out if r is not None)
    duration = max((r.arrival_s + r.e2e_s for r in res), default=0.0)
    return BenchResult(
        requests=res,
        itl_s=np.asarray(st.itl_v),
        itl_weight=np.asarray(st.itl_w, dtype=np.int64),
        samples=tuple(st.samples),
        duration_s=duration,
        steps=st.steps,
        distinct_batches=len(st.coster._memo),
        step_end_s=np.asarray(st.step_end),
        step_tokens=np.asarray(st.step_tok, dtype=np.int64),
        prefix_hit_tokens=sum(rp.hit_tokens for rp in st.reps),
        prefix_query_tokens=sum(rp.query_tokens for rp in st.reps),
    )


def simulate_requests(
    reqs: list[RequestSpec],
    coster: StepCoster,
    *,
    kv_tokens_per_replica: int,
    dp: int = 1,
    router: str | RouterSettings = "round_robin",
    max_concurrency: int = 0,
    sample_every: int = 1,
    next_chunk: Callable[[int], int] | None = None,
    front_end_processes: int = 0,
) -> BenchResult:
    """Run ``reqs`` through ``dp`` replicas of the layout ``coster`` costs (see module docstring).

    ``router``: a policy name at its defaults or its settings (:mod:`simcast.serving.request_level.routers`).
    ``max_concurrency`` (0: none) limits requests in flight across replicas, like the client's
    ``--max-concurrency``: a request is sent when it has arrived and a slot is free.
    ``front_end_processes`` (0: none, the serving path a latency only): processes that each run one
    request's serving path (:meth:`EnginePolicy.front_end_time_s`) at a time; a request reaches the
    engine when the first one free has handled it (FIFO), so a burst waits in the front end's queue.
    """
    settings = default_settings(router) if isinstance(router, str) else router
    check_requests(reqs, coster, kv_tokens_per_replica)
    pol = coster.policy
    reps = [Replica(rid=i, kv_blocks=kv_tokens_per_replica // pol.kv_block_tokens) for i in range(dp)]
    for rp in reps:
        rp.ratio = SGLANG_RATIO["init"] if pol.kv_admission == "reserve_ratio" else 0.0
    pending, children = arrival_queue(reqs)
    piece, cap = chunk_rules(coster, next_chunk)
    st = ReplayLoop(
        coster=coster,
        reps=reps,
        router=make_router(settings),
        max_concurrency=max_concurrency,
        sample_every=sample_every,
        pending=pending,
        follow=[],
        children=children,
        piece=piece,
        cap=cap,
        out=[None] * len(reqs),
        front_free=[-math.inf] * front_end_processes,
    )
    while True:
        live = [r for r in reps if r.running or r.waiting]
        if not live:
            if not st.has_unsent():
                break
            # all replicas idle: the next request goes out at its arrival, or, when the client's
            # --max-concurrency held it back, when the last request in flight finished (the latest clock)
            nxt = max(st.next_send(), max(rp.clock for rp in reps))
            for rp in reps:
                rp.clock = max(rp.clock, nxt)
            route_arrivals(st, nxt)
            continue
        rep = min(live, key=lambda r: r.clock)
        route_arrivals(st, rep.clock)
        step = admit_step(st, rep)
        if step is None:
            continue
        decodes, chunks = step
        cost = step_cost(coster, rep.clock, split_microbatches(coster, piece, decodes, chunks))
        advance_step(st, rep, decodes, chunks, cost)
        complete_step(st, rep)
    return loop_result(st)
