"""Serving-engine scheduler policies as data: vLLM, SGLang, TensorRT-LLM (and ``none``).

Each default below is the engine's own, read from its source (file @ commit,
gathered in the project notes ``engine_defaults.md``); where the engine picks a
default from the GPU, :func:`engine_policy` repeats that rule. The CPU time per
step and per request are **assumptions** (no engine publishes a per-step figure
for its current scheduler) until ``simcast calibrate-serving`` fits them from
the user's own ``vllm bench serve`` results; every result says which.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcast.core.engines import ENGINES, NO_ENGINE
from simcast.core.errors import require
from simcast.core.specs import GIB, DeviceSpec

ENGINE_CHOICES: tuple[str, ...] = ENGINES + (NO_ENGINE,)
"""``none``: vLLM's scheduling limits with no CPU time and the generic roofline kernels (the old ``--runtime none``)."""

MEMORY_OF = ("total", "static", "free")
"""What ``mem_fraction`` is a fraction of: ``total`` HBM for weights + activations + KV (vLLM
``gpu_memory_utilization``); ``static`` HBM for weights + the KV pool, activations outside it (SGLang
``mem_fraction_static``); ``free`` memory left after weights and buffers, all of it KV (TRT-LLM
``free_gpu_memory_fraction``)."""


@dataclass(frozen=True, kw_only=True)
class EnginePolicy:
    """How one engine forms a step and sizes its KV cache.

    ``max_num_batched_tokens``: token budget of one step (decodes + prefill chunks);
    ``max_num_seqs``: running requests per step; ``chunked_prefill``: a prompt may be
    split over steps (off: a prompt enters whole); ``decode_first``: running decodes
    are scheduled before new prompts in the same step (vLLM V1, TRT-LLM in-flight
    batching) — otherwise prompts run in their own prefill steps (SGLang's default
    prefill-first loop); ``kv_block_tokens``: KV page size; ``mem_fraction`` of
    ``mem_fraction_of`` memory (see ``MEMORY_OF``); ``step_overhead_s`` / ``per_request_overhead_s``:
    CPU time of one step (schedule, prepare inputs, sample bookkeeping);
    ``overlap_cpu``: the CPU work of step n+1 runs while step n is on the GPU, so a
    step costs ``max(gpu, cpu)`` instead of ``gpu + cpu``.
    """

    name: str
    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool
    decode_first: bool
    kv_block_tokens: int
    mem_fraction: float
    mem_fraction_of: str
    step_overhead_s: float
    per_request_overhead_s: float
    overlap_cpu: bool
    overhead_source: str  # "assumption: ..." or "fitted: ..." (calibrate-serving)
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in ("max_num_batched_tokens", "max_num_seqs", "kv_block_tokens"):
            v = getattr(self, f)
            require(isinstance(v, int) and v >= 1, f"engine.{f}", v, "must be an integer >= 1")
        require(0 < self.mem_fraction <= 1, "engine.mem_fraction", self.mem_fraction, "must be in (0, 1]")
        require(
            self.mem_fraction_of in MEMORY_OF,
            "engine.mem_fraction_of",
            self.mem_fraction_of,
            f"allowed: {', '.join(MEMORY_OF)}",
        )
        for f in ("step_overhead_s", "per_request_overhead_s"):
            require(getattr(self, f) >= 0, f"engine.{f}", getattr(self, f), "must be >= 0")

    def step_cpu_s(self, num_requests: float) -> float:
        """CPU time of one step scheduling ``num_requests`` requests."""
        return self.step_overhead_s + self.per_request_overhead_s * num_requests

    def describe(self) -> str:
        order = "decode-first mixed steps" if self.decode_first else "prefill-first (prompts in their own steps)"
        return (
            f"engine {self.name}: max_num_batched_tokens {self.max_num_batched_tokens}, max_num_seqs "
            f"{self.max_num_seqs}, chunked prefill {'on' if self.chunked_prefill else 'off'}, {order}, "
            f"KV block {self.kv_block_tokens} tokens, memory {self.mem_fraction:.3g} of {self.mem_fraction_of}; "
            f"CPU {self.step_overhead_s * 1e3:.3g} ms/step + {self.per_request_overhead_s * 1e6:.3g} us/request"
            f" ({'overlapped with the GPU' if self.overlap_cpu else 'serial with the GPU'})"
            f" — {self.overhead_source}"
        )


_VLLM_SRC = (
    "vllm/engine/arg_utils.py EngineArgs._set_default_args @99d7eb5: vllm serve on GPUs >= 70 GiB and not "
    "A100: max_num_batched_tokens 8192, max_num_seqs 1024; other GPUs 2048 / 256; chunked prefill on",
    "vllm/v1/core/sched/scheduler.py Scheduler.schedule @b4622cf: RUNNING requests first, then WAITING",
    "vllm/platforms/cuda.py: block_size 16; vllm/config/cache.py @c1d8642: gpu_memory_utilization 0.9 "
    "of total memory; vllm/config/scheduler.py @01230b4: async_scheduling False",
)
_SGLANG_SRC = (
    "python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings (~v0.5.4): "
    "chunked_prefill_size and mem_fraction_static from GPU memory",
    "python/sglang/srt/managers/scheduler.py get_next_batch_to_run: prefill first; "
    "--enable-mixed-chunk off; overlap scheduler on",
    "python/sglang/srt/model_executor/model_runner.py: max running requests clamp(.., 2048, 4096); page_size 1",
)
_TRTLLM_SRC = (
    "tensorrt_llm/llmapi/llm_args.py: max_batch_size 2048, max_num_tokens 8192, "
    "enable_chunked_prefill False, KvCacheConfig.tokens_per_block 32, free_gpu_memory_fraction 0.9 "
    "of free memory after weights and buffers, overlap scheduler on",
    "context vs generation order inside an in-flight step: not found in the source; generation (decode) first assumed",
)

