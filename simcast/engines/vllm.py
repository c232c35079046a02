"""vLLM (V1 engine): everything simcast assumes it decides, each with its source.

* scheduler and memory: :data:`RECORD` (decode-first mixed steps, chunked prefill, 16-token KV blocks,
  ``on_demand`` KV admission with recompute preemption, ``--gpu-memory-utilization`` of total memory);
  the token budget and sequence limit by GPU (:func:`vllm_limits`);
* CUDA graphs (V1): ``cudagraph_mode`` FULL_AND_PIECEWISE by default: full graphs for uniform decode
  batches and piecewise graphs (everything but attention) for prefill and mixed batches, both for
  up to ``max_cudagraph_capture_size`` tokens, by default ``min(2 · max_num_seqs, 512)``
  (vllm/config/compilation.py ``CompilationConfig.cudagraph_mode`` and
  ``max_cudagraph_capture_size`` docstrings; ``max_num_seqs`` is 256 or 1024 by GPU, so 512).
  The GEMMs of a step of at most 512 tokens are captured, decode or not;
* layer partition: ``get_pp_indices`` (``VLLM_PP_LAYER_PARTITION`` for explicit counts);
* the measured-kernel database: its collector's generation rows hold ``seq_lens = step`` keys; the kernel
  choices its fits may declare (:data:`DECODE_KERNEL_RULES`, :data:`PREFILL_KERNEL_RULES`);
* launch lines (``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` @99d7eb5):
  ``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``,
  ``--enable-expert-parallel`` (the MoE layers' DP x TP ranks form one EP group instead of one TP
  group), ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--gpu-memory-utilization``,
  ``--quantization fp8``, ``--kv-cache-dtype fp8``; multi-node DP and Ray placement as
  ``docs/serving/data_parallel_deployment.md`` (v0.12.0) and ``docs/serving/distributed_serving.md`` say;
  disaggregation with ``--kv-transfer-config`` NixlConnector on both pools
  (``docs/features/nixl_connector_usage.md``) behind a proxy (the toy proxy of
  ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from simcast.core.chunking import PipelinePrefillRule
from simcast.core.device import DeviceSpec
from simcast.core.errors import SimcastInputError
from simcast.core.moe_comm import MoECommFlags, MoECommPlan
from simcast.core.moe_layout import replicas_share_nothing
from simcast.core.specs import GIB
from simcast.engines.base import Batch, Engine, EngineDefaults, LaunchTarget, PolicyLike
from simcast.engines.launch import HEAD, command_line, external_router, nodes, precision_flags, speculative_draft
from simcast.engines.launch_rules import Rule, flag_int
from simcast.engines.records import FRONT_END, EngineRecord

RECORD = EngineRecord(
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
    front_end_source=FRONT_END.format(fe=6.0, tok=2.0),
    front_end_processes="per_dp",
    front_end_processes_source="vllm/entrypoints/cli/serve.py ServeSubcommand.cmd (v0.10+): api_server_count "
    "defaults to data_parallel_size (internal load balancing); with one, the API server runs in this process "
    "(uvloop.run(run_server(args))): one asyncio loop does HTTP, templating, tokenisation (AsyncLLM's input "
    "processor) and the IPC to the engine core",
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
)


MAX_CAPTURE_TOKENS = 512
"""vLLM's default ``max_cudagraph_capture_size``: ``min(2 · max_num_seqs, 512)`` with ``max_num_seqs`` >= 256."""
VLLM_DP_RPC_PORT = 13345  # any free port on the head node (vLLM's data-parallel deployment example uses 13345)
RAY_PORT = 6379  # ray start --head's default port
NIXL_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
SPEC_METHOD = {"mtp": "mtp", "eagle": "eagle", "eagle3": "eagle3", "ngram": "ngram"}
"""simcast's speculative method -> vLLM's ``--speculative-config`` ``method``."""

