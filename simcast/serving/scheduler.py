"""One replica's engine scheduler for the request-level simulator: queues, KV blocks, admission, preemption.

Each step is formed as the engine forms it (:mod:`simcast.serving.engines`): running requests first
(their decodes, unless the engine runs a prefill-only step, and partial prefills), then waiting prompts
while ``max_num_seqs``, the step's token budget and the engine's **KV admission policy** allow:

* ``on_demand`` / ``max_utilization`` (vLLM V1, TensorRT-LLM's option): a prompt chunk is admitted when
  its blocks are free; a decode that finds no free block preempts the most recently admitted request
  (recompute). With prefix caching (vLLM V1's default) the preempted request's blocks go back to the
  free queue tail-first and keep their hashes until reallocated, so on re-admission the full blocks of
  its prefix that no allocation has taken yet are cache hits (``vllm/v1/core/kv_cache_manager.py``;
  the free queue is modelled as FIFO by push index, blocks touched out of its middle not tracked).
* ``reserve_ratio`` (SGLang): also requires room for ``new_token_ratio`` × the remaining output (clipped)
  of every running request and of the new one; the ratio decays by ``(init - min) / decay_steps`` per
  decode step and, when a decode runs out of memory, the request with the fewest output tokens is
  retracted and the ratio set to ``(decoded + retract_steps · running) / max_new_tokens`` of the running set
  (``schedule_policy.py``, ``schedule_batch.py retract_decode``).
* ``guaranteed_no_evict`` (TensorRT-LLM's default): a request is admitted only with blocks for its whole
  ``ISL + OSL``; nothing is ever preempted.

A request is schedulable from ``ready_s`` (when it is sent: the serving path — API server, tokenisation,
detokenise and stream — is added to its TTFT and E2E instead of delaying it, an approximation that keeps
which requests a step carries independent of the front end); an overlap scheduler has formed step n+1
while step n runs, so a request is seen one step later (``cutoff_s``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from simcast.serving.engines import SGLANG_RATIO, EnginePolicy


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    arrival_s: float
    input_len: int
    output_len: int
    kv_ready_tokens: int = 0  # prompt tokens whose KV arrives from elsewhere (a prefill pool): admitted uncomputed


@dataclass(eq=False)
class Req:
    idx: int
    spec: RequestSpec
    computed: int = 0  # tokens whose KV is in the cache
    generated: int = 0
    blocks: int = 0
    prefilling: bool = True  # False once the prompt (or, after preemption, prompt + output so far) is computed
    first_token_s: float = -1.0
    token_s: float = 0.0  # when its latest token left the last stage
    preemptions: int = 0
    sent_s: float = 0.0  # when the client sent it (arrival, or later under --max-concurrency)
    ready_s: float = 0.0  # when it reaches the engine's queue (sent + the serving path)
    admitted_s: float = -1.0  # first admission
    cache_top: int = 0  # push index just past its freed blocks (prefix cache after a preemption)
    cache_full: int = 0  # full blocks it freed
    spec_credit: float = 0.0  # speculative decoding: the fraction of a token carried to its next step

    @property
    def prefill_left(self) -> int:
        """Tokens still to prefill: the prompt, or after a preemption the prompt and the tokens generated so far."""
        return self.spec.input_len + self.generated - self.computed if self.prefilling else 0

    def remaining_output(self) -> int:
        return max(0, self.spec.output_len - self.generated)


@dataclass
class Replica:
    rid: int
    kv_blocks: int
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    clock: float = 0.0
    used_blocks: int = 0
    pushed: int = 0  # blocks ever appended to the free queue (the initial pool counts)
    popped: int = 0  # blocks ever taken from its head
    ratio: float = 0.0  # SGLang's new_token_ratio now
    step_start_s: float = float("-inf")  # start of the step in flight (overlap schedulers)
    preemptions: int = 0

    def __post_init__(self) -> None:
        self.pushed = self.kv_blocks

    @property
    def free_blocks(self) -> int:
        return self.kv_blocks - self.used_blocks

    def take(self, q: Req, n: int) -> None:
        """Give ``q`` ``n`` more blocks from the head of the free queue."""
        q.blocks += n
        self.used_blocks += n
        self.popped += n

    def release(self, q: Req, blk: int) -> None:
        """Free ``q``'s blocks (tail first, as vLLM frees them): they stay cached until reallocated."""
        q.cache_full = min(q.blocks, q.computed // blk)
        self.pushed += q.blocks
        q.cache_top = self.pushed
        self.used_blocks -= q.blocks
        q.blocks = 0


def blocks_for(tokens: int, block: int) -> int:
    return -(-tokens // block)


def _clip(n: int) -> int:
    return min(n, int(SGLANG_RATIO["clip_max_new_tokens"]))


def _preempt(rep: Replica, pol: EnginePolicy, blk: int) -> Req:
    """Take one running request back to the head of the waiting queue (recompute later)."""
    if pol.kv_admission == "reserve_ratio":  # SGLang retracts the request with the fewest output tokens
        victim = min(reversed(rep.running), key=lambda x: (x.generated, -x.spec.input_len))
        rep.running.remove(victim)
    else:
        victim = rep.running.pop()  # most recently admitted (vLLM V1)
    rep.release(victim, blk)
    victim.computed = 0
    victim.prefilling = True
    victim.preemptions += 1
    rep.preemptions += 1
    rep.waiting.appendleft(victim)
    if pol.kv_admission == "reserve_ratio" and rep.running:
        decoded = sum(x.generated for x in rep.running)
        max_new = sum(x.spec.output_len for x in rep.running)
        rep.ratio = min(1.0, (decoded + SGLANG_RATIO["retract_steps"] * len(rep.running)) / max(1, max_new))
    return victim


def _cache_hits(rep: Replica, q: Req, pol: EnginePolicy, blk: int) -> int:
    """Blocks a re-admitted request finds in the prefix cache: after a preemption, the full blocks of its
    prefix still in the free queue (at least one token is always computed: the hit stops below the prompt)."""
    if not pol.prefix_caching or q.preemptions == 0 or q.blocks or q.computed:
        return 0
    present = max(0, min(q.cache_top - rep.popped, q.cache_full))
    return min(present, max(0, (q.spec.input_len + q.generated - 1) // blk))


def form_step(
    rep: Replica,
    pol: EnginePolicy,
    blk: int,
    budget: int,
    max_seqs: int,
    *,
    prefill_first: bool,
    cutoff_s: float,
    decode_tokens: int = 1,
    prompt_cap: Callable[[int], int] | None = None,
) -> tuple[list[Req], list[tuple[Req, int]]]:
    """Pick one step's work (module docstring); ``cutoff_s``: only requests ready by then are admitted;
    ``prompt_cap(prefix_tokens)``: most prompt tokens one request may schedule in this step once
    ``prefix_tokens`` of it are computed (SGLang's dynamic chunks; None: the budget alone).
    ``decode_tokens``: slots and budget tokens one decode takes (``k + 1`` with speculative decoding: the
    verified token and ``k`` lookahead slots, as vLLM allocates and counts them)."""
    decodes: list[Req] = []
    chunks: list[tuple[Req, int]] = []
    left = budget
    gne = pol.kv_admission == "guaranteed_no_evict"
    ratio_mode = pol.kv_admission == "reserve_ratio"
    gone: set[Req] = set()  # preempted in this call (a set: `q in rep.running` made a step O(running^2))
    for q in list(rep.running):
        if q in gone:
            continue
        if not q.prefilling:
            if prefill_first:
                continue
            need = 0 if gne else max(0, blocks_for(q.computed + decode_tokens, blk) - q.blocks)
            while need > rep.free_blocks and rep.running:
                victim = _preempt(rep, pol, blk)
                gone.add(victim)
                if victim in decodes:
                    decodes.remove(victim)
                    left += decode_tokens
                chunks = [(x, n) for x, n in chunks if x is not victim]
                if victim is q:
                    break
            if q in gone:
                continue
            rep.take(q, need)
            decodes.append(q)
            left -= decode_tokens
        elif left > 0:  # a partial prefill continues
            n = min(q.prefill_left, left) if pol.chunked_prefill else q.prefill_left
            if prompt_cap is not None and pol.chunked_prefill:
                n = min(n, prompt_cap(q.computed))
            grow = 0 if gne else blocks_for(q.computed + n, blk) - q.blocks
            if n <= left and grow <= rep.free_blocks:
                rep.take(q, grow)  # reserve now so later admissions in this step see it
                chunks.append((q, n))
                left -= n
    if ratio_mode and decodes:
        floor = pol.new_token_ratio
        init = SGLANG_RATIO["init"]
        rep.ratio = max(floor, rep.ratio - (init - floor) / SGLANG_RATIO["decay_steps"])
    reserved = sum(_clip(x.remaining_output()) for x in rep.running) * rep.ratio if ratio_mode else 0.0
    while rep.waiting and left > 0 and len(rep.running) < max_seqs:
        q = rep.waiting[0]
        if q.ready_s > cutoff_s:
            break
        hits = _cache_hits(rep, q, pol, blk)
        # a disaggregated decode engine: the prompt's KV arrived by transfer (once; a preempted request recomputes)
        pre = q.spec.kv_ready_tokens if not (q.preemptions or q.computed or q.blocks) else 0
        todo = q.prefill_left - hits * blk - pre
        n = min(todo, left) if pol.chunked_prefill else todo
        if prompt_cap is not None and pol.chunked_prefill:
            n = min(n, prompt_cap(q.computed + hits * blk))
        if gne:
            grow = blocks_for(q.spec.input_len + q.spec.output_len, blk) - q.blocks
        else:
            grow = blocks_for(q.computed + hits * blk + pre + n, blk) - q.blocks - hits
        extra = rep.ratio * _clip(q.remaining_output()) if ratio_mode else 0.0
        if n > left or grow + hits + (reserved + extra) / blk > rep.free_blocks:
            break
        rep.waiting.popleft()
        rep.running.append(q)
        if hits:  # touched out of the free queue, not taken from its head
            q.blocks += hits
            rep.used_blocks += hits
            q.computed = hits * blk
        q.computed += pre
        rep.take(q, grow)
        reserved += extra
        if q.admitted_s < 0:
            q.admitted_s = rep.clock
        chunks.append((q, n))
        left -= n
    return decodes, chunks
