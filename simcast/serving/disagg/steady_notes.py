"""The assumption records of a disaggregated steady state (:func:`simcast.serving.disagg.steady.assemble`)."""

from __future__ import annotations

from typing import Any

from simcast.core.assumption import Assumption, Topic, note
from simcast.serving.disagg.kv_transfer import KvTransfer
from simcast.serving.steady.model import step_wait_cycles

# simcast.serving.disagg.steady's records, named, not imported (that module calls this one)
DisaggConfig = Any
PrefillPool = Any
DecodePool = Any


def disagg_notes(
    cfg: DisaggConfig,
    pre: PrefillPool,
    dec: DecodePool,
    full: DecodePool,
    tr: KvTransfer,
    *,
    k: int,
    rho: float,
    saturated: str,
    front: float,
    queue: float,
    own: float,
    admit: float,
) -> tuple[Assumption, ...]:
    """:func:`assemble`'s assumptions: the layout, each pool, the queue, the transfer, TTFT's parts (s) and
    the balanced ratio; ``k`` prompts per prefill step at utilisation ``rho``."""
    pc, dc = cfg.prefill, cfg.decode
    x, y = cfg.prefill_replicas, cfg.decode_replicas
    pol_p, pol_d = pc.policy, dc.policy
    osl = dc.workload.output_length
    balanced = (pre.ranks * pre.prompts_per_s) / (full.ranks * full.requests_per_s)
    return (
        note(
            Topic.DISAGG_LAYOUT,
            f"disaggregated {cfg.label}: {x} prefill replica(s) of {pc.parallel.world_size} device(s) "
            f"({pc.device.name}, engine {pol_p.name}) + {y} decode replica(s) of {dc.parallel.world_size} "
            f"({dc.device.name}, engine {pol_d.name}) = {cfg.num_devices} devices; requests spread evenly over "
            "the DP ranks of each pool",
        ),
        note(
            Topic.DISAGG_PREFILL_POOL,
            f"prefill pool: prompt-only steps of {k} prompt(s) x {pre.chunk_tokens} tokens at this rate "
            f"(full steps {pre.prompts_per_step}; {pre.chunks} step(s) per prompt, budget "
            f"{pol_p.max_num_batched_tokens}), {pc.microbatches} microbatch(es) in flight: capacity "
            f"{pre.prompts_per_s:.3g} prompts/s per DP rank, utilisation {rho:.3f}",
        ),
        note(
            Topic.DISAGG_QUEUE,
            "prefill queue: M/D/1 per DP rank, W_q = rho / (2 mu (1 - rho)) (Poisson arrivals, deterministic "
            "service 1/mu at the step size, of 1, 2, 4, ... and full, with the lowest wait + prefill: "
            "approximation of the engine batching what has arrived)"
            + ("; rate >= capacity: the queue grows without bound" if saturated == "prefill" else ""),
        ),
        note(
            Topic.DISAGG_DECODE_POOL,
            f"decode pool: decode-only steps at {dec.concurrency} running requests per DP rank (memory and "
            f"max_num_seqs allow {dec.max_concurrency}; the whole prompt's KV held from admission), mean context "
            f"{dc.workload.input_length + osl // 2}; {dec.requests_per_s:.3g} requests/s per DP rank = "
            "B / ((OSL-1) TPOT)",
        ),
        note(Topic.KV_TRANSFER, tr.note),
        note(
            Topic.DISAGG_TTFT,
            f"TTFT = serving path {front * 1e3:.2f} ms + prefill queue and NIC queue {queue * 1e3:.2f} ms + prefill "
            f"{own * 1e3:.2f} ms + KV transfer {tr.exposed_s * 1e3:.2f} ms + decode admission "
            f"{admit * 1e3:.2f} ms ({step_wait_cycles(pol_d):g} decode steps at random arrival + the step that "
            "emits the first token)",
        ),
        note(
            Topic.DISAGG_BALANCE,
            f"balanced ratio: {balanced:.2f} decode replicas per prefill replica (prefill pool's request rate = "
            f"decode pool's at {full.concurrency} requests per DP rank)",
        ),
    )
