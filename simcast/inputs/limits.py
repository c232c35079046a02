"""Upper bounds on every size a user can give (flags, YAML keys, CSV cells, config.json fields), and lower
bounds on every physical quantity (bandwidths, peaks, memory, efficiencies).

Each upper bound is far above anything physical, and low enough that no input can make
simcast run for minutes or run out of memory; each lower bound far below any real device. One table,
used by the CLI flags, the service YAML, device-profile and config.json schemas and the measured-CSV
reader; docs/inputs.md lists them. Everything here is a pure constant or a pure check of one (no I/O).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcast.core.errors import require

if TYPE_CHECKING:
    from simcast.core.fabrics import FabricChoice

# ---------------------------------------------------------------- workload and layout
MAX_REQUESTS = 10**6
"""Requests in one step / concurrency per replica. A request holds >= 1 KV block (16 tokens) on every
layer: 10**6 of them need terabytes of KV cache for the smallest shipped model; engines schedule
hundreds to a few thousand (vLLM's ``max_num_seqs`` default is 256-1024)."""
MAX_TOKENS = 10**7
"""Tokens per request: prompt (ISL), output (OSL), KV context, ``--q-len``/``--kv-len``. The longest
advertised context windows are 10M tokens (Llama 4 Scout)."""
MAX_BATCHED_TOKENS = 10**9
"""Prefill token budget per step (``max_batched_tokens``): MAX_REQUESTS x 1000 tokens."""
MAX_MICROBATCHES = 4096
"""Microbatches a step is split into (PP engines keep ``pp`` in flight; 4096 is far beyond any pipeline)."""
MAX_STAGE_MICROBATCHES = 2**16
"""pp x microbatches: the stage-microbatch pairs a step's timeline holds. At the bound simulate takes
~6 s; 126 stages x 4096 microbatches took 50 s and 3 GB with --trace (measured, Llama-3.1-405B)."""
MAX_CHUNK_SIZES = 16
"""Values of ``optimize --chunked-prefill-sizes``: each is a full concurrency sweep per layout (twice with
SGLang at PP > 1), so 16 values make a search up to 32x longer."""
MAX_DEVICES = 65536
"""GPUs in a deployment or a collective group, and each of tp/pp/dp (the largest clusters run ~10**5 GPUs
but no single model instance spans more than this)."""
MAX_DEVICES_PER_NODE = 1024
"""Devices per node (NVL72 racks have 72; a scale-up domain of 1024 is beyond any shipped system)."""

MAX_BENCH_PROMPTS = 10**5
"""Requests of one ``simcast bench-serve`` run (100x ``vllm bench serve``'s default of 1000)."""
MAX_BENCH_TOKENS = 5 * 10**7
"""Request-steps of one ``bench-serve`` run: output tokens plus prompt chunks, the engine steps it would take
at concurrency 1 (100k prompts of 1024 + 128 tokens are 1.3e7). Scheduling takes ~5e5 request-steps/s on
one core, so the worst case at this bound is ~100 s (simcast.serving.request_level.work). ``--refine-top`` applies it
to prompt + output tokens (more conservative)."""
MAX_BENCH_STEPS = 4 * 10**6
"""Engine steps of one ``bench-serve`` run (or one replayed ``calibrate-serving`` run), estimated as the
request-steps over the requests in flight per replica: ~4e4 steps/s on one core, ~100 s at the bound.
(At concurrency 1 the request-step bound alone admitted 5e7 steps: ~20 minutes.)"""
MAX_BATCH_SIZES = 256
"""Values of ``optimize --batch-sizes``: each is one steady-state estimate per layout (~10 ms each, up to
tens of layouts); the default grid (1, 2, 3, 4, 6, 8, 12, ... up to 4096) sweeps ~25."""
MAX_SPEC_TOKENS = 64
"""Speculative tokens per step (``num_speculative_tokens``, ``--speculative-num-steps``): each is one
sequential draft pass per step; published EAGLE/MTP setups use 1-8, SGLang's tree setups verify up to 64."""
MAX_BALANCED_PP = 16
"""Pipeline stages ``--partition balanced`` searches: each layer it moves costs up to pp^2 trial simulations
of pp stages (~pp^3; Llama-3.1-405B measured: pp 16 3.5 s, pp 24 142 s, pp 32 52-118 s, pp 63 > 300 s)."""
MAX_REFINE_TOP = 64
"""Layouts ``optimize --refine-top`` re-checks: each is 6-20 request-level runs (seconds each); a search
ranks tens of layouts."""
MAX_WORKERS = 1024
"""Local worker processes of a sweep (``--workers``): each is an interpreter with simcast loaded (~100 MB);
machines have at most a few hundred cores."""

# ---------------------------------------------------------------- kernels (``simcast kernel``, measured CSVs)
MAX_GEMM_DIM = 2**31 - 1
"""GEMM M, N, K: cuBLAS takes them as 32-bit ints."""
MAX_HEADS = 2**16
"""Attention heads (query or KV) per GPU."""
MAX_HEAD_DIM = 2**16
"""Head dimension."""
MAX_MESSAGE_BYTES = 2.0**50
"""Collective / p2p message bytes per rank (1 PiB: far above any device's memory)."""

# ---------------------------------------------------------------- model config.json
MAX_HIDDEN = 2**20
"""hidden_size, intermediate_size, head_dim of a model (Llama-3.1-405B: 16384, 53248, 128)."""
MAX_VOCAB = 2**24
"""vocab_size (the largest shipped vocabularies are ~256k)."""
MAX_EXPERTS = 2**16
"""Routed (or shared) experts of a MoE layer, and top-k (DeepSeek-V3 has 256, Qwen3-235B 128)."""
MAX_LAYERS = 2**14
"""num_hidden_layers (Llama-3.1-405B has 126)."""

# ---------------------------------------------------------------- device profile
MAX_FLOPS = 1e18
"""Peak FLOP/s of one device (B200 dense FP8 is 4.5e15)."""
MAX_HBM_BYTES = 2**50
"""HBM capacity, bytes (1 PiB; MI300X has 192 GB)."""
MAX_BW_BYTES_PER_S = 1e15
"""HBM or link bandwidth, bytes/s (HBM3e is ~8e12)."""
MAX_LATENCY_S = 1.0
"""A link's or a kernel's fixed latency, seconds."""
MAX_LINK_GBPS = MAX_BW_BYTES_PER_S / 1e9
"""``--inter-node-bandwidth`` / ``inter_node_bandwidth_gbps``, GB/s (the profile bandwidth bound in GB/s)."""
MAX_LINK_LATENCY_US = MAX_LATENCY_S * 1e6
"""``--inter-node-latency`` / ``inter_node_latency_us``, microseconds (the profile latency bound in us)."""
MAX_HALF_POINT = float(MAX_GEMM_DIM)
"""GEMM efficiency half points in N and K (elements); the M half point in ridge units is bounded by 1e6.
Also the engine kernel fits' half points and split sizes (elements, tokens or CTAs)."""
MAX_FIT_EXPONENT = 64.0
"""Exponents and smooth-maximum powers of an engine kernel fit (``wave_exp``, ``parallel_exp``,
``smooth_p``); fitted values are 0-4, and ``x^64`` of a fraction is already below 1e-19 of it."""
MAX_FIT_BOOST = 1000.0
"""Multipliers of an engine kernel fit (``l2_boost``, ``group_share``); fitted values are 0-10."""
MAX_SM_COUNT = 2**16
"""SMs and tile sizes of an engine kernel fit (``sm_count``, ``tile*``); B200 has 148 SMs."""

# ---------------------------------------------------------------- physical lower bounds (device profile, fabric flags)
# A bandwidth, peak or efficiency of 1e-300 passes every "> 0" check and turns times into 1e297 s that still
# rank (a row "meeting" the limits at 1e-297 token/s): each physical quantity has a floor far below any real
# device, so only a typo or a unit slip reaches it.
MIN_BW_BYTES_PER_S = 1e6
"""HBM, link, collective and all-to-all bandwidth, bytes/s: 1 MB/s is below 10 Mbit/s Ethernet (1.25e6 B/s);
the slowest shipped link is 8e8 B/s (an L40S collective fit)."""
MIN_LINK_GBPS = MIN_BW_BYTES_PER_S / 1e9
"""``--inter-node-bandwidth`` / ``inter_node_bandwidth_gbps``, GB/s (the profile bandwidth floor in GB/s)."""
MIN_FLOPS = 1e9
"""Peak FLOP/s of one device per dtype: one CPU core does ~1e10-1e11 (the lowest shipped peak is 9.2e12)."""
MIN_HBM_BYTES = 2**20
"""Device memory, bytes (1 MiB: no accelerator holds less; the smallest shipped one has 24 GB)."""
MIN_EFFICIENCY = 1e-3
"""An efficiency (a fraction of a peak: profile ``efficiency.*``, link ``efficiency``, engine fits' ``matmul``,
``memory``): below 0.1% the peak is wrong, not the kernel (the lowest fitted value is 0.013)."""

# ---------------------------------------------------------------- service YAML
MAX_CSV_ROWS = 10**6
"""Rows of a measured CSV: validate predicts ~2e4 rows/s and calibrate fits 1e5 GEMM rows in ~5 s (measured),
so a run at the bound takes under a minute; the Vidur files hold a few thousand rows each."""
MAX_LIMIT_MS = 1e9
"""TTFT / TPOT limits, milliseconds (11.6 days)."""
MAX_NAME_CHARS = 4096
"""A model id, device name, path or partition string (PATH_MAX on Linux)."""
MAX_TEXT_CHARS = 65536
"""A free-text field (a profile's description)."""

# ---------------------------------------------------------------- shares
PREFIX_HIT_RATE_RANGE = "must be a number in [0, 1) (one prompt token is always computed)"
"""The range of a prefix hit rate (``--prefix-hit-rate``, ``prefix_hit_rate=``), worded once for every reader."""


def prefix_hit_rate_ok(x: object) -> bool:
    """``x`` is a prefix hit rate: a finite number in [0, 1) (see :data:`PREFIX_HIT_RATE_RANGE`)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < 1


def check_fabric_choice(choice: FabricChoice) -> FabricChoice:
    """``choice``'s explicit inter-node bandwidth and latency within their bounds, whoever gave them (a flag,
    a service-YAML key, the API's ``fabric=``): errors name ``choice``'s fields."""
    bw, lat = choice.bandwidth_gbps, choice.latency_us
    require(
        bw is None or (isinstance(bw, int | float) and MIN_LINK_GBPS <= bw <= MAX_LINK_GBPS),
        choice.bandwidth_field,
        bw,
        f"must be a number in [{MIN_LINK_GBPS:g}, {MAX_LINK_GBPS:g}] GB/s per GPU per direction",
    )
    require(
        lat is None or (isinstance(lat, int | float) and 0 <= lat <= MAX_LINK_LATENCY_US),
        choice.latency_field,
        lat,
        f"must be a number in [0, {MAX_LINK_LATENCY_US:g}] microseconds",
    )
    return choice


TABLE: tuple[tuple[str, float, str], ...] = (
    (
        "requests per step, concurrency, batch sizes (`--batch`, `--batch-sizes`, `--max-num-seqs`, "
        "`--max-concurrency`, `workload.batch_size`)",
        MAX_REQUESTS,
        "10^6",
    ),
    (
        "tokens per request (`--input-length`, `--output-length`, `--context-length`, `--q-len`, `--kv-len`, "
        "`--random-*-len`, `workload.*_length`)",
        MAX_TOKENS,
        "10^7",
    ),
    ("tokens per step (`--max-num-batched-tokens`, `workload.max_batched_tokens`)", MAX_BATCHED_TOKENS, "10^9"),
    ("microbatches (`--microbatches`, `parallel_config.microbatches`)", MAX_MICROBATCHES, "4096"),
    ("pipeline stages x microbatches", MAX_STAGE_MICROBATCHES, "2^16"),
    (
        "devices, and each of tp, pp, dp (`--num-devices`, `--tp`, `--pp`, `--dp`, `--gpus`, `--nodes`, "
        "`--tp-sizes`, `--pp-sizes`, `parallel_config.*`)",
        MAX_DEVICES,
        "65536",
    ),
    ("devices per node (`--devices-per-node`, `links.devices_per_node`)", MAX_DEVICES_PER_NODE, "1024"),
    (
        "requests of one `bench-serve` run (`--num-prompts`, `--dataset-path` rows, `--refine-prompts`)",
        MAX_BENCH_PROMPTS,
        "10^5",
    ),
    (
        "request-steps of one `bench-serve` run (output tokens + prompt chunks: its steps at concurrency 1)",
        MAX_BENCH_TOKENS,
        "5 * 10^7",
    ),
    (
        "engine steps of one `bench-serve` run, or of one replayed `calibrate-serving` run (request-steps over "
        "the requests in flight per replica)",
        MAX_BENCH_STEPS,
        "4 * 10^6",
    ),
    ("values of `optimize --batch-sizes`", MAX_BATCH_SIZES, "256"),
    ("values of `optimize --chunked-prefill-sizes`", MAX_CHUNK_SIZES, "16"),
    (
        "speculative tokens per step (`num_speculative_tokens`, `--speculative-num-steps`, "
        "`--speculative-num-draft-tokens`)",
        MAX_SPEC_TOKENS,
        "64",
    ),
    (
        "pipeline stages of `--partition balanced` (it costs ~pp^3 stage simulations per layer moved)",
        MAX_BALANCED_PP,
        "16",
    ),
    ("layouts refined (`--refine-top`)", MAX_REFINE_TOP, "64"),
    ("local worker processes (`--workers`)", MAX_WORKERS, "1024"),
    ("GEMM `--m`, `--n`, `--k` (cuBLAS takes 32-bit ints)", MAX_GEMM_DIM, "2^31 - 1"),
    ("heads, KV heads, head dim per GPU (`--heads`, `--kv-heads`, `--head-dim`)", MAX_HEADS, "2^16"),
    ("message bytes (`--bytes`, CSV `bytes`)", MAX_MESSAGE_BYTES, "2^50"),
    ("rows of a measured CSV", MAX_CSV_ROWS, "10^6"),
    ("TTFT / TPOT limits, ms (`--ttft-limit`, `--tpot-limit`, `limits.*`)", MAX_LIMIT_MS, "10^9"),
    ("config.json `hidden_size`, `intermediate_size`, `head_dim`", MAX_HIDDEN, "2^20"),
    ("config.json `vocab_size`", MAX_VOCAB, "2^24"),
    ("config.json `num_hidden_layers`", MAX_LAYERS, "2^14"),
    ("profile FLOP/s per dtype", MAX_FLOPS, "10^18"),
    ("profile bandwidths, bytes/s", MAX_BW_BYTES_PER_S, "10^15"),
    ("profile `hbm_bytes`", MAX_HBM_BYTES, "2^50"),
    ("profile latencies and launch overheads, s", MAX_LATENCY_S, "1"),
    (
        "inter-node bandwidth, GB/s per GPU per direction (`--inter-node-bandwidth`, `inter_node_bandwidth_gbps`)",
        MAX_LINK_GBPS,
        "10^6",
    ),
    (
        "inter-node bandwidth, GB/s, at least (`--inter-node-bandwidth`, `inter_node_bandwidth_gbps`; 1 MB/s)",
        MIN_LINK_GBPS,
        "10^-3",
    ),
    ("profile bandwidths, bytes/s, at least (HBM, links, collective and all-to-all fits)", MIN_BW_BYTES_PER_S, "10^6"),
    ("profile FLOP/s per dtype, at least", MIN_FLOPS, "10^9"),
    ("profile `hbm_bytes`, at least", MIN_HBM_BYTES, "2^20"),
    (
        "profile efficiencies, at least (`efficiency.*`, link `efficiency`, `engines:` `matmul`, `memory`)",
        MIN_EFFICIENCY,
        "10^-3",
    ),
    ("inter-node latency, us (`--inter-node-latency`, `inter_node_latency_us`)", MAX_LINK_LATENCY_US, "10^6"),
    ("profile `engines:` exponents and powers (`wave_exp`, `parallel_exp`, `smooth_p`)", MAX_FIT_EXPONENT, "64"),
    ("profile `engines:` multipliers (`l2_boost`, `group_share`)", MAX_FIT_BOOST, "1000"),
    ("profile `engines:` SM counts and tile sizes (`sm_count`, `tile*`)", MAX_SM_COUNT, "2^16"),
)
"""(what, bound, as docs/inputs.md writes it): its "Bad input and limits" table (a test keeps them equal)."""
