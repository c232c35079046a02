"""CLI wiring of the serving-engine flags every serving command shares (``--engine``, the engine's limits,
memory fraction, prefix caching) and their translation into API keywords (edge module)."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.api.common import MEM_FLAGS, EngineLimitOptions, engine_limits
from simcast.cli.args import BATCHED_TOKENS, FRACTION, REQUESTS, TOKENS
from simcast.engines import ENGINE_CHOICES, REGISTRY


def add_engine_args(p: argparse.ArgumentParser, default: str | None, help_default: str = "") -> None:
    """``--engine`` (alias ``--runtime``) and the engine limits a user may override."""
    p.add_argument(
        "--engine",
        "--runtime",
        dest="runtime",
        default=default,
        choices=ENGINE_CHOICES,
        help="serving engine whose scheduler defaults and CPU overheads apply (none: kernels only)"
        + (f" [default {help_default or default}]" if help_default or default else ""),
    )
    p.add_argument(
        "--max-num-batched-tokens",
        "--max-batched-tokens",
        "--chunked-prefill-size",
        dest="max_batched_tokens",
        type=BATCHED_TOKENS,
        default=None,
        help="token budget of one step, the prompt chunk size with chunked prefill (vLLM --max-num-batched-tokens, "
        "SGLang --chunked-prefill-size) [default: the engine's own; <= 10^9]",
    )
    p.add_argument(
        "--max-num-seqs",
        type=REQUESTS,
        default=None,
        help="running requests per step [default: the engine's own; <= 10^6]",
    )
    p.add_argument(
        "--engine-profile",
        default=None,
        help="engine profile YAML (simcast calibrate-serving --out): its CPU overheads and limits replace the "
        "engine's defaults",
    )
    mem = p.add_mutually_exclusive_group()
    for flag, engine, what in ((e.memory_flag, e.name, e.memory_flag_help) for e in REGISTRY.values() if e.memory_flag):
        mem.add_argument(
            flag,
            dest="mem_" + engine,
            type=FRACTION,
            default=None,
            help=f"{engine}'s memory flag: {what} [default: the engine's own; (0, 1]]",
        )
    p.add_argument(
        "--max-model-len",
        type=TOKENS,
        default=None,
        help="longest request the engine accepts (vLLM --max-model-len, SGLang --context-length, TensorRT-LLM "
        "--max_seq_len); longer requests are refused, and the KV cache must hold one [default: not set]",
    )
    pc = p.add_mutually_exclusive_group()
    pc.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        dest="prefix_caching",
        default=None,
        help="prefix caching (vLLM's flag; --no-enable-prefix-caching: off): prompts reuse cached KV blocks of "
        "shared prefixes [default: the engine's own: vLLM V1, SGLang radix cache and TensorRT-LLM block reuse on]",
    )
    pc.add_argument(
        "--disable-radix-cache",
        action="store_false",
        dest="prefix_caching",
        default=None,
        help="SGLang's flag: prefix caching off (the same setting as --no-enable-prefix-caching)",
    )


def engine_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The ServingConfig fields the engine flags of :func:`add_engine_args` set (absent flags: defaults)."""
    return engine_limits(EngineLimitOptions(**engine_limit_args(a)))


def serving_engine_args(a: argparse.Namespace) -> dict[str, Any]:
    """The :class:`simcast.api.common.ServingEngineOptions` keywords of parsed flags (``a.runtime``: the
    engine the command resolved)."""
    return dict(
        engine=a.runtime,
        max_num_batched_tokens=a.max_batched_tokens,
        max_num_seqs=a.max_num_seqs,
        engine_profile=a.engine_profile,
        **engine_limit_args(a),
    )


def engine_limit_args(a: argparse.Namespace) -> dict[str, Any]:
    """The engine-limit keywords of the API (:class:`simcast.api.common.EngineLimitOptions`) from parsed flags."""
    out: dict[str, Any] = {kw: getattr(a, "mem_" + engine, None) for engine, _, kw in MEM_FLAGS}
    out["max_model_len"] = getattr(a, "max_model_len", None)
    out["prefix_caching"] = getattr(a, "prefix_caching", None)
    return out