CPU_ASSUMPTION = {
    # vLLM V0 traces showed ~4 ms per step (RFC #6854); V1 cut the gap to well under that (V1 blog, PR #11133).
    "vllm": (
        2.0e-3,
        5e-6,
        False,
        "assumption: ~2 ms CPU per step + 5 us per request, not overlapped "
        "(V0 measured 4-13 ms, vLLM RFC #6854; V1 less); calibrate with simcast calibrate-serving",
    ),
    # SGLang's overlap scheduler hides CPU work behind the GPU (lmsys.org/blog/2024-12-04-sglang-v0-4).
    "sglang": (
        1.0e-3,
        3e-6,
        True,
        "assumption: ~1 ms + 3 us per request, hidden behind the GPU by the "
        "overlap scheduler (SGLang v0.4 blog); calibrate with simcast calibrate-serving",
    ),
    # TRT-LLM's overlap scheduler runs step n+1's CPU work during step n (TRT-LLM docs, overlap-scheduler page).
    "trtllm": (
        1.0e-3,
        3e-6,
        True,
        "assumption: ~1 ms + 3 us per request, hidden behind the GPU by the "
        "overlap scheduler (TRT-LLM docs); no published figure",
    ),
    "none": (0.0, 0.0, True, "no engine CPU time (kernels only)"),
}


def _vllm_like(name: str, device: DeviceSpec) -> EnginePolicy:
    big = device.hbm_bytes >= 70 * GIB and "a100" not in device.name.lower()
    step, per_req, overlap, note = CPU_ASSUMPTION[name]
    return EnginePolicy(
        name=name,
        max_num_batched_tokens=8192 if big else 2048,
        max_num_seqs=1024 if big else 256,
        chunked_prefill=True,
        decode_first=True,
        kv_block_tokens=16,
        mem_fraction=0.9,
        mem_fraction_of="total",
        step_overhead_s=step,
        per_request_overhead_s=per_req,
        overlap_cpu=overlap,
        overhead_source=note,
        sources=_VLLM_SRC,
    )


def _sglang(device: DeviceSpec, tp: int, pp: int) -> EnginePolicy:
    """SGLang's ``_handle_gpu_memory_settings``: chunk size, CUDA-graph batch and static memory fraction by GPU size."""
    gpu_mb = device.hbm_bytes / 2**20
    gb = gpu_mb / 1024
    if gb < 35:
        chunk, graph_bs = 2048, (24 if tp < 4 else 80)
    elif gb < 60:
        chunk, graph_bs = 4096, (32 if tp < 4 else 160)
    elif gb < 160:
        chunk, graph_bs = 8192, (256 if tp < 4 else 512)
    else:
        chunk, graph_bs = 16384, 512
    reserved_mb = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if gb > 60:
        reserved_mb = max(reserved_mb, 10 * 1024)
    frac = round((gpu_mb - reserved_mb) / gpu_mb, 3)
    step, per_req, overlap, note = CPU_ASSUMPTION["sglang"]
    return EnginePolicy(
        name="sglang",
        max_num_batched_tokens=chunk,
        max_num_seqs=4096,
        chunked_prefill=True,
        decode_first=False,
        kv_block_tokens=1,
        mem_fraction=frac,
        mem_fraction_of="static",
        step_overhead_s=step,
        per_request_overhead_s=per_req,
        overlap_cpu=overlap,
        overhead_source=note,
        sources=_SGLANG_SRC,
    )


def _trtllm() -> EnginePolicy:
    step, per_req, overlap, note = CPU_ASSUMPTION["trtllm"]
    return EnginePolicy(
        name="trtllm",
        max_num_batched_tokens=8192,
        max_num_seqs=2048,
        chunked_prefill=False,
        decode_first=True,
        kv_block_tokens=32,
        mem_fraction=0.9,
        mem_fraction_of="free",
        step_overhead_s=step,
        per_request_overhead_s=per_req,
        overlap_cpu=overlap,
        overhead_source=note,
        sources=_TRTLLM_SRC,
    )


def engine_policy(name: str, device: DeviceSpec, *, tp: int = 1, pp: int = 1, **overrides) -> EnginePolicy:
    """The engine's defaults on ``device`` (its own GPU-dependent rules), then ``overrides``
    (any :class:`EnginePolicy` field; ``None`` values are ignored)."""
    require(name in ENGINE_CHOICES, "--engine", name, f"allowed: {', '.join(ENGINE_CHOICES)}")
    if name == "sglang":
        pol = _sglang(device, tp, pp)
    elif name == "trtllm":
        pol = _trtllm()
    else:
        pol = _vllm_like(name, device)
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(EnginePolicy.__dataclass_fields__))
    require(not unknown, "engine override", ", ".join(unknown), "not an engine policy field")
    return replace(pol, **given) if given else pol
