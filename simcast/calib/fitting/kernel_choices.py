"""Which declared kernel choices each fit may take, read from the kernels' code: the tables keyed by system or
kernel op that ``simcast calibrate --from-db`` (:mod:`simcast.calib.fitting.from_db`) consults before fitting.

The rows of distinct key/value head sizes and the GEMM tile rules and L2 capacity form, each with the source that
fixes it. The choices keyed by engine (decode and prefill kernel rules and the attention fits' L2 capacity form
per system) are each engine's: ``decode_kernel_rules``, ``decode_fp8_single_block``, ``prefill_kernel_rules``,
``prefill_l2_edge`` and ``decode_l2_edge`` of its module (:mod:`simcast.engines.vllm`, :mod:`simcast.engines.sglang`,
:mod:`simcast.engines.trtllm`).
The fits themselves choose among the candidates on the fitting half.

The attention L2 capacity form (an engine's ``prefill_l2_edge`` / ``decode_l2_edge``): on L40S the tables' prefill
times jump several-fold where Q, K, V and O outgrow its 96 MB L2 (e.g. SGLang, 8 KV heads of 128, 64 requests:
58 us at 128 tokens each, 386 us at 256); decode (:attr:`simcast.core.kernel_fits.DecodeAttentionFit.l2_edge`):
the collector times each decode on a one-layer KV pool of the batch's own tokens, read again on every repeat
(ai-dynamo/aiconfigurator ``collector/sglang/collect_attn.py``@000b9280 ``run_attention_torch``:
``MHATokenToKVPool(size=batch·(input_len+1), layer_num=1)``), so a pool that fits in L2 is served from it. On
L40S (AD102's 96 MB L2, NVIDIA Ada architecture whitepaper, next to 864 GB/s GDDR6) the engines' tables run
at ~3.5 TB/s up to ~80 MiB of KV and ~0.7 TB/s past ~110 MiB; the smooth form spread that edge over two
decades (SGLang's and vLLM's L40S and A100 tables). TensorRT-LLM's L40S table shows the same edge (its collector,
``collector/trtllm/collect_attn.py``@095f58a5, also times one layer's pool, ``num_hidden_layers = 1``): there
the capacity form is a candidate with the declared split rules (``trtllm_xqa_mb``, ``trtllm_xqa_sb``), chosen
the same way.
"""

from __future__ import annotations

DIFF_KV_HEAD_DIM = 192
DIFF_KV_V_HEAD_DIM = 128
DIFF_KV_OPS = ("fa3",)
"""Decode rows of head size 192 in the FlashAttention-3 tables (SGLang's, and vLLM's proxy on H100/H200) are
fitted and scored as keys of 192 and values of 128 elements (column ``v_head_dim``;
:mod:`simcast.cost.kernels.diff_kv`):
the collector's only head-192 configuration is MiMo-V2-Flash's attention (ai-dynamo/aiconfigurator
``collector/cases/models/MiMoV2FlashForCausalLM_cases.yaml``@e23be5a7: ``head_dim: 192``, ``v_head_dim: 128``;
``collector/sglang/collect_attn.py`` accepts head 192 only under that contract), timed through SGLang's
separate K/V-head-size path. Their long-context times follow 192 + 128 bytes per token and their
short-context floor is ~16 us at batch 1 against ~9-11 us for heads 64-256 (h100_sxm sglang 0.5.14 table);
fitted as 192/192 rows they bent the fit for every other head size (held-out decode p90 ~26 %). The fit may
add ``diff_kv_launch_s`` to such launches (chosen by the optimiser on the fitting half, 0 allowed). Prefill
rows of that shape keep one head size (not refitted with this rule); other tables' head-192 rows (TensorRT-LLM,
Triton, FlashAttention-2) are not given the rule."""
GEMM_FAMILIES = ("bf16", "fp8", "fp8_block", "nvfp4")
GEMM_TILE_RULE_OF = {
    **{(s, "sglang_sgl_kernel_fp8_scaled_mm"): "sgl_fp8_sm90" for s in ("h100_sxm", "h200_sxm")},
    **{(s, "sglang_deepgemm_gemm_nt_f8f8bf16"): "deepgemm_sm90" for s in ("h100_sxm", "h200_sxm")},
    ("l40s", "sglang_sgl_kernel_fp8_scaled_mm"): "sgl_fp8_sm89",
    ("l40s", "CutlassFP8ScaledMMLinearKernel"): "vllm_fp8_sm89",
    **{(s, "CutlassFP8ScaledMMLinearKernel"): "vllm_fp8_sm100" for s in ("b200_sxm", "gb200")},
}
"""(system, kernel op) -> the kernel's declared tile rule (:data:`simcast.core.gemm_tiles.GEMM_TILE_RULES`):
on Hopper, sgl-kernel's CUTLASS fp8 GEMM switches its CTA tile by row count and DeepGEMM picks its block per
shape by its wave heuristic; on L40S (SM89) sgl-kernel's and vLLM's CUTLASS 2.x fp8 GEMMs switch it by M and N
bands; on B200 and GB200 (SM100) vLLM's CUTLASS fp8 GEMM by M. Other tables keep one tile (cuBLAS and
TensorRT-LLM's GEMMs are not declared here; the other Blackwell builds are not declared yet; B300 is
SM103, whose vLLM dispatch is not established here, and its table fits the SM100 rule worse: held-out p90 24.8
against 22.6 % with one grid on a 5000-row fitting sample)."""
GEMM_L2_EDGE = {"l40s", "b200_sxm", "b300_sxm", "gb200"}
"""Systems whose GEMM fits may take the capacity form of the L2 term (:attr:`simcast.core.kernel_fits.GemmFit.l2_edge`),
chosen on the fitting half: the collectors call several copies of a shape's operands in turn (ai-dynamo/aiconfigurator
``collector/sglang/collect_gemm.py``@2ec2c274 and ``collector/vllm/collect_gemm.py``@00e9bded: six, vLLM's fp8-block
one; ``collector/trtllm/collect_gemm.py``@00095909: up to five, enough to span the L2), so a call's operands stay in
L2 between repeats while the copies fit: on L40S (AD102's 96 MB L2, NVIDIA Ada architecture whitepaper, next to
864 GB/s GDDR6) SGLang's small-M bf16 GEMMs run at ~1.2-1.9 TB/s up to ~16 MiB of operands (96 MB / 6) and at
~0.65 TB/s past ~20 MiB, a step the smooth form spread over two decades. Hopper and A100 keep the smooth form
their fits were chosen with."""
