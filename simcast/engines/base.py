"""What an engine decides: the :class:`Engine` base class each engine module (``vllm.py``, ``sglang.py``,
``trtllm.py``, ``none.py``) fills, so callers ask the engine object instead of comparing its name.

One engine holds: its :class:`~simcast.engines.records.EngineRecord` (scheduler, KV admission, memory rule,
CPU and serving-path times, flag names, with sources), its device-dependent defaults (:meth:`Engine.defaults`),
its CUDA-graph capture rule, its pipeline layer partition, how its measured kernel tables are read and which
kernel choices each system's fit may declare, and the launch lines ``optimize --emit`` prints for it.
A default here is what an engine without that feature does; a module overrides what its engine does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from simcast.core.chunking import PipelinePrefillRule
from simcast.core.device import DeviceSpec
from simcast.core.errors import SimcastInputError, require
from simcast.core.kv import is_fp4_kv
from simcast.core.model_spec import ModelSpec
from simcast.core.moe_comm import MoECommFlags, MoECommPlan
from simcast.core.specs import ParallelSpec
from simcast.engines.flags import EngineFlag, memory_flag
from simcast.engines.records import EngineRecord

if TYPE_CHECKING:
    from simcast.engines.launch_rules import Rule


class Batch(Protocol):
    """What the CUDA-graph rule reads of a step (:class:`simcast.core.specs.Batch`)."""

    @property
    def num_tokens(self) -> int: ...

    @property
    def num_requests(self) -> int: ...

    @property
    def is_decode(self) -> bool: ...

    @property
    def query_lens(self) -> tuple[int, ...]: ...


class LaunchTarget(Protocol):
    """What a launch line reads of a deployment (:class:`simcast.serving.config.ServingConfig`)."""

    @property
    def parallel(self) -> ParallelSpec: ...

    @property
    def device(self) -> DeviceSpec: ...

    @property
    def model(self) -> ModelSpec: ...

    @property
    def kv_cache_dtype(self) -> str: ...

    @property
    def moe_comm(self) -> MoECommFlags: ...

    @property
    def dynamic_chunks(self) -> bool: ...

    @property
    def speculative(self) -> Any: ...


class PolicyLike(Protocol):
    """What a launch line reads of the deployment's :class:`simcast.engines.policy.EnginePolicy`."""

    @property
    def max_num_batched_tokens(self) -> int: ...

    @property
    def mem_fraction(self) -> float: ...

    @property
    def mem_fraction_of(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class EngineDefaults:
    """An engine's own limits on one GPU: token budget of a step (tokens), running requests, memory fraction
    (of the record's ``memory_of``) and SGLang's steady-state reservation ratio (0: none)."""

    max_num_batched_tokens: int
    max_num_seqs: int
    mem_fraction: float
    new_token_ratio: float = 0.0


class Engine(ABC):
    """One serving engine's decisions (see the module docstring); subclasses set the class attributes and
    :meth:`defaults`. Launch lines (:meth:`server_lines`, speculative and disaggregation flags) exist only for
    engines that set :attr:`emits`; a layer partition rule only for those that set :attr:`partition_rule`:
    asking another engine for one is a one-line input error naming the flag."""

    record: EngineRecord
    kernels: bool = True
    """The engine's fitted kernels (the profile's ``engines.<name>`` section) cost its ops; False: generic roofline."""
    schedules: bool = True
    """The engine runs a scheduler with CPU time per step (False: kernels only, no wait for a step in flight)."""
    emits: bool = False
    """``optimize --emit <name>`` writes launch lines for it (:meth:`server_lines`)."""
    memory_flag: str = ""
    """simcast's spelling of the engine's memory-fraction flag (the one ``--engine <name>`` accepts)."""
    memory_flag_help: str = ""
    memory_keyword: str = ""
    """The API keyword of :attr:`memory_flag` (:class:`simcast.api.common.EngineLimitOptions`)."""
    own_flags: tuple[EngineFlag, ...] = ()
    """The flags only this engine accepts besides its memory flag (:mod:`simcast.engines.flags`): its own
    spellings and its settings (each with the engine's default and its source)."""
    pd_router: str = "round_robin"
    """The policy that picks a disaggregated deployment's prefill and decode worker (a router name of
    :data:`simcast.serving.request_level.routers.ROUTERS`): round-robin for the proxies of vLLM
    (``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`` ``get_next_client``: ``itertools.cycle``
    over the prefill and over the decode clients), TensorRT-LLM (``tensorrt_llm/serve/router.py``
    ``RoundRobinRouter``, the disaggregated server's default ``router`` type) and Dynamo (its frontend's
    ``--router-mode`` default ``round-robin``); engines override it."""
    partition_rule: str = ""
    """The engine's pipeline layer partition in words, with its source ("": uses vLLM's rule)."""
    partition_env_var: str = ""
    """The engine's environment variable for explicit layer counts ("": none)."""
    pp_prefill_rule: PipelinePrefillRule | None = None
    """What the engine does with one long prompt's chunks under PP (None: chunks overlap, no cap)."""
    pp_dynamic_chunking: bool = False
    """The engine sizes prompt chunks dynamically at PP > 1 (SGLang ``--enable-dynamic-chunking``)."""
    prefix_cache_when: str = "cached when scheduled (an approximation: the engine inserts them once computed)"
    graph_limit_counts: str = "requests"
    """What :meth:`capture_limit` counts: ``tokens`` or decode ``requests``."""
    # the measured-kernel database (calib/): tables and declared kernel choices, by system
    a2a_table: str = "moe_a2a_perf"
    """The engine's all-to-all table whose newest version is read."""
    a2a_table_label: str = "moe_a2a_perf"
    """How the tables read are named in a fit's provenance."""
    a2a_deepep_tables: tuple[tuple[str, str], ...] = ()
    """SGLang's own DeepEP tables ((table, mode)), all read; empty: the engine's ``moe_a2a_perf`` table."""
    decode_kernel_rules: Mapping[str, tuple[str, ...]] = {}
    decode_fp8_single_block: frozenset[str] = frozenset()
    prefill_kernel_rules: Mapping[str, tuple[str, ...]] = {}
    prefill_l2_edge: frozenset[str] = frozenset()
    decode_l2_edge: frozenset[str] = frozenset()
    kernel_fallback: tuple[str, ...] = ()
    """Engines whose fitted kernels stand in, in order, where this one has none
    (:mod:`simcast.cost.kernels.engine_cost`)."""
    rocm_kernels: Mapping[str, str] = {}
    """The kernels the engine's code picks on AMD Instinct GPUs (ROCm), by kind (``gemm``, ``attention``,
    ``moe``), in words with the source; the costs still come from the profile's fits (``engines.<name>``,
    else :attr:`kernel_fallback`, labelled so in every output)."""
    launch_rules: tuple[Rule, ...] = ()
    bench_port_args: tuple[str | int, ...] = ()
    fp8_kv_cache_flag: str = "fp8"
    stream_counts: str = "tokens"
    """What :meth:`stream_every` counts: a request's generated ``tokens`` or its decoding ``iterations`` (the
    prefill's iteration is the first; the two differ under speculative decoding)."""
    stream_phase: int = 1
    """With a streaming interval n, the engine sends at the counts k with k mod n = this mod n
    (:meth:`stream_sends`)."""

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def flags(self) -> tuple[EngineFlag, ...]:
        """Every flag this engine declares: its memory flag (when it has one), then :attr:`own_flags`."""
        mem = (memory_flag(self.name, self.memory_flag, self.memory_flag_help, self.memory_keyword),)
        return (mem if self.memory_flag else ()) + self.own_flags

    @property
    def settings_defaults(self) -> dict[str, Any]:
        """The engine's own settings (flags with an API keyword and a default) at their defaults."""
        return {f.keyword: f.default for f in self.own_flags if f.keyword and f.default is not None}

    @property
    def kernel_engine(self) -> str | None:
        """The engine whose fitted kernels cost the ops: the engine itself, None for the generic roofline."""
        return self.name if self.kernels else None

    @property
    def partition_name(self) -> str:
        """The layer partition rule the engine applies when none is given (:mod:`simcast.engines.partition`)."""
        return self.name

    @abstractmethod
    def defaults(self, device: DeviceSpec, tp: int, pp: int, usage: str) -> EngineDefaults:
        """The engine's limits on ``device`` at ``tp`` x ``pp`` in ``usage`` (server | offline)."""

    def check_device(self, device: DeviceSpec) -> None:
        """Refuse (one input error) a device the engine does not run on; every device by default."""
        return None

    def check_kv_cache_dtype(self, kv_cache_dtype: str, device: DeviceSpec) -> None:
        """Refuse (one input error) a KV cache the engine cannot run on ``device``. By default an FP4 cache runs
        on NVIDIA GPUs with FP4 tensor cores only: SGLang's NVFP4 KV method is "Supported on SM100 and SM120"
        and quantises through FlashInfer's CUDA ``nvfp4_kv_quantize``
        (``python/sglang/srt/layers/quantization/fp4_kv_cache_quant_method.py``@02719cd1), TensorRT-LLM's and
        vLLM's NVFP4 caches are Blackwell formats; CDNA (ROCm) has no NVFP4 KV kernels in these engines."""
        if is_fp4_kv(kv_cache_dtype) and (not device.has_fp4 or device.reported_name.startswith("AMD")):
            raise SimcastInputError(
                "--kv-cache-dtype",
                kv_cache_dtype,
                f"{self.name}'s FP4 KV cache runs on NVIDIA Blackwell only, not {device.name}: use fp8",
            )

    layer_groups_rule: Callable[[ParallelSpec, int | None, bool], ParallelSpec] | None = None
    """``(parallel, moe_dense_tp_size, dp_lm_head) -> parallel`` with the engine's dense-MLP and LM-head groups
    (SGLang: :mod:`simcast.engines.sglang_layers`); None: both in the attention-TP group on its own tokens."""

    def layer_groups(self, par: ParallelSpec, moe_dense_tp_size: int | None, dp_lm_head: bool) -> ParallelSpec:
        """``par`` (a :class:`~simcast.core.specs.ParallelSpec`) with where its dense MLP layers and LM head run.
        By default (no rule) each DP rank runs them in its own attention-TP group on its own tokens: vLLM's DP
        ranks are engines of their own, and TensorRT-LLM's attention DP runs the dense MLP at TP 1 as the attention
        (``_torch/models/modeling_deepseekv3.py`` ``_compute_mlp_tp_size``); SGLang's two flags are refused."""
        if self.layer_groups_rule is not None:
            return self.layer_groups_rule(par, moe_dense_tp_size, dp_lm_head)
        require(
            moe_dense_tp_size is None and not dp_lm_head,
            "--moe-dense-tp-size" if moe_dense_tp_size is not None else "--enable-dp-lm-head",
            moe_dense_tp_size if moe_dense_tp_size is not None else dp_lm_head,
            f"is SGLang's (--engine sglang); engine {self.name} runs the dense layers and the LM head in each DP "
            "rank's attention-TP group",
        )
        return par

    def accepts_memory_flag(self, owner: str | None) -> bool:
        """Whether the memory flag of engine ``owner`` sets this engine's memory fraction."""
        return owner == self.name

    def setting(self, settings: Mapping[str, Any], keyword: str) -> Any:
        """The engine setting ``keyword`` (one of :attr:`own_flags`): its value in ``settings`` (the
        deployment's, :attr:`simcast.deploy.deployment.Deployment.engine_settings`), else the engine's default
        (None when the engine has no such setting)."""
        if keyword in settings:
            return settings[keyword]
        return next((f.default for f in self.own_flags if f.keyword == keyword), None)

    def check_settings(self, settings: Mapping[str, Any]) -> None:
        """Each of ``settings`` is one of this engine's own settings, within its bounds (one input error)."""
        own = {f.keyword: f for f in self.own_flags if f.keyword}
        for k, v in settings.items():
            allowed = ", ".join(f.name for f in own.values()) or "none"
            if k not in own:
                raise SimcastInputError(k, v, f"not a setting of engine {self.name} (its settings: {allowed})")
            own[k].checked(v)

    def capture_limit(self, hbm_gib: float, tp: int, settings: Mapping[str, Any] | None = None) -> int:
        """The largest step the engine captures in a CUDA graph (:attr:`graph_limit_counts`; 0: none), by default
        or as its ``settings`` set it."""
        return 0

    def stream_every(self, settings: Mapping[str, Any]) -> int:
        """The streaming interval, in :attr:`stream_counts`: the engine's ``stream_interval`` setting (SGLang's
        ``--stream-interval``, TensorRT-LLM's ``stream_interval``), 1 (every token as it is sampled) when the
        engine has none."""
        return int(self.setting(settings, "stream_interval") or 1)

    def stream_sends(self, before: int, after: int, every: int) -> bool:
        """Whether the engine sends a request's tokens when its count (:attr:`stream_counts`) moves from
        ``before`` to ``after`` in one step, streaming every ``every``: when the counts ``before`` + 1 ..
        ``after`` hold a k with k mod ``every`` = :attr:`stream_phase` mod ``every`` (the first token, at the
        prefill, and the last are sent whatever k)."""
        p = self.stream_phase
        return (after - p) // every != (before - p) // every

    def receive_every(self, settings: Mapping[str, Any]) -> int:
        """Decode steps between two looks at newly arrived requests while decoding (1: every step)."""
        return 1

    def batch_wait(self, settings: Mapping[str, Any]) -> tuple[int, float]:
        """(steps, fraction of the token budget): new prompts are held back up to that many steps while
        running decodes plus waiting prompt tokens stay below the fraction of the step's budget ((0, 0): never)."""
        return 0, 0.0

    def captured(
        self,
        batch: Batch,
        hbm_gib: float,
        tp: int,
        decode_query_len: int = 1,
        settings: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether a step on ``batch`` runs from a captured graph: decode-only steps (a verify step of at most
        ``decode_query_len`` tokens per request counts as decode) of at most :meth:`capture_limit` requests."""
        limit = self.capture_limit(hbm_gib, tp, settings)
        decode = batch.is_decode or all(q <= decode_query_len for q in batch.query_lens)
        return limit > 0 and decode and batch.num_requests <= limit

    def moe_comm_plan(self, flags: MoECommFlags) -> MoECommPlan:
        """The MoE communication the engine runs for ``flags``: DeepEP as asked (``auto``: low latency for
        decode batches, normal otherwise), the overlaps as asked (:mod:`simcast.engines.moe_comm_rules`)."""
        from simcast.engines.moe_comm_rules import plan_of

        return plan_of(flags, source="generic: DeepEP as asked, SGLang's auto rule")

    def moe_comm_flags(self, plan: MoECommPlan) -> list[str]:
        """The engine's launch flags for ``plan`` (none by default)."""
        return []

    def partition_order(self, pp: int) -> list[int]:
        """Stages that get one of the ``L mod pp`` remainder layers, in order (the engine's partition rule)."""
        raise SimcastInputError("--partition", self.name, "this engine has no layer partition rule of its own")

    def decode_kv_len(self, step: Any) -> Any:
        """Keys per request in a generation row of the engine's database table at ``step`` (its collector)."""
        return step + 1

    def context_attention_dtype(self, kv_cache_dtype: str) -> str | None:
        """The ``attn_dtype`` of the prefill rows the engine runs with that KV cache (None: every row)."""
        return None

    def server_lines(self, cfg: LaunchTarget, pol: PolicyLike, batch: int, notes: list[str]) -> list[tuple[str, str]]:
        """The server command(s) of ``cfg`` (where each runs, command line), ``batch`` requests per replica."""
        raise self._no_launch_lines()

    def router_lines(
        self, commands: list[tuple[str, str]], router: str, dp: int, notes: list[str]
    ) -> list[tuple[str, str]]:
        """``commands`` with the router ``router`` (a name of :data:`simcast.serving.request_level.routers.ROUTERS`)
        in front of the ``dp`` replicas: its launch line where one exists, else a note saying what routes (the
        engines with launch lines add the routers outside them: :func:`simcast.engines.launch.external_router`)."""
        notes.append(f"--router {router}: no launch line for it with {self.name}")
        return commands

    def is_server_line(self, words: list[str]) -> bool:
        """Whether the command ``words`` of :meth:`server_lines` starts the engine's server (not a helper
        such as ``ray start`` or a router): the lines its launch rules check."""
        return False

    def speculative_flags(self, spec: Any, draft: str) -> list[str]:
        """The engine's flags for speculative decoding ``spec`` (a chain of ``k`` drafts, top-k 1)."""
        raise self._no_launch_lines()

    def disagg_flags(self, role: str, transfer_backend: str) -> list[str]:
        """The flags a ``role`` (prefill | decode) pool's server line adds under disaggregation."""
        raise self._no_launch_lines()

    def disagg_router(self) -> str:
        """The command (or comment) that routes each request to a prefill, then a decode pool."""
        raise self._no_launch_lines()

    def _no_launch_lines(self) -> SimcastInputError:
        """The error of asking an engine without launch lines (:attr:`emits` False) for one."""
        allowed = "this engine has no launch lines (--emit lists the engines that have them)"
        return SimcastInputError("--emit", self.name, allowed)