DECODE_KERNEL_RULES = {s: ("", "fa2_varlen") for s in ("a100_sxm", "l40s")}
"""Systems whose decode fit may declare vLLM's FlashAttention-2 launch: its A100 and L40S tables time its
FlashAttention-2 build (ops ``vllm_flash_attn``, ``vllm_flash_attn_fa2``; L40S's fp8 rows time FlashInfer,
where the fit keeps one kernel): no split for group 1, copies around a GQA launch
(:mod:`simcast.cost.kernels.flash_decode`; the other tables: :mod:`simcast.calib.fitting.kernel_choices`)."""
DECODE_KERNEL_BY_VERSION = {
    "sm90": (("0.14", "FLASH_ATTN: vllm-flash-attn FlashAttention-3"),),
    "sm100": (("0.14", "FLASHINFER: FlashInfer's own decode"), ("0.24", "FLASHINFER: FlashInfer's trtllm-gen decode")),
}
"""vLLM's dense (MHA/GQA, bf16 or fp8 KV) decode attention kernel by GPU family, from the version on (the
earliest is that of the oldest measured table; read, not
simulated: simcast keeps one fit per engine and system). SM90 (H100/H200): ``_get_backend_priorities`` lists
FLASH_ATTN first for every non-MLA case off SM100 (vllm-project/vllm ``vllm/platforms/cuda.py``@002db495, a
pre-0.24 version, and @6e448d0e, v0.27.1: ``[FLASH_ATTN, FLASHINFER, TRITON_ATTN, ...]``), and FLASH_ATTN runs
FlashAttention-3 on SM90 (``vllm_flash_attn_version`` 3: aiconfigurator's 0.24.0 collector labels such rows
``vllm_flash_attn_fa3``, ai-dynamo/aiconfigurator ``collector/vllm/collect_attn.py``@095f58a5
``_dense_kernel_source``); so 0.24 decodes on Hopper with the kernel of the 0.14-0.19 tables (op
``vllm_flash_attn``) and no version switch is needed there. Its split: FA3's own heuristic, capped under full
CUDA graphs at ``VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH`` (default 32, vllm/envs.py, PR 25274; the
metadata builder of ``vllm/v1/attention/backends/flash_attn.py`` passes it as ``num_splits`` to
``get_scheduler_metadata``); the fit's split form stands for it. SM100: FLASHINFER first (same files); from 0.24
its decode is TensorRT-LLM-gen's (tables' op ``vllm_flashinfer_trtllmdecode`` against ``vllm_flashinfer`` in
0.14-0.22). MLA (DeepSeek) on SM90: FLASH_ATTN_MLA, then FLASHMLA (same lists)."""
KV_CACHE_WRITE = (
    "vLLM writes each layer's new keys and values with reshape_and_cache_flash as its own call "
    "(do_kv_cache_update; FlashAttention's forward_includes_kv_cache_update = False since vllm-project/vllm "
    "PR 25954); its 0.19.0 tables time forward alone, so the H100/H200 decode fits add the write "
    "(kv_write_s, kv_write_elem_s) fitted on the difference between the 0.14.0 tables (write timed) and "
    "0.19.0's at the same shapes"
)
"""Why vLLM's Hopper decode fits carry a KV-cache write term (:mod:`simcast.cost.kernels.kv_write`)."""
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200")
PREFILL_KERNEL_RULES = {**{s: ("", "trtllm_ctx") for s in BLACKWELL}, "l40s": ("",)}
"""Systems whose prefill fit may add a per-CTA time: on Blackwell vLLM's FlashInfer backend runs TRT-LLM-gen's
context kernels (op ``vllm_flashinfer_trtllmprefill`` in its tables)."""

_VL_PAR = "vllm-project/vllm vllm/config/parallel.py@00193b82"
"""``all2all_backend`` (deepep_low_latency | deepep_high_throughput), ``enable_dbo`` with
``dbo_decode_token_threshold`` 32 and ``dbo_prefill_token_threshold`` 512."""
DBO_DECODE_TOKENS, DBO_PREFILL_TOKENS = 32, 512

ROCM_KERNELS = {
    "gemm": "torch / hipBLASLt GEMMs; aiter's tuned GEMMs only with VLLM_ROCM_USE_AITER=1 and "
    "VLLM_ROCM_USE_AITER_LINEAR (vllm/envs.py: 'Disable aiter ops unless specifically enabled', default False)",
    "attention": "ROCm attention backends (Triton / paged attention); aiter MLA decode with VLLM_ROCM_USE_AITER=1 "
    "and VLLM_ROCM_USE_AITER_MLA (vllm/envs.py, vllm/platforms/rocm.py get_attn_backend_cls)",
    "moe": "Triton fused_moe; aiter fused MoE with VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MOE (vllm/envs.py)",
}
"""vLLM's kernel choices on ROCm: aiter is opt-in (its parent switch is off by default); the MI300X/MI325X/MI355X
profiles' ``engines.vllm`` fits come from AMD's measured rows (``scripts/fit_amd.py``)."""

