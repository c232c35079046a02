"""How an engine behaves on one deployment: the :class:`EnginePolicy` built from its record.

:func:`engine_policy` turns an :class:`~simcast.engines.records.EngineRecord` (the engine as data)
into the :class:`EnginePolicy` of one deployment: the engine's device-dependent defaults (vLLM's GPU-size
table, SGLang's ``_handle_gpu_memory_settings``), the usage context (a server, or an offline
``LLM``/``vllm bench throughput`` run), then the user's overrides. The CPU and front-end times are
**assumptions** until ``simcast calibrate-serving`` fits them from the user's own ``vllm bench serve``
results; every result says which.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.engines import REGISTRY, get_engine
from simcast.engines.base import Engine
from simcast.engines.records import FRONT_END_PROCESSES, KV_ADMISSION, MEMORY_OF, USAGE, EngineRecord


@dataclass(frozen=True, kw_only=True)
class EnginePolicy:
    """How one engine forms a step, admits requests into KV memory and sizes its KV cache, on one deployment.

    ``max_num_batched_tokens``: token budget of one step (decodes + prefill chunks);
    ``max_num_seqs``: running requests per step; ``chunked_prefill``: a prompt may be
    split over steps (off: a prompt enters whole, and one longer than the budget is refused);
    ``decode_first``: running decodes are scheduled before new prompts in the same step (vLLM V1,
    TRT-LLM in-flight batching) — otherwise prompts run in their own prefill steps (SGLang's default
    prefill-first loop); ``kv_block_tokens``: KV page size; ``kv_admission``: see :data:`KV_ADMISSION`;
    ``new_token_ratio``: SGLang's reservation ratio in steady state (its decayed minimum);
    ``mem_fraction`` of ``mem_fraction_of`` memory (see :data:`MEMORY_OF`); ``max_model_len``: longest
    request (0: not set); ``step_overhead_s`` / ``per_request_overhead_s``: CPU time of one step;
    ``overlap_cpu``: the CPU work of step n+1 runs while step n is on the GPU, so a step costs
    ``max(gpu, cpu)`` instead of ``gpu + cpu``; ``front_end_s`` + ``front_end_per_token_s`` × prompt
    tokens: the serving path every request's TTFT includes.
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
    kv_admission: str = "on_demand"
    new_token_ratio: float = 0.0
    prefix_caching: bool = True
    max_model_len: int = 0
    front_end_s: float = 0.0
    front_end_per_token_s: float = 0.0
    front_end_source: str = "no serving path"
    usage: str = "server"
    front_end_processes: str = "none"  # FRONT_END_PROCESSES: the serving path as a serial resource
    tp_sharded_send: bool = False  # PP hand-off: 1/tp of the hidden states per TP rank, all-gathered on receipt
    pp_output_return: bool = False  # PP: a return hop (last stage -> stage 0) on every microbatch's round trip
    settings: tuple[tuple[str, Any], ...] = ()  # the engine's own settings given (keyword, value): streaming,
    # request intake, batch waiting (simcast.engines.flags); absent ones at the engine's defaults

    @property
    def stream_every(self) -> int:
        """The streaming interval after the first token, in tokens or decoding iterations (the engine's
        ``stream_every`` and ``stream_counts``)."""
        return self.engine.stream_every(dict(self.settings))

    def stream_note(self) -> str:
        """The assumption line of a streaming interval above 1 ("" at 1): when the client gets tokens."""
        n, e = self.stream_every, self.engine
        if n <= 1:
            return ""
        unit = "decoding iteration k (the prefill's is 1)" if e.stream_counts == "iterations" else "token k"
        return (
            f"{e.name} stream_interval {n}: a request's tokens are sent at its first token, at each {unit} with "
            f"k mod {n} = {e.stream_phase % n} and at its end; client-side ITL samples are the gaps between sends "
            "(TTFT and TPOT unchanged); the host time fewer responses save is not costed"
        )

    @property
    def receive_every(self) -> int:
        """Decode steps between two looks at newly arrived requests (the engine's ``receive_every``)."""
        return self.engine.receive_every(dict(self.settings))

    @property
    def batch_wait(self) -> tuple[int, float]:
        """(steps, budget fraction) new prompts may be held back (the engine's ``batch_wait``; (0, 0): none)."""
        return self.engine.batch_wait(dict(self.settings))

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
        require(
            self.kv_admission in KV_ADMISSION,
            "engine.kv_admission",
            self.kv_admission,
            f"allowed: {', '.join(KV_ADMISSION)}",
        )
        require(0 <= self.new_token_ratio <= 1, "engine.new_token_ratio", self.new_token_ratio, "must be in [0, 1]")
        require(self.max_model_len >= 0, "--max-model-len", self.max_model_len, "must be >= 0")
        require(self.usage in USAGE, "engine.usage", self.usage, f"allowed: {', '.join(USAGE)}")
        require(
            self.front_end_processes in FRONT_END_PROCESSES,
            "engine.front_end_processes",
            self.front_end_processes,
            f"allowed: {', '.join(FRONT_END_PROCESSES)}",
        )
        for f in ("step_overhead_s", "per_request_overhead_s", "front_end_s", "front_end_per_token_s"):
            require(getattr(self, f) >= 0, f"engine.{f}", getattr(self, f), "must be >= 0")

    @property
    def engine(self) -> Engine:
        """The engine whose policy this is (:func:`simcast.engines.get_engine`)."""
        return get_engine(self.name)

    @property
    def record(self) -> EngineRecord:
        return self.engine.record

    def step_cpu_s(self, num_requests: float) -> float:
        """CPU time of one step scheduling ``num_requests`` requests."""
        return self.step_overhead_s + self.per_request_overhead_s * num_requests

    def front_end_count(self, dp: int) -> int:
        """Processes that run the serving path one request at a time (0: a latency only, no queue)."""
        return {"one": 1, "per_dp": dp}.get(self.front_end_processes, 0) if self.front_end_s > 0 else 0

    def front_end_time_s(self, prompt_tokens: float) -> float:
        """Serving-path time a request's TTFT includes besides the engine's steps (s)."""
        return self.front_end_s + self.front_end_per_token_s * prompt_tokens

    def admission_note(self) -> str:
        if self.kv_admission == "reserve_ratio":
            return (
                f"KV admission reserve_ratio: prompt + {self.new_token_ratio:.3g} x remaining output reserved per "
                "request (SGLang's decayed new_token_ratio), retraction when a decode runs out"
            )
        return {
            "on_demand": "KV admission on_demand: blocks allocated as tokens arrive, recompute preemption when full"
            + (" (preempted blocks stay in the prefix cache until reused)" if self.prefix_caching else ""),
            "guaranteed_no_evict": "KV admission guaranteed_no_evict: each request's full ISL + OSL reserved "
            "at admission, never evicted",
            "max_utilization": "KV admission max_utilization: blocks allocated as tokens arrive, pause and "
            "recompute when full",
        }[self.kv_admission]

    def prefix_cache_note(self) -> str:
        """How the run treats shared prefixes (stated in a bench-serve result whose requests share some)."""
        if not self.prefix_caching:
            return "prefix caching off: every prompt token is computed"
        unit = "token-level (page 1)" if self.kv_block_tokens == 1 else f"full {self.kv_block_tokens}-token blocks"
        when = self.engine.prefix_cache_when
        return (
            f"prefix caching on ({self.record.flags.get('prefix_caching', 'default')}): hits in {unit}, {when}, "
            "shared prefix blocks held once while referenced, unreferenced ones evicted oldest-freed first (free "
            "queue as a FIFO; blocks reused out of its middle do not shift the others: an approximation)"
        )

    def describe(self) -> str:
        order = "decode-first mixed steps" if self.decode_first else "prefill-first (prompts in their own steps)"
        return (
            f"engine {self.name} ({self.usage}): max_num_batched_tokens {self.max_num_batched_tokens}, max_num_seqs "
            f"{self.max_num_seqs}, chunked prefill {'on' if self.chunked_prefill else 'off'}, {order}, "
            f"KV block {self.kv_block_tokens} tokens, memory {self.mem_fraction:.3g} of {self.mem_fraction_of}"
            + (f", max_model_len {self.max_model_len}" if self.max_model_len else "")
            + f"; CPU {self.step_overhead_s * 1e3:.3g} ms/step + {self.per_request_overhead_s * 1e6:.3g} us/request"
            f" ({'overlapped with the GPU' if self.overlap_cpu else 'serial with the GPU'})"
            f" — {self.overhead_source}"
            + (
                "; PP: overlap scheduler off, hidden states sent as 1/tp slices and all-gathered, sampled tokens "
                "returned from the last stage to stage 0 each microbatch (engine record, SGLang's PP loop)"
                if self.tp_sharded_send or self.pp_output_return
                else ""
            )
            + (
                "; engine settings "
                + ", ".join(f"{k} {v}" if isinstance(v, bool) else f"{k} {v:g}" for k, v in self.settings)
                if self.settings
                else ""
            )
        )

    def serving_path_note(self) -> str:
        return (
            f"serving path: {self.front_end_s * 1e3:.3g} ms + {self.front_end_per_token_s * 1e6:.3g} us per prompt "
            f"token in every TTFT — {self.front_end_source}"
        )


