"""ATOM (AMD's serving engine on Instinct GPUs, github ROCm/ATOM): everything simcast assumes it decides, each
with its source (read at ROCm/ATOM@ffdf3bb5).

* scheduler and memory: :data:`RECORD`. ``atom/model_engine/scheduler.py`` ``Scheduler.schedule`` "tries
  prefill first; if no new prefills are ready, falls back to decoding already-running sequences" (prefill-first
  steps, as SGLang), chunked prefill on (``--enable_chunked_prefill``, default True) within
  ``--max-num-batched-tokens`` 16384 per step, ``--max-num-seqs`` 512, ``--block-size`` 16; a running
  sequence that cannot get a block preempts another (``Scheduler.preempt``: its blocks freed, recomputed
  later), so KV admission is vLLM's ``on_demand``; ``--gpu-memory-utilization`` 0.9 of total memory
  (``atom/model_engine/model_runner.py`` ``get_num_blocks``: budget = total x utilization);
  ``--enable_prefix_caching`` on by default (``atom/model_engine/arg_utils.py``);
* CPU per step: overlapped with the GPU. ``atom/model_engine/model_runner.py`` ``tokenIDProcessor``:
  ``is_deferred_out`` is True at PP 1 (also at ROCm/ATOM@58c8a2d1, May 2026); ``ModelRunner.forward`` prepares and
  launches step n+1, then ``prepare_sampled_ids`` waits only for step n's asynchronous token copy
  (``recv_async_output``) and queues step n+1's, and the next step's input tokens are read on the GPU from the
  previous batch (``get_token_locations``): the scheduler's and input preparation's CPU time of a step runs while
  the previous step is on the GPU (a step costs max(CPU, GPU), as SGLang's overlap scheduler);
* HIP graphs: ``--cudagraph-mode FULL`` with ``--cudagraph-capture-sizes`` [1, 2, 4, 8, 16, 32, 48, 64, 128,
  256, 512] (``arg_utils.py``): decode batches up to 512 requests replay a captured graph (padded up to the
  next captured size: the padding is not costed), prefill steps run eagerly;
* devices: ATOM runs on AMD Instinct GPUs only (ROCm, aiter kernels); any other device is refused
  (:meth:`Atom.check_device`, by the name the driver reports);
* kernels: ATOM runs aiter's kernels (MLA decode, fused MoE; ``atom/model_ops``) and hipBLASLt / aiter-tuned
  GEMMs. The aiter GEMMs and fused MoE are fitted per device on aiter's tuned-kernel tables (``engines.atom`` of
  the AMD profiles, ``scripts/fit_aiter.py``, ROCm/aiter@e4048607a5); attention and the all-reduce borrow the
  profile's vLLM-on-ROCm fits, which the outputs label as transferred ("vllm fit (fallback: no atom fit on
  ...)"), then SGLang's;
* launch lines: ``python -m atom.entrypoints.openai_server`` (the README's launch) with ``--model``,
  ``--tensor-parallel-size``, ``--data-parallel-size``, ``--enable-expert-parallel``,
  ``--enable-dp-attention``, ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--gpu-memory-utilization``,
  ``--kv_cache_dtype fp8`` (``arg_utils.py``); one node, no PP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcast.core.device import DeviceSpec
from simcast.core.errors import SimcastInputError
from simcast.core.kv import is_fp4_kv
from simcast.engines.base import Engine, EngineDefaults, LaunchTarget, PolicyLike
from simcast.engines.launch import command_line
from simcast.engines.records import FRONT_END, EngineRecord

_ATOM = "ROCm/ATOM@ffdf3bb5"
RECORD = EngineRecord(
    name="atom",
    version="ATOM (ROCm/ATOM@ffdf3bb5)",
    decode_first=False,
    chunked_prefill=True,
    kv_block_tokens=16,
    kv_admission="on_demand",
    memory_of="total",
    memory_fraction=0.9,
    prefix_caching=True,
    step_overhead_s=2.0e-3,
    per_request_overhead_s=5e-6,
    # Deferred output (model_runner.py tokenIDProcessor.is_deferred_out, True at PP 1): the CPU schedules and
    # launches step n+1 before it waits for step n's sampled tokens, so the CPU work hides behind the GPU.
    overlap_cpu=True,
    cpu_source="assumption (size transferred from vLLM's, no ATOM measurement): ~2 ms CPU per step + 5 us per "
    "request, hidden behind the GPU by ATOM's deferred output (ROCm/ATOM model_runner.py is_deferred_out at PP 1: "
    "step n+1 is launched before step n's tokens are read back); calibrate with simcast calibrate-serving",
    front_end_s=6e-3,
    front_end_per_token_s=2e-6,
    front_end_source=FRONT_END.format(fe=6.0, tok=2.0),
    flags={
        "tp": "--tensor-parallel-size",
        "pp": "--pipeline-parallel-size",
        "dp": "--data-parallel-size",
        "memory": "--gpu-memory-utilization",
        "max_num_batched_tokens": "--max-num-batched-tokens",
        "max_num_seqs": "--max-num-seqs",
        "max_model_len": "--max-model-len",
        "prefix_caching": "--enable_prefix_caching",
    },
    sources=(
        f"{_ATOM} atom/model_engine/scheduler.py Scheduler.schedule: prefill first, else decode; chunked "
        "prefill of partial prefills first; preempt() frees a sequence's blocks for recompute",
        f"{_ATOM} atom/model_engine/arg_utils.py: max_num_batched_tokens 16384, max_num_seqs 512, block_size 16, "
        "gpu_memory_utilization 0.9, enable_chunked_prefill and enable_prefix_caching True, cudagraph_mode FULL, "
        "cudagraph_capture_sizes up to 512",
        f"{_ATOM} atom/model_engine/model_runner.py get_num_blocks: KV budget = total memory x "
        "gpu_memory_utilization - weights - activations",
    ),
)

MAX_NUM_BATCHED_TOKENS = 16384
MAX_NUM_SEQS = 512
"""``atom/model_engine/arg_utils.py`` defaults (see the record's sources)."""
CAPTURE_SIZES = (1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512)
"""``--cudagraph-capture-sizes`` default: decode batches ATOM captures (larger ones run eagerly)."""
AMD_INSTINCT = "AMD Instinct"
"""How the driver names every GPU ATOM runs on (``torch.cuda.get_device_name()`` under ROCm)."""


ROCM_KERNELS = {
    "gemm": "aiter tuned GEMMs over hipBLASLt / CK (atom/model_ops linear layers)",
    "attention": "aiter attention: MLA decode with aiter's asm kernels, paged attention for MHA (atom/model_ops)",
    "moe": "aiter fused MoE (CK / asm; --moe-backend standard) (atom/model_ops/fused_moe)",
}
"""ATOM's kernel choices (always aiter on ROCm); GEMMs and MoE costed with the profile's aiter fits (``engines.atom``),
attention and all-reduce with its vLLM fits, labelled as a fallback."""


class Atom(Engine):
    """ATOM (see the module docstring)."""

    record = RECORD
    kernel_fallback = ("vllm", "sglang")
    rocm_kernels = ROCM_KERNELS
    emits = True

    def accepts_memory_flag(self, owner: str | None) -> bool:
        """ATOM's ``--gpu-memory-utilization`` is spelt as vLLM's, whose flag (declared by vLLM) sets it."""
        return owner == "vllm"

    @property
    def partition_name(self) -> str:
        return "vllm"

    def check_device(self, device: DeviceSpec) -> None:
        """ATOM runs on AMD Instinct GPUs only: another device is a one-line input error."""
        if not device.reported_name.startswith(AMD_INSTINCT):
            raise SimcastInputError(
                "--engine", self.name, f"ATOM runs on AMD Instinct GPUs (ROCm) only, not {device.name}"
            )

    def check_kv_cache_dtype(self, kv_cache_dtype: str, device: DeviceSpec) -> None:
        """ATOM's KV cache is the model dtype or fp8 (``--kv_cache_dtype fp8``, ``arg_utils.py``): no FP4 cache."""
        if is_fp4_kv(kv_cache_dtype):
            raise SimcastInputError("--kv-cache-dtype", kv_cache_dtype, "ATOM's KV cache is auto or fp8 (no FP4 cache)")

    def defaults(self, device: DeviceSpec, tp: int, pp: int, usage: str) -> EngineDefaults:
        self.check_device(device)
        return EngineDefaults(
            max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
            max_num_seqs=MAX_NUM_SEQS,
            mem_fraction=RECORD.memory_fraction,
        )

    def capture_limit(self, hbm_gib: float, tp: int, settings: Mapping[str, Any] | None = None) -> int:
        return CAPTURE_SIZES[-1]

    def server_lines(self, cfg: LaunchTarget, pol: PolicyLike, batch: int, notes: list[str]) -> list[tuple[str, str]]:
        par = cfg.parallel
        if par.world_size > cfg.device.links.devices_per_node or par.pp > 1:
            raise SimcastInputError(
                "--emit", self.name, "ATOM launch lines cover one node without pipeline parallelism"
            )
        cmd: list = ["python", "-m", "atom.entrypoints.openai_server", "--model", cfg.model.name]
        cmd += ["--tensor-parallel-size", par.tp, "--data-parallel-size", par.dp, "--max-num-seqs", batch]
        cmd += ["--max-num-batched-tokens", pol.max_num_batched_tokens, "--gpu-memory-utilization"]
        cmd.append(f"{pol.mem_fraction if pol.mem_fraction_of == 'total' else 0.9:g}")
        if cfg.model.moe is not None and par.ep > 1:
            cmd.append("--enable-expert-parallel")
        if cfg.model.moe is not None and par.dp > 1:
            cmd.append("--enable-dp-attention")
        if cfg.kv_cache_dtype == "fp8":
            cmd += ["--kv_cache_dtype", "fp8"]
        q = cfg.model.quant
        if q is not None and q.method == "fp8" and q.dense_format == "fp8":
            notes.append("ATOM quantizes online through --quant-config (ptpc_fp8): or serve an FP8 checkpoint")
        if cfg.speculative is not None:
            notes.append("speculative decoding: add ATOM's --method mtp --num-speculative-tokens K by hand")
        return [("", command_line(cmd))]

    def is_server_line(self, words: list[str]) -> bool:
        return "atom.entrypoints.openai_server" in words


ENGINE = Atom()
