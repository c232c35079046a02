"""Which engine steps run their kernels from a captured CUDA graph (one rule per engine, used by every layer).

A replayed CUDA graph launches its kernels from the GPU's own queue: the host's per-kernel path
(Python, the framework dispatcher, the driver call) is paid once per graph, not once per kernel.
A fixed per-kernel floor measured *without* graphs (e.g. vLLM's block-fp8 GEMM rows in the
measured-kernel database, ~180 us at small M) therefore never applies inside a captured step.

Each engine's default capture, from its own source and docs, is its module's
:meth:`~simcast.engines.base.Engine.captured` and :meth:`~simcast.engines.base.Engine.capture_limit`
(vLLM: steps of at most 512 tokens; SGLang and TensorRT-LLM: decode steps up to their capture batch).
Without an engine (the generic roofline) nothing is captured and nothing depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcast.core.assumption import CudaGraphs
from simcast.core.specs import GIB, SimSpec
from simcast.engines import get_engine
from simcast.engines.base import Batch


def captured(
    engine: str | None,
    batch: Batch,
    hbm_gib: float = 80.0,
    tp: int = 1,
    decode_query_len: int = 1,
    settings: Mapping[str, Any] | None = None,
) -> bool:
    """Whether ``engine`` runs the GEMMs of a step on ``batch`` from a captured CUDA graph by default.

    With speculative decoding (``decode_query_len`` = k + 1) a verify step of at most k + 1 tokens per request
    counts as decode: SGLang captures its TARGET_VERIFY steps and TensorRT-LLM its speculative generation
    steps in graphs.
    """
    return get_engine(engine).captured(batch, hbm_gib, tp, decode_query_len, settings)


def step_captured(spec: SimSpec, batch: Batch) -> bool:
    """Whether a step (microbatch) of ``spec`` on ``batch`` runs from a captured CUDA graph: ``spec.cuda_graph``
    when given, else the engine's default (:func:`captured`)."""
    if spec.cuda_graph is not None:
        return spec.cuda_graph
    hbm_gib, settings = spec.device.hbm_bytes / GIB, dict(spec.engine_settings)
    return captured(spec.engine, batch, hbm_gib, spec.parallel.tp, spec.decode_query_len, settings)


def graph_facts(
    engine: str,
    batch: Batch,
    hbm_gib: float = 80.0,
    tp: int = 1,
    forced: bool | None = None,
    settings: Mapping[str, Any] | None = None,
) -> CudaGraphs:
    """The assumption record: whether the step's kernels are costed as graph-captured, and why."""
    eng = get_engine(engine)
    return CudaGraphs(
        engine=engine,
        captured=eng.captured(batch, hbm_gib, tp, settings=settings) if forced is None else forced,
        set_by_caller=forced is not None,
        capture_limit=eng.capture_limit(hbm_gib, tp, settings),
        limit_counts=eng.graph_limit_counts,
    )
