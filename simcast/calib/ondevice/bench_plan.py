"""What ``simcast microbench`` measures, and how long that takes: a pure plan, no torch, no I/O.

Every case is one row of the generic measured-kernel CSV (:mod:`simcast.calib.readers.measured_schema`)
without its time. Shapes come from the shipped models' own per-rank layer sizes
(:func:`simcast.core.shards.sharded_dims`) at the TP sizes engines run, so the fit sees the GEMMs,
attention heads and hidden widths the simulator later costs:

* ``gemm``: the fused QKV, attention output, gate+up, down and ``lm_head`` projections of each model
  at TP 1, 2, 4, 8, over M = 1 .. 16384 tokens (powers of two), per dtype (bf16, fp16, fp8 where the
  device runs ``torch._scaled_mm``);
* ``attention_prefill``: causal self-attention of one request of 128 .. 16384 tokens per distinct
  per-rank (heads, KV heads, head dim); ``attention_decode``: one new token per request against
  128 .. 32768 cached keys, batches 1, 16, 64 (at most 2^19 cached tokens per case);
* ``add``: an elementwise add of tokens x hidden (the HBM bandwidth and the small-kernel launch cost);
* ``allreduce``: 1 KiB .. 1 GiB per rank over 2, 4, 8, ... of the visible devices.

:func:`estimate_s` turns a plan into a wall-clock estimate from stated device rates
(:data:`ASSUMED_RATES`), for ``--dry-run``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from simcast.core.errors import SimcastInputError
from simcast.core.model_spec import ModelSpec
from simcast.core.shards import sharded_dims

FULL_MODELS = (
    "Qwen/Qwen3-0.6B",
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-32B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B",
)
"""Dense shipped models whose layer shapes the full sweep covers (0.6B to 405B; MoE experts are not swept)."""
QUICK_MODEL = "Qwen/Qwen3-0.6B"
TP_SIZES = (1, 2, 4, 8)
FULL_TOKENS = tuple(2**i for i in range(15))  # 1 .. 16384
QUICK_TOKENS = (1, 8, 32)
PREFILL_LENS = (128, 512, 1024, 2048, 4096, 8192, 16384)
DECODE_LENS = (128, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DECODE_BATCHES = (1, 16, 64)
MAX_DECODE_TOKENS = 2**19  # cached keys per decode case (batch x kv_len): 2 GiB of bf16 K+V at 8 KV heads
ADD_TOKENS = (1, 16, 128, 1024, 4096, 16384)
ALLREDUCE_BYTES = tuple(2**i for i in range(10, 31))  # 1 KiB .. 1 GiB per rank
QUICK_ALLREDUCE_BYTES = (2**10, 2**15, 2**20)


@dataclass(frozen=True, kw_only=True)
class Case:
    """One kernel to time: the generic CSV columns it fills (element counts, bytes per rank)."""

    kind: str
    dtype: str = "bf16"
    m: int | None = None
    n: int | None = None
    k: int | None = None
    batch: int | None = None
    q_len: int | None = None
    kv_len: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    bytes: int | None = None
    gpus: int | None = None
    nodes: int | None = None

    @property
    def flops(self) -> float:
        """Arithmetic of the case, FLOP (GEMM 2MNK; attention QK and PV, causal half for prefill)."""
        if self.kind == "gemm":
            return 2.0 * _i(self.m) * _i(self.n) * _i(self.k)
        if self.kind.startswith("attention"):
            q, c = _i(self.q_len), _i(self.kv_len)
            pairs = q * (q + 1) / 2 if self.kind == "attention_prefill" else q * c
            return 4.0 * _i(self.batch) * _i(self.heads) * _i(self.head_dim) * pairs
        return 0.0

    @property
    def traffic_bytes(self) -> float:
        """Bytes the kernel moves at least once (inputs + output), for the time estimate only."""
        e = 1 if self.dtype == "fp8" else 2
        if self.kind == "gemm":
            m, n, k = _i(self.m), _i(self.n), _i(self.k)
            return float(e * (m * k + n * k) + 2 * m * n)
        if self.kind.startswith("attention"):
            b, d = _i(self.batch), _i(self.head_dim)
            return float(2 * b * d * (2 * _i(self.heads) * _i(self.q_len) + 2 * _i(self.kv_heads) * _i(self.kv_len)))
        if self.kind == "add":
            return float(3 * 2 * _i(self.m) * _i(self.n))
        return float(self.bytes or 0)


def _i(v: int | None) -> int:
    assert v is not None
    return v


@dataclass(frozen=True, kw_only=True)
class Timing:
    """How each case is timed: ``warmup`` untimed calls, then repeats until about ``target_s`` of kernel time,
    at least ``min_reps`` and at most ``max_reps``; the median repeat is the row's ``time_s``."""

    warmup: int
    min_reps: int
    max_reps: int
    target_s: float

    def reps(self, one_call_s: float) -> int:
        """Repeats for a kernel that takes ``one_call_s`` seconds."""
        want = math.ceil(self.target_s / max(one_call_s, 1e-9))
        return max(self.min_reps, min(self.max_reps, want))


