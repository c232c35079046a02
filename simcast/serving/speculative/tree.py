"""Speculative draft trees: the expected accepted length of a tree of draft tokens, the tree SGLang's EAGLE
builds for ``--speculative-eagle-topk > 1``, vLLM's ``speculative_token_tree``, and the draft's tokens per pass.

A tree is a set of **paths**: a node at depth ``d`` is the tuple of its ancestors' and its own candidate ranks
``(r_1, ..., r_d)`` (0: the draft's most likely token at that position given its parent), as vLLM writes
``speculative_token_tree`` (``vllm/config/speculative.py`` @002e77c1: a literal list of tuples; a chain of k
tokens is ``[(0,), (0, 0), ...]``). The verify step accepts the longest path whose every token the target
confirms.

**Rank model** (an approximation, stated wherever a tree is used): at depth ``d`` the target's token is the
draft's rank-``r`` candidate with probability ``a_d (1 - a_d)^r`` (``a_d``: the per-position acceptance of the
draft's top token, the chain's rate), independently of the ranks above. A node is accepted when its whole
path is, so the expected accepted drafts are ``E = Σ_nodes Π_j a_j (1 - a_j)^{r_j}``; for a chain every
``r = 0`` and ``E = Σ_i Π_{j≤i} a_j``, the chain's formula exactly. Branching at rank ``r`` adds what the top
candidate missed, geometrically less for each further rank (the rate at which a top-``b`` set holds the target's
token is ``1 - (1 - a)^b``).

**SGLang's tree** (``python/sglang/srt/speculative/build_eagle_tree.py`` @009db01a,
``build_tree_kernel_efficient_preprocess``): ``--speculative-num-steps`` draft passes, each expanding ``topk``
candidates per kept node, then the ``num_draft_tokens - 1`` candidates with the highest cumulative draft score
are verified with the root (``num_verify_tokens = num_draft_tokens`` query tokens per request). Modelled as the
best-first tree of ``num_draft_tokens - 1`` nodes under the rank model (ranks < ``topk``, depth <=
``num_steps``): the draft's cumulative scores taken as the rank model's path probabilities. The draft's passes
run ``1`` token per request first and ``topk`` after (each kept branch extended once per pass).
"""

from __future__ import annotations

import ast
import heapq
from collections.abc import Sequence

from simcast.core.errors import SimcastInputError, require

Path = tuple[int, ...]
"""A node: its candidate rank at each depth from the root (0-based)."""


def path_probability(path: Path, acceptance: Sequence[float]) -> float:
    """The rank model's probability that every token on ``path`` is accepted (module docstring)."""
    p = 1.0
    for d, r in enumerate(path):
        a = acceptance[d]
        p *= a * (1.0 - a) ** r
    return p


def expected_accepted(paths: Sequence[Path], acceptance: Sequence[float]) -> float:
    """Expected accepted draft tokens per step of the tree ``paths`` (module docstring), dimensionless."""
    return sum(path_probability(p, acceptance) for p in paths)


def best_first_tree(acceptance: Sequence[float], topk: int, depth: int, nodes: int) -> tuple[Path, ...]:
    """The ``nodes`` most probable paths with ranks < ``topk`` and at most ``depth`` deep (a parent is always
    at least as probable as its children, so the set is a tree): SGLang's selection of the highest cumulative
    scores, under the rank model."""
    heap: list[tuple[float, Path]] = [(-path_probability((r,), acceptance), (r,)) for r in range(topk)]
    heapq.heapify(heap)
    out: list[Path] = []
    while heap and len(out) < nodes:
        _, p = heapq.heappop(heap)
        out.append(p)
        if len(p) < depth:
            for r in range(topk):
                c = (*p, r)
                heapq.heappush(heap, (-path_probability(c, acceptance), c))
    return tuple(sorted(out, key=lambda q: (len(q), q)))


def chain(k: int) -> tuple[Path, ...]:
    """The chain of ``k`` draft tokens as a tree."""
    return tuple((0,) * i for i in range(1, k + 1))


def parse_vllm_tree(text: str, flag: str) -> tuple[Path, ...]:
    """vLLM's ``speculative_token_tree`` literal (``"[(0,), (1,), (0, 0)]"``) -> its paths, checked: ranks >= 0,
    every node's parent present; one error naming ``flag`` otherwise."""
    try:
        raw = ast.literal_eval(text)
        paths = tuple(sorted({tuple(int(r) for r in p) for p in raw}, key=lambda q: (len(q), q)))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise SimcastInputError(flag, text, "a list of tuples of candidate ranks, e.g. [(0,), (1,), (0, 0)]") from None
    require(bool(paths) and all(p for p in paths), flag, text, "at least one non-empty path")
    have = set(paths)
    for p in paths:
        require(all(r >= 0 for r in p), flag, text, "ranks must be >= 0")
        require(len(p) == 1 or p[:-1] in have, flag, text, f"node {p} has no parent {p[:-1]} in the tree")
    return paths


def pass_widths(paths: Sequence[Path]) -> tuple[int, ...]:
    """Tokens per request the draft runs in each of its passes: pass ``d`` drafts the children of the nodes at
    depth ``d - 1`` (the root: 1), so it runs one token per such node that has children."""
    depth = max(len(p) for p in paths)
    parents = [{p[:-1] for p in paths if len(p) == d} for d in range(1, depth + 1)]
    return tuple(len(s) for s in parents)
