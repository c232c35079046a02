"""SGLang: everything simcast assumes it decides, each with its source.

* scheduler and memory: :data:`RECORD` (prefill-first steps, chunked prefill, token-level KV pages,
  ``reserve_ratio`` KV admission with the constants of :data:`SGLANG_RATIO`, ``--mem-fraction-static``);
  the chunk size and memory fraction by GPU (:func:`sglang_limits`); at PP > 1 the overlap scheduler off,
  hidden states sent as 1/tp slices, and ``--enable-dynamic-chunking`` (:mod:`simcast.core.chunking`);
* CUDA graphs: decode batches of at most ``cuda_graph_max_bs`` requests
  (python/sglang/srt/server_args.py ``ServerArgs._handle_gpu_memory_settings`` ~v0.5.4: by GPU
  memory and TP size, :func:`sglang_max_bs`); prefill and mixed steps run eagerly (piecewise prefill graphs
  are opt-in); its TARGET_VERIFY steps (speculative decoding) are captured like decode;
* layer partition: ``get_pp_indices`` (``SGLANG_PP_LAYER_PARTITION`` for explicit counts);
* the measured-kernel database: its collector's generation rows cache ``step`` tokens and attend one more;
  its DeepEP all-to-all tables are its own (``wideep_deepep_{ll,normal}_perf``); the kernel choices its fits
  may declare (:data:`DECODE_KERNEL_RULES`, :data:`PREFILL_KERNEL_RULES`);
* launch lines (``docs/advanced_features/server_arguments.md`` @b36e8e1): ``--tp-size``, ``--pp-size``,
  ``--dp-size``, ``--enable-dp-attention``, ``--ep-size``, ``--moe-dp-size``,
  ``--max-running-requests``, ``--chunked-prefill-size``, ``--mem-fraction-static``,
  ``--quantization fp8``, ``--kv-cache-dtype fp8_e4m3``, ``--nnodes``, ``--node-rank``,
  ``--dist-init-addr``; default port 30000 (``ServerArgs.port``). Under DP attention SGLang divides
  ``--chunked-prefill-size`` by ``--dp-size`` (``ServerArgs._handle_data_parallelism``) and
  ``--max-running-requests`` counts all DP ranks, so both are emitted as the per-rank value x dp.
  Disaggregation: ``--disaggregation-mode prefill|decode`` and ``--disaggregation-transfer-backend
  mooncake|nixl`` (``python/sglang/srt/server_args.py``; ``docs/advanced_features/pd_disaggregation.md``)
  behind ``python -m sglang_router.launch_router --pd-disaggregation`` (same page).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcast.core.chunking import PipelinePrefillRule
from simcast.core.device import DeviceSpec
from simcast.core.moe_comm import MoECommFlags, MoECommPlan
from simcast.core.moe_layout import spans_replicas
from simcast.engines.base import Engine, EngineDefaults, LaunchTarget, PolicyLike
from simcast.engines.launch import HEAD, command_line, external_router, nodes, precision_flags, speculative_draft
from simcast.engines.records import FRONT_END, EngineRecord
from simcast.engines.sglang_flags import OWN_FLAGS, ROCM_KERNELS
from simcast.engines.sglang_launch_rules import _SG_ARGS
from simcast.engines.sglang_launch_rules import LAUNCH_RULES as LAUNCH_RULES
from simcast.engines.sglang_layers import sglang_layer_groups

RECORD = EngineRecord(
    name="sglang",
    version="SGLang ~0.4.9-0.5.4",
    decode_first=False,
    chunked_prefill=True,
    kv_block_tokens=1,
    kv_admission="reserve_ratio",
    memory_of="static",
    memory_fraction=0.88,  # replaced by _handle_gpu_memory_settings' rule (see sglang_limits)
    prefix_caching=True,
    # SGLang's overlap scheduler hides CPU work behind the GPU (SGLang docs, overlap scheduler).
    step_overhead_s=1.0e-3,
    per_request_overhead_s=3e-6,
    overlap_cpu=True,
    cpu_source="assumption: ~1 ms + 3 us per request, hidden behind the GPU by the "
    "overlap scheduler; calibrate with simcast calibrate-serving",
    front_end_s=5e-3,
    front_end_per_token_s=2e-6,
    front_end_processes="one",
    front_end_processes_source="python/sglang/srt/entrypoints/http_server.py launch_server docstring: the HTTP "
    "server and the TokenizerManager (tokenises the requests and sends them to the scheduler) run in the main "
    "process, one for all DP ranks; the Scheduler(s) and the DetokenizerManager are subprocesses",
    front_end_source=FRONT_END.format(fe=5.0, tok=2.0).replace(
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
)

SGLANG_RATIO = {"init": 0.7, "min_factor": 0.14, "decay_steps": 600, "clip_max_new_tokens": 4096, "retract_steps": 20}
"""SGLang's reservation constants (python/sglang/srt/global_config.py and schedule_policy.py, v0.4.9)."""
MAX_RUNNING_REQUESTS = 4096
"""model_runner.py: max running requests clamp(.., 2048, 4096)."""
SGLANG_PORT = 30000  # SGLang's default server port (ServerArgs.port)
SGLANG_DIST_PORT = 50000  # any free port on the head node for --dist-init-addr
SGLANG_ROUTER_PORT = 8000
SGLANG_ROUTER_POLICIES = ("random", "round_robin", "cache_aware", "power_of_two")
"""sgl-router's ``--policy`` choices (``sgl-router/py_src/sglang_router/router_args.py``@e46dcd87; default
``cache_aware``, ``cache_threshold`` 0.3, ``balance_abs_threshold`` 64, ``balance_rel_threshold`` 1.5)."""
SPEC_ALGORITHM = {"mtp": "NEXTN", "eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM"}
"""simcast's speculative method -> SGLang's ``--speculative-algorithm``."""

