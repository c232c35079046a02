"""Default acceptance of speculative drafts per method and per **dataset kind**, each with its source.

``chat``: natural-language prompts (MT-bench, ShareGPT, the papers' own benchmarks) — the published figures
of :data:`DEFAULT_ACCEPTANCE`. ``random``: prompts of random token ids, what ``vllm bench serve --dataset-name
random`` (and most public serving benchmarks) sends, with ``--ignore-eos``: the target continues noise, and a
draft head trained on chat data agrees with it far less often. No paper measures acceptance on random-token
prompts, so the random rates are an **assumption**, labelled as such wherever used: :data:`RANDOM_FACTOR` times
the chat rate (``--spec-acceptance`` replaces either; ``simcast calibrate-serving`` on the user's own runs is the
way to measure it). ``bench-serve`` picks the kind from its dataset (random for ``--dataset-name random``
without a trace, chat otherwise); ``simulate`` and ``serve-config`` assume chat.
"""

from __future__ import annotations

DATASET_KINDS = ("chat", "random")
"""What the prompts are: natural language (chat) or random token ids (random)."""

DEFAULT_ACCEPTANCE: dict[str, tuple[float, str]] = {
    "mtp": (
        0.85,
        "DeepSeek-V3 Technical Report (arXiv 2412.19437, sec. 5.4.3): the second token predicted by MTP is "
        "accepted 85-90% of the time across generation topics; the lower end, for every position",
    ),
    "eagle": (
        0.80,
        "EAGLE paper (Li et al., ICML 2024, arXiv 2401.15077): feature-level drafting reaches a draft "
        "accuracy of about 0.8 on MT-bench; for every position",
    ),
    "eagle3": (
        0.75,
        "EAGLE-3 paper (Li et al., arXiv 2503.01840): its acceptance rate on MT-bench (LLaMA-Instruct 3.1 8B) "
        "stays roughly flat at about 0.75-0.8 as the draft goes deeper; the lower end, for every position "
        "(read approximately from the paper's figure)",
    ),
}
"""Per-method default acceptance ``a_i`` (same at every position) and its source. n-gram has none: its
acceptance is the prompt/output overlap of the user's data, so ``--spec-acceptance`` is required."""


RANDOM_FACTOR = 0.6
"""Acceptance on random-token prompts / acceptance on chat, per position: an initial ASSUMPTION (no published
measurement; random prompts accept "far fewer" drafts), to be calibrated."""

TREE_NOTE = (
    "draft tree under the rank model (the target's token is the draft's rank-r candidate with probability "
    "a(1-a)^r, independently per depth: an approximation), E = sum over the tree's nodes of their path "
    "probabilities; verify step = the tree's nodes + 1 tokens per request"
)
"""How a draft tree's accepted length is modelled (:mod:`simcast.serving.speculative.tree`)."""


def default_acceptance(method: str, dataset: str = "chat") -> tuple[float, str] | None:
    """The method's default per-position acceptance on ``dataset`` prompts and its source (None: no default)."""
    if method not in DEFAULT_ACCEPTANCE:
        return None
    a, src = DEFAULT_ACCEPTANCE[method]
    if dataset == "chat":
        return a, src
    return (
        round(a * RANDOM_FACTOR, 4),
        f"ASSUMPTION for random-token prompts (--dataset-name random): {RANDOM_FACTOR:g} x the chat rate {a:g} "
        f"(no published measurement on random prompts); the chat rate from {src}",
    )
