"""Default acceptance of speculative drafts per method, per **dataset kind** and per draft depth, each with its
source: a table of published measurements (:data:`MEASUREMENTS`) and a labelled fallback where none exists.

``chat``: natural-language prompts (MT-bench, ShareGPT, GSM8K, the papers' own benchmarks). ``random``: prompts
of random token ids, what ``vllm bench serve --dataset-name random`` (and most public serving benchmarks) sends,
with ``--ignore-eos``: the target continues noise, and a draft trained on natural text agrees with it less often.
``bench-serve`` picks the kind from its dataset (random for ``--dataset-name random`` without a trace, chat
otherwise); ``simulate`` and ``serve-config`` assume chat. ``--spec-acceptance`` replaces any default;
``simcast calibrate-serving`` on the user's own runs is the way to measure it.

Rates are **conditional**: ``a_i`` = P(draft token i accepted | tokens 1..i-1 accepted), what
:class:`~simcast.serving.speculative.spec.SpeculativeSpec` takes. vLLM's "per-position acceptance" lines are
unconditional (position i counts only when every earlier one was accepted: ``p_i = a_1...a_i``), so a row that
publishes them is converted by ``a_i = p_i / p_(i-1)`` (:meth:`Measurement.conditional_rates`); depths past the
measured ones keep the deepest measured rate (labelled). Rows kept for reference but not used as a default say
why (``default_for``: empty).
"""

from __future__ import annotations

from dataclasses import dataclass

DATASET_KINDS = ("chat", "random")
"""What the prompts are: natural language (chat) or random token ids (random)."""


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """One published acceptance measurement.

    ``per_position_unconditional``: the source's per-position acceptance ``p_1..p_k`` (fraction of drafts whose
    i-th token was accepted, every earlier one accepted too), when it prints them; ``acceptance_length``: mean
    tokens per verify step (1 + accepted drafts) as the source prints it (0: not published);
    ``default_for``: the (method, dataset kind) pairs whose default this row sets (empty: kept for reference)."""

    method: str
    dataset_kind: str
    num_speculative_tokens: int
    model: str
    measured: str
    url: str
    per_position_unconditional: tuple[float, ...] = ()
    acceptance_length: float = 0.0
    default_for: tuple[tuple[str, str], ...] = ()

    def conditional_rates(self) -> tuple[float, ...]:
        """``a_i = p_i / p_(i-1)`` (``p_0`` = 1), rounded to 4 decimals."""
        out, prev = [], 1.0
        for p in self.per_position_unconditional:
            out.append(round(p / prev, 4) if prev > 0 else 0.0)
            prev = p
        return tuple(out)

    def source(self) -> str:
        """One line naming the row: model, what was measured, the numbers and the URL."""
        nums = []
        if self.per_position_unconditional:
            nums.append("per-position " + "/".join(f"{p:.2%}" for p in self.per_position_unconditional))
        if self.acceptance_length:
            nums.append(f"acceptance length {self.acceptance_length:g}")
        return f"{self.model}, {self.measured}: {', '.join(nums)} ({self.url})"