DECODE_KERNEL_RULES = {"l40s": ("", "flashinfer_tc")}
"""SGLang on L40S times FlashInfer (op ``flashinfer`` in its table) and may declare the engine's tensor-core /
CUDA-core choice (:mod:`simcast.cost.kernels.flashinfer_decode`); its A100 table times FlashAttention (op
``flash_attention``), one kernel."""
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200")
PREFILL_KERNEL_RULES = {**{s: ("", "trtllm_ctx") for s in BLACKWELL}, "l40s": ("", "flashinfer_fa2")}
"""On Blackwell SGLang's ``trtllm_mha`` backend runs TRT-LLM-gen's context kernels (one query head per CTA);
"flashinfer_fa2" (FlashInfer's query tile per launch: SGLang's L40S table times FlashInfer, op ``flashinfer``)."""
DEEPEP_TABLES = (("wideep_deepep_ll_perf", "low_latency"), ("wideep_deepep_normal_perf", "normal"))
"""SGLang's DeepEP dispatch/combine tables (times in ``*_us`` columns; 8 ranks per node), read both."""

TBO_SOURCE = "sgl-project/sglang python/sglang/srt/operations_strategy.py@1e90555b (DeepSeek/Qwen3 TBO operations)"
SBO_SOURCE = "sgl-project/sglang python/sglang/srt/single_batch_overlap.py@04d8ec18 (execute_sbo)"


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


def sglang_limits(device: DeviceSpec, tp: int, pp: int) -> tuple[int, float]:
    """SGLang's ``_handle_gpu_memory_settings``: (chunked_prefill_size, mem_fraction_static) by GPU size."""
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
    return chunk, round((gpu_mb - reserved_mb) / gpu_mb, 3)


PP_PREFILL_RULE = PipelinePrefillRule(
    engine="sglang",
    overlap=True,
    chunked_by_default=True,
    cite="python/sglang/srt/managers/scheduler_pp_mixin.py @00ff98d3",
    source=(
        "event_loop_pp: pp_size + "
        "pp_async_batch_depth (default 0) microbatch slots; rank 0 schedules the next chunk of the "
        "chunked request each slot (history_len = tokens already scheduled) and launches it once its "
        "previous batch is launched; async send, sync recv (the receiver waits); rank 0 blocks on the "
        "output of the batch pp slots back, so at most pp batches are in flight"
    ),
)
"""What the engine does with one long prompt under PP + chunked prefill (read from its source)."""


