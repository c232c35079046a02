"""Speculative decoding: the spec, its flags (vLLM's and SGLang's), the tokens a step emits, the draft.

A step with ``k`` speculative tokens runs the draft ``k`` times in sequence (MTP, EAGLE, EAGLE-3: one
forward of the draft per token, batch = the decoding requests, 1 token each; n-gram: a CPU lookup)
and the target once over ``k + 1`` tokens per decoding request (the verify step: attention with
``k + 1`` queries against the context, GEMMs with ``(k + 1)·B`` rows). With per-position acceptance
rates ``a_1..a_k`` (``a_i`` = P(draft token ``i`` accepted | the ones before it were)) a request
emits ``1 + E`` tokens per step, ``E = Σ_i Π_{j≤i} a_j`` (a mean rate ``α`` means ``a_i = α``).

Flags (both map onto one :class:`SpeculativeSpec`):

* vLLM ``--speculative-config '{"method": "eagle3", "num_speculative_tokens": 3, "model": ...}'``
  (``vllm/config/speculative.py`` @002e77c1: ``SpeculativeConfig.method``, ``num_speculative_tokens``,
  ``model``, ``prompt_lookup_max/min``; the MTP model types such as ``deepseek_mtp`` and
  ``qwen3_next_mtp``; ``num_speculative_tokens`` defaults to the draft config's ``n_predict``, which for
  MTP is the target's ``num_nextn_predict_layers``).
* SGLang ``--speculative-algorithm EAGLE|EAGLE3|NEXTN|NGRAM``, ``--speculative-num-steps`` (draft
  passes), ``--speculative-eagle-topk`` (branching per pass: 1 is a chain; > 1 a draft tree,
  :mod:`simcast.serving.speculative.tree`), ``--speculative-num-draft-tokens`` (tokens verified; with top-k 1
  SGLang sets it to ``num_steps + 1``: ``python/sglang/srt/server_args.py`` @469c63e5). vLLM's
  ``speculative_token_tree`` key: a draft tree given as its paths.

Default acceptance per method, from published non-reserved figures (labelled as a default wherever
it is used; ``--spec-acceptance`` replaces it): :data:`DEFAULT_ACCEPTANCE`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from simcast.core.errors import SimcastInputError, require
from simcast.inputs.files import unique_pairs
from simcast.inputs.limits import MAX_SPEC_TOKENS
from simcast.serving.speculative.acceptance import DEFAULT_ACCEPTANCE as DEFAULT_ACCEPTANCE  # re-exported
from simcast.serving.speculative.acceptance import TREE_NOTE, default_acceptance
from simcast.serving.speculative.tree import best_first_tree, chain, parse_vllm_tree, pass_widths
from simcast.serving.speculative.tree import expected_accepted as tree_expected

METHODS = ("mtp", "eagle", "eagle3", "ngram")
"""Speculative methods simcast models (a draft-model method, Medusa, suffix decoding: not modelled)."""

VLLM_METHODS: dict[str, str] = {
    "mtp": "mtp",
    "deepseek_mtp": "mtp",
    "qwen3_next_mtp": "mtp",
    "glm4_moe_mtp": "mtp",
    "mimo_mtp": "mtp",
    "ernie_mtp": "mtp",
    "longcat_flash_mtp": "mtp",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "ngram": "ngram",
}
"""vLLM ``SpeculativeConfig.method`` values (``vllm/config/speculative.py`` @002e77c1) -> simcast's method."""

SGLANG_ALGORITHMS: dict[str, str] = {"NEXTN": "mtp", "EAGLE": "eagle", "EAGLE3": "eagle3", "NGRAM": "ngram"}
"""SGLang ``--speculative-algorithm`` values -> simcast's method (SGLang runs NEXTN as EAGLE over the
model's own MTP layer; STANDALONE, a separate draft LLM, is not modelled)."""

VLLM_KEYS = (
    "method",
    "num_speculative_tokens",
    "model",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "draft_tensor_parallel_size",
    "speculative_token_tree",
)
"""``--speculative-config`` keys simcast reads; any other key changes what runs and is refused."""

NGRAM_CPU_S_PER_REQUEST = 5e-6
"""CPU time (s) of the n-gram (prompt-lookup) proposer per decoding request per step: an initial
assumption, not measured (vLLM's ``NgramProposer`` scans each request's tokens on the CPU)."""


