"""Which engine steps run their kernels from a captured CUDA graph (one rule, used by every layer).

A replayed CUDA graph launches its kernels from the GPU's own queue: the host's per-kernel path
(Python, the framework dispatcher, the driver call) is paid once per graph, not once per kernel.
A fixed per-kernel floor measured *without* graphs (e.g. vLLM's block-fp8 GEMM rows in the
measured-kernel database, ~180 us at small M) therefore never applies inside a captured step.

Each engine's default capture, from its own source and docs:

* **vLLM** (V1): ``cudagraph_mode`` FULL_AND_PIECEWISE by default: full graphs for uniform decode
  batches and piecewise graphs (everything but attention) for prefill and mixed batches, both for
  up to ``max_cudagraph_capture_size`` tokens, by default ``min(2 · max_num_seqs, 512)``
  (vllm/config/compilation.py ``CompilationConfig.cudagraph_mode`` and
  ``max_cudagraph_capture_size`` docstrings; ``max_num_seqs`` is 256 or 1024 by GPU, so 512).
  The GEMMs of a step of at most 512 tokens are captured, decode or not.
* **SGLang**: decode batches of at most ``cuda_graph_max_bs`` requests
  (python/sglang/srt/server_args.py ``ServerArgs._handle_gpu_memory_settings`` ~v0.5.4: by GPU
  memory and TP size, table below); prefill and mixed steps run eagerly (piecewise prefill graphs
  are opt-in).
* **TensorRT-LLM** (PyTorch backend): generation-only batches of at most the CUDA-graph
  ``max_batch_size``, 128 when neither ``batch_sizes`` nor ``max_batch_size`` is given
  (``tensorrt_llm.llmapi.DecodeCudaGraphConfig`` API reference, 1.3.0rc27).

Without an engine (the generic roofline) nothing is captured and nothing depends on it.
"""

from __future__ import annotations

from typing import Protocol

from simcast.core.assumption import CudaGraphs


class Batch(Protocol):
    """What the rule reads of a step (:class:`simcast.core.specs.Batch`, which imports this module)."""

    @property
    def num_tokens(self) -> int: ...

    @property
    def num_requests(self) -> int: ...

    @property
    def is_decode(self) -> bool: ...

    @property
    def query_lens(self) -> tuple[int, ...]: ...


VLLM_MAX_CAPTURE_TOKENS = 512
"""vLLM's default ``max_cudagraph_capture_size``: ``min(2 · max_num_seqs, 512)`` with ``max_num_seqs`` >= 256."""
TRTLLM_MAX_CAPTURE_BATCH = 128
"""TensorRT-LLM's default CUDA-graph ``max_batch_size`` (``DecodeCudaGraphConfig``, 1.3.0rc27)."""


def sglang_max_bs(hbm_gib: float, tp: int) -> int:
    """SGLang's default ``cuda_graph_max_bs`` on a GPU of ``hbm_gib`` GiB with ``tp`` TP ranks
    (``_handle_gpu_memory_settings``: < 35 GiB 24/80, < 60 GiB 32/160, < 160 GiB 256/512 for TP < 4 / >= 4,
    else 512)."""
    if hbm_gib < 35:
        return 24 if tp < 4 else 80
    if hbm_gib < 60:
        return 32 if tp < 4 else 160
    if hbm_gib < 160:
        return 256 if tp < 4 else 512
    return 512


def capture_limit(engine: str | None, hbm_gib: float = 80.0, tp: int = 1) -> int:
    """The largest step an engine captures by default: tokens for vLLM, decode requests otherwise (0: none)."""
    if engine == "vllm":
        return VLLM_MAX_CAPTURE_TOKENS
    if engine == "sglang":
        return sglang_max_bs(hbm_gib, tp)
    if engine == "trtllm":
        return TRTLLM_MAX_CAPTURE_BATCH
    return 0


def captured(engine: str | None, batch: Batch, hbm_gib: float = 80.0, tp: int = 1, decode_query_len: int = 1) -> bool:
    """Whether ``engine`` runs the GEMMs of a step on ``batch`` from a captured CUDA graph by default.

    vLLM: at most :data:`VLLM_MAX_CAPTURE_TOKENS` tokens (full graphs for decode, piecewise for the
    rest); SGLang and TensorRT-LLM: decode-only steps of at most their capture batch size. With
    speculative decoding (``decode_query_len`` = k + 1) a verify step of at most k + 1 tokens per request
    counts as decode: SGLang captures its TARGET_VERIFY steps and TensorRT-LLM its speculative generation
    steps in graphs.
    """
    limit = capture_limit(engine, hbm_gib, tp)
    if engine == "vllm":
        return batch.num_tokens <= limit
    decode = batch.is_decode or all(q <= decode_query_len for q in batch.query_lens)
    return limit > 0 and decode and batch.num_requests <= limit


def graph_facts(
    engine: str, batch: Batch, hbm_gib: float = 80.0, tp: int = 1, forced: bool | None = None
) -> CudaGraphs:
    """The assumption record: whether the step's kernels are costed as graph-captured, and why."""
    return CudaGraphs(
        engine=engine,
        captured=captured(engine, batch, hbm_gib, tp) if forced is None else forced,
        set_by_caller=forced is not None,
        capture_limit=capture_limit(engine, hbm_gib, tp),
        limit_counts="tokens" if engine == "vllm" else "requests",
    )
