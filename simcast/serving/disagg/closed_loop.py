"""The two pools of a disaggregated deployment run together under a client's ``--max-concurrency``.

Open loop (a rate, or a burst with no cap), the prefill pool's run does not depend on the decode pool's, so
:mod:`simcast.serving.disagg.requests` runs one pool after the other. A client with ``--max-concurrency C``
(``vllm bench serve``'s semaphore, ``vllm/benchmarks/serve.py``: a request is sent when one of the ``C``
in flight has *finished*, i.e. when its last token left the **decode** pool) couples them: the prefill pool's
arrivals depend on the decode pool's completions. Here both pools' replicas share one clock: the loop always
steps the replica, of either pool, whose clock is earliest (the request-level simulator's own phases,
:mod:`simcast.serving.request_level.simulate`), a request that finishes its prefill is handed to the decode
pool at ``first token + exposed KV transfer``, and a request that finishes in the decode pool frees its
client slot at that moment, when the next request is sent to the prefill pool.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from simcast.core.errors import require
from simcast.engines.sglang import SGLANG_RATIO
from simcast.serving.request_level.bench_result import BenchResult, RequestResult
from simcast.serving.request_level.routers import RouterSettings, make_router
from simcast.serving.request_level.scheduler import Replica, Req, RequestSpec
from simcast.serving.request_level.simulate import (
    ReplayLoop,
    admit_step,
    advance_step,
    arrival_queue,
    check_requests,
    chunk_rules,
    complete_step,
    loop_result,
    route_arrivals,
)
from simcast.serving.request_level.steps import split_microbatches, step_cost
from simcast.serving.step import StepCoster

__all__ = ["Handoff", "simulate_coupled"]

Handoff = Callable[[int, RequestResult], RequestSpec]
"""A request's index and its prefill-pool result -> its decode-pool request (sent when its KV has arrived)."""


def _loop(
    reqs: list[RequestSpec], coster: StepCoster, kv_tokens: int, dp: int, cap: int, router: RouterSettings
) -> ReplayLoop:
    """One pool's loop state (``reqs``: its requests known at the start; none for the decode pool), its DP ranks
    chosen by ``router``."""
    pol = coster.policy
    reps = [Replica(rid=i, kv_blocks=kv_tokens // pol.kv_block_tokens) for i in range(dp)]
    for rp in reps:
        rp.ratio = SGLANG_RATIO["init"] if pol.kv_admission == "reserve_ratio" else 0.0
    pending, children = arrival_queue(reqs)
    piece, chunk_cap = chunk_rules(coster, None)
    return ReplayLoop(
        coster=coster,
        reps=reps,
        router=make_router(router),
        max_concurrency=cap,
        sample_every=1,
        pending=pending,
        follow=[],
        children=children,
        piece=piece,
        cap=chunk_cap,
        out=[None] * len(reqs),
    )


def _finishing(rep: Replica) -> list[Req]:
    """The requests of ``rep`` that the completion phase is about to retire."""
    return [q for q in rep.running if q.generated >= q.spec.output_len and not q.prefilling]


def _step(st: ReplayLoop, rep: Replica) -> list[Req] | None:
    """One step of ``rep`` (admission, cost, advance, completion); the requests it retired (None: it idled)."""
    step = admit_step(st, rep)
    if step is None:
        return None
    decodes, chunks = step
    cost = step_cost(st.coster, rep.clock, split_microbatches(st.coster, st.piece, decodes, chunks))
    advance_step(st, rep, decodes, chunks, cost)
    done = _finishing(rep)
    complete_step(st, rep)
    return done


def _idle_send(sp: ReplayLoop, sd: ReplayLoop) -> bool:
    """Every replica idle: send the earliest request either pool may send now; False when none is left."""
    sends = []
    if sp.has_unsent() and sp.in_flight < sp.max_concurrency:
        sends.append((max(sp.next_send(), max(r.clock for r in sp.reps)), 0))
    if sd.has_unsent():
        sends.append((sd.next_send(), 1))
    if not sends:
        require(not sp.has_unsent(), "--max-concurrency", sp.max_concurrency, "no request in flight (internal check)")
        return False
    t, which = min(sends)
    st = sp if which == 0 else sd
    for rp in st.reps:
        rp.clock = max(rp.clock, t)
    route_arrivals(st, t)
    return True


def simulate_coupled(
    reqs: list[RequestSpec],
    costers: tuple[StepCoster, StepCoster],
    kv_tokens: tuple[int, int],
    ranks: tuple[int, int],
    max_concurrency: int,
    handoff: Handoff,
    routers: tuple[RouterSettings, RouterSettings],
) -> tuple[BenchResult, BenchResult]:
    """Run ``reqs`` (one output token each) through the prefill pool and their ``handoff`` requests through the
    decode pool on one clock, at most ``max_concurrency`` requests in flight from send to last token (module
    docstring). ``costers``, ``kv_tokens`` (per DP rank), ``ranks`` (DP ranks) and ``routers``: (prefill, decode).
    Returns each pool's run, requests in the order given."""
    require(max_concurrency >= 1, "--max-concurrency", max_concurrency, "must be >= 1")
    check_requests(reqs, costers[0], kv_tokens[0])
    sp = _loop(reqs, costers[0], kv_tokens[0], ranks[0], max_concurrency, routers[0])
    sd = _loop([], costers[1], kv_tokens[1], ranks[1], 0, routers[1])
    sd.out = [None] * len(reqs)
    while True:
        live = [(r.clock, 0, r.rid) for r in sp.reps if r.running or r.waiting]
        live += [(r.clock, 1, r.rid) for r in sd.reps if r.running or r.waiting]
        if not live:
            if _idle_send(sp, sd):
                continue
            break
        now = min(live)[0]
        route_arrivals(sp, now)
        route_arrivals(sd, now)
        live = [(r.clock, 0, r.rid) for r in sp.reps if r.running or r.waiting]
        live += [(r.clock, 1, r.rid) for r in sd.reps if r.running or r.waiting]
        _, which, rid = min(live)
        st = sp if which == 0 else sd
        done = _step(st, st.reps[rid])
        for q in done or ():
            if which == 0:  # prefilled: the client still waits for it; its decode request goes out
                sp.in_flight += 1
                res = sp.out[q.idx]
                assert res is not None
                spec = handoff(q.idx, res)
                check_requests([spec], costers[1], kv_tokens[1])
                pos = bisect.bisect_right([p.spec.arrival_s for p in sd.pending], spec.arrival_s)
                sd.pending.insert(pos, Req(idx=q.idx, spec=spec))
            else:  # finished: a client slot frees now, the next request is sent
                sp.in_flight -= 1
                route_arrivals(sp, st.reps[rid].clock)
    return loop_result(sp), loop_result(sd)