_VL_DP = "vllm docs/serving/data_parallel_deployment.md@v0.12.0"
LAUNCH_RULES: tuple[Rule, ...] = (
    Rule(
        name="local_dp_within_dp",
        says="--data-parallel-start-rank + --data-parallel-size-local must be <= --data-parallel-size",
        source=f"{_VL_DP} (multi-node: ranks start-rank .. start-rank + size-local - 1 run on this node)",
        ok=lambda f: (
            flag_int(f, "--data-parallel-start-rank", 0)
            + flag_int(f, "--data-parallel-size-local", flag_int(f, "--data-parallel-size"))
            <= flag_int(f, "--data-parallel-size")
        ),
    ),
    Rule(
        name="headless_needs_head",
        says="--headless (a node without the API server) needs --data-parallel-address and "
        "--data-parallel-start-rank of the head it joins",
        source=f"{_VL_DP}; examples/online_serving/multi_instance_data_parallel.py@v0.9.1",
        ok=lambda f: (
            "--headless" not in f or (bool(f.get("--data-parallel-address")) and "--data-parallel-start-rank" in f)
        ),
    ),
    Rule(
        name="multi_node_dp_needs_address",
        says="--data-parallel-size-local below --data-parallel-size (DP over several nodes) needs "
        "--data-parallel-address and --data-parallel-rpc-port",
        source=_VL_DP,
        ok=lambda f: (
            flag_int(f, "--data-parallel-size-local", flag_int(f, "--data-parallel-size"))
            >= flag_int(f, "--data-parallel-size")
            or (bool(f.get("--data-parallel-address")) and bool(f.get("--data-parallel-rpc-port")))
        ),
    ),
)
"""The argument rules ``--emit vllm`` checks on each server line."""


def vllm_limits(device: DeviceSpec, usage: str) -> tuple[int, int]:
    """vLLM's ``_set_default_args`` table: (max_num_batched_tokens, max_num_seqs) by GPU memory and name
    (vLLM tests the name the driver reports for "a100": the profile's ``reported_name``) and usage context
    (server vs LLM class)."""
    big = device.hbm_bytes >= 70 * GIB and "a100" not in device.reported_name.lower()
    if big:
        return (8192 if usage == "server" else 16384), 1024
    return (2048 if usage == "server" else 8192), 256


PP_PREFILL_RULE = PipelinePrefillRule(
    engine="vllm",
    overlap=True,
    chunked_by_default=True,
    cite="vllm/v1/core/sched/scheduler.py @00024d31, vllm/v1/engine/core.py @00080ee1",
    source=(
        "Scheduler.schedule + _update_after_schedule: "
        "num_computed_tokens advances when a chunk is scheduled, so the next chunk is scheduled in the "
        "next step ('PP>1 and we have already scheduled all prompt tokens but they are not finished "
        "yet'); EngineCore.step_with_batch_queue: batch_queue_size = "
        "max_concurrent_batches = pp (vllm/config/vllm.py) steps in flight"
    ),
)
"""What the engine does with one long prompt under PP + chunked prefill (read from its source)."""


