"""KV memory of a serving deployment: each engine's memory rule and its KV admission policy.

**Memory rule** (``EnginePolicy.mem_fraction_of``, one per engine, see :mod:`simcast.engines.policy`):

* ``total`` (vLLM ``--gpu-memory-utilization``): KV = fraction × HBM − weights − the activation peak of
  vLLM's profile run (one forward of ``max_num_batched_tokens`` tokens, sampler over ``max_num_seqs``)
  − non-torch memory (NCCL buffers, cuBLAS workspace: ``reserved_bytes``, an assumption); CUDA graphs
  are captured afterwards, in the (1 − fraction) headroom (``vllm/v1/worker/gpu_worker.py``).
* ``static`` (SGLang ``--mem-fraction-static``): KV = fraction × HBM − weights; activations and CUDA
  graphs live in the remainder.
* ``free`` (TensorRT-LLM ``--kv-cache-free-gpu-memory-fraction``): KV = fraction × (HBM − weights −
  the engine's activation buffers for ``max_num_tokens`` − ``reserved_bytes``).

**Admission** (``EnginePolicy.kv_admission``): what one running request holds of that KV, averaged
over its life. Requests live ``≈ OSL`` steps, and in a steady state the requests in flight are a
length-biased sample of the workload (a request's share of the running set is proportional to its
life), so the mean KV per running request is ``E[OSL · kv] / E[OSL]`` over the workload's lengths:

* ``guaranteed_no_evict``: the full ``ISL + OSL`` rounded up to blocks, reserved from admission;
* ``on_demand`` / ``max_utilization``: the live tokens, ``ISL + OSL/2`` plus half a block of rounding
  on average;
* ``reserve_ratio``: the live tokens plus ``new_token_ratio`` × the remaining output clipped at
  ``clip_max_new_tokens`` (mean ``OSL/2`` below the clip).

**Speculative decoding**: the draft's weights and its KV (one more layer per cached token) live on the
last stage (:mod:`simcast.serving.speculative.draft`) and come out of that stage's KV budget.

Pure arithmetic: no trace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

from simcast.core.kv import kv_dtype_bytes
from simcast.core.memory import stage_activation_bytes, stage_kv_bytes_for, stage_weight_bytes
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch
from simcast.engines.partition import build_pipeline_stage_plan
from simcast.engines.policy import EnginePolicy
from simcast.engines.sglang import SGLANG_RATIO
from simcast.serving.config import ServingConfig


@dataclass(frozen=True, kw_only=True)
class MemoryFit:
    stage_weight_bytes: tuple[int, ...]
    stage_kv_bytes: tuple[int, ...]
    stage_activation_bytes: tuple[int, ...]
    stage_kv_budget_bytes: tuple[int, ...]  # KV the engine's memory rule leaves on each stage
    reserved_bytes: int
    budget_bytes: int  # the most a stage may use (weights + activations + reserve + KV budget), min over stages;
    # the KV budget enters unclamped, so a layout whose weights alone exceed the engine's share reports that share
    kv_tokens_per_request: float = 0.0  # mean KV a running request holds under the admission policy

    @property
    def stage_total_bytes(self) -> tuple[int, ...]:
        return tuple(
            w + k + a + self.reserved_bytes
            for w, k, a in zip(self.stage_weight_bytes, self.stage_kv_bytes, self.stage_activation_bytes)
        )

    @property
    def fits(self) -> bool:
        return all(0 <= k <= b for k, b in zip(self.stage_kv_bytes, self.stage_kv_budget_bytes))


def request_kv_tokens(pol: EnginePolicy, input_len: float, output_len: float) -> float:
    """Mean KV tokens one request holds over its life under ``pol``'s admission policy (module docstring)."""
    blk = pol.kv_block_tokens
    if pol.kv_admission == "guaranteed_no_evict":
        return float(math.ceil((input_len + output_len) / blk) * blk)
    live = input_len + output_len / 2 + (blk - 1) / 2
    if pol.kv_admission == "reserve_ratio":
        clip = SGLANG_RATIO["clip_max_new_tokens"]
        remaining = output_len / 2 if output_len <= clip else clip - clip * clip / (2 * output_len)
        live += pol.new_token_ratio * remaining
    return live


def mean_request_kv_tokens(pol: EnginePolicy, lengths: Sequence[tuple[float, int, int]]) -> float:
    """Life-weighted mean of :func:`request_kv_tokens` over ``lengths`` = (weight, ISL, OSL) rows."""
    num = sum(w * o * request_kv_tokens(pol, i, o) for w, i, o in lengths)
    den = sum(w * o for w, i, o in lengths)
    return num / den if den > 0 else 0.0


def workload_lengths(cfg: ServingConfig) -> tuple[tuple[float, int, int], ...]:
    w = cfg.workload
    return w.length_mix or ((1.0, w.input_length, w.output_length),)


