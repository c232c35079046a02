"""Per-engine kernel parameters of a device profile (the profile's ``engines:`` section).

Serving engines ship different kernels for the same operation (cuBLAS or CUTLASS
GEMMs, FlashAttention-3, FlashInfer or TensorRT-LLM attention, each engine's own
custom all-reduce), and measured tables show the same shapes running measurably
apart. A profile therefore holds, beside the device's generic efficiencies,
one :class:`EngineKernels` per engine with fitted parameters for GEMMs (per
dtype family), prefill and decode attention (per KV dtype) and the engine's
all-reduce (per group size). The formulas that read them live in
:mod:`simcast.cost.kernels.gemm`, :mod:`simcast.cost.kernels.attention` and
:mod:`simcast.cost.comm.collectives`; every parameter is dimensionless or carries its
unit in its name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from simcast.core.errors import require
from simcast.core.gemm_tiles import GEMM_TILE_RULES

GEMM_DTYPES = ("bf16", "fp16", "fp8", "fp8_block", "nvfp4")
"""GEMM families: bf16/fp16; fp8 with per-tensor scales; fp8 with 128x128 block scales (DeepGEMM-style);
nvfp4 W4A4 (fp4 e2m1 weights and activations, fp8 scales per 16; Blackwell only)."""
ATTENTION_DTYPES = ("bf16", "fp16", "fp8")
"""KV-cache dtype of an attention kernel (fp8: the engine runs fp8 attention and reads 1-byte keys)."""
PREFILL_KERNEL_RULES = ("", "trtllm_ctx", "flashinfer_fa2")
"""How a prefill fit lays out its CTAs: "" the query heads of a GQA group packed into one query tile (one CTA per
request, KV head and query tile, FlashAttention-3 / FlashInfer style); "trtllm_ctx" one query head per CTA
(TensorRT-LLM's context FMHA and its TRT-LLM-gen context kernels); "flashinfer_fa2" GQA-packed with FlashInfer's
own query tile per launch (16, 64 or 128 rows, :func:`simcast.cost.kernels.prefill_rules.rule_tile`)."""
DECODE_KERNEL_RULES = ("", "trtllm_xqa", "trtllm_xqa_mb", "trtllm_xqa_sb", "flashinfer_tc", "fa2_varlen")
"""How a decode fit picks its kernel per launch: "" one kernel; "trtllm_xqa" TensorRT-LLM's XQA-or-MMHA rule;
"trtllm_xqa_mb" the same rule with XQA's multi-block (sequence-split) launch as the engine sizes it;
"trtllm_xqa_sb" that launch with XQA's multi-block mode off (the engine's choice for an fp8 KV cache below
SM90, :mod:`simcast.cost.kernels.trtllm_decode_sm89`; fp8 fits only);
"flashinfer_tc" SGLang's choice between FlashInfer's tensor-core and CUDA-core decode kernels; "fa2_varlen"
FlashAttention-2's varlen decode launch as vLLM calls it on SM80 (no split for group 1, copies around GQA)."""