@dataclass(frozen=True, kw_only=True)
class SpeculativeSpec:
    """Speculative decoding as the engine runs it: ``method`` (one of :data:`METHODS`), ``k`` =
    ``num_speculative_tokens`` draft tokens per step (a chain: top-k 1), ``acceptance`` = ``a_1..a_k``
    (dimensionless, in [0, 1]), ``draft_model`` (the name given, a label: the draft's shape comes from
    the target, :mod:`simcast.serving.speculative.draft`), and where the acceptance came from."""

    method: str
    num_speculative_tokens: int
    acceptance: tuple[float, ...]
    acceptance_source: str = "--spec-acceptance"
    draft_model: str = ""
    flags: str = ""  # the flags that gave it (vLLM --speculative-config or SGLang --speculative-*)
    note: str = ""  # an engine adjustment made while reading the flags
    tree: tuple[tuple[int, ...], ...] = ()  # draft tree paths (simcast.serving.speculative.tree); (): a chain of k
    widths: tuple[int, ...] = ()  # draft tokens per request in each of the k passes; (): 1 each (a chain)

    def __post_init__(self) -> None:
        require(self.method in METHODS, "speculative method", self.method, f"allowed: {', '.join(METHODS)}")
        k = self.num_speculative_tokens
        require(
            isinstance(k, int) and 1 <= k <= MAX_SPEC_TOKENS,
            "num_speculative_tokens",
            k,
            f"must be an integer in [1, {MAX_SPEC_TOKENS}]",
        )
        a = tuple(float(x) for x in self.acceptance)
        if len(a) == 1:
            a = a * k
        require(len(a) == k, "--spec-acceptance", self.acceptance, f"needs 1 value or one per speculative token ({k})")
        require(all(0.0 <= x <= 1.0 for x in a), "--spec-acceptance", self.acceptance, "each rate must be in [0, 1]")
        object.__setattr__(self, "acceptance", a)
        if self.tree:
            depth = max(len(p) for p in self.tree)
            require(depth <= k, "speculative tree", depth, f"its depth must be <= the draft passes ({k})")
            require(len(self.widths) in (0, k), "speculative tree", self.widths, f"one width per pass ({k})")

    @property
    def is_tree(self) -> bool:
        """Drafts other than the chain of k top candidates (SGLang top-k > 1, a vLLM token tree)."""
        return bool(self.tree) and self.tree != chain(self.k)

    @property
    def acceptance_given(self) -> bool:
        """Whether the user gave the rates (a flag or a YAML key) rather than the method's cited default."""
        return self.acceptance_source in ("--spec-acceptance", "speculative.acceptance")

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    @property
    def expected_accepted(self) -> float:
        """``E = Σ_i Π_{j≤i} a_j``: draft tokens accepted per step on average (a tree: its nodes' path
        probabilities summed, :func:`simcast.serving.speculative.tree.expected_accepted`)."""
        if self.is_tree:
            return tree_expected(self.tree, self.acceptance)
        e, p = 0.0, 1.0
        for a in self.acceptance:
            p *= a
            e += p
        return e

    @property
    def tokens_per_step(self) -> float:
        """Tokens one decoding request emits per step: the verified token plus the accepted drafts."""
        return 1.0 + self.expected_accepted

    @property
    def verify_tokens(self) -> int:
        """Query tokens per decoding request in the target's verify step: ``k + 1`` (a tree: its nodes + 1)."""
        return len(self.tree) + 1 if self.is_tree else self.num_speculative_tokens + 1

    def describe(self) -> str:
        rates = ",".join(f"{a:g}" for a in self.acceptance)
        src = f"given ({self.acceptance_source})" if self.acceptance_given else f"DEFAULT from {self.acceptance_source}"
        draft = {
            "mtp": "the model's own MTP layer",
            "eagle": "an EAGLE head",
            "eagle3": "an EAGLE-3 head",
            "ngram": "n-gram prompt lookup on the CPU (no draft model)",
        }[self.method]
        return (
            f"speculative decoding ({self.flags or self.method}): {self.method}, k={self.k} draft tokens per step "
            f"from {draft}{f' ({self.draft_model})' if self.draft_model else ''}; acceptance a_i = {rates} "
            f"[{src}]; E = {self.expected_accepted:.3f} accepted, {self.tokens_per_step:.3f} tokens per request per "
            f"step; each step = {self.k} draft pass(es) + a verify step of {self.verify_tokens} tokens per request"
            + (f"; {self.note}" if self.note else "")
            + (
                f"; {TREE_NOTE}: {len(self.tree)} draft nodes, draft tokens per pass {self.widths}"
                if self.is_tree
                else ""
            )
        )


def require_supported(spec: SpeculativeSpec, model: Any) -> None:
    """One line when ``model`` cannot run ``spec`` (MTP needs the model's own MTP layers)."""
    require(
        spec.method != "mtp" or getattr(model, "num_mtp_layers", 0) > 0,
        "speculative method",
        "mtp",
        f"model {getattr(model, 'name', '?')} has no MTP layers (num_nextn_predict_layers); use eagle, eagle3 or ngram",
    )