MEASUREMENTS: tuple[Measurement, ...] = (
    Measurement(
        method="mtp",
        dataset_kind="random",
        num_speculative_tokens=2,
        model="DeepSeek-V4-Flash MTP on vLLM 0.20.0 + the PR's probability draft proposal, 4x B200 TP4+EP",
        measured="vllm bench serve random dataset 1024 in / 256 out, 32 prompts, concurrency 1, temperature 1.0, "
        "ignore_eos, num_speculative_tokens 2",
        url="https://github.com/vllm-project/vllm/pull/41044",
        per_position_unconditional=(0.7002, 0.2874),
        acceptance_length=1.99,
        default_for=(("mtp", "random"),),
    ),
    Measurement(
        method="mtp",
        dataset_kind="chat",
        num_speculative_tokens=7,
        model="DeepSeek-V3-0324 original MTP module (the baseline row of nebius/MTP-DeepSeek-V3-0324's model card)",
        measured="mean over MT-bench, HumanEval and GSM8K, K = 7 draft tokens, temperature 0",
        url="https://huggingface.co/nebius/MTP-DeepSeek-V3-0324",
        acceptance_length=3.20,
        default_for=(),  # reference: a 7-deep chain; the 1-step chat default stays the technical report's
    ),
    Measurement(
        method="eagle3",
        dataset_kind="random",
        num_speculative_tokens=3,
        model="Kimi-K3 with lightseekorg/kimi-k3-eagle3-mla on TokenSpeed, top-k 1, 3 steps, 4 draft tokens",
        measured="50K-token random prompts, 500 output tokens, raw completion (the output degenerates into a "
        "two-token loop, which the source calls not representative)",
        url="https://github.com/lightseekorg/tokenspeed/issues/1305",
        acceptance_length=3.93,
        default_for=(),  # reference: a degenerate loop of one model, not a default for EAGLE-3 at large
    ),
    Measurement(
        method="eagle3",
        dataset_kind="random",
        num_speculative_tokens=3,
        model="Kimi-K3 with lightseekorg/kimi-k3-eagle3-mla on TokenSpeed, top-k 1, 3 steps, 4 draft tokens",
        measured="50K-token random prompts in the chat template, 500 output tokens",
        url="https://github.com/lightseekorg/tokenspeed/issues/1305",
        acceptance_length=1.94,
        default_for=(),  # reference: one model, 50K-token prompts; the EAGLE-3 random default stays the fallback
    ),
)
"""Published acceptance measurements (none from a reserved source: ``benchmarks/devset/reserved_sources.txt``)."""


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
"""Per-method default acceptance on **chat** prompts ``a_i`` (same at every position) and its source. n-gram has
none: its acceptance is the prompt/output overlap of the user's data, so ``--spec-acceptance`` is required."""


RANDOM_FACTOR = 0.6
"""FALLBACK for a method with no random-prompt measurement in :data:`MEASUREMENTS` (EAGLE, EAGLE-3): acceptance on
random-token prompts = this x the chat rate, per position. An ASSUMPTION, labelled in the output; the one
EAGLE-3 random-prompt source found (Kimi-K3, tokenspeed#1305) gives 1.94 tokens per step chat-templated but 3.93
raw (a degenerate loop), so it fixes no factor."""

TREE_NOTE = (
    "draft tree under the rank model (the target's token is the draft's rank-r candidate with probability "
    "a(1-a)^r, independently per depth: an approximation), E = sum over the tree's nodes of their path "
    "probabilities; verify step = the tree's nodes + 1 tokens per request"
)
"""How a draft tree's accepted length is modelled (:mod:`simcast.serving.speculative.tree`)."""


def measured_default(method: str, dataset: str) -> Measurement | None:
    """The table row that sets ``method``'s default on ``dataset`` prompts (None: no such row)."""
    rows = [m for m in MEASUREMENTS if (method, dataset) in m.default_for]
    return rows[0] if rows else None


def default_acceptance(method: str, dataset: str = "chat", k: int = 1) -> tuple[tuple[float, ...], str] | None:
    """The method's default per-position acceptance for ``k`` draft tokens on ``dataset`` prompts and its
    source: one rate (the same at every position) or one per position; None: the method has no default."""
    if method not in DEFAULT_ACCEPTANCE:
        return None
    a, src = DEFAULT_ACCEPTANCE[method]
    if dataset == "chat":
        return (a,), src
    row = measured_default(method, dataset)
    if row is not None:
        rates = row.conditional_rates()
        full = rates[:k] + (rates[-1],) * max(0, k - len(rates))
        held = (
            f"; positions {len(rates) + 1}-{k} keep the deepest measured rate {rates[-1]:g} (an extrapolation)"
            if k > len(rates)
            else ""
        )
        return full, (
            f"measured on random-token prompts: {row.source()}; conditional rates a_i = p_i / p_(i-1) = "
            f"{', '.join(f'{x:g}' for x in rates)}{held}"
        )
    return (round(a * RANDOM_FACTOR, 4),), (
        f"FALLBACK ASSUMPTION for random-token prompts (--dataset-name random): {RANDOM_FACTOR:g} x the chat rate "
        f"{a:g} (no usable published measurement of {method} on random prompts); the chat rate from {src}"
    )