FULL_TIMING = Timing(warmup=3, min_reps=5, max_reps=100, target_s=0.05)
QUICK_TIMING = Timing(warmup=1, min_reps=3, max_reps=10, target_s=0.005)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The cases of one sweep, the timing rule, the all-reduce group sizes and what was left out, and why."""

    cases: tuple[Case, ...]
    timing: Timing
    allreduce_gpus: tuple[int, ...]
    notes: tuple[str, ...] = field(default=())

    def counts(self) -> dict[str, int]:
        """Cases per kind (all-reduce: per group size and message size)."""
        out: dict[str, int] = {}
        for c in self.cases:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out


def gemm_shapes(models: tuple[ModelSpec, ...], tp_sizes: tuple[int, ...], lm_head: bool) -> tuple[tuple[int, int], ...]:
    """Distinct (N, K) of the models' per-rank linear layers at each TP size that splits them."""
    out: dict[tuple[int, int], None] = {}
    for model in models:
        for tp in tp_sizes:
            try:
                dims = sharded_dims(model, tp)
            except SimcastInputError:  # this TP size does not split the model: engines refuse it too
                continue
            for _m, n, k in dims.gemm_shapes(1).values():
                out[(n, k)] = None
            if lm_head:
                out[(dims.vocab_shard, dims.hidden)] = None
    return tuple(out)