def parse_acceptance(text: str | None) -> tuple[float, ...]:
    """``--spec-acceptance 0.7`` or ``0.8,0.6,0.4`` -> rates (empty: not given)."""
    if text is None:
        return ()
    parts = [p.strip() for p in str(text).split(",")]
    out: list[float] = []
    for p in parts:
        try:
            v = float(p)
        except ValueError:
            raise SimcastInputError("--spec-acceptance", text, "comma-separated rates in [0, 1]") from None
        require(0.0 <= v <= 1.0, "--spec-acceptance", text, "each rate must be in [0, 1]")
        out.append(v)
    require(0 < len(out) <= MAX_SPEC_TOKENS, "--spec-acceptance", text, f"1 to {MAX_SPEC_TOKENS} rates")
    return tuple(out)


def _with_acceptance(
    method: str,
    k: int,
    rates: tuple[float, ...],
    given_by: str = "--spec-acceptance",
    *,
    dataset: str = "chat",
    topk: int = 1,
    draft_tokens: int = 0,
    paths: tuple[tuple[int, ...], ...] = (),
    **kw: Any,
) -> SpeculativeSpec:
    """The spec with the given ``rates`` or the method's default on ``dataset`` prompts, and its draft tree:
    vLLM's ``paths``, or SGLang's best-first tree of ``draft_tokens - 1`` nodes when ``topk > 1``."""
    if rates:
        a, src = rates, given_by
    else:
        d = default_acceptance(method, dataset, k)
        require(
            d is not None,
            "--spec-acceptance",
            None,
            f"{method} has no published default (its acceptance is your data's prompt/output overlap): give one",
        )
        assert d is not None  # checked above
        a, src = d
    full = a * k if len(a) == 1 else a
    tree: tuple[tuple[int, ...], ...] = ()
    widths: tuple[int, ...] = ()
    if paths:
        tree, widths = paths, pass_widths(paths)
    elif topk > 1 and len(full) == k:
        tree, widths = best_first_tree(full, topk, k, draft_tokens - 1), (1,) + (topk,) * (k - 1)
    return SpeculativeSpec(
        method=method,
        num_speculative_tokens=k,
        acceptance=a,
        acceptance_source=src,
        tree=tree,
        widths=widths,
        **kw,
    )


def from_vllm_json(
    text: str, rates: tuple[float, ...] = (), *, mtp_layers: int = 0, dataset: str = "chat"
) -> SpeculativeSpec:
    """vLLM's ``--speculative-config`` JSON -> the spec. ``mtp_layers``: the target's
    ``num_nextn_predict_layers`` (vLLM's default ``num_speculative_tokens`` for MTP)."""
    flag = "--speculative-config"
    try:
        cfg = json.loads(text, object_pairs_hook=unique_pairs)
    except ValueError as e:
        if str(e).startswith("duplicate key"):  # json.loads keeps the last one: which did the user mean?
            raise SimcastInputError(flag, text, f"{e}: give each key once") from None
        raise SimcastInputError(
            flag, text, 'a JSON object, e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\''
        ) from None
    except RecursionError:
        raise SimcastInputError(
            flag, text, 'a JSON object, e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\''
        ) from None
    require(isinstance(cfg, dict), flag, text, "a JSON object")
    return from_vllm_dict(cfg, rates, mtp_layers=mtp_layers, flag=flag, dataset=dataset)


def from_vllm_dict(
    cfg: dict[str, Any],
    rates: tuple[float, ...] = (),
    *,
    mtp_layers: int = 0,
    flag: str = "--speculative-config",
    dataset: str = "chat",
) -> SpeculativeSpec:
    """:func:`from_vllm_json` on a parsed mapping; errors name ``flag`` (a flag or a YAML key)."""
    sep = " " if flag.startswith("--") else "."
    unknown = sorted(set(cfg) - set(VLLM_KEYS))
    require(not unknown, flag, unknown, f"keys not modelled; allowed: {', '.join(VLLM_KEYS)}")
    model = cfg.get("model") or ""
    require(isinstance(model, str), f"{flag}{sep}model", model, "a draft model name (string)")
    method = cfg.get("method")
    if method is None and model:  # vLLM detects the method from the draft's name
        low = model.lower()
        method = "eagle3" if "eagle3" in low else "eagle" if "eagle" in low else None
    require(
        isinstance(method, str) and method in VLLM_METHODS,
        f"{flag}{sep}method",
        method,
        f"allowed: {', '.join(VLLM_METHODS)} (vLLM's draft_model, medusa, suffix, ... are not modelled)",
    )
    m = VLLM_METHODS[str(method)]
    k = cfg.get("num_speculative_tokens")
    if k is None and m == "mtp" and mtp_layers:
        k = mtp_layers
    tree_text = cfg.get("speculative_token_tree")
    paths = parse_vllm_tree(str(tree_text), f"{flag}{sep}speculative_token_tree") if tree_text else ()
    if paths:  # the tree's depth is the draft's passes (vLLM drafts one tree level per pass)
        k = max(len(p) for p in paths)
    require(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_SPEC_TOKENS,
        f"{flag}{sep}num_speculative_tokens",
        k,
        f"an integer in [1, {MAX_SPEC_TOKENS}] (required unless method is MTP on a model with MTP layers)",
    )
    for key in ("prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size"):
        v = cfg.get(key)
        require(
            v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1), f"{flag}{sep}{key}", v, ">= 1"
        )
    src = f"vLLM --speculative-config method={method}" if flag.startswith("--") else f"service YAML {flag}"
    assert isinstance(k, int)  # checked above
    given_by = "--spec-acceptance" if flag.startswith("--") else f"{flag}.acceptance"
    return _with_acceptance(m, k, rates, given_by, dataset=dataset, paths=paths, draft_model=model, flags=src)


