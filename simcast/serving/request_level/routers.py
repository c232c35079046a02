"""Routers across DP replicas: which replica's waiting queue a request joins when it is sent.

Each policy is a :class:`Router` (``choose(q, reps, blk)`` returns the replica) built from a frozen settings
dataclass by :func:`make_router`. What a router sees of a replica is what the request-level scheduler
keeps (:mod:`simcast.serving.request_level.scheduler`): its running and waiting requests, its KV blocks in
use, and the blocks of the request's prompt its prefix cache holds now (:func:`cached_prefix_blocks`:
the shared prefix's blocks, and a conversation turn's parent's blocks when the parent ran there). Tokens
are abstract (a request is a shared prefix id, a parent and lengths), so a prefix match is computed from
those, never from token ids.

* ``round_robin``: the next replica in turn (SGLang's DP controller ``round_robin_scheduler``,
  ``python/sglang/srt/managers/data_parallel_controller.py``@fdd9edee; sgl-router ``round_robin``).
* ``least_loaded``: fewest running + waiting requests, lowest index first (simcast's rule since v1; vLLM's
  internal DP balancer ranks ``4 * waiting + running`` instead, ``vllm/v1/engine/core_client.py``
  ``DPLBAsyncMPClient.get_core_engine_for_request``@364631ab).
* ``random``: uniform, from a seeded generator (sgl-router ``random``): reproducible for a seed.
* ``cache_aware``: sgl-router's cache-aware policy (``sgl-router/src/policies/cache_aware.rs``@026f853b,
  defaults ``sgl-router/py_src/sglang_router/router_args.py``@e46dcd87: ``cache_threshold`` 0.3,
  ``balance_abs_threshold`` 64, ``balance_rel_threshold`` 1.5). Load = requests in flight on the worker;
  when ``max - min > abs`` and ``max > rel * min`` the request goes to the least loaded replica; otherwise
  to the replica whose approximate radix tree (the prompts the router itself sent there, not the engine's
  cache) matches the longest prefix when the match rate exceeds ``cache_threshold``, else to the replica
  with the smallest tree. Either way the prompt is inserted in the chosen replica's tree.
* ``prefix_aware``: llm-d's inference scheduler as its sample configuration runs it
  (``deploy/config/epp-prefix-cache-tracking-config.yaml``@dd59849a of llm-d/llm-d-inference-scheduler:
  ``prefix-cache-scorer`` weight 3 in cache-tracking mode, ``kv-cache-scorer`` weight 1, ``queue-scorer``
  weight 1, ``max-score-picker``): score = 3 * cached blocks / prompt blocks + 1 * (1 - KV use) +
  1 * (max waiting - waiting) / (max - min waiting) (1 when all queues are equal, gateway-api-inference-
  extension ``scorer/queue.go``); the highest score wins.
* ``kv_aware``: Dynamo's KV router (``lib/llm/src/kv_router/scheduler.rs``@db19bd2a, defaults
  ``config.rs``@0435b58a: ``overlap_score_weight`` 1.0, ``router_temperature`` 0): cost =
  weight * prefill blocks + decode blocks, where prefill blocks = (the replica's queued prompt tokens + the
  request's uncached tokens) / block and decode blocks = the replica's blocks in use + the request's new
  blocks; the lowest cost wins at temperature 0, else softmax over the min-max normalised costs.

Ties (approximation, stated): the engines break them by hash-map order or at random; here by fewest
requests in flight, then the lowest replica index, so runs are reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Literal, Protocol, get_args

import numpy as np

from simcast.core.errors import require
from simcast.serving.request_level.scheduler import Replica, Req, blocks_for, cached_prefix_blocks

RouterName = Literal["round_robin", "least_loaded", "random", "cache_aware", "prefix_aware", "kv_aware"]
ROUTERS: tuple[str, ...] = get_args(RouterName)
"""The router names ``--router`` accepts (bench-serve, serve-config, the API): the one declaration."""


def check_router(field: str, name: str) -> None:
    """Refuse an unknown router name (one ``SimcastInputError`` naming ``field``)."""
    require(name in ROUTERS, field, name, "allowed: " + ", ".join(ROUTERS))


def load(rep: Replica) -> int:
    """Requests in flight on ``rep`` (running + waiting)."""
    return len(rep.running) + len(rep.waiting)


def _pick(reps: Sequence[Replica], key: Sequence[float]) -> Replica:
    """The replica of lowest ``key``; ties by fewest requests in flight, then the lowest index."""
    return min(zip(key, reps, strict=True), key=lambda kr: (kr[0], load(kr[1]), kr[1].rid))[1]


class Router(Protocol):
    """A routing policy: the replica a request joins, given the replicas' state now."""

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica: ...