def head_configs(models: tuple[ModelSpec, ...], tp_sizes: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """Distinct per-rank (query heads, KV heads, head dim) of the models at each TP size."""
    out: dict[tuple[int, int, int], None] = {}
    for model in models:
        for tp in tp_sizes:
            try:
                d = sharded_dims(model, tp)
            except SimcastInputError:
                continue
            out[(d.q_heads, d.kv_heads, d.head_dim)] = None
    return tuple(out)


def make_plan(
    models: tuple[ModelSpec, ...], *, quick: bool, dtypes: tuple[str, ...], devices: int, notes: tuple[str, ...] = ()
) -> Plan:
    """The sweep over ``models`` (quick: the first model at its largest TP size, few sizes) for ``dtypes``;
    all-reduce over 2, 4, 8, ... of ``devices`` (none with one device: noted)."""
    tps = (max(t for t in TP_SIZES if _splits(models[0], t)),) if quick else TP_SIZES
    tokens = QUICK_TOKENS if quick else FULL_TOKENS
    cases: list[Case] = []
    for dt in dtypes:
        for n, k in gemm_shapes(models, tps, lm_head=not quick):
            cases += [Case(kind="gemm", dtype=dt, m=m, n=n, k=k) for m in tokens]
    heads = head_configs(models, tps)
    pre = (64, 256) if quick else PREFILL_LENS
    dec = (256, 2048) if quick else DECODE_LENS
    for h, kv, d in heads:
        cases += [
            Case(kind="attention_prefill", batch=1, q_len=s, kv_len=s, heads=h, kv_heads=kv, head_dim=d) for s in pre
        ]
        for b in (1,) if quick else DECODE_BATCHES:
            cases += [
                Case(kind="attention_decode", batch=b, q_len=1, kv_len=s, heads=h, kv_heads=kv, head_dim=d)
                for s in dec
                if b * s <= MAX_DECODE_TOKENS
            ]
    widths = sorted({m.hidden_size for m in models})
    for w in widths[:1] if quick else widths:
        cases += [Case(kind="add", m=t, n=w) for t in ((1, 64, 512) if quick else ADD_TOKENS)]
    groups = tuple(2**i for i in range(1, 17) if 2**i <= devices)
    sizes = QUICK_ALLREDUCE_BYTES if quick else ALLREDUCE_BYTES
    for g in groups:
        cases += [Case(kind="allreduce", bytes=b, gpus=g, nodes=1) for b in sizes]
    if not groups:
        notes = (*notes, f"allreduce: skipped, {devices} device visible (needs 2 or more)")
    return Plan(cases=tuple(cases), timing=QUICK_TIMING if quick else FULL_TIMING, allreduce_gpus=groups, notes=notes)


def _splits(model: ModelSpec, tp: int) -> bool:
    try:
        sharded_dims(model, tp)
    except SimcastInputError:
        return False
    return True


# ------------------------------------------------------------------ how long it takes
@dataclass(frozen=True, kw_only=True)
class Rates:
    """Device rates the estimate assumes (stated in ``--dry-run``'s output): FLOP/s, bytes/s, seconds."""

    label: str
    flops_per_s: float
    bytes_per_s: float
    launch_s: float
    per_case_s: float  # allocation, Python, synchronisation around each case
    link_bytes_per_s: float
    spawn_s: float  # start one process group (one per all-reduce group size)
    flush_bytes: float  # zeroed before each repeat (the L2 flush; 0 on the CPU)


ASSUMED_RATES = {
    "accelerator": Rates(
        label="a 300 TFLOP/s, 2 TB/s accelerator with a 100 GB/s all-reduce bus (assumption)",
        flops_per_s=300e12,
        bytes_per_s=2e12,
        launch_s=10e-6,
        per_case_s=5e-3,
        link_bytes_per_s=100e9,
        spawn_s=20.0,
        flush_bytes=256 * 2**20,
    ),
    "cpu": Rates(
        label="a CPU at 50 GFLOP/s in 16-bit GEMMs and 10 GB/s (assumption)",
        flops_per_s=50e9,
        bytes_per_s=10e9,
        launch_s=20e-6,
        per_case_s=2e-3,
        link_bytes_per_s=5e9,
        spawn_s=10.0,
        flush_bytes=0.0,
    ),
}


def case_s(c: Case, r: Rates) -> float:
    """One call of ``c`` at rates ``r``: roofline plus launch (all-reduce: 2 x bytes over the bus)."""
    if c.kind == "allreduce":
        return r.launch_s + 2.0 * float(c.bytes or 0) / r.link_bytes_per_s
    return r.launch_s + max(c.flops / r.flops_per_s, c.traffic_bytes / r.bytes_per_s)


def estimate_s(plan: Plan, r: Rates) -> float:
    """Wall-clock seconds of the whole plan at rates ``r``: per case, filling its inputs with random numbers
    (twice their bytes at ``bytes_per_s``), warm-up and repeats (each after a cache flush) and a fixed
    overhead; one process-group start per all-reduce group size."""
    total = 0.0
    for c in plan.cases:
        t = case_s(c, r)
        reps = plan.timing.reps(t)
        flush = r.flush_bytes / r.bytes_per_s if c.kind != "allreduce" else 0.0
        setup = 2.0 * c.traffic_bytes / r.bytes_per_s
        total += setup + (plan.timing.warmup + 1 + reps) * t + (1 + reps) * flush + r.per_case_s
    return total + r.spawn_s * len(plan.allreduce_gpus)


TEMPLATE_HINTS = (
    ("gb200", "gb200"),
    ("b300", "b300"),
    ("b200", "b200"),
    ("h200", "h200_sxm"),
    ("h100", "h100_sxm"),
    ("h800", "h100_sxm"),
    ("h20", "h20"),
    ("a100", "a100_sxm_80gb"),
    ("a800", "a100_sxm_80gb"),
    ("l40", "l40s"),
    ("mi3", "mi300x"),
    ("910", "ascend_910b"),
)
"""Substrings of a device name and the shipped profile closest to it (for the suggested next command)."""


def suggest_template(device_name: str) -> str | None:
    """The shipped profile whose hardware ``device_name`` most likely resembles, or None."""
    low = device_name.lower()
    return next((p for hint, p in TEMPLATE_HINTS if hint in low), None)
