"""Serving engines as data: the :class:`EngineRecord` each engine module fills (vLLM, SGLang, TensorRT-LLM, ``none``).

A record holds everything simcast assumes about how an engine runs, each with its source
(engine file @ commit or docs, version named): the scheduler (step order, token budget, sequence
limit, chunked prefill), the **KV admission policy** (:data:`KV_ADMISSION`), the **memory rule**
(which memory the user's fraction flag is a fraction of, what the engine sets aside before the KV
cache), the CPU time per step, the **serving path** (API server, tokenisation, detokenisation and
streaming: the front-end time in every TTFT and E2E), and the engine's own flag names. Change
what an engine does in its module (``simcast/engines/<name>.py``) and nowhere else; ``--engine`` picks the
record everywhere. :mod:`simcast.engines.policy` turns a record into the behaviour of one deployment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
    # the serving path as a serial resource: "none" (a latency only), "one" process for the deployment, or
    # "per_dp" (one per DP rank); each runs one request's serving path at a time (FRONT_END_PROCESSES)
    front_end_processes: str = "none"
    front_end_processes_source: str = ""


FRONT_END_PROCESSES = ("none", "one", "per_dp")
"""How many processes run the serving path (HTTP, templating, tokenisation, IPC), each one request at a time:
``none`` — not modelled as a resource (a latency in every TTFT only); ``one`` per deployment; ``per_dp``."""


# The serving path: vllm PR 54628 (vllm bench serve against vllm:time_to_first_token_seconds, the server's
# own TTFT) measured 8-12 ms between client and server TTFT on one laptop-class host; a server-class host is
# faster. Tokenisation: HF fast tokenizers ~1-10 us/token (tenstorrent/tt-inference-server issue 2173
# measured 10-21 us/token in C++ for 131 tokens including call overhead). Both are assumptions until fitted.
FRONT_END = (
    "assumption: {fe:.3g} ms per request (HTTP, request parsing, IPC to the engine core, first-token "
    "detokenise and stream; client-server TTFT gap 8-12 ms measured in vLLM PR 54628 on a laptop host) + "
    "{tok:.3g} us per prompt token (tokenisation); calibrate with simcast calibrate-serving"
)