def engine_policy(
    name: str, device: DeviceSpec, *, tp: int = 1, pp: int = 1, usage: str = "server", **overrides
) -> EnginePolicy:
    """The engine's defaults on ``device`` (its own GPU-dependent rules) in ``usage`` (server | offline),
    then ``overrides`` (any :class:`EnginePolicy` field; ``None`` values are ignored)."""
    eng = get_engine(name)
    require(usage in USAGE, "usage", usage, f"allowed: {', '.join(USAGE)}")
    rec = eng.record
    own = eng.defaults(device, tp, pp, usage)
    pol = EnginePolicy(
        name=name,
        max_num_batched_tokens=own.max_num_batched_tokens,
        max_num_seqs=own.max_num_seqs,
        chunked_prefill=rec.chunked_prefill,
        decode_first=rec.decode_first,
        kv_block_tokens=rec.kv_block_tokens,
        mem_fraction=own.mem_fraction,
        mem_fraction_of=rec.memory_of,
        step_overhead_s=rec.step_overhead_s,
        per_request_overhead_s=rec.per_request_overhead_s,
        overlap_cpu=rec.overlap_cpu if pp == 1 or rec.pp_overlap_cpu is None else rec.pp_overlap_cpu,
        overhead_source=rec.cpu_source,
        kv_admission=rec.kv_admission,
        new_token_ratio=own.new_token_ratio,
        prefix_caching=rec.prefix_caching,
        front_end_s=rec.front_end_s,
        front_end_per_token_s=rec.front_end_per_token_s,
        front_end_source=rec.front_end_source,
        front_end_processes=rec.front_end_processes,
        usage=usage,
        tp_sharded_send=pp > 1 and rec.pp_tp_sharded_send,
        pp_output_return=pp > 1 and rec.pp_output_return,
        sources=rec.sources + (rec.pp_sources if pp > 1 else ()),
    )
    if usage == "offline":  # an in-process run (vllm.LLM, vllm bench throughput, trtllm-bench, gptSessionBenchmark)
        # has no API server, HTTP or streaming, and its benchmarks pass token ids: no serving path
        pol = replace(
            pol,
            front_end_s=0.0,
            front_end_per_token_s=0.0,
            front_end_source="offline (in-process) run: no API server, no serving path",
        )
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(EnginePolicy.__dataclass_fields__))
    require(not unknown, "engine override", ", ".join(unknown), "not an engine policy field")
    return replace(pol, **given) if given else pol


MEMORY_FLAGS: dict[str, str] = {e.memory_flag: e.name for e in REGISTRY.values() if e.memory_flag}
"""simcast's memory-fraction flags (the engines' own names) -> the engine each belongs to."""
