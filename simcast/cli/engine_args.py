"""CLI wiring of the serving-engine flags every serving command shares (``--engine``, the engine's limits,
memory fraction, prefix caching) and their translation into API keywords (edge module)."""

from __future__ import annotations

import argparse
from typing import Any

from simcast.api.common import MEM_FLAGS, EngineLimitOptions, engine_limits
from simcast.cli.args import VALUE_TYPES, float_in, int_in
from simcast.engines import ENGINE_CHOICES, ENGINE_FLAGS
from simcast.engines.dynamo import backend_engine
from simcast.engines.flags import EngineFlag


def add_engine_args(
    p: argparse.ArgumentParser, default: str | None, help_default: str = "", settings: bool = True
) -> None:
    """``--engine`` (alias ``--runtime``) and every engine's flags, read from the engine modules
    (:data:`simcast.engines.ENGINE_FLAGS`, in ``--help`` order); ``settings`` False: without the engines' own
    settings (a command that does not use them)."""
    p.add_argument(
        "--engine",
        "--runtime",
        dest="runtime",
        default=default,
        choices=ENGINE_CHOICES,
        type=_engine_name,
        help="serving engine whose scheduler defaults and CPU overheads apply (none: kernels only; "
        "dynamo-sglang, dynamo-trtllm, dynamo-vllm: NVIDIA Dynamo's workers run that engine)"
        + (f" [default {help_default or default}]" if help_default or default else ""),
    )
    groups: dict[str, Any] = {}
    for f in ENGINE_FLAGS:
        if not settings and f.keyword and f.engine and f.group != "memory":
            continue
        if f.group and f.group not in groups:
            groups[f.group] = p.add_mutually_exclusive_group()
        (groups[f.group] if f.group else p).add_argument(*f.names, **_flag_kwargs(f))


def _engine_name(v: str) -> str:
    """``--engine``'s value: a Dynamo spelling as the engine its workers run (:mod:`simcast.engines.dynamo`)."""
    try:
        return backend_engine(v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"got {v!r}; {e}") from None


def _flag_kwargs(f: EngineFlag) -> dict[str, Any]:
    """The ``add_argument`` keywords of an engine flag: absent flags parse as None (the engine's default
    applies later, from its module), a switch as its action."""
    kw: dict[str, Any] = {"dest": f.dest, "default": None, "help": f.help}
    if f.action is not None:
        kw["action"] = argparse.BooleanOptionalAction if f.action == "boolean_optional" else f.action
        return kw
    if isinstance(f.check, str):
        kw["type"] = VALUE_TYPES[f.check]
    elif f.check is not None:
        lo, hi = f.check
        kw["type"] = int_in(int(lo), int(hi), f.unit) if f.integer else float_in(lo, hi, f.unit)
    return kw


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
        engine_settings=engine_settings(a) or None,
        **engine_limit_args(a),
    )


def engine_settings(a: argparse.Namespace) -> dict[str, Any]:
    """The engine's own settings given on the command line (keyword -> value; the flags of
    :attr:`simcast.engines.base.Engine.own_flags` with an API keyword)."""
    return {
        f.keyword: getattr(a, f.dest)
        for f in ENGINE_FLAGS
        if f.engine and f.keyword and f.group != "memory" and getattr(a, f.dest, None) is not None
    }


def engine_limit_args(a: argparse.Namespace) -> dict[str, Any]:
    """The engine-limit keywords of the API (:class:`simcast.api.common.EngineLimitOptions`) from parsed flags."""
    out: dict[str, Any] = {kw: getattr(a, "mem_" + engine, None) for engine, _, kw in MEM_FLAGS}
    out["max_model_len"] = getattr(a, "max_model_len", None)
    out["prefix_caching"] = getattr(a, "prefix_caching", None)
    return out
