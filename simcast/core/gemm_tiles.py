"""The CTA tiles GEMM kernels run, as the engines' kernel dispatch code picks them per shape.

A GEMM fit (:class:`simcast.core.kernel_fits.GemmFit`) names one of these rules in ``tile_rule``; the cost
form (:mod:`simcast.cost.kernels.gemm`) counts waves of that rule's tiles. Each rule cites the dispatch code it
transcribes (file@commit).
"""

from __future__ import annotations

GEMM_TILE_RULES: dict[str, tuple[tuple[int, int, int, int, int], ...]] = {
    "": (),
    # sgl-project/sglang sgl-kernel/csrc/cutlass_extensions/gemm/fp8_gemm_sm90_dispatch.cuh@812a916a
    # (SM90 fp8_scaled_mm, from PR 25532): M <= 16 and (16, 64] swap A and B (CTA tile 64 of N x 16 or 64 of
    # M, K step 256; the (16, 64] bucket's 16-row variant for N <= 1280 is not separated here); (64, 128]
    # 64x128x128 tiles in 2x1 clusters; above 128 rows 128x128x128 tiles in 2x1 clusters.
    "sgl_fp8_sm90": ((16, 16, 64, 1, 256), (64, 64, 64, 1, 256), (128, 64, 128, 2, 128), (0, 128, 128, 2, 128)),
    # deepseek-ai/DeepGEMM deep_gemm/jit_kernels/gemm.py@c4a7116e get_best_configs (SM90 gemm_fp8_fp8_bf16_nt):
    # the block size per shape by fewest waves, then fullest last wave (simcast.cost.kernels.gemm.deepgemm_blocks)
    "deepgemm_sm90": (),
    "sgl_fp8_sm89": (),  # per N band: GEMM_TILE_RULES_BY_N
    "vllm_fp8_sm89": (),  # per N band: GEMM_TILE_RULES_BY_N
    # vllm-project/vllm csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm100_fp8_dispatch.cuh@85d7e255 (SM100
    # cutlass_scaled_mm, by mp2 = max(64, next_pow2(M))): M <= 64 64x64x256 tiles (1x8 clusters along N, not
    # separated); (64, 128] 128x128x64 and above 256x128x64 MMA tiles in 2x2 clusters, each MMA tile shared by
    # the two CTAs of a 2-SM pair along M (assumed: KernelScheduleAuto's choice for an even cluster M), so a
    # CTA covers 64 or 128 rows
    "vllm_fp8_sm100": ((64, 64, 64, 1, 256), (128, 64, 128, 2, 64), (0, 128, 128, 2, 64)),
}
"""A GEMM kernel's CTA tile per row count, as the engine's dispatch picks it: ``(max_rows, tile_m, tile_n,
cluster_m, tile_k)`` in order, the first whose ``max_rows`` covers M (0 = no limit). ``cluster_m`` CTAs
along M form a cluster, so the grid rounds M up to ``tile_m · cluster_m`` rows. "" = one config: the fit's
``tile_m × tile_n`` (and ``tile_k``), no clusters."""
GEMM_TILE_RULES_BY_N: dict[str, tuple[tuple[int, tuple[tuple[int, int, int, int, int], ...]], ...]] = {
    # sgl-project/sglang sgl-kernel/csrc/gemm/fp8_gemm_kernel.cu@350439a5 sm89_fp8_dispatch_shape (SM89
    # fp8_scaled_mm: CUTLASS 2.x GEMMs, no clusters, no split-K): the CTA tile by M and N bands (warp shapes
    # and stage counts, which also change between bands, are not separated here)
    "sgl_fp8_sm89": (
        (
            8192,
            (
                (16, 16, 64, 1, 128),
                (64, 32, 64, 1, 128),
                (128, 64, 64, 1, 128),
                (256, 128, 64, 1, 64),
                (0, 128, 128, 1, 64),
            ),
        ),
        (16384, ((64, 32, 64, 1, 128), (128, 64, 64, 1, 128), (256, 64, 128, 1, 64), (0, 128, 128, 1, 64))),
        (
            0,
            (
                (1, 32, 64, 1, 128),
                (64, 16, 64, 1, 128),
                (128, 32, 64, 1, 128),
                (256, 128, 64, 1, 128),
                (0, 128, 128, 1, 64),
            ),
        ),
    ),
    "vllm_fp8_sm89": (
        # vllm-project/vllm csrc/quantization/cutlass_w8a8/scaled_mm_c2x_sm89_fp8_dispatch.cuh@51cccd63
        # cutlass_gemm_sm89_fp8_dispatch (CUTLASS 2.x, by max(32, next_pow2(M)) and next_pow2(N); every main config
        # fits L40S's shared memory, so its fallback GEMM is not taken): CTA tiles per M band, per N band
        (
            4096,
            (
                (32, 32, 64, 1, 128),
                (64, 64, 64, 1, 128),
                (128, 64, 128, 1, 128),
                (256, 64, 128, 1, 128),
                (0, 128, 128, 1, 64),
            ),
        ),
        (
            8192,
            (
                (32, 32, 64, 1, 128),
                (64, 64, 64, 1, 128),
                (128, 64, 128, 1, 128),
                (256, 128, 128, 1, 64),
                (0, 256, 128, 1, 64),
            ),
        ),
        (
            16384,
            (
                (32, 32, 128, 1, 128),
                (64, 64, 128, 1, 128),
                (128, 128, 128, 1, 64),
                (256, 128, 128, 1, 64),
                (0, 128, 128, 1, 64),
            ),
        ),
        (
            0,
            (
                (32, 32, 64, 1, 128),
                (64, 64, 64, 1, 128),
                (128, 128, 64, 1, 128),
                (256, 128, 128, 1, 64),
                (0, 128, 128, 1, 64),
            ),
        ),
    ),
}
"""Rules whose tiles depend on N as well: ``(max_n, configs)`` bands in order, the first whose ``max_n`` covers
N (0 = no limit), each band's configs as in :data:`GEMM_TILE_RULES`."""