class Sglang(Engine):
    """SGLang (see the module docstring)."""

    record = RECORD
    pp_prefill_rule = PP_PREFILL_RULE
    kernel_fallback = ("vllm", "trtllm")
    emits = True
    layer_groups_rule = staticmethod(sglang_layer_groups)  # --moe-dense-tp-size, --enable-dp-lm-head
    pd_router = "cache_aware"
    """sgl-router PD mode without ``--prefill-policy``/``--decode-policy`` picks both workers by ``--policy``,
    default ``cache_aware`` (``sgl-router/py_src/sglang_router/router_args.py``@e46dcd87; sglang 0.5.8.post1's
    router start-up line prints ``prefill_policy: None, decode_policy: None | policy: CacheAware``)."""
    memory_flag = "--mem-fraction-static"
    memory_flag_help = "fraction of total GPU memory for weights and the KV pool"
    memory_keyword = "mem_fraction_static"
    own_flags = OWN_FLAGS
    stream_phase = 1  # --stream-interval n: its k-th token is sent when k mod n is 1 (sglang_flags)
    partition_rule = (
        "SGLang get_pp_indices: L//P per stage, the remainder one each to the last stages "
        "(python/sglang/srt/distributed/utils.py@1107be11; 22/4 -> 5,5,6,6)"
    )
    partition_env_var = "SGLANG_PP_LAYER_PARTITION"
    pp_dynamic_chunking = True
    a2a_table = "wideep_deepep_ll_perf"
    a2a_table_label = "wideep_deepep_{ll,normal}_perf"  # reads both
    a2a_deepep_tables = DEEPEP_TABLES
    decode_kernel_rules = DECODE_KERNEL_RULES
    prefill_kernel_rules = PREFILL_KERNEL_RULES
    prefill_l2_edge = frozenset({"l40s"})
    decode_l2_edge = frozenset({"l40s", "a100_sxm"})
    launch_rules = LAUNCH_RULES
    rocm_kernels = ROCM_KERNELS
    bench_port_args = ("--port", SGLANG_PORT)
    fp8_kv_cache_flag = "fp8_e4m3"

    def defaults(self, device: DeviceSpec, tp: int, pp: int, usage: str) -> EngineDefaults:
        budget, frac = sglang_limits(device, tp, pp)
        ratio = SGLANG_RATIO["init"] * SGLANG_RATIO["min_factor"]
        return EngineDefaults(
            max_num_batched_tokens=budget, max_num_seqs=MAX_RUNNING_REQUESTS, mem_fraction=frac, new_token_ratio=ratio
        )

    def capture_limit(self, hbm_gib: float, tp: int, settings: Mapping[str, Any] | None = None) -> int:
        """``--cuda-graph-max-bs`` when given, else SGLang's default by GPU memory and TP (:func:`sglang_max_bs`)."""
        given = (settings or {}).get("cuda_graph_max_bs")
        return int(given) if given else sglang_max_bs(hbm_gib, tp)

    def receive_every(self, settings: Mapping[str, Any]) -> int:
        """``--scheduler-recv-interval`` decode steps, at least ``--num-continuous-decode-steps`` (the decode
        steps run back to back do not look at the queue either)."""
        return max(
            int(self.setting(settings, "scheduler_recv_interval")),
            int(self.setting(settings, "num_continuous_decode_steps")),
        )

    def moe_comm_plan(self, flags: MoECommFlags) -> MoECommPlan:
        """``--moe-a2a-backend deepep`` (``--enable-deepep-moe``, deprecated) with ``--deepep-mode``: ``auto``
        runs low latency on decode batches and normal on the others (:data:`_SG_ARGS`);
        ``--enable-two-batch-overlap`` splits every extend batch of >= 2 tokens (two-chunk overlap when one
        request dominates, ``--tbo-token-distribution-threshold`` 0.48) and decode batches of >= 2 requests;
        ``--enable-single-batch-overlap``: the shared experts beside the combine (:data:`SBO_SOURCE`)."""
        from simcast.engines.moe_comm_rules import plan_of

        return plan_of(flags, source=f"{_SG_ARGS}; {TBO_SOURCE}; {SBO_SOURCE}")

    def moe_comm_flags(self, plan: MoECommPlan) -> list[str]:
        """The launch flags of ``plan``."""
        out = ["--moe-a2a-backend", "deepep", "--deepep-mode", plan.deepep_mode] if plan.deepep else []
        out += ["--enable-two-batch-overlap"] if plan.two_batch_overlap else []
        return out + (["--enable-single-batch-overlap"] if plan.single_batch_overlap else [])

    def partition_order(self, pp: int) -> list[int]:
        return list(range(pp - 1, -1, -1))

    def server_lines(self, cfg: LaunchTarget, pol: PolicyLike, batch: int, notes: list[str]) -> list[tuple[str, str]]:
        par, model = cfg.parallel, cfg.model.name
        moe = cfg.model.moe is not None
        dp_attention = moe and spans_replicas(par)  # the MoE layers span the replicas' ranks: SGLang's DP attention
        tp = par.tp * par.dp if dp_attention else par.tp
        chunk = pol.max_num_batched_tokens * (par.dp if dp_attention else 1)
        running = batch * par.dp if dp_attention else batch
        cmd: list = [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--tp-size",
            tp,
            "--pp-size",
            par.pp,
        ]
        cmd += ["--dp-size", par.dp, "--max-running-requests", running, "--chunked-prefill-size", chunk]
        if cfg.dynamic_chunks:  # the chunk setting optimize --chunked-prefill-sizes chose
            cmd.append("--enable-dynamic-chunking")
        if dp_attention:
            cmd.append("--enable-dp-attention")
            notes.append(
                f"DP attention: --tp-size {tp} counts every GPU of a stage (attention TP {par.tp} in each of {par.dp} "
                f"DP groups); SGLang divides --chunked-prefill-size and --max-running-requests by --dp-size"
            )
        if pol.mem_fraction_of == "static":
            cmd += ["--mem-fraction-static", f"{pol.mem_fraction:g}"]
        if moe and par.ep > 1:
            cmd += ["--ep-size", par.ep]
        if moe and par.moe_dp > 1:
            cmd += ["--moe-dp-size", par.moe_dp]
        if moe and not cfg.moe_comm.is_default:
            cmd += self.moe_comm_flags(self.moe_comm_plan(cfg.moe_comm))
        if moe and par.redundant_experts:
            cmd += ["--ep-num-redundant-experts", par.redundant_experts]
        if moe and par.eplb:
            cmd.append("--enable-eplb")
        cmd += precision_flags(cfg, self.fp8_kv_cache_flag)
        settings = dict(getattr(getattr(cfg, "deployment", None), "engine_settings", ()))
        for f in OWN_FLAGS:  # the settings given, under SGLang's own flag names
            if f.keyword in settings:
                cmd += [f.name, settings[f.keyword]]
        draft = speculative_draft(cfg, notes)
        if draft is not None:
            cmd += self.speculative_flags(cfg.speculative, draft)
        return self._placed(cfg, cmd, tp, dp_attention, notes)

    def _placed(
        self, cfg: LaunchTarget, cmd: list, tp: int, dp_attention: bool, notes: list[str]
    ) -> list[tuple[str, str]]:
        """The server line ``cmd`` on one node, one per node behind a router, or one launch over nodes."""
        par = cfg.parallel
        dpn = cfg.device.links.devices_per_node
        server_ranks = tp * par.pp  # GPUs of one launch_server
        if par.world_size <= dpn:
            return [("", command_line(cmd))]
        if not dp_attention and par.dp > 1 and par.tp * par.pp <= dpn:  # replicas fit a node: one server per node
            local = max(1, dpn // (par.tp * par.pp))
            out = []
            for i, start in enumerate(range(0, par.dp, local)):
                here = [*cmd]
                here[here.index("--dp-size") + 1] = min(local, par.dp - start)
                out.append((f"node {i}", command_line(here)))
            urls = [f"http://node{i}:{SGLANG_PORT}" for i in range(len(out))]
            out.append(
                ("router", command_line(["python", "-m", "sglang_router.launch_router", "--worker-urls", *urls]))
            )
            notes.append("one server per node behind sglang_router (nodeN: each node's address)")
            return out
        if not dp_attention and par.dp > 1:  # each replica spans nodes: launch each as below, a router in front
            cmd[cmd.index("--dp-size") + 1] = 1
            notes.append(
                f"lines for one replica; launch all {par.dp} the same way (own HEAD_IP each) behind sglang_router"
            )
            server_ranks = par.tp * par.pp
        n = nodes(cfg, server_ranks)
        dist = ["--nnodes", n, "--dist-init-addr", f"{HEAD}:{SGLANG_DIST_PORT}"]
        return [(f"node {i}", command_line([*cmd, *dist, "--node-rank", i])) for i in range(n)]

    def is_server_line(self, words: list[str]) -> bool:
        return "sglang.launch_server" in words or "sglang_router.launch_server" in words

    def router_lines(
        self, commands: list[tuple[str, str]], router: str, dp: int, notes: list[str]
    ) -> list[tuple[str, str]]:
        """sgl-router with ``--policy router`` (its policies :data:`SGLANG_ROUTER_POLICIES`): added to the router
        line of a launch that has one; a one-server launch of ``--dp-size`` replicas becomes
        ``sglang_router.launch_server`` (the workers and the router together, router flags prefixed
        ``--router-``: ``router_args.py`` ``add_cli_args(use_router_prefix=True)``); replicas each spanning
        nodes get a router line over them. Other routers: :func:`simcast.engines.launch.external_router`."""
        if router not in SGLANG_ROUTER_POLICIES:
            extra = external_router(router, notes)
            if router == "least_loaded":
                notes.append("--router least_loaded: sgl-router has no such policy (power_of_two is the nearest)")
            return [*commands, *extra]
        if any(w == "router" for w, _ in commands):
            return [(w, f"{c} --policy {router}" if w == "router" else c) for w, c in commands]
        if len(commands) == 1 and "--enable-dp-attention" not in commands[0][1]:
            w, c = commands[0]
            notes.append(f"sglang_router.launch_server starts the --dp-size servers behind sgl-router ({router})")
            c = c.replace("sglang.launch_server", "sglang_router.launch_server", 1)
            return [(w, f"{c} --router-policy {router}")]
        if "--enable-dp-attention" in commands[0][1]:
            notes.append(f"--router {router}: DP attention ranks are routed by SGLang's DP controller, not sgl-router")
            return commands
        urls = [f"http://replica{i}:{SGLANG_PORT}" for i in range(dp)]
        line = command_line(["python", "-m", "sglang_router.launch_router", "--worker-urls", *urls, "--policy", router])
        notes.append("router: one worker URL per replica (replicaN: replica N's node-0 address)")
        return [*commands, ("router", line)]

    def speculative_flags(self, spec, draft: str) -> list[str]:
        out = ["--speculative-algorithm", SPEC_ALGORITHM[spec.method], "--speculative-num-steps", str(spec.k)]
        out += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(spec.k + 1)]
        return out + (["--speculative-draft-model-path", draft] if draft else [])

    def disagg_flags(self, role: str, transfer_backend: str) -> list[str]:
        return ["--disaggregation-mode", role, "--disaggregation-transfer-backend", transfer_backend]

    def disagg_router(self) -> str:
        return command_line(
            [
                "python",
                "-m",
                "sglang_router.launch_router",
                "--pd-disaggregation",
                "--prefill",
                "http://PREFILL_HOST:30000",
            ]
            + ["--decode", "http://DECODE_HOST:30000", "--port", SGLANG_ROUTER_PORT]
        )


ENGINE = Sglang()
