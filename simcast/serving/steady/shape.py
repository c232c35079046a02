"""The steady state's mean step (:func:`simcast.serving.steady.model.estimate_serving`): the served concurrency,
the step's make-up at it, and the step cycles a decoding request and a new prompt see (module docstring of
:mod:`simcast.serving.steady.model`). Times in s, lengths in tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcast.engines.policy import EnginePolicy
from simcast.serving.config import ServingConfig
from simcast.serving.step import StepCoster, mixed_batch


def interp_count(cost, x: float) -> float:
    """``cost`` (a function of an integer count) at a fractional mean ``x``: the mix of its floor and ceiling."""
    k, f = divmod(max(0.0, x), 1.0)
    lo = cost(int(k))
    return lo if f < 1e-9 else (1 - f) * lo + f * cost(int(k) + 1)


@dataclass(frozen=True, kw_only=True)
class SteadyShape:
    """The steady state's step at one concurrency: ``served`` requests per replica (``capped`` by what), ``m``
    microbatches of ``b`` requests, each request living ``life`` steps (``dec_steps`` decode steps, ``n_pf``
    prompt chunks of ``chunk`` tokens), decodes at ``dec_ctx`` and chunks at ``chunk_ctx`` tokens of context,
    and what one decoding request sees of the others per step (``others_dec`` decodes, ``others_pf`` prompt
    tokens). ``isl``: prompt tokens computed (the rest from the prefix cache); ``budget``: the step's tokens;
    ``tau``: tokens a decoding request emits per step; ``vt``: its query tokens per step."""

    served: int
    capped: str
    m: int
    b: float
    life: float
    dec_steps: float
    n_pf: int
    chunk: int
    dec_ctx: int
    chunk_ctx: int
    others_dec: float
    others_pf: float
    isl: int
    budget: int
    tau: float
    vt: int


def steady_shape(cfg: ServingConfig) -> SteadyShape:
    """Served concurrency (the engine's sequence limit, then the token budget: decode-first steps share it)
    and the mean step's make-up (module docstring)."""
    pol, w = cfg.policy, cfg.workload
    osl = w.output_length
    hit = cfg.cached_tokens(w.input_length)  # prompt tokens served by the prefix cache
    isl = w.input_length - hit  # prompt tokens computed
    tau = cfg.scheme.tokens_per_step  # tokens a decoding request emits per step
    vt = cfg.scheme.verify_tokens  # query tokens per decoding request per step
    dec_steps = (osl - 1) / tau  # decode steps of one request
    budget = pol.max_num_batched_tokens if pol.chunked_prefill else max(pol.max_num_batched_tokens, isl)
    m = max(1, min(cfg.microbatches, cfg.batch_size))
    served, capped = cfg.batch_size, ""
    if served > pol.max_num_seqs * m:
        served, capped = pol.max_num_seqs * m, "max_num_seqs"
    n_pf = 1
    for _ in range(3):  # chunk size depends on D, D on the request's lifetime, lifetime on chunk count
        b = served / m
        life = dec_steps + n_pf
        d = b * dec_steps / life
        if pol.decode_first and b * (dec_steps * vt + isl) / life > budget:  # prompts + decodes exceed the budget
            served = max(1, int(budget * life / (dec_steps * vt + isl)) * m)
            capped = "token budget"
            b, d = served / m, served / m * dec_steps / life
        room = budget - math.ceil(d) * vt if pol.decode_first else budget
        chunk = min(isl, max(1, room)) if pol.chunked_prefill else isl
        n_pf = math.ceil(isl / chunk)
    b = served / m
    life = dec_steps + n_pf
    chunk = math.ceil(isl / n_pf)
    return SteadyShape(
        served=served,
        capped=capped,
        m=m,
        b=b,
        life=life,
        dec_steps=dec_steps,
        n_pf=n_pf,
        chunk=chunk,
        dec_ctx=w.input_length + osl // 2,  # attention still over the whole context
        chunk_ctx=hit + (n_pf - 1) * chunk // 2,
        # a decoding request sees its own decode plus the others' decodes and prompt chunks in its step
        others_dec=max(0.0, b - 1) * dec_steps / life,
        others_pf=max(0.0, b - 1) * isl / life,  # other requests' prompt tokens per step
        isl=isl,
        budget=budget,
        tau=tau,
        vt=vt,
    )


def steady_cycles(coster: StepCoster, pol: EnginePolicy, sh: SteadyShape) -> tuple[float, float]:
    """(TPOT, the prompt's chunk steps under load) in s: the mean step cycle a decoding request sees per
    token, and its prompt's ``n_pf`` steps (decode-first: mixed with the others' decodes; prefill-first:
    prefill steps, the decode steps between them)."""
    dec_ctx, chunk_ctx, in_flight, vt, tau = sh.dec_ctx, sh.chunk_ctx, sh.m, sh.vt, sh.tau
    others_dec, others_pf, chunk, budget = sh.others_dec, sh.others_pf, sh.chunk, sh.budget

    def cyc(dec: int, prompts: int, tokens: int = chunk) -> float:
        return coster.cycle_s(mixed_batch(dec, dec_ctx, prompts, tokens, chunk_ctx, vt), in_flight, dec, dec_ctx)

    if pol.decode_first:
        tpot = interp_count(lambda k: interp_count(lambda dd: cyc(1 + dd, k), others_dec), others_pf / chunk) / tau
        return tpot, sh.n_pf * interp_count(lambda dd: cyc(dd, 1), min(others_dec, (budget - chunk) / vt))
    per_prompt = min(sh.isl, budget)
    size = min(max(others_pf, per_prompt), budget)  # tokens of one prefill step
    prompts = max(1, round(size / per_prompt))
    pf = coster.cycle_s(mixed_batch(0, 0, prompts, per_prompt, chunk_ctx), in_flight)
    dec_seen = interp_count(lambda dd: cyc(1 + dd, 0), others_dec)
    tpot = (dec_seen + (others_pf / (prompts * per_prompt)) * pf) / tau
    return tpot, sh.n_pf * cyc(0, 1, per_prompt) + (sh.n_pf - 1) * dec_seen
