"""TensorRT-LLM: everything simcast assumes it decides, each with its source.

* scheduler and memory: :data:`RECORD` (in-flight batching, generation first, no chunked prefill by default,
  32-token KV blocks, ``guaranteed_no_evict`` KV admission, ``--kv_cache_free_gpu_memory_fraction`` of the
  memory left after weights); ``max_num_tokens`` 8192 and ``max_batch_size`` 2048 on every GPU;
* CUDA graphs (PyTorch backend): generation-only batches of at most the CUDA-graph ``max_batch_size``, 128
  when neither ``batch_sizes`` nor ``max_batch_size`` is given (``tensorrt_llm.llmapi.DecodeCudaGraphConfig``
  API reference, 1.3.0rc27); its speculative generation steps are captured like decode;
* layer partition: ``Mapping.pp_layers``;
* streaming: ``stream_interval`` n sends a request's tokens at its first decoding iteration (the prefill's), at
  every n-th and at its end (``_handle_responses``, :data:`_STREAM`);
* the measured-kernel database: its collector's generation rows cache ``step`` tokens and attend one more;
  its prefill rows are kept for the context-attention dtype it runs (:meth:`Trtllm.context_attention_dtype`);
  the kernel choices its fits may declare (:data:`DECODE_KERNEL_RULES`, :data:`PREFILL_KERNEL_RULES`);
* no ``optimize --emit`` launch lines yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from simcast.core.chunking import PipelinePrefillRule
from simcast.core.device import DeviceSpec
from simcast.core.moe_comm import MoECommFlags, MoECommPlan
from simcast.engines.base import Batch, Engine, EngineDefaults
from simcast.engines.flags import EngineFlag
from simcast.engines.records import FRONT_END, EngineRecord

RECORD = EngineRecord(
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
    front_end_source=FRONT_END.format(fe=5.0, tok=2.0),
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
)

MAX_NUM_TOKENS = 8192
MAX_BATCH_SIZE = 2048
"""tensorrt_llm/llmapi/llm_args.py defaults (see the record's sources)."""
MAX_CAPTURE_BATCH = 128
"""TensorRT-LLM's default CUDA-graph ``max_batch_size`` (``DecodeCudaGraphConfig``, 1.3.0rc27)."""

DECODE_KERNEL_RULES = {s: ("", "trtllm_xqa", "trtllm_xqa_mb") for s in ("h100_sxm", "h200_sxm", "a100_sxm", "l40s")}
"""Systems whose decode fit may declare TensorRT-LLM's kernel choice: its XQA / masked-MHA rule holds on SM80-SM90
(XQA's HMMA kernels need SM >= 80, its QGMMA ones SM 90); on Blackwell the engine runs its trtllm-gen kernels
instead, so one kernel is fitted there. Candidates (chosen on the fitting half): the two families with saturating
efficiencies (``trtllm_xqa``) or as multi-block CTA waves (``trtllm_xqa_mb``; for an fp8 KV cache below SM90
``trtllm_xqa_sb`` instead, :data:`DECODE_FP8_SINGLE_BLOCK`)."""
DECODE_FP8_SINGLE_BLOCK = frozenset({"a100_sxm", "l40s"})
"""Systems whose fp8-KV decode takes ``trtllm_xqa_sb`` in place of ``trtllm_xqa_mb``: TensorRT-LLM turns XQA's
multi-block mode off for an fp8 KV cache on SM < 90 (``cpp/tensorrt_llm/common/attentionOp.cpp`` @00dbe288
``convertMMHAParamsToXQAParams``; :mod:`simcast.cost.kernels.trtllm_decode_sm89`). A100 (SM80) has no fp8 rows in the
database; the L40S (SM89) fp8 table runs one CTA per request and KV head over the whole context (at batch 1-4
the time of 8 KV heads grows 16 ns per token and does not change with the batch)."""
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200")
PREFILL_KERNEL_RULES = {s: ("", "trtllm_ctx") for s in ("h100_sxm", "h200_sxm", "a100_sxm", "l40s", *BLACKWELL)}
"""Systems whose prefill fit may take TensorRT-LLM's context-kernel layout (one query head per CTA; the
TRT-LLM-gen kernels on Blackwell)."""


def capture_sizes(max_batch_size: int) -> frozenset[int]:
    """The batch sizes TensorRT-LLM captures without padding (``BaseCudaGraphConfig._generate_cuda_graph_batch_sizes``,
    llm_args.py@00043967): 1-31, 32, 64, 128, the powers of 2 from 256 below the limit, and the limit."""
    sizes = {*range(1, 32), 32, 64, 128} | {2**i for i in range(8, math.ceil(math.log2(max(max_batch_size, 2))))}
    return frozenset({s for s in sizes if s <= max_batch_size} | {max_batch_size})


PP_PREFILL_RULE = PipelinePrefillRule(
    engine="trtllm",
    overlap=False,
    chunked_by_default=False,
    cite="tensorrt_llm/_torch/pyexecutor/py_executor.py (a stored version; upstream head not verified)",
    source=(
        "_add_inflight_ids: every scheduled context request joins inflight_req_ids and the scheduler "
        "skips in-flight requests, so a prompt's next chunk waits for the previous one to leave the last "
        "stage; tensorrt_llm/llmapi/llm_args.py: enable_chunked_prefill False"
    ),
)
"""What the engine does with one long prompt under PP + chunked prefill (read from its source)."""


_LLM_ARGS = "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py@00043967"
_PY_EXECUTOR = "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor.py (stored copy) _waiting_requests"
_STREAM = (
    "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py@fcd3f316 TorchLlmArgs.stream_interval (default 1); "
    "tensorrt_llm/_torch/pyexecutor/py_executor.py@9521caf4 _handle_responses: a streaming request gets a response "
    "when py_decoding_iter == 1, when it is finished, or when py_decoding_iter % stream_interval == 0"
)
OWN_FLAGS: tuple[EngineFlag, ...] = (
    EngineFlag(
        names=("--cuda-graph-max-batch-size",),
        dest="cuda_graph_max_batch_size",
        keyword="cuda_graph_max_batch_size",
        default=MAX_CAPTURE_BATCH,
        unit="requests",
        check=(1, 1_000_000),
        engine="trtllm",
        source=f"{_LLM_ARGS} BaseCudaGraphConfig.max_batch_size (0, the field's default, means 128)",
        help="TensorRT-LLM cuda_graph_config.max_batch_size: generation steps of at most this many requests replay "
        "a captured CUDA graph, larger ones run eagerly (every kernel launched from the host) "
        f"[default {MAX_CAPTURE_BATCH}, TensorRT-LLM's]",
    ),
    EngineFlag(
        names=("--cuda-graph-padding",),
        dest="cuda_graph_padding",
        keyword="cuda_graph_padding",
        action="boolean_optional",
        engine="trtllm",
        source=f"{_LLM_ARGS} BaseCudaGraphConfig.enable_padding (False) and _generate_cuda_graph_batch_sizes",
        help="TensorRT-LLM cuda_graph_config.enable_padding: on, every generation batch up to the capture limit is "
        "padded to a captured size (the padding is not costed); off (--no-cuda-graph-padding), only the batch sizes "
        "TensorRT-LLM generates (1-31, 32, 64, 128, powers of 2, the limit) replay a graph, others run eagerly "
        "[default: not given, every batch up to the limit captured: simcast's rule, as with padding]",
    ),
    EngineFlag(
        names=("--batch-wait-timeout-iters",),
        dest="batch_wait_timeout_iters",
        keyword="batch_wait_timeout_iters",
        default=0,
        unit="steps",
        check=(0, 1_000_000),
        engine="trtllm",
        source=f"{_LLM_ARGS} TorchLlmArgs.batch_wait_timeout_iters; {_PY_EXECUTOR}",
        help="TensorRT-LLM batch_wait_timeout_iters: new prompts wait up to this many steps for the scheduled "
        "tokens to reach --batch-wait-max-tokens-ratio x max_num_tokens [default 0: no wait]",
    ),
    EngineFlag(
        names=("--batch-wait-max-tokens-ratio",),
        dest="batch_wait_max_tokens_ratio",
        keyword="batch_wait_max_tokens_ratio",
        default=0.0,
        check=(0.0, 1.0),
        integer=False,
        engine="trtllm",
        source=f"{_LLM_ARGS} TorchLlmArgs.batch_wait_max_tokens_ratio; {_PY_EXECUTOR}",
        help="TensorRT-LLM batch_wait_max_tokens_ratio: the share of max_num_tokens the scheduled tokens (waiting "
        "prompts + running decodes) must reach before new prompts run, up to --batch-wait-timeout-iters steps "
        "[default 0: no wait]",
    ),
    EngineFlag(
        names=("--stream-interval",),
        dest="stream_interval",
        keyword="stream_interval",
        default=1,
        unit="iterations",
        check=(1, 100_000),
        engine="trtllm",
        source=_STREAM,
        help="TensorRT-LLM stream_interval: a streaming request's tokens are sent at its first decoding iteration "
        "(the prefill's: TTFT unchanged), then every this many iterations and at its end; each client-side "
        "inter-token gap spans that many steps (the host time it saves is not costed: the overlap scheduler hides "
        "it) [default 1, TensorRT-LLM's]",
    ),
)
"""TensorRT-LLM's own settings (``trtllm-serve --extra_llm_api_options`` YAML keys ``cuda_graph_config.max_batch_size``,
``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``, ``stream_interval``), defaults from its code."""


class Trtllm(Engine):
    """TensorRT-LLM (see the module docstring)."""

    record = RECORD
    pp_prefill_rule = PP_PREFILL_RULE
    kernel_fallback = ("vllm", "sglang")
    memory_flag = "--kv-cache-free-gpu-memory-fraction"  # trtllm-serve --kv_cache_free_gpu_memory_fraction
    memory_flag_help = "fraction of the memory left after weights for KV"
    memory_keyword = "kv_cache_free_gpu_memory_fraction"
    own_flags = OWN_FLAGS
    stream_counts = "iterations"  # stream_interval counts py_decoding_iter, the prefill's being 1 (_STREAM)
    stream_phase = 0  # sent when py_decoding_iter % stream_interval == 0
    partition_rule = (
        "TensorRT-LLM Mapping.pp_layers: torch.tensor_split, the remainder one each to the first stages "
        "(tensorrt_llm/mapping.py@b35ac1b6; 22/4 -> 6,6,5,5)"
    )
    decode_kernel_rules = DECODE_KERNEL_RULES
    decode_fp8_single_block = DECODE_FP8_SINGLE_BLOCK
    prefill_kernel_rules = PREFILL_KERNEL_RULES
    prefill_l2_edge = frozenset({"l40s"})
    decode_l2_edge = frozenset({"l40s"})

    def defaults(self, device: DeviceSpec, tp: int, pp: int, usage: str) -> EngineDefaults:
        return EngineDefaults(
            max_num_batched_tokens=MAX_NUM_TOKENS, max_num_seqs=MAX_BATCH_SIZE, mem_fraction=self.record.memory_fraction
        )

    def moe_comm_plan(self, flags: MoECommFlags) -> MoECommPlan:
        """Wide-EP alltoall through DeepEP: ``select_alltoall_method_type`` picks DeepEPLowLatency for every
        batch (CUDA graphs kept; IBGDA), normal DeepEP only with ``TRTLLM_ALLOW_NO_CUDA_GRAPHS=1``
        (``NVIDIA/TensorRT-LLM`` ``tensorrt_llm/_torch/modules/fused_moe`` alltoall selection, a stored version,
        not pinned): ``deepep`` with ``--deepep-mode auto`` is low latency; the overlaps as asked (an
        approximation: costed like SGLang's)."""
        from simcast.engines.moe_comm_rules import plan_of

        src = "NVIDIA/TensorRT-LLM tensorrt_llm/_torch/modules/fused_moe select_alltoall_method_type (not pinned)"
        return plan_of(flags, auto_mode="low_latency", source=src)

    def capture_limit(self, hbm_gib: float, tp: int, settings: Mapping[str, Any] | None = None) -> int:
        """``cuda_graph_config.max_batch_size`` (default :data:`MAX_CAPTURE_BATCH`)."""
        return int(self.setting(settings or {}, "cuda_graph_max_batch_size"))

    def captured(
        self,
        batch: Batch,
        hbm_gib: float,
        tp: int,
        decode_query_len: int = 1,
        settings: Mapping[str, Any] | None = None,
    ) -> bool:
        """Generation steps up to the capture limit; with ``--no-cuda-graph-padding`` only the batch sizes
        TensorRT-LLM captures (:func:`capture_sizes`)."""
        if not super().captured(batch, hbm_gib, tp, decode_query_len, settings):
            return False
        if (settings or {}).get("cuda_graph_padding") is False:
            return batch.num_requests in capture_sizes(self.capture_limit(hbm_gib, tp, settings))
        return True

    def batch_wait(self, settings: Mapping[str, Any]) -> tuple[int, float]:
        """``batch_wait_timeout_iters`` and ``batch_wait_max_tokens_ratio`` (:data:`OWN_FLAGS`); the wait is on
        only when both are above 0 (``_waiting_requests`` stops at once when the iteration limit is 0)."""
        iters, ratio = (
            int(self.setting(settings, "batch_wait_timeout_iters")),
            self.setting(settings, "batch_wait_max_tokens_ratio"),
        )
        return (iters, float(ratio)) if iters > 0 and ratio > 0 else (0, 0.0)

    def partition_order(self, pp: int) -> list[int]:
        return list(range(pp))

    def context_attention_dtype(self, kv_cache_dtype: str) -> str | None:
        """The prefill rows' ``attn_dtype`` TensorRT-LLM runs with a ``kv_cache_dtype`` cache: fp8 for an fp8 cache.

        Its tables time every fp8-cache shape twice, with bf16 and with fp8 context attention
        (ai-dynamo/aiconfigurator ``collector/trtllm/collect_attn.py``@05656140: ``use_fp8_context_fmha``). The
        PyTorch backend runs FP8 context FMHA whenever the cache is fp8 and paged context FMHA is on
        (``cpp/tensorrt_llm/thop/attentionOp.cpp``@38134b13: ``mFP8ContextFMHA = is_fp8_out || is_fp4_out ||
        (hasFp8KvCache() && use_paged_context_fmha)``), and paged context FMHA is on with KV block reuse,
        chunked prefill or draft tokens (``tensorrt_llm/_torch/attention_backend/trtllm.py``@00bede19), block reuse
        being the default (``tensorrt_llm/llmapi/llm_args.py``@fcd3f316 ``KvCacheConfig.enable_block_reuse=True``,
        passed as ``cache_reuse`` by ``_torch/pyexecutor/py_executor_creator.py``@bab0f2e6). bf16 attention over
        an fp8 cache runs only with block reuse and chunked prefill both off (``KvCacheConfig(enable_block_reuse=
        False)``), an option simcast does not model.
        """
        return "fp8" if kv_cache_dtype == "fp8" else kv_cache_dtype


ENGINE = Trtllm()
