"""Speculative-decoding flags, as vLLM and SGLang spell them (edge module): one
:class:`~simcast.serving.speculative.spec.SpeculativeSpec` from either set."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from simcast.api.speculative import SpeculativeOptions
from simcast.cli.option_flags import add_option_flags


def add_speculative_args(p: argparse.ArgumentParser) -> None:
    """vLLM's ``--speculative-config`` JSON, SGLang's ``--speculative-*`` flags, and ``--spec-acceptance``."""
    g = p.add_argument_group("speculative decoding (vLLM's or SGLang's flags; docs/serving_modes.md)")
    add_option_flags(g, SpeculativeOptions, tuple(f.name for f in fields(SpeculativeOptions)))


def speculative_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The speculative keywords of the API (:func:`simcast.api.speculative.speculative_spec`) from parsed
    flags (absent flags: None)."""
    return {f.name: getattr(a, f.name, None) for f in fields(SpeculativeOptions)}


def speculative_from_args(a: argparse.Namespace, model: Any) -> Any:
    """The :class:`SpeculativeSpec` the flags give (None: speculative decoding off); ``model``: the target
    (its MTP layers are vLLM's default ``num_speculative_tokens`` for MTP)."""
    from simcast.api.speculative import speculative_spec

    return speculative_spec(model, SpeculativeOptions(**speculative_kwargs(a)))