@dataclass(frozen=True, kw_only=True)
class RoundRobinSettings:
    """No settings: the replicas in turn."""


@dataclass(frozen=True, kw_only=True)
class LeastLoadedSettings:
    """No settings: fewest requests in flight."""


@dataclass(frozen=True, kw_only=True)
class RandomSettings:
    seed: int = 0  # of the generator drawing the replica


@dataclass(frozen=True, kw_only=True)
class CacheAwareSettings:
    """sgl-router's defaults (router_args.py@e46dcd87)."""

    cache_threshold: float = 0.3  # prefix match rate (0-1) above which the best-matching replica is taken
    balance_abs_threshold: int = 64  # requests: imbalanced when max - min load exceeds this ...
    balance_rel_threshold: float = 1.5  # ... and max load exceeds this times the min


@dataclass(frozen=True, kw_only=True)
class PrefixAwareSettings:
    """llm-d's sample scorer weights (epp-prefix-cache-tracking-config.yaml@dd59849a)."""

    prefix_weight: float = 3.0
    kv_cache_weight: float = 1.0
    queue_weight: float = 1.0


@dataclass(frozen=True, kw_only=True)
class KvAwareSettings:
    """Dynamo's KvRouterConfig defaults (config.rs@0435b58a)."""

    overlap_score_weight: float = 1.0
    router_temperature: float = 0.0
    seed: int = 0  # of the softmax draw (temperature > 0)


class RoundRobin:
    def __init__(self, s: RoundRobinSettings) -> None:
        self.settings, self.turn = s, 0

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica:
        rep = reps[self.turn % len(reps)]
        self.turn += 1
        return rep


class LeastLoaded:
    def __init__(self, s: LeastLoadedSettings) -> None:
        self.settings = s

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica:
        return min(reps, key=lambda x: (load(x), x.rid))


class RandomRouter:
    def __init__(self, s: RandomSettings) -> None:
        self.settings, self.rng = s, np.random.default_rng(s.seed)

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica:
        return reps[int(self.rng.integers(len(reps)))]


class CacheAware:
    """sgl-router's cache-aware policy over its approximate trees (module docstring). The tree of a replica is
    modelled by what was routed there: the shared prefixes, the requests (a conversation turn matches the
    prompt of its nearest earlier turn sent there) and its size in tokens (each prompt's tokens past its
    match). Approximations: the tree counts tokens, not characters; the LRU eviction at ``max_tree_size``
    (2^26 characters) is not modelled."""

    def __init__(self, s: CacheAwareSettings) -> None:
        self.settings = s
        self.where: dict[int, int] = {}  # request idx -> replica it was sent to
        self.prefixes: dict[int, set[int]] = {}  # replica -> shared prefix ids in its tree
        self.size: dict[int, int] = {}  # replica -> tokens in its tree

    def match(self, q: Req, rid: int) -> int:
        """Prompt tokens of ``q`` the tree of replica ``rid`` holds (its longest prefix match)."""
        got = q.spec.prefix_len if q.spec.prefix_id >= 0 and q.spec.prefix_id in self.prefixes.get(rid, ()) else 0
        a = q.parent_req
        while a is not None:  # each earlier turn's prompt starts this one; the nearest sent there is the longest
            if self.where.get(a.idx) == rid:
                return max(got, a.spec.input_len)
            a = a.parent_req
        return got

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica:
        s = self.settings
        loads = [load(r) for r in reps]
        hi, lo = max(loads), min(loads)
        if hi - lo > s.balance_abs_threshold and hi > lo * s.balance_rel_threshold:
            rep = _pick(reps, loads)  # shortest queue
        else:
            matches = [self.match(q, r.rid) for r in reps]
            best = max(matches)
            if q.spec.input_len and best / q.spec.input_len > s.cache_threshold:
                rep = _pick(reps, [-m for m in matches])
            else:
                rep = _pick(reps, [self.size.get(r.rid, 0) for r in reps])  # the smallest tree
        self.size[rep.rid] = self.size.get(rep.rid, 0) + q.spec.input_len - self.match(q, rep.rid)
        self.where[q.idx] = rep.rid
        if q.spec.prefix_id >= 0:
            self.prefixes.setdefault(rep.rid, set()).add(q.spec.prefix_id)
        return rep


