"""Request-level simulation of a disaggregated deployment (the pure core; no I/O).

The steady state of :mod:`simcast.serving.disagg.steady` replaced by the same per-replica schedulers
``bench-serve`` runs (:mod:`simcast.serving.request_level.scheduler`), one pool after the other:

1. **Prefill pool.** Every request goes, at its arrival, to one of the prefill pool's ``x · dp`` DP ranks
   (the PD router's choice, :func:`pd_router_name`; the decode DP rank likewise) as a request of **one
   output token** (what a disaggregation proxy asks of the prefill instance: vLLM's ``toy_proxy_server`` sends
   ``max_tokens = 1``; SGLang's prefill server stops after the first token). Its prompt-only work is scheduled,
   chunked and queued exactly as in an aggregated engine, so the prefill queue is the scheduler's own, not an M/D/1
   formula. ``prefill_done`` = when its first token left the last stage.
2. **KV transfer** (:func:`~simcast.serving.disagg.kv_transfer.kv_transfer` at the request's own prompt
   length): ``whole`` moves after ``prefill_done``; ``per-layer`` exposes only what streaming during
   the request's own prefill (admission → ``prefill_done``) cannot hide.
3. **Decode pool.** The request reaches the decode pool's ``y · dp`` DP ranks at
   ``prefill_done + transfer`` with ``ISL − 1`` prompt tokens already in KV (admitted without computing
   them: blocks for the whole prompt are taken at admission, under the decode engine's admission policy
   and memory); the last prompt token runs in the decode engine's next step and yields the first token
   the client sees (the decode instance re-runs the last position: vLLM's connectors report
   ``len(prompt) - 1`` external tokens). A decode-pool preemption recomputes the request locally.

Per request, **TTFT = serving path + prefill queue + prefill + transfer + decode admission**, every term
measured from the two runs (``DisaggRequest``): the prefill queue is arrival → first admission in the
prefill pool, the prefill is admission → ``prefill_done``, decode admission is arrival at the decode
pool → its first token there (the wait for the step in flight plus that step). The serving path
(the front end of :meth:`EnginePolicy.front_end_time_s`) is counted once, the prefill engine's.

Not modelled (stated in the output): the prefill pool holds a finished request's blocks until the
decode pool has read them (freed at once here); the proxy's own latency. Transfers leaving one prefill
DP rank share its NICs: a FIFO queue per rank (:mod:`simcast.serving.disagg.nic`). Under a client's
``--max-concurrency`` the two pools run on one clock (:mod:`simcast.serving.disagg.closed_loop`): a request is sent
when one in flight has left the decode pool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simcast.core.assumption import Assumption, Topic, note
from simcast.serving.config import ServingConfig
from simcast.serving.disagg.closed_loop import simulate_coupled
from simcast.serving.disagg.kv_transfer import kv_transfer
from simcast.serving.disagg.nic import NicQueues
from simcast.serving.disagg.steady import DisaggConfig
from simcast.serving.kv_memory import kv_capacity_tokens
from simcast.serving.request_level.bench_result import BenchResult, RequestResult
from simcast.serving.request_level.routers import default_settings, router_note
from simcast.serving.request_level.scheduler import RequestSpec
from simcast.serving.request_level.simulate import simulate_requests
from simcast.serving.steady.model import coster_for, resolve_partition

__all__ = ["DisaggBench", "DisaggRequest", "client_run", "simulate_disagg_requests"]


@dataclass(frozen=True, kw_only=True)
class DisaggRequest:
    """One request through both pools; every time in seconds, TTFT = the sum of its first five terms."""

    arrival_s: float
    input_len: int
    output_len: int
    front_end_s: float  # serving path (API server, tokenise, stream), the prefill engine's
    prefill_queue_s: float  # arrival -> first admission in the prefill pool
    prefill_s: float  # admission -> its first token left the prefill pool's last stage
    transfer_s: float  # exposed KV transfer
    decode_admission_s: float  # arrival at the decode pool -> its first token there
    decode_s: float  # first token -> last token in the decode pool
    preemptions: int  # in either pool

    @property
    def ttft_s(self) -> float:
        return self.front_end_s + self.prefill_queue_s + self.prefill_s + self.transfer_s + self.decode_admission_s

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + self.decode_s

    @property
    def tpot_s(self) -> float:
        return self.decode_s / (self.output_len - 1) if self.output_len > 1 else 0.0


@dataclass(frozen=True, kw_only=True)
class DisaggBench:
    """The requests through both pools, and each pool's own run."""

    config: DisaggConfig
    requests: tuple[DisaggRequest, ...]
    prefill_run: BenchResult
    decode_run: BenchResult
    kv_tokens_prefill: int  # per prefill replica
    kv_tokens_decode: int  # per decode replica
    assumptions: tuple[Assumption, ...]  # typed records; simcast.render.assumption_text words them

    @property
    def duration_s(self) -> float:
        """First arrival to last token (s)."""
        if not self.requests:
            return 0.0
        start = min(r.arrival_s for r in self.requests)
        return max(r.arrival_s + r.e2e_s for r in self.requests) - start

    @property
    def output_tokens_per_s(self) -> float:
        d = self.duration_s
        return sum(r.output_len for r in self.requests) / d if d > 0 else 0.0

    def percentile_ms(self, what: str, q: float) -> float:
        """Percentile ``q`` (0-100) of a per-request time (``ttft_s``, ``tpot_s``, ``prefill_queue_s`` ...), ms."""
        vals = np.array([getattr(r, what) for r in self.requests], dtype=float)
        return float(np.percentile(vals, q) * 1e3) if len(vals) else 0.0


