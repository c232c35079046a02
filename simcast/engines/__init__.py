"""The serving engines, one module each: everything an engine decides lives in its module.

``vllm.py``, ``sglang.py``, ``trtllm.py`` and ``none.py`` (no engine scheduler, the generic roofline kernels)
each define an :class:`~simcast.engines.base.Engine` (``ENGINE``): its record and defaults, KV admission and
step order, CUDA-graph rule, layer partition, measured-kernel table rules and kernel choices, memory flag and
launch lines. :data:`REGISTRY` lists them; callers ask :func:`get_engine` for the object and read its
attributes, never compare engine names (``tests/engines/test_engine_names.py``). How one deployment behaves:
:mod:`simcast.engines.policy`; the named layer partitions: :mod:`simcast.engines.partition`; CUDA-graph
records: :mod:`simcast.engines.cuda_graphs`. Adding an engine: ``docs/development.md``.
"""

from __future__ import annotations

from simcast.core.chunking import PipelinePrefillRule
from simcast.core.errors import require
from simcast.engines import atom, none, sglang, trtllm, vllm
from simcast.engines.base import Engine
from simcast.engines.flags import SHARED_HEAD, SHARED_TAIL, EngineFlag, flags_in_order, merge_same_names

REGISTRY: dict[str, Engine] = {e.name: e for e in (vllm.ENGINE, sglang.ENGINE, trtllm.ENGINE, none.ENGINE, atom.ENGINE)}
"""Every engine by its ``--engine`` name."""

ENGINE_CHOICES: tuple[str, ...] = tuple(REGISTRY)
"""``--engine`` values (``none``: vLLM's scheduling limits with no CPU time and the generic roofline kernels)."""

ENGINES: tuple[str, ...] = tuple(n for n, e in REGISTRY.items() if e.kernels)
"""Engines with their own kernels (a profile's ``engines.<name>`` section): vLLM, SGLang, TensorRT-LLM."""

EMIT_ENGINES: tuple[str, ...] = tuple(n for n, e in REGISTRY.items() if e.emits)
"""Engines ``optimize --emit`` writes launch lines for (:meth:`~simcast.engines.base.Engine.server_lines`)."""

PP_PREFILL_RULES: dict[str, PipelinePrefillRule] = {
    n: e.pp_prefill_rule for n, e in REGISTRY.items() if e.pp_prefill_rule is not None
}
"""Per engine: what it does with one long prompt under PP + chunked prefill (its module's ``pp_prefill_rule``)."""

ENGINE_FLAGS: tuple[EngineFlag, ...] = tuple(
    flags_in_order(
        merge_same_names(
            *SHARED_HEAD,
            *(f for e in REGISTRY.values() for f in e.flags if f.group == "memory"),
            *SHARED_TAIL,
            *(f for e in REGISTRY.values() for f in e.flags if f.group != "memory"),
        )
    )
)
"""Every engine flag the serving commands accept, in ``--help`` order: the shared limits, each engine's memory
flag, the context limit and prefix caching, then each engine's own flags (:mod:`simcast.engines.flags`; a
setting two engines spell alike, e.g. ``--stream-interval``, listed once)."""

NO_ENGINE = none.ENGINE.name
"""``--engine none``: no engine scheduler (serving) and the device's generic roofline kernels."""

NCCL = "nccl"
"""Collectives issued by NCCL itself (not an engine's custom all-reduce)."""


def get_engine(name: str | None) -> Engine:
    """The engine named ``name`` (None: no engine, ``none``); an unknown name is a one-line input error."""
    key = NO_ENGINE if name is None else name
    require(key in REGISTRY, "--engine", name, f"allowed: {', '.join(ENGINE_CHOICES)}")
    return REGISTRY[key]


def kernel_engine(name: str | None) -> str | None:
    """The engine whose fitted kernels cost the ops for an ``--engine`` value: None for ``none``/None
    (the generic roofline), else the name itself (specs check it against :data:`ENGINES`)."""
    e = REGISTRY.get(NO_ENGINE if name is None else name)
    return name if e is None else e.kernel_engine
