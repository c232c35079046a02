"""Speculative-decoding flags, as vLLM and SGLang spell them (edge module): one
:class:`~simcast.serving.speculative.SpeculativeSpec` from either set."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.cli.args import int_in
from simcast.core.errors import require
from simcast.inputs.limits import MAX_SPEC_TOKENS

SPEC_INT = int_in(1, MAX_SPEC_TOKENS, "speculative tokens per step")
SGLANG_FLAGS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
)


def add_speculative_args(p: argparse.ArgumentParser) -> None:
    """vLLM's ``--speculative-config`` JSON, SGLang's ``--speculative-*`` flags, and ``--spec-acceptance``."""
    g = p.add_argument_group("speculative decoding (vLLM's or SGLang's flags; docs/serving_modes.md)")
    g.add_argument(
        "--speculative-config",
        default=None,
        help='vLLM\'s JSON, e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\': method mtp (or '
        "deepseek_mtp, qwen3_next_mtp, ...), eagle, eagle3 or ngram [default: off]",
    )
    g.add_argument(
        "--speculative-algorithm",
        default=None,
        help="SGLang's: EAGLE, EAGLE3, NEXTN (the model's MTP layer) or NGRAM [default: off]",
    )
    g.add_argument(
        "--speculative-num-steps", type=SPEC_INT, default=None, help="SGLang's: draft passes per step [<= 64]"
    )
    g.add_argument(
        "--speculative-eagle-topk",
        type=SPEC_INT,
        default=None,
        help="SGLang's: drafts branched per pass; only 1 (a chain) is modelled [1]",
    )
    g.add_argument(
        "--speculative-num-draft-tokens",
        type=int_in(2, MAX_SPEC_TOKENS + 1, "tokens verified per step"),
        default=None,
        help="SGLang's: tokens verified per step (top-k 1: num_steps + 1; NGRAM: required) [<= 65]",
    )
    g.add_argument(
        "--speculative-draft-model-path", default=None, help="SGLang's: the draft's name (a label in the output)"
    )
    g.add_argument(
        "--spec-acceptance",
        default=None,
        help="acceptance rate of each draft token given the ones before were accepted: one rate (0.7) or "
        "one per speculative token (0.8,0.6,0.4) [default: the method's published figure, labelled]",
    )


def speculative_from_args(a: argparse.Namespace, model: Any) -> Any:
    """The :class:`SpeculativeSpec` the flags give (None: speculative decoding off); ``model``: the target
    (its MTP layers are vLLM's default ``num_speculative_tokens`` for MTP)."""
    from simcast.serving.speculative import from_sglang_flags, from_vllm_json, parse_acceptance, require_supported

    vllm = getattr(a, "speculative_config", None)
    sglang = {f: getattr(a, f, None) for f in SGLANG_FLAGS}
    rates = parse_acceptance(getattr(a, "spec_acceptance", None))
    given = [f for f, v in sglang.items() if v is not None]
    require(
        vllm is None or not given,
        "--speculative-config",
        vllm,
        f"give vLLM's --speculative-config or SGLang's --speculative-* flags, not both (also given: "
        f"--{given[0].replace('_', '-') if given else ''})",
    )
    mtp = getattr(model, "num_mtp_layers", 0)
    if vllm is not None:
        spec = from_vllm_json(vllm, rates, mtp_layers=mtp)
        require_supported(spec, model)
        return spec
    if given:
        require(
            sglang["speculative_algorithm"] is not None,
            "--speculative-algorithm",
            None,
            f"required with --{given[0].replace('_', '-')}",
        )
        spec = from_sglang_flags(
            str(sglang["speculative_algorithm"]),
            num_steps=sglang["speculative_num_steps"],
            topk=sglang["speculative_eagle_topk"],
            num_draft_tokens=sglang["speculative_num_draft_tokens"],
            rates=rates,
            draft_model=sglang["speculative_draft_model_path"] or "",
        )
        require_supported(spec, model)
        return spec
    require(not rates, "--spec-acceptance", getattr(a, "spec_acceptance", None), "needs a speculative method flag")
    return None