def from_sglang_flags(
    algorithm: str,
    *,
    num_steps: int | None,
    topk: int | None,
    num_draft_tokens: int | None,
    rates: tuple[float, ...] = (),
    draft_model: str = "",
    dataset: str = "chat",
) -> SpeculativeSpec:
    """SGLang's ``--speculative-*`` flags -> the spec (module docstring for their meaning; top-k > 1: a
    draft tree, :mod:`simcast.serving.speculative.tree`)."""
    alg = str(algorithm).upper()
    require(
        alg in SGLANG_ALGORITHMS,
        "--speculative-algorithm",
        algorithm,
        f"allowed: {', '.join(SGLANG_ALGORITHMS)} (STANDALONE is not modelled)",
    )
    m = SGLANG_ALGORITHMS[alg]
    tree = topk is not None and topk > 1
    require(not tree or m != "ngram", "--speculative-eagle-topk", topk, "applies to EAGLE, EAGLE3 and NEXTN")
    note = ""
    if m == "ngram":
        require(
            num_draft_tokens is not None and num_draft_tokens >= 2,
            "--speculative-num-draft-tokens",
            num_draft_tokens,
            "NGRAM needs it: the tokens verified per step (>= 2: one plus the n-gram's drafts)",
        )
        assert num_draft_tokens is not None  # checked above
        k = num_draft_tokens - 1
    else:
        if num_steps is None and num_draft_tokens is not None:
            num_steps = num_draft_tokens - 1
        require(
            num_steps is not None and num_steps >= 1,
            "--speculative-num-steps",
            num_steps,
            "give the draft passes per step (>= 1); SGLang's automatic choice uses tree drafts, not modelled",
        )
        k = int(num_steps or 1)
        if tree:
            require(
                num_draft_tokens is not None and 2 <= num_draft_tokens <= k * int(topk or 1) + 1,
                "--speculative-num-draft-tokens",
                num_draft_tokens,
                f"required with --speculative-eagle-topk > 1: tokens verified per step, in [2, "
                f"num_steps x topk + 1 = {k * int(topk or 1) + 1}]",
            )
        elif num_draft_tokens is not None and num_draft_tokens != k + 1:
            note = (
                f"--speculative-num-draft-tokens {num_draft_tokens} set to num_steps + 1 = {k + 1}, as SGLang does "
                "with top-k 1"
            )
    require(1 <= k <= MAX_SPEC_TOKENS, "--speculative-num-steps", k, f"must be in [1, {MAX_SPEC_TOKENS}]")
    return _with_acceptance(
        m,
        k,
        rates,
        dataset=dataset,
        topk=int(topk or 1) if tree else 1,
        draft_tokens=int(num_draft_tokens or 0),
        draft_model=draft_model,
        flags=f"SGLang --speculative-algorithm {alg}" + (f" --speculative-eagle-topk {topk}" if tree else ""),
        note=note,
    )


def from_mapping(block: dict[str, Any], *, mtp_layers: int = 0, where: str = "speculative") -> SpeculativeSpec:
    """A service YAML ``speculative:`` block (vLLM's key names, types checked by its schema):
    ``method``, ``num_speculative_tokens``, optional ``model`` and ``acceptance`` (a list: one rate, or one
    per speculative token)."""
    rates = tuple(float(x) for x in block.get("acceptance") or ())
    rest = {k: v for k, v in block.items() if k != "acceptance"}
    return from_vllm_dict(rest, rates, mtp_layers=mtp_layers, flag=where)