def client_run(b: DisaggBench) -> BenchResult:
    """The run as ``vllm bench serve`` sees it through the proxy: each request's send time, TTFT and end-to-end
    time through both pools; the step gaps (ITL), samples and step outputs of the decode pool, where every token
    after the first is made; steps of both pools."""
    dec, pre = b.decode_run, b.prefill_run
    reqs = tuple(
        RequestResult(
            arrival_s=r.arrival_s,
            input_len=r.input_len,
            output_len=r.output_len,
            ttft_s=r.ttft_s,
            e2e_s=r.e2e_s,
            front_end_s=r.front_end_s,
            admitted_s=r.arrival_s + r.prefill_queue_s,
            preemptions=r.preemptions,
            replica=d.replica,
        )
        for r, d in zip(b.requests, dec.requests)
    )
    return replace(
        dec,
        requests=reqs,
        duration_s=max((r.arrival_s + r.e2e_s for r in reqs), default=0.0),
        steps=pre.steps + dec.steps,
        distinct_batches=pre.distinct_batches + dec.distinct_batches,
    )


def _engine_first_token_s(r: RequestResult) -> float:
    """When the request's first token left the engine (its clock): TTFT without the serving path."""
    return r.arrival_s + r.ttft_s - r.front_end_s


Stamps = tuple[float, float, float, float]
"""One request's (front end, prefill queue, prefill, exposed transfer) times, s."""


class _Handoff:
    """Each request's prefill-pool times and exposed transfer (at its own prompt length, memoised per length
    and prefill time bucket), and its decode-pool request: sent when its KV has arrived."""

    def __init__(self, reqs: list[RequestSpec], cfg: DisaggConfig, pc: ServingConfig, dc: ServingConfig) -> None:
        self.reqs, self.cfg, self.pc, self.dc = reqs, cfg, pc, dc
        self.memo: dict[tuple[int, float], tuple[float, float]] = {}
        self.stamps: dict[int, Stamps] = {}
        self.nics = NicQueues()

    def exposed(self, isl: int, prefill_s: float) -> tuple[float, float]:
        """(exposed transfer on an idle link, data time on the busiest rank's link), s."""
        cfg, pc, dc = self.cfg, self.pc, self.dc
        key = (isl, round(prefill_s, 6) if cfg.kv_transfer == "per-layer" else 0.0)
        if key not in self.memo:
            tr = kv_transfer(
                replace(pc, workload=replace(pc.workload, input_length=isl)),
                replace(dc, workload=replace(dc.workload, input_length=isl)),
                cfg.kv_transfer,
                prefill_s,
                together=cfg.num_devices,
            )
            self.memo[key] = (tr.exposed_s, tr.data_s)
        return self.memo[key]

    def __call__(self, i: int, r: RequestResult) -> RequestSpec:
        src = self.reqs[i]
        done = _engine_first_token_s(r)
        queue = max(0.0, r.admitted_s - r.arrival_s)
        prefill = done - r.arrival_s - queue
        alone, data = self.exposed(r.input_len, prefill)
        t = self.nics.finish(r.replica, done, alone, data) - done  # FIFO on the prefill DP rank's NICs
        self.stamps[i] = (r.front_end_s, queue, prefill, t)
        return RequestSpec(
            arrival_s=done + t, input_len=src.input_len, output_len=src.output_len, kv_ready_tokens=src.input_len - 1
        )


def _joined(
    reqs: list[RequestSpec],
    pre_res: tuple[RequestResult, ...],
    dec_res: tuple[RequestResult, ...],
    stamps: dict[int, Stamps],
) -> list[DisaggRequest]:
    """Each request's whole path: its prefill-pool stamps joined to its decode-pool result."""
    out: list[DisaggRequest] = []
    for i, d in enumerate(dec_res):
        fe, queue, prefill, t = stamps[i]
        first = _engine_first_token_s(d)
        out.append(
            DisaggRequest(
                arrival_s=pre_res[i].arrival_s,  # when the client sent it (its arrival, or a freed slot)
                input_len=reqs[i].input_len,
                output_len=d.output_len,
                front_end_s=fe,
                prefill_queue_s=queue,
                prefill_s=prefill,
                transfer_s=t,
                decode_admission_s=first - d.arrival_s,
                decode_s=d.e2e_s - d.ttft_s,
                preemptions=d.preemptions + pre_res[i].preemptions,
            )
        )
    return out