class PrefixAware:
    """llm-d's weighted scorers (module docstring), the prefix score from the replica's cache state (its
    cache-tracking mode follows the engines' KV events; the simulator reads the cache directly)."""

    def __init__(self, s: PrefixAwareSettings) -> None:
        self.settings = s

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica:
        s = self.settings
        total = max(1, blocks_for(q.spec.input_len, blk))
        waits = [len(r.waiting) for r in reps]
        hi, lo = max(waits), min(waits)
        scores = [
            s.prefix_weight * cached_prefix_blocks(r, q, blk) / total
            + s.kv_cache_weight * (1.0 - r.used_blocks / max(1, r.kv_blocks))
            + s.queue_weight * ((hi - w) / (hi - lo) if hi > lo else 1.0)
            for r, w in zip(reps, waits, strict=True)
        ]
        return _pick(reps, [-x for x in scores])


def queued_prefill_tokens(rep: Replica) -> int:
    """Prompt tokens ``rep`` has still to prefill (waiting requests' whole prompts, running ones' rest)."""
    return sum(x.prefill_left for x in rep.running) + sum(x.prefill_left for x in rep.waiting)


class KvAware:
    """Dynamo's KV router cost (module docstring), the overlap from the replica's cache state (its KV events).
    Approximations: Dynamo counts the prefill tokens and blocks of the requests it routed (new tokens at routing,
    prompt blocks only by default); here a queued prompt counts whole and the blocks are those in use."""

    def __init__(self, s: KvAwareSettings) -> None:
        self.settings, self.rng = s, np.random.default_rng(s.seed)

    def cost(self, q: Req, rep: Replica, blk: int) -> float:
        """``overlap_score_weight`` x prefill blocks + decode blocks were ``q`` sent to ``rep`` (blocks)."""
        hit = cached_prefix_blocks(rep, q, blk)
        new_tokens = max(0, q.spec.input_len - hit * blk)
        prefill_blocks = (queued_prefill_tokens(rep) + new_tokens) / blk
        decode_blocks = rep.used_blocks + max(0, blocks_for(q.spec.input_len, blk) - hit)
        return self.settings.overlap_score_weight * prefill_blocks + decode_blocks

    def choose(self, q: Req, reps: Sequence[Replica], blk: int) -> Replica:
        costs = [self.cost(q, r, blk) for r in reps]
        t = self.settings.router_temperature
        lo, hi = min(costs), max(costs)
        if t == 0.0 or hi == lo:
            return _pick(reps, costs)
        w = np.array([math.exp(-(c - lo) / (hi - lo) / t) for c in costs])
        return reps[int(self.rng.choice(len(reps), p=w / w.sum()))]


RouterSettings = (
    RoundRobinSettings
    | LeastLoadedSettings
    | RandomSettings
    | CacheAwareSettings
    | PrefixAwareSettings
    | KvAwareSettings
)
_POLICIES: dict[str, tuple[type, type]] = {
    "round_robin": (RoundRobinSettings, RoundRobin),
    "least_loaded": (LeastLoadedSettings, LeastLoaded),
    "random": (RandomSettings, RandomRouter),
    "cache_aware": (CacheAwareSettings, CacheAware),
    "prefix_aware": (PrefixAwareSettings, PrefixAware),
    "kv_aware": (KvAwareSettings, KvAware),
}


def default_settings(name: str, *, seed: int = 0) -> RouterSettings:
    """The policy ``name``'s settings at its router's defaults (``seed`` for the policies that draw)."""
    check_router("--router", name)
    cls = _POLICIES[name][0]
    return cls(seed=seed) if "seed" in {f.name for f in fields(cls)} else cls()


def make_router(settings: RouterSettings) -> Router:
    """A fresh router (its own turn counter, generator, trees) of the policy ``settings`` belong to."""
    for s_cls, r_cls in _POLICIES.values():
        if isinstance(settings, s_cls):
            return r_cls(settings)
    raise TypeError(f"not a router's settings: {settings!r}")


def router_note(name: str) -> str:
    """The assumption line of a run's router."""
    notes = {
        "round_robin": "replicas in turn, each request on its own (conversation turns are not kept on one replica)",
        "least_loaded": "fewest requests in flight (running + waiting), each request on its own",
        "random": "a uniform draw per request (seeded)",
        "cache_aware": "SGLang sgl-router cache_aware (cache_threshold 0.3, balance_abs_threshold 64, "
        "balance_rel_threshold 1.5): its approximate trees modelled by the prompts routed to each replica "
        "(tokens, not characters; no tree eviction)",
        "prefix_aware": "llm-d scorers: prefix cache x3 (cached blocks / prompt blocks, read from the replica's "
        "cache), KV-cache use x1, queue x1",
        "kv_aware": "Dynamo KV router: cost = 1.0 x prefill blocks + decode blocks, overlap read from the "
        "replica's cache, temperature 0",
    }
    return f"router {name}: {notes[name]}; ties: fewest in flight, then lowest replica"
