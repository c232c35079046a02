"""Serving engines as data: one :class:`EngineRecord` per engine (vLLM, SGLang, TensorRT-LLM, ``none``).

A record holds everything simcast assumes about how an engine runs, each with its source
(engine file @ commit or docs, version named): the scheduler (step order, token budget, sequence
limit, chunked prefill), the **KV admission policy** (:data:`KV_ADMISSION`), the **memory rule**
(which memory the user's fraction flag is a fraction of, what the engine sets aside before the KV
cache), the CPU time per step, the **serving path** (API server, tokenisation, detokenisation and
streaming: the front-end time in every TTFT and E2E), and the engine's own flag names. Change
what an engine does here and nowhere else; ``--engine`` picks the record everywhere.
:mod:`simcast.serving.engines` turns a record into the behaviour of one deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from simcast.core.engines import ENGINES, NO_ENGINE

ENGINE_CHOICES: tuple[str, ...] = ENGINES + (NO_ENGINE,)
"""``none``: vLLM's scheduling limits with no CPU time and the generic roofline kernels (the old ``--runtime none``)."""

MEMORY_OF = ("total", "static", "free")
"""What ``mem_fraction`` is a fraction of: ``total`` HBM for weights + activations + KV (vLLM
``--gpu-memory-utilization``); ``static`` HBM for weights + the KV pool, activations and CUDA graphs
outside it (SGLang ``--mem-fraction-static``); ``free`` memory left after weights and the engine's
buffers, all of it KV (TensorRT-LLM ``--kv-cache-free-gpu-memory-fraction``)."""

KV_ADMISSION = ("on_demand", "reserve_ratio", "guaranteed_no_evict", "max_utilization")
"""How an engine admits a request into KV memory:

* ``on_demand`` (vLLM V1): admit while the scheduled prompt chunk's blocks are free; a running
  request grows block by block; when a decode finds no free block the most recently admitted
  request is preempted and recomputed later (its freed blocks stay in the prefix cache until reused).
* ``reserve_ratio`` (SGLang): admit while the prompt plus ``new_token_ratio`` × the remaining output
  (clipped at ``clip_max_new_tokens``) of every running request fits; the ratio decays from its
  initial to its minimum value over ``new_token_ratio_decay_steps`` decode steps and jumps back up
  when a decode runs out of memory and requests are retracted.
* ``guaranteed_no_evict`` (TensorRT-LLM's default ``CapacitySchedulerPolicy``): admit only while every
  running request's full ``ISL + OSL`` fits; nothing is ever evicted.
* ``max_utilization`` (TensorRT-LLM's option): like ``on_demand`` (pauses and recomputes).
"""

USAGE = ("server", "offline")
"""Where the engine runs: an OpenAI-compatible server (``vllm serve``, ``vllm bench serve``) or an offline
batch (``vllm.LLM``, ``vllm bench throughput``, MLPerf Offline); vLLM's defaults differ between the two."""


@dataclass(frozen=True, kw_only=True)
class EngineRecord:
    """What simcast assumes about one engine; every value with its source (see module docstring)."""

    name: str
    version: str  # engine version (or commit) the defaults below were read from
    decode_first: bool  # running decodes before new prompts in one mixed step (else prefill-first steps)
    chunked_prefill: bool
    kv_block_tokens: int
    kv_admission: str  # one of KV_ADMISSION
    memory_of: str  # one of MEMORY_OF
    memory_fraction: float  # default fraction (SGLang: replaced by its GPU-size rule)
    prefix_caching: bool  # on by default: cached blocks of shared prefixes (and of preempted requests) are reused
    step_overhead_s: float
    per_request_overhead_s: float
    overlap_cpu: bool
    cpu_source: str
    front_end_s: float  # per request: API server, request parsing, first-token detokenise + stream, s
    front_end_per_token_s: float  # tokenisation per prompt token, s
    front_end_source: str
    flags: Mapping[str, str] = field(default_factory=dict)  # simcast concept -> the engine's own flag
    sources: tuple[str, ...] = ()
    # pipeline parallelism (PP > 1): what the engine's PP loop does differently, read from its code
    pp_overlap_cpu: bool | None = None  # the overlap scheduler at PP > 1 (None: as overlap_cpu)
    pp_tp_sharded_send: bool = False  # each TP rank sends 1/tp of the stage's hidden states; the receiver all-gathers
    pp_output_return: bool = False  # the last stage sends each microbatch's sampled tokens to stage 0 before
    # stage 0 can schedule that microbatch's next step: one more hop on every microbatch's round trip
    pp_sources: tuple[str, ...] = ()


# --- the records -------------------------------------------------------------------------------------

