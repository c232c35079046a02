"""Speculative-decoding flags, as vLLM and SGLang spell them (edge module): one
:class:`~simcast.serving.speculative.spec.SpeculativeSpec` from either set."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from simcast.api.speculative import SpeculativeOptions
from simcast.cli.args import int_in
from simcast.inputs.limits import MAX_SPEC_TOKENS

SPEC_INT = int_in(1, MAX_SPEC_TOKENS, "speculative tokens per step")


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


def speculative_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The speculative keywords of the API (:func:`simcast.api.speculative.speculative_spec`) from parsed
    flags (absent flags: None)."""
    return {f.name: getattr(a, f.name, None) for f in fields(SpeculativeOptions)}


def speculative_from_args(a: argparse.Namespace, model: Any) -> Any:
    """The :class:`SpeculativeSpec` the flags give (None: speculative decoding off); ``model``: the target
    (its MTP layers are vLLM's default ``num_speculative_tokens`` for MTP)."""
    from simcast.api.speculative import speculative_spec

    return speculative_spec(model, SpeculativeOptions(**speculative_kwargs(a)))