def _check_fields(obj: object, where: str, fractions: tuple[str, ...] = ()) -> None:
    for f in fields(obj):  # type: ignore[arg-type]
        v = getattr(obj, f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            require(v >= 0, f"{where}.{f.name}", v, "must be >= 0")
    for name in fractions:
        v = getattr(obj, name)
        require(0 < v <= 1, f"{where}.{name}", v, "must be in (0, 1]")


@dataclass(frozen=True, kw_only=True)
class GemmFit:
    """One GEMM family's fitted parameters (``t`` in seconds, see :func:`simcast.cost.kernels.gemm.gemm_time_s`).

    compute ``2MNK / (peak · matmul · s(M) s(N) s(K) · wave^wave_exp)`` with ``s(d) = d / (d + half_d)``
    and ``wave`` the useful fraction of the last wave of ``tile_m × tile_n`` output tiles over
    ``sm_count`` SMs; memory ``bytes / (hbm_bw · memory · par^parallel_exp · (1 + l2_boost · L/(L + bytes)))``
    with ``par = min(1, tiles · max(1, K / split_k_elems) / sm_count)`` (too few CTAs cannot saturate HBM) and
    ``L = l2_half_bytes`` (operands that stay in L2 between calls move faster); the two combine as a
    smooth maximum ``(tc^p + tm^p)^(1/p)`` with ``p = smooth_p``; plus ``launch_s``, the fixed time of a
    call replayed from a captured CUDA graph (what engines run in decode). ``host_floor_s`` (0 = none): the
    least time of a call run eagerly, when the rows were timed without CUDA graphs and the host's launch
    path bounds small shapes (:mod:`simcast.engines.cuda_graphs` says which steps are captured).
    ``tile_rule`` ("" = one tile): the engine's tile per row count (:data:`GEMM_TILE_RULES`, from the kernel's
    own dispatch code): the wave and parallelism terms count that rule's tiles, so a kernel switch at a row
    count (e.g. 64x64 tiles up to 256 rows, 128x128 above) moves the wave edges with it, and the compute
    term counts whole M tiles (``ceil(M / tile_m) · tile_m`` rows: the tensor cores run the padded tile).
    ``step_s`` (0 = off; fitted only with a tile rule): each wave walks K in ``tile_k``-wide steps that take at
    least ``step_s`` each (the pipeline's load latency when a tile is too small to hide it), a compute floor
    ``waves · ceil(K / tile_k) · step_s`` joined to the compute term by the smooth maximum.
    ``l2_edge`` (0 = the smooth L2 form above): the capacity form instead, a fraction ``hit = 1 / (1 + (bytes /
    l2_half_bytes)^l2_edge)`` of the bytes served at ``1 + l2_boost`` times the bandwidth and the rest from memory
    (:func:`simcast.cost.kernels.curves.l2_multiple`; as :attr:`DecodeAttentionFit.l2_edge`): operands that fit in L2
    stay there between calls, larger ones are evicted first.
    """

    dtype: str
    matmul: float
    half_m: float
    half_n: float
    half_k: float
    wave_exp: float
    memory: float
    split_k_elems: float
    parallel_exp: float
    l2_boost: float
    l2_half_bytes: float
    smooth_p: float
    launch_s: float
    sm_count: int
    tile_m: int = 128
    tile_n: int = 128
    host_floor_s: float = 0.0
    tile_rule: str = ""
    step_s: float = 0.0
    tile_k: int = 128
    l2_edge: float = 0.0

    def __post_init__(self) -> None:
        require(
            self.tile_rule in GEMM_TILE_RULES,
            f"engines.gemm[{self.dtype}].tile_rule",
            self.tile_rule,
            f"allowed: {', '.join(repr(r) for r in GEMM_TILE_RULES)}",
        )
        require(self.dtype in GEMM_DTYPES, "engines.gemm.dtype", self.dtype, f"allowed: {', '.join(GEMM_DTYPES)}")
        _check_fields(self, f"engines.gemm[{self.dtype}]", ("matmul", "memory"))
        require(self.smooth_p >= 1, f"engines.gemm[{self.dtype}].smooth_p", self.smooth_p, "must be >= 1")
        for f in ("sm_count", "tile_m", "tile_n", "tile_k", "split_k_elems"):
            require(getattr(self, f) >= 1, f"engines.gemm[{self.dtype}].{f}", getattr(self, f), "must be >= 1")


@dataclass(frozen=True, kw_only=True)
class PrefillAttentionFit:
    """Prefill (causal) attention: see :func:`simcast.cost.kernels.attention.prefill_time_s`.

    compute ``flops_tiled / (peak · matmul · s(q_len) s(units) s(head_dim))`` where
    ``flops_tiled`` counts every ``tile × tile`` block the causal kernel visits (GQA query
    heads packed into the query tile) and ``units = batch · kv_heads · query tiles`` is the
    number of CTAs; memory ``bytes / (hbm_bw · memory)``; smooth maximum with ``smooth_p``;
    plus ``launch_s``.
    ``kernel_rule`` (:data:`PREFILL_KERNEL_RULES`, "" = GQA-packed tiles): ``"trtllm_ctx"`` counts tiles and
    CTAs per *query* head (``units = batch · heads · query tiles``), as TensorRT-LLM's context kernels launch
    them (:mod:`simcast.cost.kernels.prefill_rules`). ``cta_s`` (0 = off, needs ``sm_count``): a fixed time per CTA
    (its Q load, softmax set-up and O store), ``units · cta_s / sm_count`` added to the compute term: the CTAs
    share the SMs. ``l2_boost``, ``l2_half_bytes``, ``l2_edge`` (0 = off): the capacity form of the L2 term of
    :class:`DecodeAttentionFit` on the call's bytes (a working set within L2 is read at ``1 + l2_boost`` times
    the bandwidth; L40S: Q, K, V and O of a prefill stay in its 96 MB L2 up to an edge). ``half_tile`` (0 = off):
    the efficiency also saturates in the query tile's rows, ``tile / (tile + half_tile)`` (a small tile reuses
    each K/V block for fewer rows), for rules whose tile changes per launch (``"flashinfer_fa2"``).
    """

    dtype: str
    matmul: float
    half_q_len: float
    half_units: float
    half_head_dim: float
    memory: float
    smooth_p: float
    launch_s: float
    tile: int = 128
    kernel_rule: str = ""
    cta_s: float = 0.0
    sm_count: int = 0
    l2_boost: float = 0.0
    l2_half_bytes: float = 0.0
    l2_edge: float = 0.0
    half_tile: float = 0.0

    def __post_init__(self) -> None:
        require(
            self.kernel_rule in PREFILL_KERNEL_RULES,
            f"engines.prefill[{self.dtype}].kernel_rule",
            self.kernel_rule,
            f"allowed: {', '.join(repr(r) for r in PREFILL_KERNEL_RULES)}",
        )
        require(
            self.cta_s == 0 or self.sm_count >= 1,
            f"engines.prefill[{self.dtype}].sm_count",
            self.sm_count,
            "must be >= 1 with cta_s",
        )
        require(
            self.dtype in ATTENTION_DTYPES,
            "engines.prefill.dtype",
            self.dtype,
            f"allowed: {', '.join(ATTENTION_DTYPES)}",
        )
        _check_fields(self, f"engines.prefill[{self.dtype}]", ("matmul", "memory"))
        require(self.smooth_p >= 1, f"engines.prefill[{self.dtype}].smooth_p", self.smooth_p, "must be >= 1")
        require(self.tile >= 1, f"engines.prefill[{self.dtype}].tile", self.tile, "must be >= 1")


@dataclass(frozen=True, kw_only=True)
class DecodeAttentionFit:
    """Decode attention (one new token per request): see :func:`simcast.cost.kernels.attention.decode_time_s`.

    memory ``kv_bytes / (hbm_bw · memory · s(units) · s(kv_len))`` with ``units = batch · kv_heads ·
    max(1, kv_len / split_tokens)`` (split-KV: long contexts are cut into chunks that run in
    parallel); compute ``4 · batch · heads · head_dim · kv_len / (peak · matmul)``; a per-wave
    floor ``ceil(batch · kv_heads / sm_count) · wave_s`` (one CTA per request and KV head, each
    with a minimum time however little it reads); smooth maximum of the three; plus ``launch_s``.
    ``max_group`` (0 = no limit): GQA groups larger than this fall back to a kernel that reads the
    keys and values ``group / group_share`` times (TensorRT-LLM's XQA kernels take groups up to a
    size; past it the generic kernel works per query head, partly served from L2).
    ``l2_boost``, ``l2_half_bytes``: the bandwidth rises by ``1 + l2_boost · L/(L + bytes)`` when the
    keys and values are small enough to stay in L2 between calls (0 = off; matters on GPUs with a large
    L2 next to slow memory, e.g. L40S). ``l2_edge`` (0 = that smooth form): the capacity form instead, a
    fraction ``hit = 1 / (1 + (bytes / l2_half_bytes)^l2_edge)`` of the bytes served at ``1 + l2_boost`` times
    the bandwidth and the rest from memory (:func:`simcast.cost.kernels.attention.l2_factor`): a working set that
    fits in L2 stays there between calls, one past it is evicted before it is read again (the cyclic read of
    a set larger than the cache misses on every line), so the speed falls over a narrow edge at the
    capacity ``l2_half_bytes`` (L40S: 3.5 TB/s below ~90 MiB of KV, 0.7 TB/s above, in the engines' tables).
    ``kernel_rule`` ("" = one kernel, with the ``max_group`` fallback above): ``"trtllm_xqa"`` declares
    TensorRT-LLM's two decode kernels on SM80/SM90, chosen per launch by the engine's own rule
    (:func:`simcast.cost.kernels.trtllm_decode.xqa_runs`): XQA (one CTA per request and KV head, keys and values read
    once, per-wave time ``wave_s``) or the masked-MHA fallback (one CTA per request and *query* head, keys
    and values read ``group / group_share`` times, per-wave time ``fallback_wave_s``).
    ``"flashinfer_tc"``: SGLang's FlashInfer decode (:func:`simcast.cost.kernels.flashinfer_decode.tensor_core_runs`):
    the tensor-core kernel (GQA group >= 4 or fp8 KV; per-wave time ``wave_s``) or the CUDA-core one
    (``fallback_wave_s``), both one CTA per request and KV head, keys and values read once.
    ``"fa2_varlen"``: FlashAttention-2's decode as vLLM launches it (:mod:`simcast.cost.kernels.flash_decode`): vanilla
    MHA (group 1) is not split, ``units = batch · heads``; a GQA launch folds the group into the query rows,
    ``units = batch · kv_heads · ceil(group / 64) · max(1, kv_len / split_tokens)``; the wave floor counts
    ``ceil(units / (2 · sm_count)) · wave_s``; and the swap copies the output back (``gqa_swap_s`` + its bytes)
    and, with >= 2 requests and >= 2 KV heads, the query too (``gqa_copy_s`` + its bytes), outside the kernel
    (:func:`simcast.cost.kernels.flash_decode.fa2_copies_s`).
    ``"trtllm_xqa_mb"``: the same choice, with both kernels launched in multi-block mode as TensorRT-LLM
    sizes it (:func:`simcast.cost.kernels.trtllm_decode.split_launch_s`): each request's context cut into sub-sequences
    (:func:`simcast.cost.kernels.trtllm_decode.xqa_blocks`,
    :func:`simcast.cost.kernels.trtllm_decode.mmha_blocks`), whole waves of
    CTAs, each with a fixed time (``wave_s`` + ``cta_group_s`` per query head · head-dim element for XQA,
    ``fallback_wave_s`` for masked MHA) and a per-token time (``cta_kv_byte_s`` per KV byte +
    ``token_group_s`` per query head · head-dim element; ``fallback_kv_byte_s``), ``merge_s`` /
    ``fallback_merge_s`` per sub-sequence when split, ``narrow_launch_s`` once per XQA launch whose cached head
    row is under 128 bytes (:func:`simcast.cost.kernels.trtllm_decode.xqa_narrow`; 0 = none); masked MHA keeps
    ``mmha_ctas_per_sm`` CTAs resident per SM and splits in steps of ``mmha_block_tokens``; memory
    ``bytes / (hbm_bw · memory)`` (with the L2 term above); smooth maximum of the two. ``half_units``,
    ``split_tokens``, ``half_kv_len`` and ``matmul`` are not read by this form. ``"trtllm_xqa_sb"`` (fp8 KV
    only): the same form with one sub-sequence per request under XQA (TensorRT-LLM turns XQA's multi-block
    mode off for an fp8 KV cache below SM90, :mod:`simcast.cost.kernels.trtllm_decode_sm89`).
    ``diff_kv_launch_s`` (seconds, default 0): added once to a launch whose keys and values have different head
    sizes (:func:`simcast.cost.kernels.diff_kv.mean_head_dim`; MiMo-V2's keys 192 / values 128), the engine's
    separate K/V head-size path; fitted only where the fitting rows hold such launches.
    ``kv_write_s``, ``kv_write_elem_s`` (seconds, per element; default 0): the new token's KV-cache write as a
    launch of its own, ``kv_write_s + kv_write_elem_s · batch · kv_heads · (head_dim + v_head_dim)``
    (:mod:`simcast.cost.kernels.kv_write`; vLLM's ``reshape_and_cache_flash``).
    """

    dtype: str
    memory: float
    half_units: float
    split_tokens: float
    half_kv_len: float
    matmul: float
    wave_s: float
    smooth_p: float
    launch_s: float
    sm_count: int
    max_group: int = 0
    group_share: float = 1.0
    l2_boost: float = 0.0
    l2_half_bytes: float = 0.0
    kernel_rule: str = ""
    fallback_wave_s: float = 0.0
    cta_kv_byte_s: float = 0.0
    cta_group_s: float = 0.0
    token_group_s: float = 0.0
    narrow_launch_s: float = 0.0
    merge_s: float = 0.0
    fallback_kv_byte_s: float = 0.0
    fallback_merge_s: float = 0.0
    mmha_ctas_per_sm: int = 1
    mmha_block_tokens: int = 256
    l2_edge: float = 0.0
    gqa_swap_s: float = 0.0
    gqa_copy_s: float = 0.0
    diff_kv_launch_s: float = 0.0
    kv_write_s: float = 0.0
    kv_write_elem_s: float = 0.0

    def __post_init__(self) -> None:
        require(
            self.kernel_rule in DECODE_KERNEL_RULES,
            f"engines.decode[{self.dtype}].kernel_rule",
            self.kernel_rule,
            f"allowed: {', '.join(repr(r) for r in DECODE_KERNEL_RULES)}",
        )
        require(
            self.dtype in ATTENTION_DTYPES,
            "engines.decode.dtype",
            self.dtype,
            f"allowed: {', '.join(ATTENTION_DTYPES)}",
        )
        _check_fields(self, f"engines.decode[{self.dtype}]", ("matmul", "memory"))
        require(self.smooth_p >= 1, f"engines.decode[{self.dtype}].smooth_p", self.smooth_p, "must be >= 1")
        require(self.split_tokens >= 1, f"engines.decode[{self.dtype}].split_tokens", self.split_tokens, "must be >= 1")
        require(self.sm_count >= 1, f"engines.decode[{self.dtype}].sm_count", self.sm_count, "must be >= 1")
        require(self.group_share >= 1, f"engines.decode[{self.dtype}].group_share", self.group_share, "must be >= 1")
        for f in ("mmha_ctas_per_sm", "mmha_block_tokens"):
            require(getattr(self, f) >= 1, f"engines.decode[{self.dtype}].{f}", getattr(self, f), "must be >= 1")
        require(
            self.kernel_rule != "trtllm_xqa_sb" or self.dtype == "fp8",
            f"engines.decode[{self.dtype}].kernel_rule",
            self.kernel_rule,
            "'trtllm_xqa_sb' is the fp8-KV launch: allowed only with dtype fp8",
        )


MOE_DTYPES = ("bf16", "fp8", "fp8_block", "mxfp4", "nvfp4")
"""Expert weight formats with a grouped-GEMM fit (mxfp4: w4a16, weights dequantised in the kernel; nvfp4: W4A4
at the fp4 peak, Blackwell only)."""
A2A_MODES = ("normal", "low_latency")
"""DeepEP modes: normal (high throughput, prefill) and low latency (decode)."""
A2A_PHASES = ("dispatch", "combine")


@dataclass(frozen=True, kw_only=True)
class MoeFit:
    """One MoE layer's routed experts on one rank (gate_up grouped GEMM, activation, down grouped GEMM):
    see :func:`simcast.cost.kernels.moe_kernels.moe_time_s`.

    compute ``2·pairs·h·3·i / (peak · matmul · s(rows per active expert) s(i) s(h))``, memory ``(active
    experts · 3·h·i · weight bytes + pairs · (2h + 3i) · 2) / (hbm_bw · memory)``, smooth maximum with
    ``smooth_p``, plus ``launch_s`` (the routing, alignment and the two GEMM launches together).

    With ``block_m`` > 0 (tile/wave form; ``half_rows`` unused): every active expert's rows are padded to
    the kernel's M tile of ``block_m`` rows and the tiles (``tile_n`` columns wide) run in waves over
    ``sm_count`` SMs, so compute is whole waves of whole tiles (see :func:`simcast.cost.kernels.moe_kernels.moe_parts`).

    ``routed_pair_s`` (0 = none): seconds per routed (token, expert) pair of the whole layer input, before
    expert parallelism keeps the rank's own: top-k routing, the sort/align of the pairs into expert blocks
    and the permutation touch every token's top-k choices on every rank, however few experts it holds.
    Fitted because the held-out residuals of the form without it fell with EP (experts per rank).
    """

    dtype: str
    matmul: float
    half_rows: float
    half_n: float
    half_k: float
    memory: float
    smooth_p: float
    launch_s: float
    block_m: int = 0
    tile_n: int = 128
    sm_count: int = 0
    routed_pair_s: float = 0.0

    def __post_init__(self) -> None:
        require(self.dtype in MOE_DTYPES, "engines.moe.dtype", self.dtype, f"allowed: {', '.join(MOE_DTYPES)}")
        _check_fields(self, f"engines.moe[{self.dtype}]", ("matmul", "memory"))
        require(self.smooth_p >= 1, f"engines.moe[{self.dtype}].smooth_p", self.smooth_p, "must be >= 1")
        require(
            self.block_m == 0 or self.sm_count >= 1,
            f"engines.moe[{self.dtype}].sm_count",
            self.sm_count,
            "must be >= 1 with block_m",
        )
        require(self.tile_n >= 1, f"engines.moe[{self.dtype}].tile_n", self.tile_n, "must be >= 1")


@dataclass(frozen=True, kw_only=True)
class AllToAllFit:
    """MoE dispatch or combine (DeepEP-style all-to-all) in one mode: ``latency_s + bytes / bw_bytes_per_s``
    with ``bytes`` what one rank sends (:func:`simcast.cost.kernels.moe_kernels.a2a_bytes`); measured at
    ``ep`` ranks in one node."""

    mode: str
    phase: str
    latency_s: float
    bw_bytes_per_s: float
    ep: int

    def __post_init__(self) -> None:
        w = f"engines.all_to_all[{self.mode}.{self.phase}]"
        require(self.mode in A2A_MODES, "engines.all_to_all.mode", self.mode, f"allowed: {', '.join(A2A_MODES)}")
        require(self.phase in A2A_PHASES, "engines.all_to_all.phase", self.phase, f"allowed: {', '.join(A2A_PHASES)}")
        require(self.latency_s >= 0, f"{w}.latency_s", self.latency_s, "must be >= 0")
        require(self.bw_bytes_per_s > 0, f"{w}.bw_bytes_per_s", self.bw_bytes_per_s, "must be > 0")
        require(self.ep >= 2, f"{w}.ep", self.ep, "must be >= 2")


@dataclass(frozen=True, kw_only=True)
class EngineKernels:
    """One engine's fitted kernels on one device; empty tuples mean "not fitted here". ``engine`` is one of
    :data:`simcast.engines.ENGINES` (checked where a profile is read, :func:`simcast.inputs.loaders.engine_kernels`)."""

    engine: str
    gemm: tuple[GemmFit, ...] = ()
    prefill: tuple[PrefillAttentionFit, ...] = ()
    decode: tuple[DecodeAttentionFit, ...] = ()
    all_reduce: tuple = ()  # tuple[CollectiveFit, ...]: the engine's all-reduce as it issues it
    moe: tuple[MoeFit, ...] = ()
    all_to_all: tuple[AllToAllFit, ...] = ()
    source: str = ""

    def gemm_fit(self, dtype: str) -> GemmFit | None:
        want = "bf16" if dtype == "fp16" and not any(g.dtype == "fp16" for g in self.gemm) else dtype
        return next((g for g in self.gemm if g.dtype == want), None)

    def prefill_fit(self, dtype: str) -> PrefillAttentionFit | None:
        return next((a for a in self.prefill if a.dtype == _attn_dtype(dtype, self.prefill)), None)

    def decode_fit(self, dtype: str) -> DecodeAttentionFit | None:
        return next((a for a in self.decode if a.dtype == _attn_dtype(dtype, self.decode)), None)

    def moe_fit(self, dtype: str) -> MoeFit | None:
        want = "bf16" if dtype == "fp16" else dtype
        return next((m for m in self.moe if m.dtype == want), None)

    def a2a_fit(self, mode: str, phase: str) -> AllToAllFit | None:
        return next((a for a in self.all_to_all if a.mode == mode and a.phase == phase), None)


def _attn_dtype(dtype: str, fits: tuple) -> str:
    return "bf16" if dtype == "fp16" and not any(a.dtype == "fp16" for a in fits) else dtype