# The serving path: vllm PR 54628 (vllm bench serve against vllm:time_to_first_token_seconds, the server's
# own TTFT) measured 8-12 ms between client and server TTFT on one laptop-class host; a server-class host is
# faster. Tokenisation: HF fast tokenizers ~1-10 us/token (tenstorrent/tt-inference-server issue 2173
# measured 10-21 us/token in C++ for 131 tokens including call overhead). Both are assumptions until fitted.
_FRONT_END = (
    "assumption: {fe:.3g} ms per request (HTTP, request parsing, IPC to the engine core, first-token "
    "detokenise and stream; client-server TTFT gap 8-12 ms measured in vLLM PR 54628 on a laptop host) + "
    "{tok:.3g} us per prompt token (tokenisation); calibrate with simcast calibrate-serving"
)

RECORDS: dict[str, EngineRecord] = {
    "vllm": EngineRecord(
        name="vllm",
        version="vLLM 0.11-0.13 (V1 engine)",
        decode_first=True,
        chunked_prefill=True,
        kv_block_tokens=16,
        kv_admission="on_demand",
        memory_of="total",
        memory_fraction=0.9,
        prefix_caching=True,
        # vLLM V0 traces showed ~4 ms per step (RFC #6854); V1 cut the gap to well under that (V1 blog, PR #11133).
        step_overhead_s=2.0e-3,
        per_request_overhead_s=5e-6,
        overlap_cpu=False,
        cpu_source="assumption: ~2 ms CPU per step + 5 us per request, not overlapped "
        "(V0 measured 4-13 ms, vLLM RFC #6854; V1 less); calibrate with simcast calibrate-serving",
        front_end_s=6e-3,
        front_end_per_token_s=2e-6,
        front_end_source=_FRONT_END.format(fe=6.0, tok=2.0),
        flags={
            "tp": "--tensor-parallel-size",
            "pp": "--pipeline-parallel-size",
            "dp": "--data-parallel-size",
            "memory": "--gpu-memory-utilization",
            "max_num_batched_tokens": "--max-num-batched-tokens",
            "max_num_seqs": "--max-num-seqs",
            "max_model_len": "--max-model-len",
            "prefix_caching": "--enable-prefix-caching",
        },
        sources=(
            "vllm/engine/arg_utils.py EngineArgs._set_default_args @99d7eb5: on GPUs >= 70 GiB and not A100 "
            "max_num_batched_tokens 8192 (server) / 16384 (LLM class), max_num_seqs 1024; other GPUs "
            "2048 / 8192 and 256; chunked prefill on",
            "vllm/v1/core/sched/scheduler.py Scheduler.schedule @b4622cf: RUNNING requests first, then WAITING; "
            "a waiting request is admitted when allocate_slots finds blocks for its scheduled tokens; a running "
            "request that cannot get a block preempts the last running one (recompute)",
            "vllm/v1/core/kv_cache_manager.py: freed blocks go back to the free queue in reverse order and stay "
            "in the prefix cache until reallocated (enable_prefix_caching on by default in V1)",
            "vllm/v1/worker/gpu_worker.py determine_available_memory: KV = gpu_memory_utilization x total - "
            "(weights + activation peak of the profile run + non-torch memory); CUDA graphs are captured "
            "afterwards, out of the (1 - utilization) headroom",
            "vllm/platforms/cuda.py: block_size 16; vllm/config/cache.py @c1d8642: gpu_memory_utilization 0.9",
        ),
    ),
    "sglang": EngineRecord(
        name="sglang",
        version="SGLang ~0.4.9-0.5.4",
        decode_first=False,
        chunked_prefill=True,
        kv_block_tokens=1,
        kv_admission="reserve_ratio",
        memory_of="static",
        memory_fraction=0.88,  # replaced by _handle_gpu_memory_settings' rule (see _sglang_limits)
        prefix_caching=True,
        # SGLang's overlap scheduler hides CPU work behind the GPU (SGLang docs, overlap scheduler).
        step_overhead_s=1.0e-3,
        per_request_overhead_s=3e-6,
        overlap_cpu=True,
        cpu_source="assumption: ~1 ms + 3 us per request, hidden behind the GPU by the "
        "overlap scheduler; calibrate with simcast calibrate-serving",
        front_end_s=5e-3,
        front_end_per_token_s=2e-6,
        front_end_source=_FRONT_END.format(fe=5.0, tok=2.0).replace(
            "IPC to the engine core", "tokenizer-manager and detokenizer processes"
        ),
        flags={
            "tp": "--tp-size",
            "pp": "--pp-size",
            "dp": "--dp-size",
            "ep": "--ep-size",
            "memory": "--mem-fraction-static",
            "max_num_batched_tokens": "--chunked-prefill-size",
            "max_num_seqs": "--max-running-requests",
            "max_model_len": "--context-length",
            "prefix_caching": "radix cache; --disable-radix-cache",
        },
        sources=(
            "python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings (~v0.5.4): "
            "chunked_prefill_size and mem_fraction_static from GPU memory",
            "python/sglang/srt/managers/scheduler.py get_next_batch_to_run: prefill first; "
            "--enable-mixed-chunk off; overlap scheduler on",
            "python/sglang/srt/managers/schedule_policy.py PrefillAdder (v0.4.9): a running request reserves "
            "min(max_new_tokens - generated, 4096) x new_token_ratio; python/sglang/srt/global_config.py: "
            "init ratio 0.7 (x schedule_conservativeness 1.0), min factor 0.14, decay steps 600; "
            "retract_decode raises the ratio when a decode runs out of memory",
            "python/sglang/srt/model_executor/model_runner.py: max running requests clamp(.., 2048, 4096); page_size 1",
            "python/sglang/srt/mem_cache/radix_cache.py: the radix cache (token-level tree, LRU eviction of "
            "unreferenced leaves) is on unless --disable-radix-cache",
        ),
        pp_overlap_cpu=False,
        pp_tp_sharded_send=True,
        pp_output_return=True,
        pp_sources=(
            "python/sglang/srt/server_args.py _handle_pipeline_parallelism (stored versions incl. 8356329 and "
            "the registered post-process _pipeline_parallel_overlap_disable): pp_size > 1 sets "
            "disable_overlap_schedule ('Pipeline parallelism is incompatible with overlap schedule'), so each "
            "microbatch's CPU scheduling runs between its GPU passes",
            "python/sglang/srt/managers/scheduler_pp_mixin.py @00ff98d3 init_pp_loop_state: "
            "require_attn_tp_allgather = not enable_nsa_prefill_context_parallel (True by default); "
            "_pp_send_dict_to_next_stage / _pp_recv_proxy_tensors pass all_gather_group=attn_tp_group, and "
            "python/sglang/srt/distributed/parallel_state.py send_tensor_dict sends each tensor's "
            "1/tp slice (reshape(all_gather_size, -1)[rank]); recv_tensor_dict all-gathers it back",
            "scheduler_pp_mixin.py @00ff98d3 event_loop_pp / _pp_send_output_to_next_stage: the last rank "
            "sends each microbatch's next_token_ids to rank 0 (msg_type 'output'); every rank waits for "
            "microbatch i+1's outputs (d2h_event.synchronize) and processes them before scheduling it "
            "(pp_loop_size = pp_size + pp_async_batch_depth, default 0)",
            "not charged: the per-microbatch pickled objects (recv_reqs via point_to_point_pyobj, each tensor "
            "dict's metadata via send_object) over the CPU (gloo) group: no measured latency for that path",
        ),
    ),
    "trtllm": EngineRecord(
        name="trtllm",
        version="TensorRT-LLM 0.13-1.0 (PyTorch and TRT backends)",
        decode_first=True,
        chunked_prefill=False,
        kv_block_tokens=32,
        kv_admission="guaranteed_no_evict",
        memory_of="free",
        memory_fraction=0.9,
        prefix_caching=True,
        step_overhead_s=1.0e-3,
        per_request_overhead_s=3e-6,
        overlap_cpu=True,
        cpu_source="assumption: ~1 ms + 3 us per request, hidden behind the GPU by the "
        "overlap scheduler (TRT-LLM docs); no published figure",
        front_end_s=5e-3,
        front_end_per_token_s=2e-6,
        front_end_source=_FRONT_END.format(fe=5.0, tok=2.0),
        flags={
            "tp": "--tp_size",
            "pp": "--pp_size",
            "ep": "--ep_size",
            "memory": "--kv_cache_free_gpu_memory_fraction",
            "max_num_batched_tokens": "--max_num_tokens",
            "max_num_seqs": "--max_batch_size",
            "max_model_len": "--max_seq_len",
            "prefix_caching": "KvCacheConfig.enable_block_reuse",
        },
        sources=(
            "tensorrt_llm/llmapi/llm_args.py: max_batch_size 2048, max_num_tokens 8192, "
            "enable_chunked_prefill False, KvCacheConfig.tokens_per_block 32, free_gpu_memory_fraction 0.9 "
            "of free memory after weights and buffers, enable_block_reuse True, overlap scheduler on",
            "tensorrt_llm/_torch/pyexecutor/scheduler.py: CapacitySchedulerPolicy GUARANTEED_NO_EVICT by default "
            "(a request is scheduled only if the blocks for its whole max_new_tokens fit), MAX_UTILIZATION optional",
            "context vs generation order inside an in-flight step: not found in the source; "
            "generation (decode) first assumed",
        ),
    ),
}
RECORDS["none"] = replace(
    RECORDS["vllm"],
    name="none",
    step_overhead_s=0.0,
    per_request_overhead_s=0.0,
    overlap_cpu=True,
    cpu_source="no engine CPU time (kernels only)",
    front_end_s=0.0,
    front_end_per_token_s=0.0,
    front_end_source="no serving path (kernels only)",
)

SGLANG_RATIO = {"init": 0.7, "min_factor": 0.14, "decay_steps": 600, "clip_max_new_tokens": 4096, "retract_steps": 20}
"""SGLang's reservation constants (python/sglang/srt/global_config.py and schedule_policy.py, v0.4.9)."""