class Vllm(Engine):
    """vLLM V1 (see the module docstring)."""

    record = RECORD
    pp_prefill_rule = PP_PREFILL_RULE
    kernel_fallback = ("sglang", "trtllm")
    emits = True
    memory_flag = "--gpu-memory-utilization"
    memory_flag_help = "fraction of total GPU memory for weights, activations and KV"
    memory_keyword = "gpu_memory_utilization"
    partition_rule = (
        "vLLM get_pp_indices: L//P per stage, the remainder one each to the stages before the last, "
        "from the back (vllm/distributed/utils.py@5a6541db; 22/4 -> 5,6,6,5)"
    )
    partition_env_var = "VLLM_PP_LAYER_PARTITION"
    prefix_cache_when = "cached when scheduled (vLLM V1 allocate_slots)"
    graph_limit_counts = "tokens"
    decode_kernel_rules = DECODE_KERNEL_RULES
    prefill_kernel_rules = PREFILL_KERNEL_RULES
    prefill_l2_edge = frozenset({"l40s"})
    decode_l2_edge = frozenset({"l40s", "a100_sxm"})
    launch_rules = LAUNCH_RULES
    rocm_kernels = ROCM_KERNELS

    def defaults(self, device: DeviceSpec, tp: int, pp: int, usage: str) -> EngineDefaults:
        budget, seqs = vllm_limits(device, usage)
        return EngineDefaults(
            max_num_batched_tokens=budget, max_num_seqs=seqs, mem_fraction=self.record.memory_fraction
        )

    def moe_comm_plan(self, flags: MoECommFlags) -> MoECommPlan:
        """``--all2all-backend deepep_low_latency|deepep_high_throughput`` (one mode for every batch; plain
        ``deepep`` takes ``--deepep-mode`` normal or low_latency); two-batch overlap is vLLM's dual-batch
        overlap (``--enable-dbo``), which splits decode batches of >= 32 tokens and prefills of >= 512
        (:data:`_VL_PAR`); vLLM has no single-batch overlap."""
        from simcast.engines.moe_comm_rules import plan_of

        if flags.single_batch_overlap:
            raise SimcastInputError("--enable-single-batch-overlap", "vllm", "an SGLang flag (vLLM has no SBO)")
        if flags.a2a_backend == "deepep" and flags.deepep_mode == "auto":
            allowed = "vLLM runs one mode: --moe-a2a-backend deepep_low_latency or deepep_high_throughput"
            raise SimcastInputError("--moe-a2a-backend", "deepep --deepep-mode auto", allowed)
        return plan_of(
            flags,
            source=_VL_PAR,
            tbo_min_tokens=DBO_PREFILL_TOKENS,
            tbo_min_decode_tokens=DBO_DECODE_TOKENS,
        )

    def moe_comm_flags(self, plan: MoECommPlan) -> list[str]:
        mode = {"low_latency": "deepep_low_latency", "normal": "deepep_high_throughput"}.get(plan.deepep_mode, "")
        out = ["--all2all-backend", mode] if plan.deepep and mode else []
        return out + (["--enable-dbo"] if plan.two_batch_overlap else [])

    def capture_limit(self, hbm_gib: float, tp: int, settings: Mapping[str, Any] | None = None) -> int:
        return MAX_CAPTURE_TOKENS

    def captured(
        self,
        batch: Batch,
        hbm_gib: float,
        tp: int,
        decode_query_len: int = 1,
        settings: Mapping[str, Any] | None = None,
    ) -> bool:
        """Steps of at most :data:`MAX_CAPTURE_TOKENS` tokens (full graphs for decode, piecewise for the rest)."""
        return batch.num_tokens <= self.capture_limit(hbm_gib, tp)

    def partition_order(self, pp: int) -> list[int]:
        # remainder layers go to the stages before the last, starting from the back
        return [(pp - 2 - k) % pp for k in range(pp)] if pp > 1 else [0]

    def decode_kv_len(self, step: Any) -> Any:
        """vLLM's collector builds ``seq_lens = step`` (the new token included;
        ai-dynamo/aiconfigurator collector/vllm/collect_attn.py)."""
        return step

    def server_lines(self, cfg: LaunchTarget, pol: PolicyLike, batch: int, notes: list[str]) -> list[tuple[str, str]]:
        par, model = cfg.parallel, cfg.model.name
        dpn = cfg.device.links.devices_per_node
        base: list = ["vllm", "serve", model, "--tensor-parallel-size", par.tp, "--pipeline-parallel-size", par.pp]
        base += ["--data-parallel-size", par.dp, "--max-num-seqs", batch]
        base += ["--max-num-batched-tokens", pol.max_num_batched_tokens, "--gpu-memory-utilization"]
        base.append(f"{pol.mem_fraction if pol.mem_fraction_of == 'total' else 0.9:g}")
        if cfg.model.moe is not None and par.ep > 1:
            base.append("--enable-expert-parallel")
            if par.ep != par.tp * par.dp:
                notes.append(
                    f"vLLM's expert parallelism spans TP x DP = {par.tp * par.dp} ranks; "
                    f"simcast's layout has EP={par.ep}, MoE-TP={par.moe_tp}, MoE-DP={par.moe_dp}"
                )
        if cfg.model.moe is not None and not cfg.moe_comm.is_default:
            base += self.moe_comm_flags(self.moe_comm_plan(cfg.moe_comm))
        if cfg.model.moe is not None and par.eplb:  # vLLM --enable-eplb, redundant experts in --eplb-config
            conf = json.dumps({"num_redundant_experts": par.redundant_experts}, separators=(",", ":"))
            base += ["--enable-eplb", "--eplb-config", conf]
        elif cfg.model.moe is not None and par.redundant_experts:
            notes.append(f"vLLM places {par.redundant_experts} redundant experts only with --enable-eplb")
        if cfg.model.moe is not None and replicas_share_nothing(par):
            notes.append(
                f"independent replicas: on an MoE model vLLM's --data-parallel-size joins the DP ranks' experts into "
                f"one group; to run {par.dp} replicas that share nothing, launch each with --data-parallel-size 1 "
                "behind a router"
            )
        base += precision_flags(cfg, self.fp8_kv_cache_flag)
        draft = speculative_draft(cfg, notes)
        if draft is not None:
            base += self.speculative_flags(cfg.speculative, draft)
        replica = par.tp * par.pp
        if par.world_size <= dpn:
            return [("", command_line(base))]
        if replica > dpn:  # one replica spans nodes: Ray places its workers
            n = nodes(cfg, par.world_size)
            extra = ["--distributed-executor-backend", "ray"] + (
                ["--data-parallel-backend", "ray"] if par.dp > 1 else []
            )
            out = [("node 0", command_line(["ray", "start", "--head", "--port", RAY_PORT]))]
            out += [
                (f"node {i}", command_line(["ray", "start", "--address", f"{HEAD}:{RAY_PORT}"])) for i in range(1, n)
            ]
            return [*out, ("node 0", command_line(base + extra))]
        local = dpn // replica  # DP ranks per node
        out = []
        for i, start in enumerate(range(0, par.dp, local)):
            here = ["--data-parallel-size-local", min(local, par.dp - start)]
            here += ["--data-parallel-address", HEAD, "--data-parallel-rpc-port", VLLM_DP_RPC_PORT]
            if start:
                here += ["--headless", "--data-parallel-start-rank", start]
            out.append((f"node {i}", command_line(base + here)))
        return out

    def is_server_line(self, words: list[str]) -> bool:
        return words[:2] == ["vllm", "serve"]

    def router_lines(
        self, commands: list[tuple[str, str]], router: str, dp: int, notes: list[str]
    ) -> list[tuple[str, str]]:
        """vLLM routes among its ``--data-parallel-size`` ranks itself (``DPLBAsyncMPClient``: the rank of fewest
        ``4 * waiting + running``, ``vllm/v1/engine/core_client.py``@364631ab), with no policy flag; the
        cache-aware routers run outside it (:func:`simcast.engines.launch.external_router`)."""
        extra = external_router(router, notes)
        if router in ("round_robin", "least_loaded", "random"):
            notes.append(
                f"--router {router}: vLLM balances its data-parallel ranks itself (fewest 4 x waiting + running); "
                "an external router needs one vllm serve per replica"
            )
        elif router == "cache_aware":
            notes.append("--router cache_aware: sgl-router's policy; no vLLM launch line for it")
        return [*commands, *extra]

    def speculative_flags(self, spec: Any, draft: str) -> list[str]:
        conf: dict[str, object] = {"method": SPEC_METHOD[spec.method], "num_speculative_tokens": spec.k}
        if draft:
            conf["model"] = draft
        if spec.method == "ngram":
            conf["prompt_lookup_max"] = spec.k  # vLLM requires it for ngram; the n-gram window is not modelled
        return ["--speculative-config", json.dumps(conf, separators=(",", ":"))]

    def disagg_flags(self, role: str, transfer_backend: str) -> list[str]:
        return ["--kv-transfer-config", NIXL_CONFIG]

    def disagg_router(self) -> str:
        return "# route each request to a prefill instance, then a decode instance (vLLM's toy_proxy_server.py)"


ENGINE = Vllm()