def pd_router_name(cfg: DisaggConfig, router: str = "") -> str:
    """The router that picks each request's prefill and decode DP rank: ``router``, or ("") the engine's own
    (:attr:`simcast.engines.base.Engine.pd_router`: SGLang's sgl-router cache-aware, round-robin otherwise)."""
    from simcast.engines import get_engine

    return router or get_engine(cfg.prefill.engine).pd_router


def simulate_disagg_requests(
    reqs: list[RequestSpec],
    cfg: DisaggConfig,
    *,
    use_disk_cache: bool = True,
    max_concurrency: int = 0,
    router: str = "",
    seed: int = 0,
) -> DisaggBench:
    """Run ``reqs`` through the prefill pool, the KV transfer and the decode pool of ``cfg`` (module docstring);
    ``max_concurrency`` (0: none): the client's cap on requests in flight, send to last token; ``router`` (a name
    of :data:`~simcast.serving.request_level.routers.ROUTERS`; "": the engine's, :func:`pd_router_name`) picks
    the prefill DP rank and the decode DP rank of each request, ``seed`` for the policies that draw."""
    pc = resolve_partition(cfg.prefill, use_disk_cache=use_disk_cache)
    dc = resolve_partition(cfg.decode, use_disk_cache=use_disk_cache)
    kv_p, kv_d = kv_capacity_tokens(pc), kv_capacity_tokens(dc)
    p_ranks = cfg.prefill_replicas * pc.parallel.dp
    d_ranks = cfg.decode_replicas * dc.parallel.dp
    # 1. the prefill pool: one output token per request
    pre_reqs = [RequestSpec(arrival_s=r.arrival_s, input_len=r.input_len, output_len=1) for r in reqs]
    hand = _Handoff(reqs, cfg, pc, dc)
    cp, cd = coster_for(pc, use_disk_cache), coster_for(dc, use_disk_cache)
    name = pd_router_name(cfg, router)
    rs = (default_settings(name, seed=seed), default_settings(name, seed=seed + 1))
    if max_concurrency:  # the client's cap couples the pools: one clock (closed_loop)
        pre, dec = simulate_coupled(pre_reqs, (cp, cd), (kv_p, kv_d), (p_ranks, d_ranks), max_concurrency, hand, rs)
    else:
        pre = simulate_requests(pre_reqs, cp, kv_tokens_per_replica=kv_p, dp=p_ranks, router=rs[0])
        # every request completes, and results come in the order of the requests given (the scheduler's index)
        # 2. the KV transfer at each request's own prompt length
        # (in the order the prefills finished: the NIC queues are FIFO)
        order = sorted(range(len(pre.requests)), key=lambda i: _engine_first_token_s(pre.requests[i]))
        handed = {i: hand(i, pre.requests[i]) for i in order}
        dec_reqs = [handed[i] for i in range(len(pre.requests))]
        # 3. the decode pool
        dec = simulate_requests(dec_reqs, cd, kv_tokens_per_replica=kv_d, dp=d_ranks, router=rs[1])
    pre_res, stamps = pre.requests, hand.stamps
    out = _joined(reqs, pre_res, dec.requests, stamps)
    assumptions: tuple[Assumption, ...] = (
        note(
            Topic.DISAGG_REQUESTS,
            f"disaggregated {cfg.label}, request level: prefill pool {p_ranks} DP rank(s) ({pc.runtime}, one output "
            f"token per request), KV transfer {cfg.kv_transfer} at each prompt's length, decode pool {d_ranks} DP "
            f"rank(s) ({dc.runtime}) admitting ISL-1 transferred tokens and running the last prompt position",
        ),
        note(Topic.DISAGG_KV_CAPACITY, f"KV capacity per replica: prefill {kv_p} tokens, decode {kv_d} tokens"),
        note(
            Topic.DISAGG_REQUESTS,
            f"prefill and decode DP rank of each request: {router_note(name)}"
            + ("" if router else " (the engine's own PD router)"),
        ),
        note(
            Topic.DISAGG_NOT_MODELLED,
            "not modelled: prefill blocks held until the decode pool reads them, the proxy's own latency; "
            "transfers leaving one prefill DP rank queue FIFO on its NICs"
            + (", client --max-concurrency" if not max_concurrency else ""),
            approximation=True,
        ),
    )
    if max_concurrency:
        text = (
            f"client --max-concurrency {max_concurrency}: both pools on one clock; a request is sent when one in "
            "flight has left the decode pool (vllm bench serve's semaphore)"
        )
        assumptions += (note(Topic.DISAGG_REQUESTS, text),)
    return DisaggBench(
        config=replace(cfg, prefill=pc, decode=dc),
        requests=tuple(out),
        prefill_run=pre,
        decode_run=dec,
        kv_tokens_prefill=kv_p,
        kv_tokens_decode=kv_d,
        assumptions=assumptions,
    )
