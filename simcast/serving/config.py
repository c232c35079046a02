"""The configuration of one serving deployment: the workload and the layout, engine and memory flags.

Frozen inputs of the steady-state model (:mod:`simcast.serving.steady.model`), the request-level simulator and
the search; :attr:`ServingConfig.policy` resolves the engine's record (:mod:`simcast.engines.policy`)
with the user's overrides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from simcast.core.chunking import SGLANG_SMOOTH_FACTOR
from simcast.core.errors import require
from simcast.core.specs import GIB
from simcast.deploy.deployment import Deployment, OnDeployment
from simcast.engines import REGISTRY, get_engine
from simcast.engines.policy import MEMORY_FLAGS, EnginePolicy, engine_policy
from simcast.engines.records import USAGE
from simcast.inputs.limits import PREFIX_HIT_RATE_RANGE, prefix_hit_rate_ok
from simcast.serving.speculative.scheme import SpeculativeScheme, scheme_of
from simcast.serving.speculative.spec import SpeculativeSpec, require_supported


def _dynamic_chunking_engine(name: str) -> bool:
    """Whether engine ``name`` has ``--enable-dynamic-chunking`` (SGLang's; an unknown name is refused later)."""
    e = REGISTRY.get(name)
    return e is not None and e.pp_dynamic_chunking


SERVING_MODES = ("agg", "disagg", "both")
"""Aggregated (prefill and decode in one engine), disaggregated (:mod:`simcast.serving.disagg.steady`), or both
(``optimize --serving-mode``; a service YAML's ``serving_mode`` is agg or disagg)."""


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Request lengths: fixed ``input_length``/``output_length`` (tokens), or a ``length_mix`` of
    (weight, ISL, OSL) rows (a dataset's length distribution) whose means are the two lengths."""

    input_length: int
    output_length: int
    max_batched_tokens: int = 0  # 0: the engine's max_num_batched_tokens
    length_mix: tuple[tuple[float, int, int], ...] = ()
    name: str = ""  # the dataset the mix came from ("" : fixed lengths)
    prefix_hit_rate: float = 0.0  # share of prompt tokens found in the prefix cache (a prefix every prompt shares)

    def __post_init__(self) -> None:
        require(
            prefix_hit_rate_ok(self.prefix_hit_rate), "--prefix-hit-rate", self.prefix_hit_rate, PREFIX_HIT_RATE_RANGE
        )
        require(self.input_length >= 1, "--input-length", self.input_length, "must be >= 1")
        require(self.output_length >= 1, "--output-length", self.output_length, "must be >= 1")
        require(self.max_batched_tokens >= 0, "--max-batched-tokens", self.max_batched_tokens, "must be >= 0")
        for w, i, o in self.length_mix:
            require(w >= 0 and i >= 1 and o >= 1, "workload.length_mix", (w, i, o), "weights >= 0, lengths >= 1")


@dataclass(frozen=True, kw_only=True)
class ServingConfig(OnDeployment):
    """A :class:`Deployment` serving a :class:`Workload` at ``batch_size`` requests per replica, with the
    engine's serving settings (the engine's defaults where 0/None)."""

    deployment: Deployment  # the model, devices, layout, partition, engine, KV dtype, expert imbalance
    workload: Workload
    batch_size: int  # concurrency per replica
    decode_microbatches: int = 0  # 0: pp
    max_num_seqs: int = 0  # 0: the engine's default
    engine_profile: EnginePolicy | None = None  # a calibrated profile replaces the named engine's defaults
    reserved_bytes: int = GIB  # non-torch memory outside the KV cache (NCCL buffers, workspaces): assumption
    mem_fraction: float = 0.0  # the engine's memory flag (0: its default); checked against the engine's rule
    mem_flag: str = ""  # which flag gave mem_fraction (--gpu-memory-utilization, --mem-fraction-static, ...)
    max_model_len: int = 0  # 0: not set (the workload's longest request is accepted)
    usage: str = "server"  # server (vllm serve) | offline (LLM class, vllm bench throughput)
    dynamic_chunking: bool = False  # SGLang --enable-dynamic-chunking (acts at PP > 1 only, as in SGLang)
    dynamic_chunking_smooth_factor: float = SGLANG_SMOOTH_FACTOR  # SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR
    prefix_caching: bool | None = None  # None: the engine's default (--enable-prefix-caching, --disable-radix-cache)
    speculative: SpeculativeSpec | None = None  # speculative decoding (:mod:`simcast.serving.speculative.spec`)

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, "batch_size", self.batch_size, "must be >= 1")
        require(
            not self.dynamic_chunking
            or _dynamic_chunking_engine(self.engine_profile.name if self.engine_profile else self.runtime),
            "--enable-dynamic-chunking",
            self.runtime,
            "is SGLang's flag: needs --engine sglang",
        )
        require(
            0 <= self.dynamic_chunking_smooth_factor <= 1,
            "--dynamic-chunking-smooth-factor",
            self.dynamic_chunking_smooth_factor,
            "must be in [0, 1]",
        )
        require(self.max_num_seqs >= 0, "--max-num-seqs", self.max_num_seqs, "must be >= 0")
        require(0 <= self.mem_fraction <= 1, self.mem_flag or "mem_fraction", self.mem_fraction, "must be in (0, 1]")
        require(self.usage in USAGE, "usage", self.usage, f"allowed: {', '.join(USAGE)}")
        if self.mem_flag:
            owner = MEMORY_FLAGS.get(self.mem_flag) or MEMORY_FLAGS.get("--" + self.mem_flag.replace("_", "-"))
            engine = self.engine_profile.name if self.engine_profile else self.runtime
            mine = get_engine(engine).record.flags.get("memory", "")
            require(
                get_engine(engine).accepts_memory_flag(owner),
                self.mem_flag,
                self.mem_fraction,
                f"is engine {owner}'s memory flag; with --engine {engine} use {mine}",
            )
        if self.speculative is not None:
            require_supported(self.speculative, self.model)
        if self.max_model_len:
            longest = max(
                [self.workload.input_length + self.workload.output_length]
                + [i + o for _, i, o in self.workload.length_mix]
            )
            require(
                longest <= self.max_model_len,
                "--max-model-len",
                self.max_model_len,
                f"the workload's longest request has {longest} tokens; the engine would refuse it",
            )

    def redeployed(self, **changes: Any) -> ServingConfig:
        """This config on its deployment with ``changes`` (``parallel``, ``partition``, ``engine``, ...)."""
        return replace(self, deployment=replace(self.deployment, **changes))

    @property
    def runtime(self) -> str:
        """The engine: vllm | sglang | trtllm | none."""
        return self.deployment.engine

    @property
    def engine(self) -> str:
        return self.runtime

    @property
    def hit_rate(self) -> float:
        """The workload's prefix hit rate when the engine caches prefixes, else 0."""
        h = self.workload.prefix_hit_rate
        return h if h and self.policy.prefix_caching else 0.0  # h first: no policy look-up without a hit rate

    def cached_tokens(self, input_len: float) -> int:
        """Prompt tokens of an ``input_len`` prompt served from the prefix cache (at least one computed)."""
        return min(int(self.hit_rate * input_len), max(0, math.ceil(input_len) - 1))

    @property
    def scheme(self) -> SpeculativeScheme:
        """Speculative decoding as the serving code calls it (:class:`NoSpeculation` when off)."""
        return scheme_of(self.speculative)

    @property
    def kernel_engine(self) -> str | None:
        """The engine whose fitted kernels (profile ``engines:``) cost the steps; None for ``none``."""
        return self.deployment.kernel_engine

    @property
    def dynamic_chunks(self) -> bool:
        """SGLang's dynamic chunking sizes this deployment's prompt chunks (asked for, and PP > 1: SGLang's
        predictor lives in its PP scheduler, python/sglang/srt/managers/scheduler_pp_mixin.py @00ff98d3)."""
        return self.dynamic_chunking and self.parallel.pp > 1

    @property
    def microbatches(self) -> int:
        return self.decode_microbatches or self.parallel.pp

    @cached_property
    def policy(self) -> EnginePolicy:
        """The engine's record with this config's overrides (computed once per config: the steady-state
        estimate reads it many times)."""
        base = self.engine_profile or engine_policy(
            self.runtime, self.device, tp=self.parallel.tp, pp=self.parallel.pp, usage=self.usage
        )
        over: dict[str, Any] = {
            "max_num_batched_tokens": self.workload.max_batched_tokens or None,
            "max_num_seqs": self.max_num_seqs or None,
            "mem_fraction": self.mem_fraction or None,
            "max_model_len": self.max_model_len or None,
            "prefix_caching": self.prefix_caching,
            "settings": self.deployment.engine_settings or None,
        }
        over = {k: v for k, v in over.items() if v is not None}
        return replace(base, **over) if over else base