def own_lengths(cfg: ServingConfig) -> tuple[tuple[float, int, int], ...]:
    """:func:`workload_lengths` less each prompt's prefix-cache hit: the KV a request holds for itself (the
    shared prefix's blocks are held once per replica, :func:`shared_prefix_tokens`)."""
    return tuple((w, max(1, i - cfg.cached_tokens(i)), o) for w, i, o in workload_lengths(cfg))


def shared_prefix_tokens(cfg: ServingConfig) -> int:
    """KV tokens of the shared prefix a replica holds once (pinned while referenced), 0 without hits."""
    return cfg.cached_tokens(cfg.workload.input_length)


def longest_request(cfg: ServingConfig) -> int:
    return max(i + o for _, i, o in workload_lengths(cfg))


def profile_batch(pol: EnginePolicy, input_length: int) -> tuple[Batch, Batch]:
    """The batches whose activation peak the engine sets aside: a forward of the whole token budget
    (vLLM's profile run, TensorRT-LLM's ``max_num_tokens`` buffers) and a decode of ``max_num_seqs``."""
    budget = pol.max_num_batched_tokens
    tokens = budget if pol.chunked_prefill else max(budget, input_length)
    return Batch.prefill(1, tokens), Batch.decode(max(1, min(pol.max_num_seqs, budget)), input_length)


_FIXED: dict[tuple, tuple[ServingConfig, tuple[list[int], list[int], list[float]]]] = {}
_FIXED_MAX = 256
_PLAIN = (int, float, str, bool, type(None))


def _fixed_key(cfg: ServingConfig) -> tuple:
    """Every field but ``batch_size`` (which :func:`stage_fixed` does not read): plain values by value,
    other objects by identity (the memo holds the config, so an identity is never reused while cached)."""
    return tuple(
        v if isinstance(v, _PLAIN) else ("id", id(v))
        for f in fields(cfg)
        if f.name != "batch_size"
        for v in (getattr(cfg, f.name),)
    )


def stage_fixed(cfg: ServingConfig) -> tuple[list[int], list[int], list[float]]:
    """(weights, activation peak, KV bytes of one mean running request) per stage, one rank.

    Memoised: a concurrency sweep asks for it at every point with only ``batch_size`` changed."""
    key = _fixed_key(cfg)
    hit = _FIXED.get(key)
    if hit is None:
        if len(_FIXED) >= _FIXED_MAX:
            _FIXED.clear()
        hit = _FIXED[key] = (cfg, _stage_fixed(cfg))
    weights, act, per_req = hit[1]
    return list(weights), list(act), list(per_req)


def _stage_fixed(cfg: ServingConfig) -> tuple[list[int], list[int], list[float]]:
    m, par, pol = cfg.model, cfg.parallel, cfg.policy
    sd = sharded_dims(m, par.tp)
    plan = build_pipeline_stage_plan(m.num_layers, par.pp, cfg.partition, m.tie_word_embeddings)
    chunk, dec = profile_batch(pol, cfg.workload.input_length)
    weights = [stage_weight_bytes(m, sd, i, s, par) for i, s in zip(plan.stage_infos, plan.stage_module_specs)]
    act = [
        max(stage_activation_bytes(m, sd, s, chunk), stage_activation_bytes(m, sd, s, dec))
        for s in plan.stage_module_specs
    ]
    kvb, tokens = kv_dtype_bytes(m, cfg.kv_cache_dtype), mean_request_kv_tokens(pol, own_lengths(cfg))
    # bytes at the rounded-up mean (sliding-window layers keep only their window; MLA its latent), scaled back
    t_int = max(1, math.ceil(tokens))
    per_req = [stage_kv_bytes_for(m, sd, i, 1, t_int, kvb) * tokens / t_int for i in plan.stage_infos]
    # the draft (speculative decoding) lives on the last stage
    weights[-1] += cfg.scheme.draft_weight_bytes(m, par)
    per_req[-1] += cfg.scheme.draft_kv_bytes_per_token(m, par.tp, cfg.kv_cache_dtype) * tokens
    return weights, act, per_req


def pinned_prefix_bytes(cfg: ServingConfig) -> list[int]:
    """KV bytes per stage of the shared prefix a replica holds once (:func:`shared_prefix_tokens`)."""
    shared = shared_prefix_tokens(cfg)
    if not shared:
        return [0] * cfg.parallel.pp
    m = cfg.model
    sd = sharded_dims(m, cfg.parallel.tp)
    plan = build_pipeline_stage_plan(m.num_layers, cfg.parallel.pp, cfg.partition, m.tie_word_embeddings)
    kvb = kv_dtype_bytes(m, cfg.kv_cache_dtype)
    return [stage_kv_bytes_for(m, sd, i, 1, shared, kvb) for i in plan.stage_infos]


