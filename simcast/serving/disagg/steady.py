"""Steady state of a disaggregated deployment: a prefill pool and a decode pool joined by a KV transfer.

A deployment ``xPyD`` runs ``x`` replicas of a prefill layout and ``y`` replicas of a decode layout
(each a :class:`~simcast.serving.config.ServingConfig`: its own TP x PP x EP, DP attention, engine and
device profile). Requests arrive at ``λ`` requests/s and are spread evenly over the DP ranks of each pool.

**Prefill pool** (prompt-only steps). A full step holds ``k_max = min(budget // ISL, max_num_seqs)``
whole prompts, or, for a prompt over the budget, its ``n = ceil(ISL / budget)`` chunks one per step at
their own cached context. With ``M = pp`` microbatches in flight a DP rank at steps of ``k`` prompts serves
``μ(k) = M·k / cycle(k)`` prompts/s (``M / Σ_i cycle_i`` chunked), the cycle from
:class:`~simcast.serving.step.StepCoster` (stage pipeline + the engine's CPU time); its capacity is
``μ_p = μ(k_max)``.

**Queue and step size** at the prefill pool: the engine's scheduler puts what has arrived into the next
step, so at light load a step carries one prompt and only near saturation are steps full. Modelled as
each DP rank an M/D/1 queue (Poisson arrivals, deterministic service ``1/μ(k)``) at the step size ``k``
(1, 2, 4, ... and ``k_max``) whose mean ``W_q(k) + cycle(k)`` is lowest, ``W_q = ρ / (2·μ(k)·(1 − ρ))``,
``ρ = λ_rank / μ(k)`` (the Pollaczek-Khinchine formula with zero service variance; an approximation of
the engine's batch-as-they-come scheduling, checked against the request-level simulator of
:mod:`simcast.serving.disagg.requests`); unbounded when ``λ_rank >= μ_p``. A prompt's own prefill time is
its step(s) at that size: ``cycle(k)`` (``Σ_i cycle_i`` chunked).

**KV transfer** (:mod:`simcast.serving.disagg.kv_transfer`): the prompt's KV, laid out for the decode
pool's ranks, over the fabric; ``whole`` exposes all of it after the prefill (vLLM's NixlConnector
reads a finished request's blocks), ``per-layer`` only what the layer-by-layer stream cannot hide.

**Decode pool** (decode-only steps). At concurrency ``B`` per DP rank (capped by its KV memory, whose
rule holds the whole prompt's KV from admission, and by ``max_num_seqs``), TPOT is the cycle of a step
of ``B / M`` decodes at the mean context ``ISL + OSL/2``; a rank completes
``μ_d = B / ((OSL − 1)·TPOT)`` requests/s (Little's law: the first token came from the prefill pool).
At a request rate below its capacity the pool runs at the smallest concurrency that carries it.

**TTFT** = serving path + ``W_q`` + prefill + the wait for the prefill rank's NICs
(:func:`~simcast.serving.disagg.nic.nic_wait_s`, M/D/1 at the rank's prompt rate) + exposed transfer + decode
admission (the wait for the decode step in flight, :func:`~simcast.serving.steady.model.step_wait_cycles` steps,
and the decode step that emits the first token: vLLM's decode instance recomputes the last prompt position, and the
request-level simulator models every engine that way); E2E = TTFT +
(OSL − 1)·TPOT; tokens/s = ``λ·OSL`` over ``x·W_p + y·W_d`` devices. The **balanced ratio** is the
``y / x`` at which the prefill pool's request rate meets the decode pool's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simcast.core.assumption import Assumption, Topic, note
from simcast.core.errors import require
from simcast.serving.config import SERVING_MODES, ServingConfig
from simcast.serving.disagg.kv_transfer import KV_TRANSFER_MODES, KvTransfer, kv_transfer
from simcast.serving.disagg.nic import nic_wait_s
from simcast.serving.disagg.steady_notes import disagg_notes
from simcast.serving.kv_memory import MemoryFit, max_batch_for_memory, memory_fit
from simcast.serving.steady.model import coster_for, kernels_note, resolve_partition, step_wait_cycles
from simcast.serving.step import StepCoster, mixed_batch

__all__ = ["SERVING_MODES", "DisaggConfig", "DisaggResult", "estimate_disagg"]


@dataclass(frozen=True, kw_only=True)
class DisaggConfig:
    """``prefill_replicas`` (x) copies of ``prefill`` and ``decode_replicas`` (y) copies of ``decode``.

    ``decode.batch_size``: concurrency per decode DP rank (an upper bound when ``request_rate_per_s``
    is given); ``prefill.batch_size`` is not used. ``request_rate_per_s`` 0: the rate the decode pool
    completes at that concurrency.
    """

    prefill: ServingConfig
    decode: ServingConfig
    prefill_replicas: int = 1
    decode_replicas: int = 1
    kv_transfer: str = "whole"
    request_rate_per_s: float = 0.0

    def __post_init__(self) -> None:
        require(self.prefill_replicas >= 1, "prefill.replicas", self.prefill_replicas, "must be >= 1")
        require(self.decode_replicas >= 1, "decode.replicas", self.decode_replicas, "must be >= 1")
        require(
            self.kv_transfer in KV_TRANSFER_MODES,
            "--kv-transfer",
            self.kv_transfer,
            f"allowed: {', '.join(KV_TRANSFER_MODES)}",
        )
        require(self.request_rate_per_s >= 0, "--request-rate", self.request_rate_per_s, "must be >= 0")
        p, d = self.prefill, self.decode
        why = f"must be the prefill pool's model {p.model.name} (its quantization may differ)"
        require(p.model.name == d.model.name, "decode.model", d.model.name, why)
        require(
            (p.workload.input_length, p.workload.output_length) == (d.workload.input_length, d.workload.output_length),
            "decode workload",
            (d.workload.input_length, d.workload.output_length),
            "the two pools serve the same requests (same ISL and OSL)",
        )
        require(
            d.workload.output_length >= 2,
            "--output-length",
            d.workload.output_length,
            "must be >= 2 when disaggregated (the prefill pool makes the first token, the decode pool the rest)",
        )

    @property
    def num_devices(self) -> int:
        return self.prefill_replicas * self.prefill.parallel.world_size + (
            self.decode_replicas * self.decode.parallel.world_size
        )

    @property
    def label(self) -> str:
        return f"{self.prefill_replicas}P{self.decode_replicas}D"


@dataclass(frozen=True, kw_only=True)
class PrefillPool:
    """One prefill DP rank at full prompt-only steps (see module docstring)."""

    prompts_per_step: int  # whole prompts per full step, k_max (1 when chunked)
    chunks: int  # steps one prompt takes (1 unless ISL > budget)
    chunk_tokens: int
    step_s: float  # mean cycle of one full step
    prefill_s: float  # one prompt's own steps at full steps
    prompts_per_s: float  # μ_p = μ(k_max), per DP rank: the capacity
    memory: MemoryFit  # at the prompts of the full steps in flight
    ranks: int  # DP ranks per replica
    step_grid: tuple[tuple[int, float, float], ...] = ()  # (k, μ(k) prompts/s, own prefill s) per step size

    def at_rate(self, rate_per_s: float) -> tuple[int, float, float]:
        """The step size ``k``, one prompt's own prefill (s) and the mean queueing wait (s) of a DP rank
        receiving ``rate_per_s`` prompts/s: the ``k`` of :attr:`step_grid` with the lowest mean wait + prefill
        (module docstring); full steps (inf wait) when even they cannot carry the rate."""
        grid = self.step_grid or ((self.prompts_per_step, self.prompts_per_s, self.prefill_s),)
        best = (self.prompts_per_step, self.prefill_s, md1_wait_s(rate_per_s, self.prompts_per_s))
        for k, mu, own in grid:
            wait = md1_wait_s(rate_per_s, mu)
            if wait + own < best[1] + best[2]:
                best = (k, own, wait)
        return best


@dataclass(frozen=True, kw_only=True)
class DecodePool:
    """One decode DP rank at concurrency ``concurrency`` (see module docstring)."""

    concurrency: int  # running requests per DP rank
    max_concurrency: int  # the most its KV memory and max_num_seqs allow
    tpot_s: float
    requests_per_s: float  # μ_d at ``concurrency``, per DP rank
    memory: MemoryFit
    ranks: int


@dataclass(frozen=True, kw_only=True)
class DisaggResult:
    config: DisaggConfig
    prefill: PrefillPool
    decode: DecodePool
    transfer: KvTransfer
    request_rate_per_s: float  # λ, all replicas
    prefill_utilisation: float  # ρ of a prefill DP rank at its operating step size
    prefill_step_prompts: int  # prompts per prefill step at the operating point (<= prefill.prompts_per_step)
    prefill_s: float  # one prompt's own prefill at that step size
    front_end_s: float
    queue_s: float  # W_q (inf at ρ >= 1), plus the wait for the prefill rank's NICs (nic_wait_s)
    admission_s: float  # wait for the decode step in flight
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    tokens_per_s: float
    tokens_per_s_per_device: float
    balanced_decode_per_prefill: float  # y / x at which the pools' request rates meet
    saturated: str  # "" | "prefill" (ρ >= 1: TTFT unbounded) | "decode" (λ above the decode pool's capacity)
    assumptions: tuple[Assumption, ...]  # typed records; simcast.render.assumption_text words them

    @property
    def num_devices(self) -> int:
        return self.config.num_devices


def md1_wait_s(rate_per_s: float, service_rate_per_s: float) -> float:
    """Mean M/D/1 queueing wait (s): ``ρ / (2μ(1 − ρ))`` with ``ρ = λ/μ``; inf at ``ρ >= 1``."""
    return nic_wait_s(rate_per_s, 1 / service_rate_per_s)


def prefill_pool(cfg: ServingConfig, coster: StepCoster | None = None) -> PrefillPool:
    """One DP rank of ``cfg`` running full prompt-only steps (module docstring)."""
    pol, w = cfg.policy, cfg.workload
    coster = coster or coster_for(cfg)
    isl, m = w.input_length, cfg.microbatches
    budget = pol.max_num_batched_tokens if pol.chunked_prefill else max(pol.max_num_batched_tokens, isl)
    grid: tuple[tuple[int, float, float], ...] = ()
    if isl <= budget:
        k = max(1, min(budget // isl, pol.max_num_seqs))
        sizes = sorted({min(k, 2**i) for i in range(k.bit_length() + 1)} | {k})
        by_k = {j: coster.cycle_s(mixed_batch(0, 0, j, isl, 0), m) for j in sizes}
        grid = tuple((j, m * j / c, c) for j, c in by_k.items())
        cycle = by_k[k]
        chunks, chunk, own, per_s = 1, isl, cycle, m * k / cycle
    else:
        k, chunks = 1, math.ceil(isl / budget)
        chunk = math.ceil(isl / chunks)
        cycles = [
            coster.cycle_s(mixed_batch(0, 0, 1, min(chunk, isl - i * chunk), i * chunk), m) for i in range(chunks)
        ]
        own, cycle, per_s = sum(cycles), sum(cycles) / chunks, m / sum(cycles)
    mem = memory_fit(replace(cfg, batch_size=max(1, k * m)))
    return PrefillPool(
        prompts_per_step=k,
        chunks=chunks,
        chunk_tokens=chunk,
        step_s=cycle,
        prefill_s=own,
        prompts_per_s=per_s,
        memory=mem,
        ranks=cfg.parallel.dp,
        step_grid=grid,
    )


def decode_capacity(cfg: ServingConfig) -> int:
    """Most running requests per decode DP rank: its KV memory (the whole prompt held) and ``max_num_seqs``."""
    return max(0, min(max_batch_for_memory(cfg), cfg.policy.max_num_seqs * cfg.microbatches))


def decode_pool(cfg: ServingConfig, concurrency: int, coster: StepCoster | None = None) -> DecodePool:
    """One DP rank of ``cfg`` at ``concurrency`` decoding requests (module docstring; TPOT = cycle / (1 + E))."""
    coster = coster or coster_for(cfg)
    w, m = cfg.workload, cfg.microbatches
    cap = decode_capacity(cfg)
    b = max(1, min(concurrency, cap)) if cap else max(1, concurrency)
    per_mb = max(1, round(b / min(m, b)))
    tpot = coster.cycle_s(mixed_batch(per_mb, w.input_length + w.output_length // 2, 0, 0, 0), min(m, b))
    tpot /= coster.tokens_per_step
    return DecodePool(
        concurrency=b,
        max_concurrency=cap,
        tpot_s=tpot,
        requests_per_s=b / ((w.output_length - 1) * tpot),
        memory=memory_fit(replace(cfg, batch_size=b)),
        ranks=cfg.parallel.dp,
    )


def decode_at_rate(cfg: ServingConfig, rate_per_rank: float, coster: StepCoster, upper: int) -> DecodePool:
    """The decode pool at the smallest concurrency (<= ``upper``) whose capacity carries ``rate_per_rank``
    requests/s (capacity grows with concurrency: bisection); ``upper`` when none does."""
    top = decode_pool(cfg, upper, coster)
    if top.requests_per_s <= rate_per_rank:
        return top
    lo, hi = 1, top.concurrency
    while lo < hi:
        mid = (lo + hi) // 2
        if decode_pool(cfg, mid, coster).requests_per_s >= rate_per_rank:
            hi = mid
        else:
            lo = mid + 1
    return decode_pool(cfg, lo, coster)


def estimate_disagg(
    cfg: DisaggConfig,
    *,
    use_disk_cache: bool = True,
    prefill: PrefillPool | None = None,
    costers: tuple[StepCoster, StepCoster] | None = None,
) -> DisaggResult:
    """TTFT, TPOT, throughput of the disaggregated deployment ``cfg`` in steady state (module docstring)."""
    pc = resolve_partition(cfg.prefill, use_disk_cache=use_disk_cache)
    dc = resolve_partition(cfg.decode, use_disk_cache=use_disk_cache)
    cp, cd = costers or (coster_for(pc, use_disk_cache), coster_for(dc, use_disk_cache))
    pre = prefill or prefill_pool(pc, cp)
    full = decode_pool(dc, dc.batch_size, cd)
    d_ranks = cfg.decode_replicas * dc.parallel.dp
    rate = cfg.request_rate_per_s
    dec = decode_at_rate(dc, rate / d_ranks, cd, dc.batch_size) if rate > 0 else full
    own = pre.at_rate((rate or d_ranks * dec.requests_per_s) / (cfg.prefill_replicas * pre.ranks))[1]
    tr = kv_transfer(pc, dc, cfg.kv_transfer, own, together=cfg.num_devices)
    kernels = kernels_note(pc, cp.report(mixed_batch(0, 0, 1, pre.chunk_tokens, 0)))  # type: ignore[arg-type]
    return assemble(replace(cfg, prefill=pc, decode=dc), pre, dec, full, tr, (kernels, *dc.scheme.serving_notes()))


def assemble(
    cfg: DisaggConfig,
    pre: PrefillPool,
    dec: DecodePool,
    full: DecodePool,
    tr: KvTransfer,
    notes: tuple[Assumption, ...] | None = (),
) -> DisaggResult:
    """The deployment's figures from its pools (pure arithmetic, module docstring): ``dec`` the decode pool
    at its operating point, ``full`` at the configured concurrency (the balanced ratio's reference);
    ``notes`` None: the figures only, no assumption records (a search's inner loop)."""
    pc, dc = cfg.prefill, cfg.decode
    p_ranks, d_ranks = cfg.prefill_replicas * pre.ranks, cfg.decode_replicas * dec.ranks
    lam = cfg.request_rate_per_s or d_ranks * dec.requests_per_s
    saturated = "decode" if lam > d_ranks * dec.requests_per_s * (1 + 1e-9) else ""
    k, own, queue = pre.at_rate(lam / p_ranks)
    rho = lam / (p_ranks * next((mu for j, mu, _ in pre.step_grid if j == k), pre.prompts_per_s))
    if lam >= p_ranks * pre.prompts_per_s and not saturated:
        saturated = "prefill"
    front = pc.policy.front_end_time_s(pc.workload.input_length)
    admit = (step_wait_cycles(dc.policy) + 1) * dec.tpot_s * dc.scheme.tokens_per_step  # decode steps
    nic = nic_wait_s(min(lam, p_ranks * pre.prompts_per_s) / p_ranks, tr.data_s)  # FIFO on the rank's NICs
    ttft = front + queue + own + nic + tr.exposed_s + admit
    osl = dc.workload.output_length
    served = min(lam, p_ranks * pre.prompts_per_s, d_ranks * dec.requests_per_s)
    tps = served * osl
    balanced = (pre.ranks * pre.prompts_per_s) / (full.ranks * full.requests_per_s)
    assumptions: tuple[Assumption, ...] = ()
    if notes is not None:
        parts = {"front": front, "queue": queue + nic, "own": own, "admit": admit}
        assumptions = disagg_notes(cfg, pre, dec, full, tr, k=k, rho=rho, saturated=saturated, **parts) + notes
    if saturated == "decode" and notes is not None:
        text = f"request rate {lam:g}/s exceeds the decode pool's capacity: served {served:.3g}/s"
        assumptions += (note(Topic.DISAGG_SATURATION, text),)
    return DisaggResult(
        config=cfg,
        prefill=pre,
        decode=dec,
        transfer=tr,
        request_rate_per_s=lam,
        prefill_utilisation=rho,
        prefill_step_prompts=k,
        prefill_s=own,
        front_end_s=front,
        queue_s=queue + nic,
        admission_s=admit,
        ttft_s=ttft,
        tpot_s=dec.tpot_s,
        e2e_latency_s=ttft + (osl - 1) * dec.tpot_s,
        tokens_per_s=tps,
        tokens_per_s_per_device=tps / cfg.num_devices,
        balanced_decode_per_prefill=balanced,
        saturated=saturated,
        assumptions=assumptions,
    )
