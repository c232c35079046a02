"""One replica's engine scheduler for the request-level simulator: queues, KV blocks, admission, preemption.

Each step is formed as the engine forms it (:mod:`simcast.engines.policy`): running requests first
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

**Prefix caching** (``EnginePolicy.prefix_caching``; vLLM V1's automatic prefix caching, SGLang's radix
cache, TensorRT-LLM's KV block reuse): a request's tokens are modelled abstractly, never as token ids.
``RequestSpec.prefix_id`` names a shared prefix of ``prefix_len`` tokens (``--random-prefix-len``, a trace's
``prefix_id`` column), and ``RequestSpec.parent`` a request whose whole sequence (prompt + output) the prompt
continues (a conversation's next turn). A hit is the longest run of cached **full** blocks from the start
(vLLM's block-hash chain; SGLang's page size 1 makes it token-exact), capped below the prompt so at least
one token is computed (``vllm/v1/core/kv_cache_manager.py get_computed_blocks``). A shared prefix's blocks
are held **once** while any running request references them (ref count) and are cached by the request
that schedules them (vLLM caches a block when it is allocated for scheduled tokens, so a request admitted
later in the same step hits it); when the last reference goes they join the free queue after the request's
own blocks (vLLM frees a request's blocks tail first, so the prefix is evicted last). Eviction: the free
queue is FIFO by push index (LRU by free time, as vLLM's ``FreeKVCacheBlockQueue`` and, approximately, SGLang's
LRU leaf eviction): a cached run survives until allocations have popped past it. Blocks touched out of the
queue's middle do not shift the others' positions (an approximation).

A request is schedulable from ``ready_s`` (when it is sent: the serving path — API server, tokenisation,
detokenise and stream — is added to its TTFT and E2E instead of delaying it, an approximation that keeps
which requests a step carries independent of the front end); an overlap scheduler has formed step n+1
while step n runs, so a request is seen one step later (``cutoff_s``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from simcast.engines.policy import EnginePolicy
from simcast.engines.sglang import SGLANG_RATIO
from simcast.serving.request_level.request_spec import RequestSpec as RequestSpec


@dataclass(eq=False)
class Prefix:
    """One replica's cache state of a shared prefix: blocks held while referenced, else where they sit in the
    free queue."""

    held: int = 0  # blocks in memory for it while refs > 0 (counted once in used_blocks)
    refs: int = 0  # running requests referencing it
    cache_top: int = 0  # push index just past its blocks once unreferenced
    cache_full: int = 0  # blocks it left in the free queue


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
    cache_base: int = 0  # shared-prefix blocks it referenced when it freed them (its own blocks follow)
    base: int = 0  # leading blocks it references in its shared prefix (held once, in Prefix.held)
    px: Prefix | None = None  # the shared prefix it references while running
    parent_req: Req | None = None  # the request whose sequence its prompt continues (RequestSpec.parent)
    cached_tokens: int = 0  # prompt tokens found in the prefix cache at its first admission
    spec_credit: float = 0.0  # speculative decoding: the fraction of a token carried to its next step
    decode_steps: int = 0  # decoding steps after its first token (streaming by iterations: request_level.intake)
    rid: int = -1  # the replica the router sent it to (-1: not sent yet)
    sent_token_s: float = 0.0  # when the engine last sent it tokens (streaming in chunks: request_level.intake)

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
    prefixes: dict = field(default_factory=dict)  # prefix_id -> Prefix
    hit_tokens: int = 0  # prompt tokens served from the prefix cache, over all admissions
    query_tokens: int = 0  # prompt tokens looked up, over all admissions
    decode_only: bool = False  # its last step ran decodes only (request_level.intake: receive interval)
    recv_count: int = 0  # steps counted toward the next intake of new requests (weights: request_level.intake)
    recv_s: float = 0.0  # arrivals up to this time were taken in at the last intake
    wait_count: int = 0  # steps new prompts have been held back (batch waiting)

    def __post_init__(self) -> None:
        self.pushed = self.kv_blocks

    @property
    def free_blocks(self) -> int:
        return self.kv_blocks - self.used_blocks

    def take(self, q: Req, n: int, blk: int) -> None:
        """Give ``q`` ``n`` more blocks from the head of the free queue; those inside its shared prefix, when
        it is the one extending it, become the prefix's (cached for the requests that follow)."""
        px = q.px
        if px is not None and n and q.blocks == 0 and q.base == px.held:
            pub = min(n, max(0, q.spec.prefix_len // blk - px.held))
            px.held += pub
            q.base += pub
            n -= pub
            self.used_blocks += pub
            self.popped += pub
        q.blocks += n
        self.used_blocks += n
        self.popped += n

    def release(self, q: Req, blk: int) -> None:
        """Free ``q``'s blocks (tail first, as vLLM frees them): they stay cached until reallocated; its shared
        prefix's blocks follow them into the free queue when no running request references it any more."""
        q.cache_full = max(0, min(q.blocks, q.computed // blk - q.base))
        q.cache_base = q.base
        self.pushed += q.blocks
        q.cache_top = self.pushed
        self.used_blocks -= q.blocks
        q.blocks = 0
        px = q.px
        if px is not None:
            px.refs -= 1
            if px.refs == 0:  # cached as far as the last holder computed it (conservative)
                px.cache_full = min(px.held, q.computed // blk)
                self.pushed += px.held
                px.cache_top = self.pushed
                self.used_blocks -= px.held
                px.held = 0
            q.px = None
            q.base = 0

    def present(self, top: int, full: int) -> int:
        """Blocks of a run freed up to push index ``top`` (``full`` of them) not yet reallocated."""
        return max(0, min(top - self.popped, full))


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


def _cache_hits(rep: Replica, q: Req, pol: EnginePolicy, blk: int) -> tuple[int, int, Prefix | None]:
    """Blocks a request finds in the prefix cache at admission (module docstring): ``(shared, own, prefix)``,
    the leading blocks of its shared prefix, then blocks it takes over as its own (after a preemption, those
    it freed; a conversation's next turn, those its parent freed), and the shared prefix it references.
    At least one token is always computed: the hit stops below the prompt."""
    spec = q.spec
    if (
        not pol.prefix_caching
        or q.blocks
        or q.computed
        or (spec.prefix_id < 0 and not q.preemptions and q.parent_req is None)
    ):
        return 0, 0, None
    cap = max(0, (spec.input_len + q.generated - 1) // blk)
    px = rep.prefixes.setdefault(spec.prefix_id, Prefix()) if spec.prefix_id >= 0 else None
    shared = min(_prefix_present(rep, q, blk), cap)
    own = 0
    if q.preemptions and q.cache_base == shared:
        own = min(rep.present(q.cache_top, q.cache_full), cap - shared)
    elif not q.preemptions:
        own = min(_parent_present(rep, q, blk, shared), cap - shared)
    return shared, max(0, own), px


def _prefix_present(rep: Replica, q: Req, blk: int) -> int:
    """Leading blocks of ``q``'s shared prefix ``rep`` holds or still caches."""
    px = rep.prefixes.get(q.spec.prefix_id) if q.spec.prefix_id >= 0 else None
    avail = 0 if px is None else px.held if px.refs else rep.present(px.cache_top, px.cache_full)
    return min(avail, q.spec.prefix_len // blk)


def _parent_present(rep: Replica, q: Req, blk: int, shared: int) -> int:
    """Blocks of a conversation turn's parent (past the ``shared`` prefix blocks) still cached on ``rep``; none
    when the parent ran on another replica (its blocks are there, not here)."""
    p = q.parent_req
    if p is None or p.rid != rep.rid or p.cache_base != shared:
        return 0
    return max(0, min(rep.present(p.cache_top, p.cache_full), q.spec.prefix_len // blk - shared))


def cached_prefix_blocks(rep: Replica, q: Req, blk: int) -> int:
    """Blocks of ``q``'s prompt ``rep``'s prefix cache holds now (its shared prefix, its parent's blocks):
    what a KV-aware router reads from the engine's KV events."""
    shared = _prefix_present(rep, q, blk)
    return shared + _parent_present(rep, q, blk, shared)


def _schedule_running(
    rep: Replica,
    pol: EnginePolicy,
    blk: int,
    left: int,
    *,
    prefill_first: bool,
    decode_tokens: int,
    prompt_cap: Callable[[int], int] | None,
) -> tuple[list[Req], list[tuple[Req, int]], int]:
    """The running requests' share of a step: each decode (its blocks, preempting when none are free) unless
    the step is prefill-only, and each partial prefill's next chunk; returns them and the budget ``left``."""
    decodes: list[Req] = []
    chunks: list[tuple[Req, int]] = []
    gne = pol.kv_admission == "guaranteed_no_evict"
    gone: set[Req] = set()  # preempted in this call (a set: `q in rep.running` made a step O(running^2))
    for q in list(rep.running):
        if q in gone:
            continue
        if not q.prefilling:
            if prefill_first:
                continue
            need = 0 if gne else max(0, -(-(q.computed + decode_tokens) // blk) - q.blocks - q.base)
            while need > rep.kv_blocks - rep.used_blocks and rep.running:
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
            if need:  # take(q, 0) changes nothing
                rep.take(q, need, blk)
            decodes.append(q)
            left -= decode_tokens
        elif left > 0:  # a partial prefill continues
            n = min(q.prefill_left, left) if pol.chunked_prefill else q.prefill_left
            if prompt_cap is not None and pol.chunked_prefill:
                n = min(n, prompt_cap(q.computed))
            grow = 0 if gne else blocks_for(q.computed + n, blk) - q.blocks - q.base
            if n <= left and grow <= rep.free_blocks:
                rep.take(q, grow, blk)  # reserve now so later admissions in this step see it
                chunks.append((q, n))
                left -= n
    return decodes, chunks, left


def _admit(rep: Replica, q: Req, blk: int, shared: int, own: int, px: Prefix | None, touch: int, pre: int) -> None:
    """Move ``q`` from the waiting queue to the running set with its cache hits (``shared`` prefix blocks,
    ``own`` blocks taken over; ``touch`` of them back in use) and ``pre`` tokens whose KV arrived by transfer;
    its new blocks follow."""
    hits = shared + own
    rep.waiting.popleft()
    rep.running.append(q)
    if px is not None:
        if not px.refs:  # touched out of the free queue (not from its head): held again
            px.held = shared
            px.cache_full = 0
        px.refs += 1
        q.px = px
        q.base = shared
    if own:  # touched out of the free queue, not taken from its head
        q.blocks += own
        if q.parent_req is not None and not q.preemptions:
            q.parent_req.cache_full = 0  # now this request's blocks
    rep.used_blocks += touch
    q.computed = hits * blk + pre
    rep.query_tokens += q.prefill_left + hits * blk
    rep.hit_tokens += hits * blk
    if q.admitted_s < 0:
        q.cached_tokens = hits * blk


def _admit_waiting(
    rep: Replica,
    pol: EnginePolicy,
    blk: int,
    left: int,
    max_seqs: int,
    *,
    cutoff_s: float,
    prompt_cap: Callable[[int], int] | None,
) -> list[tuple[Req, int]]:
    """Admission: waiting prompts, in order, while the sequence limit, the budget ``left`` and the engine's KV
    admission policy allow (module docstring); their first chunks."""
    chunks: list[tuple[Req, int]] = []
    gne = pol.kv_admission == "guaranteed_no_evict"
    ratio_mode = pol.kv_admission == "reserve_ratio"
    reserved = -1.0  # summed when first needed (a step with nobody to admit skips the sum over the running)
    while rep.waiting and left > 0 and len(rep.running) < max_seqs:
        if reserved < 0:
            reserved = sum(_clip(x.remaining_output()) for x in rep.running) * rep.ratio if ratio_mode else 0.0
        q = rep.waiting[0]
        if q.ready_s > cutoff_s:
            break
        shared, own, px = _cache_hits(rep, q, pol, blk)
        hits = shared + own
        touch = own + (shared if px is not None and not px.refs else 0)  # cached blocks back in use
        # a disaggregated decode engine: the prompt's KV arrived by transfer (once; a preempted request recomputes)
        pre = q.spec.kv_ready_tokens if not (q.preemptions or q.computed or q.blocks) else 0
        todo = q.prefill_left - hits * blk - pre
        n = min(todo, left) if pol.chunked_prefill else todo
        if prompt_cap is not None and pol.chunked_prefill:
            n = min(n, prompt_cap(q.computed + hits * blk))
        if gne:
            grow = blocks_for(q.spec.input_len + q.spec.output_len, blk) - hits
        else:
            grow = blocks_for(hits * blk + pre + n, blk) - hits
        extra = rep.ratio * _clip(q.remaining_output()) if ratio_mode else 0.0
        if n > left or grow + touch + (reserved + extra) / blk > rep.free_blocks:
            break
        _admit(rep, q, blk, shared, own, px, touch, pre)
        rep.take(q, grow, blk)
        reserved += extra
        if q.admitted_s < 0:
            q.admitted_s = rep.clock
        chunks.append((q, n))
        left -= n
    return chunks


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
    decodes, chunks, left = _schedule_running(
        rep, pol, blk, budget, prefill_first=prefill_first, decode_tokens=decode_tokens, prompt_cap=prompt_cap
    )
    if pol.kv_admission == "reserve_ratio" and decodes:
        floor = pol.new_token_ratio
        init = SGLANG_RATIO["init"]
        rep.ratio = max(floor, rep.ratio - (init - floor) / SGLANG_RATIO["decay_steps"])
    new = _admit_waiting(rep, pol, blk, left, max_seqs, cutoff_s=cutoff_s, prompt_cap=prompt_cap)
    return decodes, chunks + new