def kv_budgets(cfg: ServingConfig, weights: list[int], act: list[int]) -> list[int]:
    """KV bytes the engine's memory rule leaves on each stage (module docstring)."""
    pol, hbm, r = cfg.policy, cfg.device.hbm_bytes, cfg.reserved_bytes
    if pol.mem_fraction_of == "total":
        return [int(pol.mem_fraction * hbm - w - a - r) for w, a in zip(weights, act)]
    if pol.mem_fraction_of == "static":  # activations and graphs live in the (1 - fraction) remainder
        return [int(pol.mem_fraction * hbm - w) for w in weights]
    return [int(pol.mem_fraction * (hbm - w - a - r)) for w, a in zip(weights, act)]


def memory_fit(cfg: ServingConfig) -> MemoryFit:
    """Per-stage memory of ``cfg.batch_size`` running requests under the engine's rules."""
    weights, act, per_req = stage_fixed(cfg)
    budgets = kv_budgets(cfg, weights, act)
    kv = [int(cfg.batch_size * p) + s for p, s in zip(per_req, pinned_prefix_bytes(cfg))]
    return MemoryFit(
        stage_weight_bytes=tuple(weights),
        stage_kv_bytes=tuple(kv),
        stage_activation_bytes=tuple(act),
        stage_kv_budget_bytes=tuple(budgets),
        reserved_bytes=cfg.reserved_bytes,
        budget_bytes=min(w + a + cfg.reserved_bytes + b for w, a, b in zip(weights, act, budgets)),
        kv_tokens_per_request=mean_request_kv_tokens(cfg.policy, own_lengths(cfg)),
    )


_MAX_BATCH: dict[tuple, tuple[ServingConfig, int]] = {}


def max_batch_for_memory(cfg: ServingConfig) -> int:
    """Largest concurrency per replica whose mean KV fits every stage's budget (0: not even one), and 0
    when the longest request alone (its full ISL + OSL) does not fit.

    Memoised like :func:`stage_fixed` (it reads no ``batch_size``): every point of a sweep asks for it."""
    key = _fixed_key(cfg)
    hit = _MAX_BATCH.get(key)
    if hit is None:
        if len(_MAX_BATCH) >= _FIXED_MAX:
            _MAX_BATCH.clear()
        hit = _MAX_BATCH[key] = (cfg, _max_batch_for_memory(cfg))
    return hit[1]


def _max_batch_for_memory(cfg: ServingConfig) -> int:
    weights, act, per_req = stage_fixed(cfg)
    budgets = kv_budgets(cfg, weights, act)
    if kv_capacity_tokens(cfg, budgets=budgets) < longest_request(cfg):
        return 0
    pinned = pinned_prefix_bytes(cfg)
    return max(0, min(int((b - s) // max(p, 1e-9)) for b, p, s in zip(budgets, per_req, pinned)))


def kv_capacity_tokens(cfg: ServingConfig, *, budgets: list[int] | None = None) -> int:
    """KV tokens one replica's cache holds (the request-level simulator's block pool), min over stages."""
    m, par = cfg.model, cfg.parallel
    if budgets is None:
        weights, act, _ = stage_fixed(cfg)
        budgets = kv_budgets(cfg, weights, act)
    sd = sharded_dims(m, par.tp)
    plan = build_pipeline_stage_plan(m.num_layers, par.pp, cfg.partition, m.tie_word_embeddings)
    kvb, ref = kv_dtype_bytes(m, cfg.kv_cache_dtype), max(1, longest_request(cfg))
    # bytes per token at the longest request's length (sliding-window layers stop growing at their window)
    per_tok = [stage_kv_bytes_for(m, sd, i, 1, ref, kvb) / ref for i in plan.stage_infos]
    per_tok[-1] += cfg.scheme.draft_kv_bytes_per_token(m, par.tp, cfg.kv_cache_dtype)
    return max(0, min(int(b // max(p, 1e-9)) for b, p in zip(budgets, per_tok)))


def memory_note(cfg: ServingConfig, b_mem: int) -> str:
    pol = cfg.policy
    rule = {
        "total": f"{pol.mem_fraction:.3g} x HBM - weights - profile-run activations - "
        f"{cfg.reserved_bytes / 2**30:.1f} GiB non-torch (assumption)",
        "static": f"{pol.mem_fraction:.3g} x HBM - weights (activations and CUDA graphs outside)",
        "free": f"{pol.mem_fraction:.3g} x (HBM - weights - activation buffers - "
        f"{cfg.reserved_bytes / 2**30:.1f} GiB reserve (assumption))",
    }[pol.mem_fraction_of]
    tokens = mean_request_kv_tokens(pol, own_lengths(cfg))
    shared = shared_prefix_tokens(cfg)
    draft = cfg.scheme.memory_note(cfg.model, cfg.parallel, cfg.kv_cache_dtype)
    return (
        f"memory: KV = {rule} (engine {pol.name}); {pol.admission_note()}: {tokens:.0f} KV tokens per running "
        "request on average"
        + (f" besides the {shared}-token shared prefix held once" if shared else "")
        + f"; memory allows {b_mem} requests/replica{draft}"
    )
